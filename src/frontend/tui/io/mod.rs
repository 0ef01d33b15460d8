//! The dashboard's IO, each piece on its own task with a time limit, so a slow or
//! unreachable API server never blocks drawing or input. Results go back to the UI loop
//! over a channel.

mod audit;
mod changes_loader;
mod contexts;
mod detail_loader;
mod freeze;
mod logs;
mod timeline_loader;
mod write;

pub use audit::{Audit, record as audit};
pub use changes_loader::load_changes;
pub use contexts::{kubeconfig_contexts, list_namespaces};
pub use detail_loader::{DetailTarget, Reachable, load_detail};
pub use freeze::{freeze, thaw};
pub use logs::stream_logs;
pub use timeline_loader::read_revision;
pub use write::{
    Expect, Late, LateOutcome, WriteError, act_on_stored, patch_values, send, send_flux,
};

use std::future::Future;
use std::time::Duration;

/// How long one request may take before the dashboard reports it as failed.
pub const LIMIT: Duration = Duration::from_secs(15);

async fn limited<T, E: std::fmt::Display>(
    f: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(LIMIT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(human(&e.to_string())),
        Err(_) => Err(format!(
            "no answer from the API server within {}s",
            LIMIT.as_secs()
        )),
    }
}

/// A transport failure said the way an operator needs it; API answers stay as they are.
pub(super) fn human(error: &str) -> String {
    if never_sent(error) {
        "the API server cannot be reached; nothing was changed (the dashboard keeps retrying)"
            .into()
    } else {
        error.to_string()
    }
}

/// A transport error that means the request never reached the API server.
pub(super) fn never_sent(error: &str) -> bool {
    [
        "Connect",
        "connection refused",
        "error trying to connect",
        "tcp connect",
    ]
    .iter()
    .any(|needle| error.contains(needle))
}

//! The tenancy policy an engine enforces ([`crate::tenancy`]): read before the engine may
//! take a lease, and kept current while it runs.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::client::Scope;
use crate::tenancy::{self, Policy};

/// How often the published policy is read again while the engine runs.
const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// The policy this engine must enforce, or why it cannot run: the published policy cannot
/// be read, it conflicts with the engine's flags, or it locks releases down to their
/// namespace's ServiceAccount and this identity may not impersonate them in `scope`.
pub(super) async fn in_force(
    client: &Client,
    flags: &Policy,
    scope: &Scope,
) -> Result<Policy, String> {
    let published = tenancy::read_published(client)
        .await
        .map_err(|e| e.to_string())?;
    let policy = Policy::combine(published.as_ref(), flags).map_err(|e| e.to_string())?;
    if policy.locked_down() {
        let (namespace, where_) = match scope {
            Scope::All => (None, "in every namespace".to_owned()),
            Scope::Namespace(ns) => (Some(ns.as_str()), format!("in namespace {ns}")),
        };
        if !tenancy::can_impersonate(client, namespace).await {
            return Err(format!(
                "the cluster is {}: every release acts as a ServiceAccount of its namespace, and this identity may not impersonate service accounts {where_}, so it does not run the engine (it would act with its own rights); the installed controller reconciles instead",
                policy.describe()
            ));
        }
    }
    Ok(policy)
}

/// Reads the published policy now and every [`REFRESH_EVERY`], and publishes the policy in
/// force (a cluster locked down while the engine runs is enforced from the next
/// reconcile). A read that fails keeps the last policy.
pub(super) async fn keep_current(
    client: Client,
    flags: Policy,
    policy: Arc<watch::Sender<Policy>>,
    stop: CancellationToken,
) {
    // The first read is at once: a read-only dashboard (which takes no lease) shows whom
    // releases act as from it.
    let mut every = tokio::time::interval(REFRESH_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        let read = tenancy::read_published(&client)
            .await
            .map_err(|e| e.to_string())
            .and_then(|p| Policy::combine(p.as_ref(), &flags).map_err(|e| e.to_string()));
        match read {
            Ok(now) => {
                failing = false;
                policy.send_if_modified(|p| {
                    let changed = *p != now;
                    if changed {
                        tracing::warn!(from = %p.describe(), to = %now.describe(), "the cluster's tenancy policy changed");
                        *p = now;
                    }
                    changed
                });
            }
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(error = %e, "cannot read the cluster's tenancy policy; keeping the last one");
            }
            Err(_) => {}
        }
    }
}

//! The Timeline view's rows, read on a task (see `crate::timeline::collect`).

use k8s_openapi::jiff::Timestamp;
use kube::Client;

use crate::client::Scope;
use crate::timeline::Change;

/// How far back the Timeline view reaches.
pub const TIMELINE_WINDOW: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Every change of the last [`TIMELINE_WINDOW`] in `scope`, newest first, or why not.
pub async fn load_timeline(client: Client, scope: Scope) -> Result<Vec<Change>, String> {
    let since = Timestamp::now()
        .checked_sub(TIMELINE_WINDOW)
        .unwrap_or(Timestamp::UNIX_EPOCH);
    crate::timeline::collect::changes(&client, &scope, since)
        .await
        .map_err(|e| e.to_string())
}

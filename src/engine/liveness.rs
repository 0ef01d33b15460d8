//! The API server's liveness: a hung server breaks no watch, so it is asked actively.

use kube::Client;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How often the API server is probed, and how long it may take to answer.
pub(super) const PROBE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// How often the API server's liveness is probed: with the 2 s limit, a server that
/// stops answering shows as disconnected within 3 s (the dashboard promises 5).
pub(super) const LIVENESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Asks the API server for its version every LIVENESS_EVERY, each answer within
/// PROBE_EVERY: `None` when it answered, else why not.
pub(super) fn liveness_probe(
    client: Client,
    stop: CancellationToken,
) -> mpsc::Receiver<Option<String>> {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(LIVENESS_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            let error = match tokio::time::timeout(PROBE_EVERY, client.apiserver_version()).await {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {}s", PROBE_EVERY.as_secs())),
            };
            if tx.send(error).await.is_err() {
                return;
            }
        }
    });
    rx
}

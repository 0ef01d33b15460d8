//! An expired freeze thaws by itself: the engine that holds the lease (a controller or a
//! dashboard) looks for frozen releases every [`EVERY`] and thaws each whose record has
//! passed its end, by the same rule and write as `wheelhouse thaw` (`freeze.rs`). The
//! state is the records in the cluster only, so a freeze survives restarts of every engine
//! and whichever engine leads next thaws it. A freeze kept with `--until-thawed` is left
//! alone and logged as overdue once per process.
//!
//! Which engine thaws which release: a wheelhouse HelmRelease is thawed by the engine that
//! covers it (its scope and shard); a Flux HelmRelease, which no shard label of ours
//! assigns, by the unsharded engine whose scope holds its namespace.

use std::collections::HashSet;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::ListParams;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::coverage::Coverage;
use super::freeze::{
    FROZEN_LABEL, FreezeDone, FreezeKind, FreezeRecord, Thawing, engine_recorder, thaw_object,
};
use super::lease::Role;
use super::vocabulary::ReleaseKey;

/// How often the leading engine looks: "within a few seconds of expiry". Each look is two
/// list calls filtered by the frozen label, answered from the API server's watch cache.
pub const EVERY: Duration = Duration::from_secs(2);

/// Runs until `stop`: while this process leads, thaws expired freezes in its coverage.
pub async fn run(
    client: Client,
    coverage: Coverage,
    identity: String,
    mut role: watch::Receiver<Role>,
    stop: CancellationToken,
) {
    let mut overdue_logged = HashSet::new();
    let recorder = engine_recorder(&client);
    let by = format!("the engine {identity} (the freeze's end)");
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            led = role.wait_for(|r| *r == Role::Leader) => if led.is_err() { return },
        }
        while *role.borrow() == Role::Leader {
            sweep(&client, &recorder, &by, &coverage, &mut overdue_logged).await;
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(EVERY) => {}
                changed = role.changed() => if changed.is_err() { return },
            }
        }
    }
}

/// One look: thaws every expired freeze this engine covers.
async fn sweep(
    client: &Client,
    recorder: &crate::cluster::events::Recorder,
    by: &str,
    coverage: &Coverage,
    overdue_logged: &mut HashSet<(ReleaseKey, Timestamp)>,
) {
    for kind in FreezeKind::ALL {
        let selector = match kind {
            FreezeKind::Wheelhouse => {
                format!("{FROZEN_LABEL}=true,{}", coverage.label_selector())
            }
            // Flux releases are the unsharded engine's.
            FreezeKind::Flux if coverage.shard.is_none() => format!("{FROZEN_LABEL}=true"),
            FreezeKind::Flux => continue,
        };
        let params = ListParams {
            label_selector: Some(selector),
            ..ListParams::default()
        }
        .match_any();
        let api = kind.api(client, &coverage.scope);
        let list = match tokio::time::timeout(EVERY * 5, api.list(&params)).await {
            Ok(Ok(list)) => list,
            // The cluster does not serve the kind (Flux is not installed).
            Ok(Err(kube::Error::Api(s))) if s.code == 404 => continue,
            Ok(Err(e)) => {
                tracing::debug!(kind = kind.word(), error = %e, "frozen releases not listed");
                continue;
            }
            Err(_) => continue,
        };
        let now = Timestamp::now();
        for obj in list.items {
            let key = ReleaseKey::of_meta(&obj.metadata);
            let Some(record) = FreezeRecord::of(&obj.metadata) else {
                continue;
            };
            if record.overdue(now) {
                if overdue_logged.insert((key.clone(), record.at)) {
                    tracing::warn!(
                        release = %key, kind = kind.word(), by = %record.by,
                        reason = %crate::text::escape::escape(&record.reason),
                        "freeze overdue: kept until someone thaws it"
                    );
                }
                continue;
            }
            if !record.expired(now) {
                continue;
            }
            let token = now.to_string();
            // Judged again on a fresh read after a conflict: a freeze renewed meanwhile
            // is not expired any more.
            let thawing = Thawing::by_engine(client, recorder, by, &token);
            match thaw_object(kind, &thawing, obj, |r| r.expired(Timestamp::now())).await {
                Ok(Some(FreezeDone::Thawed { resumed, note })) => tracing::info!(
                    release = %key, kind = kind.word(), resumed, %note,
                    frozen_by = %record.by, "freeze expired: thawed"
                ),
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    release = %key, kind = kind.word(), %error,
                    "freeze expired, but the thaw was not written; tried again shortly"
                ),
            }
        }
    }
}

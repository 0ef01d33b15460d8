//! An expired freeze thaws by itself: the engine that holds the lease (a controller or a
//! dashboard) looks for frozen releases every [`EVERY`] and thaws each whose record has
//! passed its end, by the same rule and write as `wheelhouse thaw` (`freeze.rs`). The
//! state is the records in the cluster only, so a freeze survives restarts of every engine
//! and whichever engine leads next thaws it. A freeze kept with `--until-thawed` is left
//! alone and logged as overdue once per process.
//!
//! The same look tells the configured channels (`webhooks/notify`, severity `freeze`) of
//! each freeze it has not seen and each thaw (a record gone): the leader only, and an
//! engine that starts to lead says nothing of the freezes it finds already in place.
//!
//! Which engine thaws which release: a wheelhouse HelmRelease is thawed by the engine that
//! covers it (its scope and shard); a Flux HelmRelease, which no shard label of ours
//! assigns, by the unsharded engine whose scope holds its namespace.

use std::collections::{HashMap, HashSet};
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
    notifier: crate::webhooks::notify::Notifier,
    stop: CancellationToken,
) {
    let mut overdue_logged = HashSet::new();
    let recorder = engine_recorder(&client, &identity);
    let by = format!("the engine {identity} (the freeze's end)");
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            led = role.wait_for(|r| *r == Role::Leader) => if led.is_err() { return },
        }
        // What this term has seen frozen: the first look only learns.
        let mut seen: Option<HashMap<(FreezeKind, ReleaseKey), Seen>> = None;
        while *role.borrow() == Role::Leader {
            let mut look = sweep(&client, &recorder, &by, &coverage, &mut overdue_logged).await;
            if let Some(before) = seen.take() {
                announce(&notifier, &before, &look);
                // A kind not listed this time keeps what was seen of it.
                for (key, kept) in before {
                    if !look.listed.contains(&key.0) {
                        look.frozen.entry(key).or_insert(kept);
                    }
                }
            }
            seen = Some(look.frozen);
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(EVERY) => {}
                changed = role.changed() => if changed.is_err() { return },
            }
        }
    }
}

/// What one look found: the frozen releases of each kind it could list.
struct Look {
    frozen: HashMap<(FreezeKind, ReleaseKey), Seen>,
    listed: HashSet<FreezeKind>,
}

/// A frozen release as one look found it.
struct Seen {
    record: FreezeRecord,
    meta: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
}

/// Tells each freeze found now that was not there before, and each that is gone. A kind
/// whose list failed this time is missing from `now` as a whole; its releases are told
/// only when the list answers again without them (a failed list is no thaw).
fn announce(
    notifier: &crate::webhooks::notify::Notifier,
    before: &HashMap<(FreezeKind, ReleaseKey), Seen>,
    look: &Look,
) {
    for (key, found) in &look.frozen {
        let r = &found.record;
        let new = before
            .get(key)
            .is_none_or(|b| (b.record.at, &b.record.by) != (r.at, &r.by));
        if new {
            let until = r.until.map_or_else(|| "-".to_owned(), |u| u.to_string());
            let kept = if r.until_thawed {
                ", then until thawed"
            } else {
                ""
            };
            notifier.freeze(
                &found.meta,
                true,
                format!("frozen by {} until {until}{kept}: {}", r.by, r.reason),
            );
        }
    }
    for (key, gone) in before {
        if look.listed.contains(&key.0) && !look.frozen.contains_key(key) {
            let r = &gone.record;
            notifier.freeze(
                &gone.meta,
                false,
                format!("thawed: the freeze by {} ({}) ended", r.by, r.reason),
            );
        }
    }
}

/// One look: thaws every expired freeze this engine covers, and says what is frozen
/// (the thawed ones left out).
async fn sweep(
    client: &Client,
    recorder: &crate::cluster::events::Recorder,
    by: &str,
    coverage: &Coverage,
    overdue_logged: &mut HashSet<(ReleaseKey, Timestamp)>,
) -> Look {
    let mut frozen = HashMap::new();
    let mut listed = HashSet::new();
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
        listed.insert(kind);
        let now = Timestamp::now();
        for obj in list.items {
            let key = ReleaseKey::of_meta(&obj.metadata);
            let Some(record) = FreezeRecord::of(&obj.metadata) else {
                continue;
            };
            frozen.insert(
                (kind, key.clone()),
                Seen {
                    record: record.clone(),
                    meta: obj.metadata.clone(),
                },
            );
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
                Ok(Some(FreezeDone::Thawed { resumed, note })) => {
                    tracing::info!(
                        release = %key, kind = kind.word(), resumed, %note,
                        frozen_by = %record.by, "freeze expired: thawed"
                    );
                    frozen.remove(&(kind, key.clone()));
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    release = %key, kind = kind.word(), %error,
                    "freeze expired, but the thaw was not written; tried again shortly"
                ),
            }
        }
    }
    Look { frozen, listed }
}

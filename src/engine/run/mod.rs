//! What a reconcile runs with, shared by the worker that drives it and the actions it
//! runs: the engine-wide [`Context`] and the [`Run`] of one reconcile (`context`), the
//! worker's [`Inbox`], which hooks and health checks keep reading (this file), the
//! desired state (`desired`), what wakes a worker (`triggers`), and the cancellable
//! health check (`health_check`). The engine's worker and its actions build on it; it
//! uses neither.

mod acting;
mod context;
mod desired;
mod health_check;
mod loaded_charts;
mod triggers;

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

pub use acting::Acting;
pub use context::{Context, Run};
pub use desired::{Candidate, PrepareError, Prepared, render, spec_values_label};
pub use health_check::{WaitEnd, Window};

pub(super) use context::note_seen;
pub(super) use desired::prepare;
pub(super) use triggers::{Trigger, new_token, values_source_events};

use super::vocabulary::Command;
use crate::api::{HelmRelease, HelmReleaseStatus};

/// How often a waiting or failed release's chart source is checked for a new desired
/// state: `chart.interval` when set, else the engine's short default (15 s).
pub fn source_poll(ctx: &Context, chart: &crate::api::ChartSpec) -> std::time::Duration {
    chart
        .interval
        .map_or(ctx.chart_poll, |d| d.as_std())
        .max(std::time::Duration::from_secs(1))
}

/// Whether `chart` comes from somewhere that can change under the same spec (a
/// repository, a registry, Git): only those are polled.
pub fn polls(chart: &crate::api::ChartSpec) -> bool {
    chart.repository.is_some() || chart.git.is_some()
}

/// What reaches a worker.
pub enum Msg {
    Updated(Arc<HelmRelease>),
    Deleted,
    /// A command from a front end in this process, with the token it wrote. Boxed: the
    /// mailbox of every worker (thousands) allocates room for a block of messages.
    Command(Box<(Command, String)>),
    /// The config tracker rolled one of the release's workloads: a change to record.
    ConfigRolled(Box<crate::api::ChangeRecord>),
}

/// The worker's mailbox, read between actions and during waits.
pub struct Inbox {
    pub(super) rx: crate::engine::mailbox::Receiver<Msg>,
    pub newest: Arc<HelmRelease>,
    pub deleted: bool,
    /// cancelWaitAt tokens handled by a direct command before the watch echoed them.
    pub(super) handled_cancel: Option<String>,
    /// The newer desired state that superseded the last wait, ready to apply.
    pub candidate: Option<Box<Candidate>>,
    /// With `candidate`: the urgent work that found it, carried to the reconcile that
    /// applies it (routine work keeps giving way until the fix's first object).
    pub carried_urgency: Option<crate::cluster::slots::UrgentWork>,
    /// With `candidate`: the superseded revision's record on its way to storage, written
    /// beside the next reconcile's guards rather than before them (see
    /// `worker::reconcile`).
    pub superseding: Option<Box<Superseding>>,
    /// The status this worker last computed. The worker is its only writer, and the
    /// watched object may not show our latest write yet, so this is what the next
    /// reconcile starts from.
    /// Shared with `changes` when they are equal (an idle release's worker would
    /// otherwise keep the same status three times: at 10,000 releases, tens of MB).
    pub(super) last_status: Option<Arc<HelmReleaseStatus>>,
    /// The digest of the status this worker last wrote (before its secrets were masked,
    /// as it is compared; see [`status_digest`]), so that writing it again can be skipped.
    written: Mutex<Option<[u8; 32]>>,
    /// The changes kept in status (`status.changes`) and the status they were last
    /// derived from (see [`crate::engine::change_log`]).
    changes: Mutex<ChangesSeen>,
    /// What the notifier was told of this release (from its status at the first write).
    notified: Mutex<Option<crate::webhooks::notify::ReleaseState>>,
    /// Reconciles in a row that ended in an error or a failure: the retry backs off.
    pub(super) failing: u32,
    /// Started while the term runs (a release relabelled into our shard, a namespace
    /// changing hands, a worker replaced): another engine may still be in a step on it,
    /// so the first reconcile waits for it to let go (see `worker::handover`).
    pub handover: bool,
    /// This engine's previous worker of the release, ended when cancelled: the new one
    /// starts after it (its step finishes first).
    pub predecessor: Option<CancellationToken>,
    /// The last reconcile was held up by the cluster (see `worker::Requeue::Blocked`).
    pub(super) blocked: bool,
    /// The valuesFrom source the last reconcile could not find: its appearing (or
    /// changing) starts the next one at once.
    pub(super) missing: Option<crate::helm::values::ValuesSourceRef>,
    /// Where the last reconcile found the release record that blocks this release's
    /// identity (ReleaseConflict): a change there starts the next one at once.
    pub(super) conflict: Option<crate::helm::release::Looked>,
    /// The last reconcile left the release failed, stalled or held: its source (chart
    /// and valuesFrom) is checked every [`source_poll`] for a new desired state, which is
    /// tried at once with fresh retries.
    pub(super) watch_source: bool,
    /// With `watch_source`: the valuesFrom objects the failed desired state was composed
    /// from, watched so that new data is looked at at once rather than at the next poll.
    pub(super) values_sources: Vec<crate::helm::values::ValuesSourceRef>,
    /// When the worker woke for the next reconcile: where an urgent run's timeline starts.
    pub woke_at: Option<std::time::Instant>,
    /// The next reconcile is urgent (a fix for a failed release, an operator's request):
    /// it takes the next render slot ahead of routine ones.
    pub urgent: bool,
    /// An Event on its way (see `Run::event_soon`).
    pub(super) pending_event: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Where this worker's reads of Helm's storage start (see `ReadFloor`).
    pub records_floor: crate::helm::release::ReadFloor,
    /// The last drift check that found the release clean, if nothing is known to have
    /// changed since (see `worker::drift`).
    pub clean_drift: Option<CleanDrift>,
    /// This reconcile came at its interval, not for a request, a change or a push: the
    /// only one whose drift check may rely on `clean_drift` (a watch may not have shown
    /// yet a change made just before a request).
    pub by_interval: bool,
    /// The last reconcile found the release in sync: what it planned on, so that an
    /// interval check finding all of it unchanged need not read the history again.
    pub settled: Option<Settled>,
    /// Held until the first reconcile ends, by a worker the term started with (see
    /// [`crate::engine::warmup`]).
    pub warmup: Option<Arc<crate::engine::warmup::Warmup>>,
}

/// What a reconcile that found a release in sync planned on (see `worker::unchanged`).
#[derive(Debug, Clone)]
pub struct Settled {
    /// The HelmRelease (its uid and generation).
    pub uid: Option<String>,
    pub generation: Option<i64>,
    /// The desired state's digest.
    pub desired: String,
    /// The records its history was read from.
    pub records: crate::helm::release::storage::Listed,
    /// The newest revision, deployed.
    pub version: i32,
}

/// A drift check that found every object of a revision as it renders.
pub struct CleanDrift {
    /// Where the engine's watches stood when the check started.
    pub since: u64,
    pub version: i32,
    /// The HelmRelease's generation (its ignore rules and drift mode).
    pub generation: Option<i64>,
    /// Records stored elsewhere that the check left out of the comparison.
    pub elsewhere: usize,
    pub objects: Vec<crate::engine::object_changes::ObjectKey>,
}

/// A superseded revision's record being written: the record as written, and the write.
impl Inbox {
    /// A change to keep in status at the next write (see `Run::note_changes`).
    pub fn note_change(&self, record: crate::api::ChangeRecord) {
        self.changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pending
            .push(record);
    }

    /// `status`, to keep as the last computed: the copy the change log keeps when it is
    /// the same (it usually is: the log was derived from this very status).
    pub fn shared_status(&self, status: &HelmReleaseStatus) -> Arc<HelmReleaseStatus> {
        let seen = self
            .changes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &seen.from {
            Some(from) if **from == *status => from.clone(),
            _ => Arc::new(status.clone()),
        }
    }
}

pub struct Superseding {
    pub record: crate::helm::release::Release,
    pub write: tokio::task::JoinHandle<Result<(), crate::helm::release::Error>>,
}

impl Inbox {
    pub fn new(rx: crate::engine::mailbox::Receiver<Msg>, hr: Arc<HelmRelease>) -> Self {
        Self {
            rx,
            newest: hr,
            deleted: false,
            handled_cancel: None,
            candidate: None,
            carried_urgency: None,
            superseding: None,
            last_status: None,
            written: Mutex::new(None),
            changes: Mutex::new(ChangesSeen::default()),
            notified: Mutex::new(None),
            failing: 0,
            handover: false,
            predecessor: None,
            blocked: false,
            missing: None,
            conflict: None,
            watch_source: false,
            values_sources: Vec::new(),
            woke_at: None,
            urgent: false,
            pending_event: Mutex::new(None),
            records_floor: Default::default(),
            clean_drift: None,
            by_interval: false,
            settled: None,
            warmup: None,
        }
    }
}

/// What [`Inbox`] keeps of a status it wrote: the SHA-256 of its JSON (the struct's
/// fields in their order, maps sorted), enough to tell the same status again.
/// Whether writing `b` over `a` would store the same: their JSON, where a `Time` keeps
/// whole seconds and a `MicroTime` microseconds, whatever precision either was computed
/// or read with (a custom resource's status keeps the times as their writer wrote them,
/// which is not always as this engine would).
pub(super) fn same_as_stored(a: &HelmReleaseStatus, b: &HelmReleaseStatus) -> bool {
    match (serde_json::to_vec(a), serde_json::to_vec(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

pub(super) fn status_digest(status: &HelmReleaseStatus) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let json = serde_json::to_vec(status).expect("a status serialises");
    Sha256::digest(json).into()
}

/// The changes a release's status keeps, as this worker last derived them.
#[derive(Default)]
struct ChangesSeen {
    /// None until first derived (then it starts from the status read).
    log: Option<Vec<crate::api::ChangeRecord>>,
    /// The status they were derived from last.
    from: Option<Arc<HelmReleaseStatus>>,
    /// Who set `spec.suspend` as it is now, when a suspend or resume is to be kept.
    suspend_by: Option<String>,
    /// Changes no status difference shows (the config tracker's rollouts), kept at the
    /// next status write.
    pending: Vec<crate::api::ChangeRecord>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::status::{self, Truth, condition, reason};

    /// A status computed now carries nanoseconds in its times; the one stored (and read
    /// back) has whole seconds. Compared as stored, the two are equal: an unchanged
    /// release's status is not sent again.
    #[test]
    fn a_status_compares_as_the_api_server_stores_it() {
        let mut computed = HelmReleaseStatus::default();
        status::set(
            &mut computed,
            condition::READY,
            Truth::True,
            reason::INSTALL_SUCCEEDED,
            "installed",
            Some(1),
        );
        let read_back: HelmReleaseStatus =
            serde_json::from_slice(&serde_json::to_vec(&computed).unwrap()).unwrap();
        let time = |s: &HelmReleaseStatus| s.conditions[0].last_transition_time.0;
        assert_ne!(
            time(&computed).subsec_nanosecond(),
            0,
            "computed with nanoseconds (a whole second now would make this test prove nothing)"
        );
        assert_ne!(computed, read_back);
        assert!(same_as_stored(&read_back, &computed));
        assert_eq!(status_digest(&computed), status_digest(&read_back));
        // Written by another hand with microseconds (as a custom resource keeps them),
        // read back with them: still the same once written.
        let mut by_hand = read_back.clone();
        by_hand.conditions[0].last_transition_time.0 = time(&computed);
        assert!(same_as_stored(&by_hand, &read_back));
        // A real change is one.
        let mut changed = read_back.clone();
        changed.conditions[0].message = "upgraded".into();
        assert!(!same_as_stored(&changed, &read_back));
    }
}

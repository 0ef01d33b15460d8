//! What a worker remembers between reconciles, in the part each phase owns: its
//! [`Inbox`] (messages, the newest HelmRelease), its [`Retry`] (backoff, urgency), the
//! [`Watches`] that wake a held-up release early, the [`Handoff`] one reconcile leaves
//! the next, the [`Cache`] that lets an interval check skip reads, and what it
//! [`Written`] to status.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::inbox::{Heard, Inbox, Msg};
use super::retry::Retry;
use super::{Candidate, Context};
use crate::api::{HelmRelease, HelmReleaseStatus};
use crate::engine::vocabulary::{Command, ReleaseKey};

pub struct Memory {
    pub inbox: Inbox,
    pub retry: Retry,
    pub watches: Watches,
    pub handoff: Handoff,
    pub cache: Cache,
    pub(in crate::engine) written: Written,
}

/// What wakes a failed, stalled or held-up release before its backoff ends. Set by the
/// worker when a reconcile ends (and by the guards for a conflict).
#[derive(Default)]
pub struct Watches {
    /// The last reconcile left the release failed, stalled or held: its source (chart
    /// and valuesFrom) is checked every [`super::source_poll`] for a new desired state,
    /// which is tried at once with fresh retries.
    pub(in crate::engine) watch_source: bool,
    /// With `watch_source`: the valuesFrom objects the failed desired state was composed
    /// from, watched so that new data is looked at at once rather than at the next poll.
    pub(in crate::engine) values_sources: Vec<crate::helm::values::ValuesSourceRef>,
    /// The valuesFrom source the last reconcile could not find: its appearing (or
    /// changing) starts the next one at once.
    pub(in crate::engine) missing: Option<crate::helm::values::ValuesSourceRef>,
    /// Where the last reconcile found the release record that blocks this release's
    /// identity (ReleaseConflict): a change there starts the next one at once.
    pub(in crate::engine) conflict: Option<crate::helm::release::Looked>,
}

impl Watches {
    /// After a reconcile whose Ready is not True (`held`) from a desired state composed
    /// of `sources`: what to watch until the next.
    pub(in crate::engine) fn after(
        &mut self,
        held: bool,
        sources: &[crate::helm::values::ValuesSourceRef],
    ) {
        self.watch_source = held;
        self.values_sources = if held { sources.to_vec() } else { Vec::new() };
    }
}

/// What one reconcile (or the engine starting a worker) hands the next.
#[derive(Default)]
pub struct Handoff {
    /// The newer desired state that superseded the last wait, ready to apply.
    pub candidate: Option<Box<Candidate>>,
    /// With `candidate`: the superseded revision's record on its way to storage, written
    /// beside the next reconcile's guards rather than before them.
    pub superseding: Option<Box<Superseding>>,
    /// Started while the term runs (a release relabelled into our shard, a namespace
    /// changing hands, a worker replaced): another engine may still be in a step on it,
    /// so the first reconcile waits for it to let go (see `worker::handover`).
    pub handover: bool,
    /// This engine's previous worker of the release, ended when cancelled: the new one
    /// starts after it (its step finishes first).
    pub predecessor: Option<CancellationToken>,
    /// Held until the first reconcile ends, by a worker the term started with (see
    /// [`crate::engine::warmup`]).
    pub warmup: Option<Arc<crate::engine::warmup::Warmup>>,
}

/// A superseded revision's record being written: the record as written, and the write.
pub struct Superseding {
    pub record: crate::helm::release::Release,
    pub write: tokio::task::JoinHandle<Result<(), crate::helm::release::Error>>,
}

/// What lets the next interval check skip reads, each valid while nothing it rests on
/// changed.
#[derive(Default)]
pub struct Cache {
    /// The last reconcile found the release in sync: what it planned on.
    pub settled: Option<Settled>,
    /// The last drift check that found the release clean (see `worker::drift`).
    pub clean_drift: Option<CleanDrift>,
    /// Where this worker's reads of Helm's storage start (see `ReadFloor`).
    pub records_floor: crate::helm::release::ReadFloor,
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

/// What the worker wrote to the release's status, and what it keeps for the next write.
/// Locked, not borrowed mutably: a reconcile's status writes come from `&Run`.
#[derive(Default)]
pub struct Written {
    /// The status this worker last computed. The worker is its only writer, and the
    /// watched object may not show our latest write yet, so this is what the next
    /// reconcile starts from. Shared with `changes` when they are equal (an idle
    /// release's worker would otherwise keep the same status three times: at 10,000
    /// releases, tens of MB).
    pub(in crate::engine) last_status: Option<Arc<HelmReleaseStatus>>,
    /// The digest of the status last written (before its secrets were masked, as it is
    /// compared; see [`super::status_digest`]), so that writing it again can be skipped.
    pub(in crate::engine) digest: Mutex<Option<[u8; 32]>>,
    /// The changes kept in status (`status.changes`) and the status they were last
    /// derived from (see [`crate::engine::change_log`]).
    pub(in crate::engine) changes: Mutex<ChangesSeen>,
    /// What the notifier was told of this release (from its status at the first write).
    pub(in crate::engine) notified: Mutex<Option<crate::webhooks::notify::ReleaseState>>,
    /// An Event on its way (see `Run::event_soon`).
    pub(in crate::engine) pending_event: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// The changes a release's status keeps, as this worker last derived them.
#[derive(Default)]
pub(in crate::engine) struct ChangesSeen {
    /// None until first derived (then it starts from the status read).
    pub(in crate::engine) log: Option<Vec<crate::api::ChangeRecord>>,
    /// The status they were derived from last.
    pub(in crate::engine) from: Option<Arc<HelmReleaseStatus>>,
    /// Who set `spec.suspend` as it is now, when a suspend or resume is to be kept.
    pub(in crate::engine) suspend_by: Option<String>,
    /// Changes no status difference shows (the config tracker's rollouts), kept at the
    /// next status write.
    pub(in crate::engine) pending: Vec<crate::api::ChangeRecord>,
}

impl Written {
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

impl Memory {
    pub fn new(rx: crate::engine::mailbox::Receiver<Msg>, hr: Arc<HelmRelease>) -> Self {
        Self {
            inbox: Inbox::new(rx, hr),
            retry: Retry::default(),
            watches: Watches::default(),
            handoff: Handoff::default(),
            cache: Cache::default(),
            written: Written::default(),
        }
    }

    /// Keeps what `msg` (as received; `None`: the mailbox closed) says of the release,
    /// and tells the phase that received it what it may have to act on. The one reader
    /// of the worker's messages: every phase that waits hands them here.
    pub fn absorb(&mut self, ctx: &Context, key: &ReleaseKey, msg: Option<Msg>) -> Heard {
        let inbox = &mut self.inbox;
        match msg {
            None => {
                inbox.closed = true;
                Heard::Closed
            }
            Some(Msg::Updated(hr)) => {
                let deleting = hr.metadata.deletion_timestamp.is_some()
                    && inbox.newest.metadata.deletion_timestamp.is_none();
                super::note_seen(ctx, key, &hr);
                inbox.newest = hr;
                Heard::Updated { deleting }
            }
            Some(Msg::Deleted) => {
                inbox.deleted = true;
                Heard::Deleted
            }
            Some(Msg::ConfigRolled(record)) => {
                self.written.note_change(*record);
                Heard::ConfigRolled
            }
            Some(Msg::Command(command)) => match *command {
                // The token may already have come through the watch (the annotation is
                // written before the command is sent), or come later: handled once.
                (Command::CancelWait(_), token) => {
                    inbox.handled_cancel = Some(token.clone());
                    Heard::CancelWait(token)
                }
                _ => {
                    inbox.requested = true;
                    Heard::Command
                }
            },
        }
    }
}

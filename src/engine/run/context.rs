//! What a worker sees of the world: the engine-wide [`Context`] all workers share, and
//! the [`Run`] of one reconcile, which the actions borrow.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::cluster::events::{Event, EventType, Recorder};
use kube::{Api, Client, Resource};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Heard, Memory};
use crate::api::{HelmRelease, HelmReleaseStatus};
use crate::engine::status::{self, reason};
use crate::engine::vocabulary::{LiveMap, LiveState, Phase, ReleaseKey, WaitView};
use crate::helm::release::{Release, Storage};
use crate::helm::render::Renderer;
use crate::helm::source::ChartSource;

/// Shared by all workers of one engine.
pub struct Context {
    /// The engine's own identity: watches, Lease, status, Events, health reads. Work done
    /// for a release goes through its [`super::Acting`] instead.
    pub client: Client,
    pub source: ChartSource,
    pub renderer: Arc<dyn Renderer>,
    pub recorder: Recorder,
    /// The tenancy policy in force (the cluster's published one with this engine's flags).
    pub policy: watch::Receiver<crate::cluster::tenancy::Policy>,
    /// The clients of each identity releases act as.
    pub(in crate::engine) identities: super::acting::Identities,
    /// This engine's identity, in a form valid as a label value.
    pub identity_label: String,
    /// This engine and its Lease, as release statuses name it (`acting`, `letGo`).
    pub engine: crate::api::EngineRef,
    pub metrics: crate::telemetry::Metrics,
    /// Watches shared by every running wait of this engine.
    pub watches: crate::health::WatchHub,
    /// Tells the on-call channel of failures, recoveries and cancellations (never waits).
    pub notifier: crate::webhooks::notify::Notifier,
    /// What config tracking's hashes are keyed with (the cluster's key, beside the Lease).
    pub hash_keys: crate::tracking::HashKeys,
    pub known: Known,
    pub signals: Signals,
    pub work: Work,
    pub settings: Settings,
}

/// What the engine has learned of the cluster, shared by every worker: it lets a
/// reconcile skip reads, and tells workers held up by the cluster when it heals.
#[derive(Default)]
pub struct Known {
    /// Every `group/version` a reconcile saw stale in discovery, for the watcher that
    /// tells when it heals: it may heal before that watcher's first look.
    pub stale_seen: Mutex<std::collections::BTreeSet<String>>,
    /// What the dispatcher's watch of Helm's storage records knows, by release name:
    /// answers the identity guard without a cluster-wide list when it can.
    pub records: crate::helm::release::RecordIndex,
    /// When each object of the kinds the dispatcher watches last changed: lets a drift
    /// check skip what nobody touched since it last found the release clean.
    pub objects: crate::engine::object_changes::ObjectChanges,
    /// Discovery reads shared by the renders that ask at once.
    discovery: crate::helm::render::SharedReads<crate::helm::render::Discovery>,
    /// Permissions the API server refused a reconcile, with the identity refused (none:
    /// the engine's), looked at again while a worker is held up by the cluster.
    pub refused: Mutex<
        std::collections::BTreeSet<(
            crate::cluster::tenancy::Identity,
            crate::cluster::rbac::Access,
        )>,
    >,
    /// ServiceAccounts releases act as that did not exist when last looked for: their
    /// creation lets those releases try again at once.
    pub missing_accounts: Mutex<std::collections::BTreeSet<(String, String)>>,
}

/// What workers hear from the engine and tell it.
pub struct Signals {
    /// Sent when the cluster heals (discovery whole again, the API server answering
    /// again, a refused permission granted), with what healed: workers held up by the
    /// cluster try again at once.
    pub healed: watch::Sender<crate::telemetry::RetryCause>,
    /// Pushes to chart sources a webhook receiver heard: every worker and running wait
    /// listens, and the releases whose chart they name look at once.
    pub pushed: tokio::sync::broadcast::Sender<Arc<crate::helm::source::pushed::Wake>>,
    /// What each worker is doing, for the front ends in this process.
    pub live: watch::Sender<LiveMap>,
    /// Cancelled when the whole engine stops (not when one worker does): what a worker
    /// would tidy for the engine's views on its way out is then moot.
    pub stopping: tokio_util::sync::CancellationToken,
}

/// How the engine's work is shared out between its workers.
pub struct Work {
    /// Slots for resolving and loading charts (as many as for rendering), urgent first.
    pub loads: crate::cluster::slots::Slots,
    /// Charts loaded from disk, by content digest, for the next reconcile of the same.
    pub charts: super::loaded_charts::LoadedCharts,
    /// Urgent work in flight, which routine renders and applies give way to.
    pub precedence: crate::cluster::slots::Precedence,
    /// Workers in their first reconcile at once (an engine starting over thousands).
    pub starts: Arc<tokio::sync::Semaphore>,
}

/// The engine's settings a reconcile reads.
pub struct Settings {
    /// Engine-wide switch: supersede waits by newer desired states (docs/design.md,
    /// "Opting out: wait until the timeout").
    pub cancel_on_new_revision: bool,
    /// How often a running wait asks a chart repository for a newer version.
    pub chart_poll: Duration,
    /// What a release's kubeConfig Secret may hold beyond the default (the engine's
    /// `--insecure-kubeconfig-exec`/`--insecure-kubeconfig-tls`).
    pub kubeconfig_allowances: crate::cluster::remote::Allowances,
}

/// Pushes a listener may fall behind by before it is told it lagged (and then looks
/// anyway).
const PUSHES_KEPT: usize = 256;

/// The most refused permissions remembered at once (others back off).
const MAX_REFUSED: usize = 32;

/// Workers whose first reconcile runs at once; the rest queue. Enough to keep the API
/// server and the render slots busy, few enough that an engine starting over 5,000
/// releases does not hold 5,000 reconciles and connections in memory at once.
const STARTS: usize = 32;

impl Context {
    pub fn new(
        client: Client,
        source: ChartSource,
        renderer: Arc<dyn Renderer>,
        recorder: Recorder,
        identity: &str,
        live: watch::Sender<LiveMap>,
    ) -> Self {
        Self {
            policy: watch::channel(crate::cluster::tenancy::Policy::default()).1,
            identities: Default::default(),
            watches: crate::health::WatchHub::new(client.clone()),
            hash_keys: crate::tracking::HashKeys::fixed(
                client.clone(),
                crate::tracking::HashKey::Unkeyed,
            ),
            client,
            source,
            renderer,
            recorder,
            identity_label: label_value(identity),
            engine: crate::api::EngineRef {
                identity: identity.to_owned(),
                lease: String::new(),
            },
            metrics: crate::telemetry::Metrics::new(),
            notifier: crate::webhooks::notify::Notifier::off(),
            known: Known::default(),
            signals: Signals {
                healed: watch::channel(crate::telemetry::RetryCause::ClusterHealed).0,
                pushed: tokio::sync::broadcast::channel(PUSHES_KEPT).0,
                live,
                stopping: Default::default(),
            },
            work: Work {
                loads: crate::cluster::slots::Slots::new(4),
                charts: Default::default(),
                precedence: crate::cluster::slots::Precedence::default(),
                starts: Arc::new(tokio::sync::Semaphore::new(STARTS)),
            },
            settings: Settings {
                cancel_on_new_revision: true,
                chart_poll: Duration::from_secs(15),
                kubeconfig_allowances: Default::default(),
            },
        }
    }
}
impl Context {
    /// The `group/version`s discovery cannot serve now (see
    /// [`crate::helm::render::discover`]), remembered for the healing watcher.
    pub async fn unavailable_groups(&self) -> Result<Vec<String>, crate::helm::render::Error> {
        Ok(self.discover().await?.unavailable)
    }

    /// Discovery now: what it cannot serve (remembered for the healing watcher) and its
    /// digest (for a renderer that keeps discovery between renders).
    pub async fn discover(
        &self,
    ) -> Result<crate::helm::render::Discovery, crate::helm::render::Error> {
        let discovery = self
            .known
            .discovery
            .get(|| crate::helm::render::discover(&self.client))
            .await?;
        if !discovery.unavailable.is_empty() {
            let mut seen = self
                .known
                .stale_seen
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            seen.extend(discovery.unavailable.iter().cloned());
        }
        Ok(discovery)
    }

    /// Remembers the permission a Forbidden `message` names, refused to `identity`, so
    /// its grant is noticed.
    pub fn note_refused(&self, identity: &crate::cluster::tenancy::Identity, message: &str) {
        if let Some(access) = crate::cluster::rbac::Access::refused_in(message) {
            // A refused impersonation is the engine's own permission, asked as the engine.
            let identity = if access.verb == "impersonate" {
                &crate::cluster::tenancy::Identity::Engine
            } else {
                identity
            };
            let mut refused = self.known.refused.lock().unwrap_or_else(|e| e.into_inner());
            // Each is asked about every second while a release is held up: a bound keeps
            // an engine refused everywhere from flooding the API server.
            if refused.len() < MAX_REFUSED {
                refused.insert((identity.clone(), access));
            }
        }
    }
}

/// `identity` as a label value: at most 63 of `[A-Za-z0-9-_.]`, alphanumeric at both ends.
fn label_value(identity: &str) -> String {
    let label: String = identity
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    label
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// Records that the worker of `key` took in `hr` (see [`LiveState::seen`]).
pub(in crate::engine) fn note_seen(ctx: &Context, key: &ReleaseKey, hr: &HelmRelease) {
    let version = hr.metadata.resource_version.clone();
    ctx.signals.live.send_if_modified(|m| {
        let entry = m.entry(key.clone()).or_default();
        let changed = entry.seen != version;
        entry.seen = version;
        changed
    });
}

/// What one reconcile needs to see of the world; the actions borrow it.
pub struct Run<'a> {
    pub ctx: &'a Context,
    /// Whom this reconcile acts as, and its clients: everything done for the release.
    pub acting: Arc<super::Acting>,
    pub hr: Arc<HelmRelease>,
    pub key: ReleaseKey,
    pub storage: Storage,
    pub status: HelmReleaseStatus,
    pub(in crate::engine) api: Api<HelmRelease>,
    pub(in crate::engine) memory: &'a mut Memory,
    pub(in crate::engine) stop: &'a CancellationToken,
    /// Where the release goes: settled before admission, completed by the guards.
    pub target: Target,
    /// The desired state this reconcile works towards: set by `prepare_desired`.
    pub intent: Intent,
    /// How this reconcile ranks against the others, and what it holds for that.
    pub precedence: Precedence,
    /// What the running action shows and leaves for the next step.
    pub trail: Trail,
}

/// Where one reconcile's release goes, and who else deploys it.
pub struct Target {
    pub release_name: String,
    /// The namespace the release's objects go to.
    pub namespace: String,
    /// Other records deploying this (release name, target namespace) from another storage
    /// namespace, as the guards found them: their objects are never this release's.
    pub elsewhere: Vec<crate::helm::release::Elsewhere>,
    /// Whether the records this run writes claim them for its HelmRelease (false when
    /// the engine acts for the helm CLI on a release no HelmRelease manages).
    pub claim: bool,
}

impl Target {
    pub(in crate::engine) fn of(hr: &HelmRelease) -> Self {
        Self {
            release_name: hr.release_name(),
            namespace: hr.target_namespace(),
            elsewhere: Vec::new(),
            claim: true,
        }
    }
}

/// The desired state one reconcile works towards, as far as the steps after
/// `prepare_desired` need it.
#[derive(Default)]
pub struct Intent {
    /// Its digest, and where its values came from.
    pub(in crate::engine) digest: String,
    pub(in crate::engine) sources: Vec<crate::helm::values::ValuesSourceRef>,
    /// Values that came from Secrets (valuesFrom, Secret objects of the manifest): masked
    /// in every message this reconcile writes to status, Events, Helm's storage or logs.
    pub masker: crate::helm::values::Masker,
}

/// How urgent one reconcile is, and the slots it holds because of it.
pub struct Precedence {
    /// This reconcile fixes a failed release, or answers an operator: its chart load and
    /// render go ahead of routine ones.
    pub priority: crate::cluster::slots::Priority,
    /// Held by urgent work until its first object is written: routine work gives way.
    pub urgent: Option<crate::cluster::slots::UrgentWork>,
    /// A worker's first reconcile holds one of the engine's start slots until it waits
    /// for health or ends (see `worker::run`).
    pub(in crate::engine) start_permit: Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
}

impl Precedence {
    pub(in crate::engine) fn routine(
        start_permit: Option<tokio::sync::OwnedSemaphorePermit>,
    ) -> Self {
        Self {
            priority: crate::cluster::slots::Priority::Routine,
            urgent: None,
            start_permit: Mutex::new(start_permit),
        }
    }
}

/// What the actions of one reconcile show while they run and leave for the steps after.
#[derive(Default)]
pub struct Trail {
    /// The phase and wait published to the engine's live view.
    pub(in crate::engine) live: Mutex<LiveState>,
    /// The steps of the desired state this reconcile applies, if it superseded a wait
    /// (for the trigger-to-fix metric and the live state).
    pub fix: Option<crate::engine::vocabulary::FixTimeline>,
    /// The revision an action last stored, as stored: what a superseded wait left, for
    /// the history recorded without reading it back.
    pub last_record: Option<crate::helm::release::Release>,
    /// What the engine will do if the action now running fails (`plan::if_it_fails`),
    /// shown with its wait.
    pub if_it_fails: Option<String>,
    /// The generations the last apply answered with, and the revision it applied: for
    /// that revision's wait, which then reads none.
    pub applied_generations: Option<(
        i32,
        std::collections::HashMap<crate::helm::apply::ObjectRef, Option<i64>>,
    )>,
}

impl Run<'_> {
    /// Records, before a step begins, that this engine acts on the release: an engine that
    /// takes it over later waits for this one to let go (see `worker::handover`).
    pub async fn record_acting(&mut self) {
        if self.status.acting.as_ref() != Some(&self.ctx.engine) {
            self.status.acting = Some(self.ctx.engine.clone());
            self.write_status().await;
        }
    }

    /// The release's stored revisions, newest first, as `status.history` shows them
    /// (`maxHistory` of them).
    pub fn record_history(&mut self, history: &[crate::helm::release::Release]) {
        let max = usize::try_from(self.hr.spec.max_history).unwrap_or(0);
        self.status.history =
            status::history(history, max, |r| crate::helm::values::digest(&r.config));
    }

    /// Remembers the permission a Forbidden `message` names, refused to this release's
    /// identity, so its grant is noticed.
    pub fn note_refused(&self, message: &str) {
        self.ctx.note_refused(&self.acting.identity, message);
    }

    pub fn set_phase(&self, phase: Phase) {
        if phase == Phase::Waiting {
            // A health wait may take minutes: it must not hold up other workers' start.
            self.precedence.start_permit.lock().unwrap().take();
        }
        let mut live = self.trail.live.lock().unwrap();
        live.phase = phase;
        if phase != Phase::Waiting {
            live.wait = None;
        }
        self.publish(&live);
    }

    /// Publishes the phase and wait; what the worker has seen and checked stays.
    pub(super) fn publish(&self, live: &LiveState) {
        let key = self.key.clone();
        self.ctx.signals.live.send_modify(|m| {
            let entry = m.entry(key).or_default();
            entry.phase = live.phase;
            entry.wait = live.wait.clone();
        });
    }

    /// Marks a step of the fix this reconcile applies (none: it superseded no wait).
    pub fn fix_step(&mut self, step: impl FnOnce(&mut crate::engine::vocabulary::FixTimeline)) {
        let Some(fix) = self.trail.fix.as_mut() else {
            return;
        };
        step(fix);
        let (key, fix) = (self.key.clone(), *fix);
        self.ctx
            .signals
            .live
            .send_modify(|m| m.entry(key).or_default().fix = Some(fix));
    }

    /// Runs the hooks of `event`, showing the one that runs in status.wait and in the
    /// live state (kind/name, event, elapsed, time left), so a long migration Job is
    /// visible. Hooks are never interrupted.
    pub(crate) async fn run_hooks(
        &mut self,
        hooks: &mut [crate::helm::release::Hook],
        revision: i32,
        event: &str,
        namespace: &str,
        timeout: Duration,
    ) -> Result<(), crate::helm::apply::Error> {
        // No hook of this event: nothing to run and nothing to show (no status write).
        if crate::helm::apply::execution_order(hooks, event).is_empty() {
            return Ok(());
        }
        let (tx, mut rx) = watch::channel(None);
        let acting = self.acting.clone();
        let run = acting
            .applier
            .run_hooks_reporting(hooks, event, namespace, timeout, Some(&tx));
        tokio::pin!(run);
        let mut running = None;
        loop {
            tokio::select! {
                result = &mut run => {
                    self.show_hook(revision, None).await;
                    return result;
                }
                Ok(()) = rx.changed() => {
                    running = rx.borrow_and_update().clone();
                    self.show_hook(revision, running.clone()).await;
                }
                // Read while the hook runs, so a deletion is told what it waits for;
                // whatever else arrives is kept for after the step.
                msg = self.memory.inbox.recv() => {
                    if let Heard::Updated { deleting: true } = self.memory.absorb(self.ctx, &self.key, msg) {
                        self.show_hook(revision, running.clone()).await;
                    }
                }
            }
        }
    }

    async fn show_hook(&self, revision: i32, running: Option<crate::helm::apply::RunningHook>) {
        {
            let mut live = self.trail.live.lock().unwrap();
            live.wait = running.as_ref().map(|h| WaitView {
                revision,
                started_at: h.started_at,
                deadline: h.deadline,
                progress: crate::health::Progress {
                    ready: 0,
                    total: 1,
                    pending: vec![(h.object.clone(), format!("{} hook running", h.event))],
                },
                if_it_fails: self.trail.if_it_fails.clone(),
            });
            self.publish(&live);
        }
        // Written as a copy: the status this reconcile keeps has no wait until a
        // health check runs, and its next write clears this one.
        let mut shown = self.status.clone();
        // The changes kept: this write replaces the whole status.
        shown.changes = self.note_changes();
        shown.wait = running.map(|h| crate::api::WaitStatus {
            revision,
            started_at: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(h.started_at),
            deadline: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(h.deadline),
            ready: 0,
            total: 1,
            hook: Some(format!("{} ({} hook)", h.object, h.event)),
            if_it_fails: self.trail.if_it_fails.clone(),
        });
        if let Some(hook) = shown.wait.as_ref().and_then(|w| w.hook.clone())
            && self
                .memory
                .inbox
                .newest
                .metadata
                .deletion_timestamp
                .is_some()
        {
            // Hooks are never interrupted: say what the deletion waits for.
            let message = format!(
                "deletion requested: waiting for the running hook {hook} to finish (a hook is never interrupted); then the release is uninstalled"
            );
            let verdict = status::Verdict::Reconciling {
                reason: reason::PROGRESSING,
                message: &message,
            };
            status::summarise(&mut shown, verdict, self.hr.metadata.generation);
        }
        let shown = self.intent.masker.masked(&shown);
        self.ctx.metrics.status_written();
        if let Err(e) = status::write(&self.api, &self.key.name, &shown).await {
            tracing::warn!(release = %self.key, error = %e, "cannot write status");
        }
    }

    /// Counts a trigger checked while waiting (see [`LiveState::checks`]).
    pub(super) fn note_check(&self) {
        let key = self.key.clone();
        self.ctx.signals.live.send_modify(|m| {
            let entry = m.entry(key).or_default();
            entry.checks = entry.checks.wrapping_add(1);
        });
    }

    /// The changes to keep in status: those kept so far, with what changed since the
    /// status they were last derived from (else the one read) joined to them.
    fn note_changes(&self) -> Vec<crate::api::ChangeRecord> {
        let mut seen = self.memory.written.changes.lock().unwrap();
        // Nothing new since they were last derived (every interval check of a release in
        // sync): the same log, without deriving it again.
        if seen.pending.is_empty()
            && let (Some(log), Some(from)) = (&seen.log, &seen.from)
            && **from == self.status
            && !crate::engine::change_log::suspension_changed(&self.hr, log)
        {
            return log.clone();
        }
        let observed = self.hr.status.as_ref();
        let log = seen
            .log
            .get_or_insert_with(|| observed.map(|s| s.changes.clone()).unwrap_or_default())
            .clone();
        let before = seen.from.as_deref().or(observed);
        let mut new = crate::engine::change_log::between(
            before,
            &self.status,
            &self.hr,
            &log,
            k8s_openapi::jiff::Timestamp::now(),
            seen.suspend_by.clone(),
        );
        // Newest first, as `between`'s.
        new.extend(seen.pending.drain(..).rev());
        let log = if new.is_empty() {
            log
        } else {
            crate::engine::change_log::kept(new, &log)
        };
        seen.log = Some(log.clone());
        if seen.from.as_deref() != Some(&self.status) {
            seen.from = Some(Arc::new(self.status.clone()));
        }
        log
    }

    /// Before a status that records a suspend or resume: who set `spec.suspend` (the
    /// engine's copy of the object has no managed fields, so they are read, once per
    /// change).
    pub(crate) async fn learn_who_suspended(&self) {
        let changed = {
            let seen = self.memory.written.changes.lock().unwrap();
            let log = seen.log.as_deref().unwrap_or_else(|| {
                self.hr
                    .status
                    .as_ref()
                    .map_or(&[][..], |s| s.changes.as_slice())
            });
            crate::engine::change_log::suspension_changed(&self.hr, log)
        };
        if !changed {
            return;
        }
        let by = match self.api.get_metadata(&self.key.name).await {
            Ok(meta) => crate::engine::change_log::suspend_setter(&meta.metadata),
            Err(e) => {
                tracing::debug!(release = %self.key, error = %e, "cannot read who suspended it");
                None
            }
        };
        self.memory.written.changes.lock().unwrap().suspend_by = by;
    }

    pub(crate) async fn write_status(&self) {
        // The status may say what an Event sent meanwhile tells: that Event goes first.
        self.event_sent().await;
        // A worker that starts on an unchanged release (every release, when an engine
        // starts) has nothing to write: the status it read is the one it would write. It
        // must also equal what this worker last wrote, since the object read may predate
        // that write.
        let written = *self.memory.written.digest.lock().unwrap();
        // No status at all reads as the empty one (which is what writing it would store).
        let observed = self.hr.status.as_ref();
        let mut status = self.status.clone();
        status.changes = self.note_changes();
        // Every string of it: condition messages, history descriptions, drift notes. It is
        // compared with the one read as both would be written (see `same_as_stored`): a
        // status compared with the nanoseconds it was computed with never equalled the one
        // read back, and every reconcile of an unchanged release wrote it again (a
        // thousand writes a minute on an idle engine at 10,000 releases, and one per
        // release at every restart).
        let shown = self.intent.masker.masked(&status);
        let unchanged =
            super::same_as_stored(observed.unwrap_or(&HelmReleaseStatus::default()), &shown)
                && written.is_none_or(|w| w == super::status_digest(&status));
        if unchanged {
            self.notify();
            return;
        }
        self.ctx.metrics.status_written();
        match status::write(&self.api, &self.key.name, &shown).await {
            Ok(()) => {
                *self.memory.written.digest.lock().unwrap() = Some(super::status_digest(&status));
                self.notify();
            }
            Err(e) => tracing::warn!(release = %self.key, error = %e, "cannot write status"),
        }
    }

    /// Tells the notifier the Ready condition now in the cluster; only a status that is
    /// there counts, so a restarted engine (starting from it) tells nothing twice. A
    /// superseded wait's status is told without being written (the fix's status follows
    /// at once): a restart cannot tell it twice, as it never reaches the cluster.
    pub(in crate::engine) fn notify(&self) {
        // A status told but not written (a superseded wait's) still keeps its change.
        self.note_changes();
        let mut told = self.memory.written.notified.lock().unwrap();
        let told = told.get_or_insert_with(|| {
            crate::webhooks::notify::ReleaseState::from_status(self.hr.status.as_ref())
        });
        self.ctx
            .notifier
            .status_written(told, &self.hr, &self.status, &self.intent.masker);
    }

    pub(crate) async fn event(&self, type_: EventType, reason: &str, action: &str, note: String) {
        self.event_sent().await;
        let (ev, reference) = self.event_of(type_, reason, action, &note);
        if let Err(e) = self.ctx.recorder.publish(&ev, &reference).await {
            tracing::debug!(release = %self.key, error = %e, "cannot publish event");
        }
    }

    /// Sends an Event while the worker goes on (to a newer desired state, on its critical
    /// path). The next status write or Event of this release waits for it, so Events keep
    /// their order and none is missing once the status says what it tells.
    pub(crate) fn event_soon(&self, type_: EventType, reason: &str, action: &str, note: String) {
        let (ev, reference) = self.event_of(type_, reason, action, &note);
        let recorder = self.ctx.recorder.clone();
        let key = self.key.clone();
        let before = self.memory.written.pending_event.lock().unwrap().take();
        let sending = tokio::spawn(crate::cluster::slots::carrying_mark(async move {
            if let Some(before) = before {
                let _ = before.await;
            }
            if let Err(e) = recorder.publish(&ev, &reference).await {
                tracing::debug!(release = %key, error = %e, "cannot publish event");
            }
        }));
        *self.memory.written.pending_event.lock().unwrap() = Some(sending);
    }

    /// Waits for the Event [`Run::event_soon`] sent, if one is still on its way.
    async fn event_sent(&self) {
        let sending = self.memory.written.pending_event.lock().unwrap().take();
        if let Some(sending) = sending {
            let _ = sending.await;
        }
    }

    fn event_of(
        &self,
        type_: EventType,
        reason: &str,
        action: &str,
        note: &str,
    ) -> (Event, k8s_openapi::api::core::v1::ObjectReference) {
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(self.intent.masker.mask(note)),
            action: action.into(),
            secondary: None,
        };
        (ev, self.hr.object_ref(&()))
    }

    /// Prunes the history to maxHistory once `deployed` is stored: `history` is what the
    /// action started from (read just before), so nothing is listed again.
    pub async fn prune_history(&self, history: &[Release], deployed: &Release) {
        let max = usize::try_from(self.hr.spec.max_history).unwrap_or(0);
        let revisions: Vec<(i32, crate::helm::release::Status)> = history
            .iter()
            .filter(|r| r.version != deployed.version)
            .chain([deployed])
            .map(|r| {
                (
                    r.version,
                    r.info.as_ref().map(|i| i.status).unwrap_or_default(),
                )
            })
            .collect();
        if let Err(e) = self
            .storage
            .prune_known(&self.target.release_name, &revisions, max)
            .await
        {
            tracing::warn!(release = %self.key, error = %e, "cannot prune Helm history");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_become_valid_label_values() {
        let long = "a".repeat(70);
        let cases: &[(&str, &str)] = &[
            ("host-1.example", "host-1.example"),
            ("host_1 pid:42", "host_1_pid_42"),
            ("-leading and trailing-", "leading_and_trailing"),
            ("::", ""),
            (&long, &long[..63]),
        ];
        for (identity, label) in cases {
            assert_eq!(label_value(identity), *label, "identity {identity:?}");
        }
    }
}

//! What front ends (the dashboard, the controller) see of the engine: a stream of
//! per-release views and a way to send commands. Commands are written to the cluster
//! (spec.suspend, annotations) so every front end and every other operator sees them;
//! when this process runs the engine it also acts on them at once.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::lease::Role;
use crate::api::{FIELD_MANAGER, HelmRelease, annotations};
use crate::health::Progress;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReleaseKey {
    pub namespace: String,
    pub name: String,
}

impl ReleaseKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    pub fn of(hr: &HelmRelease) -> Self {
        Self {
            namespace: hr.object_namespace(),
            name: hr.metadata.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for ReleaseKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a worker is doing right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    #[default]
    Idle,
    Resolving,
    Rendering,
    Installing,
    Upgrading,
    RunningHooks,
    Waiting,
    Testing,
    RollingBack,
    Uninstalling,
    Unlocking,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Idle => "idle",
            Self::Resolving => "resolving chart and values",
            Self::Rendering => "rendering",
            Self::Installing => "installing",
            Self::Upgrading => "upgrading",
            Self::RunningHooks => "running hooks",
            Self::Waiting => "waiting for resources",
            Self::Testing => "running tests",
            Self::RollingBack => "rolling back",
            Self::Uninstalling => "uninstalling",
            Self::Unlocking => "unlocking",
        })
    }
}

/// The health wait in progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitView {
    pub revision: i32,
    pub started_at: Timestamp,
    pub deadline: Timestamp,
    pub progress: Progress,
}

/// Live state a worker publishes beside what the HelmRelease's status holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveState {
    pub phase: Phase,
    pub wait: Option<WaitView>,
    /// The resourceVersion of the newest HelmRelease the worker has taken in: the sign
    /// that an update was handled, including one that called for nothing.
    pub seen: Option<String>,
    /// Triggers checked against the desired state while waiting (each ends in a
    /// superseded wait, a fix that cannot be prepared, or nothing new).
    pub checks: u32,
    /// The newest desired state that superseded a wait, or was tried urgently (a failed
    /// release's fix, an operator's request), step by step.
    pub fix: Option<FixTimeline>,
}

/// When each step towards a desired state that superseded a running wait, or was tried
/// urgently, happened (monotonic): what the time to recovery is made of (`tests/bench.sh mttr` prints it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixTimeline {
    /// The event that brought it reached the worker (a HelmRelease update, a values
    /// source change, a new chart version); for an urgent run, the worker waking for it.
    pub triggered: std::time::Instant,
    /// Chart resolved and values composed.
    pub prepared: std::time::Instant,
    /// Rendered (the wait is cancelled right after).
    pub rendered: std::time::Instant,
    /// Its revision stored as pending, and the apply begun.
    pub apply_started: Option<std::time::Instant>,
    /// Its first object written by the API server.
    pub first_written: Option<std::time::Instant>,
}

/// One release as a front end shows it.
#[derive(Debug, Clone)]
pub struct ReleaseView {
    pub key: ReleaseKey,
    pub release: Arc<HelmRelease>,
    pub live: LiveState,
    /// Set when the object cannot be read (its spec does not decode): `release` is then a
    /// stand-in with its metadata, and the engine leaves it alone.
    pub problem: Option<String>,
    /// Set when this engine's coverage leaves the release to another engine: which one.
    pub elsewhere: Option<String>,
}

impl ReleaseView {
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.release.condition(type_)
    }
}

/// Equal when a front end would show nothing different. The release object is compared
/// by identity, which is cheap: the watch hands over a new one for every change.
impl PartialEq for ReleaseView {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.release, &other.release)
            && self.live == other.live
            && self.problem == other.problem
            && self.elsewhere == other.elsewhere
    }
}

/// Every release the engine's watch sees, as a persistent map: a snapshot costs O(1) to
/// take, a change O(log n), and `diff` between two snapshots visits only what changed,
/// so a front end follows thousands of releases without rebuilding anything per event.
pub type ReleaseMap = imbl::OrdMap<ReleaseKey, ReleaseView>;

/// The keys whose entries differ between two snapshots of a persistent map (added,
/// changed or removed); `diff` skips the parts the snapshots share.
pub fn changed_keys<K, V>(old: &imbl::OrdMap<K, V>, new: &imbl::OrdMap<K, V>) -> Vec<K>
where
    K: Ord + Clone,
    V: Clone + PartialEq,
{
    old.diff(new)
        .map(|d| match d {
            imbl::ordmap::DiffItem::Add(k, _)
            | imbl::ordmap::DiffItem::Update { new: (k, _), .. }
            | imbl::ordmap::DiffItem::Remove(k, _) => k.clone(),
        })
        .collect()
}

/// What the workers are doing, per release; persistent for the same reasons.
pub type LiveMap = imbl::OrdMap<ReleaseKey, LiveState>;

/// A snapshot of the releases, and whether the watch's initial list has completed
/// (until then the releases are the first pages of it).
#[derive(Debug, Clone, Default)]
pub struct Views {
    releases: ReleaseMap,
    pub listed: bool,
}

impl Views {
    pub fn new(releases: ReleaseMap, listed: bool) -> Self {
        Self { releases, listed }
    }
}

impl std::ops::Deref for Views {
    type Target = ReleaseMap;
    fn deref(&self) -> &ReleaseMap {
        &self.releases
    }
}

impl std::ops::DerefMut for Views {
    fn deref_mut(&mut self) -> &mut ReleaseMap {
        &mut self.releases
    }
}

impl FromIterator<ReleaseView> for Views {
    /// A complete snapshot of the given views.
    fn from_iter<I: IntoIterator<Item = ReleaseView>>(views: I) -> Self {
        Self {
            releases: views.into_iter().map(|v| (v.key.clone(), v)).collect(),
            listed: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Suspend(ReleaseKey),
    Resume(ReleaseKey),
    Reconcile(ReleaseKey),
    CancelWait(ReleaseKey),
    /// Roll back to `revision` and keep the release there: suspends it and asks for the
    /// rollback in one write (a running wait is cancelled with it).
    Pin {
        key: ReleaseKey,
        revision: i32,
        /// Who asks, as status and Events name them.
        by: String,
    },
}

impl Command {
    pub fn key(&self) -> &ReleaseKey {
        match self {
            Self::Suspend(k) | Self::Resume(k) | Self::Reconcile(k) | Self::CancelWait(k) => k,
            Self::Pin { key, .. } => key,
        }
    }

    /// Whether `hr` shows this command, written with `token`: how a write whose answer
    /// never came is found to have landed after all.
    pub fn landed(&self, token: &str, hr: &HelmRelease) -> bool {
        let annotation = |key: &str| {
            hr.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(key))
                .is_some_and(|v| v == token)
        };
        match self {
            Self::Suspend(_) => hr.spec.suspend,
            Self::Resume(_) => !hr.spec.suspend,
            Self::Reconcile(_) => annotation(annotations::RECONCILE_REQUESTED_AT),
            Self::CancelWait(_) => annotation(annotations::CANCEL_WAIT_AT),
            Self::Pin { .. } => {
                hr.spec.suspend
                    && crate::api::RollbackRequest::of(hr)
                        .and_then(Result::ok)
                        .is_some_and(|r| r.requested_at == token)
            }
        }
    }
}

/// Whether the engine's watch of HelmReleases reaches the API server.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Connection {
    #[default]
    Connected,
    /// The watch fails since `since`; kube retries it with backoff. What is shown is the
    /// last known state.
    Disconnected { since: Timestamp, error: String },
}

/// A handle on a running engine (or on the cluster, when another process holds the
/// engine lease). Cheap to clone.
/// Hands pushes to an engine's releases (see [`EngineHandle::pusher`]).
#[derive(Clone)]
pub struct Pusher {
    tx: tokio::sync::broadcast::Sender<Arc<crate::source::pushed::Pushed>>,
    views: watch::Receiver<Arc<Views>>,
}

impl Pusher {
    /// Wakes every release whose chart `pushed` names; how many those are (0: none of
    /// this engine's releases comes from there, and nothing is woken).
    pub fn push(&self, pushed: crate::source::pushed::Pushed) -> usize {
        let named = self
            .views
            .borrow()
            .values()
            .filter(|v| v.problem.is_none() && pushed.names(&v.release.spec.chart))
            .count();
        if named > 0 {
            let _ = self.tx.send(Arc::new(pushed));
        }
        named
    }
}

#[derive(Clone)]
pub struct EngineHandle {
    /// Lets the Lease go at once (see `abandon`), and says when it has been.
    pub(super) lease_stop: CancellationToken,
    pub(super) lease_done: watch::Receiver<bool>,
    /// What actions run with: the stored-release actions run on it in the caller's task.
    pub(super) ctx: Arc<super::run::Context>,
    pub(super) client: Client,
    pub(super) views: watch::Receiver<Arc<Views>>,
    pub(super) live: watch::Receiver<LiveMap>,
    pub(super) role: watch::Receiver<Role>,
    pub(super) connection: watch::Receiver<Connection>,
    pub(super) direct: mpsc::UnboundedSender<(Command, String)>,
    pub(super) stop: CancellationToken,
    pub(super) coverage: super::Coverage,
    /// True while no worker of this engine runs (see `working`).
    pub(super) idle: watch::Receiver<bool>,
    /// True once a shut-down engine has finished: workers done, Lease handed back.
    pub(super) stopped: watch::Receiver<bool>,
    pub(super) tracker: watch::Receiver<Option<crate::tracking::TrackerHandle>>,
}

impl EngineHandle {
    /// For a process about to exit at once (the dashboard's `q`): stops the workers and
    /// lets the Lease go without waiting for their step to end, and returns once it is
    /// let go. The process exit then ends any step in flight, as a kill would: its
    /// revision stays pending for the next engine to unlock; the API calls it already
    /// sent are the only writes that can still land.
    pub async fn abandon(&self) {
        self.stop.cancel();
        self.lease_stop.cancel();
        let mut done = self.lease_done.clone();
        let _ = done.wait_for(|d| *d).await;
    }

    /// Rolls back or uninstalls a release no HelmRelease manages, as the helm CLI does,
    /// with this engine's action code; returns what Helm would print.
    pub async fn act_on_stored(
        &self,
        key: &ReleaseKey,
        action: super::stored::StoredAction,
    ) -> Result<String, String> {
        super::stored::act(&self.ctx, key, action, &self.stop).await
    }

    /// What applying `hr`'s spec would write, rendered by this engine's renderer; nothing
    /// is written (see [`super::preview`]).
    pub async fn preview(&self, hr: &HelmRelease) -> Result<super::preview::Preview, String> {
        super::preview::preview(&self.ctx, hr).await
    }

    /// How `hr`'s live objects differ from its newest revision now (for the dashboard).
    pub async fn drift(&self, hr: &HelmRelease) -> Result<super::drift::DriftView, String> {
        super::drift::view(&self.ctx, hr).await
    }

    /// What this engine reconciles (while it holds its Lease).
    pub fn coverage(&self) -> &super::Coverage {
        &self.coverage
    }

    /// Every release in scope, updated from watches.
    pub fn views(&self) -> watch::Receiver<Arc<Views>> {
        self.views.clone()
    }

    /// Whether the API server is reachable, as the HelmRelease watch sees it.
    pub fn connection(&self) -> watch::Receiver<Connection> {
        self.connection.clone()
    }

    /// Whether this process runs the engine, or who does.
    pub fn role(&self) -> watch::Receiver<Role> {
        self.role.clone()
    }

    /// What a webhook receiver hands the pushes it hears to.
    pub fn pusher(&self) -> Pusher {
        Pusher {
            tx: self.ctx.pushed.clone(),
            views: self.views.clone(),
        }
    }

    /// The tenancy policy this engine enforces (the cluster's, read when it took the
    /// lease and kept current since): whom each release acts as.
    pub fn policy(&self) -> crate::tenancy::Policy {
        self.ctx.policy()
    }

    /// Carries out a command: writes it to the cluster, and hands it to the local engine
    /// when this process runs it.
    pub async fn send(&self, command: Command) -> Result<(), kube::Error> {
        self.send_as(command, new_token()).await
    }

    /// [`EngineHandle::send`] with the token the caller chose, so a caller that never got
    /// an answer can still tell whether the write landed ([`Command::landed`]).
    pub async fn send_as(&self, command: Command, token: String) -> Result<(), kube::Error> {
        write_command(&self.client, &command, &token).await?;
        if *self.role.borrow() == Role::Leader {
            // The worker reacts now instead of after the watch round trip. A pin ends a
            // running wait at once, as the cancelWaitAt it writes does.
            if let Command::Pin { key, .. } = &command {
                let _ = self
                    .direct
                    .send((Command::CancelWait(key.clone()), token.clone()));
            }
            let _ = self.direct.send((command, token));
        }
        Ok(())
    }

    /// Stops the engine's workers and gives up the lease.
    /// Whether this engine's workers may act: from the start of a term (once the namespace
    /// engines' Leases were read and the views say which namespaces it leaves to them)
    /// until the workers of a term that ended have finished their step. Holding the Lease
    /// alone is not enough to act.
    pub fn working(&self) -> bool {
        !*self.idle.borrow()
    }

    pub fn shutdown(&self) {
        self.stop.cancel();
    }

    /// Waits until a shut-down engine has finished: its workers' steps done and its Lease
    /// released. A process that exits before this cuts the release short, and a standby
    /// then waits for the Lease to expire instead of taking over at once.
    pub async fn stopped(&self) {
        let mut stopped = self.stopped.clone();
        let _ = stopped.wait_for(|s| *s).await;
    }

    pub fn is_stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Live state of a release's worker in this process (empty for followers).
    /// The config tracker this engine runs while it holds its Lease (it tells what it has
    /// handled: see `TrackerHandle::caught_up`).
    pub fn tracker(&self) -> Option<crate::tracking::TrackerHandle> {
        self.tracker.borrow().clone()
    }

    pub fn live(&self) -> watch::Receiver<LiveMap> {
        self.live.clone()
    }
}

/// A new token for a command's annotation: the time, as Flux's `reconcile.fluxcd.io`
/// tokens are.
pub fn new_token() -> String {
    Timestamp::now().to_string()
}

/// Writes a command where every engine and operator sees it, with `token` as the value
/// of a reconcile or cancel-wait annotation.
pub async fn write_command(
    client: &Client,
    command: &Command,
    token: &str,
) -> Result<(), kube::Error> {
    let key = command.key();
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &key.namespace);
    let now = token;
    let patch = match command {
        Command::Suspend(_) => serde_json::json!({"spec": {"suspend": true}}),
        Command::Resume(_) => serde_json::json!({"spec": {"suspend": false}}),
        Command::Reconcile(_) => serde_json::json!({"metadata": {"annotations": {
            annotations::RECONCILE_REQUESTED_AT: now}}}),
        Command::CancelWait(_) => serde_json::json!({"metadata": {"annotations": {
            annotations::CANCEL_WAIT_AT: now}}}),
        Command::Pin { revision, by, .. } => {
            let request = crate::api::RollbackRequest {
                revision: *revision,
                requested_by: by.clone(),
                requested_at: now.to_owned(),
            };
            serde_json::json!({
                "spec": {"suspend": true},
                "metadata": {"annotations": {
                    annotations::ROLLBACK_TO: request.to_annotation(),
                    annotations::CANCEL_WAIT_AT: now,
                }},
            })
        }
    };
    api.patch(
        &key.name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PatchParams::default()
        },
        &Patch::Merge(patch),
    )
    .await?;
    Ok(())
}

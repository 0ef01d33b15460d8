//! The engine's vocabulary, below every part of it: release keys, phases, the live state
//! and views front ends show, and commands. Commands are written to the cluster
//! (spec.suspend, annotations) so every front end and every other operator sees them;
//! when this process runs the engine it also acts on them at once.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

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
        Self::of_meta(&hr.metadata)
    }

    /// From an object's metadata alone (one that may not decode as a HelmRelease): the
    /// same key [`ReleaseKey::of`] gives once it does.
    pub fn of_meta(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        Self {
            namespace: meta.namespace.clone().unwrap_or_else(|| "default".into()),
            name: meta.name.clone().unwrap_or_default(),
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
    /// What the engine will do if the wait fails (`WaitStatus::if_it_fails`).
    pub if_it_fails: Option<String>,
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

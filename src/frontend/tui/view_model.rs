//! What the views show, as plain data derived from the engine's views: one [`Row`] per
//! release, plus the on-demand detail data the IO tasks fetch. No IO here, and "now" is
//! always passed in, so the same input draws the same screen.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::api::conditions::{condition as conditions, reason as reasons};
use crate::api::flux::FluxHelmRelease;
use crate::engine::{Phase, ReleaseKey, ReleaseView};
use crate::frontend::inventory::chart_sources::{SourceChart, SourceKey};
use crate::frontend::inventory::{Kind, Stored};
use crate::frontend::tui::suspension::{self, Suspension};
use crate::health::readiness::Readiness;
use crate::health::replicas::{ReleaseId, ReleaseReplicas, ReplicaMap};

/// What Flux's chart sources say, by source (from the inventory).
pub type ChartSources = imbl::OrdMap<SourceKey, std::sync::Arc<SourceChart>>;
use crate::helm::release::Status;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    Failed,
    Progressing,
    Canceled,
    /// The cluster is not what the release says: live objects differ from its
    /// manifest, or another tool wrote its newest revision.
    Drifted,
    Unknown,
    Suspended,
    Ready,
}

impl State {
    /// Status never by colour alone: every state has a symbol and a word.
    pub fn symbol(self) -> &'static str {
        match self {
            Self::Ready => "✓",
            Self::Progressing => "◐",
            Self::Failed => "✗",
            Self::Suspended => "‖",
            Self::Canceled => "⊘",
            Self::Drifted => "≠",
            Self::Unknown => "?",
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Self::Ready => "Ready",
            Self::Progressing => "Progressing",
            Self::Failed => "Failed",
            Self::Suspended => "Suspended",
            Self::Canceled => "Canceled",
            Self::Drifted => "Drifted",
            Self::Unknown => "Unknown",
        }
    }
}

const SPINNER: [&str; 8] = ["⣾", "⣽", "⣻", "⢿", "⡿", "⣟", "⣯", "⣷"];

/// The spinner frame for a moment (four frames a second).
pub fn spinner(now: Timestamp) -> &'static str {
    let quarter = now.as_millisecond().div_euclid(250);
    SPINNER[quarter.rem_euclid(SPINNER.len() as i64) as usize]
}

/// A cluster of a fleet, by its kubeconfig context's name.
pub type Cluster = std::sync::Arc<str>;

/// A row of the table: which kind of object, and its namespace and name (a Flux or
/// wheelhouse HelmRelease's own; a stored release's storage namespace and release name),
/// and, in a fleet, the cluster it lives in when that is not the dashboard's own (the
/// current context's, whose session every view of a single cluster shows): `None` there.
/// Ordered by release first, so one release across the fleet sorts as adjacent rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    pub key: ReleaseKey,
    pub kind: Kind,
    pub cluster: Option<Cluster>,
}

impl RowKey {
    pub fn new(kind: Kind, key: ReleaseKey) -> Self {
        Self {
            key,
            kind,
            cluster: None,
        }
    }

    /// The same release in `cluster` (`None`: the dashboard's own).
    pub fn in_cluster(mut self, cluster: Option<&Cluster>) -> Self {
        self.cluster = cluster.cloned();
        self
    }

    pub fn wheelhouse(key: ReleaseKey) -> Self {
        Self::new(Kind::Wheelhouse, key)
    }
}

impl std::fmt::Display for RowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            Kind::Wheelhouse => write!(f, "{}", self.key)?,
            kind => write!(f, "{} ({kind})", self.key)?,
        }
        match &self.cluster {
            Some(c) => write!(f, " in {c}"),
            None => Ok(()),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: RowKey,
    /// The Helm release it shows (target namespace, release name), as the replica
    /// watches key it.
    pub release: ReleaseId,
    /// Whether the object is suspended (wheelhouse and Flux).
    pub suspended: bool,
    pub chart: String,
    pub version: String,
    pub revision: Option<i32>,
    pub state: State,
    pub phase: Phase,
    /// Deadline of the running wait, if any.
    pub deadline: Option<Timestamp>,
    /// Resources ready and in all of the running wait (the detail view's Wait line).
    pub wait_progress: Option<(usize, usize)>,
    /// What the engine will do if the running wait fails (the detail view's Then line).
    pub if_it_fails: Option<String>,
    /// Ready and desired replicas summed over the release's Deployments, StatefulSets
    /// and DaemonSets (the READY column); `None` when it has none.
    pub ready: Option<(i32, i32)>,
    pub last_change: Option<Timestamp>,
    pub message: String,
    /// Since when it is suspended, outside any freeze, when the cluster says: past
    /// [`suspension::FORGOTTEN_AFTER`] it is a forgotten suspend.
    pub suspended_since: Option<Timestamp>,
}

/// A frozen release's message starts with its freeze (who, until when, why), so the row
/// says why it is suspended and until when; a suspend outside any freeze says since when
/// and by whom, when the cluster says, and gives the time it is forgotten by.
fn suspension_note(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    suspension: Option<Suspension>,
    message: String,
) -> (String, Option<Timestamp>) {
    if let Some(r) = crate::engine::FreezeRecord::of(meta) {
        let until = r
            .until
            .map_or_else(|| "-".to_owned(), |u| u.strftime("%H:%M UTC").to_string());
        return (
            format!(
                "❄ frozen by {} until {until}: {} · {message}",
                r.by, r.reason
            ),
            None,
        );
    }
    match suspension {
        Some(s) if s.since.is_some() || s.by.is_some() => {
            let mut note = "⏸ suspended".to_owned();
            if let Some(since) = s.since {
                note.push_str(&format!(" since {}", since.strftime("%Y-%m-%d %H:%M UTC")));
            }
            if let Some(by) = &s.by {
                note.push_str(&format!(" by {by}"));
            }
            (format!("{note} · {message}"), s.since)
        }
        _ => (message, None),
    }
}

/// The Helm release a HelmRelease manages, as the replica watches key it.
pub fn release_id(view: &ReleaseView) -> ReleaseId {
    ReleaseId::new(view.release.target_namespace(), view.release.release_name())
}

/// The replicas of a release's workloads, if it has any.
pub fn replicas_of<'a>(view: &ReleaseView, map: &'a ReplicaMap) -> Option<&'a ReleaseReplicas> {
    map.get(&release_id(view))
        .filter(|r| !r.workloads.is_empty())
}

impl Row {
    /// A row with the replicas of the release's workloads from `replicas`.
    ///
    /// While a health wait runs, READY still shows replicas, not the wait's count of
    /// ready resources: one unit in the whole column is what an operator compares at a
    /// glance (as k9s and kubectl show it), it moves live as pods become ready, and the
    /// wait's own count stays on the detail view's Wait line beside what it waits for.
    pub fn with_replicas(view: &ReleaseView, replicas: &ReplicaMap) -> Self {
        let mut row = Self::of(view);
        row.ready = replicas_of(view, replicas).map(ReleaseReplicas::total);
        row
    }

    /// A Flux HelmRelease's row: its conditions as Flux's CLI reads them, its history,
    /// and the replicas of its release's workloads.
    pub fn of_flux(
        key: ReleaseKey,
        hr: &FluxHelmRelease,
        replicas: &ReplicaMap,
        sources: &ChartSources,
    ) -> Self {
        let status = hr.status.as_ref();
        let is_true = |t: &str| hr.condition(t).is_some_and(|c| c.status == "True");
        let ready = hr.condition(conditions::READY);
        let state = if hr.spec.suspend {
            State::Suspended
        } else if is_true("Reconciling") {
            State::Progressing
        } else if is_true("Stalled") {
            State::Failed
        } else {
            match ready {
                Some(c) if c.status == "True" => State::Ready,
                Some(c) if c.status == "Unknown" || c.reason.starts_with("Progressing") => {
                    State::Progressing
                }
                Some(_) => State::Failed,
                None => State::Unknown,
            }
        };
        let last = status.and_then(|s| s.history.first());
        let chart_spec = hr.spec.chart.as_ref().map(|c| &c.spec);
        let source = hr.spec.chart_ref.as_ref().and_then(|r| {
            sources.get(&SourceKey {
                kind: r.kind.clone(),
                namespace: r.namespace.clone().unwrap_or_else(|| key.namespace.clone()),
                name: r.name.clone(),
            })
        });
        let release = ReleaseId::new(hr.target_namespace(), hr.release_name());
        let mut message = ready.map(|c| c.message.clone()).unwrap_or_default();
        if hr.spec.suspend && message.is_empty() {
            message = "suspended".into();
        }
        let (message, suspended_since) =
            suspension_note(&hr.metadata, suspension::of_flux(hr), message);
        Self {
            id: RowKey::new(Kind::Flux, key),
            suspended_since,
            ready: replicas
                .get(&release)
                .filter(|r| !r.workloads.is_empty())
                .map(ReleaseReplicas::total),
            release,
            suspended: hr.spec.suspend,
            chart: last
                .map(|s| s.chart_name.clone())
                .or_else(|| chart_spec.map(|c| c.chart.clone()))
                .or_else(|| source.and_then(|s| s.chart.clone()))
                .or_else(|| {
                    hr.spec
                        .chart_ref
                        .as_ref()
                        .map(|r| format!("{}/{}", r.kind, r.name))
                })
                .unwrap_or_else(|| "-".into()),
            // Before anything is deployed: for a chartRef, the version its source last
            // fetched, else the one the controller last tried.
            version: last
                .map(|s| s.chart_version.clone())
                .or_else(|| chart_spec.and_then(|c| c.version.clone()))
                .or_else(|| source.and_then(|s| s.version.clone()))
                .or_else(|| status.and_then(|s| s.last_attempted_revision.clone()))
                .unwrap_or_else(|| "-".into()),
            revision: last.map(|s| s.version),
            state,
            phase: Phase::Idle,
            deadline: None,
            if_it_fails: None,
            wait_progress: None,
            last_change: ready.map(|c| c.last_transition_time.0),
            message,
        }
    }

    /// A release no HelmRelease manages, from its newest storage record, with the live
    /// readiness of its workloads by the engine's rules: a deployed release is Ready
    /// only when they are.
    pub fn of_stored(stored: &Stored, replicas: &ReplicaMap) -> Self {
        let release = ReleaseId::new(stored.target_namespace.clone(), stored.key.name.clone());
        let workloads = replicas.get(&release).filter(|r| !r.workloads.is_empty());
        let (state, message) = match stored.status {
            Status::Deployed => match workloads.map(ReleaseReplicas::readiness) {
                Some(Readiness::InProgress(why)) => (State::Progressing, why),
                Some(Readiness::Failed(why)) => (State::Failed, why),
                Some(Readiness::Ready) | None => (State::Ready, stored.description.clone()),
            },
            Status::Failed => (State::Failed, stored.description.clone()),
            Status::PendingInstall
            | Status::PendingUpgrade
            | Status::PendingRollback
            | Status::Uninstalling => (
                State::Progressing,
                format!("{}: {}", stored.status.as_str(), stored.description),
            ),
            Status::Uninstalled | Status::Superseded | Status::Unknown => (
                State::Unknown,
                format!("{}: {}", stored.status.as_str(), stored.description),
            ),
        };
        Self {
            id: RowKey::new(Kind::Helm, stored.key.clone()),
            ready: workloads.map(ReleaseReplicas::total),
            release,
            suspended: false,
            suspended_since: None,
            chart: if stored.chart.is_empty() {
                "-".into()
            } else {
                stored.chart.clone()
            },
            version: if stored.chart_version.is_empty() {
                "-".into()
            } else {
                stored.chart_version.clone()
            },
            revision: Some(stored.revision),
            state,
            phase: Phase::Idle,
            deadline: None,
            if_it_fails: None,
            wait_progress: None,
            last_change: stored.updated,
            message,
        }
    }

    /// A row without replica counts.
    pub fn of(view: &ReleaseView) -> Self {
        let hr = &view.release;
        let status = hr.status.as_ref();
        let ready = view.condition(conditions::READY);
        let reconciling = view
            .condition(conditions::RECONCILING)
            .is_some_and(|c| c.status == "True");
        let drifted = view
            .condition(conditions::DRIFTED)
            .filter(|c| c.status == "True");
        let state = if view.problem.is_some() {
            State::Failed
        } else if hr.spec.suspend {
            State::Suspended
        } else if view.live.phase != Phase::Idle || reconciling {
            State::Progressing
        } else {
            match ready {
                Some(c) if c.status == "True" && drifted.is_some() => State::Drifted,
                Some(c) if c.status == "True" => State::Ready,
                Some(c) if c.reason == reasons::EXTERNAL_REVISION => State::Drifted,
                Some(c) if c.reason == reasons::HEALTH_CHECK_CANCELED => State::Canceled,
                Some(c) if c.reason == reasons::PROGRESSING => State::Progressing,
                Some(c) if c.status == "False" => State::Failed,
                _ => State::Unknown,
            }
        };
        let last = status.and_then(|s| s.history.first());
        // A path or Git chart is named by its Chart.yaml: the newest revision's name, else
        // the directory's.
        let directory = |p: &str| {
            let p = p.trim_end_matches('/');
            p.rsplit('/').next().unwrap_or(p).to_owned()
        };
        let chart = hr.spec.chart.name.clone().or_else(|| {
            last.map(|s| s.chart_name.clone())
                .filter(|n| !n.is_empty())
                .or_else(|| hr.spec.chart.path.as_deref().map(directory))
                .or_else(|| {
                    let git = hr.spec.chart.git.as_ref()?;
                    Some(
                        directory(git.path.as_deref().unwrap_or(&git.url))
                            .trim_end_matches(".git")
                            .to_owned(),
                    )
                })
        });
        // status.wait is what the engine wrote last; it only says something while the
        // release is still progressing.
        let recorded = status
            .and_then(|s| s.wait.as_ref())
            .filter(|_| state == State::Progressing);
        let (deadline, wait_progress, if_it_fails) = match (&view.live.wait, recorded) {
            (Some(w), _) => (
                Some(w.deadline),
                Some((w.progress.ready, w.progress.total)),
                w.if_it_fails.clone(),
            ),
            (None, Some(w)) => (
                Some(w.deadline.0),
                Some((w.ready.max(0) as usize, w.total.max(0) as usize)),
                w.if_it_fails.clone(),
            ),
            (None, None) => (None, None, None),
        };
        let (message, suspended_since) = match &view.problem {
            Some(problem) => (problem.clone(), None),
            None => suspension_note(
                &hr.metadata,
                // A pin says why it is suspended itself (its revision, who pinned).
                suspension::of_wheelhouse(hr)
                    .filter(|_| hr.status.as_ref().is_none_or(|s| s.pinned.is_none())),
                match drifted {
                    Some(c) if state == State::Drifted => c.message.clone(),
                    _ => hr.ready_message(),
                },
            ),
        };
        Self {
            id: RowKey::wheelhouse(view.key.clone()),
            release: release_id(view),
            suspended: hr.spec.suspend,
            chart: chart.unwrap_or_else(|| "-".into()),
            version: last
                .map(|s| s.chart_version.clone())
                .or_else(|| hr.spec.chart.version.clone())
                .unwrap_or_else(|| "-".into()),
            // While a wait runs, the revision being rolled out (status.history gets it
            // only when the action ends).
            revision: view
                .live
                .wait
                .as_ref()
                .map(|w| w.revision)
                .or(recorded.map(|w| w.revision))
                .or(last.map(|s| s.version)),
            state,
            phase: view.live.phase,
            deadline,
            wait_progress,
            if_it_fails,
            ready: None,
            last_change: ready.map(|c| c.last_transition_time.0),
            message,
            suspended_since,
        }
    }

    /// What the state column says, e.g. "⣾ Progressing 4m12s".
    pub fn state_text(&self, now: Timestamp) -> String {
        match self.state {
            State::Progressing => {
                let left = self
                    .deadline
                    .map(|d| {
                        format!(
                            " {} left",
                            crate::text::age::precise(d.duration_since(now).as_secs().max(0))
                        )
                    })
                    .unwrap_or_default();
                format!("{} {}{left}", spinner(now), self.state.word())
            }
            s => format!("{} {}", s.symbol(), s.word()),
        }
    }

    pub fn ready_text(&self) -> String {
        self.ready
            .map_or_else(|| "-".into(), |(r, t)| format!("{r}/{t}"))
    }

    pub fn matches(&self, needle: &str) -> bool {
        if needle.is_empty() {
            return true;
        }
        let needle = needle.to_lowercase();
        [
            self.id.key.namespace.as_str(),
            self.id.key.name.as_str(),
            self.id.kind.word(),
            self.chart.as_str(),
            self.state.word(),
            self.message.as_str(),
        ]
        .iter()
        .any(|f| f.to_lowercase().contains(&needle))
    }
}

/// How long ago, to the second under two hours (`crate::text::age::precise`).
pub fn age(then: Timestamp, now: Timestamp) -> String {
    crate::text::age::precise(now.duration_since(then).as_secs().max(0))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortBy {
    #[default]
    Name,
    State,
    LastChange,
    Revision,
}

impl SortBy {
    pub fn next(self) -> Self {
        match self {
            Self::Name => Self::State,
            Self::State => Self::LastChange,
            Self::LastChange => Self::Revision,
            Self::Revision => Self::Name,
        }
    }

    /// The table's order: a total order (the release key breaks ties), so a changed
    /// row finds its place by binary search.
    pub fn compare(self, a: &Row, b: &Row, reverse: bool) -> std::cmp::Ordering {
        let by_key = || a.id.cmp(&b.id);
        let order = match self {
            Self::Name => by_key(),
            Self::State => a.state.cmp(&b.state).then_with(by_key),
            // Most recent first: that is what an operator scans for.
            Self::LastChange => b.last_change.cmp(&a.last_change).then_with(by_key),
            Self::Revision => b.revision.cmp(&a.revision).then_with(by_key),
        };
        if reverse { order.reverse() } else { order }
    }

    pub fn sort(self, rows: &mut [Row], reverse: bool) {
        rows.sort_by(|a, b| self.compare(a, b, reverse));
    }
}

/// Something fetched on demand for the detail view.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Fetch<T> {
    #[default]
    Loading,
    Loaded(T),
    Failed(String),
}

/// What the detail view fetches when it opens.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DetailData {
    /// The last Helm release's user values (YAML, Secret-looking keys masked) and
    /// manifest (Secret data masked).
    pub helm: Fetch<HelmData>,
    /// Every stored revision, newest first, as `helm history` lists them.
    pub revisions: Fetch<Vec<RevisionLine>>,
    pub events: Fetch<Vec<EventLine>>,
    pub workloads: Fetch<Vec<Workload>>,
    /// A remote release's (`spec.kubeConfig`): the context its records, workloads and
    /// logs are read in.
    pub read_in: Option<ReadIn>,
}

/// Where a remote release's records and workloads were read, as the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadIn {
    /// `None`: the dashboard's own cluster.
    pub cluster: Option<Cluster>,
    pub context: String,
    /// Where its kubeconfig comes from ("kubeConfig Secret apps/prod").
    pub via: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelmData {
    pub revision: i32,
    /// Helm's status of that revision (`pending-upgrade` while it rolls out).
    pub status: String,
    pub description: String,
    /// `name-version`, as `helm history` shows it.
    pub chart: String,
    pub values: String,
    pub manifest: String,
}

/// One stored revision, as `helm history` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevisionLine {
    pub revision: i32,
    pub updated: Option<Timestamp>,
    pub status: String,
    /// `name-version`.
    pub chart: String,
    pub app_version: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLine {
    pub age: Option<Timestamp>,
    pub kind: String,
    pub reason: String,
    pub message: String,
    pub count: i32,
}

/// Rollout progress of one workload of the release, with its pods that are not ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    pub object: String,
    pub desired: i32,
    pub updated: i32,
    pub ready: i32,
    pub available: i32,
    pub failing: Vec<(String, String)>,
    /// Pods held by the `wheelhouse.dev/config-pending` scheduling gate.
    pub held: usize,
    /// What config tracking looks after; `None` when the workload is not tracked.
    pub tracking: Option<crate::tracking::TrackedWorkload>,
}

pub use crate::helm::values::redact::{is_masked_kind, is_secret_key, mask_manifest, mask_values};

/// Validates an edited values draft: YAML whose top level is a mapping (empty means no
/// values). Returns the JSON value to patch, or the error to show.
pub fn parse_values(text: &str) -> Result<serde_json::Value, String> {
    if text.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    // Read as Helm reads values (YAML 1.1: `yes` is true, `0644` is 420).
    let mut documents = crate::text::yaml::parse_documents(text).map_err(|e| e.to_string())?;
    match documents.len() {
        0 => Ok(serde_json::Value::Object(Default::default())),
        1 if documents[0].is_object() => Ok(documents.swap_remove(0)),
        1 => Err("values must be a YAML mapping (key: value)".into()),
        _ => Err("values must be one YAML document (no `---`)".into()),
    }
}

/// Duration until `deadline`, never negative.
pub fn left(deadline: Timestamp, now: Timestamp) -> Duration {
    Duration::from_secs(deadline.duration_since(now).as_secs().max(0) as u64)
}

#[cfg(test)]
mod tests {

    #[test]
    fn edited_values_are_read_as_helm_reads_them() {
        assert_eq!(
            parse_values("enabled: no\nmode: 0644\n").unwrap(),
            serde_json::json!({"enabled": false, "mode": 420})
        );
        assert!(parse_values("- a\n").is_err());
        assert!(parse_values("a: 1\n---\nb: 2\n").is_err());
        assert_eq!(parse_values("  \n").unwrap(), serde_json::json!({}));
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn values_drafts_are_validated() {
        assert_eq!(
            parse_values("a: 1\nb: [x]\n").unwrap(),
            json!({"a": 1, "b": ["x"]})
        );
        assert_eq!(parse_values("  \n").unwrap(), json!({}));
        assert!(parse_values("a: [1\n").unwrap_err().contains("line"));
        assert!(parse_values("- 1\n").unwrap_err().contains("mapping"));
        // `key: null` is Helm's way to remove a chart default: kept, not dropped.
        assert_eq!(
            parse_values("a: null\nb: {c: ~}\n").unwrap(),
            json!({"a": null, "b": {"c": null}})
        );
    }

    /// A Flux release on a chartRef source: deployed, its chart and version are the ones
    /// recorded; before that, the source it names and the version last tried.
    #[test]
    fn a_flux_release_on_a_chart_ref_shows_its_chart_and_version() {
        let hr = |status: serde_json::Value| -> FluxHelmRelease {
            serde_json::from_value(json!({
                "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
                "metadata": {"name": "web", "namespace": "apps"},
                "spec": {"chartRef": {"kind": "OCIRepository", "name": "web-chart"}},
                "status": status,
            }))
            .unwrap()
        };
        let key = ReleaseKey::new("apps", "web");
        let replicas = ReplicaMap::default();
        let none = ChartSources::default();
        let trying = Row::of_flux(
            key.clone(),
            &hr(json!({"lastAttemptedRevision": "1.2.3+4c9e5dddd402"})),
            &replicas,
            &none,
        );
        assert_eq!(
            (trying.chart.as_str(), trying.version.as_str()),
            ("OCIRepository/web-chart", "1.2.3+4c9e5dddd402")
        );
        // With its source seen: the chart and the version the source last fetched.
        let mut sources = ChartSources::default();
        sources.insert(
            SourceKey {
                kind: "OCIRepository".into(),
                namespace: "apps".into(),
                name: "web-chart".into(),
            },
            std::sync::Arc::new(SourceChart {
                chart: Some("webapp".into()),
                version: Some("1.3.0".into()),
            }),
        );
        let sourced = Row::of_flux(key.clone(), &hr(json!({})), &replicas, &sources);
        assert_eq!(
            (sourced.chart.as_str(), sourced.version.as_str()),
            ("webapp", "1.3.0")
        );
        let deployed = Row::of_flux(
            key,
            &hr(
                json!({"lastAttemptedRevision": "1.2.3+4c9e5dddd402", "history": [
                {"name": "web", "namespace": "apps", "version": 1, "status": "deployed",
                 "chartName": "webapp", "chartVersion": "1.2.3+4c9e5dddd402"}]}),
            ),
            &replicas,
            &sources,
        );
        assert_eq!(
            (deployed.chart.as_str(), deployed.version.as_str()),
            ("webapp", "1.2.3+4c9e5dddd402")
        );
        assert_eq!(deployed.revision, Some(1));
    }

    /// Issue #12: an operator-cancelled wait reads Canceled until the next action, also
    /// once the engine has stalled (retries used up) and through requeues.
    #[test]
    fn a_canceled_wait_reads_canceled_until_the_next_action() {
        use crate::engine::LiveState;
        use crate::frontend::tui::demo;
        let canceled = |extra: serde_json::Value| {
            let mut hr = demo::release(
                "apps",
                "web",
                "webapp",
                Some(("False", "HealthCheckCanceled", "canceled by operator")),
                2,
                60,
            );
            let status = hr.status.as_mut().unwrap();
            for c in extra.as_array().unwrap() {
                status
                    .conditions
                    .push(serde_json::from_value(c.clone()).unwrap());
            }
            Row::of(&demo::view(hr, LiveState::default()))
        };
        let at = "2026-03-01T11:59:00Z";
        let stalled = serde_json::json!([{"type": "Stalled", "status": "True",
            "reason": "RetriesExceeded", "message": "no retries are left",
            "lastTransitionTime": at}]);
        let row = canceled(stalled);
        assert_eq!(row.state, State::Canceled);
        assert_eq!(row.state_text(demo::now()), "⊘ Canceled");
        assert_eq!(canceled(serde_json::json!([])).state, State::Canceled);
        // A new action: Reconciling=True makes it Progressing again.
        let acting = serde_json::json!([{"type": "Reconciling", "status": "True",
            "reason": "Progressing", "message": "upgrading", "lastTransitionTime": at}]);
        assert_eq!(canceled(acting).state, State::Progressing);
    }
}

//! Notifications to the on-call channel: failures, recoveries and cancellations of
//! releases, sent to webhooks (Slack, Microsoft Teams, a generic JSON receiver, Flux's
//! notification-controller).
//!
//! - What is sent when is a small state machine per release ([`ReleaseState`]), fed by
//!   the engine each time it writes a release's status: one message per change of
//!   state, never one per Kubernetes Event.
//! - Where it goes is a setting that lives in the cluster (`config.rs`): the ConfigMap
//!   `wheelhouse-notifications` in the engine's namespace, and the Secrets its providers
//!   name, watched so that a change applies without a restart (`settings.rs`).
//! - Delivery runs on tasks of its own fed by a bounded queue (`deliver.rs`), so a
//!   reconcile never waits on a webhook; each provider has its own queue and retries.
//! - Payloads are in `format.rs`.
//!
//! Webhook URLs are credentials: they are never logged, and errors are scrubbed of them
//! before they are.

mod address;
pub mod config;
mod deliver;
pub mod format;
mod settings;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use serde::Deserialize;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

pub use config::{Config, ConfigError, ProviderType};

use crate::api::conditions::{condition, reason};
use crate::api::{HelmRelease, HelmReleaseStatus};

/// What an event says about a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Ready became False with a failure (not a dependency wait, not progress).
    Failure,
    /// Ready became True after a failure was told.
    Recovery,
    /// A health-check wait was cancelled (superseded by a newer revision, or by an
    /// operator).
    Cancellation,
    /// The release is not what its HelmRelease says: another tool wrote its newest
    /// revision (`ExternalRevision`), or its objects drifted (found, or corrected).
    Drift,
    /// A change went well: an install, upgrade, rollback or uninstall succeeded. Sent
    /// only to routes that ask for it by name.
    Info,
    /// An incident freeze took the release, or a thaw let it go (`engine/freeze.rs`): sent
    /// by the engine that leads.
    Freeze,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Failure => "failure",
            Self::Recovery => "recovery",
            Self::Cancellation => "cancellation",
            Self::Drift => "drift",
            Self::Info => "info",
            Self::Freeze => "freeze",
        }
    }

    /// Flux's severity: `error` for what needs attention, `info` otherwise.
    pub fn flux_severity(self) -> &'static str {
        match self {
            Self::Recovery | Self::Info | Self::Freeze => "info",
            Self::Failure | Self::Cancellation | Self::Drift => "error",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "{key} of ConfigMap {configmap} is invalid: {reason}",
        key = config::KEY,
        configmap = config::CONFIGMAP
    )]
    InvalidConfig {
        #[source]
        reason: config::ConfigError,
    },
    #[error("cannot set up the notifications' HTTPS client: {0}")]
    Tls(String),
}

/// One message about one release. Its text comes from the release's status as the
/// engine wrote it, Secret values masked.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub severity: Severity,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: Option<String>,
    pub generation: Option<i64>,
    /// Ready's reason (`HealthCheckFailed`, `UpgradeSucceeded`, ...).
    pub reason: String,
    pub message: String,
    pub timestamp: Timestamp,
    /// The chart version last attempted (Flux's `revision`).
    pub chart_version: Option<String>,
    /// Digest of the merged values last attempted (Flux's `token`).
    pub config_digest: Option<String>,
    pub chart_name: Option<String>,
    pub app_version: Option<String>,
    /// The newest Helm revision.
    pub helm_revision: Option<i32>,
    /// The engine that sent it (its Lease identity).
    pub instance: String,
}

/// What the engine has told about one release: whether a failure was sent and no
/// recovery since, and the Ready condition (status, reason) as last written. Starts from
/// the status the release had, so an engine that restarts does not tell again what the
/// one before it told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReleaseState {
    failing: bool,
    ready: Option<(String, String)>,
    /// The Drifted condition (status, reason) as last written.
    drifted: Option<(String, String)>,
    /// The last change told as info: (what succeeded, its Helm revision).
    changed: Option<(&'static str, i32)>,
}

/// A change that succeeded, as [`ReleaseState::advance_change`] tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// `installed`, `upgraded`, `rolled back`, `uninstalled`.
    pub what: &'static str,
    pub revision: i32,
}

/// Ready reasons with status False that are no failure.
const NOT_FAILURES: [&str; 3] = [
    reason::DEPENDENCY_NOT_READY,
    reason::PROGRESSING,
    reason::HEALTH_CHECK_CANCELED,
];

impl ReleaseState {
    pub fn from_status(status: Option<&HelmReleaseStatus>) -> Self {
        let mut state = Self::default();
        state.advance(status.and_then(ready_of));
        state.advance_drift(status.and_then(drifted_of));
        if let Some(status) = status {
            state.advance_change(status);
        }
        state
    }

    /// A change that succeeded since the last status: the release Ready after an install
    /// or upgrade (the `Released` reason says which), or a remediation that rolled back or
    /// uninstalled (`Remediated`); each Helm revision told once.
    pub fn advance_change(&mut self, status: &HelmReleaseStatus) -> Option<Change> {
        let found = |type_: &str| status.conditions.iter().find(|c| c.type_ == type_);
        let revision = status.history.first().map(|s| s.version)?;
        let ready = found(condition::READY).is_some_and(|c| c.status == "True");
        let released = found(condition::RELEASED)
            .filter(|c| c.status == "True" && ready)
            .and_then(|c| match c.reason.as_str() {
                reason::INSTALL_SUCCEEDED => Some("installed"),
                reason::UPGRADE_SUCCEEDED => Some("upgraded"),
                reason::ROLLBACK_SUCCEEDED => Some("rolled back"),
                _ => None,
            });
        let remediated = found(condition::REMEDIATED)
            .filter(|c| c.status == "True")
            .and_then(|c| match c.reason.as_str() {
                reason::ROLLBACK_SUCCEEDED => Some("rolled back"),
                reason::UNINSTALL_SUCCEEDED => Some("uninstalled"),
                _ => None,
            });
        let what = remediated.or(released)?;
        if self.changed == Some((what, revision)) {
            return None;
        }
        // A remediation's revision told once, whatever Ready says of it later.
        if self.changed.is_some_and(|(_, told)| told == revision) {
            return None;
        }
        self.changed = Some((what, revision));
        Some(Change { what, revision })
    }

    /// Object drift found (Drifted=True) or corrected (reason DriftCorrected): told once
    /// per change, as drift.
    pub fn advance_drift(&mut self, drifted: Option<&Condition>) -> Option<Severity> {
        let now = drifted.map(|c| (c.status.clone(), c.reason.clone()));
        let before = std::mem::replace(&mut self.drifted, now.clone());
        let (status, why) = now?;
        let news = status == "True" || why == reason::DRIFT_CORRECTED;
        (news && before != self.drifted).then_some(Severity::Drift)
    }

    /// The event that a release whose Ready is now `ready` announces, if any.
    pub fn advance(&mut self, ready: Option<&Condition>) -> Option<Severity> {
        let now = ready.map(|c| (c.status.clone(), c.reason.clone()));
        let before = std::mem::replace(&mut self.ready, now.clone());
        let (status, why) = now?;
        match status.as_str() {
            "True" => std::mem::take(&mut self.failing).then_some(Severity::Recovery),
            "False" if why == reason::HEALTH_CHECK_CANCELED => {
                (before != self.ready).then_some(Severity::Cancellation)
            }
            "False" if why == reason::EXTERNAL_REVISION => {
                (before != self.ready).then_some(Severity::Drift)
            }
            "False" if !NOT_FAILURES.contains(&why.as_str()) && !self.failing => {
                self.failing = true;
                Some(Severity::Failure)
            }
            _ => None,
        }
    }
}

fn drifted_of(status: &HelmReleaseStatus) -> Option<&Condition> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == condition::DRIFTED)
}

fn ready_of(status: &HelmReleaseStatus) -> Option<&Condition> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == condition::READY)
}

/// Messages waiting for the router; past this, new ones are dropped (and counted).
const QUEUE: usize = 1024;

/// The engine's side: hands messages to the delivery tasks without ever waiting.
/// Cloning shares the queue.
#[derive(Clone)]
pub struct Notifier {
    queue: Option<mpsc::Sender<Notification>>,
    metrics: crate::telemetry::Metrics,
    identity: String,
    /// Set while messages are being dropped, so that is logged once per overflow.
    overflowing: Arc<AtomicBool>,
}

impl Default for Notifier {
    fn default() -> Self {
        Self::off()
    }
}

impl Notifier {
    /// A notifier that sends nothing (a read-only engine).
    pub fn off() -> Self {
        Self {
            queue: None,
            metrics: crate::telemetry::Metrics::new(),
            identity: String::new(),
            overflowing: Arc::default(),
        }
    }

    /// Tells what writing `status` (Ready's message masked with `masker`) for `hr`
    /// announces, given what was told before (`state`, advanced).
    pub fn status_written(
        &self,
        state: &mut ReleaseState,
        hr: &HelmRelease,
        status: &HelmReleaseStatus,
        masker: &crate::helm::values::Masker,
    ) {
        let ready = ready_of(status);
        if let Some(severity) = state.advance(ready)
            && let Some(ready) = ready
        {
            self.send(self.notification(severity, ready, hr, status, masker));
        }
        let drifted = drifted_of(status);
        if let Some(severity) = state.advance_drift(drifted)
            && let Some(drifted) = drifted
        {
            self.send(self.notification(severity, drifted, hr, status, masker));
        }
        if let Some(change) = state.advance_change(status) {
            self.send(self.change(change, hr, status));
        }
    }

    /// Tells that deleting `hr` uninstalled its release (no status follows: the object
    /// goes).
    pub fn uninstalled(&self, hr: &HelmRelease, status: &HelmReleaseStatus) {
        if let Some(revision) = status.history.first().map(|s| s.version) {
            let change = Change {
                what: "uninstalled",
                revision,
            };
            self.send(self.change(change, hr, status));
        }
    }

    /// A change that succeeded, as a message to route (info).
    fn change(&self, change: Change, hr: &HelmRelease, status: &HelmReleaseStatus) -> Notification {
        let snapshot = status.history.first();
        let chart = snapshot
            .map(|s| format!("{} {}", s.chart_name, s.chart_version))
            .unwrap_or_default();
        Notification {
            severity: Severity::Info,
            namespace: hr.metadata.namespace.clone().unwrap_or_default(),
            name: hr.metadata.name.clone().unwrap_or_default(),
            uid: hr.metadata.uid.clone().unwrap_or_default(),
            resource_version: hr.metadata.resource_version.clone(),
            generation: hr.metadata.generation,
            reason: match change.what {
                "installed" => reason::INSTALL_SUCCEEDED,
                "upgraded" => reason::UPGRADE_SUCCEEDED,
                "rolled back" => reason::ROLLBACK_SUCCEEDED,
                _ => reason::UNINSTALL_SUCCEEDED,
            }
            .to_owned(),
            message: format!(
                "Helm release {} {} (chart {chart}, revision {}) by wheelhouse ({})",
                hr.metadata.name.as_deref().unwrap_or_default(),
                change.what,
                change.revision,
                self.identity
            ),
            timestamp: Timestamp::now(),
            chart_version: snapshot.map(|s| s.chart_version.clone()),
            config_digest: status.last_attempted_config_digest.clone(),
            chart_name: snapshot.map(|s| s.chart_name.clone()),
            app_version: snapshot.and_then(|s| s.app_version.clone()),
            helm_revision: Some(change.revision),
            instance: self.identity.clone(),
        }
    }

    /// What `condition` (Ready, or Drifted) of `hr` says, as a message to route.
    fn notification(
        &self,
        severity: Severity,
        condition: &Condition,
        hr: &HelmRelease,
        status: &HelmReleaseStatus,
        masker: &crate::helm::values::Masker,
    ) -> Notification {
        let latest = status.history.first();
        Notification {
            severity,
            namespace: hr.metadata.namespace.clone().unwrap_or_default(),
            name: hr.metadata.name.clone().unwrap_or_default(),
            uid: hr.metadata.uid.clone().unwrap_or_default(),
            resource_version: hr.metadata.resource_version.clone(),
            generation: hr.metadata.generation,
            reason: condition.reason.clone(),
            message: masker.mask(&condition.message),
            timestamp: Timestamp::now(),
            chart_version: status.last_attempted_revision.clone(),
            config_digest: status.last_attempted_config_digest.clone(),
            chart_name: latest.map(|s| s.chart_name.clone()),
            app_version: latest.and_then(|s| s.app_version.clone()),
            helm_revision: latest.map(|s| s.version),
            instance: self.identity.clone(),
        }
    }

    /// Tells that an incident freeze took `meta`'s release (`frozen`), or a thaw let it
    /// go; `message` says who, why and until when.
    pub fn freeze(
        &self,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        frozen: bool,
        message: String,
    ) {
        self.send(Notification {
            severity: Severity::Freeze,
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone(),
            generation: meta.generation,
            reason: if frozen {
                reason::FROZEN
            } else {
                reason::THAWED
            }
            .to_owned(),
            message,
            timestamp: Timestamp::now(),
            chart_version: None,
            config_digest: None,
            chart_name: None,
            app_version: None,
            helm_revision: None,
            instance: self.identity.clone(),
        });
    }

    /// Queues `n` for delivery, or drops it when the queue is full: a reconcile never
    /// waits for a webhook.
    pub fn send(&self, n: Notification) {
        let Some(queue) = &self.queue else { return };
        tracing::debug!(release = %format!("{}/{}", n.namespace, n.name), event = n.severity.as_str(), "notification queued");
        match queue.try_send(n) {
            Ok(()) => self.overflowing.store(false, Ordering::Relaxed),
            Err(mpsc::error::TrySendError::Full(n)) => {
                self.metrics.notification_dropped("queue_full");
                if !self.overflowing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        release = %format!("{}/{}", n.namespace, n.name),
                        "notifications are dropped: {QUEUE} are waiting to be delivered (counted in wheelhouse_notifications_dropped_total)"
                    );
                }
            }
            // The delivery tasks ended with the engine.
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

/// Starts watching the setting in `namespace` and the delivery tasks; `identity` names
/// this engine in what it sends. The watches end with `stop`; delivery ends once every
/// [`Notifier`] is dropped and what was queued is done.
pub fn start(
    client: Client,
    namespace: &str,
    identity: &str,
    metrics: crate::telemetry::Metrics,
    stop: CancellationToken,
) -> Result<Notifier, Error> {
    let http = deliver::Http::new()?;
    let (settings_tx, settings_rx) = watch::channel(Arc::new(settings::Settings::default()));
    tokio::spawn(settings::watch(
        client,
        namespace.to_owned(),
        identity.to_owned(),
        settings_tx,
        stop,
    ));
    let (tx, rx) = mpsc::channel(QUEUE);
    tokio::spawn(deliver::route(rx, settings_rx, http, metrics.clone()));
    Ok(Notifier {
        queue: Some(tx),
        metrics,
        identity: identity.to_owned(),
        overflowing: Arc::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(status: &str, reason: &str) -> Condition {
        Condition {
            type_: condition::READY.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::now(),
            ),
        }
    }

    /// Feeds Ready conditions in order; returns what each announced.
    fn told(start: ReleaseState, steps: &[(&str, &str)]) -> Vec<Option<Severity>> {
        let mut state = start;
        steps
            .iter()
            .map(|(s, r)| state.advance(Some(&ready(s, r))))
            .collect()
    }

    use Severity::{Cancellation, Failure, Recovery};

    #[test]
    fn a_failure_is_told_once_and_its_recovery_once() {
        let steps = [
            ("Unknown", "Progressing"),
            ("False", "HealthCheckFailed"),
            ("Unknown", "Progressing"),
            ("False", "InstallFailed"),
            ("False", "RetriesExceeded"),
            ("False", "DependencyNotReady"),
            ("Unknown", "Progressing"),
            ("True", "InstallSucceeded"),
            ("True", "TestSucceeded"),
            ("Unknown", "Progressing"),
            ("True", "UpgradeSucceeded"),
            ("False", "UpgradeFailed"),
        ];
        assert_eq!(
            told(ReleaseState::default(), &steps),
            [
                None,
                Some(Failure),
                None,
                None,
                None,
                None,
                None,
                Some(Recovery),
                None,
                None,
                None,
                Some(Failure)
            ]
        );
    }

    #[test]
    fn waiting_and_progress_are_no_failure_and_success_without_failure_is_no_recovery() {
        let steps = [
            ("False", "DependencyNotReady"),
            ("Unknown", "Progressing"),
            ("False", "Progressing"),
            ("True", "InstallSucceeded"),
        ];
        assert_eq!(told(ReleaseState::default(), &steps), [None; 4]);
    }

    /// A status with these (type, status, reason) conditions and `revision` newest.
    fn status_of(revision: i32, conditions: &[(&str, &str, &str)]) -> HelmReleaseStatus {
        HelmReleaseStatus {
            conditions: conditions
                .iter()
                .map(|(t, s, r)| Condition {
                    type_: (*t).into(),
                    ..ready(s, r)
                })
                .collect(),
            history: vec![crate::api::Snapshot {
                version: revision,
                chart_name: "webapp".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn each_successful_change_is_told_once_as_info() {
        let ready_after = |revision, released: &str| {
            status_of(
                revision,
                &[("Ready", "True", released), ("Released", "True", released)],
            )
        };
        let mut state = ReleaseState::default();
        let installed = ready_after(1, "InstallSucceeded");
        assert_eq!(
            state.advance_change(&installed),
            Some(Change {
                what: "installed",
                revision: 1
            })
        );
        // Written again (a resync, tests after it): told already.
        assert_eq!(state.advance_change(&installed), None);
        // An upgrade in progress is no change yet; its success is.
        let upgrading = status_of(
            2,
            &[
                ("Ready", "Unknown", "Progressing"),
                ("Released", "True", "UpgradeSucceeded"),
            ],
        );
        assert_eq!(state.advance_change(&upgrading), None);
        assert_eq!(
            state.advance_change(&ready_after(2, "UpgradeSucceeded")),
            Some(Change {
                what: "upgraded",
                revision: 2
            })
        );
        // A failed upgrade rolled back: the rollback is a change that succeeded.
        let rolled_back = status_of(
            4,
            &[
                ("Ready", "False", "UpgradeFailed"),
                ("Released", "False", "UpgradeFailed"),
                ("Remediated", "True", "RollbackSucceeded"),
            ],
        );
        assert_eq!(
            state.advance_change(&rolled_back),
            Some(Change {
                what: "rolled back",
                revision: 4
            })
        );
        assert_eq!(state.advance_change(&rolled_back), None);
        // A restarted engine starts from the status: nothing told twice.
        let mut restarted = ReleaseState::from_status(Some(&rolled_back));
        assert_eq!(restarted.advance_change(&rolled_back), None);
    }

    #[test]
    fn a_revision_of_another_tool_is_told_once_as_drift() {
        let steps = [
            ("True", "UpgradeSucceeded"),
            ("False", "ExternalRevision"),
            ("False", "ExternalRevision"),
            ("True", "UpgradeSucceeded"),
        ];
        assert_eq!(
            told(ReleaseState::default(), &steps),
            [None, Some(Severity::Drift), None, None]
        );
    }

    #[test]
    fn object_drift_is_told_once_when_found_and_once_when_corrected() {
        let mut state = ReleaseState::default();
        let drifted = |s: &str, r: &str| Some(ready(s, r));
        let mut drifted_ = |s: &str, r: &str| {
            let c = drifted(s, r);
            state.advance_drift(c.as_ref())
        };
        assert_eq!(drifted_("True", "Drifted"), Some(Severity::Drift));
        assert_eq!(drifted_("True", "Drifted"), None);
        assert_eq!(drifted_("False", "DriftCorrected"), Some(Severity::Drift));
        let mut state = ReleaseState::default();
        assert_eq!(state.advance_drift(None), None);
    }

    #[test]
    fn each_cancelled_wait_is_told_and_is_no_failure() {
        let steps = [
            ("Unknown", "Progressing"),
            ("False", "HealthCheckCanceled"),
            // Written again unchanged (another status field moved): not a new one.
            ("False", "HealthCheckCanceled"),
            ("Unknown", "Progressing"),
            ("False", "HealthCheckCanceled"),
            ("True", "UpgradeSucceeded"),
        ];
        assert_eq!(
            told(ReleaseState::default(), &steps),
            [
                None,
                Some(Cancellation),
                None,
                None,
                Some(Cancellation),
                None
            ]
        );
    }

    #[test]
    fn the_persisted_status_is_where_a_restarted_engine_starts() {
        let mut failing = HelmReleaseStatus::default();
        failing
            .conditions
            .push(ready("False", reason::HEALTH_CHECK_FAILED));
        let state = ReleaseState::from_status(Some(&failing));
        // The engine before this one told the failure: it is not told again, but its
        // recovery is.
        assert_eq!(
            told(
                state.clone(),
                &[("False", "HealthCheckFailed"), ("True", "InstallSucceeded")]
            ),
            [None, Some(Recovery)]
        );
        let mut canceled = HelmReleaseStatus::default();
        canceled
            .conditions
            .push(ready("False", reason::HEALTH_CHECK_CANCELED));
        assert_eq!(
            told(
                ReleaseState::from_status(Some(&canceled)),
                &[("False", "HealthCheckCanceled")]
            ),
            [None]
        );
        assert_eq!(ReleaseState::from_status(None), ReleaseState::default());
        // No Ready condition at all announces nothing and forgets nothing.
        let mut s = state;
        assert_eq!(s.advance(None), None);
        assert_eq!(told(s, &[("True", "InstallSucceeded")]), [Some(Recovery)]);
    }

    fn release() -> HelmRelease {
        let mut hr: HelmRelease = crate::text::yaml::from_str(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: web, namespace: apps, uid: u-1, generation: 3}\nspec: {chart: {path: ./c}}",
        )
        .unwrap();
        hr.metadata.resource_version = Some("42".into());
        hr
    }

    #[tokio::test]
    async fn a_message_carries_the_masked_text_and_a_full_queue_drops_and_counts() {
        let (tx, mut rx) = mpsc::channel(1);
        let notifier = Notifier {
            queue: Some(tx),
            metrics: crate::telemetry::Metrics::new(),
            identity: "engine-1".into(),
            overflowing: Arc::default(),
        };
        let mut status = HelmReleaseStatus::default();
        let mut failed = ready("False", reason::HEALTH_CHECK_FAILED);
        failed.message = "pod web-1: password hunter22 refused".into();
        status.conditions.push(failed);
        status.last_attempted_revision = Some("1.2.3".into());
        let mut masker = crate::helm::values::Masker::default();
        masker.add_text("hunter22");
        let mut state = ReleaseState::default();
        notifier.status_written(&mut state, &release(), &status, &masker);
        let n = rx.try_recv().expect("a failure is queued");
        assert_eq!(n.severity, Failure);
        assert_eq!(n.message, "pod web-1: password *** refused");
        assert_eq!(
            (n.namespace.as_str(), n.name.as_str(), n.uid.as_str()),
            ("apps", "web", "u-1")
        );
        assert_eq!(n.chart_version.as_deref(), Some("1.2.3"));
        assert_eq!(n.instance, "engine-1");
        // Written again: nothing new to tell.
        notifier.status_written(&mut state, &release(), &status, &masker);
        assert!(rx.try_recv().is_err());

        // The queue holds one: the third of three is dropped and counted.
        for _ in 0..3 {
            notifier.send(n.clone());
        }
        let dropped = notifier
            .metrics
            .encode()
            .lines()
            .any(|l| l == r#"wheelhouse_notifications_dropped_total{reason="queue_full"} 2"#);
        assert!(dropped, "{}", notifier.metrics.encode());
        assert!(notifier.overflowing.load(Ordering::Relaxed));
        rx.try_recv().unwrap();
        notifier.send(n);
        assert!(
            !notifier.overflowing.load(Ordering::Relaxed),
            "a message that fits ends the overflow (the next one is logged again)"
        );
    }
}

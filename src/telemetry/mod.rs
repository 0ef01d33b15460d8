//! What a controller tells its operators about itself: Prometheus metrics ([`Metrics`])
//! and the HTTP endpoints that serve them with liveness and readiness ([`server`]).
//!
//! Names follow Flux where the meaning matches, so existing Flux dashboards and alerts
//! work: `gotk_reconcile_duration_seconds{kind, name, namespace}` and
//! controller-runtime's `controller_runtime_reconcile_total{controller, result}`. What
//! Flux has no counterpart for is `wheelhouse_*`: health-check waits, their
//! cancellations and fail-fast verdicts, the time from a trigger to its fix being
//! applied, the render queue, and notifications delivered and dropped.

pub mod server;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// `kind`, `name`, `namespace`: Flux's labels for a reconciled object.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabels {
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TriggerLabels {
    trigger: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabels {
    cause: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReceiverLabels {
    receiver: String,
    result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderTypeLabels {
    r#type: String,
}

/// What started a reconcile at once, before its backoff or interval ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryCause {
    /// The cluster healed: discovery whole again, the API server answering again.
    ClusterHealed,
    /// A permission the API server refused the engine was granted.
    AccessGranted,
    /// A valuesFrom source the release lacked appeared (or changed).
    ValuesSource,
    /// A Helm release record that blocked the release's identity changed (uninstalled,
    /// deleted, relabelled).
    ReleaseRecord,
}

impl RetryCause {
    pub fn label(self) -> &'static str {
        match self {
            Self::ClusterHealed => "cluster_healed",
            Self::AccessGranted => "access_granted",
            Self::ValuesSource => "values_source",
            Self::ReleaseRecord => "release_record",
        }
    }
}

/// How a reconcile ended, for `controller_runtime_reconcile_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Nothing failed (an action succeeded, or nothing was to do).
    Success,
    /// An action failed (install, upgrade, test, remediation): retried with back-off.
    Failure,
    /// The reconcile itself erred (the API, the chart source): retried with back-off.
    Error,
}

impl ReconcileResult {
    fn label(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
            Self::Error => "error",
        }
    }
}

/// Why a health-check wait was cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelTrigger {
    /// A newer desired state was ready to apply.
    NewRevision,
    /// An operator asked (`c` in the dashboard, `cancelWaitAt`).
    Operator,
    /// The HelmRelease was deleted or left this engine.
    Deleted,
}

impl CancelTrigger {
    fn label(self) -> &'static str {
        match self {
            Self::NewRevision => "new_revision",
            Self::Operator => "operator",
            Self::Deleted => "deleted",
        }
    }
}

/// Every metric of one engine. Cloning shares them.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    reconcile_duration: Family<ObjectLabels, Histogram>,
    reconciles: Family<ResultLabels, Counter>,
    wait_duration: Family<OutcomeLabels, Histogram>,
    cancellations: Family<TriggerLabels, Counter>,
    fail_fast: Family<ReasonLabels, Counter>,
    fix_applied: Histogram,
    /// Reconciles waiting for a render slot.
    pub queue_depth: Gauge,
    /// Reconciles running (a worker between start and end of one reconcile).
    pub in_flight: Gauge,
    cause_retries: Family<CauseLabels, Counter>,
    receiver_calls: Family<ReceiverLabels, Counter>,
    notifications_delivered: Family<ProviderTypeLabels, Counter>,
    notifications_dropped: Family<ReasonLabels, Counter>,
    drift_checks: Family<OutcomeLabels, Counter>,
    unchanged_checks: Counter,
    status_writes: Counter,
    /// Whether `gotk_reconcile_duration_seconds` keeps a series per release (see
    /// [`Metrics::unscraped`]).
    per_release: bool,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// 10 ms doubling to about 5.5 min: a render of milliseconds to a wait of minutes.
fn duration_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.01, 2.0, 16)
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconcile_duration = Family::<ObjectLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(duration_buckets())
        });
        registry.register(
            "gotk_reconcile_duration_seconds",
            "The duration in seconds of a HelmRelease reconcile (as Flux's)",
            reconcile_duration.clone(),
        );
        let reconciles = Family::<ResultLabels, Counter>::default();
        registry.register(
            "controller_runtime_reconcile",
            "Reconciles by result (success, failure of an action, error)",
            reconciles.clone(),
        );
        let wait_duration = Family::<OutcomeLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(duration_buckets())
        });
        registry.register(
            "wheelhouse_wait_duration_seconds",
            "Health-check waits by how they ended (ready, failed, timeout, canceled, stopped)",
            wait_duration.clone(),
        );
        let cancellations = Family::<TriggerLabels, Counter>::default();
        registry.register(
            "wheelhouse_wait_cancellations",
            "Health-check waits cancelled, by trigger (new_revision, operator, deleted)",
            cancellations.clone(),
        );
        let fail_fast = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "wheelhouse_fail_fast",
            "Waits ended early because they could no longer succeed, by pod reason",
            fail_fast.clone(),
        );
        let fix_applied = Histogram::new(duration_buckets());
        registry.register(
            "wheelhouse_trigger_to_fix_applied_seconds",
            "From the event that superseded a running wait to the start of the new apply",
            fix_applied.clone(),
        );
        let queue_depth = Gauge::default();
        registry.register(
            "wheelhouse_queue_depth",
            "Reconciles waiting for a render slot (--concurrent)",
            queue_depth.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "wheelhouse_reconciles_in_flight",
            "Reconciles running now",
            in_flight.clone(),
        );
        let cause_retries = Family::<CauseLabels, Counter>::default();
        registry.register(
            "wheelhouse_cause_retries",
            "Failed reconciles tried again at once because their cause cleared (cluster_healed, access_granted, values_source, release_record), before their backoff ran out",
            cause_retries.clone(),
        );
        let notifications_delivered = Family::<ProviderTypeLabels, Counter>::default();
        registry.register(
            "wheelhouse_notifications_delivered",
            "Notifications a webhook accepted, by provider type (slack, msteams, generic, flux)",
            notifications_delivered.clone(),
        );
        let notifications_dropped = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "wheelhouse_notifications_dropped",
            "Notifications not delivered, by reason (queue_full, provider_queue_full, undelivered: attempts used up, refused: a 4xx answer, provider_removed)",
            notifications_dropped.clone(),
        );
        let receiver_calls = Family::<ReceiverLabels, Counter>::default();
        registry.register(
            "wheelhouse_receiver_calls",
            "Webhook receiver calls, by receiver and result (woke, ignored, unauthorized, malformed, unknown_source, too_large, rate_limited, refused, not_found)",
            receiver_calls.clone(),
        );
        let drift_checks = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "wheelhouse_drift_checks",
            "Drift checks of releases found in sync, by result (compared: the live objects were read and dry-run applied; unchanged: none of them changed since a check found them clean, nothing read)",
            drift_checks.clone(),
        );
        let unchanged_checks = Counter::default();
        registry.register(
            "wheelhouse_unchanged_checks",
            "Interval checks that found a release as its last reconcile planned it (HelmRelease, Helm's records, desired state and watched objects unchanged) and so read no history",
            unchanged_checks.clone(),
        );
        let status_writes = Counter::default();
        registry.register(
            "wheelhouse_status_writes",
            "HelmRelease status writes sent (a reconcile whose status is the one already stored sends none)",
            status_writes.clone(),
        );
        // Process-wide: every renderer of this process counts its helper's faults there.
        registry.register(
            "wheelhouse_render_helper_restarts",
            "Render helpers replaced, by cause (exited: it died or was killed; hung: a render timed out; garbage: it wrote what is not an answer); the renders they held were tried again on the new one",
            crate::helm::render::helper_restarts().clone(),
        );
        Self {
            registry: Arc::new(registry),
            receiver_calls,
            cause_retries,
            notifications_delivered,
            notifications_dropped,
            drift_checks,
            unchanged_checks,
            status_writes,
            reconcile_duration,
            reconciles,
            wait_duration,
            cancellations,
            fail_fast,
            fix_applied,
            queue_depth,
            in_flight,
            per_release: true,
        }
    }

    /// For an engine whose metrics nothing scrapes (the dashboard's, which serves no
    /// `/metrics`): no series per release, whose histograms would only hold memory
    /// (5 MB at 10,000 releases by `heaptrack`).
    pub fn unscraped() -> Self {
        Self {
            per_release: false,
            ..Self::new()
        }
    }

    pub fn reconciled(&self, namespace: &str, name: &str, took: Duration, result: ReconcileResult) {
        if self.per_release {
            self.reconcile_duration
                .get_or_create(&ObjectLabels {
                    kind: crate::api::KIND.into(),
                    name: name.into(),
                    namespace: namespace.into(),
                })
                .observe(took.as_secs_f64());
        }
        self.reconciles
            .get_or_create(&ResultLabels {
                controller: "helmrelease".into(),
                result: result.label().into(),
            })
            .inc();
    }

    /// A wait ended; `result` is one of ready, failed, timeout, canceled, stopped.
    pub fn wait_ended(&self, took: Duration, result: &str) {
        self.wait_duration
            .get_or_create(&OutcomeLabels {
                result: result.into(),
            })
            .observe(took.as_secs_f64());
    }

    pub fn wait_canceled(&self, trigger: CancelTrigger) {
        self.cancellations
            .get_or_create(&TriggerLabels {
                trigger: trigger.label().into(),
            })
            .inc();
    }

    /// A drift check ended: `compared`, or `unchanged` (nothing read).
    pub fn drift_checked(&self, result: &str) {
        self.drift_checks
            .get_or_create(&OutcomeLabels {
                result: result.into(),
            })
            .inc();
    }

    /// An interval check found the release unchanged and read no history.
    pub fn unchanged_check(&self) {
        self.unchanged_checks.inc();
    }

    /// A HelmRelease's status was sent to the API server.
    pub fn status_written(&self) {
        self.status_writes.inc();
    }

    pub fn failed_fast(&self, reason: &str) {
        self.fail_fast
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
            })
            .inc();
    }

    /// A webhook receiver's call, by how it ended.
    pub fn receiver_call(&self, receiver: &str, result: &str) {
        self.receiver_calls
            .get_or_create(&ReceiverLabels {
                receiver: receiver.into(),
                result: result.into(),
            })
            .inc();
    }

    pub fn retried_on_cause(&self, cause: RetryCause) {
        self.cause_retries
            .get_or_create(&CauseLabels {
                cause: cause.label().into(),
            })
            .inc();
    }

    pub fn notification_delivered(&self, provider_type: &str) {
        self.notifications_delivered
            .get_or_create(&ProviderTypeLabels {
                r#type: provider_type.into(),
            })
            .inc();
    }

    pub fn notification_dropped(&self, reason: &str) {
        self.notifications_dropped
            .get_or_create(&ReasonLabels {
                reason: reason.into(),
            })
            .inc();
    }

    pub fn fix_applied(&self, since_trigger: Duration) {
        self.fix_applied.observe(since_trigger.as_secs_f64());
    }

    /// The text exposition format, as `/metrics` serves it.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unscraped_engine_keeps_no_series_per_release() {
        let m = Metrics::unscraped();
        m.reconciled(
            "apps",
            "web",
            Duration::from_millis(300),
            ReconcileResult::Success,
        );
        let text = m.encode();
        assert!(!text.contains(r#"name="web""#), "{text}");
        // The counts by result stay: they are one series each, not one per release.
        assert!(
            text.contains(
                r#"controller_runtime_reconcile_total{controller="helmrelease",result="success"} 1"#
            ),
            "{text}"
        );
    }

    #[test]
    fn names_and_labels_match_flux_where_the_meaning_does() {
        let m = Metrics::new();
        m.reconciled(
            "apps",
            "web",
            Duration::from_millis(300),
            ReconcileResult::Success,
        );
        m.reconciled(
            "apps",
            "web",
            Duration::from_secs(2),
            ReconcileResult::Failure,
        );
        m.wait_ended(Duration::from_secs(1), "canceled");
        m.wait_canceled(CancelTrigger::NewRevision);
        m.failed_fast("CrashLoopBackOff");
        m.fix_applied(Duration::from_millis(150));
        m.queue_depth.set(3);
        m.notification_delivered("slack");
        m.notification_dropped("queue_full");
        let text = m.encode();
        for line in [
            r#"gotk_reconcile_duration_seconds_count{kind="HelmRelease",name="web",namespace="apps"} 2"#,
            r#"controller_runtime_reconcile_total{controller="helmrelease",result="success"} 1"#,
            r#"controller_runtime_reconcile_total{controller="helmrelease",result="failure"} 1"#,
            r#"wheelhouse_wait_duration_seconds_count{result="canceled"} 1"#,
            r#"wheelhouse_wait_cancellations_total{trigger="new_revision"} 1"#,
            r#"wheelhouse_fail_fast_total{reason="CrashLoopBackOff"} 1"#,
            "wheelhouse_trigger_to_fix_applied_seconds_count 1",
            "wheelhouse_queue_depth 3",
            r#"wheelhouse_notifications_delivered_total{type="slack"} 1"#,
            r#"wheelhouse_notifications_dropped_total{reason="queue_full"} 1"#,
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }
}

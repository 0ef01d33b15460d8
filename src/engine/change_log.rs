//! The changes a release's status keeps (`status.changes`): what the engine saw happen
//! that no other record keeps durably (Helm's storage keeps the revisions; Events expire
//! after an hour). Derived at each status write from the status last written and the one
//! about to be, so every path that changes a release's state records it the same way.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime};
use k8s_openapi::jiff::Timestamp;

use crate::api::conditions::{condition, reason};
use crate::api::{CHANGES_KEPT, ChangeRecord, HelmRelease, HelmReleaseStatus};

/// A config tracker's rollout of one of the release's workloads, as kept.
pub fn config_rollout(rolled: &crate::tracking::Rolled, now: Timestamp) -> ChangeRecord {
    let message = format!(
        "{} rolled: {} changed (config hash {})",
        rolled.workload,
        rolled.changed.join(", "),
        rolled.hash
    );
    ChangeRecord {
        at: MicroTime(now),
        kind: "config-rollout".into(),
        message: message.chars().take(MESSAGE_KEPT).collect(),
        by: None,
        revision: None,
    }
}

/// Longest message kept per change.
const MESSAGE_KEPT: usize = 300;

/// The changes between `before` (the status last written, or read) and `after` (the one
/// about to be written), with `log` (newest first) the changes kept so far; newest first.
/// `suspend_by`: who set `spec.suspend` as it is now, if known.
pub fn between(
    before: Option<&HelmReleaseStatus>,
    after: &HelmReleaseStatus,
    hr: &HelmRelease,
    log: &[ChangeRecord],
    now: Timestamp,
    suspend_by: Option<String>,
) -> Vec<ChangeRecord> {
    let at = MicroTime(now);
    let revision = after.history.first().map(|s| s.version);
    let record = |kind: &str, message: &str, by: Option<String>| ChangeRecord {
        at: at.clone(),
        kind: kind.to_owned(),
        message: message.chars().take(MESSAGE_KEPT).collect(),
        by,
        revision,
    };
    let found = |status: Option<&HelmReleaseStatus>, type_: &str| -> Option<Condition> {
        status?
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .cloned()
    };
    let changed = |type_: &str| -> Option<Condition> {
        let now = found(Some(after), type_)?;
        let was = found(before, type_);
        let same = was.is_some_and(|w| {
            (w.status.as_str(), w.reason.as_str(), w.message.as_str())
                == (
                    now.status.as_str(),
                    now.reason.as_str(),
                    now.message.as_str(),
                )
        });
        (!same).then_some(now)
    };
    let mut found_now = Vec::new();

    if suspension_changed(hr, log) {
        let by = suspend_by;
        let (kind, message) = if hr.spec.suspend {
            ("suspend", "suspended: the engine starts nothing on it")
        } else {
            ("resume", "resumed")
        };
        found_now.push(record(kind, message, by));
    }
    // A pin taken or let go.
    match (
        before.and_then(|b| b.pinned.as_ref()),
        after.pinned.as_ref(),
    ) {
        (None, Some(pin)) => found_now.push(record(
            "pin",
            &pin.message(),
            (!pin.by.is_empty()).then(|| pin.by.clone()),
        )),
        (Some(pin), None) => found_now.push(record(
            "unpin",
            &format!("unpinned from revision {}: back to the spec", pin.revision),
            None,
        )),
        _ => {}
    }
    if let Some(ready) = changed(condition::READY).filter(|c| c.status == "False") {
        let kind = match ready.reason.as_str() {
            reason::HEALTH_CHECK_CANCELED => Some("cancel"),
            reason::EXTERNAL_REVISION => Some("external"),
            reason::DEPENDENCY_NOT_READY | reason::PROGRESSING => None,
            _ if crate::health::failfast::TERMINAL_WAITING_REASONS
                .iter()
                .any(|r| ready.message.contains(r)) =>
            {
                Some("fail-fast")
            }
            _ => Some("failure"),
        };
        if let Some(kind) = kind {
            found_now.push(record(kind, &ready.message, None));
        }
    }
    if let Some(remediated) = changed(condition::REMEDIATED).filter(|c| c.status == "True") {
        found_now.push(record("remediation", &remediated.message, None));
    }
    if let Some(drifted) = changed(condition::DRIFTED) {
        if drifted.status == "True" {
            found_now.push(record("drift", &drifted.message, None));
        } else if drifted.reason == reason::DRIFT_CORRECTED {
            found_now.push(record("drift-corrected", &drifted.message, None));
        }
    }
    found_now
}

/// `new` (newest first) before `log`, the newest [`CHANGES_KEPT`] kept.
pub fn kept(new: Vec<ChangeRecord>, log: &[ChangeRecord]) -> Vec<ChangeRecord> {
    let mut all = new;
    all.reverse();
    all.extend(log.iter().cloned());
    all.truncate(CHANGES_KEPT);
    all
}

/// Whether `spec.suspend` differs from the newest suspend or resume kept.
pub fn suspension_changed(hr: &HelmRelease, log: &[ChangeRecord]) -> bool {
    let suspended_before = log
        .iter()
        .find(|c| c.kind == "suspend" || c.kind == "resume")
        .is_some_and(|c| c.kind == "suspend");
    hr.spec.suspend != suspended_before
}

/// The field manager that owns `spec.suspend` (`kubectl-patch`, the dashboard), if the
/// managed fields say (the engine's copy of a HelmRelease has none: read them with
/// the object's metadata).
pub fn suspend_setter(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<String> {
    crate::api::suspend_owner::suspend_owners(meta)
        .next()
        .and_then(|f| f.manager.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Pin;

    fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::UNIX_EPOCH,
            ),
            observed_generation: None,
        }
    }

    fn with(conditions: Vec<Condition>) -> HelmReleaseStatus {
        HelmReleaseStatus {
            conditions,
            ..Default::default()
        }
    }

    fn kinds(changes: &[ChangeRecord]) -> Vec<&str> {
        changes.iter().map(|c| c.kind.as_str()).collect()
    }

    fn hr(suspend: bool) -> HelmRelease {
        let mut hr: HelmRelease = serde_json::from_value(serde_json::json!({
            "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease",
            "metadata": {"name": "web", "managedFields": [
                {"manager": "kubectl-patch", "operation": "Update", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:suspend": {}}}}]},
            "spec": {"chart": {"path": "/c"}},
        }))
        .unwrap();
        hr.spec.suspend = suspend;
        hr
    }

    #[test]
    fn a_cancelled_wait_a_fail_fast_verdict_and_a_remediation_are_each_kept_once() {
        let now = Timestamp::UNIX_EPOCH;
        let waiting = with(vec![condition("Ready", "Unknown", "Progressing", "")]);
        let cancelled = with(vec![condition(
            "Ready",
            "False",
            "HealthCheckCanceled",
            "health check canceled: superseded by a new spec",
        )]);
        let c = between(Some(&waiting), &cancelled, &hr(false), &[], now, None);
        assert_eq!(kinds(&c), ["cancel"]);
        assert!(c[0].message.contains("superseded"));
        // Written again unchanged: nothing new.
        assert!(between(Some(&cancelled), &cancelled, &hr(false), &c, now, None).is_empty());
        let crashed = with(vec![
            condition(
                "Ready",
                "False",
                "UpgradeFailed",
                "Deployment/apps/web: CrashLoopBackOff (container app)",
            ),
            condition(
                "Remediated",
                "True",
                "RollbackSucceeded",
                "rolled back to 1",
            ),
        ]);
        assert_eq!(
            kinds(&between(
                Some(&waiting),
                &crashed,
                &hr(false),
                &[],
                now,
                None
            )),
            ["fail-fast", "remediation"]
        );
        // Waiting on a dependency, or progress, is no change.
        let deps = with(vec![condition("Ready", "False", "DependencyNotReady", "x")]);
        assert!(between(Some(&waiting), &deps, &hr(false), &[], now, None).is_empty());
    }

    #[test]
    fn suspend_resume_and_pins_are_kept_with_who_did_them() {
        let now = Timestamp::UNIX_EPOCH;
        let status = HelmReleaseStatus::default();
        let setter = suspend_setter(&hr(true).metadata);
        assert_eq!(setter.as_deref(), Some("kubectl-patch"));
        let suspended = between(Some(&status), &status, &hr(true), &[], now, setter);
        assert_eq!(kinds(&suspended), ["suspend"]);
        assert_eq!(suspended[0].by.as_deref(), Some("kubectl-patch"));
        let log = kept(suspended, &[]);
        // Still suspended: nothing more.
        assert!(between(Some(&status), &status, &hr(true), &log, now, None).is_empty());
        let pinned = HelmReleaseStatus {
            pinned: Some(Pin {
                revision: 1,
                recorded_as: 3,
                by: "alice".into(),
                at: "2026-11-27T10:00:00Z".into(),
            }),
            ..Default::default()
        };
        let c = between(Some(&status), &pinned, &hr(true), &log, now, None);
        assert_eq!(kinds(&c), ["pin"]);
        assert_eq!(c[0].by.as_deref(), Some("alice"));
        let log = kept(c, &log);
        let c = between(Some(&pinned), &status, &hr(false), &log, now, None);
        assert_eq!(kinds(&c), ["resume", "unpin"]);
        let log = kept(c, &log);
        assert_eq!(kinds(&log), ["unpin", "resume", "pin", "suspend"]);
    }

    #[test]
    fn only_the_newest_are_kept() {
        let one = |i: i32| ChangeRecord {
            at: MicroTime(Timestamp::UNIX_EPOCH),
            kind: "drift".into(),
            message: i.to_string(),
            by: None,
            revision: Some(i),
        };
        let log: Vec<_> = (0..CHANGES_KEPT as i32).map(one).collect();
        let next = kept(vec![one(100)], &log);
        assert_eq!(next.len(), CHANGES_KEPT);
        assert_eq!(next[0].message, "100");
        assert_eq!(
            next[CHANGES_KEPT - 1].message,
            (CHANGES_KEPT as i32 - 2).to_string()
        );
    }
}

//! Conditions and status writes, in Flux's vocabulary so existing alerts and habits
//! carry over. Status is written with server-side apply (field manager `wheelhouse`),
//! so fields the engine stops setting disappear instead of going stale.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::api::{EngineRef, FIELD_MANAGER, HelmReleaseStatus, Snapshot};
use crate::helm::release::Release;

pub use crate::api::conditions::{condition, reason};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    True,
    False,
    Unknown,
}

impl Truth {
    fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

/// Sets a condition, keeping its transition time when its status did not change.
pub fn set(
    status: &mut HelmReleaseStatus,
    type_: &str,
    truth: Truth,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) {
    let message = truncate(message.into(), 1024);
    let now = Time(Timestamp::now());
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != truth.as_str() {
                c.last_transition_time = now;
            }
            c.status = truth.as_str().into();
            c.reason = reason.into();
            c.message = message;
            c.observed_generation = generation;
        }
        None => status.conditions.push(Condition {
            type_: type_.into(),
            status: truth.as_str().into(),
            reason: reason.into(),
            message,
            observed_generation: generation,
            last_transition_time: now,
        }),
    }
}

/// What a step of the reconcile concluded about the release, outside an action's own
/// record (`actions::record_as`) and the drift check's `Drifted`: the one place that says
/// which of Flux's conditions each conclusion writes.
#[derive(Debug, Clone, Copy)]
pub enum Verdict<'a> {
    /// Ready=True; Reconciling and Stalled end.
    Ready { reason: &'a str, message: &'a str },
    /// Ready=False and the work ends (Reconciling goes): held until a cause clears.
    Held { reason: &'a str, message: &'a str },
    /// Ready=False; Reconciling, if any, stays (a failure of an attempt in flight).
    Failing { reason: &'a str, message: &'a str },
    /// Ready=False and Stalled=True; Reconciling ends: nothing more is tried.
    Stalled { reason: &'a str, message: &'a str },
    /// Reconciling=True: what runs, or what it waits for; Ready stays as it is.
    Reconciling { reason: &'a str, message: &'a str },
    /// Ready=Unknown while an outcome is not known yet.
    Pending { reason: &'a str, message: &'a str },
}

/// Writes `verdict` into `status` (see [`Verdict`] for which conditions each writes).
pub fn summarise(status: &mut HelmReleaseStatus, verdict: Verdict<'_>, generation: Option<i64>) {
    use Verdict::*;
    use condition::{READY, RECONCILING, STALLED};
    // (conditions set, conditions that end) for each verdict.
    let (reason, message, writes, ends): (&str, &str, &[(&str, Truth)], &[&str]) = match verdict {
        Ready { reason, message } => (
            reason,
            message,
            &[(READY, Truth::True)],
            &[RECONCILING, STALLED],
        ),
        Held { reason, message } => (reason, message, &[(READY, Truth::False)], &[RECONCILING]),
        Failing { reason, message } => (reason, message, &[(READY, Truth::False)], &[]),
        Stalled { reason, message } => (
            reason,
            message,
            &[(READY, Truth::False), (STALLED, Truth::True)],
            &[RECONCILING],
        ),
        Reconciling { reason, message } => (reason, message, &[(RECONCILING, Truth::True)], &[]),
        Pending { reason, message } => (reason, message, &[(READY, Truth::Unknown)], &[]),
    };
    for (type_, truth) in writes {
        set(status, type_, *truth, reason, message, generation);
    }
    for type_ in ends {
        remove(status, type_);
    }
}

pub fn remove(status: &mut HelmReleaseStatus, type_: &str) {
    status.conditions.retain(|c| c.type_ != type_);
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max - 3;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// Writes the whole status (server-side apply on the status subresource). Any view of
/// HelmRelease will do: the raw one writes the status of an object whose spec does not
/// decode.
pub async fn write<K>(api: &Api<K>, name: &str, status: &HelmReleaseStatus) -> kube::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    // `letGo` belongs to the handover's field manager: left out, this write keeps it.
    let status = HelmReleaseStatus {
        let_go: None,
        ..status.clone()
    };
    let body = serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1",
        "kind": "HelmRelease",
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(body),
    )
    .await?;
    Ok(())
}

/// The field manager of `status.letGo`, apart from the engine's status writes.
const HANDOVER_MANAGER: &str = "wheelhouse-handover";

/// Records that `engine` let go of the release: its last step on it ended.
pub async fn write_let_go<K>(api: &Api<K>, name: &str, engine: &EngineRef) -> kube::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let body = serde_json::json!({
        "apiVersion": "wheelhouse.dev/v1alpha1",
        "kind": "HelmRelease",
        "status": {"letGo": engine},
    });
    api.patch_status(
        name,
        &PatchParams::apply(HANDOVER_MANAGER).force(),
        &Patch::Apply(body),
    )
    .await?;
    Ok(())
}

/// status.history from Helm storage: newest first, at most `max` (0 = all).
pub fn history(
    releases: &[Release],
    max: usize,
    config_digest: impl Fn(&Release) -> String,
) -> Vec<Snapshot> {
    let mut out: Vec<Snapshot> = releases
        .iter()
        .rev()
        .map(|r| {
            let info = r.info.clone().unwrap_or_default();
            let meta = r
                .chart
                .as_ref()
                .and_then(|c| c.metadata.clone())
                .unwrap_or_default();
            let tests = super::plan::TestState::of(r);
            Snapshot {
                version: r.version,
                name: r.name.clone(),
                namespace: r.namespace.clone(),
                chart_name: meta.name,
                chart_version: meta.version,
                app_version: meta.app_version,
                config_digest: config_digest(r),
                status: info.status.to_string(),
                action: Some(info.description.clone()).filter(|d| !d.is_empty()),
                first_deployed: info.first_deployed.map(Time),
                last_deployed: info.last_deployed.map(Time),
                deleted: info.deleted.map(Time),
                test_result: match tests {
                    super::plan::TestState::Passed => Some("passed".into()),
                    super::plan::TestState::Failed => Some("failed".into()),
                    _ => None,
                },
                commit: r
                    .labels
                    .get(crate::helm::release::SOURCE_COMMIT_LABEL)
                    .cloned(),
                digest: r
                    .labels
                    .get(crate::helm::release::SOURCE_DIGEST_LABEL)
                    .cloned(),
            }
        })
        .collect();
    if max > 0 {
        out.truncate(max);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let mut s = HelmReleaseStatus::default();
        set(
            &mut s,
            condition::READY,
            Truth::False,
            reason::PROGRESSING,
            "installing",
            Some(1),
        );
        let first = s.conditions[0].last_transition_time.clone();
        std::thread::sleep(std::time::Duration::from_millis(5));
        set(
            &mut s,
            condition::READY,
            Truth::False,
            reason::INSTALL_FAILED,
            "boom",
            Some(1),
        );
        assert_eq!(s.conditions[0].last_transition_time, first);
        assert_eq!(s.conditions[0].reason, reason::INSTALL_FAILED);
        set(
            &mut s,
            condition::READY,
            Truth::True,
            reason::INSTALL_SUCCEEDED,
            "ok",
            Some(1),
        );
        assert_ne!(s.conditions[0].last_transition_time, first);
        assert_eq!(s.conditions.len(), 1);
        remove(&mut s, condition::READY);
        assert!(s.conditions.is_empty());
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let s = truncate("é".repeat(600), 1024);
        assert!(s.len() <= 1024 && s.ends_with("..."));
    }

    #[test]
    fn each_verdict_writes_its_conditions_and_only_those() {
        use Verdict::*;
        let (r, m) = ("R", "m");
        // (verdict, Ready, Reconciling, Stalled) after a status that had all three.
        let cases = [
            (
                Ready {
                    reason: r,
                    message: m,
                },
                Some("True"),
                None,
                None,
            ),
            (
                Held {
                    reason: r,
                    message: m,
                },
                Some("False"),
                None,
                Some("True"),
            ),
            (
                Failing {
                    reason: r,
                    message: m,
                },
                Some("False"),
                Some("True"),
                Some("True"),
            ),
            (
                Stalled {
                    reason: r,
                    message: m,
                },
                Some("False"),
                None,
                Some("True"),
            ),
            (
                Reconciling {
                    reason: r,
                    message: m,
                },
                Some("True"),
                Some("True"),
                Some("True"),
            ),
            (
                Pending {
                    reason: r,
                    message: m,
                },
                Some("Unknown"),
                Some("True"),
                Some("True"),
            ),
        ];
        for (verdict, ready, reconciling, stalled) in cases {
            let mut s = HelmReleaseStatus::default();
            for type_ in [condition::READY, condition::RECONCILING, condition::STALLED] {
                set(&mut s, type_, Truth::True, "before", "", Some(1));
            }
            summarise(&mut s, verdict, Some(2));
            let of = |t: &str| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == t)
                    .map(|c| c.status.as_str())
            };
            let got = (
                of(condition::READY),
                of(condition::RECONCILING),
                of(condition::STALLED),
            );
            assert_eq!(got, (ready, reconciling, stalled), "{verdict:?}");
        }
    }
}

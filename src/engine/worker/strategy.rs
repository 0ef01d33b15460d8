//! What the release's Flux settings add to a reconcile's bookkeeping: `install.strategy`
//! / `upgrade.strategy` `RetryOnFailure` after an action's outcome, and which
//! `commonMetadata` a stored revision was made with. Pure, beside their table tests.

use std::time::Duration;

use crate::api::{HelmRelease, HelmReleaseStatus};
use crate::engine::actions::Outcome;
use crate::engine::plan::{self, Next, Policy};
use crate::engine::status::{self, Verdict, reason};
use crate::helm::release::Release;

/// The bookkeeping of `install.strategy` / `upgrade.strategy` `RetryOnFailure` (Flux's)
/// after `next` ended in `outcome`: a failure (or an operator's cancel) of the install,
/// upgrade or tests is not remediated but tried again after the strategy's interval,
/// which it returns (Reconciling says so); a success of an install or upgrade with that
/// strategy clears the failure counters, which matter only while the release is failed.
pub(super) fn retry_on_failure(
    s: &mut HelmReleaseStatus,
    next: &Next,
    outcome: &Outcome,
    policy: &Policy,
    generation: Option<i64>,
) -> Option<Duration> {
    if !matches!(
        next,
        Next::Install | Next::Upgrade | Next::Resume { .. } | Next::Test
    ) {
        return None;
    }
    let retry = plan::active_retry(s.last_attempted_release_action, policy)?;
    match outcome {
        Outcome::Succeeded { .. } if !matches!(next, Next::Test) => {
            s.failures = 0;
            s.install_failures = 0;
            s.upgrade_failures = 0;
            None
        }
        Outcome::Failed { .. }
        | Outcome::Canceled {
            by_operator: true, ..
        } => {
            let message = format!("retrying after {}", crate::api::Duration::from(retry));
            let verdict = Verdict::Reconciling {
                reason: reason::PROGRESSING_WITH_RETRY,
                message: &message,
            };
            status::summarise(s, verdict, generation);
            Some(retry)
        }
        _ => None,
    }
}

/// The commonMetadata `r` was made with, as far as the planner can tell: its label, or
/// for a revision without one (another tool's: Flux's before a migration) the spec's,
/// when every object of its manifest carries it already.
pub(super) fn common_metadata_of(r: &Release, hr: &HelmRelease) -> Option<String> {
    use crate::engine::actions::common_metadata;
    if let Some(kept) = r.labels.get(common_metadata::COMMON_METADATA_LABEL) {
        return Some(kept.clone());
    }
    let common = hr.spec.common_metadata.as_ref()?;
    let digest = common_metadata::digest(Some(common))?;
    common_metadata::carried_by(&r.manifest, common).then(|| common_metadata::label_value(&digest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ReleaseAction;
    use crate::engine::worker::{conditions, stored, test_release};
    use crate::helm::release::Status;

    fn with(counters: (i64, i64, i64)) -> HelmReleaseStatus {
        HelmReleaseStatus {
            failures: counters.0,
            install_failures: counters.1,
            upgrade_failures: counters.2,
            ..HelmReleaseStatus::default()
        }
    }

    fn counters(s: &HelmReleaseStatus) -> (i64, i64, i64) {
        (s.failures, s.install_failures, s.upgrade_failures)
    }

    /// RetryOnFailure after each outcome: a failure waits for the retry interval with
    /// Reconciling saying so; a success of the install or upgrade clears the counters;
    /// without the strategy nothing changes and the reconcile goes on (to remediate).
    #[test]
    fn retry_on_failure_waits_the_interval_and_clears_counters_on_success() {
        let minute = Duration::from_secs(60);
        let retrying = Policy {
            install_retry: Some(minute),
            upgrade_retry: Some(minute),
            ..Policy::from_spec(&test_release(""))
        };
        let remediating = Policy::from_spec(&test_release(""));
        let failed = Outcome::Failed {
            reason: reason::UPGRADE_FAILED,
            message: "it broke".into(),
        };
        let ok = Outcome::Succeeded {
            reason: reason::UPGRADE_SUCCEEDED,
            message: "it worked".into(),
        };
        let canceled = |by_operator| Outcome::Canceled {
            by_operator,
            message: "canceled".into(),
        };
        let retry_reason = ("Reconciling", "True", reason::PROGRESSING_WITH_RETRY);
        // (case, next, outcome, policy, retry, conditions after, counters after)
        let cases = [
            (
                "failed upgrade",
                Next::Upgrade,
                failed.clone(),
                retrying,
                Some(minute),
                vec![retry_reason],
                (2, 0, 2),
            ),
            (
                "failed tests",
                Next::Test,
                failed.clone(),
                retrying,
                Some(minute),
                vec![retry_reason],
                (2, 0, 2),
            ),
            (
                "operator's cancel",
                Next::Upgrade,
                canceled(true),
                retrying,
                Some(minute),
                vec![retry_reason],
                (2, 0, 2),
            ),
            (
                "superseded wait",
                Next::Upgrade,
                canceled(false),
                retrying,
                None,
                vec![],
                (2, 0, 2),
            ),
            (
                "upgrade succeeded",
                Next::Upgrade,
                ok.clone(),
                retrying,
                None,
                vec![],
                (0, 0, 0),
            ),
            (
                "tests passed: counters stay",
                Next::Test,
                ok.clone(),
                retrying,
                None,
                vec![],
                (2, 0, 2),
            ),
            (
                "a remediation is not retried",
                Next::Rollback { to: 1 },
                failed.clone(),
                retrying,
                None,
                vec![],
                (2, 0, 2),
            ),
            (
                "RemediateOnFailure: failed",
                Next::Upgrade,
                failed.clone(),
                remediating,
                None,
                vec![],
                (2, 0, 2),
            ),
            (
                "RemediateOnFailure: succeeded",
                Next::Upgrade,
                ok.clone(),
                remediating,
                None,
                vec![],
                (2, 0, 2),
            ),
        ];
        for (what, next, outcome, policy, want, conds, after) in cases {
            let mut s = with((2, 0, 2));
            s.last_attempted_release_action = Some(ReleaseAction::Upgrade);
            let got = retry_on_failure(&mut s, &next, &outcome, &policy, Some(3));
            assert_eq!(got, want, "{what}");
            assert_eq!(conditions(&s), conds, "{what}");
            assert_eq!(counters(&s), after, "{what}");
            if want.is_some() {
                assert_eq!(s.conditions[0].message, "retrying after 1m", "{what}");
            }
        }
        // The strategy of the action attempted last: an install's.
        let mut s = with((1, 1, 0));
        s.last_attempted_release_action = Some(ReleaseAction::Install);
        let install_only = Policy {
            install_retry: Some(minute),
            ..remediating
        };
        assert_eq!(
            retry_on_failure(&mut s, &Next::Install, &failed, &install_only, Some(3)),
            Some(minute)
        );
        s.last_attempted_release_action = Some(ReleaseAction::Upgrade);
        assert_eq!(
            retry_on_failure(&mut s, &Next::Upgrade, &failed, &install_only, Some(3)),
            None
        );
    }

    /// The commonMetadata a revision was made with: its label; without one (Flux's
    /// revision, before a migration), the spec's when its objects all carry it.
    #[test]
    fn a_revision_says_the_common_metadata_it_was_made_with() {
        let hr = test_release("commonMetadata: {labels: {team: web}}");
        let common = hr.spec.common_metadata.clone().unwrap();
        let digest = crate::engine::actions::common_metadata::digest(Some(&common)).unwrap();
        let kept = digest[..40].to_owned();
        let plain = "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n";
        let mut r = stored(1, Status::Deployed, "");
        r.manifest = plain.into();
        assert_eq!(common_metadata_of(&r, &hr), None, "made without it");
        r.manifest = crate::engine::actions::common_metadata::on_manifest(plain, &common).unwrap();
        assert_eq!(
            common_metadata_of(&r, &hr),
            Some(kept.clone()),
            "its objects carry it"
        );
        assert_eq!(
            common_metadata_of(&r, &test_release("")),
            None,
            "the spec has none: nothing to tell"
        );
        r.labels.insert(
            crate::helm::release::COMMON_METADATA_LABEL.into(),
            "0123".into(),
        );
        assert_eq!(
            common_metadata_of(&r, &hr).as_deref(),
            Some("0123"),
            "the label, when there is one"
        );
    }
}

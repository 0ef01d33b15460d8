//! What a reconcile records that no action owns, and what the planner observes: pure
//! functions of the status and the history, table-tested below.

use std::time::Duration;

use crate::api::{HelmRelease, HelmReleaseStatus, annotations};
use crate::engine::actions;
use crate::engine::plan::{Desired, Latest, Observed, Policy, TestState};
use crate::engine::run::{Run, Settled, new_token};
use crate::engine::status::{self, Truth, Verdict, condition, reason};
use crate::helm::release::{Release, Status};

/// `history` with `record` in it (in place of the revision of its version).
pub(super) fn with_record(mut history: Vec<Release>, record: Release) -> Vec<Release> {
    history.retain(|r| r.version != record.version);
    history.push(record);
    history.sort_by_key(|r| r.version);
    history
}

pub(super) fn is_pending(record: &Release) -> bool {
    record.info.as_ref().is_some_and(|i| i.status.is_pending())
}

/// When an idle release is looked at again: its interval, or sooner when its chart source
/// has an interval of its own (Flux's `chart.spec.interval`: how often the chart is
/// fetched, a new one being a new desired state).
pub(super) fn idle_recheck(interval: Duration, chart: &crate::api::ChartSpec) -> Duration {
    match chart.interval {
        Some(d) if crate::engine::run::polls(chart) => {
            interval.min(d.as_std().max(Duration::from_secs(1)))
        }
        _ => interval,
    }
}

/// Takes the request annotations not handled yet: resetAt gives fresh retries;
/// requestedAt (this reconcile is its answer) and a cancelWaitAt with no wait running are
/// simply recorded as handled.
/// Says whether it took any.
pub(super) fn take_tokens(s: &mut HelmReleaseStatus, hr: &HelmRelease) -> bool {
    let mut took = false;
    if let Some(t) = new_token(
        hr,
        annotations::RESET_AT,
        s.last_handled_reset_at.as_deref(),
    ) {
        reset_failures(s);
        s.last_handled_reset_at = Some(t);
        took = true;
    }
    if let Some(t) = new_token(
        hr,
        annotations::RECONCILE_REQUESTED_AT,
        s.last_handled_reconcile_at.as_deref(),
    ) {
        s.last_handled_reconcile_at = Some(t);
        took = true;
    }
    if let Some(t) = new_token(
        hr,
        annotations::CANCEL_WAIT_AT,
        s.last_handled_cancel_wait_at.as_deref(),
    ) {
        s.last_handled_cancel_wait_at = Some(t);
        took = true;
    }
    took
}

/// What this reconcile, finding the release in sync on `history`, planned on: kept for
/// the next interval check (see `worker::unchanged`), when the history was read from the
/// records the last list returned and its newest revision is deployed.
pub(super) fn settled_on(run: &Run<'_>, history: &[Release]) -> Option<Settled> {
    let latest = history.last()?;
    if latest.info.as_ref().map(|i| i.status) != Some(Status::Deployed) {
        return None;
    }
    let records = run.storage.last_listed()?;
    let versions = records.records.iter().map(|(v, _)| *v);
    if records.name != run.target.release_name || !versions.eq(history.iter().map(|r| r.version)) {
        return None;
    }
    Some(Settled {
        uid: run.hr.metadata.uid.clone(),
        generation: run.hr.metadata.generation,
        desired: run.intent.digest.clone(),
        records,
        version: latest.version,
    })
}

/// A new desired state (generation, chart version or values) gets a fresh set of
/// retries, as in Flux.
pub(super) fn fresh_retries(s: &mut HelmReleaseStatus, desired: &Desired, generation: Option<i64>) {
    if attempt_differs(s, desired, generation) {
        reset_failures(s);
    }
}

/// Whether `desired` (at `generation`) is not what was last attempted: a new generation,
/// chart version, values, or source revision (a Git commit, an OCI manifest digest). As
/// helm-controller's MustResetFailures decides: such a desired state gets fresh retries,
/// an unchanged one never does.
pub(in crate::engine::worker) fn attempt_differs(
    s: &HelmReleaseStatus,
    desired: &Desired,
    generation: Option<i64>,
) -> bool {
    s.last_attempted_generation != generation
        || s.last_attempted_revision.as_deref() != Some(desired.chart_version.as_str())
        || s.last_attempted_config_digest.as_deref() != Some(desired.config_digest.as_str())
        || (desired.source_revision.is_some()
            && s.last_attempted_source_revision != desired.source_revision)
}

/// Zero failure counters; whatever stalled the release on them no longer holds.
pub(super) fn reset_failures(s: &mut HelmReleaseStatus) {
    s.failures = 0;
    s.install_failures = 0;
    s.upgrade_failures = 0;
    status::remove(s, condition::STALLED);
}

/// Nothing to do: Ready=True with the reason of what made it so.
pub(super) fn in_sync(
    s: &mut HelmReleaseStatus,
    latest: Option<&Release>,
    generation: Option<i64>,
) {
    let (r, m) = success_reason(s, latest);
    let verdict = Verdict::Ready {
        reason: r,
        message: &m,
    };
    status::summarise(s, verdict, generation);
    s.observed_generation = generation;
}

/// The planner gave up (retries used up, nothing to roll back to): Stalled=True.
pub(super) fn nothing_more_to_try(
    s: &mut HelmReleaseStatus,
    why: &str,
    message: &str,
    generation: Option<i64>,
) {
    status::set(s, condition::STALLED, Truth::True, why, message, generation);
    // As Flux: Ready keeps the failure that used up the retries, so the operator reads
    // why, not only that nothing more will be tried.
    let failed = s.conditions.iter().any(|c| {
        c.type_ == condition::READY
            && c.status == "False"
            && c.reason != reason::PROGRESSING
            && c.reason != reason::DEPENDENCY_NOT_READY
    });
    if !failed {
        status::set(s, condition::READY, Truth::False, why, message, generation);
    }
    status::remove(s, condition::RECONCILING);
    s.observed_generation = generation;
}

/// What the planner decides from: the newest stored revision, what to roll back to, the
/// desired state and the failure counters.
pub(super) fn observe(
    s: &HelmReleaseStatus,
    hr: &HelmRelease,
    history: &[Release],
    desired: &Desired,
    force: bool,
) -> Observed {
    let latest = history.last().map(|r| {
        let info = r.info.clone().unwrap_or_default();
        let meta = r
            .chart
            .as_ref()
            .and_then(|c| c.metadata.clone())
            .unwrap_or_default();
        // Made by a wheelhouse engine: its labels say what it was made with. (The owner
        // label alone goes once the revision is no longer pending.)
        let ours = r.labels.contains_key(crate::helm::release::MADE_BY_LABEL)
            || r.labels.contains_key(actions::OWNER_LABEL);
        Latest {
            version: r.version,
            status: info.status,
            chart_name: meta.name,
            chart_version: meta.version,
            // Made with upgrade.preserveValues: its stored values are merged over kept
            // ones, so the spec's values digest it was made from says whether it is in
            // sync.
            config_digest: match r
                .labels
                .get(crate::helm::release::SPEC_VALUES_LABEL)
                .filter(|_| ours && hr.preserves_values())
            {
                Some(made_from)
                    if crate::engine::run::spec_values_label(&desired.config_digest)
                        == *made_from =>
                {
                    desired.config_digest.clone()
                }
                Some(made_from) => format!("sha256:{made_from}"),
                _ => crate::helm::values::digest(&r.config),
            },
            source_commit: r.labels.get(actions::SOURCE_COMMIT_LABEL).cloned(),
            source_digest: r.labels.get(actions::SOURCE_DIGEST_LABEL).cloned(),
            // A revision another tool wrote (Flux's, the helm CLI's) does not say which
            // post-renderers made it: taken as the spec's, so a release migrated from Flux
            // with them continues without a new revision.
            post_renderers: if ours {
                r.labels.get(actions::POST_RENDERERS_LABEL).cloned()
            } else {
                desired.post_renderers.clone()
            },
            common_metadata: crate::engine::worker::strategy::common_metadata_of(r, hr),
            // As the post-renderers: another tool's revision is taken as the spec's.
            values_files: if ours {
                r.labels.get(actions::VALUES_FILES_LABEL).cloned()
            } else {
                desired.values_files.clone()
            },
            tests: TestState::of(r),
            interrupted: info.status == Status::Failed
                && (info
                    .description
                    .starts_with(actions::unlock::INTERRUPTED_PREFIX)
                    || info
                        .description
                        .starts_with(actions::CLUSTER_FAILURE_PREFIX)),
            left_waiting: left_waiting(s, r),
        }
    });
    let rollback_target = history
        .iter()
        .rev()
        .skip(1)
        .find(|r| {
            r.info
                .as_ref()
                .is_some_and(|i| matches!(i.status, Status::Deployed | Status::Superseded))
        })
        .map(|r| r.version);
    Observed {
        latest,
        rollback_target,
        desired: desired.clone(),
        force,
        install_failures: s.install_failures,
        upgrade_failures: s.upgrade_failures,
        last_action: s.last_attempted_release_action,
        policy: Policy::from_spec(hr),
    }
}

/// Whether a wheelhouse engine stopped in `r`'s health check: `r` is pending and carries
/// the owner label only a wheelhouse engine writes, and status.wait (written when the wait
/// began, and only then without a hook) names it. A wait is the one step an engine ends
/// early; everything before it (pre hooks, apply, prune) finished.
pub(super) fn left_waiting(s: &HelmReleaseStatus, r: &Release) -> bool {
    let pending = r.info.as_ref().is_some_and(|i| i.status.is_pending());
    pending
        && r.labels.contains_key(actions::OWNER_LABEL)
        && s.wait
            .as_ref()
            .is_some_and(|w| w.revision == r.version && w.hook.is_none())
}

/// Why the release is Ready: what the last action that made it so said, or else what the
/// newest revision says (a first one was installed, a later one upgraded).
pub(super) fn success_reason(
    status: &HelmReleaseStatus,
    latest: Option<&Release>,
) -> (&'static str, String) {
    if let Some(ready) = status
        .conditions
        .iter()
        .find(|c| c.type_ == condition::READY && c.status == "True")
    {
        let r = match ready.reason.as_str() {
            reason::INSTALL_SUCCEEDED => reason::INSTALL_SUCCEEDED,
            reason::TEST_SUCCEEDED => reason::TEST_SUCCEEDED,
            reason::ROLLBACK_SUCCEEDED => reason::ROLLBACK_SUCCEEDED,
            _ => reason::UPGRADE_SUCCEEDED,
        };
        return (r, ready.message.clone());
    }
    let version = latest.map_or(0, |r| r.version);
    let r = if version <= 1 {
        reason::INSTALL_SUCCEEDED
    } else {
        reason::UPGRADE_SUCCEEDED
    };
    (r, format!("Helm release revision {version} is deployed"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ReleaseAction;
    use crate::engine::actions::Outcome;
    use crate::engine::actions::install_or_upgrade;
    use crate::engine::plan::{self, Next};
    use crate::engine::worker::{conditions, stored, test_release};

    fn desired() -> Desired {
        Desired {
            chart_name: "app".into(),
            chart_version: "1.0.0".into(),
            config_digest: crate::helm::values::digest(&serde_json::Map::new()),
            source_revision: None,
            post_renderers: None,
            common_metadata: None,
            values_files: None,
        }
    }

    fn with(conditions: &[(&str, Truth, &str)], counters: (i64, i64, i64)) -> HelmReleaseStatus {
        let mut s = HelmReleaseStatus {
            failures: counters.0,
            install_failures: counters.1,
            upgrade_failures: counters.2,
            ..HelmReleaseStatus::default()
        };
        for (type_, truth, r) in conditions {
            status::set(&mut s, type_, *truth, r, "before", Some(1));
        }
        s
    }

    fn counters(s: &HelmReleaseStatus) -> (i64, i64, i64) {
        (s.failures, s.install_failures, s.upgrade_failures)
    }

    #[test]
    fn request_tokens_are_taken_once() {
        let stalled = || {
            with(
                &[(condition::STALLED, Truth::True, reason::RETRIES_EXCEEDED)],
                (3, 1, 2),
            )
        };
        let handled = |mut s: HelmReleaseStatus| {
            s.last_handled_reset_at = Some("r1".into());
            s.last_handled_reconcile_at = Some("q1".into());
            s.last_handled_cancel_wait_at = Some("c1".into());
            s
        };
        // (annotations, status before, counters after, still stalled, handled tokens after)
        let cases = [
            ("", stalled(), (3, 1, 2), true, [None, None, None]),
            (
                "resetAt: r1",
                stalled(),
                (0, 0, 0),
                false,
                [Some("r1"), None, None],
            ),
            (
                "resetAt: r1",
                handled(stalled()),
                (3, 1, 2),
                true,
                [Some("r1"), Some("q1"), Some("c1")],
            ),
            (
                "resetAt: r2, requestedAt: q2, cancelWaitAt: c2",
                handled(stalled()),
                (0, 0, 0),
                false,
                [Some("r2"), Some("q2"), Some("c2")],
            ),
            (
                "requestedAt: q1, cancelWaitAt: c1",
                stalled(),
                (3, 1, 2),
                true,
                [None, Some("q1"), Some("c1")],
            ),
        ];
        for (tokens, before, after, still_stalled, handled) in cases {
            let mut hr = test_release("");
            let yaml = tokens
                .replace("resetAt", annotations::RESET_AT)
                .replace("requestedAt", annotations::RECONCILE_REQUESTED_AT)
                .replace("cancelWaitAt", annotations::CANCEL_WAIT_AT);
            hr.metadata.annotations = crate::text::yaml::from_str(&format!("{{{yaml}}}")).unwrap();
            let mut s = before;
            take_tokens(&mut s, &hr);
            assert_eq!(counters(&s), after, "{tokens}");
            let stalled = s.conditions.iter().any(|c| c.type_ == condition::STALLED);
            assert_eq!(stalled, still_stalled, "{tokens}");
            let got = [
                s.last_handled_reset_at.as_deref(),
                s.last_handled_reconcile_at.as_deref(),
                s.last_handled_cancel_wait_at.as_deref(),
            ];
            assert_eq!(got, handled, "{tokens}");
        }
    }

    #[test]
    fn a_new_desired_state_gets_fresh_retries() {
        let attempted = |generation: i64, version: &str, digest: &str| {
            let mut s = with(
                &[(condition::STALLED, Truth::True, reason::RETRIES_EXCEEDED)],
                (2, 0, 2),
            );
            s.last_attempted_generation = Some(generation);
            s.last_attempted_revision = Some(version.into());
            s.last_attempted_config_digest = Some(digest.into());
            s
        };
        let same = desired().config_digest;
        let cases = [
            ("same desired state", attempted(3, "1.0.0", &same), false),
            ("new generation", attempted(2, "1.0.0", &same), true),
            ("new chart version", attempted(3, "0.9.0", &same), true),
            ("new values", attempted(3, "1.0.0", "sha256:old"), true),
            ("nothing attempted yet", HelmReleaseStatus::default(), true),
        ];
        for (what, mut s, fresh) in cases {
            fresh_retries(&mut s, &desired(), Some(3));
            let reset = counters(&s) == (0, 0, 0)
                && !s.conditions.iter().any(|c| c.type_ == condition::STALLED);
            assert_eq!(reset, fresh, "{what}");
        }
    }

    #[test]
    fn in_sync_keeps_the_reason_of_what_made_it_ready() {
        let ready = |r: &str| {
            let mut s = with(
                &[
                    (condition::READY, Truth::True, r),
                    (condition::RECONCILING, Truth::True, reason::PROGRESSING),
                    (condition::STALLED, Truth::True, reason::RETRIES_EXCEEDED),
                ],
                (0, 0, 0),
            );
            s.conditions[0].message = "what it said".into();
            s
        };
        let not_ready = || {
            with(
                &[(condition::READY, Truth::False, reason::TEST_FAILED)],
                (0, 0, 0),
            )
        };
        // (status before, newest version, Ready reason and message after)
        let cases = [
            (
                ready(reason::INSTALL_SUCCEEDED),
                1,
                reason::INSTALL_SUCCEEDED,
                "what it said",
            ),
            (
                ready(reason::TEST_SUCCEEDED),
                2,
                reason::TEST_SUCCEEDED,
                "what it said",
            ),
            (
                ready(reason::ROLLBACK_SUCCEEDED),
                3,
                reason::ROLLBACK_SUCCEEDED,
                "what it said",
            ),
            (
                ready(reason::UNLOCKED),
                3,
                reason::UPGRADE_SUCCEEDED,
                "what it said",
            ),
            (
                not_ready(),
                1,
                reason::INSTALL_SUCCEEDED,
                "Helm release revision 1 is deployed",
            ),
            (
                not_ready(),
                4,
                reason::UPGRADE_SUCCEEDED,
                "Helm release revision 4 is deployed",
            ),
            (
                HelmReleaseStatus::default(),
                0,
                reason::INSTALL_SUCCEEDED,
                "Helm release revision 0 is deployed",
            ),
        ];
        for (mut s, version, r, message) in cases {
            let latest = (version > 0).then(|| stored(version, Status::Deployed, ""));
            in_sync(&mut s, latest.as_ref(), Some(5));
            assert_eq!(conditions(&s), [("Ready", "True", r)], "{r} v{version}");
            assert_eq!(s.conditions[0].message, message);
            assert_eq!(s.observed_generation, Some(5));
        }
    }

    #[test]
    fn a_stall_keeps_the_failure_that_caused_it_on_ready() {
        let stall = reason::RETRIES_EXCEEDED;
        // (Ready before, Ready reason after)
        let cases = [
            (
                Some((Truth::False, reason::UPGRADE_FAILED)),
                reason::UPGRADE_FAILED,
            ),
            (
                Some((Truth::False, reason::TEST_FAILED)),
                reason::TEST_FAILED,
            ),
            // An operator's cancel used up the retries: the dashboard keeps reading
            // "Canceled" until the next action.
            (
                Some((Truth::False, reason::HEALTH_CHECK_CANCELED)),
                reason::HEALTH_CHECK_CANCELED,
            ),
            (Some((Truth::False, reason::PROGRESSING)), stall),
            (Some((Truth::False, reason::DEPENDENCY_NOT_READY)), stall),
            (Some((Truth::True, reason::UPGRADE_SUCCEEDED)), stall),
            (None, stall),
        ];
        for (ready, after) in cases {
            let mut s = with(
                &[(condition::RECONCILING, Truth::True, reason::PROGRESSING)],
                (1, 0, 1),
            );
            if let Some((truth, r)) = ready {
                status::set(&mut s, condition::READY, truth, r, "before", Some(1));
            }
            nothing_more_to_try(&mut s, stall, "no retries are left", Some(2));
            let mut got = conditions(&s);
            got.sort_unstable();
            assert_eq!(
                got,
                [("Ready", "False", after), ("Stalled", "True", stall)],
                "{ready:?}"
            );
            assert_eq!(s.observed_generation, Some(2));
        }
    }

    #[test]
    fn observe_reads_the_newest_revision_and_the_rollback_target() {
        let interrupted = crate::engine::actions::unlock::description(Status::PendingUpgrade);
        // (history, newest version and status, interrupted, rollback target)
        let cases = [
            (vec![], None, false, None),
            (
                vec![stored(1, Status::Deployed, "Install complete")],
                Some((1, Status::Deployed)),
                false,
                None,
            ),
            (
                vec![
                    stored(1, Status::Superseded, ""),
                    stored(2, Status::Deployed, ""),
                    stored(3, Status::Failed, "Upgrade \"a\" failed"),
                ],
                Some((3, Status::Failed)),
                false,
                Some(2),
            ),
            (
                vec![
                    stored(1, Status::Superseded, ""),
                    stored(2, Status::Failed, ""),
                    stored(3, Status::Failed, &interrupted),
                ],
                Some((3, Status::Failed)),
                true,
                Some(1),
            ),
            (
                vec![stored(1, Status::Failed, ""), stored(2, Status::Failed, "")],
                Some((2, Status::Failed)),
                false,
                None,
            ),
        ];
        let hr = test_release("");
        for (history, newest, was_interrupted, target) in cases {
            let s = HelmReleaseStatus {
                install_failures: 1,
                upgrade_failures: 2,
                last_attempted_release_action: Some(ReleaseAction::Upgrade),
                ..HelmReleaseStatus::default()
            };
            let o = observe(&s, &hr, &history, &desired(), true);
            let latest = o.latest.as_ref();
            assert_eq!(latest.map(|l| (l.version, l.status)), newest);
            assert_eq!(latest.is_some_and(|l| l.interrupted), was_interrupted);
            // Stored with the desired chart and values: in sync.
            assert!(latest.is_none_or(|l| l.config_digest == desired().config_digest));
            assert_eq!(o.rollback_target, target, "{newest:?}");
            assert_eq!((o.install_failures, o.upgrade_failures), (1, 2));
            assert_eq!(o.last_action, Some(ReleaseAction::Upgrade));
            assert!(o.force);
        }
    }

    /// A revision made with upgrade.preserveValues stores merged values: it is in sync
    /// while the spec's values are those it was made from (its spec-values label), and
    /// not once they change, or once preserveValues is turned off (then the stored
    /// values are compared, as for any revision).
    #[test]
    fn a_revision_that_kept_values_is_compared_by_the_specs_values() {
        let mut made = stored(2, Status::Deployed, "Upgrade complete");
        made.config
            .insert("kept".into(), serde_json::json!("from revision 1"));
        made.labels.insert(
            crate::helm::release::MADE_BY_LABEL.into(),
            "wheelhouse".into(),
        );
        made.labels.insert(
            crate::helm::release::SPEC_VALUES_LABEL.into(),
            crate::engine::run::spec_values_label(&desired().config_digest),
        );
        let history = vec![stored(1, Status::Superseded, ""), made];
        let s = HelmReleaseStatus::default();
        let digest = |hr: &HelmRelease, desired: &Desired| {
            observe(&s, hr, &history, desired, false)
                .latest
                .unwrap()
                .config_digest
        };
        let preserving = test_release("upgrade: {preserveValues: true}");
        assert_eq!(digest(&preserving, &desired()), desired().config_digest);
        let mut changed = desired();
        changed.config_digest = crate::helm::values::digest(&serde_json::Map::from_iter([(
            "greeting".to_owned(),
            serde_json::json!("hey"),
        )]));
        assert_ne!(digest(&preserving, &changed), changed.config_digest);
        assert_ne!(
            digest(&test_release(""), &desired()),
            desired().config_digest
        );
    }

    /// An install or upgrade failure as the worker goes through it: recorded by the
    /// action, observed, planned; a stall recorded as the planner says.
    #[test]
    fn a_failure_is_remediated_while_retries_remain_then_stalls() {
        use ReleaseAction::{Install, Upgrade};
        let upgrade_history = || {
            vec![
                stored(1, Status::Superseded, ""),
                stored(2, Status::Failed, "Upgrade \"a\" failed"),
            ]
        };
        let install_history = || vec![stored(1, Status::Failed, "Install \"a\" failed")];
        let retries_exceeded = |what: &str| Next::Stalled {
            reason: reason::RETRIES_EXCEEDED,
            message: format!(
                "{what} failed 1 time(s) and no retries are left; change the spec or set the resetAt annotation to try again"
            ),
        };
        // (spec, action, history, counters before, next, Ready and Stalled reasons after)
        let cases = [
            (
                "upgrade: {remediation: {retries: 1}}",
                Upgrade,
                upgrade_history(),
                (0, 0, 0),
                Next::Rollback { to: 1 },
                (reason::UPGRADE_FAILED, None),
            ),
            (
                // The last failure is remediated too, as retries are configured.
                "upgrade: {remediation: {retries: 1}}",
                Upgrade,
                upgrade_history(),
                (1, 0, 1),
                Next::Rollback { to: 1 },
                (reason::UPGRADE_FAILED, None),
            ),
            (
                "upgrade: {remediation: {retries: -1}}",
                Upgrade,
                upgrade_history(),
                (9, 0, 9),
                Next::Rollback { to: 1 },
                (reason::UPGRADE_FAILED, None),
            ),
            (
                "",
                Upgrade,
                upgrade_history(),
                (0, 0, 0),
                retries_exceeded("upgrade"),
                (reason::UPGRADE_FAILED, Some(reason::RETRIES_EXCEEDED)),
            ),
            (
                "install: {remediation: {retries: 2}}",
                Install,
                install_history(),
                (0, 0, 0),
                Next::Uninstall,
                (reason::INSTALL_FAILED, None),
            ),
            (
                "",
                Install,
                install_history(),
                (0, 0, 0),
                retries_exceeded("install"),
                (reason::INSTALL_FAILED, Some(reason::RETRIES_EXCEEDED)),
            ),
        ];
        for (spec, action, history, before, next, (ready, stalled)) in cases {
            let hr = test_release(spec);
            let mut s = with(&[], before);
            s.last_attempted_release_action = Some(action);
            let failed_reason = if action == Install {
                reason::INSTALL_FAILED
            } else {
                reason::UPGRADE_FAILED
            };
            let failure = Outcome::Failed {
                reason: failed_reason,
                message: "it broke".into(),
            };
            install_or_upgrade::record(&mut s, &failure, Some(1));
            let planned = plan::next(&observe(&s, &hr, &history, &desired(), false));
            assert_eq!(planned, next, "{spec} {action:?} {before:?}");
            if let Next::Stalled { reason: r, message } = &planned {
                nothing_more_to_try(&mut s, r, message, Some(1));
            }
            let reason_of = |type_: &str| {
                s.conditions
                    .iter()
                    .find(|c| c.type_ == type_)
                    .map(|c| c.reason.as_str())
            };
            assert_eq!(reason_of(condition::READY), Some(ready), "{spec}");
            assert_eq!(reason_of(condition::STALLED), stalled, "{spec}");
        }
    }

    /// Failed tests count against the retries either way; `test.ignoreFailures` decides
    /// whether they are remediated or the release is left in sync.
    #[test]
    fn failed_tests_are_remediated_unless_ignored() {
        let mut tested = stored(2, Status::Deployed, "Upgrade complete");
        tested.hooks = vec![crate::helm::release::Hook {
            events: vec![crate::helm::release::hook_event::TEST.into()],
            last_run: crate::helm::release::HookExecution {
                phase: crate::helm::release::HookPhase::Failed,
                ..Default::default()
            },
            ..Default::default()
        }];
        let history = vec![stored(1, Status::Superseded, ""), tested];
        let cases = [
            ("test: {enable: true}", Next::Rollback { to: 1 }),
            ("test: {enable: true, ignoreFailures: true}", Next::InSync),
        ];
        for (spec, next) in cases {
            let hr = test_release(&format!("{spec}, upgrade: {{remediation: {{retries: 3}}}}"));
            let mut s = with(&[], (0, 0, 0));
            s.last_attempted_release_action = Some(ReleaseAction::Upgrade);
            let failure = Outcome::Failed {
                reason: reason::TEST_FAILED,
                message: "it broke".into(),
            };
            crate::engine::actions::test::record(&mut s, &failure, Some(1));
            assert_eq!(counters(&s), (1, 0, 1), "{spec}");
            let planned = plan::next(&observe(&s, &hr, &history, &desired(), false));
            assert_eq!(planned, next, "{spec}");
        }
    }
}

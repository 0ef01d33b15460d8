//! The decision of what to do next: a pure function of what the engine observed
//! (HelmRelease spec and status, the newest stored Helm revision, the desired chart and
//! values), in the style of Flux helm-controller's state → action loop. No IO here; the
//! worker gathers an [`Observed`], asks [`next`], runs the action, and asks again.

use crate::api::conditions::reason;
use crate::api::{ActionStrategy, HelmRelease, ReleaseAction, RemediationStrategy};
use crate::helm::release::{self, Release, Status};

/// What the chart source and values resolved to for this attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub chart_name: String,
    pub chart_version: String,
    pub config_digest: String,
    /// A Git chart's `<ref>@sha1:<commit>`: each new commit is a new desired state.
    pub source_revision: Option<String>,
    /// The digest of the spec's post-renderers, where they change the render.
    pub post_renderers: Option<String>,
    /// The digest of `spec.commonMetadata` (none when unset or empty), as a revision's
    /// [`crate::helm::release::COMMON_METADATA_LABEL`] keeps it.
    pub common_metadata: Option<String>,
    /// The digest of the chart values `chart.valuesFiles` make (none: the chart's own),
    /// as a revision's [`crate::helm::release::VALUES_FILES_LABEL`] keeps it.
    pub values_files: Option<String>,
}

impl Desired {
    pub fn source_commit(&self) -> Option<&str> {
        crate::api::commit_of(self.source_revision.as_deref()?)
    }

    pub fn manifest_digest(&self) -> Option<&str> {
        crate::api::manifest_digest_of(self.source_revision.as_deref()?)
    }
}

/// The newest Helm revision, reduced to what the decision needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Latest {
    pub version: i32,
    pub status: Status,
    pub chart_name: String,
    pub chart_version: String,
    pub config_digest: String,
    /// The Git commit the revision was made from (its source-commit label).
    pub source_commit: Option<String>,
    /// The start of the OCI manifest digest it was made from (its source-digest label).
    pub source_digest: Option<String>,
    /// The digest of the post-renderers it was rendered with (its post-renderers label;
    /// none: rendered without). A revision another tool wrote says nothing of them: the
    /// worker gives it the desired ones.
    pub post_renderers: Option<String>,
    /// The commonMetadata digest it was made with (its common-metadata label; none: made
    /// without commonMetadata).
    pub common_metadata: Option<String>,
    /// The digest of the chart values its valuesFiles made (its values-files label;
    /// none: the chart's own). A revision another tool wrote: the desired ones.
    pub values_files: Option<String>,
    pub tests: TestState,
    /// The revision failed because an engine stopped mid-action and it was unlocked,
    /// not because of the release: it is retried rather than remediated.
    pub interrupted: bool,
    /// A wheelhouse engine stopped (lost its Lease, the API server went away, SIGTERM)
    /// during this pending revision's health check: everything before the wait is done.
    pub left_waiting: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestState {
    /// The chart has no test hooks.
    NoTests,
    NotRun,
    Passed,
    Failed,
}

/// Remediation and test settings from the spec, with defaults applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    pub install_retries: i32,
    pub upgrade_retries: i32,
    pub strategy: RemediationStrategy,
    /// Upgrade remediation's `remediateLastFailure`, Flux's default applied.
    pub remediate_last_failure: bool,
    /// Install remediation's `remediateLastFailure` (Flux's default: false).
    pub install_remediate_last_failure: bool,
    pub test_enabled: bool,
    /// Whether a failed test is ignored after an upgrade: `upgrade.remediation.
    /// ignoreTestFailures`, else `test.ignoreFailures` (Flux's `MustIgnoreTestFailures`).
    pub test_ignore_failures: bool,
    /// The same after an install (`install.remediation.ignoreTestFailures`).
    pub install_ignore_test_failures: bool,
    /// `install.strategy` / `upgrade.strategy` `RetryOnFailure`: the retry interval.
    pub install_retry: Option<std::time::Duration>,
    pub upgrade_retry: Option<std::time::Duration>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub latest: Option<Latest>,
    /// The newest revision older than `latest` that was deployed or superseded.
    pub rollback_target: Option<i32>,
    pub desired: Desired,
    /// A `forceAt` token not handled yet.
    pub force: bool,
    pub install_failures: i64,
    pub upgrade_failures: i64,
    pub last_action: Option<ReleaseAction>,
    pub policy: Policy,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    Install,
    Upgrade,
    Test,
    Rollback {
        to: i32,
    },
    Uninstall,
    /// Go on with the health check of a pending revision an engine left mid-wait, the
    /// desired state unchanged: its wait continues, no revision is marked failed.
    Resume {
        revision: i32,
    },
    /// Mark a pending revision no live worker owns as failed, so work can go on.
    Unlock {
        revision: i32,
    },
    /// Nothing to do: the release matches the desired state.
    InSync,
    /// Nothing more will be tried until the desired state changes or resetAt is set.
    Stalled {
        reason: &'static str,
        message: String,
    },
}

/// The next action for the observed state.
pub fn next(o: &Observed) -> Next {
    let Some(latest) = &o.latest else {
        return install_unless_exhausted(o);
    };
    match latest.status {
        Status::Uninstalled => install_unless_exhausted(o),
        Status::PendingInstall | Status::PendingUpgrade
            if latest.left_waiting && !o.force && in_sync(latest, &o.desired) =>
        {
            Next::Resume {
                revision: latest.version,
            }
        }
        s if s.is_pending() || s == Status::Uninstalling => Next::Unlock {
            revision: latest.version,
        },
        Status::Failed if latest.interrupted => upgrade_unless_exhausted(o),
        Status::Failed => after_failure(o, latest),
        Status::Deployed if latest.tests == TestState::Failed && !ignores_test_failures(o) => {
            after_failure(o, latest)
        }
        // Deployed, superseded (a wait we cancelled for a newer state), or unknown.
        _ => {
            if o.force || !in_sync(latest, &o.desired) {
                upgrade_unless_exhausted(o)
            } else if o.policy.test_enabled && latest.tests == TestState::NotRun {
                Next::Test
            } else if latest.status == Status::Deployed {
                Next::InSync
            } else {
                // Superseded/unknown newest revision with nothing new to apply: apply it
                // again so the release ends in a deployed revision.
                upgrade_unless_exhausted(o)
            }
        }
    }
}

fn in_sync(latest: &Latest, desired: &Desired) -> bool {
    latest.chart_name == desired.chart_name
        && (latest.chart_version == desired.chart_version || flux_suffixed(latest, desired))
        && latest.config_digest == desired.config_digest
        // Post-renderers added, changed or removed: the render changes.
        && latest.post_renderers == desired.post_renderers
        // valuesFiles added, changed or removed: the chart's values change (Flux builds a
        // new chart artifact).
        && latest.values_files == desired.values_files
        // A revision without the commit label (the helm CLI's, or made before Git
        // sources) is brought to the commit once; Flux's says it in its version.
        && desired.source_commit().is_none_or(|c| {
            latest.source_commit.as_deref() == Some(c) || flux_suffixed(latest, desired)
        })
        // A revision made before digests were recorded cannot be told apart: in sync.
        && match (desired.manifest_digest(), latest.source_digest.as_deref()) {
            (Some(d), Some(kept)) => d.starts_with(kept),
            _ => true,
        }
        // commonMetadata added, changed or removed: the objects need it (Flux upgrades on
        // a changed commonMetadata digest too).
        && match (desired.common_metadata.as_deref(), latest.common_metadata.as_deref()) {
            (None, None) => true,
            (Some(d), Some(kept)) => d.starts_with(kept),
            _ => false,
        }
}

/// The retry interval of the strategy of the install or upgrade attempted last, when it
/// is `RetryOnFailure` (Flux's "active retry"): its failures are not remediated and never
/// stall the release, they are tried again (as an upgrade) after the interval.
pub fn active_retry(
    last_action: Option<ReleaseAction>,
    policy: &Policy,
) -> Option<std::time::Duration> {
    match last_action? {
        ReleaseAction::Install => policy.install_retry,
        ReleaseAction::Upgrade => policy.upgrade_retry,
    }
}

/// Flux's helm-controller records a chart from an OCIRepository (or Git, with its
/// `Revision` strategy) as `<version>+<first 12 hex of the digest or commit>`: the same
/// chart as `<version>` from that digest or commit, so a migrated release is in sync.
fn flux_suffixed(latest: &Latest, desired: &Desired) -> bool {
    let Some((version, suffix)) = latest.chart_version.rsplit_once('+') else {
        return false;
    };
    let hex = |s: &str| s.len() == 12 && s.bytes().all(|b| b.is_ascii_hexdigit());
    version == desired.chart_version
        && hex(suffix)
        && (desired
            .manifest_digest()
            .is_some_and(|d| d.trim_start_matches("sha256:").starts_with(suffix))
            || desired
                .source_commit()
                .is_some_and(|c| c.starts_with(suffix)))
}

/// Whether a failed test is ignored: by the remediation of the action attempted last
/// (Flux's active remediation), `test.ignoreFailures` when it says nothing.
fn ignores_test_failures(o: &Observed) -> bool {
    match o.last_action {
        Some(ReleaseAction::Install) => o.policy.install_ignore_test_failures,
        _ => o.policy.test_ignore_failures,
    }
}

/// `retries` < 0 means retry forever.
/// What the engine will do if the install or upgrade now running (revision `version`)
/// fails, its wait timing out say: the planner's own answer for the state that failure
/// leaves (the revision failed, the failure counted), so the forecast is the decision
/// itself and never a second copy of its rules. `chart_of` names a revision's chart.
/// Reads `upgrade fails -> rollback to revision 6 (webapp 1.2.3); 0 retries left`.
pub fn if_it_fails(
    o: &Observed,
    action: ReleaseAction,
    version: i32,
    chart_of: impl Fn(i32) -> Option<String>,
) -> String {
    let d = &o.desired;
    let mut after = o.clone();
    after.latest = Some(Latest {
        version,
        status: Status::Failed,
        chart_name: d.chart_name.clone(),
        chart_version: d.chart_version.clone(),
        config_digest: d.config_digest.clone(),
        source_commit: d.source_commit().map(str::to_owned),
        source_digest: d.manifest_digest().map(str::to_owned),
        post_renderers: d.post_renderers.clone(),
        common_metadata: d.common_metadata.clone(),
        values_files: d.values_files.clone(),
        tests: TestState::NotRun,
        interrupted: false,
        left_waiting: false,
    });
    after.force = false;
    // The revision deployed before the attempt is what a rollback would restore.
    if let Some(before) = &o.latest
        && matches!(before.status, Status::Deployed | Status::Superseded)
    {
        after.rollback_target = Some(before.version);
    }
    after.last_action = Some(action);
    let (verb, failures, retries) = match action {
        ReleaseAction::Install => {
            after.install_failures += 1;
            ("install", after.install_failures, o.policy.install_retries)
        }
        ReleaseAction::Upgrade => {
            after.upgrade_failures += 1;
            ("upgrade", after.upgrade_failures, o.policy.upgrade_retries)
        }
    };
    let retry = active_retry(after.last_action, &o.policy);
    let then = match next(&after) {
        Next::Rollback { to } => match chart_of(to) {
            Some(chart) => format!("rollback to revision {to} ({chart})"),
            None => format!("rollback to revision {to}"),
        },
        Next::Uninstall => "uninstall".to_owned(),
        Next::Upgrade | Next::Install if retry.is_some() => format!(
            "upgrade again after {}",
            crate::api::Duration::from(retry.unwrap_or_default())
        ),
        Next::Upgrade => "upgrade again".to_owned(),
        Next::Install => "install again".to_owned(),
        Next::Stalled { .. } => {
            "stalled: nothing more is tried until the spec changes or resetAt is set".to_owned()
        }
        other => format!("{other:?}").to_lowercase(),
    };
    let left = if retry.is_some() {
        "retried until it succeeds (RetryOnFailure)".to_owned()
    } else if retries < 0 {
        "retries unlimited".to_owned()
    } else {
        // `retries` tries after the first: with `failures` counted, this many remain.
        match (i64::from(retries) + 1 - failures).max(0) {
            1 => "1 retry left".to_owned(),
            n => format!("{n} retries left"),
        }
    };
    format!("{verb} fails -> {then}; {left}")
}

fn exhausted(failures: i64, retries: i32) -> bool {
    retries >= 0 && failures > i64::from(retries)
}

fn install_unless_exhausted(o: &Observed) -> Next {
    if exhausted(o.install_failures, o.policy.install_retries) && retrying(o).is_none() {
        stalled_retries("install", o.install_failures)
    } else {
        Next::Install
    }
}

fn upgrade_unless_exhausted(o: &Observed) -> Next {
    if exhausted(o.upgrade_failures, o.policy.upgrade_retries) && retrying(o).is_none() {
        stalled_retries("upgrade", o.upgrade_failures)
    } else {
        Next::Upgrade
    }
}

fn stalled_retries(what: &str, failures: i64) -> Next {
    Next::Stalled {
        reason: reason::RETRIES_EXCEEDED,
        message: format!(
            "{what} failed {failures} time(s) and no retries are left; change the spec or set the resetAt annotation to try again"
        ),
    }
}

fn retrying(o: &Observed) -> Option<std::time::Duration> {
    active_retry(o.last_action, &o.policy)
}

/// The newest revision failed (its action, its wait or its tests).
fn after_failure(o: &Observed, latest: &Latest) -> Next {
    // RetryOnFailure: as `flux reconcile --force` with no retries, an upgrade of the
    // failed revision; never a remediation.
    if retrying(o).is_some() {
        return Next::Upgrade;
    }
    let action = o.last_action.unwrap_or(if latest.version == 1 {
        ReleaseAction::Install
    } else {
        ReleaseAction::Upgrade
    });
    let (failures, retries) = match action {
        ReleaseAction::Install => (o.install_failures, o.policy.install_retries),
        ReleaseAction::Upgrade => (o.upgrade_failures, o.policy.upgrade_retries),
    };
    let retries_left = !exhausted(failures, retries);
    if retries_left && !in_sync(latest, &o.desired) {
        // A newer desired state supersedes the failure: try it directly.
        return Next::Upgrade;
    }
    let remediate_last = match action {
        ReleaseAction::Install => o.policy.install_remediate_last_failure,
        ReleaseAction::Upgrade => o.policy.remediate_last_failure,
    };
    if !retries_left && !remediate_last {
        return stalled_retries(
            match action {
                ReleaseAction::Install => "install",
                ReleaseAction::Upgrade => "upgrade",
            },
            failures,
        );
    }
    match (action, o.policy.strategy) {
        (ReleaseAction::Install, _) | (ReleaseAction::Upgrade, RemediationStrategy::Uninstall) => {
            Next::Uninstall
        }
        (ReleaseAction::Upgrade, RemediationStrategy::Rollback) => match o.rollback_target {
            Some(to) => Next::Rollback { to },
            None => Next::Stalled {
                reason: reason::MISSING_ROLLBACK_TARGET,
                message: format!(
                    "revision {} failed and there is no earlier successful revision to roll back to",
                    latest.version
                ),
            },
        },
    }
}

impl Policy {
    /// The spec's settings with Flux's defaults: no retries; remediate the last failure
    /// when retries are configured.
    pub fn from_spec(hr: &HelmRelease) -> Self {
        let install = hr
            .spec
            .install
            .as_ref()
            .and_then(|i| i.remediation.as_ref());
        let install_retries = install.map_or(0, |r| r.retries);
        let upgrade = hr
            .spec
            .upgrade
            .as_ref()
            .and_then(|u| u.remediation.as_ref());
        let upgrade_retries = upgrade.map_or(0, |r| r.retries);
        let test = hr.spec.test.clone().unwrap_or_default();
        let install_strategy = hr.spec.install.as_ref().and_then(|i| i.strategy.as_ref());
        let upgrade_strategy = hr.spec.upgrade.as_ref().and_then(|u| u.strategy.as_ref());
        Self {
            install_retry: ActionStrategy::retry(install_strategy),
            upgrade_retry: ActionStrategy::retry(upgrade_strategy),
            install_retries,
            upgrade_retries,
            strategy: upgrade.map(|r| r.strategy).unwrap_or_default(),
            remediate_last_failure: upgrade
                .and_then(|r| r.remediate_last_failure)
                .unwrap_or(upgrade_retries != 0),
            install_remediate_last_failure: install
                .and_then(|r| r.remediate_last_failure)
                .unwrap_or(false),
            test_enabled: test.enable,
            test_ignore_failures: upgrade
                .and_then(|r| r.ignore_test_failures)
                .unwrap_or(test.ignore_failures),
            install_ignore_test_failures: install
                .and_then(|r| r.ignore_test_failures)
                .unwrap_or(test.ignore_failures),
        }
    }
}

impl TestState {
    /// Derived from the `test` hooks' last runs, as Flux does.
    pub fn of(release: &Release) -> Self {
        let tests: Vec<_> = release
            .hooks
            .iter()
            .filter(|h| h.events.iter().any(|e| e == release::hook_event::TEST))
            .collect();
        if tests.is_empty() {
            Self::NoTests
        } else if tests
            .iter()
            .any(|h| h.last_run.phase == release::HookPhase::Failed)
        {
            Self::Failed
        } else if tests
            .iter()
            .all(|h| h.last_run.phase == release::HookPhase::Succeeded)
        {
            Self::Passed
        } else {
            Self::NotRun
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desired() -> Desired {
        Desired {
            chart_name: "app".into(),
            chart_version: "1.1.0".into(),
            config_digest: "sha256:new".into(),
            source_revision: None,
            post_renderers: None,
            values_files: None,
            common_metadata: None,
        }
    }

    fn latest(version: i32, status: Status) -> Latest {
        Latest {
            version,
            status,
            chart_name: "app".into(),
            chart_version: "1.1.0".into(),
            config_digest: "sha256:new".into(),
            source_commit: None,
            source_digest: None,
            post_renderers: None,
            values_files: None,
            common_metadata: None,
            tests: TestState::NoTests,
            interrupted: false,
            left_waiting: false,
        }
    }

    fn observed(latest: Option<Latest>) -> Observed {
        Observed {
            latest,
            rollback_target: None,
            desired: desired(),
            force: false,
            install_failures: 0,
            upgrade_failures: 0,
            last_action: None,
            policy: Policy {
                install_retries: 0,
                upgrade_retries: 0,
                strategy: RemediationStrategy::Rollback,
                remediate_last_failure: false,
                install_remediate_last_failure: false,
                test_enabled: false,
                test_ignore_failures: false,
                install_ignore_test_failures: false,
                install_retry: None,
                upgrade_retry: None,
            },
        }
    }

    fn stale(mut l: Latest) -> Latest {
        l.config_digest = "sha256:old".into();
        l
    }

    #[test]
    fn the_forecast_of_a_failure_is_the_planners_own_next_step() {
        let chart = |v: i32| Some(format!("app 1.0.{v}"));
        // An upgrade of revision 7 over deployed 6, no retries: rolled back to 6 when
        // remediateLastFailure says so, else stalled.
        let mut o = observed(Some(stale(latest(6, Status::Deployed))));
        o.policy.remediate_last_failure = true;
        assert_eq!(
            if_it_fails(&o, ReleaseAction::Upgrade, 7, chart),
            "upgrade fails -> rollback to revision 6 (app 1.0.6); 0 retries left"
        );
        o.policy.remediate_last_failure = false;
        assert_eq!(
            if_it_fails(&o, ReleaseAction::Upgrade, 7, chart),
            "upgrade fails -> stalled: nothing more is tried until the spec changes or \
             resetAt is set; 0 retries left"
        );
        // Two retries, one used: one left after this failure, remediated first.
        o.policy.upgrade_retries = 2;
        o.policy.remediate_last_failure = true;
        o.upgrade_failures = 1;
        assert_eq!(
            if_it_fails(&o, ReleaseAction::Upgrade, 7, chart),
            "upgrade fails -> rollback to revision 6 (app 1.0.6); 1 retry left"
        );
        // Uninstall as the remediation strategy.
        o.upgrade_failures = 0;
        o.policy.strategy = RemediationStrategy::Uninstall;
        assert_eq!(
            if_it_fails(&o, ReleaseAction::Upgrade, 7, chart),
            "upgrade fails -> uninstall; 2 retries left"
        );
        // RetryOnFailure: never remediated, upgraded again after its interval.
        let mut o = observed(Some(stale(latest(6, Status::Deployed))));
        o.policy.upgrade_retry = Some(std::time::Duration::from_secs(300));
        assert_eq!(
            if_it_fails(&o, ReleaseAction::Upgrade, 7, chart),
            "upgrade fails -> upgrade again after 5m; retried until it succeeds (RetryOnFailure)"
        );
        // A first install with Flux's defaults stalls.
        assert_eq!(
            if_it_fails(&observed(None), ReleaseAction::Install, 1, chart),
            "install fails -> stalled: nothing more is tried until the spec changes or \
             resetAt is set; 0 retries left"
        );
    }

    #[test]
    fn nothing_stored_installs() {
        assert_eq!(next(&observed(None)), Next::Install);
    }

    #[test]
    fn uninstalled_release_installs_again() {
        assert_eq!(
            next(&observed(Some(latest(3, Status::Uninstalled)))),
            Next::Install
        );
    }

    #[test]
    fn install_stalls_when_retries_are_exhausted() {
        let mut o = observed(None);
        o.install_failures = 1;
        assert!(matches!(
            next(&o),
            Next::Stalled {
                reason: reason::RETRIES_EXCEEDED,
                ..
            }
        ));
        o.policy.install_retries = 2;
        assert_eq!(next(&o), Next::Install);
        o.policy.install_retries = -1;
        o.install_failures = 50;
        assert_eq!(next(&o), Next::Install);
    }

    #[test]
    fn pending_revisions_are_unlocked() {
        for s in [
            Status::PendingInstall,
            Status::PendingUpgrade,
            Status::PendingRollback,
            Status::Uninstalling,
        ] {
            assert_eq!(
                next(&observed(Some(latest(4, s)))),
                Next::Unlock { revision: 4 },
                "{s}"
            );
        }
    }

    #[test]
    fn a_new_git_commit_is_a_new_desired_state_even_at_the_same_chart_version() {
        let commit = |c: char| std::iter::repeat_n(c, 40).collect::<String>();
        let at = |c: char| Some(format!("main@sha1:{}", commit(c)));
        let mut o = observed(Some(Latest {
            source_commit: Some(commit('a')),
            ..latest(3, Status::Deployed)
        }));
        o.desired.source_revision = at('a');
        assert_eq!(next(&o), Next::InSync);
        o.desired.source_revision = at('b');
        assert_eq!(next(&o), Next::Upgrade);
        // A revision without the label (made by the helm CLI, or before Git sources) is
        // brought to the commit once.
        o.latest.as_mut().unwrap().source_commit = None;
        assert_eq!(next(&o), Next::Upgrade);
        // Charts from anywhere else ignore the label.
        o.desired.source_revision = None;
        assert_eq!(next(&o), Next::InSync);
    }

    /// A tag pushed again with new content: same chart version, new manifest digest.
    #[test]
    fn a_new_manifest_digest_of_one_tag_is_a_new_desired_state() {
        let digest = |c: char| std::iter::repeat_n(c, 64).collect::<String>();
        let at = |c: char| Some(format!("1.0.0@sha256:{}", digest(c)));
        let mut o = observed(Some(Latest {
            source_digest: Some(digest('a')[..40].to_owned()),
            ..latest(3, Status::Deployed)
        }));
        o.desired.source_revision = at('a');
        assert_eq!(next(&o), Next::InSync);
        o.desired.source_revision = at('b');
        assert_eq!(next(&o), Next::Upgrade);
        // A revision from before digests were recorded is not upgraded for it.
        o.latest.as_mut().unwrap().source_digest = None;
        assert_eq!(next(&o), Next::InSync);
    }

    /// Post-renderers added, changed or removed change the render: a new desired state.
    #[test]
    fn a_change_of_post_renderers_alone_is_a_new_desired_state() {
        let mut o = observed(Some(latest(3, Status::Deployed)));
        assert_eq!(next(&o), Next::InSync);
        o.desired.post_renderers = Some("a".repeat(40));
        assert_eq!(next(&o), Next::Upgrade);
        o.latest.as_mut().unwrap().post_renderers = Some("a".repeat(40));
        assert_eq!(next(&o), Next::InSync);
        o.desired.post_renderers = Some("b".repeat(40));
        assert_eq!(next(&o), Next::Upgrade);
        o.desired.post_renderers = None;
        assert_eq!(next(&o), Next::Upgrade);
    }

    #[test]
    fn a_wait_an_engine_left_is_resumed_while_the_desired_state_is_unchanged() {
        let left = |status: Status| Latest {
            left_waiting: true,
            ..latest(4, status)
        };
        let resume = Next::Resume { revision: 4 };
        let unlock = Next::Unlock { revision: 4 };
        let changed = |o: &mut Observed| o.desired.config_digest = "sha256:newer".into();
        let forced = |o: &mut Observed| o.force = true;
        let same = |_: &mut Observed| {};
        type Change<'a> = &'a dyn Fn(&mut Observed);
        let cases: [(&str, Status, Change, &Next); 6] = [
            (
                "install, same desired state",
                Status::PendingInstall,
                &same,
                &resume,
            ),
            (
                "upgrade, same desired state",
                Status::PendingUpgrade,
                &same,
                &resume,
            ),
            (
                "desired state changed since",
                Status::PendingUpgrade,
                &changed,
                &unlock,
            ),
            (
                "forceAt asks for a new apply",
                Status::PendingUpgrade,
                &forced,
                &unlock,
            ),
            // A rollback's wait is not resumed: it is unlocked as before.
            ("rollback", Status::PendingRollback, &same, &unlock),
            ("uninstall", Status::Uninstalling, &same, &unlock),
        ];
        for (what, status, change, want) in cases {
            let mut o = observed(Some(left(status)));
            change(&mut o);
            assert_eq!(&next(&o), want, "{what}");
        }
    }

    #[test]
    fn a_revision_interrupted_by_a_stopped_engine_is_retried_not_remediated() {
        let mut l = latest(3, Status::Failed);
        l.interrupted = true;
        let mut o = observed(Some(l));
        o.last_action = Some(ReleaseAction::Upgrade);
        o.rollback_target = Some(2);
        o.policy.upgrade_retries = 3;
        assert_eq!(next(&o), Next::Upgrade);
    }

    #[test]
    fn deployed_and_in_sync_is_done() {
        assert_eq!(
            next(&observed(Some(latest(2, Status::Deployed)))),
            Next::InSync
        );
    }

    #[test]
    fn changed_values_or_chart_upgrade() {
        assert_eq!(
            next(&observed(Some(stale(latest(2, Status::Deployed))))),
            Next::Upgrade
        );
        let mut l = latest(2, Status::Deployed);
        l.chart_version = "1.0.0".into();
        assert_eq!(next(&observed(Some(l))), Next::Upgrade);
    }

    #[test]
    fn a_revision_flux_recorded_with_the_digest_or_commit_in_its_version_is_in_sync() {
        let digest = format!("1.1.0@sha256:4c9e5dddd402{}", "0".repeat(52));
        let commit = format!("main@sha1:0123456789ab{}", "f".repeat(28));
        for (revision, recorded, want) in [
            (digest.as_str(), "1.1.0+4c9e5dddd402", Next::InSync),
            (commit.as_str(), "1.1.0+0123456789ab", Next::InSync),
            // Another digest or version: a new desired state.
            (digest.as_str(), "1.1.0+0123456789ab", Next::Upgrade),
            (digest.as_str(), "1.0.0+4c9e5dddd402", Next::Upgrade),
            // No digest to compare with: the versions differ.
            ("", "1.1.0+4c9e5dddd402", Next::Upgrade),
        ] {
            let mut l = latest(2, Status::Deployed);
            l.chart_version = recorded.into();
            let mut o = observed(Some(l));
            o.desired.source_revision = Some(revision.to_owned()).filter(|r| !r.is_empty());
            assert_eq!(next(&o), want, "{revision} {recorded}");
        }
    }

    #[test]
    fn force_upgrades_without_change() {
        let mut o = observed(Some(latest(2, Status::Deployed)));
        o.force = true;
        assert_eq!(next(&o), Next::Upgrade);
    }

    #[test]
    fn upgrade_stalls_when_retries_are_exhausted() {
        let mut o = observed(Some(stale(latest(2, Status::Deployed))));
        o.upgrade_failures = 1;
        assert!(matches!(
            next(&o),
            Next::Stalled {
                reason: reason::RETRIES_EXCEEDED,
                ..
            }
        ));
    }

    #[test]
    fn tests_run_once_after_a_deploy_when_enabled() {
        let mut l = latest(2, Status::Deployed);
        l.tests = TestState::NotRun;
        let mut o = observed(Some(l.clone()));
        assert_eq!(next(&o), Next::InSync, "tests disabled");
        o.policy.test_enabled = true;
        assert_eq!(next(&o), Next::Test);
        l.tests = TestState::Passed;
        o.latest = Some(l);
        assert_eq!(next(&o), Next::InSync);
    }

    #[test]
    fn failed_tests_are_remediated_unless_ignored() {
        let mut l = latest(2, Status::Deployed);
        l.tests = TestState::Failed;
        let mut o = observed(Some(l));
        o.policy.test_enabled = true;
        o.policy.upgrade_retries = 1;
        o.upgrade_failures = 1;
        o.last_action = Some(ReleaseAction::Upgrade);
        o.rollback_target = Some(1);
        assert_eq!(next(&o), Next::Rollback { to: 1 });
        o.policy.test_ignore_failures = true;
        assert_eq!(next(&o), Next::InSync);
    }

    #[test]
    fn failed_upgrade_rolls_back_while_retries_remain() {
        let mut o = observed(Some(latest(3, Status::Failed)));
        o.last_action = Some(ReleaseAction::Upgrade);
        o.policy.upgrade_retries = 2;
        o.upgrade_failures = 1;
        o.rollback_target = Some(2);
        assert_eq!(next(&o), Next::Rollback { to: 2 });
    }

    #[test]
    fn failed_upgrade_without_retries_is_left_failed_and_stalls() {
        let mut o = observed(Some(latest(3, Status::Failed)));
        o.last_action = Some(ReleaseAction::Upgrade);
        o.upgrade_failures = 1;
        o.rollback_target = Some(2);
        assert!(matches!(
            next(&o),
            Next::Stalled {
                reason: reason::RETRIES_EXCEEDED,
                ..
            }
        ));
    }

    #[test]
    fn last_failure_is_remediated_when_asked_even_without_retries_left() {
        let mut o = observed(Some(latest(3, Status::Failed)));
        o.last_action = Some(ReleaseAction::Upgrade);
        o.policy.upgrade_retries = 1;
        o.policy.remediate_last_failure = true;
        o.upgrade_failures = 2;
        o.rollback_target = Some(2);
        assert_eq!(next(&o), Next::Rollback { to: 2 });
    }

    #[test]
    fn rollback_without_target_stalls() {
        let mut o = observed(Some(latest(1, Status::Failed)));
        o.last_action = Some(ReleaseAction::Upgrade);
        o.policy.upgrade_retries = 1;
        o.upgrade_failures = 1;
        assert!(matches!(
            next(&o),
            Next::Stalled {
                reason: reason::MISSING_ROLLBACK_TARGET,
                ..
            }
        ));
    }

    #[test]
    fn uninstall_strategy_uninstalls_a_failed_upgrade() {
        let mut o = observed(Some(latest(3, Status::Failed)));
        o.last_action = Some(ReleaseAction::Upgrade);
        o.policy.upgrade_retries = 1;
        o.policy.strategy = RemediationStrategy::Uninstall;
        o.upgrade_failures = 1;
        assert_eq!(next(&o), Next::Uninstall);
    }

    #[test]
    fn failed_install_is_uninstalled_while_retries_remain() {
        let mut o = observed(Some(latest(1, Status::Failed)));
        o.last_action = Some(ReleaseAction::Install);
        o.policy.install_retries = 3;
        o.install_failures = 1;
        assert_eq!(next(&o), Next::Uninstall);
    }

    #[test]
    fn a_newer_desired_state_supersedes_a_failure() {
        let mut o = observed(Some(stale(latest(3, Status::Failed))));
        o.last_action = Some(ReleaseAction::Upgrade);
        assert_eq!(next(&o), Next::Upgrade);
    }

    #[test]
    fn superseded_newest_revision_is_applied_again() {
        assert_eq!(
            next(&observed(Some(stale(latest(4, Status::Superseded))))),
            Next::Upgrade
        );
        assert_eq!(
            next(&observed(Some(latest(4, Status::Superseded)))),
            Next::Upgrade
        );
    }

    #[test]
    fn policy_defaults_follow_flux() {
        let hr: HelmRelease = crate::text::yaml::from_str(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: a}\nspec: {chart: {path: ./c}}",
        )
        .unwrap();
        let p = Policy::from_spec(&hr);
        assert_eq!((p.install_retries, p.upgrade_retries), (0, 0));
        assert!(!p.remediate_last_failure);
        assert_eq!(p.strategy, RemediationStrategy::Rollback);
        let hr: HelmRelease = crate::text::yaml::from_str(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: a}\nspec: {chart: {path: ./c}, upgrade: {remediation: {retries: 2}}}",
        )
        .unwrap();
        assert!(Policy::from_spec(&hr).remediate_last_failure);
        // Install remediation's remediateLastFailure defaults to false whatever the
        // retries (Flux's InstallRemediation), and says nothing of upgrades.
        let hr: HelmRelease = crate::text::yaml::from_str(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: a}\nspec: {chart: {path: ./c}, install: {remediation: {retries: 2}}, upgrade: {remediation: {retries: 2}}}",
        )
        .unwrap();
        let p = Policy::from_spec(&hr);
        assert!(!p.install_remediate_last_failure && p.remediate_last_failure);
        // Each action's ignoreTestFailures overrides test.ignoreFailures for it.
        let hr: HelmRelease = crate::text::yaml::from_str(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: a}\nspec: {chart: {path: ./c}, test: {enable: true, ignoreFailures: true}, install: {remediation: {ignoreTestFailures: false, remediateLastFailure: true}}}",
        )
        .unwrap();
        let p = Policy::from_spec(&hr);
        assert!(!p.install_ignore_test_failures && p.test_ignore_failures);
        assert!(p.install_remediate_last_failure);
    }

    /// Which remediation judges a failure is the one of the action attempted last (Flux's
    /// active remediation): its ignoreTestFailures and its remediateLastFailure.
    #[test]
    fn the_last_actions_remediation_judges_tests_and_the_last_failure() {
        let mut l = latest(1, Status::Deployed);
        l.tests = TestState::Failed;
        let mut o = observed(Some(l));
        o.policy.test_enabled = true;
        o.policy.test_ignore_failures = true;
        o.last_action = Some(ReleaseAction::Install);
        o.install_failures = 1;
        // After an install its own setting counts: not ignored, and with no retries and
        // no remediateLastFailure the failure stalls the release.
        assert!(matches!(next(&o), Next::Stalled { .. }), "{:?}", next(&o));
        o.policy.install_remediate_last_failure = true;
        assert_eq!(next(&o), Next::Uninstall);
        o.policy.install_ignore_test_failures = true;
        assert_eq!(next(&o), Next::InSync);
        // The upgrade's remediateLastFailure says nothing of a failed install.
        let mut o = observed(Some(latest(1, Status::Failed)));
        o.last_action = Some(ReleaseAction::Install);
        o.install_failures = 1;
        o.policy.remediate_last_failure = true;
        assert!(matches!(next(&o), Next::Stalled { .. }), "{:?}", next(&o));
    }

    /// Flux's RetryOnFailure: a failure of the install or upgrade attempted last is never
    /// remediated and never stalls the release; it is tried again as an upgrade.
    #[test]
    fn retry_on_failure_upgrades_a_failed_revision_instead_of_remediating_it() {
        let five = Some(std::time::Duration::from_secs(300));
        // (case, last action, install retry, upgrade retry, latest, failures, want)
        let cases = [
            (
                "failed install, install retries",
                ReleaseAction::Install,
                five,
                None,
                Status::Failed,
                (1, 0),
                Next::Upgrade,
            ),
            (
                "failed install, remediated: uninstalled",
                ReleaseAction::Install,
                None,
                None,
                Status::Failed,
                (1, 0),
                Next::Uninstall,
            ),
            (
                "failed upgrade, upgrade retries, any number of failures",
                ReleaseAction::Upgrade,
                None,
                five,
                Status::Failed,
                (0, 40),
                Next::Upgrade,
            ),
            (
                "failed upgrade, remediated: rolled back",
                ReleaseAction::Upgrade,
                None,
                None,
                Status::Failed,
                (0, 1),
                Next::Rollback { to: 2 },
            ),
            (
                "the strategy of the action attempted last is the one that counts",
                ReleaseAction::Upgrade,
                five,
                None,
                Status::Failed,
                (0, 1),
                Next::Rollback { to: 2 },
            ),
            (
                "an install that stored nothing, retries used up: not stalled",
                ReleaseAction::Install,
                five,
                None,
                Status::Uninstalled,
                (3, 0),
                Next::Install,
            ),
        ];
        for (what, action, install_retry, upgrade_retry, status, (i, u), want) in cases {
            let mut o = observed(Some(latest(3, status)));
            o.last_action = Some(action);
            o.policy.install_retries = 1;
            o.policy.upgrade_retries = 1;
            o.policy.remediate_last_failure = true;
            o.policy.install_retry = install_retry;
            o.policy.upgrade_retry = upgrade_retry;
            (o.install_failures, o.upgrade_failures) = (i, u);
            o.rollback_target = Some(2);
            assert_eq!(next(&o), want, "{what}");
        }
        // Without RetryOnFailure the same used-up retries stall.
        let mut o = observed(Some(stale(latest(3, Status::Deployed))));
        o.last_action = Some(ReleaseAction::Upgrade);
        o.upgrade_failures = 5;
        assert!(matches!(next(&o), Next::Stalled { .. }));
        o.policy.upgrade_retry = five;
        assert_eq!(next(&o), Next::Upgrade);
        // Failed tests too: upgraded again, not rolled back.
        let mut l = latest(3, Status::Deployed);
        l.tests = TestState::Failed;
        let mut o = observed(Some(l));
        o.last_action = Some(ReleaseAction::Upgrade);
        o.policy.test_enabled = true;
        o.upgrade_failures = 1;
        o.policy.upgrade_retries = 1;
        o.rollback_target = Some(2);
        assert_eq!(next(&o), Next::Rollback { to: 2 });
        o.policy.upgrade_retry = five;
        assert_eq!(next(&o), Next::Upgrade);
    }

    #[test]
    fn retry_strategy_defaults_follow_flux() {
        let from = |spec: &str| {
            let hr: HelmRelease = crate::text::yaml::from_str(&format!(
                "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: a}}\nspec: {{chart: {{path: ./c}}, {spec}}}"
            ))
            .unwrap();
            let p = Policy::from_spec(&hr);
            (p.install_retry, p.upgrade_retry)
        };
        let secs = |s| Some(std::time::Duration::from_secs(s));
        assert_eq!(from("install: {}"), (None, None));
        assert_eq!(
            from("install: {strategy: {name: RemediateOnFailure}}"),
            (None, None)
        );
        assert_eq!(
            from("install: {strategy: {name: RetryOnFailure}}"),
            (secs(300), None)
        );
        assert_eq!(
            from("upgrade: {strategy: {name: RetryOnFailure, retryInterval: 30s}}"),
            (None, secs(30))
        );
    }

    #[test]
    fn a_changed_common_metadata_is_a_new_desired_state() {
        let digest = |c: char| Some(std::iter::repeat_n(c, 64).collect::<String>());
        let kept = |c: char| Some(std::iter::repeat_n(c, 40).collect::<String>());
        // (desired, the revision's label, in sync)
        let cases = [
            (None, None, true),
            (digest('a'), kept('a'), true),
            (digest('a'), kept('b'), false),
            // Added, or removed: the objects must get, or lose, it.
            (digest('a'), None, false),
            (None, kept('a'), false),
        ];
        for (desired, label, in_sync) in cases {
            let mut o = observed(Some(Latest {
                common_metadata: label.clone(),
                ..latest(2, Status::Deployed)
            }));
            o.desired.common_metadata = desired.clone();
            let want = if in_sync { Next::InSync } else { Next::Upgrade };
            assert_eq!(next(&o), want, "{desired:?} vs {label:?}");
        }
    }

    #[test]
    fn test_state_comes_from_test_hooks() {
        use crate::helm::release::{Hook, HookPhase};
        let hook = |event: &str, phase| Hook {
            events: vec![event.into()],
            last_run: crate::helm::release::HookExecution {
                phase,
                ..Default::default()
            },
            ..Default::default()
        };
        let mut r = Release::default();
        assert_eq!(TestState::of(&r), TestState::NoTests);
        r.hooks = vec![
            hook("post-install", HookPhase::Succeeded),
            hook("test", HookPhase::NotRun),
        ];
        assert_eq!(TestState::of(&r), TestState::NotRun);
        r.hooks[1].last_run.phase = HookPhase::Succeeded;
        assert_eq!(TestState::of(&r), TestState::Passed);
        r.hooks.push(hook("test", HookPhase::Failed));
        assert_eq!(TestState::of(&r), TestState::Failed);
    }
}

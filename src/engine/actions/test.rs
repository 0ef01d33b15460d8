//! Helm test: the chart's test hooks against the newest revision, their results stored
//! in it (which is how the planner later sees them, as Flux does).

use super::{Note, Outcome, Owns, record_as};
use crate::api::{HelmReleaseStatus, ReleaseAction, TestFilter};
use crate::engine::run::Run;
use crate::engine::status::{condition, reason};
use crate::engine::vocabulary::Phase;
use crate::helm::release::{Hook, Release, hook_event};

/// Runs the chart's tests (hooks with `helm.sh/hook: test`) against the newest revision
/// and records their results in it.
pub async fn test(run: &mut Run<'_>, mut latest: Release) -> crate::engine::Result<Outcome> {
    run.set_phase(Phase::Testing);
    let timeout = run
        .hr
        .spec
        .test
        .as_ref()
        .and_then(|t| t.timeout)
        .unwrap_or(run.hr.spec.timeout)
        .as_std();
    let ns = run.target.namespace.clone();
    let filters = run
        .hr
        .spec
        .test
        .as_ref()
        .map(|t| t.filters.clone())
        .unwrap_or_default();
    let (skipped, mut executing) = chosen(std::mem::take(&mut latest.hooks), &filters);
    let result = run
        .run_hooks(
            &mut executing,
            latest.version,
            hook_event::TEST,
            &ns,
            timeout,
        )
        .await;
    // Stored as Helm stores them after `helm test --filter`: the skipped hooks first.
    latest.hooks = skipped.into_iter().chain(executing).collect();
    run.storage.update(&latest).await?;
    Ok(match result {
        Ok(()) => Outcome::Succeeded {
            reason: reason::TEST_SUCCEEDED,
            message: format!(
                "Helm test succeeded for release {ns}/{}.v{}",
                run.target.release_name, latest.version
            ),
        },
        Err(e) => Outcome::Failed {
            reason: reason::TEST_FAILED,
            message: format!(
                "Helm test failed for release {ns}/{}.v{}: {e}",
                run.target.release_name, latest.version
            ),
        },
    })
}

/// The hooks `helm test` skips and those it runs, by name as its `--filter` chooses
/// (Helm's `ReleaseTesting`): excluded names first, then, when any name is included,
/// only those.
fn chosen(hooks: Vec<Hook>, filters: &[TestFilter]) -> (Vec<Hook>, Vec<Hook>) {
    let names = |exclude: bool| -> Vec<&str> {
        filters
            .iter()
            .filter(|f| f.exclude == exclude)
            .map(|f| f.name.as_str())
            .collect()
    };
    let (excluded, included) = (names(true), names(false));
    let (mut skipped, mut executing): (Vec<Hook>, Vec<Hook>) = if excluded.is_empty() {
        (Vec::new(), hooks)
    } else {
        hooks
            .into_iter()
            .partition(|h| excluded.contains(&h.name.as_str()))
    };
    if !included.is_empty() {
        let (keep, skip): (Vec<Hook>, Vec<Hook>) = executing
            .into_iter()
            .partition(|h| included.contains(&h.name.as_str()));
        skipped.extend(skip);
        executing = keep;
    }
    (skipped, executing)
}

/// A test owns TestSuccess; passing makes the release Ready. A failure counts against the
/// retries of the action that deployed the tested revision (an install, else an
/// upgrade), whether or not `test.ignoreFailures` is set: that setting is the planner's,
/// which then leaves the failed tests alone instead of remediating them.
pub fn record(s: &mut HelmReleaseStatus, outcome: &Outcome, generation: Option<i64>) -> Note {
    let tested = match s.last_attempted_release_action {
        Some(ReleaseAction::Install) => ReleaseAction::Install,
        _ => ReleaseAction::Upgrade,
    };
    let owns = Owns {
        condition: Some(condition::TEST_SUCCESS),
        ready: true,
        counts_against: Some(tested),
    };
    record_as(&owns, s, outcome, generation)
}

#[cfg(test)]
mod tests {
    use kube::runtime::events::EventType::{Normal, Warning};

    use super::*;
    use crate::engine::actions::testing::{Case, before, check, failed, succeeded};
    use crate::engine::status::Truth::True;
    use crate::engine::status::reason::*;

    /// As an install or upgrade leaves a release whose tests are next.
    fn deployed(action: Option<ReleaseAction>, counters: (i64, i64, i64)) -> HelmReleaseStatus {
        let r = match action {
            Some(ReleaseAction::Install) => INSTALL_SUCCEEDED,
            _ => UPGRADE_SUCCEEDED,
        };
        before(
            &[(condition::READY, True, r), (condition::RELEASED, True, r)],
            counters,
            action,
        )
    }

    #[test]
    fn filters_choose_tests_as_helm_test_filter_does() {
        let hooks = || -> Vec<Hook> {
            ["a", "b", "c", "d"]
                .iter()
                .map(|n| Hook {
                    name: (*n).into(),
                    ..Hook::default()
                })
                .collect()
        };
        let filter = |name: &str, exclude| TestFilter {
            name: name.into(),
            exclude,
        };
        let names = |hooks: &[Hook]| hooks.iter().map(|h| h.name.clone()).collect::<Vec<_>>();
        let cases: &[(&[TestFilter], &[&str], &[&str])] = &[
            (&[], &[], &["a", "b", "c", "d"]),
            (&[filter("b", true)], &["b"], &["a", "c", "d"]),
            (
                &[filter("c", false), filter("a", false)],
                &["b", "d"],
                &["a", "c"],
            ),
            // Excluded first, then the included among the rest; skipped ones first.
            (
                &[filter("a", false), filter("b", false), filter("b", true)],
                &["b", "c", "d"],
                &["a"],
            ),
        ];
        for (filters, skipped, executing) in cases {
            let (s, e) = chosen(hooks(), filters);
            assert_eq!(
                (names(&s), names(&e)),
                (
                    skipped.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
                    executing.iter().map(|s| s.to_string()).collect::<Vec<_>>()
                ),
                "{filters:?}"
            );
        }
    }

    #[test]
    fn test_outcomes_are_recorded() {
        use ReleaseAction::{Install, Upgrade};
        check(
            record,
            vec![
                Case {
                    name: "tests pass: TestSuccess and Ready",
                    before: deployed(Some(Upgrade), (0, 0, 0)),
                    outcome: succeeded(TEST_SUCCEEDED),
                    conditions: &[
                        ("Ready", "True", TEST_SUCCEEDED),
                        ("Released", "True", UPGRADE_SUCCEEDED),
                        ("TestSuccess", "True", TEST_SUCCEEDED),
                    ],
                    counters: (0, 0, 0),
                    event: (Normal, TEST_SUCCEEDED, None),
                },
                Case {
                    name: "tests of an install fail: an install retry used",
                    before: deployed(Some(Install), (0, 0, 0)),
                    outcome: failed(TEST_FAILED),
                    conditions: &[
                        ("Ready", "False", TEST_FAILED),
                        ("Released", "True", INSTALL_SUCCEEDED),
                        ("TestSuccess", "False", TEST_FAILED),
                    ],
                    counters: (1, 1, 0),
                    event: (Warning, TEST_FAILED, None),
                },
                Case {
                    name: "tests of an upgrade fail: an upgrade retry used",
                    before: deployed(Some(Upgrade), (1, 0, 1)),
                    outcome: failed(TEST_FAILED),
                    conditions: &[
                        ("Ready", "False", TEST_FAILED),
                        ("Released", "True", UPGRADE_SUCCEEDED),
                        ("TestSuccess", "False", TEST_FAILED),
                    ],
                    counters: (2, 0, 2),
                    event: (Warning, TEST_FAILED, None),
                },
                Case {
                    name: "no attempt recorded: counted as an upgrade's",
                    before: deployed(None, (0, 0, 0)),
                    outcome: failed(TEST_FAILED),
                    conditions: &[
                        ("Ready", "False", TEST_FAILED),
                        ("Released", "True", UPGRADE_SUCCEEDED),
                        ("TestSuccess", "False", TEST_FAILED),
                    ],
                    counters: (1, 0, 1),
                    event: (Warning, TEST_FAILED, None),
                },
            ],
        );
    }
}

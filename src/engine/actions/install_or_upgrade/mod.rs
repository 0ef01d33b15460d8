//! Install and upgrade: one body, as Helm's install and upgrade share their steps (CRDs,
//! render, store the pending revision, pre hooks, apply and prune, wait, post hooks,
//! supersede the previous revision). Which of the two it is follows from the newest
//! stored revision, and decides whose retries a failure uses up.

use super::{Note, Outcome, Owns, is_deployed, record_as, record_failure, set_status, supersede};
use crate::api::{HelmReleaseStatus, ReleaseAction};
use crate::engine::plan::Desired;
use crate::engine::run::{Prepared, Run, WaitEnd, Window};
use crate::engine::status::{self, Truth, condition, reason};
use crate::engine::vocabulary::Phase;
use crate::helm::release::{Release, Status, hook_event};
use crate::helm::render::Rendered;

mod steps;

pub use steps::action_timeout;
use steps::{
    How, apply_steps, failed_after_storing, finish_render, install_crds, kept_for_discovery,
    pending_revision, render_release, store_revision, write_status_unless,
};

/// Install (`previous` = None) or upgrade (`previous` = the newest revision).
/// `rendered`: the chart already rendered for an upgrade while a wait was superseded.
///
/// Helm's steps, each its own function: the chart's CRDs, the render, the pending
/// revision stored (after the adoption check), pre hooks, apply and prune, then
/// [`finish`] (wait, post hooks, supersede). A step that fails before anything is stored
/// ends the action with its [`Outcome`]; one that fails after records the revision failed.
pub async fn install_or_upgrade(
    run: &mut Run<'_>,
    prepared: &Prepared,
    rendered: Option<Rendered>,
    previous: Option<&Release>,
    history: &[Release],
) -> crate::engine::Result<Outcome> {
    let hr = run.hr.clone();
    let how = How::of(&hr, previous);
    // Recorded first, as Flux does, so a failure before anything is stored still counts
    // against this desired state's retries. Written while the next step's own round trips
    // run (the render, or the ownership reads and storing the revision of one rendered
    // already), so it costs a fix no time of its own.
    attempt(
        &mut run.status,
        how.action,
        &prepared.desired(),
        hr.metadata.generation,
    );
    let mut written = false;
    let crds = match install_crds(run, prepared, &how, &mut written).await? {
        Ok(crds) => crds,
        Err(failed) => return Ok(failed),
    };
    // Helm's --reuse-values: the values of the revision Helm's upgrade calls current.
    let kept = if how.is_upgrade && how.upgrade.preserve_values {
        crate::helm::release::values_kept_from(history)
    } else {
        None
    };
    run.set_phase(Phase::Rendering);
    let rendered = match rendered {
        // A candidate rendered during the wait, unless its CRDs were only installed now.
        Some(r) if how.is_upgrade && !crds => r,
        _ => match render_release(run, prepared, previous, kept, &how, written).await {
            Ok(rendered) => {
                written = true;
                run.fix_step(|fix| fix.rendered = std::time::Instant::now());
                rendered
            }
            Err(failed) => return Ok(failed),
        },
    };
    let mut rendered = match finish_render(run, prepared, rendered, &how) {
        Ok(rendered) => rendered,
        Err(failed) => return Ok(failed),
    };
    let version = history.iter().map(|r| r.version).max().unwrap_or(0) + 1;
    let mut rel = pending_revision(run, prepared, &mut rendered, version, history, kept, &how);
    let method = match how.apply_method(run, history) {
        Ok(method) => method,
        Err(failed) => return Ok(failed),
    };
    rel.apply_method = Some(method.recorded().into());
    let (release_name, ns, elsewhere) = (
        run.target.release_name.clone(),
        run.target.namespace.clone(),
        run.target.elsewhere.clone(),
    );
    let owner = how.owner(
        (&release_name, &ns),
        previous,
        &method,
        &elsewhere,
        &rendered,
    );
    let stored = tokio::join!(
        write_status_unless(run, written),
        store_revision(run, &mut rel, &rendered, &owner, previous, &how)
    )
    .1?;
    let (applied, seen) = match stored {
        Ok(stored) => stored,
        Err(refused) => return Ok(refused),
    };
    run.set_phase(if how.is_upgrade {
        Phase::Upgrading
    } else {
        Phase::Installing
    });
    run.fix_step(|fix| fix.apply_started = Some(std::time::Instant::now()));
    if let Some(fix) = &run.trail.fix {
        run.ctx.metrics.fix_applied(fix.triggered.elapsed());
    }
    if run.precedence.priority == crate::cluster::slots::Priority::Routine {
        run.ctx.work.precedence.give_way().await;
    }
    let removed = match apply_steps(run, &mut rel, &applied, seen, &owner, previous, &how).await {
        Ok(removed) => removed,
        Err(e) => return failed_after_storing(run, &mut rel, e, &owner, previous, &how).await,
    };
    let kept = kept_for_discovery(run, &mut rel, &removed, previous).await;
    let steps = Steps {
        is_upgrade: how.is_upgrade,
        disable_hooks: how.disable_hooks,
        wait: (!how.disable_wait).then_some(Window::from_now(how.timeout)),
        timeout: how.timeout,
    };
    finish(run, prepared, &mut rel, history, steps, kept).await
}

/// What is left of an install or upgrade once its objects are applied.
struct Steps {
    is_upgrade: bool,
    disable_hooks: bool,
    /// The health check's window; none when the wait is disabled.
    wait: Option<Window>,
    /// For the post hooks.
    timeout: std::time::Duration,
}

/// A resumed wait whose deadline passed while no engine watched (an outage longer than
/// the timeout) still looks this long: the outage was the cluster's, not the release's,
/// and the watches need a moment to list what is there now.
const RESUMED_WAIT_AT_LEAST: std::time::Duration = std::time::Duration::from_secs(10);

/// Resumes an install or upgrade whose engine stopped during its health check (a lost
/// Lease, an API server outage, SIGTERM), the desired state unchanged: the wait goes on
/// until the deadline it began with, then post hooks run and the revision is deployed as
/// if the engine had never stopped. No revision is marked failed, none is added.
pub async fn resume(
    run: &mut Run<'_>,
    prepared: &Prepared,
    mut rel: Release,
    history: &[Release],
) -> crate::engine::Result<Outcome> {
    let is_upgrade = rel.info.as_ref().map(|i| i.status) == Some(Status::PendingUpgrade);
    let action = if is_upgrade {
        ReleaseAction::Upgrade
    } else {
        ReleaseAction::Install
    };
    let window = run
        .status
        .wait
        .as_ref()
        .map(|w| Window {
            started: w.started_at.0,
            deadline: w.deadline.0,
        })
        .unwrap_or_else(|| Window::from_now(action_timeout(&run.hr, is_upgrade)))
        .at_least(RESUMED_WAIT_AT_LEAST);
    attempt(
        &mut run.status,
        action,
        &prepared.desired(),
        run.hr.metadata.generation,
    );
    run.write_status().await;
    let message = format!(
        "resuming the health check of revision {} that an engine left when it stopped (the desired state is unchanged); deadline {}",
        rel.version, window.deadline
    );
    tracing::info!(release = %run.key, revision = rel.version, "{message}");
    run.event(
        kube::runtime::events::EventType::Normal,
        reason::WAIT_RESUMED,
        "Wait",
        message,
    )
    .await;
    let disable_hooks = if is_upgrade {
        run.hr
            .spec
            .upgrade
            .clone()
            .unwrap_or_default()
            .disable_hooks
    } else {
        run.hr
            .spec
            .install
            .clone()
            .unwrap_or_default()
            .disable_hooks
    };
    let steps = Steps {
        is_upgrade,
        disable_hooks,
        wait: Some(window),
        timeout: action_timeout(&run.hr, is_upgrade),
    };
    finish(run, prepared, &mut rel, history, steps, None).await
}

/// The health check, the post hooks, and the revision deployed (the previous ones
/// superseded). `kept`: what an incomplete discovery kept from being pruned.
async fn finish(
    run: &mut Run<'_>,
    prepared: &Prepared,
    rel: &mut Release,
    history: &[Release],
    steps: Steps,
    kept: Option<String>,
) -> crate::engine::Result<Outcome> {
    let Steps {
        is_upgrade,
        disable_hooks,
        wait,
        timeout,
    } = steps;
    let (failed_reason, ok_reason, done) = if is_upgrade {
        (
            reason::UPGRADE_FAILED,
            reason::UPGRADE_SUCCEEDED,
            "Upgrade complete",
        )
    } else {
        (
            reason::INSTALL_FAILED,
            reason::INSTALL_SUCCEEDED,
            "Install complete",
        )
    };
    let version = rel.version;
    let ns = run.target.namespace.clone();
    if let Some(window) = wait {
        match run.wait_for(rel, window).await? {
            WaitEnd::Ready => {}
            WaitEnd::Failed(why) => {
                return record_failure(
                    run,
                    rel,
                    format!("Release {:?} failed: {why}", run.target.release_name),
                    failed_reason,
                    why,
                )
                .await;
            }
            WaitEnd::Stopped => return Err(crate::engine::Error::Stopped),
            WaitEnd::Canceled { by_operator, why } => {
                return record_canceled(run, rel, by_operator, why).await;
            }
            WaitEnd::Abandoned(why) => {
                set_status(rel, Status::Failed, why.clone());
                run.storage.update(rel).await?;
                return Ok(Outcome::Canceled {
                    by_operator: false,
                    message: why,
                });
            }
        }
    }

    if !disable_hooks {
        let event = if is_upgrade {
            hook_event::POST_UPGRADE
        } else {
            hook_event::POST_INSTALL
        };
        run.set_phase(Phase::RunningHooks);
        if let Err(e) = run
            .run_hooks(&mut rel.hooks, version, event, &ns, timeout)
            .await
        {
            return record_failure(
                run,
                rel,
                format!("Release {:?} failed: {e}", run.target.release_name),
                failed_reason,
                e.to_string(),
            )
            .await;
        }
    }

    // The new revision is live: the previous deployed ones are superseded.
    supersede(run, history, is_deployed).await?;
    set_status(rel, Status::Deployed, done);
    run.storage.update(rel).await?;
    run.prune_history(history, rel).await;
    let mut message = format!(
        "Helm {} succeeded for release {}/{}.v{} with chart {}@{}",
        if is_upgrade { "upgrade" } else { "install" },
        ns,
        run.target.release_name,
        version,
        prepared.resolved.name,
        prepared.resolved.version
    );
    if let Some(note) = kept {
        message.push_str("; ");
        message.push_str(&note);
    }
    Ok(Outcome::Succeeded {
        reason: ok_reason,
        message,
    })
}

/// A wait ended early: by an operator (the revision failed) or by a newer desired state
/// (superseded, its record written while the newer state's guards run).
async fn record_canceled(
    run: &mut Run<'_>,
    rel: &mut Release,
    by_operator: bool,
    why: String,
) -> crate::engine::Result<Outcome> {
    let status = if by_operator {
        Status::Failed
    } else {
        Status::Superseded
    };
    set_status(rel, status, why.clone());
    if !by_operator && run.memory.handoff.candidate.is_some() {
        // The newer desired state is applied next: its guards read the history while
        // this record is written (see `worker::reconcile`).
        let (storage, record) = (run.storage.clone(), rel.clone());
        let write = tokio::spawn(crate::cluster::slots::carrying_mark(async move {
            storage.update(&record).await
        }));
        run.memory.handoff.superseding = Some(Box::new(crate::engine::run::Superseding {
            record: rel.clone(),
            write,
        }));
    } else {
        run.storage.update(rel).await?;
    }
    run.trail.last_record = Some(rel.clone());
    Ok(Outcome::Canceled {
        by_operator,
        message: why,
    })
}

/// Records what is being attempted before the action starts: the desired state, and
/// Reconciling/Ready saying it runs.
fn attempt(
    s: &mut HelmReleaseStatus,
    action: ReleaseAction,
    desired: &Desired,
    generation: Option<i64>,
) {
    s.last_attempted_generation = generation;
    s.last_attempted_revision = Some(desired.chart_version.clone());
    s.last_attempted_config_digest = Some(desired.config_digest.clone());
    s.last_attempted_source_revision = desired.source_revision.clone();
    s.last_attempted_release_action = Some(action);
    let verb = match action {
        ReleaseAction::Install => "install",
        ReleaseAction::Upgrade => "upgrade",
    };
    status::set(
        s,
        condition::RECONCILING,
        Truth::True,
        reason::PROGRESSING,
        format!(
            "Running {verb} with chart {}@{}",
            desired.chart_name, desired.chart_version
        ),
        generation,
    );
    status::set(
        s,
        condition::READY,
        Truth::Unknown,
        reason::PROGRESSING,
        format!("Running {verb}"),
        generation,
    );
}

/// Install and upgrade own Released. Success makes the release Ready and lifts Stalled
/// and Remediated: it reached its desired state. A failure, or an operator's cancel of
/// its wait, uses up a retry of the action `attempt` recorded.
pub fn record(s: &mut HelmReleaseStatus, outcome: &Outcome, generation: Option<i64>) -> Note {
    let owns = Owns {
        condition: Some(condition::RELEASED),
        ready: true,
        counts_against: s.last_attempted_release_action,
    };
    let note = record_as(&owns, s, outcome, generation);
    if matches!(outcome, Outcome::Succeeded { .. }) {
        status::remove(s, condition::STALLED);
        status::remove(s, condition::REMEDIATED);
    }
    note
}

#[cfg(test)]
mod tests {
    use kube::runtime::events::EventType::{Normal, Warning};

    use super::*;
    use crate::engine::actions::testing::{Case, before, canceled, check, failed, succeeded};
    use crate::engine::status::reason::*;
    use Truth::{False, True, Unknown};

    /// What [`attempt`] leaves while the action runs.
    fn running(action: ReleaseAction, counters: (i64, i64, i64)) -> HelmReleaseStatus {
        before(
            &[
                (condition::RECONCILING, True, PROGRESSING),
                (condition::READY, Unknown, PROGRESSING),
            ],
            counters,
            Some(action),
        )
    }

    #[test]
    fn install_and_upgrade_outcomes_are_recorded() {
        use ReleaseAction::{Install, Upgrade};
        check(
            record,
            vec![
                Case {
                    name: "install succeeds: Released and Ready",
                    before: running(Install, (0, 0, 0)),
                    outcome: succeeded(INSTALL_SUCCEEDED),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "True", INSTALL_SUCCEEDED),
                        ("Released", "True", INSTALL_SUCCEEDED),
                    ],
                    counters: (0, 0, 0),
                    event: (Normal, INSTALL_SUCCEEDED, None),
                },
                Case {
                    // Only a new desired state or resetAt gives fresh retries.
                    name: "success keeps the failure counters",
                    before: running(Install, (2, 2, 0)),
                    outcome: succeeded(INSTALL_SUCCEEDED),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "True", INSTALL_SUCCEEDED),
                        ("Released", "True", INSTALL_SUCCEEDED),
                    ],
                    counters: (2, 2, 0),
                    event: (Normal, INSTALL_SUCCEEDED, None),
                },
                Case {
                    name: "upgrade succeeds after a remediation: Stalled and Remediated go",
                    before: before(
                        &[
                            (condition::READY, False, UPGRADE_FAILED),
                            (condition::STALLED, True, RETRIES_EXCEEDED),
                            (condition::REMEDIATED, True, ROLLBACK_SUCCEEDED),
                            (condition::RELEASED, False, UPGRADE_FAILED),
                        ],
                        (2, 0, 2),
                        Some(Upgrade),
                    ),
                    outcome: succeeded(UPGRADE_SUCCEEDED),
                    conditions: &[
                        ("Ready", "True", UPGRADE_SUCCEEDED),
                        ("Released", "True", UPGRADE_SUCCEEDED),
                    ],
                    counters: (2, 0, 2),
                    event: (Normal, UPGRADE_SUCCEEDED, None),
                },
                Case {
                    name: "install fails: InstallFailed, an install retry used",
                    before: running(Install, (0, 0, 0)),
                    outcome: failed(INSTALL_FAILED),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "False", INSTALL_FAILED),
                        ("Released", "False", INSTALL_FAILED),
                    ],
                    counters: (1, 1, 0),
                    event: (Warning, INSTALL_FAILED, None),
                },
                Case {
                    name: "upgrade fails: UpgradeFailed, an upgrade retry used",
                    before: running(Upgrade, (1, 0, 1)),
                    outcome: failed(UPGRADE_FAILED),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "False", UPGRADE_FAILED),
                        ("Released", "False", UPGRADE_FAILED),
                    ],
                    counters: (2, 0, 2),
                    event: (Warning, UPGRADE_FAILED, None),
                },
                Case {
                    name: "wait superseded by a newer desired state: no failure",
                    before: running(Upgrade, (0, 0, 0)),
                    outcome: canceled(false),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "False", HEALTH_CHECK_CANCELED),
                    ],
                    counters: (0, 0, 0),
                    event: (Warning, HEALTH_CHECK_CANCELED, Some("Wait")),
                },
                Case {
                    name: "upgrade wait canceled by the operator: an upgrade retry used",
                    before: running(Upgrade, (0, 0, 0)),
                    outcome: canceled(true),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "False", HEALTH_CHECK_CANCELED),
                    ],
                    counters: (1, 0, 1),
                    event: (Warning, HEALTH_CHECK_CANCELED, Some("Wait")),
                },
                Case {
                    name: "install wait canceled by the operator: an install retry used",
                    before: running(Install, (0, 0, 0)),
                    outcome: canceled(true),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "False", HEALTH_CHECK_CANCELED),
                    ],
                    counters: (1, 1, 0),
                    event: (Warning, HEALTH_CHECK_CANCELED, Some("Wait")),
                },
            ],
        );
    }

    #[test]
    fn an_attempt_is_recorded_before_it_runs() {
        let desired = Desired {
            chart_name: "app".into(),
            chart_version: "1.2.0".into(),
            config_digest: "sha256:v".into(),
            source_revision: Some(format!("main@sha1:{}", "c".repeat(40))),
            post_renderers: None,
            common_metadata: None,
            values_files: None,
        };
        let cases = [
            (ReleaseAction::Install, "install"),
            (ReleaseAction::Upgrade, "upgrade"),
        ];
        for (action, verb) in cases {
            // A Ready left by the previous success is replaced while the action runs.
            let mut s = before(
                &[(condition::READY, True, UPGRADE_SUCCEEDED)],
                (1, 0, 1),
                None,
            );
            attempt(&mut s, action, &desired, Some(4));
            assert_eq!(s.last_attempted_generation, Some(4));
            assert_eq!(s.last_attempted_revision.as_deref(), Some("1.2.0"));
            assert_eq!(s.last_attempted_config_digest.as_deref(), Some("sha256:v"));
            assert_eq!(s.last_attempted_release_action, Some(action));
            assert_eq!(
                (s.failures, s.upgrade_failures),
                (1, 1),
                "{verb}: counters kept"
            );
            let got: Vec<_> = s
                .conditions
                .iter()
                .map(|c| (c.type_.as_str(), c.status.as_str(), c.message.clone()))
                .collect();
            assert_eq!(
                got,
                [
                    ("Ready", "Unknown", format!("Running {verb}")),
                    (
                        "Reconciling",
                        "True",
                        format!("Running {verb} with chart app@1.2.0")
                    ),
                ],
                "{verb}"
            );
        }
    }
}

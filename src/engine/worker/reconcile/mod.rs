//! One reconcile of a release, as phases that hand typed results on: [`admit`] (the
//! request tokens, the spec's checks) and [`guard`] (whose the release is, its
//! dependencies) and [`prepare_desired`] (all in `admit.rs`), then steps of observe →
//! plan → run the action → record its outcome (this file), until the planner says in
//! sync or stalled. Each action's file says how its outcome is recorded; what is recorded
//! here is what no action owns (`bookkeeping.rs`: the tokens, fresh retries for a new
//! desired state, in sync, stalled, and status.history), all of it pure.
//!
//! [`admit`]: admit::admit
//! [`guard`]: admit::guard
//! [`prepare_desired`]: admit::prepare_desired

mod admit;
mod bookkeeping;

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use kube::runtime::events::EventType;

use self::admit::{Read, Ready, admit, guard, prepare_desired};
pub(super) use self::bookkeeping::attempt_differs;
use self::bookkeeping::{
    idle_recheck, in_sync, nothing_more_to_try, observe, settled_on, with_record,
};
use super::NEVER;
use super::external;
use crate::engine::actions::{self, Outcome};
use crate::engine::plan::{self, Desired, Next, Policy};
use crate::engine::run::{Requeue, Run};
use crate::engine::status::{self, Verdict, reason};
use crate::engine::vocabulary::Phase;
use crate::helm::release::Release;

/// How old the guards' history read may be for the first step to plan on it.
const FRESH_HISTORY: Duration = Duration::from_millis(500);

/// The most steps one reconcile takes (a failed upgrade, its rollback, the tests of what
/// it rolled back to, ...) before it looks again at its interval.
const MAX_STEPS: usize = 8;

/// One reconcile of a release not being deleted, as a short pipeline: [`admit`] (the
/// request tokens and the spec's own checks), [`guard`] (whose the release is, its
/// dependencies), [`prepare_desired`], then [`steps`] (observe → plan → one action →
/// record) until the planner says in sync or stalled. Each phase hands the next what it
/// found, or ends the reconcile with when to look again.
pub(super) async fn reconcile_release(run: &mut Run<'_>) -> crate::engine::Result<Requeue> {
    // Each phase boxed: the reconcile's future (allocated at every interval check) stays
    // small, and an interval check that ends early never holds the later phases' state.
    let admitted = match Box::pin(admit(run)).await? {
        ControlFlow::Continue(admitted) => admitted,
        ControlFlow::Break(requeue) => return Ok(requeue),
    };
    let guarded = match Box::pin(guard(run, admitted)).await? {
        ControlFlow::Continue(guarded) => guarded,
        ControlFlow::Break(requeue) => return Ok(requeue),
    };
    let ready = match Box::pin(prepare_desired(run, guarded)).await {
        ControlFlow::Continue(ready) => ready,
        ControlFlow::Break(requeue) => return Ok(requeue),
    };
    Box::pin(steps(run, ready)).await
}

/// Observe → plan → one action → record, until the planner says in sync or stalled, the
/// spec changes, or [`MAX_STEPS`] were taken.
async fn steps(run: &mut Run<'_>, ready: Ready) -> crate::engine::Result<Requeue> {
    let generation = run.hr.metadata.generation;
    let interval = run.hr.spec.interval.as_std();
    let Ready {
        prepared,
        mut rendered,
        desired,
        mut force,
        history: mut fresh,
    } = ready;
    for _ in 0..MAX_STEPS {
        // The first step plans on the history the guards read, unless preparing the
        // desired state (a chart download) took long enough for another tool to write.
        let history = match fresh.take() {
            Some((history, read)) if read.elapsed() < FRESH_HISTORY => history,
            _ => run.storage.history(&run.target.release_name).await?,
        };
        // At every step: another tool may write while an action of ours ends (a `helm
        // rollback` right after our upgrade's wait), and the next step must not undo it.
        let restore_external = match Box::pin(external_revision(
            run,
            &history,
            force.is_some(),
            generation,
            interval,
        ))
        .await
        {
            Some(held) => return Ok(held),
            None => run.status.external_revision.take().is_some(),
        };
        let forced = force.is_some() || restore_external;
        let observed = observe(&run.status, &run.hr, &history, &desired, forced);
        let next = plan::next(&observed);
        tracing::info!(release = %run.key, action = ?next, "planned");
        let latest = history.last().cloned();
        let (outcome, record) = match &next {
            Next::InSync => return Ok(Box::pin(settle(run, &history)).await),
            Next::Stalled { reason: r, message } => {
                return Ok(stalled(run, &history, r, message).await);
            }
            _ => {
                run.trail.if_it_fails = forecast(&observed, &next, &history);
                run.record_acting().await;
                let step = actions::Step {
                    prepared: &prepared,
                    rendered: rendered.take(),
                    latest: latest.as_ref(),
                    history: &history,
                };
                match actions::run(run, &next, step).await? {
                    actions::Ran::Done(outcome, record) => (outcome, record),
                    actions::Ran::Held(requeue) => return Ok(requeue),
                }
            }
        };
        if matches!(next, Next::Install | Next::Upgrade)
            && let Some(t) = force.take()
        {
            run.status.last_handled_force_at = Some(t);
        }
        run.set_phase(Phase::Idle);
        let stepped = Stepped {
            next: &next,
            outcome,
            record,
            history,
            stored_before: latest.map(|r| r.version),
        };
        match Box::pin(record_step(run, stepped, &desired)).await? {
            ControlFlow::Continue(read) => fresh = read,
            ControlFlow::Break(requeue) => return Ok(requeue),
        }
    }
    let chart = &run.memory.inbox.newest.spec.chart;
    Ok(Requeue::After(idle_recheck(interval, chart)))
}

/// Nothing to do: Ready=True, the drift check, and what the next interval check may
/// rest on.
async fn settle(run: &mut Run<'_>, history: &[Release]) -> Requeue {
    let latest = history.last();
    in_sync(&mut run.status, latest, run.hr.metadata.generation);
    run.record_history(history);
    Box::pin(crate::engine::worker::drift::check(run, latest)).await;
    run.memory.cache.settled = settled_on(run, history);
    run.write_status().await;
    Requeue::After(idle_recheck(
        run.hr.spec.interval.as_std(),
        &run.hr.spec.chart,
    ))
}

/// The planner gave up: Stalled=True, and an Event.
async fn stalled(run: &mut Run<'_>, history: &[Release], why: &str, message: &str) -> Requeue {
    nothing_more_to_try(&mut run.status, why, message, run.hr.metadata.generation);
    run.record_history(history);
    run.write_status().await;
    run.event(EventType::Warning, why, "Reconcile", message.to_owned())
        .await;
    Requeue::After(NEVER)
}

/// A step taken: the action, how it ended and its bookkeeping, the history it was planned
/// on and the newest revision stored before it.
struct Stepped<'n> {
    next: &'n Next,
    outcome: Outcome,
    record: actions::Record,
    history: Vec<Release>,
    stored_before: Option<i32>,
}

/// Records a step's outcome, then says whether the reconcile goes on (with the history
/// read after the step) or ends, and when it looks again.
async fn record_step(
    run: &mut Run<'_>,
    step: Stepped<'_>,
    desired: &Desired,
) -> crate::engine::Result<ControlFlow<Requeue, Option<Read>>> {
    let generation = run.hr.metadata.generation;
    let Stepped {
        next,
        outcome,
        record,
        history,
        stored_before,
    } = step;
    let superseded = matches!(
        outcome,
        Outcome::Canceled {
            by_operator: false,
            ..
        }
    ) && run.memory.handoff.candidate.is_some();
    if superseded && let Some(canceled) = run.trail.last_record.take() {
        // The newer desired state is ready to apply, and this is on its way: the
        // history is what was read before plus the revision the wait left, the Event
        // goes out meanwhile, and the status is written with the next reconcile's first
        // write (it starts at once from this one's status).
        let history = with_record(history, canceled);
        run.record_history(&history);
        let note = record(&mut run.status, &outcome, generation);
        run.notify();
        let action = format!("{next:?}");
        run.event_soon(
            note.type_,
            note.reason,
            note.action.unwrap_or(&action),
            note.message,
        );
        return Ok(ControlFlow::Break(Requeue::After(Duration::ZERO)));
    }
    let history = run.storage.history(&run.target.release_name).await?;
    run.record_history(&history);
    let note = record(&mut run.status, &outcome, generation);
    let retry = crate::engine::worker::strategy::retry_on_failure(
        &mut run.status,
        next,
        &outcome,
        &Policy::from_spec(&run.hr),
        generation,
    );
    run.publish_note(note, &format!("{next:?}")).await;
    run.write_status().await;
    // RetryOnFailure: no remediation; the same is tried again after the interval (sooner
    // only for a new desired state).
    if let Some(after) = retry {
        return Ok(ControlFlow::Break(Requeue::After(after)));
    }
    // The cluster's failure: no retry used, no remediation; again after a backoff.
    if let Outcome::Blocked { message, .. } = &outcome {
        run.note_refused(message);
        return Ok(ControlFlow::Break(Requeue::Blocked));
    }
    // An install or upgrade that failed before storing a revision (render error,
    // `required`/`fail`, a refused object, too large) has nothing to remediate: it is
    // tried again after a backoff, or stalls once its retries are used up (the next step
    // records the stall).
    if matches!(outcome, Outcome::Failed { .. })
        && matches!(next, Next::Install | Next::Upgrade)
        && history.last().map(|r| r.version) == stored_before
    {
        let observed = observe(&run.status, &run.hr, &history, desired, false);
        return Ok(match plan::next(&observed) {
            Next::Stalled { .. } => ControlFlow::Continue(Some((history, Instant::now()))),
            _ => ControlFlow::Break(Requeue::Failed),
        });
    }
    // Superseded by a newer desired state, or the spec changed, or the release is going:
    // start over right away.
    let newest = &run.memory.inbox.newest;
    if matches!(
        outcome,
        Outcome::Canceled {
            by_operator: false,
            ..
        }
    ) || newest.metadata.generation != generation
        || run.memory.inbox.deleted
        || run.stop.is_cancelled()
    {
        return Ok(ControlFlow::Break(Requeue::After(Duration::ZERO)));
    }
    if newest.spec.suspend {
        // Suspend lets a running action finish but starts nothing new.
        return Ok(ControlFlow::Break(Requeue::After(NEVER)));
    }
    // The next step plans on this read, while it is fresh.
    Ok(ControlFlow::Continue(Some((history, Instant::now()))))
}

/// A revision another tool wrote (the helm CLI's rollback or upgrade): said in status and
/// an Event, then held (`warn`, `disabled`: returns the requeue) or restored (`enabled`,
/// a newer spec, `forceAt`: returns None with `status.externalRevision` still set, which
/// the caller takes as "upgrade now").
async fn external_revision(
    run: &mut Run<'_>,
    history: &[Release],
    forced: bool,
    generation: Option<i64>,
    interval: Duration,
) -> Option<Requeue> {
    let Some(mut seen) = external::detect(&run.status, history) else {
        run.status.external_revision = None;
        return None;
    };
    let first_sight = run
        .status
        .external_revision
        .as_ref()
        .is_none_or(|e| e.revision != seen.revision);
    seen.seen_at_generation = seen.seen_at_generation.or(generation);
    let mode = run
        .hr
        .spec
        .drift_detection
        .as_ref()
        .map(|d| d.mode)
        .unwrap_or_default();
    let message = seen.message();
    run.status.external_revision = Some(seen.clone());
    match external::respond(&run.hr, &seen, forced) {
        external::Response::Restore => {
            if first_sight || mode == crate::api::DriftDetectionMode::Enabled {
                run.event(
                    EventType::Warning,
                    reason::EXTERNAL_REVISION,
                    "Restore",
                    format!("{message}; applying the spec again"),
                )
                .await;
            }
            None
        }
        external::Response::Hold => {
            let message = format!(
                "{message}; left as it is (driftDetection.mode {}): change the spec, set the mode to enabled or set forceAt to apply the spec",
                match mode {
                    crate::api::DriftDetectionMode::Disabled => "disabled",
                    _ => "warn",
                }
            );
            let verdict = Verdict::Held {
                reason: reason::EXTERNAL_REVISION,
                message: &message,
            };
            status::summarise(&mut run.status, verdict, generation);
            run.record_history(history);
            // The Event before the status: a reader who sees the status sees the Event.
            if first_sight && mode != crate::api::DriftDetectionMode::Disabled {
                run.event(
                    EventType::Warning,
                    reason::EXTERNAL_REVISION,
                    "Reconcile",
                    message,
                )
                .await;
            }
            run.write_status().await;
            Some(Requeue::After(interval))
        }
    }
}

/// What the engine will do if the install or upgrade `next` fails (`plan::if_it_fails`),
/// for its wait to show; nothing for other actions.
fn forecast(observed: &plan::Observed, next: &Next, history: &[Release]) -> Option<String> {
    let action = match next {
        Next::Install => crate::api::ReleaseAction::Install,
        Next::Upgrade => crate::api::ReleaseAction::Upgrade,
        _ => return None,
    };
    let version = history.last().map_or(1, |r| r.version + 1);
    let chart_of = |v: i32| {
        let meta = history
            .iter()
            .find(|r| r.version == v)?
            .chart
            .as_ref()?
            .metadata
            .as_ref()?;
        Some(format!("{} {}", meta.name, meta.version))
    };
    Some(plan::if_it_fails(observed, action, version, chart_of))
}

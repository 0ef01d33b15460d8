//! The phases before the first step: admit (what the spec alone decides), guard (whose
//! the release is, its dependencies) and prepare the desired state. Each ends the
//! reconcile with when to look again, or hands the next what it found.

use std::ops::ControlFlow;
use std::time::Duration;

use kube::runtime::events::EventType;

use super::bookkeeping::{fresh_retries, idle_recheck, is_pending, take_tokens, with_record};
use crate::api::annotations;
use crate::engine::plan::Desired;
use crate::engine::run::{PrepareError, Prepared, Requeue, Run, Settled, new_token, prepare};
use crate::engine::status::{self, Verdict, condition, reason};
use crate::engine::vocabulary::Phase;
use crate::engine::worker::NEVER;
use crate::engine::worker::guards::{
    Tenancy, dependency_cycle, invalid_cel, ours_to_act_on, stall, tenancy, unready_dependency,
};
use crate::engine::worker::unchanged::Unchanged;
use crate::helm::release::Release;

/// What [`admit`] found: the release may be acted on.
pub(super) struct Admitted {
    /// What the last reconcile found in sync on, for an interval check to skip reads.
    settled: Option<Settled>,
    /// This reconcile answers a request token.
    requested: bool,
}

/// The history the guards read, and when.
pub(super) type Read = (Vec<Release>, std::time::Instant);

/// What [`guard`] found: the release is ours to act on, with the history it read and the
/// desired state prepared beside the guards (urgent work) or by the unchanged check.
pub(super) struct Guarded {
    history: Option<Read>,
    prepared: Option<Result<Prepared, PrepareError>>,
}

/// What [`prepare_desired`] hands the steps.
pub(super) struct Ready {
    pub(super) prepared: Prepared,
    /// Rendered already, by the wait this desired state superseded.
    pub(super) rendered: Option<crate::helm::render::Rendered>,
    pub(super) desired: Desired,
    /// A forceAt token not handled yet: the next install or upgrade is forced.
    pub(super) force: Option<String>,
    pub(super) history: Option<Read>,
}

/// The request tokens, a pin or unpin, suspension, the spec's CEL and the tenancy
/// policy: what the spec alone decides.
pub(super) async fn admit(
    run: &mut Run<'_>,
) -> crate::engine::Result<ControlFlow<Requeue, Admitted>> {
    let hr = run.hr.clone();
    let interval = hr.spec.interval.as_std();
    let settled = run.memory.cache.settled.take();
    let requested = take_tokens(&mut run.status, &hr);
    run.memory.watches.conflict = None;
    if crate::engine::worker::pin::asked(&run.hr) {
        Box::pin(crate::engine::worker::pin::pin_if_asked(run)).await?;
    }
    run.learn_who_suspended().await;
    if hr.spec.suspend {
        run.write_status().await;
        return Ok(ControlFlow::Break(Requeue::After(NEVER)));
    }
    crate::engine::worker::pin::unpin_if_resumed(run).await;
    if let Some(invalid) = invalid_cel(run).await {
        let after = stall(run, reason::INVALID_CEL_EXPRESSION, invalid, interval).await;
        return Ok(ControlFlow::Break(Requeue::After(after)));
    }
    match tenancy(run).await? {
        None => {}
        Some(Tenancy::Refused(message)) => {
            let after = stall(run, reason::ACCESS_DENIED, message, interval).await;
            return Ok(ControlFlow::Break(Requeue::After(after)));
        }
        Some(Tenancy::MissingAccount(message)) => {
            held_for_account(run, message).await;
            return Ok(ControlFlow::Break(Requeue::Blocked));
        }
    }
    Ok(ControlFlow::Continue(Admitted { settled, requested }))
}

/// The ServiceAccount the release acts as does not exist (yet): Ready=False, looked at
/// again when it is created.
async fn held_for_account(run: &mut Run<'_>, message: String) {
    let verdict = Verdict::Held {
        reason: reason::ACCESS_DENIED,
        message: &message,
    };
    status::summarise(&mut run.status, verdict, run.hr.metadata.generation);
    let changed = run
        .hr
        .condition(condition::READY)
        .is_none_or(|c| c.message != message);
    run.write_status().await;
    if changed {
        tracing::warn!(release = %run.key, "{message}");
        run.event(
            EventType::Warning,
            reason::ACCESS_DENIED,
            "Reconcile",
            message,
        )
        .await;
    }
}

/// An interval check of a release nothing touched since it was found in sync ends here;
/// otherwise the guards: the release's record is ours, its dependencies have no cycle
/// and are ready.
pub(super) async fn guard(
    run: &mut Run<'_>,
    admitted: Admitted,
) -> crate::engine::Result<ControlFlow<Requeue, Guarded>> {
    let interval = run.hr.spec.interval.as_std();
    let mut prepared_unchanged = None;
    if let Some(settled) = admitted
        .settled
        .filter(|s| crate::engine::worker::unchanged::may_skip_history(run, s, admitted.requested))
    {
        match Box::pin(crate::engine::worker::unchanged::check(run, settled)).await {
            Unchanged::InSync => {
                let after = idle_recheck(interval, &run.hr.spec.chart);
                return Ok(ControlFlow::Break(Requeue::After(after)));
            }
            Unchanged::Prepared(prepared) => prepared_unchanged = Some(*prepared),
            Unchanged::Changed => {}
        }
    }
    let superseding = run.memory.handoff.superseding.take();
    let (guarded, prepared) = Box::pin(guards_beside_prepare(run, prepared_unchanged)).await;
    // The revision the last wait left, written meanwhile: it is stored before anything
    // else is, and the history plans with it as written (the read may predate it).
    let superseded = match superseding {
        Some(s) => {
            match s.write.await {
                Ok(written) => written?,
                // The write's task did not finish (the runtime is going away): again here.
                Err(_) => run.storage.update(&s.record).await?,
            }
            Some(s.record)
        }
        None => None,
    };
    let history = match guarded? {
        Ok(history) => history.map(|h| {
            let h = match superseded {
                Some(record)
                    if h.iter()
                        .any(|r| r.version == record.version && is_pending(r)) =>
                {
                    with_record(h, record)
                }
                _ => h,
            };
            (h, std::time::Instant::now())
        }),
        Err(message) => {
            let after = stall(run, reason::RELEASE_CONFLICT, message, interval).await;
            return Ok(ControlFlow::Break(Requeue::After(after)));
        }
    };
    if let Some(cycle) = dependency_cycle(run).await {
        let after = stall(run, reason::DEPENDENCY_CYCLE, cycle, interval).await;
        return Ok(ControlFlow::Break(Requeue::After(after)));
    }
    if let Some(waiting) = unready_dependency(run).await {
        let verdict = Verdict::Failing {
            reason: reason::DEPENDENCY_NOT_READY,
            message: &waiting,
        };
        status::summarise(&mut run.status, verdict, run.hr.metadata.generation);
        run.write_status().await;
        return Ok(ControlFlow::Break(Requeue::After(Duration::from_secs(5))));
    }
    Ok(ControlFlow::Continue(Guarded { history, prepared }))
}

/// The identity guard's read of the history; urgent work (a fix for a failed release,
/// an operator's request) resolves its chart and values meanwhile: both are reads, and a
/// fix waits on each round trip.
async fn guards_beside_prepare(
    run: &mut Run<'_>,
    prepared_unchanged: Option<Result<Prepared, PrepareError>>,
) -> (
    crate::engine::Result<Result<Option<Vec<Release>>, String>>,
    Option<Result<Prepared, PrepareError>>,
) {
    let generation = run.hr.metadata.generation;
    let early = run.precedence.priority == crate::cluster::slots::Priority::Urgent
        && run
            .memory
            .handoff
            .candidate
            .as_ref()
            .is_none_or(|c| c.generation != generation);
    if prepared_unchanged.is_some() || !early {
        return (Box::pin(ours_to_act_on(run)).await, prepared_unchanged);
    }
    let (ctx, acting, priority, hr) = (
        run.ctx,
        run.acting.clone(),
        run.precedence.priority,
        run.hr.clone(),
    );
    let preparing = async move { prepare(ctx, &acting, &hr, priority).await };
    let (guarded, prepared) = tokio::join!(ours_to_act_on(run), preparing);
    (guarded, Some(prepared))
}

/// The desired state: the one a superseded wait handed over, else prepared now (or
/// already, beside the guards). A desired state that cannot be prepared fails the
/// reconcile, which is looked at again when what it lacks appears.
pub(super) async fn prepare_desired(
    run: &mut Run<'_>,
    guarded: Guarded,
) -> ControlFlow<Requeue, Ready> {
    let hr = run.hr.clone();
    let generation = hr.metadata.generation;
    run.set_phase(Phase::Resolving);
    let candidate = run
        .memory
        .handoff
        .candidate
        .take()
        .filter(|c| c.generation == generation);
    let (prepared, rendered) = match candidate {
        Some(c) => {
            let c = *c;
            run.trail.fix = c.timeline();
            run.fix_step(|_| {});
            (Ok(c.prepared), Some(c.rendered))
        }
        None => {
            let triggered = run
                .memory
                .retry
                .woke_at
                .unwrap_or_else(std::time::Instant::now);
            let prepared = match guarded.prepared {
                Some(prepared) => prepared,
                None => prepare(run.ctx, &run.acting, &hr, run.precedence.priority).await,
            };
            // Urgent work (a failed release's fix, an operator's request) is timed as a
            // fix superseding a wait is: from the worker's waking for it, step by step.
            if run.precedence.priority == crate::cluster::slots::Priority::Urgent {
                let now = std::time::Instant::now();
                run.trail.fix = Some(crate::engine::vocabulary::FixTimeline {
                    triggered,
                    prepared: now,
                    rendered: now,
                    apply_started: None,
                    first_written: None,
                });
                run.fix_step(|_| {});
            }
            (prepared, None)
        }
    };
    run.memory.watches.missing = None;
    let prepared = match prepared {
        Ok(p) => p,
        Err(e) => {
            not_prepared(run, e).await;
            return ControlFlow::Break(Requeue::Failed);
        }
    };
    run.intent.masker = prepared.values.secrets.clone();
    run.intent.digest = prepared.digest();
    run.intent.sources = prepared.values.sources.clone();
    let desired = prepared.desired();
    fresh_retries(&mut run.status, &desired, generation);
    let force = new_token(
        &hr,
        annotations::FORCE_AT,
        run.status.last_handled_force_at.as_deref(),
    );
    ControlFlow::Continue(Ready {
        prepared,
        rendered,
        desired,
        force,
        history: guarded.history,
    })
}

/// The desired state could not be prepared: Ready=False with why, and an Event.
async fn not_prepared(run: &mut Run<'_>, e: PrepareError) {
    let (reason, message) = (e.reason(), e.to_string());
    if matches!(e, PrepareError::Values(_)) {
        // Looked at again as soon as the source it lacks appears.
        run.memory.watches.missing =
            crate::helm::values::missing_source(&run.acting.client, &run.hr).await;
    }
    let verdict = Verdict::Held {
        reason,
        message: &message,
    };
    status::summarise(&mut run.status, verdict, run.hr.metadata.generation);
    run.write_status().await;
    run.event(EventType::Warning, reason, "Reconcile", message)
        .await;
}

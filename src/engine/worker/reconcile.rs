//! One reconcile of a release, as phases that hand typed results on: admit (the request
//! tokens, the spec's checks), guard (whose the release is, its dependencies), prepare
//! the desired state, then steps of observe → plan → run the action → record its
//! outcome, until the planner says in sync or stalled. Each action's file says how its outcome is recorded;
//! what is recorded here is what no action owns: the tokens, fresh retries for a new
//! desired state, in sync, stalled, and status.history.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use kube::runtime::events::EventType;

use super::NEVER;
use super::external;
use super::guards::{
    Tenancy, dependency_cycle, invalid_cel, ours_to_act_on, stall, tenancy, unready_dependency,
};
use super::unchanged::Unchanged;
use crate::api::{HelmRelease, HelmReleaseStatus, annotations};
use crate::engine::actions::{self, Outcome};
use crate::engine::plan::{self, Desired, Latest, Next, Observed, Policy, TestState};
use crate::engine::run::{PrepareError, Prepared, Requeue, Run, Settled, new_token, prepare};
use crate::engine::status::{self, Truth, condition, reason};
use crate::engine::vocabulary::Phase;
use crate::helm::release::{Release, Status};

/// `history` with `record` in it (in place of the revision of its version).
fn with_record(mut history: Vec<Release>, record: Release) -> Vec<Release> {
    history.retain(|r| r.version != record.version);
    history.push(record);
    history.sort_by_key(|r| r.version);
    history
}

fn is_pending(record: &Release) -> bool {
    record.info.as_ref().is_some_and(|i| i.status.is_pending())
}

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

/// What [`admit`] found: the release may be acted on.
struct Admitted {
    /// What the last reconcile found in sync on, for an interval check to skip reads.
    settled: Option<Settled>,
    /// This reconcile answers a request token.
    requested: bool,
}

/// The history the guards read, and when.
type Read = (Vec<Release>, std::time::Instant);

/// What [`guard`] found: the release is ours to act on, with the history it read and the
/// desired state prepared beside the guards (urgent work) or by the unchanged check.
struct Guarded {
    history: Option<Read>,
    prepared: Option<Result<Prepared, PrepareError>>,
}

/// What [`prepare_desired`] hands the steps.
struct Ready {
    prepared: Prepared,
    /// Rendered already, by the wait this desired state superseded.
    rendered: Option<crate::helm::render::Rendered>,
    desired: Desired,
    /// A forceAt token not handled yet: the next install or upgrade is forced.
    force: Option<String>,
    history: Option<Read>,
}

/// The request tokens, a pin or unpin, suspension, the spec's CEL and the tenancy
/// policy: what the spec alone decides.
async fn admit(run: &mut Run<'_>) -> crate::engine::Result<ControlFlow<Requeue, Admitted>> {
    let hr = run.hr.clone();
    let interval = hr.spec.interval.as_std();
    let settled = run.memory.cache.settled.take();
    let requested = take_tokens(&mut run.status, &hr);
    run.memory.watches.conflict = None;
    if super::pin::asked(&run.hr) {
        Box::pin(super::pin::pin_if_asked(run)).await?;
    }
    run.learn_who_suspended().await;
    if hr.spec.suspend {
        run.write_status().await;
        return Ok(ControlFlow::Break(Requeue::After(NEVER)));
    }
    super::pin::unpin_if_resumed(run).await;
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
    status::set(
        &mut run.status,
        condition::READY,
        Truth::False,
        reason::ACCESS_DENIED,
        &message,
        run.hr.metadata.generation,
    );
    status::remove(&mut run.status, condition::RECONCILING);
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
async fn guard(
    run: &mut Run<'_>,
    admitted: Admitted,
) -> crate::engine::Result<ControlFlow<Requeue, Guarded>> {
    let interval = run.hr.spec.interval.as_std();
    let mut prepared_unchanged = None;
    if let Some(settled) = admitted
        .settled
        .filter(|s| super::unchanged::may_skip_history(run, s, admitted.requested))
    {
        match Box::pin(super::unchanged::check(run, settled)).await {
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
        status::set(
            &mut run.status,
            condition::READY,
            Truth::False,
            reason::DEPENDENCY_NOT_READY,
            waiting,
            run.hr.metadata.generation,
        );
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
    let early = run.priority == crate::cluster::slots::Priority::Urgent
        && run
            .memory
            .handoff
            .candidate
            .as_ref()
            .is_none_or(|c| c.generation != generation);
    if prepared_unchanged.is_some() || !early {
        return (Box::pin(ours_to_act_on(run)).await, prepared_unchanged);
    }
    let (ctx, acting, priority, hr) = (run.ctx, run.acting.clone(), run.priority, run.hr.clone());
    let preparing = async move { prepare(ctx, &acting, &hr, priority).await };
    let (guarded, prepared) = tokio::join!(ours_to_act_on(run), preparing);
    (guarded, Some(prepared))
}

/// The desired state: the one a superseded wait handed over, else prepared now (or
/// already, beside the guards). A desired state that cannot be prepared fails the
/// reconcile, which is looked at again when what it lacks appears.
async fn prepare_desired(run: &mut Run<'_>, guarded: Guarded) -> ControlFlow<Requeue, Ready> {
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
            run.fix = c.timeline();
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
                None => prepare(run.ctx, &run.acting, &hr, run.priority).await,
            };
            // Urgent work (a failed release's fix, an operator's request) is timed as a
            // fix superseding a wait is: from the worker's waking for it, step by step.
            if run.priority == crate::cluster::slots::Priority::Urgent {
                let now = std::time::Instant::now();
                run.fix = Some(crate::engine::vocabulary::FixTimeline {
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
    run.masker = prepared.values.secrets.clone();
    run.desired_digest = prepared.digest();
    run.desired_sources = prepared.values.sources.clone();
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
    status::set(
        &mut run.status,
        condition::READY,
        Truth::False,
        reason,
        &message,
        run.hr.metadata.generation,
    );
    status::remove(&mut run.status, condition::RECONCILING);
    run.write_status().await;
    run.event(EventType::Warning, reason, "Reconcile", message)
        .await;
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
            _ => run.storage.history(&run.release_name).await?,
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
    Box::pin(super::drift::check(run, latest)).await;
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
    if superseded && let Some(canceled) = run.last_record.take() {
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
    let history = run.storage.history(&run.release_name).await?;
    run.record_history(&history);
    let note = record(&mut run.status, &outcome, generation);
    let retry = super::strategy::retry_on_failure(
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

/// When an idle release is looked at again: its interval, or sooner when its chart source
/// has an interval of its own (Flux's `chart.spec.interval`: how often the chart is
/// fetched, a new one being a new desired state).
fn idle_recheck(interval: Duration, chart: &crate::api::ChartSpec) -> Duration {
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
fn take_tokens(s: &mut HelmReleaseStatus, hr: &HelmRelease) -> bool {
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
/// the next interval check (see `super::unchanged`), when the history was read from the
/// records the last list returned and its newest revision is deployed.
fn settled_on(run: &Run<'_>, history: &[Release]) -> Option<Settled> {
    let latest = history.last()?;
    if latest.info.as_ref().map(|i| i.status) != Some(Status::Deployed) {
        return None;
    }
    let records = run.storage.last_listed()?;
    let versions = records.records.iter().map(|(v, _)| *v);
    if records.name != run.release_name || !versions.eq(history.iter().map(|r| r.version)) {
        return None;
    }
    Some(Settled {
        uid: run.hr.metadata.uid.clone(),
        generation: run.hr.metadata.generation,
        desired: run.desired_digest.clone(),
        records,
        version: latest.version,
    })
}

/// A new desired state (generation, chart version or values) gets a fresh set of
/// retries, as in Flux.
fn fresh_retries(s: &mut HelmReleaseStatus, desired: &Desired, generation: Option<i64>) {
    if attempt_differs(s, desired, generation) {
        reset_failures(s);
    }
}

/// Whether `desired` (at `generation`) is not what was last attempted: a new generation,
/// chart version, values, or source revision (a Git commit, an OCI manifest digest). As
/// helm-controller's MustResetFailures decides: such a desired state gets fresh retries,
/// an unchanged one never does.
pub(super) fn attempt_differs(
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
fn reset_failures(s: &mut HelmReleaseStatus) {
    s.failures = 0;
    s.install_failures = 0;
    s.upgrade_failures = 0;
    status::remove(s, condition::STALLED);
}

/// Nothing to do: Ready=True with the reason of what made it so.
fn in_sync(s: &mut HelmReleaseStatus, latest: Option<&Release>, generation: Option<i64>) {
    let (r, m) = success_reason(s, latest);
    status::set(s, condition::READY, Truth::True, r, m, generation);
    status::remove(s, condition::RECONCILING);
    status::remove(s, condition::STALLED);
    s.observed_generation = generation;
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
            status::set(
                &mut run.status,
                condition::READY,
                Truth::False,
                reason::EXTERNAL_REVISION,
                &message,
                generation,
            );
            status::remove(&mut run.status, condition::RECONCILING);
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

/// The planner gave up (retries used up, nothing to roll back to): Stalled=True.
fn nothing_more_to_try(
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
fn observe(
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
            common_metadata: super::strategy::common_metadata_of(r, hr),
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
fn left_waiting(s: &HelmReleaseStatus, r: &Release) -> bool {
    let pending = r.info.as_ref().is_some_and(|i| i.status.is_pending());
    pending
        && r.labels.contains_key(actions::OWNER_LABEL)
        && s.wait
            .as_ref()
            .is_some_and(|w| w.revision == r.version && w.hook.is_none())
}

/// Why the release is Ready: what the last action that made it so said, or else what the
/// newest revision says (a first one was installed, a later one upgraded).
fn success_reason(status: &HelmReleaseStatus, latest: Option<&Release>) -> (&'static str, String) {
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
    use crate::engine::actions::install_or_upgrade;
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

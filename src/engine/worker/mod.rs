//! One worker per HelmRelease: waits for a trigger, then observes, asks the planner for
//! the next action, runs it, records the result, and asks again until the release is in
//! sync or stalled. During a health wait it keeps reading its inbox, so an operator's
//! cancel (or a newer spec) reaches the wait at once.
//!
//! This file is the loop (requeue, backoff). The rest, in the order a reconcile meets
//! it: `finalize` (a HelmRelease being deleted), `guards` (claim, dependency cycle,
//! dependencies not ready), `unchanged` (an interval check that need not read the
//! history), `reconcile` (observe → plan → run the action → record),
//! `handover` (waiting for another engine to let go). What the worker shares with the
//! actions it runs (its inbox, what wakes it, the desired state, the cancellable health
//! check, what all of them see) is in `super::run`. The actions themselves, each with how
//! its outcome is recorded, are in `super::actions`.

mod drift;
mod external;
mod finalize;
mod guards;
mod handover;
mod pin;
mod reconcile;
mod strategy;
mod unchanged;

use std::sync::Arc;
use std::time::Duration;

use kube::{Api, ResourceExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::actions::Note;
use super::run::{
    Context, Heard, Intent, Memory, Precedence, Requeue, Run, Target, Trail, Trigger,
    values_source_events,
};
use super::status::{self, Verdict, condition, reason};
use super::vocabulary::{Phase, ReleaseKey};
use crate::api::{FINALIZER, HelmRelease};
use crate::helm::release::Storage;
use crate::telemetry::ReconcileResult;

/// The worker loop of one release until `stop` or the release is gone.
///
/// The inbox comes boxed: an async fn keeps its arguments in its state beside the locals
/// they move to, and every idle worker holds that state (see `worker_state_stays_small`).
pub async fn run(
    ctx: Arc<Context>,
    key: ReleaseKey,
    mut memory: Box<Memory>,
    stop: CancellationToken,
) {
    let mut next_run = Instant::now();
    let mut first = true;
    if let Some(before) = memory.handoff.predecessor.take() {
        tokio::select! {
            () = before.cancelled() => {}
            () = stop.cancelled() => return,
        }
    }
    if std::mem::take(&mut memory.handoff.handover)
        && !Box::pin(handover::await_predecessor(&ctx, &key, &mut memory, &stop)).await
    {
        ctx.signals.live.send_modify(|m| {
            m.remove(&key);
        });
        return;
    }
    let mut listening = Listening {
        pushed: ctx.signals.pushed.subscribe(),
        values: None,
        last: None,
    };
    loop {
        let woke = Box::pin(next_trigger(
            &ctx,
            &key,
            &mut memory,
            &stop,
            &mut listening,
            next_run,
        ))
        .await;
        let by_interval = match woke {
            Woke::Stop => break,
            Woke::Nothing => continue,
            Woke::Reconcile { by_interval } => by_interval,
        };
        memory.retry.woke_at = Some(std::time::Instant::now());
        memory.retry.by_interval = by_interval;
        // The first reconcile of every worker comes at once when an engine starts (or
        // takes the lease over): a few at a time, each until it applies or waits, so
        // thousands of releases do not open thousands of requests and reconciles at once.
        let permit = if std::mem::take(&mut first) {
            tokio::select! {
                () = stop.cancelled() => break,
                permit = ctx.work.starts.clone().acquire_owned() => permit.ok(),
            }
        } else {
            None
        };
        let hr = memory.inbox.newest.clone();
        listening.last = Some(Trigger::of(&hr));
        let span =
            tracing::info_span!("reconcile", release = %key, generation = hr.metadata.generation);
        ctx.metrics.in_flight.inc();
        let started = std::time::Instant::now();
        // Boxed: the reconcile's state machine is large, and an idle worker (most of a
        // thousand) should not carry it between reconciles.
        let (requeue, result) =
            Box::pin(reconcile_once(&ctx, &key, hr, &mut memory, &stop, permit))
                .instrument(span)
                .await;
        ctx.metrics.in_flight.dec();
        if let Some(result) = result {
            ctx.metrics
                .reconciled(&key.namespace, &key.name, started.elapsed(), result);
        }
        memory.handoff.warmup = None;
        ctx.signals.live.send_modify(|m| {
            let entry = m.entry(key.clone()).or_default();
            entry.phase = Phase::Idle;
            entry.wait = None;
        });
        if memory.inbox.deleted {
            break;
        }
        next_run = Instant::now() + requeue;
    }
    // A stopping engine's views go with it: thousands of workers each taking their entry
    // out one by one held a dashboard's quit up.
    if !ctx.signals.stopping.is_cancelled() {
        ctx.signals.live.send_modify(|m| {
            m.remove(&key);
        });
    }
}

/// What woke an idle worker.
enum Woke {
    /// Something to reconcile for; `by_interval` when only its interval came round.
    Reconcile { by_interval: bool },
    /// Nothing new after all (a spurious trigger, an echo).
    Nothing,
    /// The engine stops, or the release is gone.
    Stop,
}

const WOKEN: Woke = Woke::Reconcile { by_interval: false };

/// What an idle worker listens for until its next reconcile: its interval, pushes to its
/// chart source, its messages, and while it is failed or held up, its source, the
/// record it conflicted with, the cluster healing, the valuesFrom source it lacks.
async fn next_trigger(
    ctx: &Context,
    key: &ReleaseKey,
    memory: &mut Memory,
    stop: &CancellationToken,
    listening: &mut Listening,
    next_run: Instant,
) -> Woke {
    let wanted = (memory.watches.watch_source && !memory.watches.values_sources.is_empty())
        .then(|| memory.watches.values_sources.clone());
    if wanted.as_ref() != listening.values.as_ref().map(|(sources, _)| sources) {
        listening.values = wanted.map(|sources| {
            let events = values_source_events(ctx, &memory.inbox.newest, &sources);
            (sources, events)
        });
    }
    // Subscribed only while held up by the cluster: the engine looks for healing only
    // while someone waits for it.
    let mut healed = memory.retry.blocked.then(|| ctx.signals.healed.subscribe());
    let mut appeared = memory
        .watches
        .missing
        .as_ref()
        .map(|src| values_source_events(ctx, &memory.inbox.newest, std::slice::from_ref(src)));
    let mut record_changed = memory
        .watches
        .conflict
        .as_ref()
        .map(|l| l.changes(&ctx.client));
    // A failed or stalled release looks at its source for a new desired state.
    let chart = &memory.inbox.newest.spec.chart;
    let source_check = (memory.watches.watch_source && super::run::polls(chart))
        .then(|| Instant::now() + super::run::source_poll(ctx, chart));
    let newer = |what: Option<String>, memory: &mut Memory, changed: &str| match what {
        Some(what) => {
            tracing::info!(release = %key, "{changed}{what}: trying it now, with fresh retries");
            memory.retry.urgent = true;
            WOKEN
        }
        None => Woke::Nothing,
    };
    tokio::select! {
        () = stop.cancelled() => Woke::Stop,
        // A command came while the last step ran: looked at now.
        () = std::future::ready(()), if memory.inbox.requested => {
            memory.inbox.requested = false;
            memory.retry.urgent = true;
            WOKEN
        }
        () = tokio::time::sleep_until(next_run) => Woke::Reconcile { by_interval: true },
        event = listening.pushed.recv() => {
            use tokio::sync::broadcast::error::RecvError;
            match event {
                Ok(w) if w.wakes(&memory.inbox.newest) => {
                    tracing::info!(release = %key, source = %w.describe(), urgent = w.urgent, "a push to its chart source: looking now");
                    // A receiver past its rate wakes releases as routine work.
                    memory.retry.urgent |= w.urgent;
                    WOKEN
                }
                // Fell behind: one of them may have been ours.
                Err(RecvError::Lagged(_)) if super::run::polls(&memory.inbox.newest.spec.chart) => WOKEN,
                Err(RecvError::Closed) => Woke::Stop,
                _ => Woke::Nothing,
            }
        }
        Some(()) = async {
            tokio::time::sleep_until(source_check?).await;
            Some(())
        } => {
            let what = Box::pin(new_desired_state(ctx, memory)).await;
            newer(what, memory, "")
        }
        Some(Some(())) = async { Some(futures::StreamExt::next(record_changed.as_mut()?).await) } => {
            tracing::info!(release = %key, "a release record it conflicted with changed: trying again now");
            ctx.metrics.retried_on_cause(crate::telemetry::RetryCause::ReleaseRecord);
            WOKEN
        }
        Some(Ok(())) = async { Some(healed.as_mut()?.changed().await) } => {
            let cause = *ctx.signals.healed.borrow();
            tracing::info!(release = %key, "the cluster healed ({}): trying again now", cause.label());
            ctx.metrics.retried_on_cause(cause);
            WOKEN
        }
        Some(Some(changed)) = async { Some(futures::StreamExt::next(&mut listening.values.as_mut()?.1).await) } => {
            let what = Box::pin(new_desired_state(ctx, memory)).await;
            newer(what, memory, &format!("{changed}, "))
        }
        Some(Some(changed)) = async { Some(futures::StreamExt::next(appeared.as_mut()?).await) } => {
            tracing::info!(release = %key, "{changed}: trying again now");
            ctx.metrics.retried_on_cause(crate::telemetry::RetryCause::ValuesSource);
            WOKEN
        }
        msg = memory.inbox.recv() => match memory.absorb(ctx, key, msg) {
            Heard::Closed | Heard::Deleted => Woke::Stop,
            // Only a change of what triggers a reconcile (generation, tokens, deletion).
            Heard::Updated { .. } if listening.last.as_ref() == Some(&Trigger::of(&memory.inbox.newest)) => Woke::Nothing,
            Heard::Updated { .. } => WOKEN,
            // Kept in status by a reconcile now (a routine one: nothing waits on it but
            // the record).
            Heard::ConfigRolled => WOKEN,
            // No wait is running: the token is kept, so its echo is ignored.
            Heard::CancelWait(_) => Woke::Nothing,
            // Someone waits on it.
            Heard::Command => {
                memory.inbox.requested = false;
                memory.retry.urgent = true;
                WOKEN
            }
        },
    }
}

/// What an idle worker keeps listening to between its wakes.
struct Listening {
    /// Pushes to chart sources (webhook receivers): the ones naming this release's chart.
    pushed: tokio::sync::broadcast::Receiver<Arc<crate::helm::source::pushed::Wake>>,
    /// A failed or stalled release's valuesFrom objects, watched for as long as the list
    /// stays the same (each change is then seen once).
    values: Option<(
        Vec<crate::helm::values::ValuesSourceRef>,
        futures::stream::SelectAll<futures::stream::BoxStream<'static, String>>,
    )>,
    /// What triggered the last reconcile: an update that changes none of it is none.
    last: Option<Trigger>,
}

const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);
/// Retry of the finalizer's bookkeeping (not of an action, which backs off).
const RETRY: Duration = Duration::from_secs(10);

/// One look at a release: finalize it, or reconcile it; then when to look again, and how
/// it went (none: the engine stopped it midway).
async fn reconcile_once(
    ctx: &Context,
    key: &ReleaseKey,
    hr: Arc<HelmRelease>,
    memory: &mut Memory,
    stop: &CancellationToken,
    start_permit: Option<tokio::sync::OwnedSemaphorePermit>,
) -> (Duration, Option<ReconcileResult>) {
    // A remote release whose kubeconfig cannot be used does nothing, deletion included
    // (its objects are on that cluster): its status says why. The engine's own clients
    // stand in the run, for its status and Events only.
    let (acting, unusable) = match ctx.acting_for(&hr).await {
        Ok(acting) => (acting, None),
        Err(e) => (ctx.acting(&ctx.policy().identity(&hr)), Some(e)),
    };
    let mut run = start_run(ctx, key, &hr, acting, memory, stop, start_permit);
    let failed = run
        .status
        .conditions
        .iter()
        .any(|c| c.type_ == condition::READY && c.status == "False");
    let new_spec = run.status.last_attempted_generation != hr.metadata.generation;
    let urgency = run
        .memory
        .retry
        .urgency(failed, new_spec, &ctx.work.precedence);
    run.precedence.priority = urgency.priority;
    run.precedence.urgent = urgency.precedence;
    let outcome = if let Some(e) = unusable {
        Err(crate::engine::Error::Remote(e))
    } else if hr.metadata.deletion_timestamp.is_some() {
        return (
            finalize::finalize(&mut run).await,
            Some(ReconcileResult::Success),
        );
    } else {
        if !hr.finalizers().iter().any(|f| f == FINALIZER)
            && let Err(e) = finalize::add_finalizer(&run).await
        {
            tracing::warn!(release = %key, error = %e, "cannot add finalizer");
            return (RETRY, Some(ReconcileResult::Error));
        }
        reconcile::reconcile_release(&mut run).await
    };
    let (requeue, result) = match outcome {
        // An action that failed counts as a failure even when the reconcile goes on at
        // once to remediate it: Ready says how it ended.
        Ok(requeue) => {
            let ready = run
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == condition::READY);
            let failed =
                matches!(requeue, Requeue::Failed) || ready.is_some_and(|c| c.status == "False");
            let result = if failed {
                ReconcileResult::Failure
            } else {
                ReconcileResult::Success
            };
            (requeue, result)
        }
        // Nothing to record: the status keeps saying what was running, as after a kill.
        Err(crate::engine::Error::Stopped) => return (NEVER, None),
        Err(e) => (
            Box::pin(record_error(&mut run, e)).await,
            ReconcileResult::Error,
        ),
    };
    // Failed, stalled or held: a new desired state from its source is looked for.
    let held = run
        .status
        .conditions
        .iter()
        .any(|c| c.type_ == condition::READY && c.status != "True");
    let sources = std::mem::take(&mut run.intent.sources);
    run.memory.watches.after(held, &sources);
    run.memory.written.last_status = Some(run.memory.written.shared_status(&run.status));
    // A fix superseding the wait goes on in the next reconcile, urgent still.
    let superseding = run
        .memory
        .handoff
        .candidate
        .is_some()
        .then(|| run.precedence.urgent.take())
        .flatten();
    let after = run
        .memory
        .retry
        .ended(requeue, hr.spec.interval.as_std(), superseding);
    (after, Some(result))
}

/// The run of one reconcile, from what the worker remembers.
fn start_run<'a>(
    ctx: &'a Context,
    key: &ReleaseKey,
    hr: &Arc<HelmRelease>,
    acting: Arc<crate::engine::run::Acting>,
    memory: &'a mut Memory,
    stop: &'a CancellationToken,
    start_permit: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Run<'a> {
    Run {
        ctx,
        key: key.clone(),
        target: Target::of(hr),
        storage: Storage::new(acting.client.clone(), &hr.storage_namespace())
            .reading_from(memory.cache.records_floor.clone()),
        acting,
        status: memory
            .written
            .last_status
            .as_deref()
            .or(hr.status.as_ref())
            .cloned()
            .unwrap_or_default(),
        hr: hr.clone(),
        api: Api::namespaced(ctx.client.clone(), &key.namespace),
        memory,
        stop,
        intent: Intent::default(),
        precedence: Precedence::routine(start_permit),
        trail: Trail::default(),
    }
}

/// A reconcile that ended in an error: Ready=False with why (a refused permission
/// named as such, and remembered so its grant is noticed), an Event, and when to look
/// again: as soon as the cluster heals when the cluster caused it.
async fn record_error(run: &mut Run<'_>, e: crate::engine::Error) -> Requeue {
    let generation = run.hr.metadata.generation;
    let refused = e.forbidden();
    if let Some(refusal) = &refused {
        run.note_refused(refusal);
    }
    let (why, message) = match refused {
        Some(refusal) => (
            reason::FORBIDDEN,
            refused_message(&run.acting.identity, &refusal),
        ),
        None => (reason::RECONCILE_ERROR, e.describe()),
    };
    let message = run.intent.masker.mask(&message);
    let verdict = Verdict::Failing {
        reason: why,
        message: &message,
    };
    status::summarise(&mut run.status, verdict, generation);
    run.write_status().await;
    tracing::warn!(release = %run.key, reason = why, "{message}");
    run.event(
        kube::runtime::events::EventType::Warning,
        why,
        "Reconcile",
        message,
    )
    .await;
    // The API server or discovery failing is the cluster's: looked at again as
    // soon as it heals.
    if e.cluster_cause().is_some() {
        Requeue::Blocked
    } else {
        Requeue::Failed
    }
}

impl Run<'_> {
    /// Publishes the Event an action's bookkeeping asked for; `action` names it when the
    /// note does not.
    async fn publish_note(&self, note: Note, action: &str) {
        self.event(
            note.type_,
            note.reason,
            note.action.unwrap_or(action),
            note.message,
        )
        .await;
    }
}

/// What is new in the desired state of a release that failed, stalled or was held (a
/// chart version or digest, a commit, valuesFrom data), if anything: compared with what
/// was last attempted, as helm-controller decides to reset its failure counters.
async fn new_desired_state(ctx: &Context, memory: &Memory) -> Option<String> {
    let hr = &memory.inbox.newest;
    let status = memory.written.last_status.as_ref()?;
    let acting = ctx.acting_for(hr).await.ok()?;
    let prepared = super::run::prepare(ctx, &acting, hr, crate::cluster::slots::Priority::Urgent)
        .await
        .ok()?;
    let desired = prepared.desired();
    reconcile::attempt_differs(status, &desired, hr.metadata.generation).then(|| {
        format!(
            "a new desired state from its source: chart {}@{}{}",
            desired.chart_name,
            desired.chart_version,
            desired
                .source_revision
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        )
    })
}

/// What a release's status says when the API server refused a call made for it: who was
/// refused (the engine, or the release's ServiceAccount) and what grants it.
pub(in crate::engine) fn refused_message(
    identity: &crate::cluster::tenancy::Identity,
    refusal: &str,
) -> String {
    match identity {
        crate::cluster::tenancy::Identity::Engine => format!(
            "the API server refused the engine's call: {refusal}; grant the engine's identity that permission (`wheelhouse rbac` prints what it needs)"
        ),
        sa => format!(
            "the API server refused the release's {sa}, which the release acts as: {refusal}; grant that ServiceAccount the permission (a RoleBinding in its namespace), or change spec.serviceAccountName"
        ),
    }
}

/// Revision `version` of chart app@1.0.0 with no values, `status`, described so (tests).
#[cfg(test)]
fn stored(
    version: i32,
    status: crate::helm::release::Status,
    description: &str,
) -> crate::helm::release::Release {
    use crate::helm::chart::{Chart, Metadata};
    crate::helm::release::Release {
        version,
        info: Some(crate::helm::release::Info {
            status,
            description: description.into(),
            ..Default::default()
        }),
        chart: Some(Chart {
            metadata: Some(Metadata {
                name: "app".into(),
                version: "1.0.0".into(),
                ..Metadata::default()
            }),
            ..Chart::default()
        }),
        ..Default::default()
    }
}

/// A status's conditions as (type, status, reason), for tests.
#[cfg(test)]
fn conditions(s: &crate::api::HelmReleaseStatus) -> Vec<(&str, &str, &str)> {
    s.conditions
        .iter()
        .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
        .collect()
}

/// A HelmRelease `apps/a` for tests; `spec` holds entries added to its spec's flow
/// mapping, as `dependsOn: [{name: db}]`.
#[cfg(test)]
fn test_release(spec: &str) -> HelmRelease {
    let sep = if spec.is_empty() { "" } else { ", " };
    crate::text::yaml::from_str(&format!(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: a, namespace: apps}}\nspec: {{chart: {{path: ./c}}{sep}{spec}}}"
    ))
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn future_size<A, B, C, D, F: std::future::Future>(_: impl Fn(A, B, C, D) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// Every release has a worker for as long as the engine runs, and its task holds the
    /// worker's largest state throughout: at 10,000 releases each kilobyte is 10 MB. Its
    /// memory is boxed beside it, and what is large in it (a candidate, a record being
    /// written) is boxed in turn, so an idle worker keeps little.
    #[test]
    fn an_idle_worker_stays_small() {
        let bytes = future_size(run);
        assert!(bytes < 2 * 1024, "a worker's future is {bytes} bytes");
        let memory = std::mem::size_of::<crate::engine::run::Memory>();
        assert!(memory < 1024, "a worker's memory is {memory} bytes");
    }
}

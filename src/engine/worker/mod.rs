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

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::{Api, ResourceExt};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::actions::Note;
use super::run::{Context, Inbox, Msg, Run, Trigger, note_seen, values_source_events};
use super::status::{self, Truth, condition, reason};
use super::vocabulary::{Command, LiveState, Phase, ReleaseKey};
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
    mut inbox: Box<Inbox>,
    stop: CancellationToken,
) {
    let mut next_run = Instant::now();
    let mut last: Option<Trigger> = None;
    let mut first = true;
    if let Some(before) = inbox.predecessor.take() {
        tokio::select! {
            () = before.cancelled() => {}
            () = stop.cancelled() => return,
        }
    }
    if std::mem::take(&mut inbox.handover)
        && !Box::pin(handover::await_predecessor(&ctx, &key, &mut inbox, &stop)).await
    {
        ctx.live.send_modify(|m| {
            m.remove(&key);
        });
        return;
    }
    // Pushes to chart sources (webhook receivers): the ones naming this release's chart.
    let mut pushed = ctx.pushed.subscribe();
    // A failed or stalled release's valuesFrom objects, watched for as long as the list
    // stays the same (each change is then seen once).
    let mut values_watch: Option<(Vec<crate::helm::values::ValuesSourceRef>, _)> = None;
    loop {
        let wanted = (inbox.watch_source && !inbox.values_sources.is_empty())
            .then(|| inbox.values_sources.clone());
        if wanted.as_ref() != values_watch.as_ref().map(|(sources, _)| sources) {
            values_watch = wanted.map(|sources| {
                let events = values_source_events(&ctx, &inbox.newest, &sources);
                (sources, events)
            });
        }
        // Subscribed only while held up by the cluster: the engine looks for healing only
        // while someone waits for it.
        let mut healed = inbox.blocked.then(|| ctx.healed.subscribe());
        let mut appeared = inbox
            .missing
            .as_ref()
            .map(|src| values_source_events(&ctx, &inbox.newest, std::slice::from_ref(src)));
        let mut record_changed = inbox.conflict.as_ref().map(|l| l.changes(&ctx.client));
        // A failed or stalled release looks at its source for a new desired state.
        let source_check = (inbox.watch_source && super::run::polls(&inbox.newest.spec.chart))
            .then(|| Instant::now() + super::run::source_poll(&ctx, &inbox.newest.spec.chart));
        let mut by_interval = false;
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(next_run) => by_interval = true,
            event = pushed.recv() => {
                use tokio::sync::broadcast::error::RecvError;
                match event {
                    Ok(w) if w.wakes(&inbox.newest) => {
                        tracing::info!(release = %key, source = %w.describe(), urgent = w.urgent, "a push to its chart source: looking now");
                        // A receiver past its rate wakes releases as routine work.
                        inbox.urgent |= w.urgent;
                    }
                    // Fell behind: one of them may have been ours.
                    Err(RecvError::Lagged(_)) if super::run::polls(&inbox.newest.spec.chart) => {}
                    Err(RecvError::Closed) => break,
                    _ => continue,
                }
            }
            Some(()) = async {
                tokio::time::sleep_until(source_check?).await;
                Some(())
            } => {
                match Box::pin(new_desired_state(&ctx, &inbox)).await {
                    Some(what) => {
                        tracing::info!(release = %key, "{what}: trying it now, with fresh retries");
                        inbox.urgent = true;
                    }
                    None => continue,
                }
            }
            Some(Some(())) = async { Some(futures::StreamExt::next(record_changed.as_mut()?).await) } => {
                tracing::info!(release = %key, "a release record it conflicted with changed: trying again now");
                ctx.metrics.retried_on_cause(crate::telemetry::RetryCause::ReleaseRecord);
            }
            Some(Ok(())) = async { Some(healed.as_mut()?.changed().await) } => {
                let cause = *ctx.healed.borrow();
                tracing::info!(release = %key, "the cluster healed ({}): trying again now", cause.label());
                ctx.metrics.retried_on_cause(cause);
            }
            Some(Some(changed)) = async { Some(futures::StreamExt::next(&mut values_watch.as_mut()?.1).await) } => {
                match Box::pin(new_desired_state(&ctx, &inbox)).await {
                    Some(what) => {
                        tracing::info!(release = %key, "{changed}, {what}: trying it now, with fresh retries");
                        inbox.urgent = true;
                    }
                    None => continue,
                }
            }
            Some(Some(changed)) = async { Some(futures::StreamExt::next(appeared.as_mut()?).await) } => {
                tracing::info!(release = %key, "{changed}: trying again now");
                ctx.metrics.retried_on_cause(crate::telemetry::RetryCause::ValuesSource);
            }
            msg = inbox.rx.recv() => {
                match msg {
                    None => break,
                    Some(Msg::Updated(hr)) => {
                        note_seen(&ctx, &key, &hr);
                        inbox.newest = hr;
                    }
                    Some(Msg::Deleted) => break,
                    // Kept in status by a reconcile now (a routine one: nothing waits on
                    // it but the record).
                    Some(Msg::ConfigRolled(record)) => {
                        inbox.note_change(*record);
                        last = None;
                    }
                    Some(Msg::Command(command)) => match *command {
                        (Command::CancelWait(_), t) => {
                            // No wait is running: remember the token so its echo is ignored.
                            inbox.handled_cancel = Some(t);
                            continue;
                        }
                        // An operator waits on it.
                        _ => {
                            last = None;
                            inbox.urgent = true;
                        }
                    },
                }
                if last.as_ref() == Some(&Trigger::of(&inbox.newest)) {
                    continue;
                }
            }
        }
        inbox.woke_at = Some(std::time::Instant::now());
        inbox.by_interval = by_interval;
        // The first reconcile of every worker comes at once when an engine starts (or
        // takes the lease over): a few at a time, each until it applies or waits, so
        // thousands of releases do not open thousands of requests and reconciles at once.
        let permit = if std::mem::take(&mut first) {
            tokio::select! {
                () = stop.cancelled() => break,
                permit = ctx.starts.clone().acquire_owned() => permit.ok(),
            }
        } else {
            None
        };
        let hr = inbox.newest.clone();
        last = Some(Trigger::of(&hr));
        let span =
            tracing::info_span!("reconcile", release = %key, generation = hr.metadata.generation);
        ctx.metrics.in_flight.inc();
        let started = std::time::Instant::now();
        // Boxed: the reconcile's state machine is large, and an idle worker (most of a
        // thousand) should not carry it between reconciles.
        let (requeue, result) = Box::pin(reconcile_once(&ctx, &key, hr, &mut inbox, &stop, permit))
            .instrument(span)
            .await;
        ctx.metrics.in_flight.dec();
        if let Some(result) = result {
            ctx.metrics
                .reconciled(&key.namespace, &key.name, started.elapsed(), result);
        }
        inbox.warmup = None;
        ctx.live.send_modify(|m| {
            let entry = m.entry(key.clone()).or_default();
            entry.phase = Phase::Idle;
            entry.wait = None;
        });
        if inbox.deleted {
            break;
        }
        next_run = Instant::now() + requeue;
    }
    // A stopping engine's views go with it: thousands of workers each taking their entry
    // out one by one held a dashboard's quit up.
    if !ctx.stopping.is_cancelled() {
        ctx.live.send_modify(|m| {
            m.remove(&key);
        });
    }
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
    inbox: &mut Inbox,
    stop: &CancellationToken,
    start_permit: Option<tokio::sync::OwnedSemaphorePermit>,
) -> (Duration, Option<ReconcileResult>) {
    let api: Api<HelmRelease> = Api::namespaced(ctx.client.clone(), &key.namespace);
    // A remote release whose kubeconfig cannot be used does nothing, deletion included
    // (its objects are on that cluster): its status says why. The engine's own clients
    // stand in the run, for its status and Events only.
    let (acting, unusable) = match ctx.acting_for(&hr).await {
        Ok(acting) => (acting, None),
        Err(e) => (ctx.acting(&ctx.policy().identity(&hr)), Some(e)),
    };
    let mut run = Run {
        ctx,
        key: key.clone(),
        release_name: hr.release_name(),
        target_namespace: hr.target_namespace(),
        storage: Storage::new(acting.client.clone(), &hr.storage_namespace())
            .reading_from(inbox.records_floor.clone()),
        acting,
        status: inbox
            .last_status
            .as_deref()
            .or(hr.status.as_ref())
            .cloned()
            .unwrap_or_default(),
        hr: hr.clone(),
        api,
        inbox,
        stop,
        live: Mutex::new(LiveState::default()),
        start_permit: Mutex::new(start_permit),
        desired_digest: String::new(),
        desired_sources: Vec::new(),
        fix: None,
        elsewhere: Vec::new(),
        masker: Default::default(),
        claim: true,
        priority: crate::cluster::slots::Priority::Routine,
        last_record: None,
        urgent: None,
        applied_generations: None,
    };
    // A fix for a failed or stalled release, or an operator's request, goes first.
    let failed = run
        .status
        .conditions
        .iter()
        .any(|c| c.type_ == condition::READY && c.status == "False");
    if let Some(carried) = run.inbox.carried_urgency.take() {
        run.priority = crate::cluster::slots::Priority::Urgent;
        run.urgent = Some(carried);
    } else if run.inbox.urgent || failed {
        run.priority = crate::cluster::slots::Priority::Urgent;
        // Routine work gives way to a fix (a new desired state for a failed release, an
        // operator's request, a push), not to a failed release's retry of the same one.
        let new_spec = run.status.last_attempted_generation != hr.metadata.generation;
        if run.inbox.urgent || new_spec {
            run.urgent = Some(ctx.precedence.urgent());
        }
    }
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
        Err(e) => {
            let generation = hr.metadata.generation;
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
            let message = run.masker.mask(&message);
            status::set(
                &mut run.status,
                condition::READY,
                Truth::False,
                why,
                &message,
                generation,
            );
            run.write_status().await;
            tracing::warn!(release = %key, reason = why, "{message}");
            run.event(
                kube::runtime::events::EventType::Warning,
                why,
                "Reconcile",
                message,
            )
            .await;
            // The API server or discovery failing is the cluster's: looked at again as
            // soon as it heals.
            let requeue = if e.cluster_cause().is_some() {
                Requeue::Blocked
            } else {
                Requeue::Failed
            };
            (requeue, ReconcileResult::Error)
        }
    };
    run.inbox.blocked = matches!(requeue, Requeue::Blocked);
    // Failed, stalled or held: a new desired state from its source is looked for.
    run.inbox.watch_source = run
        .status
        .conditions
        .iter()
        .any(|c| c.type_ == condition::READY && c.status != "True");
    run.inbox.values_sources = if run.inbox.watch_source {
        run.desired_sources.clone()
    } else {
        Vec::new()
    };
    run.inbox.urgent = false;
    // A fix superseding the wait goes on in the next reconcile, urgent still.
    if run.inbox.candidate.is_some() {
        run.inbox.carried_urgency = run.urgent.take();
    }
    run.inbox.last_status = Some(run.inbox.shared_status(&run.status));
    let interval = hr.spec.interval.as_std();
    let after = match requeue {
        Requeue::After(d) => {
            run.inbox.failing = 0;
            d
        }
        Requeue::Failed | Requeue::Blocked => {
            run.inbox.failing = run.inbox.failing.saturating_add(1);
            backoff(run.inbox.failing, interval)
        }
    };
    (after, Some(result))
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
async fn new_desired_state(ctx: &Context, inbox: &Inbox) -> Option<String> {
    let hr = &inbox.newest;
    let status = inbox.last_status.as_ref()?;
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

/// When a release is looked at next.
enum Requeue {
    /// After this long (the interval, or at once, or never).
    After(Duration),
    /// It failed: again after an exponential backoff.
    Failed,
    /// The cluster failed it (discovery, the API server): again after a backoff, or as
    /// soon as the engine sees the cluster heal, whichever comes first.
    Blocked,
}

/// The delay before retry number `failing` (1 = the first): 5 s doubling, capped at the
/// interval, with ±10 % jitter so releases failing together do not retry in lockstep.
fn backoff(failing: u32, interval: Duration) -> Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    backoff_at(failing, interval, nanos)
}

/// [`backoff`] with the jitter drawn from `nanos` (the clock's, there): 0 is −10 %,
/// 1000 none, 2000 +10 %, and so on round.
fn backoff_at(failing: u32, interval: Duration, nanos: u32) -> Duration {
    let base = Duration::from_secs(5).saturating_mul(1 << failing.saturating_sub(1).min(16));
    let capped = base.min(interval).max(Duration::from_secs(1));
    let jitter = f64::from(nanos % 2001) / 10_000.0 - 0.1;
    capped.mul_f64(1.0 + jitter)
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
    /// worker's largest state throughout: at 10,000 releases each kilobyte is 10 MB.
    /// (12.6 KB before the handover and the source checks were boxed, 8.4 KB before the
    /// inbox was; the spawned task around it took 51 KB a release, heaptrack says, before
    /// the dispatcher boxed it.)
    #[test]
    fn an_idle_worker_stays_small() {
        let bytes = future_size(run);
        assert!(bytes < 2 * 1024, "a worker's future is {bytes} bytes");
        // Its inbox is boxed beside it (8.4 KB together before the inbox was boxed, its
        // statuses shared and the superseded record boxed; 1.9 KB after).
        let inbox = std::mem::size_of::<crate::engine::run::Inbox>();
        assert!(inbox < 1024, "a worker's inbox is {inbox} bytes");
    }

    #[test]
    fn retries_back_off_exponentially_up_to_the_interval() {
        let interval = Duration::from_secs(600);
        // (failing, interval, expected before jitter)
        let cases = [
            (1, interval, 5.0),
            (2, interval, 10.0),
            (3, interval, 20.0),
            (4, interval, 40.0),
            (8, interval, 600.0),
            (10, interval, 600.0),
            (u32::MAX, interval, 600.0),
            (3, Duration::from_secs(8), 8.0),
            // Never faster than once a second, however short the interval.
            (1, Duration::ZERO, 1.0),
            // 0 is not a retry, but must not underflow.
            (0, interval, 5.0),
        ];
        for (failing, interval, secs) in cases {
            for (nanos, factor) in [(0, 0.9), (1000, 1.0), (2000, 1.1), (2001, 0.9)] {
                let got = backoff_at(failing, interval, nanos).as_secs_f64();
                assert!(
                    (got - secs * factor).abs() < 1e-6,
                    "failing {failing}, interval {interval:?}, nanos {nanos}: {got}"
                );
            }
            let got = backoff(failing, interval).as_secs_f64();
            assert!(
                got >= secs * 0.9 - 1e-9 && got <= secs * 1.1 + 1e-9,
                "failing {failing}: {got} outside ±10 % of {secs}"
            );
        }
    }
}

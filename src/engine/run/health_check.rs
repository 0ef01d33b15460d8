//! The health check of a revision (docs/design.md, "Cancellation: a wait, never an apply"): the one step that can be cancelled. While
//! it runs the worker keeps reading its inbox, so an operator's cancel, a deletion or a
//! newer desired state reaches the wait at once; a newer desired state is prepared first
//! and the wait is cancelled only once it is ready to apply.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::telemetry::CancelTrigger;
use tokio_util::sync::CancellationToken;

use super::desired::{Candidate, CandidateError, prepare_candidate};
use super::triggers::{new_token, values_source_events};
use super::{Heard, Run};
use crate::api::{WaitStatus, annotations};
use crate::engine::status::{self, Verdict, reason};
use crate::engine::vocabulary::{Phase, WaitView};
use crate::health::{self, Progress, Target};
use crate::helm::release::{Release, Status};

/// The trigger of the periodic poll of a waiting release's chart source.
const POLLED: &str = "chart source checked for new versions";

/// The first pause before a fix that could not be prepared is tried again during a wait;
/// it doubles each time, up to the source's poll interval.
const RETRY_FIRST: Duration = Duration::from_millis(250);

/// How often a running wait writes its progress (`status.wait.ready`) at most.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

pub enum WaitEnd {
    Ready,
    Failed(String),
    Canceled {
        by_operator: bool,
        why: String,
    },
    /// The engine is shutting down (or lost the lease): the revision stays pending, and
    /// the next engine unlocks it and applies the same desired state again.
    Stopped,
    /// The HelmRelease is being deleted: the revision is recorded failed (its outcome is
    /// unknown) and the finalizer runs next. No failure is counted.
    Abandoned(String),
}

/// When a health check began and when it gives up. A resumed wait keeps the window it
/// began with.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub started: Timestamp,
    pub deadline: Timestamp,
}

impl Window {
    pub fn from_now(timeout: Duration) -> Self {
        let started = Timestamp::now();
        Self {
            started,
            deadline: started + timeout,
        }
    }

    /// The same window, its deadline moved so that at least `left` remains from now.
    pub fn at_least(self, left: Duration) -> Self {
        let earliest = Timestamp::now() + left;
        Self {
            deadline: self.deadline.max(earliest),
            ..self
        }
    }

    /// The whole length of the window (what a timeout message names).
    fn length(&self) -> Duration {
        Duration::try_from(self.deadline.duration_since(self.started)).unwrap_or_default()
    }
}

/// Why the worker cancelled a running health check, as it saw it while the wait ran.
#[derive(Default)]
struct Interrupted {
    /// The engine is stopping.
    stopped: bool,
    /// The HelmRelease is being deleted, or is gone.
    abandoned: Option<String>,
    /// By the operator (true), or superseded by a newer desired state (false).
    canceled: Option<(bool, String)>,
}

impl Run<'_> {
    /// The release's CEL health checks with what evaluates them (the render helper).
    fn custom_health(&self) -> Option<health::CustomHealth> {
        let checks = &self.hr.spec.health_check_exprs;
        if checks.is_empty() {
            return None;
        }
        Some(health::CustomHealth {
            checks: checks.as_slice().into(),
            evaluator: self.ctx.renderer.cel()?,
        })
    }

    /// Whether the action that made `rel` (pending while it is waited for) was asked not
    /// to wait for Jobs (Flux's `disableWaitForJobs` of install, upgrade and rollback).
    fn jobs_not_awaited(&self, rel: &Release) -> bool {
        let spec = &self.hr.spec;
        match rel.info.as_ref().map(|i| i.status) {
            Some(Status::PendingUpgrade) => spec
                .upgrade
                .as_ref()
                .is_some_and(|u| u.disable_wait_for_jobs),
            Some(Status::PendingRollback) => spec
                .rollback
                .as_ref()
                .is_some_and(|r| r.disable_wait_for_jobs),
            _ => spec
                .install
                .as_ref()
                .is_some_and(|i| i.disable_wait_for_jobs),
        }
    }

    /// Reads each target's generation from the API server (a few at a time), so the wait
    /// judges the objects as applied, not as a lagging shared watch last saw them. An
    /// object that cannot be read is judged as the watch sees it. `known[i]`: target `i`'s
    /// generation came with the apply, and is not read again.
    async fn read_generations(&self, targets: &mut [Target], known: &[bool]) {
        let unknown = |i: &usize| !known.get(*i).copied().unwrap_or(false);
        let reads: Vec<_> = targets
            .iter()
            .enumerate()
            .filter(|(i, _)| unknown(i))
            .map(|(_, t)| {
                let client = self.acting.inspector(&self.ctx.client).clone();
                let api: kube::Api<kube::api::DynamicObject> = match &t.namespace {
                    Some(ns) => kube::Api::namespaced_with(client, ns, &t.resource),
                    None => kube::Api::all_with(client, &t.resource),
                };
                let name = t.name.clone();
                async move {
                    api.get_metadata_opt(&name)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|m| m.metadata.generation)
                }
            })
            .collect();
        let mut generations = Vec::with_capacity(reads.len());
        let mut reads = reads.into_iter();
        loop {
            let batch: Vec<_> = reads.by_ref().take(8).collect();
            if batch.is_empty() {
                break;
            }
            generations.extend(futures::future::join_all(batch).await);
        }
        let unread = targets.iter_mut().enumerate().filter(|(i, _)| unknown(i));
        for ((_, t), g) in unread.zip(generations) {
            t.generation = g;
        }
    }

    /// The health check of a revision: watches its objects until ready, failed, timed
    /// out or cancelled, publishing progress to front ends and to status.wait. While it
    /// runs it watches for a newer desired state (spec, valuesFrom data, chart versions);
    /// one that really differs is prepared first and the wait is cancelled only once it
    /// is ready to apply.
    pub async fn wait_for(
        &mut self,
        rel: &Release,
        window: Window,
    ) -> crate::engine::Result<WaitEnd> {
        let targets = self.wait_targets(rel).await?;
        let waited_since = std::time::Instant::now();
        let deadline = self.show_wait_started(rel, &window, targets.len()).await;
        let token = CancellationToken::new();
        let (progress_tx, mut progress_rx) = watch::channel(Progress::default());
        // Judged on the release's cluster, through the watches of that cluster.
        let client = self.acting.inspector(&self.ctx.client).clone();
        let options = self.wait_options(rel, window.started);
        let wait = health::wait(&client, &targets, deadline, &token, &options, |p| {
            progress_tx.send_replace(p.clone());
        });
        tokio::pin!(wait);
        let mut newer = Newer::new(self);
        let mut progress = ProgressWrites::default();
        let mut interrupted = Interrupted::default();
        // What arrived while a hook ran before this wait (hooks read the inbox too).
        let newest = &self.memory.inbox.newest;
        if self.memory.inbox.deleted || newest.metadata.deletion_timestamp.is_some() {
            interrupted.abandoned =
                Some("health check canceled: the HelmRelease is being deleted".into());
            token.cancel();
        } else {
            newer.generation_seen(newest);
        }
        let ctx = self.ctx;
        let outcome = loop {
            newer.start_check(ctx, &self.memory.inbox.newest, rel);
            tokio::select! {
                outcome = &mut wait => break outcome,
                Ok(()) = progress_rx.changed() => {
                    let p = progress_rx.borrow_and_update().clone();
                    self.show_progress(p, &mut progress).await;
                }
                () = async { tokio::time::sleep_until(progress.due.expect("guarded")).await }, if progress.due.is_some() => {
                    progress.written_now();
                    self.write_status().await;
                }
                result = async { newer.check.as_mut().expect("guarded").0.as_mut().await }, if newer.check.is_some() => {
                    let (_, trigger, at) = newer.check.take().expect("guarded");
                    self.checked(result, trigger, at, rel, &mut newer, &mut interrupted, &token).await;
                }
                () = async { tokio::time::sleep_until(newer.retry.as_ref().expect("guarded").2).await }, if newer.retry.is_some() => {
                    let (trigger, at, _) = newer.retry.take().expect("guarded");
                    newer.again.get_or_insert((trigger, at));
                }
                Some(changed) = futures::StreamExt::next(&mut newer.sources), if newer.supersede => {
                    newer.again = Some((changed, Instant::now()));
                }
                event = newer.pushed.recv(), if newer.polls_chart => {
                    newer.pushed_to(event, &self.memory.inbox.newest);
                }
                _ = newer.chart_poll.tick(), if newer.polls_chart => {
                    newer.again.get_or_insert_with(|| (POLLED.into(), Instant::now()));
                }
                msg = self.memory.inbox.recv() => {
                    let heard = self.memory.absorb(ctx, &self.key, msg);
                    self.heard_while_waiting(heard, &mut newer, &mut interrupted, &token);
                }
                () = self.stop.cancelled(), if !token.is_cancelled() => {
                    interrupted.stopped = true;
                    token.cancel();
                }
            }
        };
        Ok(self.wait_ended(outcome, window.length(), interrupted, waited_since))
    }

    /// The objects of `rel` a health check watches, each with the generation it is judged
    /// at (the apply's answer, else read now).
    async fn wait_targets(&mut self, rel: &Release) -> crate::engine::Result<Vec<Target>> {
        let refs = self
            .acting
            .applier
            .objects(&rel.manifest, &self.target.namespace)
            .await?;
        let mut targets = Vec::with_capacity(refs.len());
        // Generations the apply just before this wait answered with need no read.
        let applied = match self.trail.applied_generations.take() {
            Some((version, generations)) if version == rel.version => generations,
            _ => Default::default(),
        };
        let mut known = Vec::with_capacity(refs.len());
        for r in refs {
            if let Some((resource, namespaced)) = self
                .acting
                .applier
                .find_resource(&r.api_version, &r.kind)
                .await?
            {
                targets.push(Target {
                    resource,
                    namespace: if namespaced {
                        r.namespace.clone()
                    } else {
                        None
                    },
                    name: r.name.clone(),
                    generation: applied.get(&r).copied().flatten(),
                });
                known.push(applied.contains_key(&r));
            }
        }
        self.read_generations(&mut targets, &known).await;
        Ok(targets)
    }

    /// Says in status.wait and the live state that the wait began; returns its deadline.
    async fn show_wait_started(&mut self, rel: &Release, window: &Window, total: usize) -> Instant {
        let left = Duration::try_from(window.deadline.duration_since(Timestamp::now()))
            .unwrap_or_default();
        self.status.wait = Some(WaitStatus {
            revision: rel.version,
            started_at: Time(window.started),
            deadline: Time(window.deadline),
            ready: 0,
            total: total as i32,
            hook: None,
            if_it_fails: self.trail.if_it_fails.clone(),
        });
        self.write_status().await;
        let mut live = self.trail.live.lock().unwrap();
        live.phase = Phase::Waiting;
        live.wait = Some(WaitView {
            revision: rel.version,
            started_at: window.started,
            deadline: window.deadline,
            progress: Progress {
                total,
                ..Progress::default()
            },
            if_it_fails: self.trail.if_it_fails.clone(),
        });
        self.publish(&live);
        Instant::now() + left
    }

    /// How the release's health is judged: its healthCheck settings, its CEL checks, the
    /// shared watches of its cluster.
    fn wait_options(&self, rel: &Release, started_at: Timestamp) -> health::WaitOptions {
        let health_check = self.hr.spec.health_check.clone().unwrap_or_default();
        health::WaitOptions {
            fail_fast: health_check.fail_fast,
            started_at,
            strictness: health::Strictness {
                load_balancer_address: health_check.wait_for_load_balancer_address,
                job_started_is_enough: self.jobs_not_awaited(rel),
            },
            hub: Some(match &self.acting.remote {
                None => self.ctx.watches.clone(),
                Some(remote) => remote.watches.clone(),
            }),
            custom: self.custom_health(),
            legacy: self.hr.waits_as_helm_3(),
            ..health::WaitOptions::default()
        }
    }

    /// New progress: to the views at once, to status at most every [`PROGRESS_EVERY`]
    /// (each write is a status write of the whole HelmRelease at the API server; the
    /// wait's end is written anyway).
    async fn show_progress(&mut self, p: Progress, writes: &mut ProgressWrites) {
        let changed_count = self
            .status
            .wait
            .as_ref()
            .is_some_and(|w| w.ready != p.ready as i32);
        if let Some(w) = self.status.wait.as_mut() {
            w.ready = p.ready as i32;
            w.total = p.total as i32;
        }
        {
            let mut live = self.trail.live.lock().unwrap();
            if let Some(w) = live.wait.as_mut() {
                w.progress = p;
            }
            self.publish(&live);
        }
        if changed_count {
            let due = writes.written + PROGRESS_EVERY;
            if Instant::now() >= due {
                writes.written_now();
                self.write_status().await;
            } else {
                writes.due = Some(due);
            }
        }
    }

    /// A newer desired state was checked: one that differs supersedes the wait (which is
    /// cancelled only now that it is ready to apply); the same one was a spurious
    /// trigger; one that cannot be prepared leaves the wait alone and is tried again soon.
    #[allow(clippy::too_many_arguments)] // the wait's own state, borrowed apart
    async fn checked(
        &mut self,
        result: Result<Candidate, CandidateError>,
        trigger: String,
        at: Instant,
        rel: &Release,
        newer: &mut Newer<'_>,
        interrupted: &mut Interrupted,
        token: &CancellationToken,
    ) {
        self.note_check();
        match result {
            Ok(mut candidate) if candidate.prepared.digest() != self.intent.digest => {
                newer.retry_after = RETRY_FIRST;
                candidate.triggered_at = Some(at);
                let why = format!(
                    "superseded by a newer desired state ({trigger}): chart {}@{}, values {}",
                    candidate.prepared.resolved.name,
                    candidate.prepared.resolved.version,
                    short(&candidate.prepared.values.digest),
                );
                self.memory.handoff.candidate = Some(Box::new(candidate));
                interrupted.canceled = Some((false, why));
                token.cancel();
                if self.precedence.urgent.is_none() {
                    let precedence = &self.ctx.work.precedence;
                    self.precedence.urgent =
                        Some(newer.checking.take().unwrap_or_else(|| precedence.urgent()));
                }
            }
            Ok(_) => {
                newer.checking = None;
                newer.retry_after = RETRY_FIRST;
                tracing::debug!(release = %self.key, %trigger, "trigger without a new desired state");
            }
            Err(e) => {
                newer.checking = None;
                newer.retry = Some((trigger.clone(), at, Instant::now() + newer.retry_after));
                newer.retry_after = (newer.retry_after * 2).min(newer.poll);
                let message = format!(
                    "waiting for revision {}; the newer desired state ({trigger}) cannot be applied: {e}",
                    rel.version
                );
                let verdict = Verdict::Pending {
                    reason: reason::PROGRESSING,
                    message: &message,
                };
                status::summarise(&mut self.status, verdict, self.hr.metadata.generation);
                self.write_status().await;
                self.event(EventType::Warning, reason::ARTIFACT_FAILED, "Wait", message)
                    .await;
            }
        }
    }

    /// What a message means to a running wait (the mailbox kept the rest).
    fn heard_while_waiting(
        &mut self,
        heard: Heard,
        newer: &mut Newer<'_>,
        interrupted: &mut Interrupted,
        token: &CancellationToken,
    ) {
        let canceled_by_operator = |interrupted: &mut Interrupted| {
            interrupted.canceled = Some((true, "health check canceled by operator".into()));
            token.cancel();
        };
        match heard {
            // Deleting the HelmRelease ends the wait at once so the uninstall (or, when
            // suspended, the release of the object) is not held up by it.
            Heard::Updated { deleting: true } => {
                interrupted.abandoned =
                    Some("health check canceled: the HelmRelease is being deleted".into());
                token.cancel();
            }
            Heard::Deleted => {
                interrupted.abandoned =
                    Some("health check canceled: the HelmRelease was deleted".into());
                token.cancel();
            }
            Heard::Updated { deleting: false } => {
                let hr = self.memory.inbox.newest.clone();
                let handled = self.status.last_handled_cancel_wait_at.as_deref();
                if let Some(t) = new_token(&hr, annotations::CANCEL_WAIT_AT, handled)
                    && self.memory.inbox.handled_cancel.as_deref() != Some(t.as_str())
                {
                    self.status.last_handled_cancel_wait_at = Some(t);
                    canceled_by_operator(interrupted);
                }
                if newer.supersede && !newer.generation_seen(&hr) {
                    let handled = self.status.last_handled_reconcile_at.as_deref();
                    if let Some(t) = new_token(&hr, annotations::RECONCILE_REQUESTED_AT, handled) {
                        self.status.last_handled_reconcile_at = Some(t.clone());
                        newer.again = Some((format!("reconcile requested at {t}"), Instant::now()));
                    }
                }
            }
            // The same token may already have arrived through the watch (the annotation
            // is written before the command is sent): handled once.
            Heard::CancelWait(t) => {
                if self.status.last_handled_cancel_wait_at.as_deref() != Some(t.as_str()) {
                    self.status.last_handled_cancel_wait_at = Some(t);
                    canceled_by_operator(interrupted);
                }
            }
            // Kept for the wait's next status write, and for after the step.
            Heard::ConfigRolled | Heard::Command => {}
            // The engine is going away; leave the revision pending for the next one.
            Heard::Closed => {
                interrupted.stopped = true;
                token.cancel();
            }
        }
    }

    /// The wait's end: its metrics, and how it ended.
    fn wait_ended(
        &mut self,
        outcome: health::Outcome,
        timeout: Duration,
        interrupted: Interrupted,
        waited_since: std::time::Instant,
    ) -> WaitEnd {
        self.status.wait = None;
        self.set_phase(Phase::Idle);
        let metrics = &self.ctx.metrics;
        if let health::Outcome::Failed { reason, .. } = &outcome {
            metrics.failed_fast(fail_fast_reason(reason));
        }
        let ended = end(outcome, timeout, interrupted);
        let (result, trigger) = match &ended {
            WaitEnd::Ready => ("ready", None),
            WaitEnd::Failed(why) if why.starts_with("timed out") => ("timeout", None),
            WaitEnd::Failed(_) => ("failed", None),
            WaitEnd::Stopped => ("stopped", None),
            WaitEnd::Abandoned(_) => ("canceled", Some(CancelTrigger::Deleted)),
            WaitEnd::Canceled {
                by_operator: true, ..
            } => ("canceled", Some(CancelTrigger::Operator)),
            WaitEnd::Canceled { .. } => ("canceled", Some(CancelTrigger::NewRevision)),
        };
        metrics.wait_ended(
            std::time::Instant::now().duration_since(waited_since),
            result,
        );
        if let Some(trigger) = trigger {
            metrics.wait_canceled(trigger);
        }
        ended
    }
}

/// How often a running wait wrote its progress to status.
struct ProgressWrites {
    written: Instant,
    /// A write put off to keep to [`PROGRESS_EVERY`].
    due: Option<Instant>,
}

impl Default for ProgressWrites {
    /// The wait's start was just written.
    fn default() -> Self {
        Self {
            written: Instant::now(),
            due: None,
        }
    }
}

impl ProgressWrites {
    fn written_now(&mut self) {
        self.due = None;
        self.written = Instant::now();
    }
}

/// A check in flight of what may be a newer desired state.
type Check<'c> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Candidate, CandidateError>> + Send + 'c>,
>;

/// What a running wait watches for a newer desired state: the spec's generation, its
/// valuesFrom sources, pushes to and polls of its chart source; and the check of a
/// trigger, one at a time.
struct Newer<'c> {
    /// Superseding is on (the engine's switch and the release's `cancelOnNewRevision`).
    supersede: bool,
    sources: futures::stream::SelectAll<futures::stream::BoxStream<'static, String>>,
    pushed: tokio::sync::broadcast::Receiver<Arc<crate::helm::source::pushed::Wake>>,
    polls_chart: bool,
    poll: Duration,
    chart_poll: tokio::time::Interval,
    /// The check running, its trigger and when the trigger arrived (for the
    /// trigger-to-fix metric).
    check: Option<(Check<'c>, String, Instant)>,
    /// A trigger may carry the fix: while it is prepared, this task's requests go first;
    /// kept (in `Run::urgent`) until the fix's first object if it supersedes.
    checking: Option<crate::cluster::slots::UrgentWork>,
    /// A trigger to check when none runs.
    again: Option<(String, Instant)>,
    /// A fix that could not be prepared is tried again soon, sooner than the next poll: a
    /// registry may announce a push a moment before its tag resolves.
    retry: Option<(String, Instant, Instant)>,
    retry_after: Duration,
    last_generation: Option<i64>,
}

impl<'c> Newer<'c> {
    fn new(run: &Run<'_>) -> Self {
        let ctx = run.ctx;
        let supersede = ctx.settings.cancel_on_new_revision
            && run
                .hr
                .spec
                .health_check
                .clone()
                .unwrap_or_default()
                .cancel_on_new_revision;
        let sources = if supersede {
            values_source_events(ctx, &run.hr, &run.intent.sources)
        } else {
            futures::stream::select_all(Vec::new())
        };
        let chart = &run.hr.spec.chart;
        let poll = super::source_poll(ctx, chart);
        Self {
            supersede,
            sources,
            pushed: ctx.signals.pushed.subscribe(),
            polls_chart: supersede && (chart.repository.is_some() || chart.git.is_some()),
            poll,
            chart_poll: tokio::time::interval_at(Instant::now() + poll, poll),
            check: None,
            checking: None,
            again: None,
            retry: None,
            retry_after: RETRY_FIRST,
            last_generation: run.hr.metadata.generation,
        }
    }

    /// Notes a new generation of `hr` as a trigger (when superseding); says whether it
    /// was one.
    fn generation_seen(&mut self, hr: &crate::api::HelmRelease) -> bool {
        if !self.supersede || hr.metadata.generation == self.last_generation {
            return false;
        }
        self.last_generation = hr.metadata.generation;
        let generation = self.last_generation.unwrap_or_default();
        self.again = Some((format!("generation {generation}"), Instant::now()));
        true
    }

    /// Starts the pending check when none runs.
    fn start_check(
        &mut self,
        ctx: &'c super::Context,
        newest: &Arc<crate::api::HelmRelease>,
        rel: &'c Release,
    ) {
        if self.check.is_some() {
            return;
        }
        let Some((trigger, at)) = self.again.take() else {
            return;
        };
        // The periodic poll is routine until it finds something.
        if trigger != POLLED {
            self.checking
                .get_or_insert_with(|| ctx.work.precedence.urgent());
        }
        let check = Box::pin(prepare_candidate(ctx, newest.clone(), rel));
        self.check = Some((check, trigger, at));
    }

    /// A push a receiver heard: a trigger when it names this release's chart source (or
    /// when pushes were missed).
    fn pushed_to(
        &mut self,
        event: Result<
            Arc<crate::helm::source::pushed::Wake>,
            tokio::sync::broadcast::error::RecvError,
        >,
        newest: &crate::api::HelmRelease,
    ) {
        let named = match &event {
            Ok(w) => w
                .wakes(newest)
                .then(|| format!("a push to {}", w.describe())),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                Some("pushes to chart sources".to_owned())
            }
            Err(_) => None,
        };
        if let Some(what) = named {
            self.again.get_or_insert_with(|| (what, Instant::now()));
        }
    }
}

/// How a wait ended: the health check's outcome, and for a cancelled one, why the worker
/// cancelled it (a stopping engine first, then a deletion, then an operator or a newer
/// desired state).
fn end(outcome: health::Outcome, timeout: Duration, interrupted: Interrupted) -> WaitEnd {
    match outcome {
        health::Outcome::Ready => WaitEnd::Ready,
        health::Outcome::TimedOut(p) => WaitEnd::Failed(format!(
            "timed out after {} waiting for {}",
            crate::api::Duration(timeout),
            p.pending
                .iter()
                .map(|(o, why)| format!("{o} ({why})"))
                .collect::<Vec<_>>()
                .join(", ")
        )),
        health::Outcome::Failed { object, reason } => {
            WaitEnd::Failed(format!("{object}: {reason}"))
        }
        health::Outcome::Canceled if interrupted.stopped => WaitEnd::Stopped,
        health::Outcome::Canceled if interrupted.abandoned.is_some() => {
            WaitEnd::Abandoned(interrupted.abandoned.unwrap_or_default())
        }
        health::Outcome::Canceled => {
            let (by_operator, why) = interrupted.canceled.unwrap_or((false, "canceled".into()));
            WaitEnd::Canceled { by_operator, why }
        }
    }
}

/// The pod reason a fail-fast verdict names (`CrashLoopBackOff`, `ImagePullBackOff`...),
/// as a metric label: its first word.
fn fail_fast_reason(reason: &str) -> &str {
    reason
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find(|w| !w.is_empty())
        .unwrap_or("unknown")
}

fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    &hex[..hex.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canceled(interrupted: Interrupted) -> WaitEnd {
        end(health::Outcome::Canceled, Duration::ZERO, interrupted)
    }

    #[test]
    fn a_wait_ends_as_its_health_check_did() {
        let timed_out = health::Outcome::TimedOut(Progress {
            ready: 1,
            total: 3,
            pending: vec![
                ("Deployment/web".into(), "1/2 updated".into()),
                ("Job/migrate".into(), "not complete".into()),
            ],
        });
        let failed = health::Outcome::Failed {
            object: "Deployment/web".into(),
            reason: "ProgressDeadlineExceeded".into(),
        };
        let cases = [
            (health::Outcome::Ready, None),
            (
                timed_out,
                Some(
                    "timed out after 5m waiting for Deployment/web (1/2 updated), Job/migrate (not complete)",
                ),
            ),
            (failed, Some("Deployment/web: ProgressDeadlineExceeded")),
        ];
        for (outcome, failure) in cases {
            let what = format!("{outcome:?}");
            match end(outcome, Duration::from_secs(300), Interrupted::default()) {
                WaitEnd::Ready => assert_eq!(failure, None, "{what}"),
                WaitEnd::Failed(why) => assert_eq!(Some(why.as_str()), failure, "{what}"),
                _ => panic!("{what}: neither ready nor failed"),
            }
        }
    }

    #[test]
    fn a_cancelled_wait_says_who_cancelled_it_stopping_first() {
        let operator = || Some((true, "health check canceled by operator".to_owned()));
        let deleted = || Some("the HelmRelease was deleted".to_owned());
        // (stopped, abandoned, canceled) → Stopped / Abandoned(why) / Canceled(by_operator, why)
        let cases: Vec<(Interrupted, &str)> = vec![
            (
                Interrupted {
                    stopped: true,
                    abandoned: deleted(),
                    canceled: operator(),
                },
                "stopped",
            ),
            (
                Interrupted {
                    abandoned: deleted(),
                    canceled: operator(),
                    ..Interrupted::default()
                },
                "abandoned: the HelmRelease was deleted",
            ),
            (
                Interrupted {
                    canceled: operator(),
                    ..Interrupted::default()
                },
                "canceled by operator: health check canceled by operator",
            ),
            (
                Interrupted {
                    canceled: Some((false, "superseded".into())),
                    ..Interrupted::default()
                },
                "superseded: superseded",
            ),
            (Interrupted::default(), "superseded: canceled"),
        ];
        for (interrupted, expected) in cases {
            let got = match canceled(interrupted) {
                WaitEnd::Stopped => "stopped".to_owned(),
                WaitEnd::Abandoned(why) => format!("abandoned: {why}"),
                WaitEnd::Canceled {
                    by_operator: true,
                    why,
                } => format!("canceled by operator: {why}"),
                WaitEnd::Canceled {
                    by_operator: false,
                    why,
                } => format!("superseded: {why}"),
                WaitEnd::Ready | WaitEnd::Failed(_) => "not cancelled".to_owned(),
            };
            assert_eq!(got, expected);
        }
    }

    #[test]
    fn digests_are_shortened_for_messages() {
        let cases = [
            ("sha256:0123456789abcdef", "0123456789ab"),
            ("0123456789abcdef", "0123456789ab"),
            ("sha256:abc", "abc"),
            ("", ""),
        ];
        for (digest, shown) in cases {
            assert_eq!(short(digest), shown, "{digest}");
        }
    }
}

//! One worker per HelmRelease: waits for a trigger, then observes, asks the planner for
//! the next action, runs it, records the result, and asks again until the release is in
//! sync or stalled. During a health wait it keeps reading its inbox, so an operator's
//! cancel (or a newer spec) reaches the wait at once.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Api, Client, Resource, ResourceExt};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::actions::{self, Candidate, Outcome, Prepared};
use super::claim;
use super::handle::{Command, LiveState, Phase, ReleaseKey, WaitView};
use super::plan::{self, Desired, Latest, Next, Observed, Policy, TestState};
use super::status::{self, Truth, condition, reason};
use crate::api::{
    FINALIZER, HelmRelease, HelmReleaseStatus, ReleaseAction, WaitStatus, annotations,
};
use crate::apply::Applier;
use crate::health::{self, Progress, Target};
use crate::release::{Release, Status, Storage};
use crate::render::Renderer;
use crate::source::{ChartSource, RepoAuth};

/// Marks a revision the engine unlocked after another engine stopped mid-action.
pub const INTERRUPTED_PREFIX: &str = "Release was left";

/// Shared by all workers of one engine.
pub struct Context {
    pub client: Client,
    pub source: ChartSource,
    pub renderer: Arc<dyn Renderer>,
    pub applier: Applier,
    pub recorder: Recorder,
    /// This engine's identity, in a form valid as a label value.
    pub identity_label: String,
    pub live: watch::Sender<Arc<BTreeMap<ReleaseKey, LiveState>>>,
    /// Engine-wide switch: supersede waits by newer desired states (DESIGN §4).
    pub cancel_on_new_revision: bool,
    /// How often a running wait asks a chart repository for a newer version.
    pub chart_poll: Duration,
}

impl Context {
    pub fn new(
        client: Client,
        source: ChartSource,
        renderer: Arc<dyn Renderer>,
        recorder: Recorder,
        identity: &str,
        live: watch::Sender<Arc<BTreeMap<ReleaseKey, LiveState>>>,
    ) -> Self {
        let label: String = identity
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .take(63)
            .collect();
        Self {
            applier: Applier::new(client.clone()),
            client,
            source,
            renderer,
            recorder,
            identity_label: label
                .trim_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_owned(),
            live,
            cancel_on_new_revision: true,
            chart_poll: Duration::from_secs(15),
        }
    }
}

/// What reaches a worker.
pub enum Msg {
    Updated(Arc<HelmRelease>),
    Deleted,
    /// A command from a front end in this process, with the token it wrote.
    Command(Command, String),
}

/// The worker's mailbox, read between actions and during waits.
pub struct Inbox {
    rx: mpsc::UnboundedReceiver<Msg>,
    pub newest: Arc<HelmRelease>,
    pub deleted: bool,
    /// cancelWaitAt tokens handled by a direct command before the watch echoed them.
    handled_cancel: Option<String>,
    /// The newer desired state that superseded the last wait, ready to apply.
    pub candidate: Option<Candidate>,
    /// The status this worker last computed. The worker is its only writer, and the
    /// watched object may not show our latest write yet, so this is what the next
    /// reconcile starts from.
    last_status: Option<HelmReleaseStatus>,
    /// Reconciles in a row that ended in an error or a failure: the retry backs off.
    failing: u32,
}

impl Inbox {
    pub fn new(rx: mpsc::UnboundedReceiver<Msg>, hr: Arc<HelmRelease>) -> Self {
        Self {
            rx,
            newest: hr,
            deleted: false,
            handled_cancel: None,
            candidate: None,
            last_status: None,
            failing: 0,
        }
    }
}

/// What one reconcile needs to see of the world; the actions borrow it.
pub struct Run<'a> {
    pub ctx: &'a Context,
    pub hr: Arc<HelmRelease>,
    pub key: ReleaseKey,
    pub release_name: String,
    pub target_namespace: String,
    pub storage: Storage,
    pub status: HelmReleaseStatus,
    api: Api<HelmRelease>,
    inbox: &'a mut Inbox,
    stop: &'a CancellationToken,
    live: Mutex<LiveState>,
    /// The desired state this reconcile works towards, and where its values came from.
    desired_digest: String,
    desired_sources: Vec<crate::values::ValuesSourceRef>,
}

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

impl Run<'_> {
    pub fn set_phase(&self, phase: Phase) {
        let mut live = self.live.lock().unwrap();
        live.phase = phase;
        if phase != Phase::Waiting {
            live.wait = None;
        }
        self.publish(&live);
    }

    fn publish(&self, live: &LiveState) {
        let key = self.key.clone();
        let live = live.clone();
        self.ctx.live.send_modify(|m| {
            Arc::make_mut(m).insert(key, live);
        });
    }

    async fn write_status(&self) {
        if let Err(e) = status::write(&self.api, &self.key.name, &self.status).await {
            tracing::warn!(release = %self.key, error = %e, "cannot write status");
        }
    }

    async fn event(&self, type_: EventType, reason: &str, action: &str, note: String) {
        let reference = self.hr.object_ref(&());
        let ev = Event {
            type_,
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        if let Err(e) = self.ctx.recorder.publish(&ev, &reference).await {
            tracing::debug!(release = %self.key, error = %e, "cannot publish event");
        }
    }

    /// Records what is being attempted before the action starts.
    pub async fn note_attempt(&mut self, action: ReleaseAction, prepared: &Prepared) {
        let s = &mut self.status;
        s.last_attempted_generation = self.hr.metadata.generation;
        s.last_attempted_revision = Some(prepared.resolved.version.clone());
        s.last_attempted_config_digest = Some(prepared.values.digest.clone());
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
                prepared.resolved.name, prepared.resolved.version
            ),
            self.hr.metadata.generation,
        );
        status::set(
            s,
            condition::READY,
            Truth::Unknown,
            reason::PROGRESSING,
            format!("Running {verb}"),
            self.hr.metadata.generation,
        );
        self.write_status().await;
    }

    pub async fn prune_history(&self) {
        let max = usize::try_from(self.hr.spec.max_history).unwrap_or(0);
        if let Err(e) = self.storage.prune(&self.release_name, max).await {
            tracing::warn!(release = %self.key, error = %e, "cannot prune Helm history");
        }
    }

    /// The health check of a revision: watches its objects until ready, failed, timed
    /// out or cancelled, publishing progress to front ends and to status.wait. While it
    /// runs it watches for a newer desired state (spec, valuesFrom data, chart versions);
    /// one that really differs is prepared first and the wait is cancelled only once it
    /// is ready to apply.
    pub async fn wait_for(&mut self, rel: &Release, timeout: Duration) -> crate::Result<WaitEnd> {
        let refs = self
            .ctx
            .applier
            .objects(&rel.manifest, &self.target_namespace)
            .await?;
        let mut targets = Vec::with_capacity(refs.len());
        for r in refs {
            if let Some((resource, namespaced)) = self
                .ctx
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
                });
            }
        }
        let started = Timestamp::now();
        let deadline_at = started + timeout;
        let deadline = Instant::now() + timeout;
        self.status.wait = Some(WaitStatus {
            revision: rel.version,
            started_at: Time(started),
            deadline: Time(deadline_at),
            ready: 0,
            total: targets.len() as i32,
        });
        self.write_status().await;
        {
            let mut live = self.live.lock().unwrap();
            live.phase = Phase::Waiting;
            live.wait = Some(WaitView {
                revision: rel.version,
                started_at: started,
                deadline: deadline_at,
                progress: Progress {
                    total: targets.len(),
                    ..Progress::default()
                },
            });
            self.publish(&live);
        }

        let token = CancellationToken::new();
        let (progress_tx, mut progress_rx) = watch::channel(Progress::default());
        let client = self.ctx.client.clone();
        let health_check = self.hr.spec.health_check.clone().unwrap_or_default();
        let options = health::WaitOptions {
            fail_fast: health_check.fail_fast,
            started_at: started,
            strictness: health::Strictness {
                load_balancer_address: health_check.wait_for_load_balancer_address,
            },
            ..health::WaitOptions::default()
        };
        let wait = health::wait(&client, &targets, deadline, &token, &options, |p| {
            progress_tx.send_replace(p.clone());
        });
        tokio::pin!(wait);

        // Superseding: what to compare a newer desired state against, and its sources.
        let supersede = self.ctx.cancel_on_new_revision
            && self
                .hr
                .spec
                .health_check
                .clone()
                .unwrap_or_default()
                .cancel_on_new_revision;
        let ctx = self.ctx;
        let mut sources = if supersede {
            values_source_events(ctx, &self.hr, &self.desired_sources)
        } else {
            futures::stream::select_all(Vec::new())
        };
        let mut chart_poll =
            tokio::time::interval_at(Instant::now() + ctx.chart_poll, ctx.chart_poll);
        let polls_chart = supersede && self.hr.spec.chart.repository.is_some();
        type Check<'c> = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Candidate, String>> + Send + 'c>,
        >;
        let mut check: Option<(Check<'_>, String)> = None;
        let mut again: Option<String> = None;
        let mut last_generation = self.hr.metadata.generation;

        let mut canceled: Option<(bool, String)> = None;
        let mut abandoned: Option<String> = None;
        let mut stopped = false;
        let outcome = loop {
            // Start a pending check when none runs.
            if check.is_none()
                && let Some(trigger) = again.take()
            {
                let hr = self.inbox.newest.clone();
                check = Some((Box::pin(prepare_candidate(ctx, hr, rel)), trigger));
            }
            tokio::select! {
                outcome = &mut wait => break outcome,
                Ok(()) = progress_rx.changed() => {
                    let p = progress_rx.borrow_and_update().clone();
                    let changed_count = self.status.wait.as_ref().is_some_and(|w| w.ready != p.ready as i32);
                    if let Some(w) = self.status.wait.as_mut() {
                        w.ready = p.ready as i32;
                        w.total = p.total as i32;
                    }
                    {
                        let mut live = self.live.lock().unwrap();
                        if let Some(w) = live.wait.as_mut() {
                            w.progress = p;
                        }
                        self.publish(&live);
                    }
                    if changed_count {
                        self.write_status().await;
                    }
                }
                result = async { check.as_mut().expect("guarded").0.as_mut().await }, if check.is_some() => {
                    let (_, trigger) = check.take().expect("guarded");
                    match result {
                        Ok(candidate) if candidate.prepared.digest() != self.desired_digest => {
                            let why = format!(
                                "superseded by a newer desired state ({trigger}): chart {}@{}, values {}",
                                candidate.prepared.resolved.name,
                                candidate.prepared.resolved.version,
                                short(&candidate.prepared.values.digest),
                            );
                            self.inbox.candidate = Some(candidate);
                            canceled = Some((false, why));
                            token.cancel();
                        }
                        // Same desired state: a spurious trigger; the wait goes on.
                        Ok(_) => tracing::debug!(release = %self.key, %trigger, "trigger without a new desired state"),
                        Err(e) => {
                            // A fix that cannot be prepared leaves the running wait alone.
                            let message = format!("waiting for revision {}; the newer desired state ({trigger}) cannot be applied: {e}", rel.version);
                            status::set(&mut self.status, condition::READY, Truth::Unknown, reason::PROGRESSING, &message, self.hr.metadata.generation);
                            self.write_status().await;
                            self.event(EventType::Warning, reason::ARTIFACT_FAILED, "Wait", message).await;
                        }
                    }
                }
                Some(changed) = futures::StreamExt::next(&mut sources), if supersede => {
                    again = Some(changed);
                }
                _ = chart_poll.tick(), if polls_chart => {
                    again.get_or_insert_with(|| "chart repository checked for new versions".into());
                }
                msg = self.inbox.rx.recv() => match msg {
                    // Deleting the HelmRelease ends the wait at once so the uninstall (or,
                    // when suspended, the release of the object) is not held up by it.
                    Some(Msg::Updated(hr)) if hr.metadata.deletion_timestamp.is_some() => {
                        abandoned = Some("health check canceled: the HelmRelease is being deleted".into());
                        token.cancel();
                        self.inbox.newest = hr;
                    }
                    Some(Msg::Deleted) => {
                        self.inbox.deleted = true;
                        abandoned = Some("health check canceled: the HelmRelease was deleted".into());
                        token.cancel();
                    }
                    Some(Msg::Updated(hr)) => {
                        if let Some(t) = new_token(&hr, annotations::CANCEL_WAIT_AT, self.status.last_handled_cancel_wait_at.as_deref())
                            && self.inbox.handled_cancel.as_deref() != Some(t.as_str())
                        {
                            self.status.last_handled_cancel_wait_at = Some(t);
                            canceled = Some((true, "health check canceled by operator".into()));
                            token.cancel();
                        }
                        if supersede {
                            if hr.metadata.generation != last_generation {
                                last_generation = hr.metadata.generation;
                                again = Some(format!("generation {}", last_generation.unwrap_or_default()));
                            } else if let Some(t) = new_token(&hr, annotations::RECONCILE_REQUESTED_AT, self.status.last_handled_reconcile_at.as_deref()) {
                                self.status.last_handled_reconcile_at = Some(t.clone());
                                again = Some(format!("reconcile requested at {t}"));
                            }
                        }
                        self.inbox.newest = hr;
                    }
                    // The same token may already have arrived through the watch (the
                    // annotation is written before the command is sent): handle it once.
                    Some(Msg::Command(Command::CancelWait(_), t))
                        if self.status.last_handled_cancel_wait_at.as_deref() != Some(t.as_str()) =>
                    {
                        self.status.last_handled_cancel_wait_at = Some(t.clone());
                        self.inbox.handled_cancel = Some(t);
                        canceled = Some((true, "health check canceled by operator".into()));
                        token.cancel();
                    }
                    Some(Msg::Command(..)) => {}
                    // The engine is going away; leave the revision pending for the next one.
                    None => {
                        stopped = true;
                        token.cancel();
                    }
                },
                () = self.stop.cancelled(), if !token.is_cancelled() => {
                    stopped = true;
                    token.cancel();
                }
            }
        };
        self.status.wait = None;
        self.set_phase(Phase::Idle);
        Ok(match outcome {
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
            health::Outcome::Canceled if stopped => WaitEnd::Stopped,
            health::Outcome::Canceled if abandoned.is_some() => {
                WaitEnd::Abandoned(abandoned.unwrap_or_default())
            }
            health::Outcome::Canceled => {
                let (by_operator, why) = canceled.unwrap_or((false, "canceled".into()));
                WaitEnd::Canceled { by_operator, why }
            }
        })
    }
}

fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    &hex[..hex.len().min(12)]
}

/// Changes to the ConfigMaps/Secrets the values came from, as trigger descriptions. Only
/// a new resourceVersion counts; whether the data really changed is for the digest.
fn values_source_events(
    ctx: &Context,
    hr: &HelmRelease,
    known: &[crate::values::ValuesSourceRef],
) -> futures::stream::SelectAll<futures::stream::BoxStream<'static, String>> {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};

    let ns = hr.object_namespace();
    let streams = known.iter().map(|src| {
        let seen = src.resource_version.clone();
        let label = format!("{:?} {ns}/{} changed", src.kind, src.name);
        let fields = format!("metadata.name={}", src.name);
        let config = kube::runtime::watcher::Config::default().fields(&fields);
        let versions: futures::stream::BoxStream<'static, Option<String>> = match src.kind {
            crate::api::ValuesKind::ConfigMap => kube::runtime::watcher(
                Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns),
                config,
            )
            .filter_map(|e| async move { version_of(e.ok()?) })
            .boxed(),
            crate::api::ValuesKind::Secret => {
                kube::runtime::watcher(Api::<Secret>::namespaced(ctx.client.clone(), &ns), config)
                    .filter_map(|e| async move { version_of(e.ok()?) })
                    .boxed()
            }
        };
        versions
            .filter_map(move |v| {
                let changed = v != seen;
                let label = label.clone();
                async move { changed.then_some(label) }
            })
            .boxed()
    });
    futures::stream::select_all(streams)
}

/// The resourceVersion an event carries (None for a deletion).
fn version_of<K: Resource>(event: kube::runtime::watcher::Event<K>) -> Option<Option<String>> {
    use kube::runtime::watcher::Event;
    match event {
        Event::Apply(o) | Event::InitApply(o) => Some(o.meta().resource_version.clone()),
        Event::Delete(_) => Some(None),
        Event::Init | Event::InitDone => None,
    }
}

/// The annotation's value when it differs from the last one handled.
fn new_token(hr: &HelmRelease, annotation: &str, handled: Option<&str>) -> Option<String> {
    let value = hr.metadata.annotations.as_ref()?.get(annotation)?;
    (Some(value.as_str()) != handled).then(|| value.clone())
}

/// What, in a HelmRelease update, calls for a reconcile: status-only updates and our own
/// finalizer write never do.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Trigger {
    generation: Option<i64>,
    deleting: bool,
    tokens: [Option<String>; 4],
}

impl Trigger {
    fn of(hr: &HelmRelease) -> Self {
        let a = |k: &str| {
            hr.metadata
                .annotations
                .as_ref()
                .and_then(|m| m.get(k).cloned())
        };
        Self {
            generation: hr.metadata.generation,
            deleting: hr.metadata.deletion_timestamp.is_some(),
            tokens: [
                a(annotations::RECONCILE_REQUESTED_AT),
                a(annotations::FORCE_AT),
                a(annotations::RESET_AT),
                a(annotations::CANCEL_WAIT_AT),
            ],
        }
    }
}

/// The worker loop of one release until `stop` or the release is gone.
pub async fn run(ctx: Arc<Context>, key: ReleaseKey, mut inbox: Inbox, stop: CancellationToken) {
    let mut next_run = Instant::now();
    let mut last: Option<Trigger> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep_until(next_run) => {}
            msg = inbox.rx.recv() => {
                match msg {
                    None => break,
                    Some(Msg::Updated(hr)) => inbox.newest = hr,
                    Some(Msg::Deleted) => break,
                    Some(Msg::Command(Command::CancelWait(_), t)) => {
                        // No wait is running: remember the token so its echo is ignored.
                        inbox.handled_cancel = Some(t);
                        continue;
                    }
                    Some(Msg::Command(..)) => { last = None; }
                }
                if last.as_ref() == Some(&Trigger::of(&inbox.newest)) {
                    continue;
                }
            }
        }
        let hr = inbox.newest.clone();
        last = Some(Trigger::of(&hr));
        let requeue = reconcile(&ctx, &key, hr, &mut inbox, &stop).await;
        ctx.live.send_modify(|m| {
            Arc::make_mut(m).insert(key.clone(), LiveState::default());
        });
        if inbox.deleted {
            break;
        }
        next_run = Instant::now() + requeue;
    }
    ctx.live.send_modify(|m| {
        Arc::make_mut(m).remove(&key);
    });
}

const NEVER: Duration = Duration::from_secs(365 * 24 * 3600);
/// Retry of the finalizer's bookkeeping (not of an action, which backs off).
const RETRY: Duration = Duration::from_secs(10);

async fn reconcile(
    ctx: &Context,
    key: &ReleaseKey,
    hr: Arc<HelmRelease>,
    inbox: &mut Inbox,
    stop: &CancellationToken,
) -> Duration {
    let api: Api<HelmRelease> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let mut run = Run {
        ctx,
        key: key.clone(),
        release_name: hr.release_name(),
        target_namespace: hr.target_namespace(),
        storage: Storage::new(ctx.client.clone(), &hr.storage_namespace()),
        status: inbox
            .last_status
            .clone()
            .or_else(|| hr.status.clone())
            .unwrap_or_default(),
        hr: hr.clone(),
        api,
        inbox,
        stop,
        live: Mutex::new(LiveState::default()),
        desired_digest: String::new(),
        desired_sources: Vec::new(),
    };
    if hr.metadata.deletion_timestamp.is_some() {
        return finalize(&mut run).await;
    }
    if !hr.finalizers().iter().any(|f| f == FINALIZER)
        && let Err(e) = add_finalizer(&run).await
    {
        tracing::warn!(release = %key, error = %e, "cannot add finalizer");
        return RETRY;
    }
    let requeue = match reconcile_release(&mut run).await {
        Ok(requeue) => requeue,
        // Nothing to record: the status keeps saying what was running, as after a kill.
        Err(crate::Error::Stopped) => return NEVER,
        Err(e) => {
            let generation = hr.metadata.generation;
            status::set(
                &mut run.status,
                condition::READY,
                Truth::False,
                reason::PROGRESSING,
                e.to_string(),
                generation,
            );
            run.write_status().await;
            tracing::warn!(release = %key, error = %e, "reconcile failed");
            Requeue::Failed
        }
    };
    run.inbox.last_status = Some(run.status.clone());
    let interval = hr.spec.interval.as_std();
    match requeue {
        Requeue::After(d) => {
            run.inbox.failing = 0;
            d
        }
        Requeue::Failed => {
            run.inbox.failing = run.inbox.failing.saturating_add(1);
            backoff(run.inbox.failing, interval)
        }
    }
}

/// When a release is looked at next.
enum Requeue {
    /// After this long (the interval, or at once, or never).
    After(Duration),
    /// It failed: again after an exponential backoff.
    Failed,
}

/// The delay before retry number `failing` (1 = the first): 5 s doubling, capped at the
/// interval, with ±10 % jitter so releases failing together do not retry in lockstep.
fn backoff(failing: u32, interval: Duration) -> Duration {
    let base = Duration::from_secs(5).saturating_mul(1 << failing.saturating_sub(1).min(16));
    let capped = base.min(interval).max(Duration::from_secs(1));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let jitter = f64::from(nanos % 2001) / 10_000.0 - 0.1;
    capped.mul_f64(1.0 + jitter)
}

async fn reconcile_release(run: &mut Run<'_>) -> crate::Result<Requeue> {
    let hr = run.hr.clone();
    let generation = hr.metadata.generation;
    let interval = hr.spec.interval.as_std();

    if let Some(t) = new_token(
        &hr,
        annotations::RESET_AT,
        run.status.last_handled_reset_at.as_deref(),
    ) {
        run.status.failures = 0;
        run.status.install_failures = 0;
        run.status.upgrade_failures = 0;
        run.status.last_handled_reset_at = Some(t);
        status::remove(&mut run.status, condition::STALLED);
    }
    if let Some(t) = new_token(
        &hr,
        annotations::RECONCILE_REQUESTED_AT,
        run.status.last_handled_reconcile_at.as_deref(),
    ) {
        run.status.last_handled_reconcile_at = Some(t);
    }
    // A cancelWaitAt with no wait running is simply recorded.
    if let Some(t) = new_token(
        &hr,
        annotations::CANCEL_WAIT_AT,
        run.status.last_handled_cancel_wait_at.as_deref(),
    ) {
        run.status.last_handled_cancel_wait_at = Some(t);
    }
    if hr.spec.suspend {
        run.write_status().await;
        return Ok(Requeue::After(NEVER));
    }
    if let Some(message) = claimed_elsewhere(run).await? {
        return Ok(Requeue::After(
            stall(run, reason::RELEASE_CONFLICT, message, interval).await,
        ));
    }
    if let Some(cycle) = dependency_cycle(run).await {
        return Ok(Requeue::After(
            stall(run, reason::DEPENDENCY_CYCLE, cycle, interval).await,
        ));
    }
    if let Some(waiting) = unready_dependency(run).await {
        status::set(
            &mut run.status,
            condition::READY,
            Truth::False,
            reason::DEPENDENCY_NOT_READY,
            waiting,
            generation,
        );
        run.write_status().await;
        return Ok(Requeue::After(Duration::from_secs(5)));
    }

    run.set_phase(Phase::Resolving);
    // A wait superseded by a newer desired state handed over that state, ready to apply.
    let candidate = run
        .inbox
        .candidate
        .take()
        .filter(|c| c.generation == generation);
    let (prepared, mut rendered) = match candidate {
        Some(c) => (Ok(c.prepared), Some(c.rendered)),
        None => (prepare(run.ctx, &hr).await, None),
    };
    let prepared = match prepared {
        Ok(p) => p,
        Err((reason, message)) => {
            status::set(
                &mut run.status,
                condition::READY,
                Truth::False,
                reason,
                &message,
                generation,
            );
            status::remove(&mut run.status, condition::RECONCILING);
            run.write_status().await;
            run.event(EventType::Warning, reason, "Reconcile", message)
                .await;
            return Ok(Requeue::Failed);
        }
    };
    run.desired_digest = prepared.digest();
    run.desired_sources = prepared.values.sources.clone();
    let desired = Desired {
        chart_name: prepared.resolved.name.clone(),
        chart_version: prepared.resolved.version.clone(),
        config_digest: prepared.values.digest.clone(),
    };
    // A new desired state gets a fresh set of retries, as in Flux.
    if run.status.last_attempted_generation != generation
        || run.status.last_attempted_revision.as_deref() != Some(desired.chart_version.as_str())
        || run.status.last_attempted_config_digest.as_deref()
            != Some(desired.config_digest.as_str())
    {
        run.status.failures = 0;
        run.status.install_failures = 0;
        run.status.upgrade_failures = 0;
        // Fresh retries: whatever stalled the old desired state does not hold for this one.
        status::remove(&mut run.status, condition::STALLED);
    }
    let mut force = new_token(
        &hr,
        annotations::FORCE_AT,
        run.status.last_handled_force_at.as_deref(),
    );

    for _ in 0..8 {
        let history = run.storage.history(&run.release_name).await?;
        let observed = observe(run, &history, &desired, force.is_some());
        let next = plan::next(&observed);
        tracing::info!(release = %run.key, action = ?next, "planned");
        let latest = history.last().cloned();
        let stored_before = latest.as_ref().map(|r| r.version);
        let outcome = match &next {
            Next::InSync => {
                let (r, m) = success_reason(&run.status, latest.as_ref());
                status::set(
                    &mut run.status,
                    condition::READY,
                    Truth::True,
                    r,
                    m,
                    generation,
                );
                status::remove(&mut run.status, condition::RECONCILING);
                status::remove(&mut run.status, condition::STALLED);
                run.status.observed_generation = generation;
                record_history(run, &history);
                run.write_status().await;
                return Ok(Requeue::After(interval));
            }
            Next::Stalled { reason: r, message } => {
                status::set(
                    &mut run.status,
                    condition::STALLED,
                    Truth::True,
                    r,
                    message.clone(),
                    generation,
                );
                // As Flux: Ready keeps the failure that used up the retries, so the
                // operator reads why, not only that nothing more will be tried.
                let failed = run.status.conditions.iter().any(|c| {
                    c.type_ == condition::READY
                        && c.status == "False"
                        && c.reason != reason::PROGRESSING
                        && c.reason != reason::DEPENDENCY_NOT_READY
                });
                if !failed {
                    status::set(
                        &mut run.status,
                        condition::READY,
                        Truth::False,
                        r,
                        message.clone(),
                        generation,
                    );
                }
                status::remove(&mut run.status, condition::RECONCILING);
                run.status.observed_generation = generation;
                record_history(run, &history);
                run.write_status().await;
                run.event(EventType::Warning, r, "Reconcile", message.clone())
                    .await;
                return Ok(Requeue::After(NEVER));
            }
            Next::Install | Next::Upgrade => {
                let outcome = actions::install_or_upgrade(
                    run,
                    &prepared,
                    rendered.take(),
                    latest.as_ref(),
                    &history,
                )
                .await?;
                if let Some(t) = force.take() {
                    run.status.last_handled_force_at = Some(t);
                }
                outcome
            }
            Next::Test => {
                actions::test(run, latest.expect("planner tests an existing revision")).await?
            }
            Next::Rollback { to } => actions::rollback(run, &history, *to).await?,
            Next::Uninstall => actions::uninstall(run, &history).await?,
            Next::Unlock { .. } => {
                actions::unlock(run, latest.expect("planner unlocks an existing revision")).await?
            }
        };
        run.set_phase(Phase::Idle);
        let history = run.storage.history(&run.release_name).await?;
        record_history(run, &history);
        record_outcome(run, &next, &outcome).await;
        // An install or upgrade that failed before storing a revision (render error,
        // `required`/`fail`, a refused object, too large) has nothing to remediate: it is
        // tried again after a backoff, or stalls once its retries are used up.
        if matches!(outcome, Outcome::Failed { .. })
            && matches!(next, Next::Install | Next::Upgrade)
            && history.last().map(|r| r.version) == stored_before
        {
            let observed = observe(run, &history, &desired, false);
            if let Next::Stalled { .. } = plan::next(&observed) {
                continue;
            }
            return Ok(Requeue::Failed);
        }
        if matches!(
            outcome,
            Outcome::Canceled {
                by_operator: false,
                ..
            }
        ) {
            // Superseded by a newer desired state: start over with it right away.
            return Ok(Requeue::After(Duration::ZERO));
        }
        if run.inbox.newest.metadata.generation != generation
            || run.inbox.deleted
            || run.stop.is_cancelled()
        {
            return Ok(Requeue::After(Duration::ZERO));
        }
        if run.inbox.newest.spec.suspend {
            // Suspend lets a running action finish but starts nothing new.
            return Ok(Requeue::After(NEVER));
        }
    }
    Ok(Requeue::After(interval))
}

fn observe(run: &Run<'_>, history: &[Release], desired: &Desired, force: bool) -> Observed {
    let latest = history.last().map(|r| {
        let info = r.info.clone().unwrap_or_default();
        let meta = r
            .chart
            .as_ref()
            .and_then(|c| c.metadata.clone())
            .unwrap_or_default();
        Latest {
            version: r.version,
            status: info.status,
            chart_name: meta.name,
            chart_version: meta.version,
            config_digest: crate::values::digest(&r.config),
            tests: TestState::of(r),
            interrupted: info.status == Status::Failed
                && info.description.starts_with(INTERRUPTED_PREFIX),
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
        install_failures: run.status.install_failures,
        upgrade_failures: run.status.upgrade_failures,
        last_action: run.status.last_attempted_release_action,
        policy: Policy::from_spec(&run.hr),
    }
}

fn record_history(run: &mut Run<'_>, history: &[Release]) {
    let max = usize::try_from(run.hr.spec.max_history).unwrap_or(0);
    run.status.history = status::history(history, max, |r| crate::values::digest(&r.config));
}

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

/// Updates conditions, failure counters and events after an action.
async fn record_outcome(run: &mut Run<'_>, next: &Next, outcome: &Outcome) {
    let generation = run.hr.metadata.generation;
    let s = &mut run.status;
    let action = s.last_attempted_release_action;
    match outcome {
        Outcome::Succeeded { reason: r, message } => {
            // The action's own condition, and Ready for the actions that make it so
            // (a remediation is a success of its own but leaves Ready to the next step).
            let (own, ready) = match next {
                Next::Install | Next::Upgrade => (Some(condition::RELEASED), true),
                Next::Test => (Some(condition::TEST_SUCCESS), true),
                Next::Rollback { .. } | Next::Uninstall => (Some(condition::REMEDIATED), false),
                _ => (None, false),
            };
            for type_ in own.into_iter().chain(ready.then_some(condition::READY)) {
                status::set(s, type_, Truth::True, r, message.clone(), generation);
            }
            // A release installed or upgraded to its desired state is no longer stalled,
            // nor in the state a remediation left it in.
            if matches!(next, Next::Install | Next::Upgrade) {
                status::remove(s, condition::STALLED);
                status::remove(s, condition::REMEDIATED);
            }
            run.event(EventType::Normal, r, &format!("{next:?}"), message.clone())
                .await;
        }
        Outcome::Failed { reason: r, message } => {
            s.failures += 1;
            match (next, action) {
                (Next::Install, _) | (Next::Test, Some(ReleaseAction::Install)) => {
                    s.install_failures += 1
                }
                (Next::Upgrade, _) | (Next::Test, _) => s.upgrade_failures += 1,
                _ => {}
            }
            let cond = match next {
                Next::Test => condition::TEST_SUCCESS,
                Next::Rollback { .. } | Next::Uninstall => condition::REMEDIATED,
                _ => condition::RELEASED,
            };
            status::set(s, cond, Truth::False, r, message.clone(), generation);
            status::set(
                s,
                condition::READY,
                Truth::False,
                r,
                message.clone(),
                generation,
            );
            run.event(EventType::Warning, r, &format!("{next:?}"), message.clone())
                .await;
        }
        Outcome::Canceled {
            by_operator,
            message,
        } => {
            if *by_operator {
                s.failures += 1;
                match action {
                    Some(ReleaseAction::Install) => s.install_failures += 1,
                    _ => s.upgrade_failures += 1,
                }
            }
            status::set(
                s,
                condition::READY,
                Truth::False,
                reason::HEALTH_CHECK_CANCELED,
                message.clone(),
                generation,
            );
            run.event(
                EventType::Warning,
                reason::HEALTH_CHECK_CANCELED,
                "Wait",
                message.clone(),
            )
            .await;
        }
    }
    run.write_status().await;
}

/// Resolves the chart and composes the values; an error carries the Ready reason.
async fn prepare(ctx: &Context, hr: &HelmRelease) -> Result<Prepared, (&'static str, String)> {
    let namespace = hr.object_namespace();
    let auth = match &hr.spec.chart.secret_ref {
        Some(secret) => RepoAuth::from_secret(&ctx.client, &namespace, &secret.name)
            .await
            .map_err(|e| (reason::ARTIFACT_FAILED, e.to_string()))?,
        None => RepoAuth::default(),
    };
    let resolved = ctx
        .source
        .resolve(&hr.spec.chart, &auth)
        .await
        .map_err(|e| (reason::ARTIFACT_FAILED, e.to_string()))?;
    let path = resolved.path.clone();
    let chart = tokio::task::spawn_blocking(move || crate::chart::load(&path))
        .await
        .map_err(|e| (reason::ARTIFACT_FAILED, e.to_string()))?
        .map_err(|e| (reason::ARTIFACT_FAILED, e.to_string()))?;
    let values = crate::values::compose(&ctx.client, hr)
        .await
        .map_err(|e| (reason::INIT_FAILED, e.to_string()))?;
    Ok(Prepared {
        resolved,
        chart,
        values,
    })
}

/// Prepares `hr`'s desired state and renders it as the upgrade after `waiting` (the
/// revision whose wait runs), as the next action would; used while a wait runs, so the
/// wait is only cancelled for something ready to apply.
async fn prepare_candidate(
    ctx: &Context,
    hr: Arc<HelmRelease>,
    waiting: &Release,
) -> Result<Candidate, String> {
    let prepared = prepare(ctx, &hr).await.map_err(|(_, m)| m)?;
    let rendered = actions::render(
        ctx,
        &hr.release_name(),
        &hr.target_namespace(),
        &prepared,
        Some(waiting),
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok(Candidate {
        prepared,
        rendered,
        generation: hr.metadata.generation,
    })
}

/// Ready=False and Stalled=True with `reason`, an Event, and the next look after
/// `interval` (what would lift it may happen elsewhere, e.g. another object is deleted).
async fn stall(
    run: &mut Run<'_>,
    why: &'static str,
    message: String,
    interval: Duration,
) -> Duration {
    let generation = run.hr.metadata.generation;
    let changed = run
        .hr
        .condition(condition::STALLED)
        .is_none_or(|c| c.reason != why || c.message != message);
    for type_ in [condition::READY, condition::STALLED] {
        let truth = if type_ == condition::READY {
            Truth::False
        } else {
            Truth::True
        };
        status::set(&mut run.status, type_, truth, why, &message, generation);
    }
    status::remove(&mut run.status, condition::RECONCILING);
    run.status.observed_generation = generation;
    run.write_status().await;
    if changed {
        tracing::warn!(release = %run.key, reason = why, "{message}");
        run.event(EventType::Warning, why, "Reconcile", message)
            .await;
    }
    interval
}

/// Why this HelmRelease must leave its Helm release alone, if it must: another
/// HelmRelease that still exists manages it. An unclaimed release (the helm CLI's, or
/// one whose HelmRelease is gone) is claimed here, before anything is done to it.
async fn claimed_elsewhere(run: &mut Run<'_>) -> crate::Result<Option<String>> {
    let uid = run.hr.metadata.uid.clone().unwrap_or_default();
    let history = run.storage.history(&run.release_name).await?;
    let claim = claim::Claim::of(history.last(), &uid);
    let free = match &claim {
        claim::Claim::Ours => return Ok(None),
        claim::Claim::Unclaimed => true,
        other => !claim::holder_exists(&run.ctx.client, other).await?,
    };
    if free {
        if let Some(newest) = history.last() {
            claim::stamp(&run.ctx.client, run.storage.namespace(), newest, &run.hr).await?;
        }
        return Ok(None);
    }
    Ok(Some(format!(
        "Helm release {}/{} is managed by {}; this HelmRelease does nothing to it, and deleting it uninstalls nothing, until it names another release (spec.releaseName, spec.storageNamespace) or that HelmRelease is gone",
        run.storage.namespace(),
        run.release_name,
        claim.describe_owner()
    )))
}

/// The releases `hr` (in namespace `ns`) depends on; a dependency without a namespace
/// is in the release's own.
fn deps(hr: &HelmRelease, ns: &str) -> Vec<ReleaseKey> {
    hr.spec
        .depends_on
        .iter()
        .map(|d| ReleaseKey {
            namespace: d.namespace.clone().unwrap_or_else(|| ns.to_string()),
            name: d.name.clone(),
        })
        .collect()
}

/// A dependsOn path that leads back to this release, as `a/x -> a/y -> a/x`.
async fn dependency_cycle(run: &Run<'_>) -> Option<String> {
    if run.hr.spec.depends_on.is_empty() {
        return None;
    }
    let start = run.key.clone();
    // Depth-first over the dependency graph as the API shows it, bounded so a huge graph
    // costs a bounded number of reads.
    let mut stack: Vec<(ReleaseKey, Vec<ReleaseKey>)> =
        vec![(start.clone(), deps(&run.hr, &start.namespace))];
    let mut done = std::collections::HashSet::new();
    let mut reads = 0;
    while let Some((_, pending)) = stack.last_mut() {
        let Some(next) = pending.pop() else {
            let (key, _) = stack.pop().expect("not empty");
            done.insert(key);
            continue;
        };
        if let Some(at) = stack.iter().position(|(k, _)| *k == next) {
            let path: Vec<String> = stack[at..]
                .iter()
                .map(|(k, _)| k.to_string())
                .chain([next.to_string()])
                .collect();
            return Some(format!("dependsOn forms a cycle: {}", path.join(" -> ")));
        }
        if done.contains(&next) || reads >= 256 {
            continue;
        }
        reads += 1;
        let api: Api<HelmRelease> = Api::namespaced(run.ctx.client.clone(), &next.namespace);
        if let Ok(Some(hr)) = api.get_opt(&next.name).await {
            let children = deps(&hr, &next.namespace);
            stack.push((next, children));
        } else {
            done.insert(next);
        }
    }
    None
}

/// The first dependency that is not Ready, described for the status message.
async fn unready_dependency(run: &Run<'_>) -> Option<String> {
    for dep in deps(&run.hr, &run.key.namespace) {
        let api: Api<HelmRelease> = Api::namespaced(run.ctx.client.clone(), &dep.namespace);
        let ready = match api.get_opt(&dep.name).await {
            Ok(Some(d)) => {
                let observed =
                    d.status.as_ref().and_then(|s| s.observed_generation) == d.metadata.generation;
                observed
                    && d.condition(condition::READY)
                        .is_some_and(|c| c.status == "True")
            }
            _ => false,
        };
        if !ready {
            return Some(format!("dependency '{dep}' is not ready"));
        }
    }
    None
}

/// Sets the finalizer list, guarded by the object's current resourceVersion so a
/// concurrent change to the list is never overwritten.
async fn set_finalizers(run: &Run<'_>, change: impl Fn(&mut Vec<String>)) -> kube::Result<()> {
    let current = run.api.get(&run.key.name).await?;
    let mut finalizers = current.finalizers().to_vec();
    change(&mut finalizers);
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": current.metadata.resource_version,
    }});
    run.api
        .patch(&run.key.name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

async fn add_finalizer(run: &Run<'_>) -> kube::Result<()> {
    set_finalizers(run, |f| {
        if !f.iter().any(|x| x == FINALIZER) {
            f.push(FINALIZER.into());
        }
    })
    .await
}

/// Deleting a HelmRelease uninstalls its release (unless suspended), then lets the
/// object go.
async fn finalize(run: &mut Run<'_>) -> Duration {
    if !run.hr.finalizers().iter().any(|f| f == FINALIZER) {
        return NEVER;
    }
    if !run.hr.spec.suspend {
        let history = match run.storage.history(&run.release_name).await {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(release = %run.key, error = %e, "cannot read Helm storage to uninstall");
                return RETRY;
            }
        };
        let live = history.last().is_some_and(|r| {
            r.info
                .as_ref()
                .is_some_and(|i| i.status != Status::Uninstalled)
        });
        let uid = run.hr.metadata.uid.clone().unwrap_or_default();
        let claim = claim::Claim::of(history.last(), &uid);
        // Only a release this HelmRelease manages is uninstalled with it.
        let outcome = match (live, &claim) {
            (false, _) => None,
            (true, claim::Claim::Ours) => Some(actions::uninstall(run, &history).await),
            (true, other) => Some(Ok(Outcome::Succeeded {
                reason: reason::UNINSTALL_SUCCEEDED,
                message: format!(
                    "Helm release {}/{} left in place: it is managed by {}, not by this HelmRelease",
                    run.storage.namespace(),
                    run.release_name,
                    other.describe_owner()
                ),
            })),
        };
        if let Some(outcome) = outcome {
            match outcome {
                Ok(Outcome::Succeeded { message, .. }) => {
                    run.event(
                        EventType::Normal,
                        reason::UNINSTALL_SUCCEEDED,
                        "Uninstall",
                        message,
                    )
                    .await;
                }
                Ok(Outcome::Failed { message, .. } | Outcome::Canceled { message, .. }) => {
                    run.event(
                        EventType::Warning,
                        reason::UNINSTALL_FAILED,
                        "Uninstall",
                        message,
                    )
                    .await;
                    return RETRY;
                }
                Err(e) => {
                    run.event(
                        EventType::Warning,
                        reason::UNINSTALL_FAILED,
                        "Uninstall",
                        e.to_string(),
                    )
                    .await;
                    return RETRY;
                }
            }
        }
    }
    if let Err(e) = set_finalizers(run, |f| f.retain(|x| x != FINALIZER)).await {
        tracing::warn!(release = %run.key, error = %e, "cannot remove finalizer");
        return RETRY;
    }
    run.inbox.deleted = true;
    NEVER
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_up_to_the_interval() {
        let interval = Duration::from_secs(600);
        let within = |d: Duration, secs: f64| {
            let s = d.as_secs_f64();
            s >= secs * 0.9 - 1e-9 && s <= secs * 1.1 + 1e-9
        };
        assert!(within(backoff(1, interval), 5.0));
        assert!(within(backoff(2, interval), 10.0));
        assert!(within(backoff(4, interval), 40.0));
        assert!(within(backoff(10, interval), 600.0));
        assert!(within(backoff(u32::MAX, interval), 600.0));
        assert!(within(backoff(3, Duration::from_secs(8)), 8.0));
    }
}

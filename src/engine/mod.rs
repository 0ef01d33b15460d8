//! The reconcile engine: a library with a small surface. [`start`] takes a kube
//! `Client` and a config and returns an [`EngineHandle`] that streams per-release views
//! and accepts commands. The dashboard and `wheelhouse controller` are two front ends
//! over it; neither re-implements reconcile logic.
//!
//! Inside: one watch on HelmReleases feeds the views and, while this process holds the
//! engine lease, one worker per release (`worker`), which asks the pure planner (`plan`)
//! for the next action and runs it (`actions`).

pub mod actions;
pub mod claim;
pub mod handle;
pub mod lease;
pub mod plan;
pub mod status;
pub mod worker;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use handle::{
    Command, Connection, EngineHandle, LiveState, Phase, ReleaseKey, ReleaseView, Views, WaitView,
};
pub use lease::Role;

use crate::api::{FINALIZER, HelmRelease, RawHelmRelease, Undecodable};
use crate::client::Scope;
use crate::render::{HelmRenderer, Renderer};
use crate::source::ChartSource;
use worker::{Context, Inbox, Msg};

pub struct EngineConfig {
    /// Which HelmReleases the engine reconciles and the views show.
    pub scope: Scope,
    /// Namespace of the engine Lease; every wheelhouse of a cluster must agree on it.
    pub lease_namespace: String,
    pub identity: String,
    pub chart_cache: PathBuf,
    pub renderer: Arc<dyn Renderer>,
    /// Observe only: never take the lease (e.g. `--readonly`).
    pub passive: bool,
    /// Cancel a running health-check wait as soon as a newer desired state is ready to
    /// apply (per release: `healthCheck.cancelOnNewRevision`). Off restores
    /// wait-until-timeout everywhere, for comparison.
    pub cancel_on_new_revision: bool,
    /// How often a running wait asks a chart repository for a newer matching version.
    pub chart_poll: std::time::Duration,
}

impl EngineConfig {
    /// Defaults: all namespaces, lease in `default`, chart cache in the platform cache
    /// directory, helm from $WHEELHOUSE_HELM or PATH with its default cluster access.
    pub fn new(scope: Scope) -> Self {
        let cache = directories::ProjectDirs::from("dev", "wheelhouse", "wheelhouse").map_or_else(
            || std::env::temp_dir().join("wheelhouse"),
            |d| d.cache_dir().to_path_buf(),
        );
        Self {
            scope,
            lease_namespace: "default".into(),
            identity: lease::identity(),
            chart_cache: cache.join("charts"),
            renderer: Arc::new(HelmRenderer::from_env()),
            passive: false,
            cancel_on_new_revision: true,
            chart_poll: std::time::Duration::from_secs(15),
        }
    }
}

/// Starts the engine: the lease, the HelmRelease watch and, while leader, the workers.
pub fn start(client: Client, config: EngineConfig) -> crate::Result<EngineHandle> {
    let stop = CancellationToken::new();
    // The lease is handed back only after the workers have finished their current step,
    // so no other engine starts on a release while this one still writes to it.
    let lease_stop = CancellationToken::new();
    let (role, lease_task) = if config.passive {
        let (_tx, rx) = watch::channel(Role::Follower {
            holder: "none (read-only)".into(),
        });
        (rx, tokio::spawn(async {}))
    } else {
        let renderer = config.renderer.clone();
        let able = Box::pin(async move {
            match renderer.check().await {
                Ok(version) => {
                    tracing::info!(%version, "renderer ready");
                    Ok(())
                }
                Err(e) => Err(format!(
                    "this process cannot render charts, so it does not run the engine: {e}"
                )),
            }
        });
        lease::run(
            client.clone(),
            lease::LeaseConfig::new(&config.lease_namespace, &config.identity),
            able,
            lease_stop.clone(),
        )
    };
    let (live_tx, live_rx) = watch::channel(Arc::new(BTreeMap::new()));
    let (views_tx, views_rx) = watch::channel(Arc::new(Views::new()));
    let (connection_tx, connection_rx) = watch::channel(Connection::Connected);
    let (direct_tx, direct_rx) = mpsc::unbounded_channel();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "wheelhouse".into(),
            instance: Some(config.identity.clone()),
        },
    );
    let mut ctx = Context::new(
        client.clone(),
        ChartSource::new(config.chart_cache.clone())?,
        config.renderer.clone(),
        recorder,
        &config.identity,
        live_tx,
    );
    ctx.cancel_on_new_revision = config.cancel_on_new_revision;
    ctx.chart_poll = config.chart_poll;
    let ctx = Arc::new(ctx);
    let dispatcher = Dispatcher {
        ctx,
        api: config.scope.api(client.clone()),
        role: role.clone(),
        live: live_rx.clone(),
        views: views_tx,
        connection: connection_tx,
        direct: direct_rx,
        stop: stop.clone(),
        scope: config.scope.clone(),
        workers: TaskTracker::new(),
    };
    tokio::spawn(async move {
        let workers = dispatcher.workers.clone();
        dispatcher.run().await;
        workers.close();
        if tokio::time::timeout(SHUTDOWN_GRACE, workers.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                "workers still busy after {}s; releasing the lease anyway",
                SHUTDOWN_GRACE.as_secs()
            );
        }
        lease_stop.cancel();
        let _ = lease_task.await;
    });
    Ok(EngineHandle {
        client,
        views: views_rx,
        live: live_rx,
        role,
        connection: connection_rx,
        direct: direct_tx,
        stop,
    })
}

/// How long a stopping engine waits for its workers to finish the step they are in (an
/// apply or hook is never interrupted; a wait ends at once, leaving its revision pending).
/// Below Kubernetes' default termination grace period of 30 s.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(20);

/// How often the API server is probed, and how long it may take to answer.
const PROBE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

struct Dispatcher {
    ctx: Arc<Context>,
    /// Raw, so that one object that does not decode never fails the whole watch.
    api: Api<RawHelmRelease>,
    role: watch::Receiver<Role>,
    live: watch::Receiver<Arc<BTreeMap<ReleaseKey, LiveState>>>,
    views: watch::Sender<Arc<Views>>,
    connection: watch::Sender<Connection>,
    direct: mpsc::UnboundedReceiver<(Command, String)>,
    stop: CancellationToken,
    scope: Scope,
    /// Every worker task, so a shutdown can wait for them.
    workers: TaskTracker,
}

impl Dispatcher {
    async fn run(mut self) {
        let mut events = watcher(self.api.clone(), watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut store: BTreeMap<ReleaseKey, Arc<HelmRelease>> = BTreeMap::new();
        // Objects that do not decode: why, and the generation last reported.
        let mut bad: BTreeMap<ReleaseKey, (String, Option<i64>)> = BTreeMap::new();
        let mut relisted: Option<HashSet<ReleaseKey>> = None;
        let mut workers: HashMap<ReleaseKey, mpsc::UnboundedSender<Msg>> = HashMap::new();
        // While leading: the term's stop token and its workers. Workers of a term that
        // lost the lease finish their current step before a new term may start, so a
        // regained lease never runs a second writer beside an apply still running.
        let mut term: Option<(CancellationToken, TaskTracker)> = None;
        let mut draining: Option<TaskTracker> = None;
        // A hung API server breaks no watch; an active probe notices it too.
        let mut probe = tokio::time::interval(PROBE_EVERY);
        probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut watch_failing, mut probe_failing) = (false, false);
        loop {
            tokio::select! {
                () = self.stop.cancelled() => break,
                event = events.next() => {
                    let Some(event) = event else { break };
                    // The watch failing (and recovering) is what the front ends show as
                    // disconnected: the rows are then the last known state.
                    watch_failing = event.is_err();
                    let error = event.as_ref().err().map(ToString::to_string);
                    self.report_connection(watch_failing || probe_failing, error);
                    match event {
                        Ok(watcher::Event::Init) => relisted = Some(HashSet::new()),
                        Ok(watcher::Event::InitApply(raw) | watcher::Event::Apply(raw)) => {
                            let decoded = raw.decode();
                            let hr = Arc::new(match &decoded {
                                Ok(hr) => hr.clone(),
                                Err(u) => u.placeholder.clone(),
                            });
                            let key = ReleaseKey::of(&hr);
                            if let Some(seen) = relisted.as_mut() {
                                seen.insert(key.clone());
                            }
                            store.insert(key.clone(), hr.clone());
                            match decoded {
                                Ok(_) => {
                                    bad.remove(&key);
                                    if let Some(term) = &term {
                                        self.send(&mut workers, term, &key, Msg::Updated(hr));
                                    }
                                }
                                Err(u) => {
                                    // Its worker (if it had one) stops; the rest go on.
                                    workers.remove(&key);
                                    let generation = hr.metadata.generation;
                                    let reported = bad.get(&key).is_some_and(|(_, g)| *g == generation);
                                    bad.insert(key.clone(), (u.reason.clone(), generation));
                                    if term.is_some() && (!reported || hr.metadata.deletion_timestamp.is_some()) {
                                        tokio::spawn(report_undecodable(self.ctx.clone(), key.clone(), u));
                                    }
                                }
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            if let Some(seen) = relisted.take() {
                                let gone: Vec<_> = store.keys().filter(|k| !seen.contains(k)).cloned().collect();
                                for key in gone {
                                    store.remove(&key);
                                    bad.remove(&key);
                                    if let Some(w) = workers.remove(&key) {
                                        let _ = w.send(Msg::Deleted);
                                    }
                                }
                            }
                        }
                        Ok(watcher::Event::Delete(raw)) => {
                            let key = ReleaseKey {
                                namespace: raw.metadata.namespace.clone().unwrap_or_default(),
                                name: raw.metadata.name.clone().unwrap_or_default(),
                            };
                            store.remove(&key);
                            bad.remove(&key);
                            if let Some(w) = workers.remove(&key) {
                                let _ = w.send(Msg::Deleted);
                            }
                        }
                        Err(e) => tracing::warn!(error = %e, "HelmRelease watch error"),
                    }
                    self.publish(&store, &bad);
                }
                Ok(()) = self.role.changed() => {
                    let leader = *self.role.borrow_and_update() == Role::Leader;
                    match (&term, leader) {
                        (None, true) => {
                            if let Some(old) = draining.take() {
                                tracing::info!("waiting for the previous term's workers to finish their step");
                                old.wait().await;
                            }
                            tracing::info!("holding the engine lease: reconciling");
                            let t = self.stop.child_token();
                            let tracker = TaskTracker::new();
                            // One writer rolls workloads on config changes: the lease holder.
                            crate::tracking::start(
                                self.ctx.client.clone(),
                                self.scope.clone(),
                                crate::tracking::TrackerConfig::default(),
                                t.child_token(),
                            );
                            let t = (t, tracker);
                            for (key, hr) in &store {
                                match bad.get(key) {
                                    None => self.send(&mut workers, &t, key, Msg::Updated(hr.clone())),
                                    Some((reason, _)) => {
                                        let u = Undecodable { placeholder: (**hr).clone(), reason: reason.clone() };
                                        tokio::spawn(report_undecodable(self.ctx.clone(), key.clone(), Box::new(u)));
                                    }
                                }
                            }
                            term = Some(t);
                        }
                        (Some((t, tracker)), false) => {
                            tracing::info!(role = ?*self.role.borrow(), "not holding the engine lease: observing only");
                            t.cancel();
                            tracker.close();
                            draining = Some(tracker.clone());
                            workers.clear();
                            term = None;
                        }
                        _ => {}
                    }
                }
                Some((command, token)) = self.direct.recv() => {
                    if let Some(t) = &term {
                        let key = command.key().clone();
                        self.send(&mut workers, t, &key, Msg::Command(command, token));
                    }
                }
                _ = probe.tick() => {
                    let answer = tokio::time::timeout(PROBE_EVERY, self.ctx.client.apiserver_version()).await;
                    let error = match answer {
                        Ok(Ok(_)) => None,
                        Ok(Err(e)) => Some(e.to_string()),
                        Err(_) => Some(format!("no answer within {}s", PROBE_EVERY.as_secs())),
                    };
                    probe_failing = error.is_some();
                    self.report_connection(watch_failing || probe_failing, error);
                }
                Ok(()) = self.live.changed() => {
                    self.live.borrow_and_update();
                    self.publish(&store, &bad);
                }
            }
        }
        if let Some((t, _)) = term {
            t.cancel();
        }
    }

    /// Hands a message to the release's worker, starting the worker if needed.
    fn send(
        &self,
        workers: &mut HashMap<ReleaseKey, mpsc::UnboundedSender<Msg>>,
        (term, tracker): &(CancellationToken, TaskTracker),
        key: &ReleaseKey,
        msg: Msg,
    ) {
        if let Some(w) = workers.get(key)
            && !w.is_closed()
        {
            let _ = w.send(msg);
            return;
        }
        let Msg::Updated(hr) = msg else { return };
        let (tx, rx) = mpsc::unbounded_channel();
        let inbox = Inbox::new(rx, hr);
        self.workers.spawn(tracker.track_future(worker::run(
            self.ctx.clone(),
            key.clone(),
            inbox,
            term.child_token(),
        )));
        workers.insert(key.clone(), tx);
    }

    /// Tells front ends whether the API server answers (disconnected since the first
    /// failure, connected again once the watch and the probe both succeed).
    fn report_connection(&self, failing: bool, error: Option<String>) {
        self.connection.send_if_modified(|c| match (failing, &*c) {
            (true, Connection::Connected) => {
                *c = Connection::Disconnected {
                    since: k8s_openapi::jiff::Timestamp::now(),
                    error: error.unwrap_or_default(),
                };
                true
            }
            (false, Connection::Disconnected { .. }) => {
                *c = Connection::Connected;
                true
            }
            _ => false,
        });
    }

    fn publish(
        &self,
        store: &BTreeMap<ReleaseKey, Arc<HelmRelease>>,
        bad: &BTreeMap<ReleaseKey, (String, Option<i64>)>,
    ) {
        let live = self.live.borrow().clone();
        let views: Views = store
            .iter()
            .map(|(key, hr)| {
                let view = ReleaseView {
                    key: key.clone(),
                    release: hr.clone(),
                    live: live.get(key).cloned().unwrap_or_default(),
                    problem: bad.get(key).map(|(reason, _)| reason.clone()),
                };
                (key.clone(), view)
            })
            .collect();
        self.views.send_replace(Arc::new(views));
    }
}

/// Tells an object that cannot be read why the engine leaves it alone: its status when it
/// can be written (else an Event), and one log line that does not dump the object. When
/// it is being deleted, its finalizer is removed without uninstalling: what to uninstall
/// cannot be read, and leaving a release in place is never destructive.
async fn report_undecodable(ctx: Arc<Context>, key: ReleaseKey, u: Box<Undecodable>) {
    use kube::Resource;
    use kube::runtime::events::{Event, EventType};
    use status::{Truth, condition, reason};

    let api: Api<RawHelmRelease> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let hr = &u.placeholder;
    tracing::warn!(release = %key, reason = %u.reason, "HelmRelease skipped");
    let deleting = hr.metadata.deletion_timestamp.is_some()
        && hr
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER);
    let mut note = u.reason.clone();
    if deleting {
        let finalizers: Vec<&String> = hr
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != FINALIZER)
            .collect();
        let patch = serde_json::json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": hr.metadata.resource_version,
        }});
        match api
            .patch(
                &key.name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => {
                note.push_str("; deleted without uninstalling: its Helm release is left in place")
            }
            Err(e) => {
                tracing::warn!(release = %key, error = %crate::apply::api_message(&e), "cannot remove the finalizer")
            }
        }
    } else {
        let mut s = hr.status.clone().unwrap_or_default();
        let generation = hr.metadata.generation;
        status::set(
            &mut s,
            condition::READY,
            Truth::False,
            reason::INVALID_SPEC,
            &u.reason,
            generation,
        );
        status::set(
            &mut s,
            condition::STALLED,
            Truth::True,
            reason::INVALID_SPEC,
            &u.reason,
            generation,
        );
        status::remove(&mut s, condition::RECONCILING);
        if let Err(e) = status::write(&api, &key.name, &s).await {
            tracing::warn!(release = %key, error = %crate::apply::api_message(&e), "cannot write the status of an unreadable HelmRelease");
        }
    }
    let event = Event {
        type_: EventType::Warning,
        reason: reason::INVALID_SPEC.into(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    let _ = ctx.recorder.publish(&event, &hr.object_ref(&())).await;
}

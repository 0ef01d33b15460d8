//! The reconcile engine: a library with a small surface. [`start`] takes a kube
//! `Client` and a config and returns an [`EngineHandle`] that streams per-release views
//! and accepts commands. The dashboard and `wheelhouse controller` are two front ends
//! over it; neither re-implements reconcile logic.
//!
//! Inside: one watch on HelmReleases feeds the views and, while this process holds the
//! engine lease, one worker per release (`worker`), which asks the pure planner (`plan`)
//! for the next action and runs it (`actions`); what both of those share is in `run`.

pub mod actions;
pub mod claim;
pub mod coverage;
pub mod drift;
pub mod handle;
pub mod lease;
pub mod plan;
mod policy;
pub mod preview;
pub mod run;
pub mod status;
pub mod stored;
pub mod worker;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::events::{Recorder, Reporter};
use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use coverage::{Coverage, SHARD_LABEL};
pub use handle::{
    Command, Connection, EngineHandle, FixTimeline, LiveMap, LiveState, Phase, Pusher, ReleaseKey,
    ReleaseMap, ReleaseView, Views, WaitView, changed_keys, new_token,
};
pub use lease::Role;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};

use crate::api::{FINALIZER, HelmRelease, RawHelmRelease, Undecodable};
use crate::client::Scope;
use crate::render::Renderer;
use crate::source::ChartSource;
use crate::tracking;
use run::{Context, Inbox, Msg};

pub struct EngineConfig {
    /// Which HelmReleases the engine reconciles while it holds its Lease. The views show
    /// every release of `coverage.scope`, whichever shard it belongs to (a sharded engine
    /// lists only its shard, to keep its memory to its own releases).
    pub coverage: Coverage,
    /// Namespace of the cluster-wide engines' Leases; every wheelhouse of a cluster must
    /// agree on it. A namespace engine's Lease lives in its own namespace.
    pub lease_namespace: String,
    pub identity: String,
    pub chart_cache: PathBuf,
    /// What a relative `chart.path` is relative to (none: relative paths are refused).
    pub chart_root: Option<PathBuf>,
    pub renderer: Arc<dyn Renderer>,
    /// Observe only: never take the lease (e.g. `--readonly`).
    pub passive: bool,
    /// Cancel a running health-check wait as soon as a newer desired state is ready to
    /// apply (per release: `healthCheck.cancelOnNewRevision`). Off restores
    /// wait-until-timeout everywhere, for comparison.
    pub cancel_on_new_revision: bool,
    /// How often a running wait asks a chart repository for a newer matching version.
    pub chart_poll: std::time::Duration,
    /// At most this many renders (helm processes) at once; the rest queue.
    pub concurrent: usize,
    pub metrics: crate::telemetry::Metrics,
    /// The tenancy rules this engine was started with (`--default-service-account`,
    /// `--no-cross-namespace-refs`); the cluster's published policy tightens them.
    pub tenancy: crate::tenancy::Policy,
}

impl EngineConfig {
    /// Defaults: unsharded, lease in `default`, chart cache in the platform cache
    /// directory, helm from $WHEELHOUSE_HELM or PATH with its default cluster access.
    pub fn new(scope: Scope) -> Self {
        let cache = directories::ProjectDirs::from("dev", "wheelhouse", "wheelhouse").map_or_else(
            || std::env::temp_dir().join("wheelhouse"),
            |d| d.cache_dir().to_path_buf(),
        );
        Self {
            coverage: Coverage::new(scope, None),
            lease_namespace: "default".into(),
            identity: lease::identity(),
            chart_cache: cache.join("charts"),
            chart_root: std::env::var_os("WHEELHOUSE_CHART_ROOT").map(PathBuf::from),
            renderer: crate::render::Choice::from_env().renderer(None, None),
            passive: false,
            cancel_on_new_revision: true,
            chart_poll: std::time::Duration::from_secs(15),
            concurrent: 4,
            metrics: crate::telemetry::Metrics::new(),
            tenancy: crate::tenancy::Policy::default(),
        }
    }
}

/// Starts the engine: the lease, the HelmRelease watch and, while leader, the workers.
pub fn start(client: Client, config: EngineConfig) -> crate::Result<EngineHandle> {
    let stop = CancellationToken::new();
    // The lease is handed back only after the workers have finished their current step,
    // so no other engine starts on a release while this one still writes to it.
    let lease_stop = CancellationToken::new();
    let lease_stop_handle = lease_stop.clone();
    let (idle_tx, idle_rx) = watch::channel(true);
    let idle_seen = idle_rx.clone();
    let (policy_tx, policy_rx) = watch::channel(config.tenancy.clone());
    let policy_tx = Arc::new(policy_tx);
    let (role, lease_task) = if config.passive {
        let (_tx, rx) = watch::channel(Role::Follower {
            holder: "none (read-only)".into(),
        });
        (rx, tokio::spawn(async {}))
    } else {
        let renderer = config.renderer.clone();
        let (policy_client, flags, scope) = (
            client.clone(),
            config.tenancy.clone(),
            config.coverage.scope.clone(),
        );
        let policy = policy_tx.clone();
        let able = Box::pin(async move {
            match renderer.check().await {
                Ok(version) => tracing::info!(%version, "renderer ready"),
                Err(e) => {
                    return Err(format!(
                        "this process cannot render charts, so it does not run the engine: {e}"
                    ));
                }
            }
            // One tenancy policy for the cluster: an engine that cannot enforce it (it
            // cannot read it, or cannot impersonate) never takes a lease.
            let enforced = policy::in_force(&policy_client, &flags, &scope).await?;
            tracing::info!(policy = %enforced.describe(), "tenancy");
            policy.send_replace(enforced);
            Ok(())
        });
        lease::run(
            client.clone(),
            lease::LeaseConfig::for_coverage(
                &config.coverage,
                &config.lease_namespace,
                &config.identity,
            ),
            able,
            idle_rx,
            lease_stop.clone(),
        )
    };
    let (live_tx, live_rx) = watch::channel(LiveMap::new());
    let (views_tx, views_rx) = watch::channel(Arc::new(Views::default()));
    let (connection_tx, connection_rx) = watch::channel(Connection::Connected);
    let (direct_tx, direct_rx) = mpsc::unbounded_channel();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "wheelhouse".into(),
            instance: Some(config.identity.clone()),
        },
    );
    let renderer: Arc<dyn Renderer> = Arc::new(crate::render::Throttled::new(
        config.renderer.clone(),
        config.concurrent,
        config.metrics.queue_depth.clone(),
    ));
    let mut ctx = Context::new(
        client.clone(),
        ChartSource::new(config.chart_cache.clone())?.with_chart_root(config.chart_root.clone()),
        renderer,
        recorder,
        &config.identity,
        live_tx,
    );
    ctx.cancel_on_new_revision = config.cancel_on_new_revision;
    ctx.policy = policy_rx;
    let (lease_ns, lease_name) = config.coverage.lease(&config.lease_namespace);
    ctx.engine = crate::api::EngineRef {
        identity: config.identity.clone(),
        lease: format!("{lease_ns}/{lease_name}"),
    };
    ctx.chart_poll = config.chart_poll;
    ctx.metrics = config.metrics.clone();
    ctx.loads = crate::slots::Slots::new(config.concurrent.max(1));
    if !config.passive {
        // The setting lives beside the engine's Lease (docs/user-guide/notifications.md, "The setting").
        ctx.notifier = crate::notify::start(
            client.clone(),
            &lease_ns,
            &config.identity,
            config.metrics.clone(),
            stop.clone(),
        )?;
    }
    tokio::spawn(policy::keep_current(
        client.clone(),
        config.tenancy.clone(),
        policy_tx.clone(),
        stop.clone(),
    ));
    let ctx = Arc::new(ctx);
    let coverage = config.coverage.clone();
    let (tracker_tx, tracker_rx) = watch::channel(None);
    let dispatcher = Dispatcher {
        ctx: ctx.clone(),
        api: coverage.scope.api(client.clone()),
        role: role.clone(),
        live: live_rx.clone(),
        views: views_tx,
        connection: connection_tx,
        direct: direct_rx,
        stop: stop.clone(),
        coverage: coverage.clone(),
        identity: config.identity.clone(),
        workers: TaskTracker::new(),
        idle: Arc::new(idle_tx),
        held: HeldNamespaces::default(),
        acting: HashSet::new(),
        owned: tracking::Ownership::default(),
        tracker: tracker_tx,
        shown: ReleaseMap::new(),
        seen_live: LiveMap::new(),
        listed: false,
        blocked: HashSet::new(),
        poke_due: false,
        last_poke: None,
        finished: HashMap::new(),
    };
    // The lease task's end (the Lease let go), seen by the shutdown below and by
    // `abandon`, which lets the Lease go without waiting for the workers.
    let (lease_done_tx, lease_done_rx) = watch::channel(false);
    let lease_task = tokio::spawn(async move {
        let _ = lease_task.await;
        lease_done_tx.send_replace(true);
    });
    let (stopped_tx, stopped_rx) = watch::channel(false);
    tokio::spawn(async move {
        let workers = dispatcher.workers.clone();
        let idle = dispatcher.idle.clone();
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
        } else {
            idle.send_replace(true);
        }
        lease_stop.cancel();
        let _ = lease_task.await;
        // The Lease is handed back (or its release gave up): the process may exit now
        // without cutting that call short.
        stopped_tx.send_replace(true);
    });
    Ok(EngineHandle {
        lease_stop: lease_stop_handle,
        lease_done: lease_done_rx,
        ctx,
        client,
        views: views_rx,
        live: live_rx,
        role,
        connection: connection_rx,
        direct: direct_tx,
        stop,
        coverage,
        idle: idle_seen,
        stopped: stopped_rx,
        tracker: tracker_rx,
    })
}

/// How long a stopping engine waits for its workers to finish the step they are in (an
/// apply or hook is never interrupted; a wait ends at once, leaving its revision pending).
/// Below Kubernetes' default termination grace period of 30 s.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(20);

/// The most often the views are rebuilt (a change reaches the screen within this).
const PUBLISH_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// How often the API server is probed, and how long it may take to answer.
const PROBE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// How often what held a release up (discovery, a refused permission) is looked at
/// while one is held up.
const HEALING_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// How often the API server's liveness is probed: with the 2 s limit, a server that
/// stops answering shows as disconnected within 3 s (the dashboard promises 5).
const LIVENESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// A running worker: its mailbox and its own stop token (a release that leaves this
/// engine's coverage stops like a lost lease: the current step ends, nothing is undone).
struct Worker {
    inbox: mpsc::UnboundedSender<Msg>,
    stop: CancellationToken,
    /// Cancelled when the worker's task has ended.
    finished: CancellationToken,
}

impl Worker {
    /// Stops a worker whose release left this engine (relabelled to another shard, its
    /// namespace taken by a namespace engine): its current step finishes, then the
    /// release's status records that this engine let go, the sign its successor waits for.
    fn hand_over(self, ctx: &Arc<Context>, key: &ReleaseKey) {
        self.stop.cancel();
        let (ctx, key) = (ctx.clone(), key.clone());
        tokio::spawn(async move {
            self.finished.cancelled().await;
            let api: Api<crate::api::HelmRelease> =
                Api::namespaced(ctx.client.clone(), &key.namespace);
            match status::write_let_go(&api, &key.name, &ctx.engine).await {
                Ok(()) => tracing::info!(release = %key, "let go of the release"),
                Err(e) => {
                    tracing::warn!(release = %key, error = %e, "cannot record letting go of the release")
                }
            }
        });
    }
}

/// The term of a leader: its stop token and its workers.
type Term = (CancellationToken, TaskTracker);

struct Dispatcher {
    ctx: Arc<Context>,
    /// Raw, so that one object that does not decode never fails the whole watch.
    api: Api<RawHelmRelease>,
    role: watch::Receiver<Role>,
    live: watch::Receiver<LiveMap>,
    views: watch::Sender<Arc<Views>>,
    connection: watch::Sender<Connection>,
    direct: mpsc::UnboundedReceiver<(Command, String)>,
    stop: CancellationToken,
    coverage: Coverage,
    identity: String,
    /// Every worker task, so a shutdown can wait for them.
    workers: TaskTracker,
    /// Tells the lease task that no worker of any term is running any more.
    idle: Arc<watch::Sender<bool>>,
    /// For a cluster-wide engine: the namespaces whose namespace engine holds its Lease.
    held: HeldNamespaces,
    /// Namespaces this term has started workers in. A namespace engine that takes its
    /// Lease later defers to us there, so we go on.
    acting: HashSet<String>,
    /// The releases this engine reconciles, for the config tracker.
    owned: tracking::Ownership,
    /// The config tracker of the current term (the lease holder's), if any.
    tracker: watch::Sender<Option<tracking::TrackerHandle>>,
    /// The views as published next: kept up to date one release at a time.
    shown: ReleaseMap,
    /// The workers' live states the views were last brought up to date with.
    seen_live: LiveMap,
    /// Whether the watch's initial list has completed.
    listed: bool,
    /// Releases held by a guard whose cause is another HelmRelease (a dependency not
    /// Ready, a dependsOn cycle, a release conflict): looked at again when any HelmRelease
    /// changes, at most once a second, instead of at their interval.
    blocked: HashSet<ReleaseKey>,
    poke_due: bool,
    last_poke: Option<tokio::time::Instant>,
    /// Per release, cancelled when this engine's last worker of it has ended: a new
    /// worker starts after the old one's step.
    finished: HashMap<ReleaseKey, CancellationToken>,
}

/// Ready reasons of the guards whose cause is another HelmRelease.
const BLOCKED_BY_OTHERS: [&str; 3] = [
    status::reason::DEPENDENCY_NOT_READY,
    status::reason::DEPENDENCY_CYCLE,
    status::reason::RELEASE_CONFLICT,
];

/// How often releases held by another HelmRelease are looked at again, at most.
const POKE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The store of watched releases: decoded (or a stand-in) and, for those that do not
/// decode, why and the generation last reported.
#[derive(Default)]
struct Store {
    releases: BTreeMap<ReleaseKey, Arc<HelmRelease>>,
    bad: BTreeMap<ReleaseKey, (String, Option<i64>)>,
}

impl Dispatcher {
    async fn run(mut self) {
        let mut config = watcher::Config::default();
        if self.coverage.shard.is_some() {
            // A shard engine lists only its own releases. The unsharded engine lists all,
            // to tell which workloads belong to another shard's releases.
            config = config.labels(&self.coverage.label_selector());
        }
        let mut events = watcher(self.api.clone(), config).default_backoff().boxed();
        let mut leases = self.namespace_lease_events();
        let mut records = self.record_events();
        let mut workloads = self.workload_events();
        // Each workload's generation as last seen: a newer one is a change of its spec.
        let mut generations: HashMap<String, i64> = HashMap::new();
        let mut store = Store::default();
        let mut relisted: Option<HashSet<ReleaseKey>> = None;
        let mut workers: HashMap<ReleaseKey, Worker> = HashMap::new();
        // While leading: the term's stop token and its workers. Workers of a term that
        // lost the lease finish their current step before a new term may start, so a
        // regained lease never runs a second writer beside an apply still running.
        let mut term: Option<Term> = None;
        let mut draining: Option<TaskTracker> = None;
        // A hung API server breaks no watch; an active probe notices it too. It runs on
        // its own task, so a slow answer never holds up events and views.
        let mut probe = liveness_probe(self.ctx.client.clone(), self.stop.clone());
        tokio::spawn(watch_healing(self.ctx.clone(), self.stop.clone()));
        let mut leases_expire = tokio::time::interval(LIVENESS_EVERY);
        leases_expire.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let (mut watch_failing, mut probe_failing) = (false, false);
        // Each event updates the views of the releases it is about; the snapshot is
        // published at most once per PUBLISH_EVERY, however many events arrived.
        let mut dirty = false;
        // Which releases are ours changes with releases, Leases and terms, not with
        // the workers' progress: the tracker learns it only then.
        let mut ownership_stale = false;
        let mut publish = tokio::time::interval(PUBLISH_EVERY);
        publish.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = self.stop.cancelled() => break,
                _ = publish.tick(), if dirty => {
                    // Coalesced like the views: the tracker learns which releases are
                    // ours at most once per tick, not once per event.
                    if ownership_stale {
                        self.share_ownership(&store, &workers);
                        ownership_stale = false;
                    }
                    self.publish();
                    dirty = self.poke_blocked(&workers, term.is_some());
                }
                event = events.next() => {
                    let Some(event) = event else { break };
                    // The watch failing (and recovering) is what the front ends show as
                    // disconnected: the rows are then the last known state.
                    watch_failing = event.is_err();
                    let error = event.as_ref().err().map(ToString::to_string);
                    self.report_connection(watch_failing || probe_failing, error);
                    let mut touched: Option<ReleaseKey> = None;
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
                            store.releases.insert(key.clone(), hr.clone());
                            touched = Some(key.clone());
                            match decoded {
                                Ok(_) => {
                                    store.bad.remove(&key);
                                    // Releases of the first list start with the term;
                                    // one that appears later may come from another shard.
                                    let handover = self.listed;
                                    self.dispatch(&mut workers, term.as_ref(), &key, &hr, handover);
                                }
                                Err(u) => {
                                    // Its worker (if it had one) stops; the rest go on.
                                    workers.remove(&key);
                                    let generation = hr.metadata.generation;
                                    let reported = store.bad.get(&key).is_some_and(|(_, g)| *g == generation);
                                    store.bad.insert(key.clone(), (u.reason.clone(), generation));
                                    if term.is_some() && self.eligible(&key, &hr) && (!reported || hr.metadata.deletion_timestamp.is_some()) {
                                        tokio::spawn(report_undecodable(self.ctx.clone(), key.clone(), u));
                                    }
                                }
                            }
                        }
                        Ok(watcher::Event::InitDone) => {
                            if let Some(seen) = relisted.take() {
                                let gone: Vec<_> = store.releases.keys().filter(|k| !seen.contains(k)).cloned().collect();
                                for key in gone {
                                    forget(&mut store, &mut workers, &key);
                                    self.refresh_view(&store, &key);
                                }
                            }
                            self.listed = true;
                        }
                        Ok(watcher::Event::Delete(raw)) => {
                            let key = ReleaseKey {
                                namespace: raw.metadata.namespace.clone().unwrap_or_default(),
                                name: raw.metadata.name.clone().unwrap_or_default(),
                            };
                            // A shard's watch reports a release relabelled away as deleted.
                            // One that left only stops, as on a lost lease: its current step
                            // finishes and it writes nothing more.
                            let left = coverage::left_watch(&raw.metadata);
                            if left && let Some(w) = workers.remove(&key) {
                                tracing::info!(release = %key, "relabelled to another shard: its worker stops after its current step");
                                w.hand_over(&self.ctx, &key);
                            }
                            forget(&mut store, &mut workers, &key);
                            touched = Some(key);
                        }
                        Err(e) => tracing::warn!(error = %e, "HelmRelease watch error"),
                    }
                    if let Some(key) = touched {
                        self.refresh_view(&store, &key);
                        ownership_stale = true;
                        // What held a blocked release may have changed with this one.
                        let held = store.releases.get(&key).and_then(|hr| hr.condition(status::condition::READY)).is_some_and(|c| c.status == "False" && BLOCKED_BY_OTHERS.contains(&c.reason.as_str()));
                        if held {
                            self.blocked.insert(key.clone());
                        } else {
                            self.blocked.remove(&key);
                        }
                        self.poke_due |= self.blocked.iter().any(|k| *k != key);
                    }
                    dirty = true;
                }
                Some(event) = leases.next() => {
                    self.held.observe(event, &self.identity);
                    self.start_eligible(&store, &mut workers, term.as_ref(), true);
                    self.refresh_all(&store);
                    ownership_stale = true;
                    dirty = true;
                }
                Ok(()) = self.role.changed() => {
                    let leader = *self.role.borrow_and_update() == Role::Leader;
                    match (&term, leader) {
                        (None, true) => {
                            if let Some(old) = draining.take() {
                                tracing::info!("waiting for the previous term's workers to finish their step");
                                old.wait().await;
                            }
                            // Our Lease is written; now read the namespace engines' (fresh,
                            // not from the watch), so that one of us defers to the other.
                            // Until they can be read, nothing is started.
                            while let Err(e) = self.read_namespace_leases().await {
                                tracing::warn!(error = %e, "cannot read the namespace engines' Leases; retrying before acting");
                                tokio::select! {
                                    () = self.stop.cancelled() => break,
                                    () = tokio::time::sleep(PROBE_EVERY) => {}
                                }
                            }
                            if self.stop.is_cancelled() || *self.role.borrow() != Role::Leader {
                                continue;
                            }
                            tracing::info!(coverage = %self.coverage, "holding the engine lease: reconciling");
                            // The views say which namespaces we leave to namespace engines
                            // before any worker may start.
                            self.acting.clear();
                            self.refresh_all(&store);
                            self.publish();
                            self.idle.send_replace(false);
                            let t: Term = (self.stop.child_token(), TaskTracker::new());
                            for (key, hr) in &store.releases {
                                if let Some((reason, _)) = store.bad.get(key) && self.eligible(key, hr) {
                                    let u = Undecodable { placeholder: (**hr).clone(), reason: reason.clone() };
                                    tokio::spawn(report_undecodable(self.ctx.clone(), key.clone(), Box::new(u)));
                                }
                            }
                            self.start_eligible(&store, &mut workers, Some(&t), false);
                            self.share_ownership(&store, &workers);
                            // One writer rolls workloads on config changes: the lease holder,
                            // for the releases it reconciles.
                            self.tracker.send_replace(Some(crate::tracking::start(
                                self.ctx.client.clone(),
                                self.coverage.scope.clone(),
                                crate::tracking::TrackerConfig {
                                    owned: self.owned.clone(),
                                    ..Default::default()
                                },
                                t.0.child_token(),
                            )));
                            term = Some(t);
                            self.refresh_all(&store);
                            ownership_stale = true;
                            dirty = true;
                        }
                        (Some((t, tracker)), false) => {
                            tracing::info!(role = ?*self.role.borrow(), "not holding the engine lease: observing only");
                            t.cancel();
                            self.tracker.send_replace(None);
                            tracker.close();
                            draining = Some(tracker.clone());
                            let (idle, tracker) = (self.idle.clone(), tracker.clone());
                            tokio::spawn(async move {
                                tracker.wait().await;
                                idle.send_replace(true);
                            });
                            workers.clear();
                            term = None;
                            self.refresh_all(&store);
                            ownership_stale = true;
                            dirty = true;
                        }
                        _ => {}
                    }
                }
                Some(event) = records.next() => {
                    // Another tool wrote a release record (`helm rollback` by hand): the
                    // HelmRelease managing that release looks at it now, not at its interval.
                    if let (Ok(watcher::Event::Apply(record)), Some(_)) = (event, &term) {
                        Self::wake_for_record(&store, &workers, &record.metadata);
                    }
                }
                Some((workload, initial)) = workloads.next() => {
                    // Someone changed a release's workload (`kubectl scale`, `kubectl
                    // edit`): its HelmRelease checks for drift now, not at its interval.
                    if term.is_some() {
                        Self::wake_for_workload(&store, &workers, &mut generations, &workload, initial);
                    }
                }
                Some((command, token)) = self.direct.recv() => {
                    let key = command.key().clone();
                    if let (Some(w), Some(_)) = (workers.get(&key), &term) {
                        let _ = w.inbox.send(Msg::Command(Box::new((command, token))));
                    }
                }
                Some(error) = probe.recv() => {
                    probe_failing = error.is_some();
                    self.report_connection(watch_failing || probe_failing, error);
                }
                _ = leases_expire.tick() => {
                    // Namespace Leases also expire without any event.
                    if self.held.refresh(&self.identity) {
                        self.start_eligible(&store, &mut workers, term.as_ref(), true);
                        self.refresh_all(&store);
                        ownership_stale = true;
                        dirty = true;
                    }
                }
                Ok(()) = self.live.changed() => {
                    let live = self.live.borrow_and_update().clone();
                    // Only the releases whose worker moved: the persistent maps share
                    // everything else, and `diff` skips what they share.
                    let moved = changed_keys(&self.seen_live, &live);
                    self.seen_live = live;
                    for key in moved {
                        self.refresh_view(&store, &key);
                    }
                    dirty = true;
                }
            }
        }
        if let Some((t, _)) = term {
            t.cancel();
        }
    }

    /// Helm's storage Secrets in our scope, metadata only (labels and managedFields say
    /// all a wake-up needs; the records themselves can be large).
    fn record_events(
        &self,
    ) -> futures::stream::BoxStream<
        'static,
        Result<
            watcher::Event<kube::api::PartialObjectMeta<k8s_openapi::api::core::v1::Secret>>,
            watcher::Error,
        >,
    > {
        let api = self.coverage.scope.api::<kube::api::PartialObjectMeta<
            k8s_openapi::api::core::v1::Secret,
        >>(self.ctx.client.clone());
        watcher(api, watcher::Config::default().labels("owner=helm"))
            .default_backoff()
            .boxed()
    }

    /// Deployments, StatefulSets, DaemonSets, ConfigMaps, Secrets and Services in our
    /// scope, metadata only (generation, managedFields and Helm annotations: never a
    /// Secret's data), with whether each came from a (re)list rather than a change.
    fn workload_events(
        &self,
    ) -> futures::stream::BoxStream<
        'static,
        (
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            bool,
        ),
    > {
        use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
        use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
        use kube::api::PartialObjectMeta;
        fn metas<K>(
            api: Api<PartialObjectMeta<K>>,
        ) -> futures::stream::BoxStream<
            'static,
            (
                k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
                bool,
            ),
        >
        where
            K: kube::Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
            K::DynamicType: Default,
        {
            watcher(api, watcher::Config::default())
                .default_backoff()
                .filter_map(|event| async move {
                    match event.ok()? {
                        watcher::Event::Apply(o) => Some((o.metadata, false)),
                        watcher::Event::InitApply(o) => Some((o.metadata, true)),
                        _ => None,
                    }
                })
                .boxed()
        }
        let client = self.ctx.client.clone();
        let scope = &self.coverage.scope;
        futures::stream::select_all([
            metas(scope.api::<PartialObjectMeta<Deployment>>(client.clone())),
            metas(scope.api::<PartialObjectMeta<StatefulSet>>(client.clone())),
            metas(scope.api::<PartialObjectMeta<DaemonSet>>(client.clone())),
            // Kinds without a generation: any write by someone else counts.
            metas(scope.api::<PartialObjectMeta<ConfigMap>>(client.clone())),
            metas(scope.api::<PartialObjectMeta<Secret>>(client.clone())),
            metas(scope.api::<PartialObjectMeta<Service>>(client)),
        ])
        .boxed()
    }

    /// Wakes the worker of the HelmRelease whose release `workload` belongs to (by Helm's
    /// annotations), when its spec changed (a newer generation) and the last writer of
    /// its spec was neither wheelhouse's apply (`helm`) nor its config tracking.
    fn wake_for_workload(
        store: &Store,
        workers: &HashMap<ReleaseKey, Worker>,
        generations: &mut HashMap<String, i64>,
        workload: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        initial: bool,
    ) {
        let Some(uid) = workload.uid.as_ref() else {
            return;
        };
        // A workload's spec changes with its generation (its status does not); a kind
        // without one counts each write. A (re)list says nothing about what changed: it
        // is judged by its last writer alone, since the watch may have started (or
        // restarted) after someone's edit.
        if let Some(generation) = workload.generation {
            let before = generations.insert(uid.clone(), generation);
            if !initial && before.is_none_or(|b| b >= generation) {
                return;
            }
        }
        let Some(writer) = drift::writer_not_ours(workload) else {
            return;
        };
        let annotation = |key: &str| workload.annotations.as_ref().and_then(|a| a.get(key));
        let (Some(release), Some(namespace)) = (
            annotation(crate::apply::manifest::RELEASE_NAME_ANNOTATION),
            annotation(crate::apply::manifest::RELEASE_NAMESPACE_ANNOTATION),
        ) else {
            return;
        };
        for (key, hr) in &store.releases {
            if &hr.release_name() == release
                && &hr.target_namespace() == namespace
                && let Some(w) = workers.get(key)
            {
                tracing::info!(release = %key, writer, "a workload of the release changed: checking for drift now");
                let look = Command::Reconcile(key.clone());
                let _ = w.inbox.send(Msg::Command(Box::new((look, String::new()))));
            }
        }
    }

    /// Wakes the worker of each HelmRelease managing the release `record` belongs to, when
    /// the record's last writer was not wheelhouse.
    fn wake_for_record(
        store: &Store,
        workers: &HashMap<ReleaseKey, Worker>,
        record: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) {
        let last_writer = record
            .managed_fields
            .iter()
            .flatten()
            .max_by(|a, b| a.time.cmp(&b.time))
            .and_then(|m| m.manager.as_deref());
        if last_writer.is_none_or(|m| m == crate::release::FIELD_MANAGER) {
            return;
        }
        let (Some(namespace), Some(name)) = (
            record.namespace.as_deref(),
            record.labels.as_ref().and_then(|l| l.get("name")),
        ) else {
            return;
        };
        for (key, hr) in &store.releases {
            if hr.storage_namespace() == namespace
                && &hr.release_name() == name
                && let Some(w) = workers.get(key)
            {
                tracing::info!(release = %key, writer = last_writer.unwrap_or_default(), "another tool wrote a release record: looking now");
                let look = Command::Reconcile(key.clone());
                let _ = w.inbox.send(Msg::Command(Box::new((look, String::new()))));
            }
        }
    }

    /// Whether this engine may act on the release now: it is in our coverage and, for a
    /// cluster-wide engine, no namespace engine holds its namespace (unless we were
    /// there first: then that engine defers).
    fn eligible(&self, key: &ReleaseKey, hr: &HelmRelease) -> bool {
        self.coverage
            .covers(&key.namespace, hr.metadata.labels.as_ref())
            && (self.acting.contains(&key.namespace) || !self.held.is_held(&key.namespace))
    }

    /// Who reconciles a release this engine leaves alone.
    fn elsewhere(&self, key: &ReleaseKey, hr: &HelmRelease) -> Option<String> {
        if !self
            .coverage
            .covers(&key.namespace, hr.metadata.labels.as_ref())
        {
            return Some(match coverage::shard_of(hr.metadata.labels.as_ref()) {
                Some(shard) => format!("shard {shard}"),
                None => "the unsharded engine".into(),
            });
        }
        if self.acting.contains(&key.namespace) {
            return None;
        }
        self.held
            .holder(&key.namespace)
            .map(|h| format!("namespace engine {h}"))
    }

    /// Asks the workers of blocked releases to look again, when a change is due and the
    /// last ask was a while ago; true while a change is still due (the tick comes back).
    fn poke_blocked(&mut self, workers: &HashMap<ReleaseKey, Worker>, acting: bool) -> bool {
        if !self.poke_due || !acting {
            self.poke_due = false;
            return false;
        }
        let now = tokio::time::Instant::now();
        if self
            .last_poke
            .is_some_and(|at| now.duration_since(at) < POKE_EVERY)
        {
            return true;
        }
        for key in &self.blocked {
            if let Some(w) = workers.get(key) {
                let look = Command::Reconcile(key.clone());
                let _ = w.inbox.send(Msg::Command(Box::new((look, String::new()))));
            }
        }
        self.last_poke = Some(now);
        self.poke_due = false;
        false
    }

    /// Passes a changed release to its worker (starting one if needed), or stops the
    /// worker of a release that left our coverage. A worker started with `handover` (the
    /// term was already running) leaves a pending revision alone for a while.
    fn dispatch(
        &mut self,
        workers: &mut HashMap<ReleaseKey, Worker>,
        term: Option<&Term>,
        key: &ReleaseKey,
        hr: &Arc<HelmRelease>,
        handover: bool,
    ) {
        let Some(term) = term else { return };
        if !self.eligible(key, hr) {
            if let Some(w) = workers.remove(key) {
                tracing::info!(release = %key, "left this engine's coverage: its worker stops after its current step");
                w.hand_over(&self.ctx, key);
            }
            return;
        }
        if let Some(w) = workers.get(key)
            && !w.inbox.is_closed()
        {
            let _ = w.inbox.send(Msg::Updated(hr.clone()));
            return;
        }
        self.acting.insert(key.namespace.clone());
        let (tx, rx) = mpsc::unbounded_channel();
        let mut inbox = Inbox::new(rx, hr.clone());
        // Started while the term runs: another engine (the shard it was relabelled from)
        // or an earlier worker may still be in its step on this release. Workers of a new
        // term need no such wait: the Lease already made the last holder stop first.
        inbox.handover = handover;
        // An earlier worker of ours on this release may still be in its step.
        inbox.predecessor = self
            .finished
            .get(key)
            .filter(|f| !f.is_cancelled())
            .cloned();
        let stop = term.0.child_token();
        let finished = CancellationToken::new();
        self.finished.insert(key.clone(), finished.clone());
        let run = worker::run(self.ctx.clone(), key.clone(), inbox, stop.clone());
        let ends = finished.clone().drop_guard();
        self.workers.spawn(term.1.track_future(async move {
            let _ends = ends;
            run.await;
        }));
        workers.insert(
            key.clone(),
            Worker {
                inbox: tx,
                stop,
                finished,
            },
        );
    }

    /// Starts workers for every eligible release that has none (a term began, or a
    /// namespace engine let go).
    fn start_eligible(
        &mut self,
        store: &Store,
        workers: &mut HashMap<ReleaseKey, Worker>,
        term: Option<&Term>,
        handover: bool,
    ) {
        if term.is_none() {
            return;
        }
        for (key, hr) in &store.releases {
            if !workers.contains_key(key) && !store.bad.contains_key(key) && self.eligible(key, hr)
            {
                self.dispatch(workers, term, key, hr, handover);
            }
        }
    }

    /// Tells the config tracker which releases are ours and which are other engines'.
    fn share_ownership(&self, store: &Store, workers: &HashMap<ReleaseKey, Worker>) {
        let release = |hr: &HelmRelease| (hr.target_namespace(), hr.release_name());
        let ours = workers
            .keys()
            .filter_map(|k| store.releases.get(k))
            .map(|hr| release(hr))
            .collect();
        let theirs = store
            .releases
            .iter()
            .filter(|(k, _)| !workers.contains_key(k))
            .map(|(_, hr)| release(hr))
            .collect();
        let namespaces = (self.coverage.shard.is_none()).then(|| {
            let held = self.held.held();
            let acting = self.acting.clone();
            let scope = self.coverage.scope.clone();
            Arc::new(move |ns: &str| {
                let in_scope = match &scope {
                    Scope::All => true,
                    Scope::Namespace(n) => n == ns,
                };
                in_scope && (acting.contains(ns) || !held.contains(ns))
            }) as Arc<dyn Fn(&str) -> bool + Send + Sync>
        });
        self.owned.set(ours, theirs, namespaces);
    }

    /// For a cluster-wide engine: the namespace engines' Lease events.
    fn namespace_lease_events(&self) -> futures::stream::BoxStream<'static, watcher::Event<Lease>> {
        match self.coverage.subordinate_lease_name() {
            Some(name) => watcher(
                Api::<Lease>::all(self.ctx.client.clone()),
                watcher::Config::default().fields(&format!("metadata.name={name}")),
            )
            .default_backoff()
            .filter_map(|e| async move {
                e.map_err(|e| tracing::warn!(error = %e, "namespace Lease watch error"))
                    .ok()
            })
            .boxed(),
            None => futures::stream::pending().boxed(),
        }
    }

    async fn read_namespace_leases(&mut self) -> kube::Result<()> {
        let Some(name) = self.coverage.subordinate_lease_name() else {
            return Ok(());
        };
        let api = Api::<Lease>::all(self.ctx.client.clone());
        let params = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
        let list = tokio::time::timeout(PROBE_EVERY * 2, api.list(&params))
            .await
            .map_err(|_| kube::Error::Service("listing namespace Leases timed out".into()))??;
        for lease in list {
            self.held
                .observe(watcher::Event::Apply(lease), &self.identity);
        }
        Ok(())
    }

    /// Tells front ends whether the API server answers (disconnected since the first
    /// failure, connected again once the watch and the probe both succeed).
    fn report_connection(&self, failing: bool, error: Option<String>) {
        if !failing && matches!(*self.connection.borrow(), Connection::Disconnected { .. }) {
            // Back: releases the outage held up try again now.
            self.ctx
                .healed
                .send_replace(crate::telemetry::RetryCause::ClusterHealed);
        }
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

    /// The view of one release as front ends should see it now.
    fn view_of(&self, store: &Store, key: &ReleaseKey) -> Option<ReleaseView> {
        let hr = store.releases.get(key)?;
        Some(ReleaseView {
            key: key.clone(),
            release: hr.clone(),
            live: self.seen_live.get(key).cloned().unwrap_or_default(),
            problem: store.bad.get(key).map(|(reason, _)| reason.clone()),
            elsewhere: self.elsewhere(key, hr),
        })
    }

    /// Brings one release's view up to date: O(log n), and nothing when it shows the same.
    fn refresh_view(&mut self, store: &Store, key: &ReleaseKey) {
        match self.view_of(store, key) {
            Some(view) => {
                if self.shown.get(key) != Some(&view) {
                    self.shown.insert(key.clone(), view);
                }
            }
            None => {
                self.shown.remove(key);
            }
        }
    }

    /// Every view again: for what touches all releases at once (the term starts or
    /// ends, a namespace engine's Lease), which is rare.
    fn refresh_all(&mut self, store: &Store) {
        for key in store.releases.keys() {
            self.refresh_view(store, key);
        }
    }

    /// Publishes the current views: a snapshot of the persistent map, O(1).
    fn publish(&self) {
        self.views
            .send_replace(Arc::new(Views::new(self.shown.clone(), self.listed)));
    }
}

/// While a worker is held up by the cluster, looks every HEALING_EVERY at what held it up
/// (discovery, refused permissions) and wakes those workers when it heals.
async fn watch_healing(ctx: Arc<Context>, stop: CancellationToken) {
    let mut discovery = DiscoveryLooks::default();
    let mut every = tokio::time::interval(HEALING_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        if ctx.healed.receiver_count() == 0 {
            continue;
        }
        if discovery.healed(&ctx).await {
            tracing::info!("discovery healed: releases held up by it try again");
            ctx.healed
                .send_replace(crate::telemetry::RetryCause::ClusterHealed);
        }
        if access_granted(&ctx).await {
            tracing::info!("a refused permission was granted: releases held up by it try again");
            ctx.healed
                .send_replace(crate::telemetry::RetryCause::AccessGranted);
        }
        if account_created(&ctx).await {
            tracing::info!("a missing ServiceAccount was created: releases acting as it try again");
            ctx.healed
                .send_replace(crate::telemetry::RetryCause::AccessGranted);
        }
    }
}

/// What the last looks at discovery saw.
#[derive(Default)]
struct DiscoveryLooks {
    stale: BTreeSet<String>,
    gone: BTreeSet<String>,
}

impl DiscoveryLooks {
    /// Whether a group marked stale is served again, or has been gone from discovery for
    /// two looks in a row (its APIService removed: what needed it now fails on its own
    /// merits, not the cluster's).
    async fn healed(&mut self, ctx: &Context) -> bool {
        let Ok(Ok((now_stale, served))) =
            tokio::time::timeout(PROBE_EVERY, crate::render::discovery_state(&ctx.client)).await
        else {
            return false;
        };
        // Groups a reconcile saw stale count as stale before this look: a release held
        // up at render may see its group heal before the watcher first looked.
        self.stale
            .append(&mut ctx.stale_seen.lock().unwrap_or_else(|e| e.into_inner()));
        let now_stale: BTreeSet<String> = now_stale.into_iter().collect();
        let served: BTreeSet<String> = served.into_iter().collect();
        let healed = self.stale.iter().any(|g| served.contains(g))
            || self.gone.iter().any(|g| !now_stale.contains(g));
        self.gone = self
            .stale
            .iter()
            .filter(|g| !now_stale.contains(*g) && !served.contains(*g))
            .cloned()
            .collect();
        self.stale = now_stale;
        healed
    }
}

/// Whether a permission the API server refused a reconcile is granted now (each asked
/// with a SelfSubjectAccessReview; granted ones are forgotten).
async fn access_granted(ctx: &Context) -> bool {
    let refused: Vec<(crate::tenancy::Identity, crate::rbac::Access)> = ctx
        .refused
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect();
    let mut granted = false;
    for (identity, access) in refused {
        // Asked as the identity refused: a release's ServiceAccount by impersonation.
        let client = ctx.acting(&identity).client.clone();
        let allowed = tokio::time::timeout(PROBE_EVERY, access.allowed(&client)).await;
        if let Ok(Ok(true)) = allowed {
            granted = true;
            let mut refused = ctx.refused.lock().unwrap_or_else(|e| e.into_inner());
            refused.remove(&(identity, access));
        }
    }
    granted
}

/// Whether a ServiceAccount a release acts as, missing when last looked for, exists now.
async fn account_created(ctx: &Context) -> bool {
    let missing: Vec<(String, String)> = ctx
        .missing_accounts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect();
    let mut created = false;
    for (namespace, name) in missing {
        let exists = tokio::time::timeout(
            PROBE_EVERY,
            crate::tenancy::service_account_exists(&ctx.client, &namespace, &name),
        )
        .await;
        if let Ok(Ok(true)) = exists {
            created = true;
            let mut missing = ctx
                .missing_accounts
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            missing.remove(&(namespace, name));
        }
    }
    created
}

/// Asks the API server for its version every LIVENESS_EVERY, each answer within
/// PROBE_EVERY: `None` when it answered, else why not.
fn liveness_probe(client: Client, stop: CancellationToken) -> mpsc::Receiver<Option<String>> {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(LIVENESS_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            let error = match tokio::time::timeout(PROBE_EVERY, client.apiserver_version()).await {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(e.to_string()),
                Err(_) => Some(format!("no answer within {}s", PROBE_EVERY.as_secs())),
            };
            if tx.send(error).await.is_err() {
                return;
            }
        }
    });
    rx
}

/// A release is gone from the watch: its worker learns it was deleted.
fn forget(store: &mut Store, workers: &mut HashMap<ReleaseKey, Worker>, key: &ReleaseKey) {
    store.releases.remove(key);
    store.bad.remove(key);
    if let Some(w) = workers.remove(key) {
        let _ = w.inbox.send(Msg::Deleted);
    }
}

/// What a cluster-wide engine has seen of the namespace engines' Leases, judged like a
/// candidate judges its own: a holder is live until its record has not changed for the
/// lease duration on our clock.
#[derive(Default)]
struct HeldNamespaces {
    leases: HashMap<String, (Option<LeaseSpec>, lease::Observation)>,
    live: BTreeMap<String, String>,
}

impl HeldNamespaces {
    fn observe(&mut self, event: watcher::Event<Lease>, identity: &str) {
        match event {
            watcher::Event::Apply(l) | watcher::Event::InitApply(l) => {
                let ns = l.metadata.namespace.clone().unwrap_or_default();
                let entry = self.leases.entry(ns).or_default();
                entry.0 = l.spec;
            }
            watcher::Event::Delete(l) => {
                let ns = l.metadata.namespace.clone().unwrap_or_default();
                self.leases.remove(&ns);
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
        self.refresh(identity);
    }

    /// Re-judges every Lease; true when the set of held namespaces changed.
    fn refresh(&mut self, identity: &str) -> bool {
        let now = tokio::time::Instant::now();
        let live: BTreeMap<String, String> = self
            .leases
            .iter_mut()
            .filter_map(|(ns, (spec, observed))| {
                match lease::decide(
                    spec.as_ref(),
                    identity,
                    observed,
                    now,
                    std::time::Duration::from_secs(15),
                ) {
                    lease::Step::Follow(holder) => Some((ns.clone(), holder)),
                    _ => None,
                }
            })
            .collect();
        let changed = live != self.live;
        self.live = live;
        changed
    }

    fn is_held(&self, namespace: &str) -> bool {
        self.live.contains_key(namespace)
    }

    fn holder(&self, namespace: &str) -> Option<&String> {
        self.live.get(namespace)
    }

    fn held(&self) -> HashSet<String> {
        self.live.keys().cloned().collect()
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

//! How an engine comes up and goes down: the Lease (taken only by an engine able to work),
//! the shared reconcile context, the dispatcher, and the ordered shutdown that hands the
//! Lease back only after the workers finished their step.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use kube::Client;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::dispatcher::Dispatcher;
use super::namespaces::HeldNamespaces;
use super::run::Context;
use super::{
    Connection, EngineConfig, EngineHandle, LiveMap, ReleaseMap, Role, SHUTDOWN_GRACE, Views,
    error, freeze_expiry, lease, policy,
};
use crate::cluster::events::{Recorder, Reporter};
use crate::cluster::tenancy::Policy;
use crate::helm::render::Renderer;
use crate::helm::source::ChartSource;
use crate::tracking;

/// Starts the engine: the lease, the HelmRelease watch and, while leader, the workers.
pub fn start(client: Client, config: EngineConfig) -> crate::engine::Result<EngineHandle> {
    let stop = CancellationToken::new();
    // The lease is handed back only after the workers have finished their current step,
    // so no other engine starts on a release while this one still writes to it.
    let lease_stop = CancellationToken::new();
    let (idle_tx, idle_rx) = watch::channel(true);
    let (policy_tx, policy_rx) = watch::channel(config.tenancy.clone());
    let policy_tx = Arc::new(policy_tx);
    let (role, lease_task) = elect(
        &client,
        &config,
        policy_tx.clone(),
        idle_rx.clone(),
        lease_stop.clone(),
    );
    let (live_tx, live_rx) = watch::channel(LiveMap::new());
    let ctx = Arc::new(context(&client, &config, policy_rx, live_tx, &stop)?);
    tokio::spawn(policy::keep_current(
        client.clone(),
        config.tenancy.clone(),
        policy_tx,
        stop.clone(),
    ));
    let coverage = config.coverage.clone();
    // Expired freezes thaw while this process leads (src/engine/freeze_expiry.rs).
    tokio::spawn(freeze_expiry::run(
        client.clone(),
        coverage.clone(),
        config.identity.clone(),
        role.clone(),
        ctx.notifier.clone(),
        stop.clone(),
    ));
    let (views_tx, views_rx) = watch::channel(Arc::new(Views::default()));
    let (connection_tx, connection_rx) = watch::channel(Connection::Connected);
    let (direct_tx, direct_rx) = mpsc::unbounded_channel();
    let (tracker_tx, tracker_rx) = watch::channel(None);
    let (rolled_tx, rolled_rx) = mpsc::unbounded_channel();
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
        rolled_tx,
        rolled: rolled_rx,
        shown: ReleaseMap::new(),
        seen_live: LiveMap::new(),
        listed: false,
        blocked: HashSet::new(),
        poke_due: false,
        last_poke: None,
        finished: HashMap::new(),
        start_after: config.start_after.clone(),
    };
    let (lease_done, stopped) = run_then_hand_back(dispatcher, lease_task, lease_stop.clone());
    Ok(EngineHandle {
        lease_stop,
        lease_done,
        ctx,
        client,
        views: views_rx,
        live: live_rx,
        role,
        connection: connection_rx,
        direct: direct_tx,
        stop,
        coverage,
        idle: idle_rx,
        stopped,
        tracker: tracker_rx,
    })
}

/// The Lease election, entered only once this process can work: its renderer answers and
/// it can enforce the cluster's tenancy policy (else it never competes). A passive engine
/// (the read-only dashboard) never takes part.
fn elect(
    client: &Client,
    config: &EngineConfig,
    policy: Arc<watch::Sender<Policy>>,
    idle: watch::Receiver<bool>,
    lease_stop: CancellationToken,
) -> (watch::Receiver<Role>, JoinHandle<()>) {
    if config.passive {
        let (_tx, rx) = watch::channel(Role::Follower {
            holder: "none (read-only)".into(),
        });
        return (rx, tokio::spawn(async {}));
    }
    let renderer = config.renderer.clone();
    let (policy_client, flags, scope) = (
        client.clone(),
        config.tenancy.clone(),
        config.coverage.scope.clone(),
    );
    let start_after = config.start_after.clone();
    let able = Box::pin(async move {
        if let Some(mut opened) = start_after {
            let _ = opened.wait_for(|open| *open).await;
        }
        match renderer.check().await {
            Ok(version) => tracing::info!(%version, "renderer ready"),
            Err(e) => return Err(error::Unable::Render(e)),
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
        idle,
        lease_stop,
    )
}

/// What every worker of this engine shares: the client whose requests give way to a fix's,
/// the chart source behind the egress proxy, the throttled renderer, the Event recorder,
/// the notifier and the engine's settings.
fn context(
    client: &Client,
    config: &EngineConfig,
    policy_rx: watch::Receiver<Policy>,
    live_tx: watch::Sender<LiveMap>,
    stop: &CancellationToken,
) -> crate::engine::Result<Context> {
    // The engine's own requests (its reconciles', their Events) give way to a fix's; the
    // Lease and the engine's setup go as they come.
    let precedence = crate::cluster::slots::Precedence::default();
    let engine_client = crate::cluster::slots::giving_way(client, precedence.clone());
    let recorder = Recorder::new(
        engine_client.clone(),
        Reporter {
            controller: "wheelhouse".into(),
            instance: Some(config.identity.clone()),
        },
    );
    let renderer: Arc<dyn Renderer> = Arc::new(
        crate::helm::render::Throttled::new(
            config.renderer.clone(),
            config.concurrent,
            config.metrics.queue_depth.clone(),
        )
        .giving_way_to(precedence.clone()),
    );
    // Releases' sources connect through the proxy that enforces the cluster's outbound
    // policy (src/cluster/egress.rs) whenever the policy applies to them.
    let (rules_tx, rules_rx) = watch::channel(Arc::new(crate::cluster::egress::Rules::default()));
    let egress = crate::cluster::egress::Egress::start(rules_rx)?;
    tokio::spawn(policy::keep_egress_rules(
        client.clone(),
        policy_rx.clone(),
        rules_tx,
        stop.clone(),
    ));
    let mut ctx = Context::new(
        engine_client,
        ChartSource::new(config.chart_cache.clone())?
            .with_chart_root(config.chart_root.clone())
            .with_egress(egress),
        renderer,
        recorder,
        &config.identity,
        live_tx,
    );
    ctx.settings.cancel_on_new_revision = config.cancel_on_new_revision;
    ctx.settings.chart_poll = config.chart_poll;
    ctx.settings.kubeconfig_allowances = config.kubeconfig_allowances;
    ctx.policy = policy_rx;
    let (lease_ns, lease_name) = config.coverage.lease(&config.lease_namespace);
    ctx.engine = crate::api::EngineRef {
        identity: config.identity.clone(),
        lease: format!("{lease_ns}/{lease_name}"),
    };
    ctx.signals.stopping = stop.clone();
    ctx.metrics = config.metrics.clone();
    ctx.work.loads = crate::cluster::slots::Slots::new(config.concurrent.max(1));
    ctx.work.precedence = precedence;
    // Every engine of the cluster shares the Lease's namespace, and so one key.
    ctx.hash_keys = crate::tracking::HashKeys::new(client.clone(), &lease_ns);
    if !config.passive {
        // The setting lives beside the engine's Lease (docs/user-guide/notifications.md, "The setting").
        ctx.notifier = crate::webhooks::notify::start(
            client.clone(),
            &lease_ns,
            &config.identity,
            config.metrics.clone(),
            stop.clone(),
        )?;
    }
    Ok(ctx)
}

/// Runs the dispatcher; once it stops, waits (bounded) for the workers' current step,
/// then lets the Lease go. Returns the Lease task's end (seen by `abandon`, which lets the
/// Lease go without waiting for the workers) and the whole stop's end.
fn run_then_hand_back(
    dispatcher: Dispatcher,
    lease_task: JoinHandle<()>,
    lease_stop: CancellationToken,
) -> (watch::Receiver<bool>, watch::Receiver<bool>) {
    let (lease_done_tx, lease_done_rx) = watch::channel(false);
    let lease_task = tokio::spawn(async move {
        let _ = lease_task.await;
        lease_done_tx.send_replace(true);
    });
    let (stopped_tx, stopped_rx) = watch::channel(false);
    tokio::spawn(async move {
        let workers = dispatcher.workers.clone();
        let idle = dispatcher.idle.clone();
        let ctx = dispatcher.ctx.clone();
        dispatcher.run().await;
        tracing::info!("engine's dispatcher stopped");
        // Where a slow stop spends its time, for whoever waits on it (the dashboard's quit).
        let stopping = std::time::Instant::now();
        workers.close();
        let busy = workers.len();
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
        let workers_done = stopping.elapsed();
        lease_stop.cancel();
        let _ = lease_task.await;
        // Nothing renders for this engine any more: its remote kubeconfigs go now, not
        // when the last reference to its context does (an exit may come first).
        ctx.identities.remove_files();
        tracing::info!(
            workers = busy,
            workers_done_ms = workers_done.as_millis() as u64,
            lease_released_ms = stopping.elapsed().as_millis() as u64,
            "engine stopped"
        );
        // The Lease is handed back (or its release gave up): the process may exit now
        // without cutting that call short.
        stopped_tx.send_replace(true);
    });
    (lease_done_rx, stopped_rx)
}

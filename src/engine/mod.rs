//! The reconcile engine: a library with a small surface. [`start`] takes a kube
//! `Client` and a config and returns an [`EngineHandle`] that streams per-release views
//! and accepts commands. The dashboard and `wheelhouse controller` are two front ends
//! over it; neither re-implements reconcile logic.
//!
//! Inside: one watch on HelmReleases feeds the views and, while this process holds the
//! engine lease, one worker per release (`worker`), which asks the pure planner (`plan`)
//! for the next action and runs it (`actions`); what both of those share is in `run`.

mod actions;
mod change_log;
mod claim;
mod coverage;
mod dispatcher;
mod error;
mod freeze;
mod freeze_expiry;
mod handle;
mod healing;
pub mod lease;
mod liveness;
mod mailbox;
mod namespaces;
mod object_changes;
mod options;
mod plan;
mod policy;
mod preview;
mod release_drift;
mod run;
mod status;
pub mod stored_actions;
mod undecodable;
mod vocabulary;
mod warmup;
mod worker;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::cluster::events::{Recorder, Reporter};
use kube::Client;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use coverage::{Coverage, SHARD_LABEL, validate_shard};
pub use error::{Error, Result, Unable};
pub use freeze::{
    FREEZE_MANAGER, FROZEN_LABEL, FreezeDone, FreezeKind, FreezeOutcome, FreezeRecord,
    FreezeReport, FreezeRequest, FreezeSelection, freeze_releases, thaw_releases,
};
pub use handle::{EngineHandle, Pusher};
pub use lease::Role;
pub use options::EngineConfig;
pub use vocabulary::{
    Command, Connection, FixTimeline, LiveMap, LiveState, Phase, ReleaseKey, ReleaseMap,
    ReleaseView, Views, WaitView, changed_keys, new_token,
};

use crate::helm::render::Renderer;
use crate::helm::source::ChartSource;
use crate::tracking;
use dispatcher::Dispatcher;
use namespaces::HeldNamespaces;
use run::Context;

/// Starts the engine: the lease, the HelmRelease watch and, while leader, the workers.
pub fn start(client: Client, config: EngineConfig) -> crate::engine::Result<EngineHandle> {
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
            idle_rx,
            lease_stop.clone(),
        )
    };
    let (live_tx, live_rx) = watch::channel(LiveMap::new());
    let (views_tx, views_rx) = watch::channel(Arc::new(Views::default()));
    let (connection_tx, connection_rx) = watch::channel(Connection::Connected);
    let (direct_tx, direct_rx) = mpsc::unbounded_channel();
    // The engine's own requests (its reconciles', their Events) give way to a fix's; the
    // Lease and the engine's setup go as they come.
    let precedence = crate::cluster::slots::Precedence::default();
    let engine_client = crate::cluster::slots::giving_way(&client, precedence.clone());
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
    ctx.policy = policy_rx;
    let (lease_ns, lease_name) = config.coverage.lease(&config.lease_namespace);
    ctx.engine = crate::api::EngineRef {
        identity: config.identity.clone(),
        lease: format!("{lease_ns}/{lease_name}"),
    };
    ctx.settings.chart_poll = config.chart_poll;
    ctx.signals.stopping = stop.clone();
    ctx.settings.kubeconfig_allowances = config.kubeconfig_allowances;
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
    tokio::spawn(policy::keep_current(
        client.clone(),
        config.tenancy.clone(),
        policy_tx.clone(),
        stop.clone(),
    ));
    let ctx = Arc::new(ctx);
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

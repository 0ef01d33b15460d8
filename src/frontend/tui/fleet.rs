//! The fleet's clusters on their own tasks: each connects with its own context's
//! credentials, runs its own session (watches of every kind, a passive engine unless
//! `--engine` names it) and a probe, and reports through one channel to the run loop. No
//! cluster's IO is ever awaited by another's or by the loop: a cluster that stops
//! answering only stops its own reports (and its probe says so within 3 s).

use std::time::{Duration, Instant};

use kube::Client;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fleet_model::{FleetUpdate, Link};
use super::session::{Options, Session};
use super::view_model::Cluster;
use crate::cluster::client::Scope;
use crate::cluster::fleet::{self, Failure};
use crate::engine::EngineHandle;

/// How often a cluster is asked whether it answers, how long it may take before it is
/// unreachable, and past what it is degraded: a cluster that stops answering is marked
/// within PROBE_EVERY + PROBE_WITHIN (3 s; the dashboard promises 5).
const PROBE_EVERY: Duration = Duration::from_secs(1);
const PROBE_WITHIN: Duration = Duration::from_secs(2);
const SLOW: Duration = Duration::from_secs(1);

/// How long a cluster that could not be connected waits before it is tried again.
const RETRY: Duration = Duration::from_secs(5);

/// What a cluster's writes and reads go through: its own client and engine handle.
#[derive(Clone)]
pub struct MemberIo {
    pub client: Client,
    pub handle: EngineHandle,
    /// Whether this dashboard runs its engine (it then hands its Lease back on quit).
    pub engine: bool,
}

/// What the fleet's tasks tell the run loop.
pub enum FleetMessage {
    /// A cluster connected: its IO.
    Up(Cluster, Box<MemberIo>),
    Update(Cluster, FleetUpdate),
}

/// Asks `client`'s server whether it answers, every second, and reports each change of
/// how it answers as `cluster`'s link.
pub fn probe(
    client: Client,
    cluster: Cluster,
    tx: mpsc::UnboundedSender<FleetMessage>,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut every = tokio::time::interval(PROBE_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last: Option<std::mem::Discriminant<Link>> = None;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            let asked = Instant::now();
            let now = k8s_openapi::jiff::Timestamp::now();
            let link = match tokio::time::timeout(PROBE_WITHIN, client.apiserver_version()).await {
                Ok(Ok(_)) if asked.elapsed() > SLOW => Link::Degraded {
                    since: now,
                    error: format!("answers in {:.1}s", asked.elapsed().as_secs_f64()),
                },
                Ok(Ok(_)) => Link::Connected,
                Ok(Err(e)) => link_of(&Failure::of(&e), now),
                Err(_) => Link::Unreachable {
                    since: now,
                    error: format!("no answer within {}s", PROBE_WITHIN.as_secs()),
                },
            };
            let kind = std::mem::discriminant(&link);
            if last != Some(kind) {
                last = Some(kind);
                if tx
                    .send(FleetMessage::Update(
                        cluster.clone(),
                        FleetUpdate::Link(link),
                    ))
                    .is_err()
                {
                    return;
                }
            }
        }
    });
}

/// How often a cluster's engine Lease is read (for the tile's "reconciled by").
const LEASE_EVERY: Duration = Duration::from_secs(5);

/// Reads the cluster-wide engine Lease of a cluster this dashboard runs no engine for,
/// every few seconds, and reports its live holder when that changes: who reconciles that
/// cluster's wheelhouse releases (sharded and namespace engines' Leases are not read).
fn lease_holder(
    client: Client,
    namespace: String,
    cluster: Cluster,
    tx: mpsc::UnboundedSender<FleetMessage>,
    stop: CancellationToken,
) {
    use k8s_openapi::api::coordination::v1::Lease;
    tokio::spawn(async move {
        let api: kube::Api<Lease> = kube::Api::namespaced(client, &namespace);
        let mut every = tokio::time::interval(LEASE_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last: Option<Option<String>> = None;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            let read =
                tokio::time::timeout(PROBE_WITHIN, api.get_opt(crate::engine::lease::LEASE_NAME))
                    .await;
            // No answer: the probe says so; the holder stays as last read.
            let Ok(Ok(lease)) = read else { continue };
            let now = k8s_openapi::jiff::Timestamp::now();
            let holder = lease.and_then(|l| l.spec).and_then(|spec| {
                let renewed = spec.renew_time.as_ref().map(|t| t.0)?;
                let lasts = i64::from(spec.lease_duration_seconds.unwrap_or(15));
                let live = now.duration_since(renewed).as_secs() <= lasts;
                spec.holder_identity.filter(|h| live && !h.is_empty())
            });
            if last.as_ref() != Some(&holder) {
                last = Some(holder.clone());
                let update = FleetUpdate::LeaseHolder(holder);
                if tx
                    .send(FleetMessage::Update(cluster.clone(), update))
                    .is_err()
                {
                    return;
                }
            }
        }
    });
}

fn link_of(failure: &Failure, since: k8s_openapi::jiff::Timestamp) -> Link {
    let error = failure.message().to_owned();
    match failure {
        Failure::Credentials(_) => Link::Credentials { since, error },
        Failure::Unreachable(_) => Link::Unreachable { since, error },
    }
}

/// Starts `cluster`'s tasks: connect (again every few seconds until it answers), then its
/// session and probe, forwarding what its watches see until `stop`.
pub fn start_member(
    opts: &Options,
    cluster: Cluster,
    engine: bool,
    view_all: bool,
    tx: mpsc::UnboundedSender<FleetMessage>,
    stop: CancellationToken,
) {
    let mut opts = opts.clone();
    // Receivers are the dashboard's own cluster's; a member's engine runs only if named.
    opts.receiver_addr = None;
    opts.engine = engine;
    tokio::spawn(async move {
        let send = |update: FleetUpdate| {
            tx.send(FleetMessage::Update(cluster.clone(), update))
                .is_ok()
        };
        let (client, default_ns) = loop {
            match fleet::connect_context(&opts.cluster, &cluster).await {
                Ok(connected) => break connected,
                Err(failure) => {
                    let link = link_of(&failure, k8s_openapi::jiff::Timestamp::now());
                    tracing::debug!(%cluster, error = failure.message(), "fleet: not connected");
                    if !send(FleetUpdate::Link(link)) {
                        return;
                    }
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(RETRY) => {}
            }
        };
        let mut target = opts.cluster.clone();
        target.context = Some(cluster.to_string());
        let view = if view_all {
            Scope::All
        } else {
            Scope::of(&target, default_ns.clone())
        };
        let coverage = super::session::engine_coverage(&opts, &client, &view, &default_ns).await;
        let scope = match (&coverage, view) {
            (Scope::Namespace(ns), Scope::All) => Scope::Namespace(ns.clone()),
            (_, view) => view,
        };
        let session = match Session::start(
            &opts,
            &target,
            client.clone(),
            cluster.to_string(),
            scope,
            coverage,
        )
        .await
        {
            Ok(s) => s,
            Err(e) => {
                send(FleetUpdate::Link(Link::Unreachable {
                    since: k8s_openapi::jiff::Timestamp::now(),
                    error: e.to_string(),
                }));
                return;
            }
        };
        let io = MemberIo {
            client: client.clone(),
            handle: session.handle.clone(),
            engine,
        };
        if tx
            .send(FleetMessage::Up(cluster.clone(), Box::new(io)))
            .is_err()
        {
            return;
        }
        if !engine {
            let namespace = opts
                .lease_namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            lease_holder(
                client.clone(),
                namespace,
                cluster.clone(),
                tx.clone(),
                stop.clone(),
            );
        }
        probe(client, cluster.clone(), tx.clone(), stop.clone());
        forward(&session, &send, &stop).await;
        session.handle.shutdown();
    });
}

/// Hands every change of a session's watches on until `stop` (or the loop is gone).
async fn forward(session: &Session, send: &impl Fn(FleetUpdate) -> bool, stop: &CancellationToken) {
    let mut views = session.handle.views();
    let mut others = session.inventory.subscribe();
    let mut replicas = session.replicas.subscribe();
    let mut role = session.handle.role();
    let first = [
        FleetUpdate::Replicas(replicas.borrow_and_update().clone()),
        FleetUpdate::Others(others.borrow_and_update().clone()),
        FleetUpdate::Views(views.borrow_and_update().clone()),
        FleetUpdate::Role(role.borrow_and_update().clone()),
    ];
    for update in first {
        if !send(update) {
            return;
        }
    }
    loop {
        let update = tokio::select! {
            () = stop.cancelled() => return,
            Ok(()) = views.changed() => FleetUpdate::Views(views.borrow_and_update().clone()),
            Ok(()) = others.changed() => FleetUpdate::Others(others.borrow_and_update().clone()),
            Ok(()) = replicas.changed() => FleetUpdate::Replicas(replicas.borrow_and_update().clone()),
            Ok(()) = role.changed() => FleetUpdate::Role(role.borrow_and_update().clone()),
            else => return,
        };
        if !send(update) {
            return;
        }
    }
}

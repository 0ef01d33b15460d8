//! One engine at a time: a `coordination.k8s.io/v1` Lease decides which wheelhouse (a
//! dashboard or a controller) reconciles. The others observe and send their commands
//! through the spec and annotations, so several operators opening the dashboard during
//! one incident never run two engines against the same releases.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub const LEASE_NAME: &str = "wheelhouse-engine";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not decided yet (first attempt in flight).
    Unknown,
    /// This process holds the lease and runs the engine.
    Leader,
    /// Another process holds it; this one works as a client.
    Follower { holder: String },
    /// This process cannot run the engine (e.g. it cannot render charts) and does not
    /// compete for the lease; it works as a client. The reason says how to fix it.
    Unable { reason: String },
}

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub namespace: String,
    pub identity: String,
    /// How long a lease lasts without renewal before another may take it.
    pub duration: Duration,
    /// How often the holder renews and a follower retries.
    pub retry: Duration,
}

impl LeaseConfig {
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            identity: identity.into(),
            duration: Duration::from_secs(15),
            retry: Duration::from_secs(3),
        }
    }
}

/// A unique identity for this process: host, pid and a random suffix.
pub fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{host}/{}/{nanos:08x}", std::process::id())
}

/// One attempt to take or renew the lease. Optimistic concurrency (resourceVersion)
/// makes two simultaneous attempts end with one winner.
pub async fn try_acquire(api: &Api<Lease>, config: &LeaseConfig) -> kube::Result<Role> {
    let now = Timestamp::now();
    let ours = |transitions: i32, acquired: Option<MicroTime>| LeaseSpec {
        holder_identity: Some(config.identity.clone()),
        lease_duration_seconds: Some(config.duration.as_secs() as i32),
        acquire_time: acquired.or(Some(MicroTime(now))),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..LeaseSpec::default()
    };
    let Some(mut lease) = api.get_opt(LEASE_NAME).await? else {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(LEASE_NAME.into()),
                namespace: Some(config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(ours(0, None)),
        };
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(Role::Leader),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(Role::Unknown),
            Err(e) => Err(e),
        };
    };
    let spec = lease.spec.clone().unwrap_or_default();
    let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
    let expired = spec.renew_time.as_ref().is_none_or(|t| {
        let duration =
            SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(15)));
        t.0 + duration < now
    });
    let transitions = spec.lease_transitions.unwrap_or(0);
    let new_spec = match &holder {
        Some(h) if *h == config.identity => ours(transitions, spec.acquire_time),
        Some(h) if !expired => return Ok(Role::Follower { holder: h.clone() }),
        _ => ours(transitions + 1, None),
    };
    lease.spec = Some(new_spec);
    match api
        .replace(LEASE_NAME, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(Role::Leader),
        // Someone else wrote it between our read and write; look again next round.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(Role::Unknown),
        Err(e) => Err(e),
    }
}

/// Gives the lease up (on shutdown) so another engine can take over at once.
pub async fn release(api: &Api<Lease>, config: &LeaseConfig) -> kube::Result<()> {
    let Some(mut lease) = api.get_opt(LEASE_NAME).await? else {
        return Ok(());
    };
    let Some(spec) = lease.spec.as_mut() else {
        return Ok(());
    };
    if spec.holder_identity.as_deref() != Some(config.identity.as_str()) {
        return Ok(());
    }
    spec.holder_identity = None;
    spec.renew_time = None;
    match api
        .replace(LEASE_NAME, &PostParams::default(), &lease)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Keeps trying to hold the lease until `stop` is cancelled, publishing the role. A
/// leader that cannot renew before its lease would expire steps down. The task gives the
/// lease up when stopped; await its handle to be sure that happened.
///
/// `able` runs first: an engine that could not do its work (it cannot render charts)
/// never takes the lease from one that can, and says why once.
pub fn run(
    client: Client,
    config: LeaseConfig,
    able: futures::future::BoxFuture<'static, Result<(), String>>,
    stop: CancellationToken,
) -> (watch::Receiver<Role>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(Role::Unknown);
    let task = tokio::spawn(async move {
        if let Err(reason) = able.await {
            tracing::error!("{reason}");
            tx.send_replace(Role::Unable { reason });
            stop.cancelled().await;
            tx.send_replace(Role::Unknown);
            return;
        }
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        let mut last_renewal = tokio::time::Instant::now();
        loop {
            match try_acquire(&api, &config).await {
                Ok(Role::Unknown) => {}
                Ok(role) => {
                    if role == Role::Leader {
                        last_renewal = tokio::time::Instant::now();
                    }
                    tx.send_if_modified(|r| std::mem::replace(r, role.clone()) != role);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read or renew the engine lease");
                    if *tx.borrow() == Role::Leader && last_renewal.elapsed() >= config.duration {
                        tracing::warn!("lease not renewed in time; stepping down");
                        tx.send_replace(Role::Unknown);
                    }
                }
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(config.retry) => {}
            }
        }
        if *tx.borrow() == Role::Leader
            && let Err(e) = release(&api, &config).await
        {
            tracing::warn!(error = %e, "could not release the engine lease");
        }
        tx.send_replace(Role::Unknown);
    });
    (rx, task)
}

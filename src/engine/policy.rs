//! The tenancy policy an engine enforces ([`crate::cluster::tenancy`]): read before the engine may
//! take a lease, and kept current while it runs.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::cluster::client::Scope;
use crate::cluster::tenancy::{self, Policy};

/// How often the published policy is read again while the engine runs.
const REFRESH_EVERY: Duration = Duration::from_secs(10);

/// The policy this engine must enforce, or why it cannot run: the published policy cannot
/// be read, it conflicts with the engine's flags, or it locks releases down to their
/// namespace's ServiceAccount and this identity may not impersonate them in `scope`.
pub(super) async fn in_force(
    client: &Client,
    flags: &Policy,
    scope: &Scope,
) -> Result<Policy, super::error::Unable> {
    let published = tenancy::read_published(client).await?;
    let policy = Policy::combine(published.as_ref(), flags)?;
    if policy.locked_down() {
        let (namespace, scope) = match scope {
            Scope::All => (None, "in every namespace".to_owned()),
            Scope::Namespace(ns) => (Some(ns.as_str()), format!("in namespace {ns}")),
        };
        if !tenancy::can_impersonate(client, namespace).await {
            return Err(super::error::Unable::CannotImpersonate {
                policy: policy.describe(),
                scope,
            });
        }
    }
    Ok(policy)
}

/// Reads the published policy now and every [`REFRESH_EVERY`], and publishes the policy in
/// force (a cluster locked down while the engine runs is enforced from the next
/// reconcile). A read that fails keeps the last policy.
pub(super) async fn keep_current(
    client: Client,
    flags: Policy,
    policy: Arc<watch::Sender<Policy>>,
    stop: CancellationToken,
) {
    // The first read is at once: a read-only dashboard (which takes no lease) shows whom
    // releases act as from it.
    let mut every = tokio::time::interval(REFRESH_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        let read = tenancy::read_published(&client)
            .await
            .map_err(|e| e.to_string())
            .and_then(|p| Policy::combine(p.as_ref(), &flags).map_err(|e| e.to_string()));
        match read {
            Ok(now) => {
                failing = false;
                policy.send_if_modified(|p| {
                    let changed = *p != now;
                    if changed {
                        tracing::warn!(from = %p.describe(), to = %now.describe(), "the cluster's tenancy policy changed");
                        *p = now;
                    }
                    changed
                });
            }
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(error = %e, "cannot read the cluster's tenancy policy; keeping the last one");
            }
            Err(_) => {}
        }
    }
}

/// How often the cluster's own ranges (ServiceCIDRs, nodes' Pod CIDRs) are read again
/// while a lockdown polices releases' sources.
const CLUSTER_RANGES_EVERY: Duration = Duration::from_secs(300);

/// Keeps the outbound rules of releases' sources (src/cluster/egress.rs) current: the
/// policy's networks as soon as it changes, and under a lockdown the cluster's own
/// Service and Pod ranges, read with the engine's identity (an identity that may not
/// list them gets only loopback, link-local and the policy's own lists, and says so once).
pub(super) async fn keep_egress_rules(
    client: Client,
    mut policy: watch::Receiver<Policy>,
    rules: watch::Sender<Arc<crate::cluster::egress::Rules>>,
    stop: CancellationToken,
) {
    let mut cluster: Vec<ipnet::IpNet> = Vec::new();
    let mut read_at: Option<tokio::time::Instant> = None;
    let mut said = false;
    loop {
        let now = policy.borrow_and_update().clone();
        let due = read_at.is_none_or(|at| at.elapsed() >= CLUSTER_RANGES_EVERY);
        if now.locked_down() && due {
            match cluster_ranges(&client).await {
                Ok(found) => {
                    if found != cluster {
                        tracing::info!(ranges = ?found.iter().map(ToString::to_string).collect::<Vec<_>>(), "the cluster's own ranges, refused to tenants' sources");
                    }
                    cluster = found;
                }
                Err(e) if !said => {
                    said = true;
                    tracing::warn!(error = %e, "cannot read the cluster's Service and Pod ranges; tenants' sources are refused loopback, link-local and the policy's deniedNetworks only (list the ranges there)");
                }
                Err(_) => {}
            }
            read_at = Some(tokio::time::Instant::now());
        }
        rules.send_if_modified(|r| {
            let next = now.egress_rules(cluster.clone());
            let changed = **r != next;
            if changed {
                *r = Arc::new(next);
            }
            changed
        });
        tokio::select! {
            () = stop.cancelled() => return,
            changed = policy.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(CLUSTER_RANGES_EVERY) => {}
        }
    }
}

/// The Service ranges (ServiceCIDR objects) and the nodes' Pod ranges.
async fn cluster_ranges(client: &Client) -> Result<Vec<ipnet::IpNet>, kube::Error> {
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::api::networking::v1::ServiceCIDR;
    use kube::api::{Api, ListParams};
    let mut out: Vec<ipnet::IpNet> = Vec::new();
    let mut add = |cidr: &str| {
        if let Ok(net) = cidr.parse::<ipnet::IpNet>()
            && !out.contains(&net.trunc())
        {
            out.push(net.trunc());
        }
    };
    let services = Api::<ServiceCIDR>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    for s in services.items {
        for cidr in s.spec.iter().flat_map(|spec| spec.cidrs.iter().flatten()) {
            add(cidr);
        }
    }
    let mut params = ListParams::default().limit(500);
    loop {
        let nodes = Api::<Node>::all(client.clone()).list(&params).await?;
        for node in &nodes.items {
            let spec = node.spec.as_ref();
            for cidr in spec
                .and_then(|s| s.pod_cidrs.as_ref())
                .into_iter()
                .flatten()
                .chain(spec.and_then(|s| s.pod_cidr.as_ref()))
            {
                add(cidr);
            }
        }
        match nodes.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(next) => params = params.continue_token(&next),
            None => break,
        }
    }
    Ok(out)
}

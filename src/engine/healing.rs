//! Healing: while a worker is held up by the cluster (discovery, a refused permission,
//! a missing ServiceAccount), the engine looks at what held it up and wakes it when that
//! heals, instead of at the release's interval.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::liveness::PROBE_EVERY;
use super::run::Context;

/// How often what held a release up (discovery, a refused permission) is looked at
/// while one is held up.
const HEALING_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// While a worker is held up by the cluster, looks every HEALING_EVERY at what held it up
/// (discovery, refused permissions) and wakes those workers when it heals.
pub(super) async fn watch_healing(ctx: Arc<Context>, stop: CancellationToken) {
    let mut discovery = DiscoveryLooks::default();
    let mut every = tokio::time::interval(HEALING_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        if ctx.signals.healed.receiver_count() == 0 {
            continue;
        }
        if discovery.healed(&ctx).await {
            tracing::info!("discovery healed: releases held up by it try again");
            ctx.signals
                .healed
                .send_replace(crate::telemetry::RetryCause::ClusterHealed);
        }
        if access_granted(&ctx).await {
            tracing::info!("a refused permission was granted: releases held up by it try again");
            ctx.signals
                .healed
                .send_replace(crate::telemetry::RetryCause::AccessGranted);
        }
        if account_created(&ctx).await {
            tracing::info!("a missing ServiceAccount was created: releases acting as it try again");
            ctx.signals
                .healed
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
        let Ok(Ok((now_stale, served))) = tokio::time::timeout(
            PROBE_EVERY,
            crate::helm::render::discovery_state(&ctx.client),
        )
        .await
        else {
            return false;
        };
        // Groups a reconcile saw stale count as stale before this look: a release held
        // up at render may see its group heal before the watcher first looked.
        self.stale.append(
            &mut ctx
                .known
                .stale_seen
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
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
    let refused: Vec<(
        crate::cluster::tenancy::Identity,
        crate::cluster::rbac::Access,
    )> = ctx
        .known
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
            let mut refused = ctx.known.refused.lock().unwrap_or_else(|e| e.into_inner());
            refused.remove(&(identity, access));
        }
    }
    granted
}

/// Whether a ServiceAccount a release acts as, missing when last looked for, exists now.
async fn account_created(ctx: &Context) -> bool {
    let missing: Vec<(String, String)> = ctx
        .known
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
            crate::cluster::tenancy::service_account_exists(&ctx.client, &namespace, &name),
        )
        .await;
        if let Ok(Ok(true)) = exists {
            created = true;
            let mut missing = ctx
                .known
                .missing_accounts
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            missing.remove(&(namespace, name));
        }
    }
    created
}

//! Actions on Flux HelmReleases, in Flux's own API as the `flux` CLI does them: a merge
//! patch of `spec.suspend` or of the `reconcile.fluxcd.io` request annotations, and
//! nothing else. helm-controller does the work; wheelhouse only asks.

use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use crate::api::FIELD_MANAGER;
use crate::api::flux::{FluxHelmRelease, annotations};
use crate::engine::ReleaseKey;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    Suspend,
    /// `spec.suspend: false` and a reconcile request, as `flux resume`.
    Resume,
    /// `reconcile.fluxcd.io/requestedAt`. With helm-controller's
    /// CancelHealthCheckOnNewRevision gate it also cancels a running health check.
    Reconcile,
    /// A one-off upgrade: `forceAt` with the same token as `requestedAt` (Flux handles
    /// it only when both match).
    Force,
    /// Reset the failure counters: `resetAt` with the same token as `requestedAt`.
    Reset,
}

impl Request {
    pub fn verb(self) -> &'static str {
        match self {
            Self::Suspend => "suspend",
            Self::Resume => "resume",
            Self::Reconcile => "reconcile",
            Self::Force => "force an upgrade of",
            Self::Reset => "reset the failure counters of",
        }
    }

    /// The merge patch for this request, with `token` as the annotation value.
    pub fn patch(self, token: &str) -> serde_json::Value {
        let requested = |extra: Option<&str>| {
            let mut a = serde_json::Map::new();
            a.insert(annotations::RECONCILE_REQUESTED_AT.into(), token.into());
            if let Some(extra) = extra {
                a.insert(extra.into(), token.into());
            }
            serde_json::json!({"metadata": {"annotations": a}})
        };
        match self {
            Self::Suspend => serde_json::json!({"spec": {"suspend": true}}),
            Self::Resume => {
                let mut p = requested(None);
                p["spec"] = serde_json::json!({"suspend": false});
                p
            }
            Self::Reconcile => requested(None),
            Self::Force => requested(Some(annotations::FORCE_AT)),
            Self::Reset => requested(Some(annotations::RESET_AT)),
        }
    }

    /// Whether `hr` shows the request written with `token`.
    pub fn landed(self, token: &str, hr: &FluxHelmRelease) -> bool {
        let annotation = |name: &str| {
            hr.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(name))
                .is_some_and(|v| v == token)
        };
        match self {
            Self::Suspend => hr.spec.suspend,
            Self::Resume => !hr.spec.suspend && annotation(annotations::RECONCILE_REQUESTED_AT),
            Self::Reconcile => annotation(annotations::RECONCILE_REQUESTED_AT),
            Self::Force => annotation(annotations::FORCE_AT),
            Self::Reset => annotation(annotations::RESET_AT),
        }
    }
}

/// Writes `request` on the Flux HelmRelease `key` (a merge patch: nothing else changes).
pub async fn send(
    client: Client,
    key: &ReleaseKey,
    request: Request,
    token: &str,
) -> Result<FluxHelmRelease, kube::Error> {
    let api: Api<FluxHelmRelease> = Api::namespaced(client, &key.namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch(&key.name, &params, &Patch::Merge(request.patch(token)))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn force_and_reset_carry_the_reconcile_request_too() {
        let p = Request::Force.patch("t1");
        assert_eq!(
            p["metadata"]["annotations"][annotations::RECONCILE_REQUESTED_AT],
            "t1"
        );
        assert_eq!(p["metadata"]["annotations"][annotations::FORCE_AT], "t1");
        let p = Request::Reset.patch("t2");
        assert_eq!(p["metadata"]["annotations"][annotations::RESET_AT], "t2");
        let p = Request::Resume.patch("t3");
        assert_eq!(p["spec"]["suspend"], false);
        assert_eq!(
            p["metadata"]["annotations"][annotations::RECONCILE_REQUESTED_AT],
            "t3"
        );
        assert_eq!(
            Request::Suspend.patch("x"),
            serde_json::json!({"spec": {"suspend": true}})
        );
    }
}

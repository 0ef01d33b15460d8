//! Flux's `helm.toolkit.fluxcd.io/v2` HelmRelease and `source.toolkit.fluxcd.io/v1`
//! HelmRepository, as far as wheelhouse reads them: to list Flux releases beside its own,
//! to act on them through Flux's own API (`spec.suspend` and the `reconcile.fluxcd.io`
//! annotations), and to migrate them. wheelhouse never owns these kinds: it writes them
//! only with merge patches of the fields an action names, and never applies their CRDs.
//!
//! Every field is optional and unknown fields are ignored, so any Flux v2 minor reads;
//! the whole object (as JSON) is what `migrate` starts from, so nothing here needs to
//! list every field.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use serde::{Deserialize, Serialize};

pub const GROUP: &str = "helm.toolkit.fluxcd.io";
pub const VERSION: &str = "v2";
pub const SOURCE_GROUP: &str = "source.toolkit.fluxcd.io";

/// Flux's request annotations (fluxcd/pkg/apis/meta and helm-controller's api/v2): each
/// new value is handled once and echoed in `status.lastHandled*`.
pub mod annotations {
    pub const RECONCILE_REQUESTED_AT: &str = "reconcile.fluxcd.io/requestedAt";
    pub const FORCE_AT: &str = "reconcile.fluxcd.io/forceAt";
    pub const RESET_AT: &str = "reconcile.fluxcd.io/resetAt";
}

/// Flux's default action timeout (helm-controller's `GetTimeout`).
pub const DEFAULT_TIMEOUT: &str = "5m";

/// A Flux HelmRelease's spec, the fields wheelhouse reads.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "helm.toolkit.fluxcd.io",
    version = "v2",
    kind = "HelmRelease",
    root = "FluxHelmRelease",
    derive = "PartialEq",
    namespaced,
    status = "FluxStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct FluxSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<FluxChart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart_ref: Option<SourceRef>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_namespace: Option<String>,
    /// Set: the release is on a remote cluster (kept as written: a Secret or, Flux's
    /// cloud identities, a ConfigMap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<serde_json::Value>,
    #[serde(default)]
    pub suspend: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<serde_json::Value>,
    /// As written: read only to tell which values came from Secrets (masked by origin),
    /// so an entry this version cannot read never fails the object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_from: Vec<serde_json::Value>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct FluxChart {
    #[serde(default)]
    pub spec: FluxChartSpec,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FluxChartSpec {
    #[serde(default)]
    pub chart: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default)]
    pub source_ref: SourceRef,
}

/// `sourceRef` / `chartRef`: a source object, in the HelmRelease's namespace unless named.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SourceRef {
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FluxStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default)]
    pub history: Vec<FluxSnapshot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_force_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reset_at: Option<String>,
    #[serde(default)]
    pub failures: i64,
}

/// One entry of `status.history`, newest first.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct FluxSnapshot {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub version: i32,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub chart_name: String,
    #[serde(default)]
    pub chart_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_deployed: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

impl FluxHelmRelease {
    /// The namespace the chart's objects go to (`GetReleaseNamespace`).
    pub fn target_namespace(&self) -> String {
        self.spec
            .target_namespace
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| self.metadata.namespace.clone().unwrap_or_default())
    }

    /// The namespace of the Helm storage records (`GetStorageNamespace`; status first,
    /// where the controller records where it actually stored them).
    pub fn storage_namespace(&self) -> String {
        self.status
            .as_ref()
            .and_then(|s| s.storage_namespace.clone())
            .or_else(|| self.spec.storage_namespace.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| self.metadata.namespace.clone().unwrap_or_default())
    }

    /// The Helm release name: the one the controller recorded in its history (it
    /// shortens names over 53 characters), else `GetReleaseName`'s rule.
    pub fn release_name(&self) -> String {
        if let Some(s) = self.status.as_ref().and_then(|s| s.history.first())
            && !s.name.is_empty()
        {
            return s.name.clone();
        }
        let name = self.metadata.name.clone().unwrap_or_default();
        match (&self.spec.release_name, &self.spec.target_namespace) {
            (Some(r), _) if !r.is_empty() => r.clone(),
            (_, Some(t)) if !t.is_empty() => format!("{t}-{name}"),
            _ => name,
        }
    }

    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
    }
}

/// The part of a `source.toolkit.fluxcd.io/v1` HelmRepository that `migrate` reads.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "source.toolkit.fluxcd.io",
    version = "v1",
    kind = "HelmRepository",
    root = "FluxHelmRepository",
    derive = "PartialEq",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct HelmRepositorySpec {
    #[serde(default)]
    pub url: String,
    /// `oci` for an OCI registry, else an HTTP(S) repository.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalRef>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct LocalRef {
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flux(yaml: &str) -> FluxHelmRelease {
        crate::text::yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn release_name_and_namespaces_follow_helm_controller() {
        let hr = flux(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: flux-system}\nspec: {targetNamespace: apps}\n",
        );
        assert_eq!(hr.release_name(), "apps-web");
        assert_eq!(hr.target_namespace(), "apps");
        assert_eq!(hr.storage_namespace(), "flux-system");
        let hr = flux(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {releaseName: front, storageNamespace: apps}\nstatus: {history: [{name: front-x, namespace: apps, version: 3}]}\n",
        );
        assert_eq!(hr.release_name(), "front-x");
        assert_eq!(hr.target_namespace(), "apps");
    }
}

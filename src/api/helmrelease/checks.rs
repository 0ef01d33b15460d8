//! What the engine checks on a deployed release: its health after an action, the
//! ConfigMaps and Secrets its pods consume, and drift of its objects from the manifest.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheck {
    /// End a wait at once when a resource can no longer become ready.
    #[serde(default = "yes")]
    pub fail_fast: bool,
    /// Cancel a running wait as soon as a newer desired state is ready to apply.
    #[serde(default = "yes")]
    pub cancel_on_new_revision: bool,
    /// Stricter than Helm 4's `--wait`: a LoadBalancer Service is ready only once it has
    /// an ingress address (Helm 4 waits for its cluster IP only).
    #[serde(default)]
    pub wait_for_load_balancer_address: bool,
}

impl Default for HealthCheck {
    fn default() -> Self {
        Self {
            fail_fast: true,
            cancel_on_new_revision: true,
            wait_for_load_balancer_address: false,
        }
    }
}

/// CEL expressions that say how custom resources of one kind (or of one API group, when
/// `kind` is empty) stand, as Flux's `CustomHealthCheck`: the object's top-level fields
/// (`metadata`, `spec`, `status`, ...) are the expressions' variables. An object whose
/// `status.observedGeneration` differs from its generation is in progress; otherwise
/// `inProgress`, `failed`, then `current` are tried in that order, and none being true
/// is in progress.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CustomHealthCheck {
    pub api_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// True when the object has reached its desired state.
    pub current: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub in_progress: String,
    /// True when the object has failed: the wait ends at once.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub failed: String,
}

impl CustomHealthCheck {
    /// Whether these expressions judge objects of `api_version`/`kind`: the same group
    /// and kind, or the same group for a check without a kind.
    pub fn judges(&self, api_version: &str, kind: &str) -> bool {
        let group = |v: &str| v.rsplit_once('/').map_or("", |(g, _)| g).to_owned();
        group(&self.api_version) == group(api_version)
            && (self.kind.is_empty() || self.kind == kind)
    }
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigTracking {
    /// Roll workloads when the ConfigMaps/Secrets they consume change.
    #[serde(default = "yes")]
    pub enabled: bool,
}

impl Default for ConfigTracking {
    fn default() -> Self {
        Self { enabled: true }
    }
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DriftDetectionMode {
    /// Nothing is corrected and no Event is emitted; status still says what runs.
    Disabled,
    /// Reported (status, Ready, an Event) and left as it is.
    #[default]
    Warn,
    /// Corrected: the spec's desired state is applied again.
    Enabled,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DriftDetection {
    #[serde(default)]
    pub mode: DriftDetectionMode,
    /// Fields drift detection leaves alone (and correction leaves as they are), as
    /// Flux's rules: JSON pointers, on every object or on those `target` selects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore: Vec<IgnoreRule>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreRule {
    /// JSON pointers (RFC 6901), e.g. `/spec/replicas`: the field and all under it.
    pub paths: Vec<String>,
    /// Only objects of this kind, name and/or namespace (all objects when omitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<IgnoreTarget>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct IgnoreTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

fn yes() -> bool {
    true
}

//! The settings of the actions on a release: install, upgrade, test, rollback and
//! uninstall, with Flux's defaults.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::duration::Duration;

/// What happens to the chart's `crds/` directory on install or upgrade.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrdPolicy {
    Skip,
    Create,
    CreateReplace,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Install {
    #[serde(default)]
    pub create_namespace: bool,
    #[serde(default = "default_install_crds")]
    pub crds: CrdPolicy,
    #[serde(default)]
    pub disable_wait: bool,
    #[serde(default)]
    pub disable_hooks: bool,
    /// Adopt objects that already exist whatever their Helm ownership metadata says
    /// (Helm 4's `--take-ownership`). Off: an existing object that is not this release's
    /// fails the install and nothing is applied.
    #[serde(default)]
    pub take_ownership: bool,
    /// Overwrite fields another field manager holds with another value, and become
    /// their sole manager (Helm 4's `--force-conflicts`). Off: such a field keeps the other
    /// manager's value while the chart renders what it rendered before (an HPA keeps its
    /// replicas), and a change of it fails the action with the manager and field named.
    #[serde(default)]
    pub force_conflicts: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<InstallRemediation>,
}

impl Default for Install {
    fn default() -> Self {
        Self {
            create_namespace: false,
            crds: default_install_crds(),
            disable_wait: false,
            disable_hooks: false,
            take_ownership: false,
            force_conflicts: false,
            remediation: None,
        }
    }
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InstallRemediation {
    /// Install retries before the release is Stalled; -1 retries forever.
    #[serde(default)]
    #[schemars(range(min = -1))]
    pub retries: i32,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Upgrade {
    #[serde(default = "default_upgrade_crds")]
    pub crds: CrdPolicy,
    #[serde(default)]
    pub disable_wait: bool,
    #[serde(default)]
    pub disable_hooks: bool,
    /// Delete objects the failed upgrade created.
    #[serde(default)]
    pub cleanup_on_fail: bool,
    /// Adopt objects new to the release that already exist, whatever their Helm
    /// ownership metadata says (Helm 4's `--take-ownership`).
    #[serde(default)]
    pub take_ownership: bool,
    /// Overwrite fields another field manager holds with another value, and become
    /// their sole manager (Helm 4's `--force-conflicts`). Off: such a field keeps the other
    /// manager's value while the chart renders what it rendered before (an HPA keeps its
    /// replicas), and a change of it fails the action with the manager and field named.
    #[serde(default)]
    pub force_conflicts: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<UpgradeRemediation>,
}

impl Default for Upgrade {
    fn default() -> Self {
        Self {
            crds: default_upgrade_crds(),
            disable_wait: false,
            disable_hooks: false,
            cleanup_on_fail: false,
            take_ownership: false,
            force_conflicts: false,
            remediation: None,
        }
    }
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RemediationStrategy {
    #[default]
    Rollback,
    Uninstall,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeRemediation {
    /// Upgrade retries before the release is Stalled; -1 retries forever.
    #[serde(default)]
    #[schemars(range(min = -1))]
    pub retries: i32,
    #[serde(default)]
    pub strategy: RemediationStrategy,
    /// Remediate the last failure even when retries are exhausted. Defaults to true when
    /// retries > 0 (as in Flux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediate_last_failure: Option<bool>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Test {
    #[serde(default)]
    pub enable: bool,
    /// Defaults to spec.timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// A failing test does not fail the release.
    #[serde(default)]
    pub ignore_failures: bool,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Rollback {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub disable_hooks: bool,
    #[serde(default)]
    pub disable_wait: bool,
    /// Overwrite fields another field manager holds with another value, and become
    /// their sole manager (Helm 4's `--force-conflicts`). Off: such a field keeps the other
    /// manager's value while the chart renders what it rendered before (an HPA keeps its
    /// replicas), and a change of it fails the action with the manager and field named.
    #[serde(default)]
    pub force_conflicts: bool,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Uninstall {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub disable_hooks: bool,
    #[serde(default)]
    pub disable_wait: bool,
    /// Keep the storage Secrets (as `uninstalled`) so `helm history` still shows them.
    #[serde(default)]
    pub keep_history: bool,
}

fn default_install_crds() -> CrdPolicy {
    CrdPolicy::Create
}

fn default_upgrade_crds() -> CrdPolicy {
    CrdPolicy::Skip
}

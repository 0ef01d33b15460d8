//! The settings of the actions on a release: install, upgrade, test, rollback and
//! uninstall, with Flux's defaults.

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::duration::Duration;

/// Flux's `retryInterval` default for `RetryOnFailure`.
pub const DEFAULT_RETRY_INTERVAL: Duration = Duration::from_secs(300);

/// Whether an upgrade or rollback applies server-side (Flux's `serverSideApply`, Helm 4's
/// `--server-side`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ServerSideApplyMode {
    Enabled,
    /// Helm's client-side apply: a three-way patch of each existing object.
    Disabled,
    /// As the revision it starts from was applied: the upgrade as the newest revision,
    /// the rollback as the revision it rolls back to (a revision Helm 3 wrote counts as
    /// client-side), as Helm 4 decides it.
    #[default]
    Auto,
}

impl ServerSideApplyMode {
    /// Whether to apply server-side after a revision applied by `method` (Helm's
    /// `applyMethod`: `ssa`, `csa`, or none for a revision Helm 3 wrote).
    pub fn server_side(self, method: Option<&str>) -> bool {
        match self {
            Self::Enabled => true,
            Self::Disabled => false,
            Self::Auto => method == Some("ssa"),
        }
    }
}

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
    /// How long the install's hooks and health check may take. Defaults to spec.timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// What a failed install leads to: `RemediateOnFailure` (the default: remediation as
    /// `remediation` says) or `RetryOnFailure` (no remediation; tried again after
    /// `retryInterval`, as an upgrade of the failed revision, as Flux does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<ActionStrategy>,
    /// Helm's `install --replace`: an install over a release whose newest revision is
    /// uninstalled (its history kept) marks that revision `superseded` ("superseded by
    /// new release"), as `helm install --replace` does. Without it wheelhouse installs
    /// over such a history too (Helm would refuse the name) and leaves it `uninstalled`.
    #[serde(default)]
    pub replace: bool,
    #[serde(default)]
    pub create_namespace: bool,
    #[serde(default = "default_install_crds")]
    pub crds: CrdPolicy,
    #[serde(default)]
    pub disable_wait: bool,
    /// Don't wait for Jobs to complete: a Job counts once it has started, as Helm's wait
    /// judges it without `--wait-for-jobs` (Flux's field; only a failed Job fails the
    /// wait then).
    #[serde(default)]
    pub disable_wait_for_jobs: bool,
    /// Don't validate the values against the chart's `values.schema.json` (Helm 4's
    /// `--skip-schema-validation`, Flux's field).
    #[serde(default)]
    pub disable_schema_validation: bool,
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
    /// Apply server-side (the default, as Helm 4 and Flux do); false: Helm's client-side
    /// apply (`helm install --server-side=false`), and later upgrades stay client-side
    /// while theirs is `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<InstallRemediation>,
}

impl Default for Install {
    fn default() -> Self {
        Self {
            timeout: None,
            strategy: None,
            replace: false,
            create_namespace: false,
            crds: default_install_crds(),
            disable_wait: false,
            disable_wait_for_jobs: false,
            disable_schema_validation: false,
            disable_hooks: false,
            take_ownership: false,
            force_conflicts: false,
            server_side_apply: None,
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
    /// Whether a failed test after an install is ignored (Flux's field); defaults to
    /// `test.ignoreFailures`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_test_failures: Option<bool>,
    /// Uninstall the last failed install even when retries are exhausted. Defaults to
    /// false (as in Flux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediate_last_failure: Option<bool>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Upgrade {
    /// How long the upgrade's hooks and health check may take. Defaults to spec.timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// What a failed upgrade leads to: `RemediateOnFailure` (the default: remediation as
    /// `remediation` says) or `RetryOnFailure` (no rollback or uninstall; the upgrade is
    /// tried again after `retryInterval`, for ever, as Flux does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<ActionStrategy>,
    /// Flux's "forces resource updates through a replacement strategy". Helm 4 refuses to
    /// replace objects under server-side apply, and helm-controller, which forces
    /// conflicts on every server-side apply, passes it to Helm only for client-side
    /// apply. So: applying client-side, existing objects are replaced (`helm upgrade
    /// --force --server-side=false`); applying server-side, where wheelhouse forces
    /// conflicts only when asked, `force` asks, as `forceConflicts` does.
    #[serde(default)]
    pub force: bool,
    #[serde(default = "default_upgrade_crds")]
    pub crds: CrdPolicy,
    #[serde(default)]
    pub disable_wait: bool,
    /// Don't wait for Jobs to complete: a Job counts once it has started, as Helm's wait
    /// judges it without `--wait-for-jobs` (Flux's field; only a failed Job fails the
    /// wait then).
    #[serde(default)]
    pub disable_wait_for_jobs: bool,
    /// Don't validate the values against the chart's `values.schema.json` (Helm 4's
    /// `--skip-schema-validation`, Flux's field).
    #[serde(default)]
    pub disable_schema_validation: bool,
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
    /// Keep the values of the revision the upgrade replaces and merge the spec's values
    /// over them, and render with that revision's chart values in place of the new
    /// chart's (Helm's `--reuse-values`, Flux's field). Not declarative: a value removed
    /// from the spec stays. Changing the spec's values upgrades; an unchanged spec does
    /// not, although the stored values differ from it.
    #[serde(default)]
    pub preserve_values: bool,
    /// `enabled`, `disabled` (Helm's client-side apply) or `auto` (the default: as the
    /// newest revision was applied), Flux's field with Helm 4's meaning.
    #[serde(default)]
    pub server_side_apply: ServerSideApplyMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<UpgradeRemediation>,
}

impl Default for Upgrade {
    fn default() -> Self {
        Self {
            timeout: None,
            strategy: None,
            force: false,
            crds: default_upgrade_crds(),
            disable_wait: false,
            disable_wait_for_jobs: false,
            disable_schema_validation: false,
            disable_hooks: false,
            cleanup_on_fail: false,
            take_ownership: false,
            force_conflicts: false,
            preserve_values: false,
            server_side_apply: ServerSideApplyMode::Auto,
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
    /// Whether a failed test after an upgrade is ignored (Flux's field); defaults to
    /// `test.ignoreFailures`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_test_failures: Option<bool>,
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
    /// Which tests run, by hook name (Flux's field, Helm's `helm test --filter
    /// name=...,!name=...`): excluded names never run; when any name is included, only
    /// those run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filters: Vec<TestFilter>,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TestFilter {
    /// The test hook's name.
    pub name: String,
    /// Skip this test instead of choosing it.
    #[serde(default)]
    pub exclude: bool,
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
    /// Don't wait for Jobs to complete: a Job counts once it has started, as Helm's wait
    /// judges it without `--wait-for-jobs` (Flux's field; only a failed Job fails the
    /// wait then).
    #[serde(default)]
    pub disable_wait_for_jobs: bool,
    /// Overwrite fields another field manager holds with another value, and become
    /// their sole manager (Helm 4's `--force-conflicts`). Off: such a field keeps the other
    /// manager's value while the chart renders what it rendered before (an HPA keeps its
    /// replicas), and a change of it fails the action with the manager and field named.
    #[serde(default)]
    pub force_conflicts: bool,
    /// As `upgrade.force`: the rollback overwrites fields other managers hold.
    #[serde(default)]
    pub force: bool,
    /// Helm's `rollback --cleanup-on-fail`: when applying the rollback fails, the objects
    /// it created (ones the revision rolled back from did not have) are deleted.
    #[serde(default)]
    pub cleanup_on_fail: bool,
    /// Kept for Flux compatibility only, with no effect: Helm 4 removed `--recreate-pods`,
    /// and helm-controller on Helm 4 ignores it too (with a warning in its log). A rollback
    /// with it set says so in the engine's log.
    #[serde(default)]
    pub recreate: bool,
    /// `enabled`, `disabled` or `auto` (the default: as the revision rolled back to was
    /// applied), Flux's field with Helm 4's meaning.
    #[serde(default)]
    pub server_side_apply: ServerSideApplyMode,
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
    /// How the deletion of the release's objects propagates to their dependents (Helm
    /// 4's `helm uninstall --cascade`, Flux's field).
    #[serde(default)]
    pub deletion_propagation: DeletionPropagation,
}

/// Kubernetes' propagation policies, as Helm's `--cascade` names them.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum DeletionPropagation {
    /// Dependents are deleted by the garbage collector after the object.
    #[default]
    Background,
    /// The object goes once its dependents are deleted.
    Foreground,
    /// Dependents are kept.
    Orphan,
}

/// Flux's action strategy names.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ActionStrategyName {
    /// A failure is remediated as `remediation` says (and counts against its retries).
    #[default]
    RemediateOnFailure,
    /// A failure is not remediated: the action is tried again after `retryInterval`.
    RetryOnFailure,
}

/// `install.strategy` / `upgrade.strategy`, as Flux's.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.retryInterval) || self.name == 'RetryOnFailure'")
        .message(".retryInterval can only be set when .name is 'RetryOnFailure'"),
)]
pub struct ActionStrategy {
    pub name: ActionStrategyName,
    /// How long after a failure the action is tried again, with `RetryOnFailure`.
    /// Defaults to 5m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_interval: Option<Duration>,
}

impl ActionStrategy {
    /// The retry interval when the strategy is `RetryOnFailure`, None otherwise.
    pub fn retry(strategy: Option<&Self>) -> Option<std::time::Duration> {
        let s = strategy.filter(|s| s.name == ActionStrategyName::RetryOnFailure)?;
        Some(s.retry_interval.unwrap_or(DEFAULT_RETRY_INTERVAL).as_std())
    }
}

/// Labels and annotations put on every object the chart renders (hooks and tests
/// included, the chart's `crds/` not), overriding the chart's own values for the same
/// keys, as Flux's `commonMetadata` post-renderer does. Helm's ownership label and
/// annotations still win.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct CommonMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl CommonMetadata {
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

fn default_install_crds() -> CrdPolicy {
    CrdPolicy::Create
}

fn default_upgrade_crds() -> CrdPolicy {
    CrdPolicy::Skip
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Helm 4's `getUpgradeServerSideValue`: `auto` follows the revision's `applyMethod`,
    /// and a revision Helm 3 wrote (none) counts as client-side.
    #[test]
    fn auto_applies_as_the_revision_it_starts_from_was_applied() {
        let auto = ServerSideApplyMode::default();
        assert_eq!(auto, ServerSideApplyMode::Auto);
        assert!(auto.server_side(Some("ssa")));
        assert!(!auto.server_side(Some("csa")));
        assert!(!auto.server_side(None));
        assert!(ServerSideApplyMode::Enabled.server_side(None));
        assert!(!ServerSideApplyMode::Disabled.server_side(Some("ssa")));
        let upgrade: Upgrade =
            serde_json::from_value(serde_json::json!({"serverSideApply": "disabled"})).unwrap();
        assert_eq!(upgrade.server_side_apply, ServerSideApplyMode::Disabled);
        assert!(
            serde_json::from_value::<Upgrade>(serde_json::json!({"serverSideApply": "on"}))
                .is_err()
        );
    }
}

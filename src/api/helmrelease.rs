//! `HelmRelease` in `wheelhouse.dev/v1alpha1`.
//!
//! Field names follow Flux's `helm.toolkit.fluxcd.io/v2` HelmRelease wherever the meaning
//! is the same, so a Flux user moves a release by changing `apiVersion` and the chart
//! block. Validation that the API server can enforce lives here as schema patterns, enums
//! and CEL rules, so a bad object is refused at `kubectl apply` time with a clear message.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::duration::Duration;

pub const GROUP: &str = "wheelhouse.dev";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "HelmRelease";
pub const FIELD_MANAGER: &str = "wheelhouse";
pub const FINALIZER: &str = "wheelhouse.dev/finalizer";

/// Annotations whose value is a token (usually a timestamp); each new value is handled
/// once and recorded in status.
pub mod annotations {
    pub const RECONCILE_REQUESTED_AT: &str = "reconcile.wheelhouse.dev/requestedAt";
    pub const FORCE_AT: &str = "reconcile.wheelhouse.dev/forceAt";
    pub const RESET_AT: &str = "reconcile.wheelhouse.dev/resetAt";
    pub const CANCEL_WAIT_AT: &str = "reconcile.wheelhouse.dev/cancelWaitAt";
    /// Roll back and pin: JSON `{"revision": N, "requestedBy": "...", "requestedAt":
    /// "<token>"}`, honoured while `spec.suspend` is true (the dashboard's `b` writes both
    /// in one patch). The whole value is the token.
    pub const ROLLBACK_TO: &str = "reconcile.wheelhouse.dev/rollbackTo";
}

/// A roll back and pin request, as [`annotations::ROLLBACK_TO`] holds it.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RollbackRequest {
    /// The Helm revision to roll back to.
    pub revision: i32,
    /// Who asked (the Kubernetes username of the operator).
    #[serde(default)]
    pub requested_by: String,
    /// When they asked; also what makes each request a new token.
    #[serde(default)]
    pub requested_at: String,
}

impl RollbackRequest {
    /// The request `hr` carries, if any: `Err` says why its annotation does not read.
    pub fn of(hr: &HelmRelease) -> Option<Result<Self, String>> {
        let raw = hr
            .metadata
            .annotations
            .as_ref()?
            .get(annotations::ROLLBACK_TO)?;
        Some(serde_json::from_str(raw).map_err(|e| {
            format!(
                "annotation {} is not {{\"revision\": N, \"requestedBy\": \"...\", \"requestedAt\": \"...\"}}: {e}",
                annotations::ROLLBACK_TO
            )
        }))
    }

    /// The annotation's value.
    pub fn to_annotation(&self) -> String {
        serde_json::to_string(self).expect("a plain struct serialises")
    }
}

/// The desired state of one Helm release.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "wheelhouse.dev",
    version = "v1alpha1",
    kind = "HelmRelease",
    namespaced,
    shortname = "whr",
    doc = "A Helm release declared as a Kubernetes object and reconciled by wheelhouse.",
    status = "HelmReleaseStatus",
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].message","priority":0}"#,
    printcolumn = r#"{"name":"Revision","type":"integer","jsonPath":".status.history[0].version"}"#,
    printcolumn = r#"{"name":"Suspended","type":"boolean","jsonPath":".spec.suspend"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct HelmReleaseSpec {
    /// Where the chart comes from.
    pub chart: ChartSpec,

    /// How often the release is reconciled even when nothing changed.
    #[serde(default = "default_interval")]
    pub interval: Duration,

    /// How long the health-check wait after an action may take.
    #[serde(default = "default_timeout")]
    pub timeout: Duration,

    /// Helm release name. Defaults to `<targetNamespace>-<name>` when targetNamespace is
    /// set, otherwise to the HelmRelease's name (as in Flux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) <= 53").message("releaseName must be at most 53 characters (a Helm limit)"))]
    pub release_name: Option<String>,

    /// Namespace the chart's objects go to. Defaults to the HelmRelease's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_namespace: Option<String>,

    /// Namespace of the Helm storage Secrets. Defaults to the HelmRelease's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_namespace: Option<String>,

    /// ServiceAccount of the HelmRelease's namespace that everything done for the release
    /// (rendering and `lookup`, apply, prune, hooks, tests, rollback, uninstall, Helm
    /// storage) is done as, by impersonation (Flux's field). Unset: the cluster's default
    /// service account under lockdown, else the engine's own identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$') && size(self) <= 253")
        .message("serviceAccountName must be a ServiceAccount name (a DNS-1123 subdomain)"))]
    pub service_account_name: Option<String>,

    /// Revisions kept in Helm storage; 0 keeps all.
    #[serde(default = "default_max_history")]
    #[schemars(range(min = 0))]
    pub max_history: i32,

    /// Inline values, merged last (highest precedence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form_object")]
    pub values: Option<serde_json::Value>,

    /// Values read from ConfigMaps and Secrets, merged in order before inline values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_from: Vec<ValuesReference>,

    /// Releases that must be Ready before this one is reconciled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<DependencyReference>,

    /// Stop starting new actions for this release (a running wait still finishes).
    #[serde(default)]
    pub suspend: bool,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<Install>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade: Option<Upgrade>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<Test>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<Rollback>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uninstall: Option<Uninstall>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_tracking: Option<ConfigTracking>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_detection: Option<DriftDetection>,
}

/// Exactly one of `path`, `repository` + `name` (with an optional `version`), or `git`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.path) || has(self.git) || (has(self.repository) && has(self.name))")
        .message("chart needs either path, repository and name, or git"),
    validation = Rule::new("!has(self.path) || !(has(self.repository) || has(self.name) || has(self.version) || has(self.secretRef) || has(self.git))")
        .message("chart.path cannot be combined with repository, name, version, secretRef or git"),
    validation = Rule::new("!has(self.git) || !(has(self.repository) || has(self.name) || has(self.version) || has(self.insecure))")
        .message("chart.git cannot be combined with repository, name, version or insecure (the chart is the directory git.path)"),
)]
pub struct ChartSpec {
    /// URL of an HTTP(S) Helm repository (the folder holding index.yaml), or of an OCI
    /// registry path (`oci://host/path`, the chart being `path/name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.startsWith('https://') || self.startsWith('http://') || self.startsWith('oci://')")
        .message("chart.repository must be an http:// or https:// Helm repository URL, or oci://host/path"))]
    pub repository: Option<String>,

    /// Chart name in the repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$')")
        .message("chart.name must be a chart name such as podinfo"))]
    pub name: Option<String>,

    /// Exact version or semver range (e.g. `1.2.3`, `>=1.0.0 <2.0.0`, `~1.4`). Defaults to
    /// the latest stable version. For an OCI chart, `@sha256:<digest>` after the version
    /// (or alone) pins the manifest's digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) > 0").message("chart.version must not be empty; omit it for the latest stable version"))]
    pub version: Option<String>,

    /// A chart directory or packaged `.tgz` on the engine's filesystem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) > 0").message("chart.path must not be empty"))]
    pub path: Option<String>,

    /// Secret in the HelmRelease's namespace with `username`/`password` for basic auth
    /// (or, for an OCI registry, `.dockerconfigjson` as a `kubernetes.io/dockerconfigjson`
    /// Secret holds it) and/or `ca.crt` for a private CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,

    /// OCI only: reach the registry over plain HTTP. Without it, plain HTTP is used only
    /// for a registry on a loopback address that does not answer TLS.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,

    /// How often the chart's source is checked for a new version, manifest digest or
    /// commit (Flux's `chart.spec.interval`). Default: the release's interval, and 15s
    /// while the release waits on a health check or has failed. A push (a webhook
    /// receiver) is seen at once either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,

    /// A chart directory in a Git repository, fetched shallow at the commit `ref` names.
    /// Every new commit is a new desired state. Credentials come from `secretRef`:
    /// `username`/`password` or `bearerToken` (HTTPS, with an optional `ca.crt`), or
    /// `identity` and `known_hosts` (SSH), as in Flux's GitRepository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSource>,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GitSource {
    /// `https://host/repo.git`, `http://` (loopback or trusted networks only), or
    /// `ssh://user@host[:port]/repo.git`.
    #[x_kube(validation = Rule::new("self.startsWith('https://') || self.startsWith('http://') || self.startsWith('ssh://')")
        .message("chart.git.url must be an https://, http:// or ssh:// URL"))]
    pub url: String,

    /// What to check out; the default branch (HEAD) when omitted.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<GitRef>,

    /// The chart directory inside the repository (default: the repository's root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// At most one of these; Flux's GitRepository `ref`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("[has(self.branch), has(self.tag), has(self.semver), has(self.commit)].filter(x, x).size() <= 1")
        .message("chart.git.ref takes one of branch, tag, semver or commit"),
)]
pub struct GitRef {
    /// The branch's newest commit; each new commit is a new desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The highest tag matching this semver range (a leading `v` in tags is allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semver: Option<String>,
    /// A full commit SHA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[0-9a-f]{40}$')")
        .message("chart.git.ref.commit must be a full 40-character commit SHA"))]
    pub commit: Option<String>,
}

impl ChartSpec {
    /// Where the chart comes from, as the dashboard shows it: a path, a repository's
    /// chart, or an OCI reference (with the version asked for, which may be a range or a
    /// digest pin).
    pub fn source_text(&self) -> String {
        let version = self
            .version
            .as_deref()
            .map_or_else(|| " (newest stable)".to_owned(), |v| format!(" {v}"));
        if let Some(git) = &self.git {
            return git.source_text(None);
        }
        match (&self.path, &self.repository, &self.name) {
            (Some(path), _, _) => format!("path {path}"),
            (None, Some(repo), Some(name)) if repo.starts_with("oci://") => format!(
                "{}/{name}{version}{}",
                repo.trim_end_matches('/'),
                if self.insecure { " (plain HTTP)" } else { "" }
            ),
            (None, Some(repo), Some(name)) => format!("{name} from {repo}{version}"),
            _ => "(no chart source)".to_owned(),
        }
    }
}

impl GitSource {
    /// `url@commit` (the first 12 digits of the commit, when known) with the ref and
    /// path asked for, as the dashboard shows it.
    pub fn source_text(&self, commit: Option<&str>) -> String {
        let reference = match &self.reference {
            Some(GitRef {
                branch: Some(b), ..
            }) => format!(" branch {b}"),
            Some(GitRef { tag: Some(t), .. }) => format!(" tag {t}"),
            Some(GitRef {
                semver: Some(r), ..
            }) => format!(" tags {r}"),
            Some(GitRef {
                commit: Some(c), ..
            }) => format!(" commit {}", &c[..c.len().min(12)]),
            _ => " (default branch)".to_owned(),
        };
        let path = self
            .path
            .as_deref()
            .filter(|p| !p.trim_matches('/').is_empty())
            .map(|p| format!(" path {p}"))
            .unwrap_or_default();
        let at = commit
            .map(|c| format!("@{}", &c[..c.len().min(12)]))
            .unwrap_or_default();
        format!("{}{at}{reference}{path}", self.url)
    }
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LocalObjectReference {
    pub name: String,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValuesKind {
    ConfigMap,
    Secret,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ValuesReference {
    pub kind: ValuesKind,
    pub name: String,
    /// Key holding the values; a YAML document unless targetPath is set.
    #[serde(default = "default_values_key")]
    pub values_key: String,
    /// Put the key's raw value at this dotted path (Helm `--set` syntax) instead of
    /// merging it as a YAML document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_path: Option<String>,
    /// A missing object or key is skipped instead of holding the release.
    #[serde(default)]
    pub optional: bool,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DependencyReference {
    pub name: String,
    /// Defaults to the HelmRelease's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
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

/// Objects of the release that differ from its manifest, as the last check found them.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DriftStatus {
    pub objects: Vec<DriftedObject>,
    /// The Helm revision whose manifest they were compared with.
    pub revision: i32,
    pub detected_at: String,
}

/// A field of a release's object that another field manager keeps changing back.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ContestedField {
    /// `Deployment/web`, as Helm names objects.
    pub object: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The JSON pointer of the field.
    pub field: String,
    /// The field manager that changed it back.
    pub manager: String,
    /// Corrections of it in a row that this manager undid.
    pub corrections: i32,
    /// When wheelhouse last corrected it (RFC 3339).
    pub last_corrected: String,
    /// The revision and generation it was counted against: a new one starts afresh.
    pub revision: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Corrections stopped: the field is left to `manager` and never taken by force.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub yielded: bool,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DriftedObject {
    /// `Deployment/web`, as Helm names objects.
    pub object: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// JSON pointers of the fields that differ; empty when the object is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
}

/// The observed state, written only by the engine (status subresource).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HelmReleaseStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Chart version of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// Digest of the merged values of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_config_digest: Option<String>,
    /// Git charts: `<ref>@sha1:<commit>` of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_source_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_release_action: Option<ReleaseAction>,
    /// Helm revisions, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Snapshot>,
    /// Failures since the last success, of any kind.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub install_failures: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub upgrade_failures: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_force_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reset_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_cancel_wait_at: Option<String>,
    /// The rollbackTo annotation last handled (its whole value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_rollback_to: Option<String>,
    /// Set while the release is suspended at a revision an operator rolled back to;
    /// resuming returns it to the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Pin>,
    /// Set while the newest revision in Helm's storage was written by another tool (the
    /// helm CLI's `rollback` or `upgrade`) rather than from this HelmRelease's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_revision: Option<ExternalRevision>,
    /// Set while live objects differ from the newest revision's manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftStatus>,
    /// Fields another field manager changed back after drift corrections (an autoscaler):
    /// counted per field, and once it undid a few in a row, left to that manager.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contested: Vec<ContestedField>,
    /// Present while a health check runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<WaitStatus>,
    /// The engine that last began a step (an action) on this release, recorded before
    /// the step: an engine that takes the release over (a shard relabel, a namespace
    /// changing hands) waits until that one let go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acting: Option<EngineRef>,
    /// Written by an engine once its last step on a release that left it has ended:
    /// the positive sign its successor waits for. Kept by its own field manager, so the
    /// status writes of the engine acting next leave it alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub let_go: Option<EngineRef>,
}

/// A revision another tool wrote into the release's Helm storage.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ExternalRevision {
    pub revision: i32,
    /// The field manager(s) of its storage Secret, e.g. `helm`.
    pub by: String,
    /// Helm's description of it, e.g. `Rollback to 1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// When it was deployed, as its record says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The generation of the HelmRelease when it was seen: a newer spec is applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_at_generation: Option<i64>,
}

impl ExternalRevision {
    pub fn message(&self) -> String {
        let what = if self.description.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.description)
        };
        format!(
            "revision {}{what} was written by {}{}, not from this HelmRelease's spec",
            self.revision,
            self.by,
            self.at
                .as_deref()
                .map(|a| format!(" at {a}"))
                .unwrap_or_default()
        )
    }
}

/// A release held at a revision an operator rolled back to.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    /// The revision rolled back to.
    pub revision: i32,
    /// The revision the rollback recorded (Helm's new revision holding it).
    pub recorded_as: i32,
    pub by: String,
    pub at: String,
}

impl Pin {
    /// What the Ready condition and the dashboard say.
    pub fn message(&self) -> String {
        format!(
            "pinned to revision {} by {} at {}; resume to return to the spec",
            self.revision,
            if self.by.is_empty() {
                "an operator"
            } else {
                &self.by
            },
            self.at
        )
    }
}

/// An engine, as one engine names another in a release's status.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EngineRef {
    /// Its identity (the holderIdentity of its Lease).
    pub identity: String,
    /// Its Lease, as `namespace/name`: whether it is alive.
    pub lease: String,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReleaseAction {
    Install,
    Upgrade,
}

/// One Helm revision as recorded in status.history.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Helm revision number.
    pub version: i32,
    pub name: String,
    pub namespace: String,
    pub chart_name: String,
    pub chart_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_version: Option<String>,
    pub config_digest: String,
    /// Helm status: deployed, superseded, failed, pending-install, ...
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_deployed: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_deployed: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<Time>,
    /// passed, failed, or absent when no tests ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_result: Option<String>,
    /// The Git commit a Git chart's revision was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The start of the OCI manifest digest the revision was made from (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// Progress of the running health check.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WaitStatus {
    pub revision: i32,
    pub started_at: Time,
    pub deadline: Time,
    pub ready: i32,
    pub total: i32,
    /// While a hook runs instead of a health check: which one, as
    /// `Job/web-migrate (post-upgrade hook)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
}

impl HelmRelease {
    /// The chart's source as the detail view shows it; for a Git chart with the commit of
    /// the newest revision (or of the last attempt, before there is one).
    pub fn source_text(&self) -> String {
        let Some(git) = &self.spec.chart.git else {
            return self.spec.chart.source_text();
        };
        let status = self.status.as_ref();
        let commit = status
            .and_then(|s| s.history.first())
            .and_then(|h| h.commit.clone())
            .or_else(|| {
                status
                    .and_then(|s| s.last_attempted_source_revision.as_deref())
                    .and_then(commit_of)
                    .map(str::to_owned)
            });
        git.source_text(commit.as_deref())
    }

    /// The Helm release name, defaulted as Flux does.
    pub fn release_name(&self) -> String {
        if let Some(name) = &self.spec.release_name {
            return name.clone();
        }
        let name = self.metadata.name.clone().unwrap_or_default();
        match &self.spec.target_namespace {
            Some(ns) => format!("{ns}-{name}"),
            None => name,
        }
    }

    /// Namespace of the HelmRelease object itself.
    pub fn object_namespace(&self) -> String {
        self.metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into())
    }

    /// Namespace the chart's objects are installed into.
    pub fn target_namespace(&self) -> String {
        self.spec
            .target_namespace
            .clone()
            .unwrap_or_else(|| self.object_namespace())
    }

    /// Namespace of the Helm storage Secrets.
    pub fn storage_namespace(&self) -> String {
        self.spec
            .storage_namespace
            .clone()
            .unwrap_or_else(|| self.object_namespace())
    }

    /// The condition of the given type, if the engine has set it.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
    }

    /// What list views show as the message: the Ready condition's, or why there is none.
    pub fn ready_message(&self) -> String {
        match self.condition("Ready") {
            Some(c) => c.message.replace('\n', " "),
            None if self.spec.suspend => "suspended before its first reconcile".into(),
            None => "waiting for the engine".into(),
        }
    }
}

fn free_form_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "description": "Helm values: any YAML object.",
    })
}

fn default_interval() -> Duration {
    Duration::from_secs(600)
}

fn default_timeout() -> Duration {
    Duration::from_secs(300)
}

fn default_max_history() -> i32 {
    5
}

fn default_values_key() -> String {
    "values.yaml".into()
}

fn default_install_crds() -> CrdPolicy {
    CrdPolicy::Create
}

fn default_upgrade_crds() -> CrdPolicy {
    CrdPolicy::Skip
}

fn yes() -> bool {
    true
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The commit in a Git revision, `<ref>@sha1:<commit>` (or `sha1:<commit>`).
/// The manifest digest (64 hex digits) of an OCI revision `<tag>@sha256:<digest>`.
pub fn manifest_digest_of(revision: &str) -> Option<&str> {
    revision
        .rsplit_once("@sha256:")
        .map(|(_, d)| d)
        .filter(|d| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()))
}

pub fn commit_of(revision: &str) -> Option<&str> {
    revision
        .rsplit_once("sha1:")
        .map(|(_, c)| c)
        .filter(|c| c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_yaml(y: &str) -> HelmRelease {
        crate::yaml::from_str(y).expect("valid HelmRelease")
    }

    #[test]
    fn a_git_charts_source_shows_the_deployed_commit() {
        let mut hr = from_yaml(
            r#"
apiVersion: wheelhouse.dev/v1alpha1
kind: HelmRelease
metadata: {name: web, namespace: apps}
spec:
  chart: {git: {url: "https://git.example.com/charts.git", ref: {branch: main}, path: deploy/web}}
"#,
        );
        assert_eq!(
            hr.source_text(),
            "https://git.example.com/charts.git branch main path deploy/web"
        );
        let (old, new) = ("a".repeat(40), "b".repeat(40));
        let status = hr.status.get_or_insert_with(Default::default);
        status.last_attempted_source_revision = Some(format!("main@sha1:{new}"));
        assert_eq!(
            hr.source_text(),
            "https://git.example.com/charts.git@bbbbbbbbbbbb branch main path deploy/web"
        );
        // Once a revision exists, the commit shown is the newest revision's.
        hr.status.as_mut().unwrap().history.push(Snapshot {
            version: 1,
            name: "web".into(),
            namespace: "apps".into(),
            chart_name: "web".into(),
            chart_version: "1.0.0".into(),
            app_version: None,
            config_digest: String::new(),
            status: "deployed".into(),
            action: None,
            first_deployed: None,
            last_deployed: None,
            deleted: None,
            test_result: None,
            commit: Some(old),
            digest: None,
        });
        assert!(hr.source_text().contains("@aaaaaaaaaaaa branch main"));
        assert_eq!(commit_of("v1@sha1:0123"), None);
    }

    #[test]
    fn minimal_release_gets_flux_defaults() {
        let hr = from_yaml(
            r#"
apiVersion: wheelhouse.dev/v1alpha1
kind: HelmRelease
metadata: {name: podinfo, namespace: apps}
spec:
  chart: {repository: "https://charts.example.com", name: podinfo}
"#,
        );
        assert_eq!(hr.spec.interval.to_string(), "10m");
        assert_eq!(hr.spec.timeout.to_string(), "5m");
        assert_eq!(hr.spec.max_history, 5);
        assert!(!hr.spec.suspend);
        assert_eq!(hr.release_name(), "podinfo");
        assert_eq!(hr.target_namespace(), "apps");
        assert_eq!(hr.storage_namespace(), "apps");
        assert_eq!(
            hr.spec.health_check.clone().unwrap_or_default(),
            HealthCheck {
                fail_fast: true,
                cancel_on_new_revision: true,
                wait_for_load_balancer_address: false,
            }
        );
        assert_eq!(
            hr.spec.install.clone().unwrap_or_default().crds,
            CrdPolicy::Create
        );
        assert_eq!(
            hr.spec.upgrade.clone().unwrap_or_default().crds,
            CrdPolicy::Skip
        );
    }

    #[test]
    fn target_namespace_prefixes_release_name_like_flux() {
        let hr = from_yaml(
            r#"
apiVersion: wheelhouse.dev/v1alpha1
kind: HelmRelease
metadata: {name: podinfo, namespace: flux-system}
spec:
  targetNamespace: web
  chart: {path: ./charts/podinfo}
"#,
        );
        assert_eq!(hr.release_name(), "web-podinfo");
        assert_eq!(hr.target_namespace(), "web");
        assert_eq!(hr.storage_namespace(), "flux-system");
    }

    #[test]
    fn full_spec_round_trips() {
        let src = r#"
apiVersion: wheelhouse.dev/v1alpha1
kind: HelmRelease
metadata: {name: full, namespace: default}
spec:
  chart: {repository: "https://charts.example.com", name: app, version: ">=1.0.0 <2.0.0", secretRef: {name: creds}}
  interval: 1h30m
  timeout: 90s
  releaseName: app
  maxHistory: 0
  values: {replicaCount: 2, image: {tag: "1.2"}}
  valuesFrom:
    - {kind: ConfigMap, name: base}
    - {kind: Secret, name: creds, valuesKey: token, targetPath: auth.token, optional: true}
  dependsOn: [{name: db, namespace: data}]
  suspend: true
  install: {createNamespace: true, crds: CreateReplace, remediation: {retries: 3}}
  upgrade: {cleanupOnFail: true, remediation: {retries: -1, strategy: uninstall, remediateLastFailure: false}}
  test: {enable: true, timeout: 2m, ignoreFailures: true}
  rollback: {timeout: 1m, disableHooks: true}
  uninstall: {keepHistory: true}
  healthCheck: {failFast: false, cancelOnNewRevision: false}
  configTracking: {enabled: false}
  driftDetection: {mode: warn, ignore: [{paths: ["/spec/replicas"]}]}
"#;
        let hr = from_yaml(src);
        assert_eq!(hr.spec.values_from[0].values_key, "values.yaml");
        assert_eq!(
            hr.spec
                .upgrade
                .as_ref()
                .unwrap()
                .remediation
                .as_ref()
                .unwrap()
                .strategy,
            RemediationStrategy::Uninstall
        );
        let again: HelmRelease =
            serde_json::from_value(serde_json::to_value(&hr).unwrap()).unwrap();
        assert_eq!(again.spec, hr.spec);
    }
}

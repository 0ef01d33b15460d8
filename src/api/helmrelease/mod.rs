//! `HelmRelease` in `wheelhouse.dev/v1alpha1`.
//!
//! Field names follow Flux's `helm.toolkit.fluxcd.io/v2` HelmRelease wherever the meaning
//! is the same, so a Flux user moves a release by changing `apiVersion` and the chart
//! block. Validation that the API server can enforce lives here as schema patterns, enums
//! and CEL rules, so a bad object is refused at `kubectl apply` time with a clear message.
//!
//! By part: the spec and its small references (`mod.rs`), the chart block
//! (`chart_spec.rs`), the actions' settings (`lifecycle.rs`), what the engine checks on a
//! deployed release (`checks.rs`), and the observed state (`observed.rs`).

mod chart_spec;
mod checks;
mod lifecycle;
mod observed;
mod post_render;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

pub use self::chart_spec::{ChartSpec, GitRef, GitSource, LocalObjectReference};
pub use self::checks::{
    ConfigTracking, CustomHealthCheck, DriftDetection, DriftDetectionMode, HealthCheck, IgnoreRule,
    IgnoreTarget,
};
pub use self::lifecycle::{
    ActionStrategy, ActionStrategyName, CommonMetadata, CrdPolicy, DEFAULT_RETRY_INTERVAL,
    DeletionPropagation, Install, InstallRemediation, RemediationStrategy, Rollback,
    ServerSideApplyMode, Test, TestFilter, Uninstall, Upgrade, UpgradeRemediation,
};
pub use self::observed::{
    CHANGES_KEPT, ChangeRecord, ContestedField, DriftChecked, DriftStatus, DriftedObject,
    EngineRef, ExternalRevision, HelmReleaseStatus, Pin, ReleaseAction, Snapshot, WaitStatus,
};
pub use self::post_render::{
    Image, Kustomize, Patch, PostRenderStrategy, PostRenderer, Selector,
    digest as post_renderers_digest,
};
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

/// Where a release's remote cluster's kubeconfig is (`spec.kubeConfig`).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct KubeConfigReference {
    /// A Secret of the HelmRelease's namespace.
    pub secret_ref: KubeConfigSecretRef,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct KubeConfigSecretRef {
    pub name: String,
    /// The Secret's key holding the kubeconfig (default `value`, then `value.yaml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
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

    /// Deploy to another cluster (Flux's field): the kubeconfig a Secret of the
    /// HelmRelease's namespace holds (key `value`, else `value.yaml`, unless `key` is
    /// given). The chart's objects, Helm's storage, `lookup`, health checks and drift
    /// checks are on that cluster; the HelmRelease, its status and valuesFrom stay here.
    /// `serviceAccountName` is impersonated there. Refused: `exec` and
    /// `insecure-skip-tls-verify` unless the engine allows them, files of the engine's
    /// machine, auth providers, impersonation and proxies (docs/user-guide/remote.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_config: Option<KubeConfigReference>,

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

    /// Labels and annotations added to every object the chart renders (Flux's field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_metadata: Option<CommonMetadata>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,

    /// How custom resources of the release are judged in the health-check wait: CEL
    /// expressions per kind (or per API group, without a kind), with Flux's meaning
    /// (fluxcd/pkg/runtime/cel, evaluated by the render helper). Flux's field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub health_check_exprs: Vec<CustomHealthCheck>,

    /// Which readiness rules the health-check wait follows (Flux's field): `poller` (the
    /// default), kstatus' rules as Helm 4's `--wait` and Flux's poller apply them;
    /// `legacy`, Helm 3's (`--wait=legacy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_strategy: Option<WaitStrategy>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_tracking: Option<ConfigTracking>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_detection: Option<DriftDetection>,

    /// PostRenderers holds an array of Helm PostRenderers, which will be applied in order
    /// of their definition (Flux's field): kustomize patches and images applied to what
    /// the chart renders, hooks included, before it is stored, applied and checked for
    /// drift. Needs the render helper (`--renderer helm` refuses them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub post_renderers: Vec<PostRenderer>,

    /// What the post-renderers see (Flux's field, Helm 4's strategies): `combined`, hooks
    /// and templates in one stream (Helm 4's default); `separate`, each in a stream of
    /// its own; `nohooks`, templates only (Helm 3's behaviour).
    #[serde(default, skip_serializing_if = "PostRenderStrategy::is_default")]
    pub post_render_strategy: PostRenderStrategy,
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
#[serde(rename_all = "camelCase")]
pub struct DependencyReference {
    pub name: String,
    /// Defaults to the HelmRelease's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// A CEL expression over `self` (this HelmRelease) and `dep` (the dependency) that
    /// says the dependency is ready, in place of its Ready condition (Flux's field and
    /// meaning, evaluated by the render helper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_expr: Option<String>,
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

    /// Whether the health-check wait follows Helm 3's readiness rules (`waitStrategy:
    /// legacy`).
    pub fn waits_as_helm_3(&self) -> bool {
        self.spec
            .wait_strategy
            .as_ref()
            .is_some_and(|w| w.name == WaitStrategyName::Legacy)
    }

    /// Whether an upgrade keeps the previous revision's values (`upgrade.preserveValues`).
    pub fn preserves_values(&self) -> bool {
        self.spec
            .upgrade
            .as_ref()
            .is_some_and(|u| u.preserve_values)
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

    /// The longest time one action's hooks and health check may take: spec.timeout or an
    /// action's own timeout, whichever is longest.
    pub fn longest_action_timeout(&self) -> Duration {
        let s = &self.spec;
        [
            s.install.as_ref().and_then(|a| a.timeout),
            s.upgrade.as_ref().and_then(|a| a.timeout),
            s.test.as_ref().and_then(|a| a.timeout),
            s.rollback.as_ref().and_then(|a| a.timeout),
            s.uninstall.as_ref().and_then(|a| a.timeout),
        ]
        .into_iter()
        .flatten()
        .fold(s.timeout, std::cmp::max)
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

/// The manifest digest (64 hex digits) of an OCI revision `<tag>@sha256:<digest>`.
pub fn manifest_digest_of(revision: &str) -> Option<&str> {
    revision
        .rsplit_once("@sha256:")
        .map(|(_, d)| d)
        .filter(|d| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The commit in a Git revision, `<ref>@sha1:<commit>` (or `sha1:<commit>`).
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
        crate::text::yaml::from_str(y).expect("valid HelmRelease")
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
  commonMetadata: {labels: {team: web}, annotations: {owner: ops}}
  install: {timeout: 10m, replace: true, strategy: {name: RetryOnFailure, retryInterval: 1m}, createNamespace: true, crds: CreateReplace, remediation: {retries: 3}}
  upgrade: {timeout: 7m, force: true, strategy: {name: RemediateOnFailure}, cleanupOnFail: true, remediation: {retries: -1, strategy: uninstall, remediateLastFailure: false}}
  test: {enable: true, timeout: 2m, ignoreFailures: true}
  rollback: {timeout: 1m, disableHooks: true, force: true, cleanupOnFail: true, recreate: true}
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
        let install = hr.spec.install.as_ref().unwrap();
        assert_eq!(
            install.strategy,
            Some(ActionStrategy {
                name: ActionStrategyName::RetryOnFailure,
                retry_interval: Some(Duration::from_secs(60)),
            })
        );
        assert!(install.replace);
        let rollback = hr.spec.rollback.as_ref().unwrap();
        assert!(rollback.force && rollback.cleanup_on_fail && rollback.recreate);
        assert_eq!(
            hr.spec.common_metadata.as_ref().unwrap().labels["team"],
            "web"
        );
        // The longest of spec.timeout (90s) and the actions' own.
        assert_eq!(hr.longest_action_timeout(), Duration::from_secs(600));
    }
}

/// Flux's `spec.waitStrategy`.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct WaitStrategy {
    pub name: WaitStrategyName,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum WaitStrategyName {
    /// kstatus' rules (Helm 4's default `--wait`, Flux's poller).
    Poller,
    /// Helm 3's readiness checks (Helm 4's `--wait=legacy`).
    Legacy,
}

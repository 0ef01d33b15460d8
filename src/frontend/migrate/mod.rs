//! `wheelhouse migrate`: a Flux `helm.toolkit.fluxcd.io/v2` HelmRelease as a wheelhouse
//! `wheelhouse.dev/v1alpha1` HelmRelease that continues the same Helm release.
//!
//! [`convert`] is pure: it takes the Flux object as read from the cluster (all of it, as
//! JSON) and the `source.toolkit.fluxcd.io/v1` HelmRepository its chart comes from, and
//! returns the wheelhouse object with a list of what it could not carry over. A field is
//! copied only where wheelhouse's schema has it with the same meaning; every other field
//! that is set, on the HelmRelease or its source, is named, with the reason, in
//! [`Migrated::not_carried`], as are the Flux controllers' own labels and annotations (the
//! others are carried). The Helm release (name, namespace, storage namespace) is always
//! the one Flux recorded, so wheelhouse continues its history (the next change is an
//! upgrade to the next revision) instead of installing a second release. The result is
//! checked by reading it back as [`HelmRelease`]: a field the mapping writes that
//! wheelhouse does not know fails loudly.
//!
//! By part: the Helm release Flux recorded (`helm_identity.rs`), the chart's source
//! (`chart_source.rs`), the fields carried as they are (`object_fields.rs`), the record of
//! what was not carried and why (`mapping.rs`), and the read-back check (`read_back.rs`).

mod chart_source;
mod helm_identity;
mod mapping;
mod object_fields;
mod read_back;

use serde_json::{Map, Value, json};

use crate::api::HelmRelease;
use crate::api::flux::FluxHelmRelease;
use chart_source::chart;
pub use chart_source::{Repository, SourceRef, chart_ref, helm_chart_source, source_ref};
pub use helm_identity::{HelmIdentity, shorten_name};
use helm_identity::{helm_identity, names};
use mapping::{Mapping, text};
use object_fields::{action, drift_detection, metadata, plain, post_renderers};
use read_back::read_back;

/// The wheelhouse HelmRelease made from a Flux one.
#[derive(Debug, Clone)]
pub struct Migrated {
    /// The object to print or apply: only the fields the mapping set.
    pub object: Value,
    /// The same, read back as wheelhouse reads it (defaults filled in).
    pub release: HelmRelease,
    /// `<path> (<why>)` for every field set on the Flux objects that wheelhouse does not
    /// carry with the same meaning.
    pub not_carried: Vec<String>,
    /// What the operator should know besides: behaviour that differs, things to check.
    pub notes: Vec<String>,
    /// The Helm release both objects manage.
    pub helm: HelmIdentity,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("not a Flux HelmRelease (helm.toolkit.fluxcd.io/v2): {0}")]
    NotFlux(String),
    /// The chart's source, or where the release is deployed, cannot be expressed in
    /// wheelhouse; `not_carried` lists everything else that would not have been carried.
    #[error("{reason}")]
    Refused {
        reason: String,
        not_carried: Vec<String>,
    },
    #[error(
        "the migrated HelmRelease does not read back as wheelhouse's (a bug in wheelhouse migrate): {0}"
    )]
    Invalid(String),
}

/// The wheelhouse HelmRelease for `flux` (a whole `helm.toolkit.fluxcd.io/v2` HelmRelease
/// as JSON), with its chart from `repository`. The result is active (`suspend: false`)
/// whatever Flux's `spec.suspend` says: migrating means suspending the Flux object so that
/// wheelhouse takes over (the caller writes it suspended on request).
pub fn convert(flux: &Value, repository: Option<&Repository>) -> Result<Migrated, Error> {
    let api_version = text(flux, "apiVersion").unwrap_or_default();
    let kind = text(flux, "kind").unwrap_or_default();
    if !api_version.starts_with("helm.toolkit.fluxcd.io/") || kind != "HelmRelease" {
        return Err(Error::NotFlux(format!(
            "apiVersion {api_version:?}, kind {kind:?}"
        )));
    }
    let typed: FluxHelmRelease = serde_json::from_value(flux.clone())
        .map_err(|e| Error::NotFlux(format!("it does not read as one: {e}")))?;
    let name = typed
        .metadata
        .name
        .clone()
        .ok_or_else(|| Error::NotFlux("it has no name".into()))?;
    let namespace = typed
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let mut spec = match flux.get("spec") {
        Some(Value::Object(spec)) => spec.clone(),
        _ => return Err(Error::NotFlux("it has no spec".into())),
    };
    let mut m = Mapping::default();
    let mut out = Map::new();

    // Suspension hands the release over; it is not the wheelhouse release's state.
    if spec.remove("suspend").and_then(|v| v.as_bool()) == Some(true) {
        m.note(
            "spec.suspend: the Flux HelmRelease is suspended (as migrating needs); the wheelhouse HelmRelease is written active so that wheelhouse takes over (`--suspended` writes it suspended)",
        );
    }
    out.insert("suspend".into(), Value::Bool(false));

    let helm = helm_identity(&typed, &spec, &namespace, &mut m);
    chart(&mut spec, flux, &namespace, repository, &mut out, &mut m)?;
    // Without a chart (m.no_chart) the rest is still mapped, so that the refusal lists
    // everything that would not be carried in one go.
    names(&mut spec, &name, &namespace, &helm, &mut out);
    plain(&mut spec, &mut out, &mut m);
    for section in ["install", "upgrade", "test", "rollback", "uninstall"] {
        let v = spec.remove(section).unwrap_or(Value::Null);
        if let Some(carried) = action(section, v, &mut m) {
            out.insert(section.into(), carried);
        }
    }
    m.note(
        "install/upgrade.takeOwnership is written as Flux's helm-controller behaves: it takes over existing objects unless disableTakeOwnership. Conflicts are not forced: fields helm-controller holds with the values it deployed are the release's own and move to wheelhouse on the next upgrade; a field another manager changed stays theirs (Flux would have forced it)",
    );
    if let Some(v) = spec.remove("driftDetection")
        && let Some(carried) = drift_detection(v, &mut m)
    {
        out.insert("driftDetection".into(), carried);
    }
    if let Some(v) = spec.remove("postRenderers")
        && let Some(carried) = post_renderers(v, &mut m)
    {
        out.insert("postRenderers".into(), carried);
    }
    // Flux's default waiter, kstatus' poller, is the rules wheelhouse waits with by
    // default; `legacy` (Helm 3's readiness checks) is carried as it is.
    match spec.remove("waitStrategy") {
        Some(w) if w["name"].as_str().is_none_or(|n| n == "poller") => {}
        Some(w) if w["name"] == "legacy" => {
            out.insert("waitStrategy".into(), serde_json::json!({"name": "legacy"}));
        }
        Some(w) => m.drop_field("spec.waitStrategy", &w),
        None => {}
    }
    // Helm 4's strategies, with the same names; the default says nothing.
    match spec.remove("postRenderStrategy") {
        Some(Value::String(s)) if s == "combined" || s.is_empty() => {}
        Some(v @ Value::String(_)) => {
            out.insert("postRenderStrategy".into(), v);
        }
        Some(v) => m.drop_field("spec.postRenderStrategy", &v),
        None => {}
    }
    for (key, value) in spec {
        m.drop_field(&format!("spec.{key}"), &value);
    }

    // Before a refusal, which then names the bookkeeping left behind too.
    let metadata = metadata(flux, &name, &namespace, &mut m);

    if let Some(reason) = m.no_chart.take().or_else(|| m.refused.take()) {
        return Err(Error::Refused {
            reason,
            not_carried: m.not_carried,
        });
    }

    let object = json!({
        "apiVersion": format!("{}/{}", crate::api::GROUP, crate::api::VERSION),
        "kind": crate::api::KIND,
        "metadata": metadata,
        "spec": Value::Object(out),
    });
    let release = read_back(&object, &helm)?;
    Ok(Migrated {
        object,
        release,
        not_carried: m.not_carried,
        notes: m.notes,
        helm,
    })
}

/// The result as YAML, with what was not carried and the notes as comments on top.
pub fn to_yaml(migrated: &Migrated, from: &str) -> String {
    let mut text = format!("# Migrated from Flux HelmRelease {from} by `wheelhouse migrate`.\n");
    let h = &migrated.helm;
    text.push_str(&format!(
        "# Helm release {} in namespace {} (stored in {}){}.\n",
        h.release_name,
        h.target_namespace,
        h.storage_namespace,
        h.revision
            .map(|r| format!(", continued from revision {r}"))
            .unwrap_or_default()
    ));
    for line in &migrated.not_carried {
        text.push_str(&comment(&format!("not carried: {line}")));
    }
    for line in &migrated.notes {
        text.push_str(&comment(&format!("note: {line}")));
    }
    text.push_str(&crate::text::yaml::to_string(&migrated.object));
    text
}

fn comment(line: &str) -> String {
    format!("# {}\n", line.replace(['\n', '\r'], " "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Value {
        crate::text::yaml::from_str(text).unwrap()
    }

    fn http_repo(namespace: &str) -> Repository {
        Repository::HelmRepository(yaml(&format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {{name: charts, namespace: {namespace}}}\nspec: {{url: 'https://charts.example.com/stable'}}\n"
        )))
    }

    const FULL: &str = r#"
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: podinfo
  namespace: apps
  uid: 2b0d6d5e-0000-4000-8000-000000000001
  resourceVersion: "4711"
  generation: 3
  finalizers: [finalizers.fluxcd.io]
  managedFields: [{manager: kustomize-controller, operation: Apply}]
  labels:
    app: podinfo
    kustomize.toolkit.fluxcd.io/name: apps
    kustomize.toolkit.fluxcd.io/namespace: flux-system
    helm.toolkit.fluxcd.io/name: podinfo
  annotations:
    team: web
    reconcile.fluxcd.io/requestedAt: "2026-01-01T00:00:00Z"
    kubectl.kubernetes.io/last-applied-configuration: "{}"
spec:
  interval: 10m
  timeout: 2m30s
  suspend: true
  maxHistory: 3
  serviceAccountName: deployer
  persistentClient: false
  kubeConfig: {secretRef: {name: remote}}
  commonMetadata: {labels: {team: web}}
  postRenderers:
    - kustomize:
        patches:
          - patch: "x"
            target: {kind: Deployment, labelSelector: "app=web", someFutureKey: 1}
        images: [{name: nginx, newTag: "2.0"}]
    - {}
  postRenderStrategy: nohooks
  waitStrategy: {name: legacy}
  healthCheckExprs:
    - {apiVersion: example.com/v1, kind: Widget, current: "status.phase == 'Ready'", failed: "status.phase == 'Broken'", someFutureKey: 1}
    - {apiVersion: other.example.com/v1, current: "true", inProgress: "false"}
  chart:
    metadata: {labels: {x: y}}
    spec:
      chart: podinfo
      version: ">=6.0.0 <7.0.0"
      interval: 5m
      reconcileStrategy: ChartVersion
      valuesFiles: [values.yaml, values-prod.yaml]
      verify: {provider: cosign}
      sourceRef: {kind: HelmRepository, name: charts}
  values:
    replicaCount: 2
    ingress: {enabled: true}
  valuesFrom:
    - {kind: ConfigMap, name: base}
    - {kind: Secret, name: creds, valuesKey: token, targetPath: auth.token, optional: true}
  dependsOn:
    - {name: redis}
    - {name: db, namespace: data, readyExpr: "true"}
  install:
    createNamespace: true
    crds: CreateReplace
    timeout: 10m
    replace: true
    strategy: {name: RetryOnFailure, retryInterval: 2m}
    disableTakeOwnership: true
    disableWaitForJobs: true
    disableSchemaValidation: true
    disableOpenAPIValidation: true
    remediation: {retries: 3, ignoreTestFailures: true}
    someFutureField: 1
  upgrade:
    cleanupOnFail: true
    force: true
    timeout: 7m
    strategy: {name: RemediateOnFailure}
    preserveValues: false
    serverSideApply: enabled
    remediation: {retries: -1, strategy: uninstall, remediateLastFailure: false}
  test: {enable: true, timeout: 1m, ignoreFailures: true, filters: [{name: smoke}]}
  rollback: {timeout: 1m, disableHooks: true, recreate: true, force: true, cleanupOnFail: true}
  uninstall: {keepHistory: true, deletionPropagation: foreground}
  driftDetection:
    mode: warn
    ignore:
      - paths: [/spec/replicas]
      - paths: [/data]
        target: {kind: ConfigMap}
status:
  observedGeneration: 3
  storageNamespace: apps
  history:
    - {name: podinfo, namespace: apps, version: 4, status: deployed, chartName: podinfo, chartVersion: 6.5.0}
"#;

    /// Flux's default waiter is kstatus' poller, wheelhouse's own rules: nothing to say.
    #[test]
    fn the_poller_wait_strategy_migrates_without_a_word() {
        let mut flux = yaml(FULL);
        flux["spec"]["waitStrategy"] = json!({"name": "poller"});
        let m = convert(&flux, Some(&http_repo("apps"))).unwrap();
        assert!(
            !m.not_carried
                .iter()
                .any(|l| l.starts_with("spec.waitStrategy")),
            "{:#?}",
            m.not_carried
        );
        assert!(m.object["spec"].get("waitStrategy").is_none());
    }

    /// Client-side apply has its meaning here: carried as it is, in all three actions.
    #[test]
    fn server_side_apply_off_is_carried_with_its_meaning() {
        let mut flux = yaml(FULL);
        flux["spec"]["install"]["serverSideApply"] = json!(false);
        flux["spec"]["upgrade"]["serverSideApply"] = json!("disabled");
        flux["spec"]["rollback"]["serverSideApply"] = json!("auto");
        let m = convert(&flux, Some(&http_repo("apps"))).unwrap();
        assert!(
            !m.not_carried.iter().any(|l| l.contains("serverSideApply")),
            "{:#?}",
            m.not_carried
        );
        assert_eq!(m.object["spec"]["install"]["serverSideApply"], json!(false));
        assert_eq!(
            m.object["spec"]["upgrade"]["serverSideApply"],
            json!("disabled")
        );
        assert_eq!(
            m.object["spec"]["rollback"]["serverSideApply"],
            json!("auto")
        );
        assert_eq!(
            m.release.spec.upgrade.as_ref().unwrap().server_side_apply,
            crate::api::ServerSideApplyMode::Disabled
        );
    }

    /// A release on a remote cluster stays there; one that reaches it with a cloud
    /// provider's identity is refused whole, never moved to the engine's cluster.
    #[test]
    fn a_remote_release_keeps_its_kubeconfig_secret_and_a_cloud_identity_is_refused() {
        let mut flux = yaml(FULL);
        flux["spec"]["kubeConfig"] =
            json!({"secretRef": {"name": "prod", "key": "kubeconfig.yaml"}});
        let m = convert(&flux, Some(&http_repo("apps"))).unwrap();
        assert_eq!(
            m.object["spec"]["kubeConfig"],
            json!({"secretRef": {"name": "prod", "key": "kubeconfig.yaml"}})
        );
        assert_eq!(
            m.release
                .spec
                .kube_config
                .as_ref()
                .unwrap()
                .secret_ref
                .key
                .as_deref(),
            Some("kubeconfig.yaml")
        );
        for kc in [
            json!({"configMapRef": {"name": "aks"}}),
            json!({"secretRef": {"name": "a"}, "configMapRef": {"name": "b"}}),
        ] {
            flux["spec"]["kubeConfig"] = kc.clone();
            let Err(Error::Refused { reason, .. }) = convert(&flux, Some(&http_repo("apps")))
            else {
                panic!("{kc} is migrated");
            };
            assert!(reason.contains("spec.kubeConfig"), "{reason}");
        }
    }

    #[test]
    fn a_full_flux_release_keeps_every_field_of_the_same_meaning_and_names_the_rest() {
        let m = convert(&yaml(FULL), Some(&http_repo("apps"))).unwrap();
        let expected = yaml(
            r#"
apiVersion: wheelhouse.dev/v1alpha1
kind: HelmRelease
metadata:
  name: podinfo
  namespace: apps
  labels: {app: podinfo}
  annotations: {team: web}
spec:
  chart: {repository: "https://charts.example.com/stable", name: podinfo, version: ">=6.0.0 <7.0.0", interval: 5m, valuesFiles: [values.yaml, values-prod.yaml]}
  interval: 10m
  timeout: 2m30s
  suspend: false
  waitStrategy: {name: legacy}
  maxHistory: 3
  serviceAccountName: deployer
  kubeConfig: {secretRef: {name: remote}}
  values:
    replicaCount: 2
    ingress: {enabled: true}
  valuesFrom:
    - {kind: ConfigMap, name: base}
    - {kind: Secret, name: creds, valuesKey: token, targetPath: auth.token, optional: true}
  dependsOn:
    - {name: redis}
    - {name: db, namespace: data, readyExpr: "true"}
  healthCheckExprs:
    - {apiVersion: example.com/v1, kind: Widget, current: "status.phase == 'Ready'", failed: "status.phase == 'Broken'"}
    - {apiVersion: other.example.com/v1, current: "true", inProgress: "false"}
  commonMetadata: {labels: {team: web}}
  install: {timeout: 10m, replace: true, strategy: {name: RetryOnFailure, retryInterval: 2m}, createNamespace: true, crds: CreateReplace, disableWaitForJobs: true, disableSchemaValidation: true, remediation: {retries: 3, ignoreTestFailures: true}}
  upgrade: {timeout: 7m, force: true, strategy: {name: RemediateOnFailure}, cleanupOnFail: true, preserveValues: false, serverSideApply: enabled, takeOwnership: true, remediation: {retries: -1, strategy: uninstall, remediateLastFailure: false}}
  test: {enable: true, timeout: 1m, ignoreFailures: true, filters: [{name: smoke}]}
  rollback: {timeout: 1m, disableHooks: true, recreate: true, force: true, cleanupOnFail: true}
  uninstall: {keepHistory: true, deletionPropagation: foreground}
  driftDetection: {mode: warn, ignore: [{paths: [/spec/replicas]}, {paths: [/data], target: {kind: ConfigMap}}]}
  postRenderers:
    - kustomize:
        patches: [{patch: "x", target: {kind: Deployment, labelSelector: "app=web"}}]
        images: [{name: nginx, newTag: "2.0"}]
  postRenderStrategy: nohooks
"#,
        );
        assert_eq!(
            m.object,
            expected,
            "{}",
            crate::text::yaml::to_string(&m.object)
        );
        let paths: Vec<&str> = m
            .not_carried
            .iter()
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        let mut expected_paths = vec![
            "metadata.annotations[kubectl.kubernetes.io/last-applied-configuration]",
            "metadata.annotations[reconcile.fluxcd.io/requestedAt]",
            "metadata.labels[helm.toolkit.fluxcd.io/name]",
            "metadata.labels[kustomize.toolkit.fluxcd.io/name]",
            "metadata.labels[kustomize.toolkit.fluxcd.io/namespace]",
            "spec.chart.metadata",
            "spec.chart.spec.verify",
            "spec.healthCheckExprs[0].someFutureKey",
            "spec.install.someFutureField",
            "spec.postRenderers[0].kustomize.patches[0].target.someFutureKey",
        ];
        let mut got = paths.clone();
        got.sort_unstable();
        expected_paths.sort_unstable();
        assert_eq!(got, expected_paths, "{:#?}", m.not_carried);
        // Each comes with its reason.
        assert!(
            m.not_carried
                .contains(&"spec.install.someFutureField (wheelhouse has no such field)".into())
        );
        assert!(
            m.notes
                .iter()
                .any(|n| n.contains("Kustomization flux-system/apps")),
            "{:#?}",
            m.notes
        );
        assert!(m.notes.iter().any(|n| n.starts_with("spec.suspend")));
        assert!(m.notes.iter().any(|n| n.contains("redis, data/db")));
        assert_eq!(
            m.helm,
            HelmIdentity {
                release_name: "podinfo".into(),
                target_namespace: "apps".into(),
                storage_namespace: "apps".into(),
                revision: Some(4),
            }
        );
        assert_eq!(m.release.spec.max_history, 3);
        assert!(!m.release.spec.suspend);
        assert!(m.release.status.is_none());

        // The YAML printed reads back as the same object, comments and all.
        let printed = to_yaml(&m, "apps/podinfo");
        assert!(printed.starts_with("# Migrated from Flux HelmRelease apps/podinfo"));
        assert!(
            printed.contains("# not carried: spec.chart.spec.verify ("),
            "{printed}"
        );
        let read: Value = crate::text::yaml::from_str(&printed).unwrap();
        assert_eq!(read, m.object);
    }

    /// A Kustomization reads its per-object directives from the object it applies: they
    /// stay on the wheelhouse object committed in the Flux object's place. The Flux
    /// controllers' own keys stay behind, each named.
    #[test]
    fn a_substitute_disabled_release_keeps_its_directives_and_flux_bookkeeping_is_named() {
        let mut flux = yaml(FULL);
        let directives = json!({
            "kustomize.toolkit.fluxcd.io/substitute": "disabled",
            "kustomize.toolkit.fluxcd.io/prune": "disabled",
            "kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent",
            "kustomize.toolkit.fluxcd.io/force": "enabled",
            "kustomize.toolkit.fluxcd.io/reconcile": "disabled",
            "kustomize.toolkit.fluxcd.io/decrypt": "disabled",
            "helm.toolkit.fluxcd.io/driftDetection": "disabled",
            "team": "web",
        });
        let mut annotations = directives.clone();
        for key in [
            "reconcile.fluxcd.io/requestedAt",
            "reconcile.fluxcd.io/forceAt",
            "reconcile.fluxcd.io/resetAt",
        ] {
            annotations[key] = json!("2026-01-01T00:00:00Z");
        }
        annotations["kustomize.toolkit.fluxcd.io/checksum"] = json!("0123");
        annotations["fluxcd.io/sync-checksum"] = json!("0123");
        annotations["kubectl.kubernetes.io/last-applied-configuration"] = json!("{}");
        flux["metadata"]["annotations"] = annotations;
        flux["metadata"]["labels"] = json!({
            "app": "podinfo",
            "kustomize.toolkit.fluxcd.io/substitute": "disabled",
            "reconcile.fluxcd.io/watch": "Enabled",
            "kustomize.toolkit.fluxcd.io/name": "apps",
            "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
            "helm.toolkit.fluxcd.io/name": "platform",
            "helm.toolkit.fluxcd.io/namespace": "flux-system",
            "fluxcd.io/sync-gc-mark": "x",
        });
        flux["metadata"]["ownerReferences"] = json!([
            {"apiVersion": "fluxcd.controlplane.io/v1", "kind": "ResourceSet", "name": "apps", "uid": "0b0e"}
        ]);
        let m = convert(&flux, Some(&http_repo("apps"))).unwrap();
        assert_eq!(m.object["metadata"]["annotations"], directives);
        assert_eq!(
            m.object["metadata"]["labels"],
            json!({
                "app": "podinfo",
                "kustomize.toolkit.fluxcd.io/substitute": "disabled",
                "reconcile.fluxcd.io/watch": "Enabled",
            })
        );
        assert!(m.object["metadata"].get("ownerReferences").is_none());
        let mut named: Vec<&str> = m
            .not_carried
            .iter()
            .filter(|l| l.starts_with("metadata."))
            .map(|l| l.split(" (").next().unwrap())
            .collect();
        named.sort_unstable();
        assert_eq!(
            named,
            [
                "metadata.annotations[fluxcd.io/sync-checksum]",
                "metadata.annotations[kubectl.kubernetes.io/last-applied-configuration]",
                "metadata.annotations[kustomize.toolkit.fluxcd.io/checksum]",
                "metadata.annotations[reconcile.fluxcd.io/forceAt]",
                "metadata.annotations[reconcile.fluxcd.io/requestedAt]",
                "metadata.annotations[reconcile.fluxcd.io/resetAt]",
                "metadata.labels[fluxcd.io/sync-gc-mark]",
                "metadata.labels[helm.toolkit.fluxcd.io/name]",
                "metadata.labels[helm.toolkit.fluxcd.io/namespace]",
                "metadata.labels[kustomize.toolkit.fluxcd.io/name]",
                "metadata.labels[kustomize.toolkit.fluxcd.io/namespace]",
                "metadata.ownerReferences",
            ]
        );
        // Each with why: a request wheelhouse would answer anew, an owner label.
        let why = |path: &str| {
            m.not_carried
                .iter()
                .find(|l| l.starts_with(&format!("{path} (")))
                .unwrap_or_else(|| panic!("{path} in {:#?}", m.not_carried))
                .clone()
        };
        assert!(
            why("metadata.annotations[reconcile.fluxcd.io/forceAt]")
                .contains("would force an upgrade")
        );
        assert!(
            why("metadata.labels[kustomize.toolkit.fluxcd.io/name]")
                .contains("kustomize-controller's owner label")
        );
        assert!(why("metadata.ownerReferences").contains("belongs to ResourceSet apps"));
        let printed = to_yaml(&m, "apps/podinfo");
        assert!(
            printed.contains("\n    kustomize.toolkit.fluxcd.io/substitute: disabled\n"),
            "{printed}"
        );
        assert!(
            printed
                .contains("# not carried: metadata.annotations[reconcile.fluxcd.io/requestedAt] ("),
            "{printed}"
        );

        // A refused release names them too, with everything else not carried.
        let Err(Error::Refused { not_carried, .. }) = convert(&flux, None) else {
            panic!("migrated without its source");
        };
        assert!(
            not_carried
                .iter()
                .any(|l| l.starts_with("metadata.labels[kustomize.toolkit.fluxcd.io/name] (")),
            "{not_carried:#?}"
        );
    }

    /// source-controller's api/v1 fields of each source kind: carried into the chart
    /// block, or named.
    #[test]
    fn every_source_setting_is_carried_or_named() {
        let paths = |m: &Migrated| {
            let mut paths: Vec<String> = m
                .not_carried
                .iter()
                .map(|l| l.split(" (").next().unwrap().to_owned())
                .collect();
            paths.sort_unstable();
            paths
        };
        let flux = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {interval: 5m, chart: {spec: {chart: web, sourceRef: {kind: HelmRepository, name: charts}}}}\n",
        );
        let repo = Repository::HelmRepository(yaml(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: charts, namespace: apps}\nspec:\n  url: https://charts.example.com\n  type: default\n  provider: generic\n  secretRef: {name: auth}\n  interval: 1h\n  timeout: 3m\n  suspend: true\n  insecure: true\n  passCredentials: true\n  certSecretRef: {name: tls}\n  accessFrom: {namespaceSelectors: [{matchLabels: {team: web}}]}\n  someFutureField: 1\n",
        ));
        let m = convert(&flux, Some(&repo)).unwrap();
        assert_eq!(
            m.object["spec"]["chart"],
            json!({"repository": "https://charts.example.com", "name": "web", "secretRef": {"name": "auth"}})
        );
        // The timeout the API server writes by default is wheelhouse's own bound: unsaid.
        let defaulted = Repository::HelmRepository(yaml(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: charts, namespace: apps}\nspec: {url: https://charts.example.com, timeout: 60s}\n",
        ));
        assert!(
            convert(&flux, Some(&defaulted))
                .unwrap()
                .not_carried
                .is_empty(),
            "a 60s timeout"
        );
        let at = "HelmRepository apps/charts spec";
        assert_eq!(
            paths(&m),
            [
                "accessFrom",
                "certSecretRef",
                "insecure",
                "interval",
                "passCredentials",
                "someFutureField",
                "suspend",
                "timeout"
            ]
            .map(|k| format!("{at}.{k}"))
        );
        let timeout = m
            .not_carried
            .iter()
            .find(|l| l.starts_with(&format!("{at}.timeout (")))
            .unwrap();
        assert!(timeout.contains("by its own 60s"), "{timeout}");
        assert!(
            m.not_carried
                .iter()
                .any(|l| l.starts_with(&format!("{at}.suspend (Flux stopped fetching"))),
            "{:#?}",
            m.not_carried
        );

        // An OCI HelmRepository is static in Flux: its interval and suspension do nothing.
        let oci = Repository::HelmRepository(yaml(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: charts, namespace: apps}\nspec: {type: oci, url: 'oci://r.example/charts', interval: 5m, suspend: true, timeout: 3m}\n",
        ));
        let m = convert(&flux, Some(&oci)).unwrap();
        assert_eq!(
            paths(&m),
            ["interval", "suspend", "timeout"].map(|k| format!("{at}.{k}"))
        );
        assert!(
            m.not_carried.contains(&format!(
                "{at}.interval (Flux does not use it for a HelmRepository of type oci)"
            )),
            "{:#?}",
            m.not_carried
        );

        let git_flux = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {interval: 5m, chart: {spec: {chart: ./charts/web, reconcileStrategy: Revision, sourceRef: {kind: GitRepository, name: repo}}}}\n",
        );
        let git = Repository::GitRepository(yaml(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: repo, namespace: apps}\nspec: {url: 'https://g.example/r.git', interval: 1m, ref: {branch: main}, timeout: 3m, suspend: true, serviceAccountName: git}\n",
        ));
        let m = convert(&git_flux, Some(&git)).unwrap();
        assert_eq!(m.object["spec"]["chart"]["interval"], "1m");
        assert_eq!(
            paths(&m),
            ["serviceAccountName", "suspend", "timeout"]
                .map(|k| format!("GitRepository apps/repo spec.{k}"))
        );

        let oci_repository = Repository::OciRepository(yaml(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata: {name: web-chart, namespace: apps}\nspec: {url: 'oci://r.example/web', interval: 10m, ref: {tag: 1.2.3}, timeout: 3m, suspend: true, ignore: '*.md', layerSelector: {mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip, operation: extract}}\n",
        ));
        let m = convert(&yaml(CHART_REF), Some(&oci_repository)).unwrap();
        assert_eq!(
            paths(&m),
            ["ignore", "suspend", "timeout"]
                .map(|k| format!("OCIRepository apps/web-chart spec.{k}"))
        );

        let chart_flux = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {interval: 5m, chartRef: {kind: HelmChart, name: web}}\n",
        );
        let helm_chart = Repository::HelmChart {
            chart: yaml(
                "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmChart\nmetadata: {name: web, namespace: apps}\nspec: {chart: web, interval: 2m, suspend: true, sourceRef: {kind: HelmRepository, name: charts}}\n",
            ),
            source: Some(Box::new(http_repo("apps"))),
        };
        let m = convert(&chart_flux, Some(&helm_chart)).unwrap();
        assert_eq!(paths(&m), ["HelmChart apps/web spec.suspend"]);
        assert!(
            m.not_carried[0].contains("Flux stopped building this chart"),
            "{:#?}",
            m.not_carried
        );
    }

    /// What the user quoted stays a string for every reader of the printed YAML: YAML 1.1
    /// with its whole type repository (PyYAML: dates, `1:20`), go-yaml v2 and YAML 1.2.
    #[test]
    fn the_printed_yaml_reads_back_as_the_input_meant_under_yaml_1_1_and_1_2() {
        let looks_typed = [
            "2024-01-01",
            "2001-12-14t21:59:43.10-05:00",
            "2001-12-14 21:59:43.10 -5",
            "2026-01-01T00:00:00Z",
            "y",
            "Y",
            "yes",
            "No",
            "on",
            "OFF",
            "true",
            "False",
            "yEs",
            "~",
            "null",
            "Null",
            "NULL",
            "",
            "0x1F",
            "0o17",
            "0644",
            "1:20",
            "1_000",
            "0b1_0",
            ".inf",
            "-.inf",
            ".nan",
            "1e3",
            "1_000.5",
            "1.5",
            "=",
            "<<",
        ];
        let mut values = String::from("values:\n");
        for (i, s) in looks_typed.iter().enumerate() {
            values.push_str(&format!("    s{i}: \"{s}\"\n"));
        }
        values.push_str("    keys: {\"2024-01-01\": a, \"yes\": b, \"1:20\": c, \"=\": d}\n");
        values.push_str(
            "    list: [\"2024-01-01\", \"on\"]\n    typed: {bool: yes, octal: 0644, float: 1.5, big: 1.0e+21, tiny: 1.5e-7, none: ~, ts: 2024-01-01}\n",
        );
        let flux = yaml(&format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: web\n  namespace: apps\n  annotations: {{since: \"2024-01-01\", enabled: \"true\"}}\nspec:\n  interval: 5m\n  chart: {{spec: {{chart: web, version: \"1.20\", sourceRef: {{kind: HelmRepository, name: charts}}}}}}\n  {values}"
        ));
        // The input as Kubernetes clients read it: quoted strings are strings, and a plain
        // timestamp too.
        assert_eq!(flux["spec"]["values"]["s0"], "2024-01-01");
        assert_eq!(flux["spec"]["values"]["typed"]["ts"], "2024-01-01");
        assert_eq!(flux["spec"]["values"]["typed"]["octal"], 420);
        let m = convert(&flux, Some(&http_repo("apps"))).unwrap();
        let printed = to_yaml(&m, "apps/web");
        for (reader, read) in [
            (
                "YAML 1.1 types",
                crate::text::yaml::parse_documents_yaml_1_1_types(&printed),
            ),
            ("go-yaml v2", crate::text::yaml::parse_documents(&printed)),
            (
                "YAML 1.2",
                crate::text::yaml::parse_documents_yaml_1_2(&printed),
            ),
        ] {
            let read = read.unwrap_or_else(|e| panic!("{reader}: {e}\n{printed}"));
            assert_eq!(
                read,
                std::slice::from_ref(&m.object),
                "{reader}:\n{printed}"
            );
            assert_eq!(
                read[0]["spec"]["values"], flux["spec"]["values"],
                "{reader}:\n{printed}"
            );
            assert_eq!(read[0]["metadata"]["annotations"]["since"], "2024-01-01");
            assert_eq!(read[0]["spec"]["chart"]["version"], "1.20");
        }
        assert!(printed.contains("\n    s0: \"2024-01-01\"\n"), "{printed}");
        assert!(printed.contains("\n      big: 1.0e+21\n"), "{printed}");
    }

    #[test]
    fn the_release_name_and_namespaces_resolve_to_fluxs_release() {
        // targetNamespace: the release name is `<target>-<name>` in both; nothing else set.
        let flux = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: flux-system}\nspec: {interval: 5m, targetNamespace: apps, chart: {spec: {chart: web, sourceRef: {kind: HelmRepository, name: charts}}}}\n",
        );
        let m = convert(&flux, Some(&http_repo("flux-system"))).unwrap();
        let spec = &m.object["spec"];
        assert_eq!(spec["targetNamespace"], "apps");
        assert!(spec.get("releaseName").is_none(), "{spec}");
        assert!(spec.get("storageNamespace").is_none(), "{spec}");
        assert_eq!(m.release.release_name(), "apps-web");
        assert_eq!(m.release.storage_namespace(), "flux-system");
        assert_eq!(m.helm.revision, None);
        // helm-controller's own behaviour, which wheelhouse does only when asked.
        let behaves = json!({"takeOwnership": true});
        assert_eq!(spec["install"], behaves);
        assert_eq!(spec["upgrade"], behaves);
        // No forced conflicts: the fields helm-controller holds with the values it
        // deployed are the release's own, and an upgrade takes them over without force.
        assert!(spec.get("rollback").is_none(), "{spec}");
        assert!(spec.get("test").is_none() && spec.get("uninstall").is_none());
        assert!(!m.release.spec.upgrade.as_ref().unwrap().force_conflicts);
        assert!(m.not_carried.is_empty(), "{:#?}", m.not_carried);

        // What Flux recorded wins: a shortened name, another storage namespace.
        let long = "a-very-long-helmrelease-name-that-goes-on-and-on";
        let recorded = shorten_name(&format!("production-{long}"));
        assert_eq!(recorded.len(), 53);
        assert!(recorded.starts_with("production-a-very-long-helmrelease-name--"));
        let flux = yaml(&format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: {long}, namespace: flux-system}}\nspec: {{interval: 5m, targetNamespace: production, storageNamespace: production, chart: {{spec: {{chart: web, version: '*', sourceRef: {{kind: HelmRepository, name: charts}}}}}}}}\nstatus: {{storageNamespace: production, history: [{{name: {recorded}, namespace: production, version: 7}}]}}\n"
        ));
        let m = convert(&flux, Some(&http_repo("flux-system"))).unwrap();
        let spec = &m.object["spec"];
        assert_eq!(spec["releaseName"], recorded.as_str());
        assert_eq!(spec["targetNamespace"], "production");
        assert_eq!(spec["storageNamespace"], "production");
        assert!(spec["chart"].get("version").is_none(), "`*` is the latest");
        assert_eq!(m.helm.revision, Some(7));
        // No history yet: Flux's rule, shortened as helm-controller shortens it.
        let mut fresh = flux.clone();
        fresh.as_object_mut().unwrap().remove("status");
        let m = convert(&fresh, Some(&http_repo("flux-system"))).unwrap();
        assert_eq!(m.object["spec"]["releaseName"], recorded.as_str());

        // Recorded elsewhere than the spec now says: the recorded release is kept.
        let moved = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {interval: 5m, releaseName: front, chart: {spec: {chart: web, sourceRef: {kind: HelmRepository, name: charts}}}}\nstatus: {history: [{name: web, namespace: apps, version: 2}]}\n",
        );
        let m = convert(&moved, Some(&http_repo("apps"))).unwrap();
        assert_eq!(m.object["spec"]["releaseName"], "web");
        assert!(
            m.notes
                .iter()
                .any(|n| n.contains("now names front in apps")),
            "{:#?}",
            m.notes
        );
    }

    const CHART_REF: &str = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec:\n  interval: 5m\n  chartRef: {kind: OCIRepository, name: web-chart}\nstatus: {history: [{name: web, namespace: apps, version: 2, chartName: web, chartVersion: 1.2.3}]}\n";

    fn oci_repository(spec: &str) -> Repository {
        Repository::OciRepository(yaml(&format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata: {{name: web-chart, namespace: apps}}\nspec: {spec}\nstatus: {{artifact: {{digest: 'sha256:{}', revision: 'latest@sha256:{}'}}}}\n",
            "a".repeat(64),
            "a".repeat(64)
        )))
    }

    fn refused(flux: &Value, repository: Option<&Repository>) -> String {
        match convert(flux, repository) {
            Err(Error::Refused { reason, .. }) => reason,
            Err(e) => panic!("refused otherwise: {e}"),
            Ok(m) => panic!("carried: {}", crate::text::yaml::to_string(&m.object)),
        }
    }

    #[test]
    fn a_chart_ref_to_an_oci_repository_is_its_oci_chart_at_the_same_ref() {
        let flux = yaml(CHART_REF);
        // A tag that is a version, with credentials, plain HTTP and Flux's layer selector.
        let m = convert(
            &flux,
            Some(&oci_repository(
                "{url: 'oci://registry.example.com/charts/web', interval: 10m, insecure: true, ref: {tag: 1.2.3}, secretRef: {name: creds}, provider: generic, layerSelector: {mediaType: application/vnd.cncf.helm.chart.content.v1.tar+gzip, operation: copy}}",
            )),
        )
        .unwrap();
        assert_eq!(
            m.object["spec"]["chart"],
            json!({"repository": "oci://registry.example.com/charts", "name": "web", "version": "1.2.3",
                   "insecure": true, "secretRef": {"name": "creds"}, "interval": "10m"})
        );
        assert!(m.not_carried.is_empty(), "{:#?}", m.not_carried);
        assert!(m.notes.iter().any(|n| n.starts_with("chart.secretRef creds (from OCIRepository apps/web-chart)")));

        // Flux's order: a digest over a range over a tag; helm push's `_` for `+`.
        for (reference, version) in [
            (
                "{digest: 'sha256:0123', semver: 1.x, tag: 1.0.0}",
                "@sha256:0123",
            ),
            ("{semver: '>=1.0.0 <2.0.0', tag: 1.0.0}", ">=1.0.0 <2.0.0"),
            ("{tag: 1.2.3_build.7}", "1.2.3+build.7"),
            ("{tag: v0.15.0}", "v0.15.0"),
        ] {
            let m = convert(
                &flux,
                Some(&oci_repository(&format!(
                    "{{url: 'oci://r.example/web', ref: {reference}}}"
                ))),
            )
            .unwrap();
            assert_eq!(m.object["spec"]["chart"]["version"], version, "{reference}");
            assert_eq!(m.object["spec"]["chart"]["repository"], "oci://r.example");
        }
        // A tag that is not a version (or none: `latest`): the digest Flux fetched, said.
        let m = convert(&flux, Some(&oci_repository("{url: 'oci://r.example/web'}"))).unwrap();
        assert_eq!(
            m.object["spec"]["chart"]["version"],
            format!("@sha256:{}", "a".repeat(64))
        );
        assert!(
            m.notes
                .iter()
                .any(|n| n.contains("follows the tag \"latest\"")),
            "{:#?}",
            m.notes
        );
        // A range's filter has no counterpart: named, with the range kept.
        let m = convert(
            &flux,
            Some(&oci_repository("{url: 'oci://r.example/web', ref: {semver: 1.x, semverFilter: '.*-rc.*'}, verify: {provider: cosign}}")),
        )
        .unwrap();
        let paths: Vec<&str> = m
            .not_carried
            .iter()
            .map(|l| l.split(" (").next().unwrap())
            .collect();
        assert_eq!(
            paths,
            [
                "OCIRepository apps/web-chart spec.ref.semverFilter",
                "OCIRepository apps/web-chart spec.verify"
            ]
        );
    }

    #[test]
    fn an_oci_repository_wheelhouse_cannot_read_is_refused_with_the_reason() {
        let flux = yaml(CHART_REF);
        for (spec, says) in [
            (
                "{url: 'oci://123.dkr.ecr.us-east-1.amazonaws.com/web', provider: aws}",
                "as the aws cloud identity",
            ),
            (
                "{url: 'oci://r.example/web', layerSelector: {mediaType: application/vnd.acme.config}}",
                "Helm chart layer",
            ),
            ("{url: 'https://r.example/web'}", "not an oci:// URL"),
            ("{url: 'oci://r.example'}", "names a registry but no chart"),
            ("{url: 'oci://r.example/Web'}", "not a chart name"),
        ] {
            let reason = refused(&flux, Some(&oci_repository(spec)));
            assert!(reason.contains(says), "{spec}: {reason}");
            assert!(reason.contains("OCIRepository apps/web-chart"), "{reason}");
        }
        // Not read at all.
        let reason = refused(&flux, None);
        assert!(
            reason.contains("OCIRepository apps/web-chart (spec.chartRef) was not given"),
            "{reason}"
        );
        // A URL given instead: the chart Flux last deployed, from there.
        let m = convert(
            &flux,
            Some(&Repository::Url("https://charts.example.com".into())),
        )
        .unwrap();
        assert_eq!(
            m.object["spec"]["chart"],
            json!({"repository": "https://charts.example.com", "name": "web", "version": "1.2.3"})
        );
    }

    #[test]
    fn a_chart_in_git_is_the_same_directory_at_the_same_ref() {
        let flux = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {interval: 5m, chart: {spec: {chart: ./charts/web, version: '1.x', reconcileStrategy: ChartVersion, sourceRef: {kind: GitRepository, name: repo, namespace: flux-system}}}}\n",
        );
        let git = |spec: &str| {
            Repository::GitRepository(yaml(&format!(
                "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {{name: repo, namespace: flux-system}}\nspec: {spec}\n"
            )))
        };
        let m = convert(
            &flux,
            Some(&git("{url: 'https://git.example.com/acme/fleet.git', interval: 1m, ref: {branch: main}, secretRef: {name: git-auth}, ignore: '/*'}")),
        )
        .unwrap();
        assert_eq!(
            m.object["spec"]["chart"],
            json!({"git": {"url": "https://git.example.com/acme/fleet.git", "ref": {"branch": "main"}, "path": "charts/web"},
                   "secretRef": {"name": "git-auth"}, "interval": "1m"})
        );
        let paths: Vec<&str> = m
            .not_carried
            .iter()
            .map(|l| l.split(" (").next().unwrap())
            .collect();
        assert_eq!(
            paths,
            [
                "spec.chart.spec.reconcileStrategy",
                "GitRepository flux-system/repo spec.ignore",
                "spec.chart.spec.version"
            ]
        );
        assert!(
            m.notes.iter().any(|n| n.contains("copy it there")),
            "{:#?}",
            m.notes
        );
        // Flux's order: a commit over a name over a range over a tag over a branch.
        let sha = "0123456789abcdef0123456789abcdef01234567";
        for (reference, expected) in [
            (
                format!("{{commit: {sha}, branch: main}}"),
                json!({"commit": sha}),
            ),
            (
                "{name: refs/tags/v1.0.0, branch: main}".into(),
                json!({"tag": "v1.0.0"}),
            ),
            (
                "{name: refs/heads/release}".into(),
                json!({"branch": "release"}),
            ),
            (
                "{semver: '>=1.0.0', tag: v1.0.0}".into(),
                json!({"semver": ">=1.0.0"}),
            ),
            (
                "{tag: v1.0.0, branch: main}".into(),
                json!({"tag": "v1.0.0"}),
            ),
        ] {
            let m = convert(
                &flux,
                Some(&git(&format!(
                    "{{url: 'ssh://git@git.example.com/fleet.git', ref: {reference}}}"
                ))),
            )
            .unwrap();
            assert_eq!(
                m.object["spec"]["chart"]["git"]["ref"], expected,
                "{reference}"
            );
        }
        for (spec, says) in [
            (
                "{url: 'https://g.example/r.git', ref: {name: refs/pull/1/head}}",
                "neither a branch",
            ),
            (
                "{url: 'https://g.example/r.git', ref: {commit: abc123}}",
                "40-character",
            ),
            (
                "{url: 'https://dev.azure.com/acme/r', provider: azure}",
                "as the azure identity",
            ),
            ("{url: 'git@github.com:acme/r.git'}", "not an https://"),
        ] {
            let reason = refused(&flux, Some(&git(spec)));
            assert!(reason.contains(says), "{spec}: {reason}");
        }
    }

    #[test]
    fn a_chart_ref_to_a_helm_chart_is_its_chart_from_its_source() {
        let flux = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {interval: 5m, chartRef: {kind: HelmChart, name: apps-web, namespace: flux-system}}\n",
        );
        let helm_chart = yaml(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmChart\nmetadata: {name: apps-web, namespace: flux-system}\nspec: {chart: web, version: '~1.2', interval: 2m, reconcileStrategy: ChartVersion, sourceRef: {kind: HelmRepository, name: charts}}\n",
        );
        let m = convert(
            &flux,
            Some(&Repository::HelmChart {
                chart: helm_chart.clone(),
                source: Some(Box::new(http_repo("flux-system"))),
            }),
        )
        .unwrap();
        assert_eq!(
            m.object["spec"]["chart"],
            json!({"repository": "https://charts.example.com/stable", "name": "web", "version": "~1.2", "interval": "2m"})
        );
        // A chart version is its revision in a Helm repository: the strategy says nothing.
        assert!(m.not_carried.is_empty(), "{:#?}", m.not_carried);
        let reason = refused(
            &flux,
            Some(&Repository::HelmChart {
                chart: helm_chart,
                source: None,
            }),
        );
        assert!(
            reason.contains("HelmRepository flux-system/charts was not given"),
            "{reason}"
        );
    }

    #[test]
    fn a_chart_named_with_its_repository_is_a_clear_error_not_a_refused_object() {
        let flux = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {interval: 5m, chart: {spec: {chart: bitnami/redis, sourceRef: {kind: HelmRepository, name: charts}}}}\n",
        );
        let reason = refused(&flux, Some(&http_repo("apps")));
        assert!(
            reason.contains("named without the repository (\"redis\", not \"bitnami/redis\")"),
            "{reason}"
        );
        // In an OCI registry the segments are the chart's path: they join the repository.
        let repo = Repository::HelmRepository(yaml(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: charts, namespace: apps}\nspec: {type: oci, url: 'oci://registry.example.com/acme', insecure: true}\n",
        ));
        let m = convert(&flux, Some(&repo)).unwrap();
        assert_eq!(
            m.object["spec"]["chart"],
            json!({"repository": "oci://registry.example.com/acme/bitnami", "name": "redis", "insecure": true})
        );
        assert!(m.not_carried.is_empty(), "{:#?}", m.not_carried);
    }

    #[test]
    fn an_oci_helm_repository_gives_an_oci_reference_and_its_secret() {
        let flux = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {interval: 5m, chart: {spec: {chart: web, version: 1.x, sourceRef: {kind: HelmRepository, name: ghcr, namespace: flux-system}}}}\n",
        );
        let repo = Repository::HelmRepository(yaml(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: ghcr, namespace: flux-system}\nspec: {type: oci, url: 'oci://ghcr.io/acme/charts', secretRef: {name: ghcr-auth}, certSecretRef: {name: tls}, provider: generic}\n",
        ));
        let m = convert(&flux, Some(&repo)).unwrap();
        assert_eq!(
            m.object["spec"]["chart"],
            json!({"repository": "oci://ghcr.io/acme/charts", "name": "web", "version": "1.x", "secretRef": {"name": "ghcr-auth"}})
        );
        // Read as wheelhouse reads OCI registries: nothing to say about the URL.
        assert!(!m.notes.iter().any(|n| n.contains("OCI registry")));
        let secret = m
            .notes
            .iter()
            .find(|n| n.starts_with("chart.secretRef ghcr-auth"))
            .unwrap();
        assert!(
            secret.contains("check that the Secret suits wheelhouse"),
            "{secret}"
        );
        assert!(secret.contains("copy it there"), "{secret}");
        assert_eq!(
            m.not_carried,
            [
                "HelmRepository flux-system/ghcr spec.certSecretRef (wheelhouse reads a CA only as ca.crt in chart.secretRef, and no client certificate)"
            ]
        );
    }

    #[test]
    fn a_key_wheelhouse_does_not_know_fails_the_read_back() {
        let m = convert(&yaml(FULL), Some(&http_repo("apps"))).unwrap();
        let mut wrong = m.object.clone();
        wrong["spec"]["install"]["disableOpenAPIValidation"] = json!(true);
        let Err(Error::Invalid(message)) = read_back(&wrong, &m.helm) else {
            panic!("an unknown key passed");
        };
        assert_eq!(
            message,
            "wheelhouse has no field spec.install.disableOpenAPIValidation"
        );
        let mut elsewhere = m.object.clone();
        elsewhere["spec"]["releaseName"] = json!("other");
        assert!(matches!(
            read_back(&elsewhere, &m.helm),
            Err(Error::Invalid(_))
        ));
    }

    #[test]
    fn long_names_are_shortened_as_helm_controller_does() {
        // helm-controller's own cases (internal/release/name_test.go).
        for (name, short) in [
            ("release-name", "release-name"),
            (
                "release-name-with-very-long-name-which-is-longer-than-53-characters",
                "release-name-with-very-long-name-which-i-788ca0d0d7b0",
            ),
            (
                "another-release-name-with-very-long-name-which-is-longer-than-53-characters",
                "another-release-name-with-very-long-name-7e72150d5a36",
            ),
            ("", ""),
        ] {
            assert_eq!(shorten_name(name), short);
        }
    }

    #[test]
    fn a_flux_object_is_required() {
        let not_flux = yaml(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: web}\nspec: {}\n",
        );
        assert!(matches!(convert(&not_flux, None), Err(Error::NotFlux(_))));
    }
}

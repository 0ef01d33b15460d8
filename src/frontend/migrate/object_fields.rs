//! The fields carried with the same meaning: metadata without Flux's bookkeeping, the plain
//! settings, the five actions, drift detection and post-renderers.

use serde_json::{Map, Value, json};

use super::mapping::{Mapping, is_set, keep, text};

/// Label and annotation keys the Flux controllers write on an object for their own use,
/// with why each stays behind. Every other key is carried: the user's own, and the
/// directives the next tool in the pipeline reads (kustomize-controller's
/// `kustomize.toolkit.fluxcd.io/substitute`, `prune`, `ssa`, `force`, `reconcile` and
/// `decrypt`; helm-controller's `helm.toolkit.fluxcd.io/driftDetection`), which mean the
/// same on the wheelhouse object committed in the Flux object's place.
const FLUX_BOOKKEEPING: &[(&str, &str)] = &[
    // fluxcd/pkg apis/meta/annotations.go, helm-controller api/v2/annotations.go.
    (
        "reconcile.fluxcd.io/requestedAt",
        "a request to reconcile the Flux object, answered in its status; wheelhouse reads the same annotation, and would take it as a new request",
    ),
    (
        "reconcile.fluxcd.io/forceAt",
        "a request to helm-controller for a forced upgrade, answered in the Flux object's status; wheelhouse reads the same annotation, and would force an upgrade",
    ),
    (
        "reconcile.fluxcd.io/resetAt",
        "a request to helm-controller to reset the failure counts, answered in the Flux object's status; wheelhouse reads the same annotation, and would take it as a new request",
    ),
    // fluxcd/pkg ssa/manager.go SetOwnerLabels, as kustomize-controller calls it.
    (
        "kustomize.toolkit.fluxcd.io/name",
        "kustomize-controller's owner label, which it sets on every object it applies",
    ),
    (
        "kustomize.toolkit.fluxcd.io/namespace",
        "kustomize-controller's owner label, which it sets on every object it applies",
    ),
    // helm-controller internal/postrender/common_renderer.go and internal/action/crds.go.
    (
        "helm.toolkit.fluxcd.io/name",
        "helm-controller's origin label, which it sets on every object a Flux HelmRelease renders",
    ),
    (
        "helm.toolkit.fluxcd.io/namespace",
        "helm-controller's origin label, which it sets on every object a Flux HelmRelease renders",
    ),
    // kustomize-controller's apply cleanup (internal/controller/kustomization_controller.go)
    // removes these from every object it applies.
    (
        "kustomize.toolkit.fluxcd.io/checksum",
        "deprecated Flux bookkeeping, which kustomize-controller removes on apply",
    ),
    (
        "fluxcd.io/sync-checksum",
        "Flux v1 bookkeeping, which kustomize-controller removes on apply",
    ),
    (
        "fluxcd.io/sync-gc-mark",
        "Flux v1 bookkeeping, which kustomize-controller removes on apply",
    ),
    (
        "kubectl.kubernetes.io/last-applied-configuration",
        "kubectl's record of the Flux object it last applied (kustomize-controller removes it on apply)",
    ),
];

/// interval, timeout, maxHistory, values, valuesFrom, healthCheckExprs, dependsOn: the
/// same in both.
pub(super) fn plain(spec: &mut Map<String, Value>, out: &mut Map<String, Value>, m: &mut Mapping) {
    // serviceAccountName means the same: everything done for the release is done as that
    // ServiceAccount of the HelmRelease's namespace, by impersonation.
    for key in ["interval", "timeout", "maxHistory", "serviceAccountName"] {
        if let Some(v) = spec.remove(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), v);
        }
    }
    // The remote cluster, from the same Secret and key. A cloud provider's workload
    // identity (configMapRef) has no equivalent, and the release must not move to the
    // engine's own cluster for want of it: refused.
    if let Some(kc) = spec.remove("kubeConfig").filter(is_set) {
        match (
            kc.get("secretRef").filter(|v| is_set(v)),
            kc.get("configMapRef").filter(|v| is_set(v)),
        ) {
            (Some(secret), None) if text(secret, "name").is_some() => {
                let kept = keep(kc.clone(), "spec.kubeConfig", &["secretRef"], m);
                let secret = keep(
                    kept["secretRef"].clone(),
                    "spec.kubeConfig.secretRef",
                    &["name", "key"],
                    m,
                );
                out.insert("kubeConfig".into(), json!({ "secretRef": secret }));
                m.note(
                    "spec.kubeConfig: the release stays on its remote cluster, reached with the same Secret; a kubeconfig with exec or insecure-skip-tls-verify needs the engine's --insecure-kubeconfig-exec/--insecure-kubeconfig-tls, as Flux's does, and one naming files of the controller's machine is refused",
                );
            }
            (None, Some(_)) => {
                m.refused = Some(
                    "spec.kubeConfig.configMapRef reaches the remote cluster with a cloud provider's workload identity, which wheelhouse cannot authenticate with; give it a kubeconfig Secret (spec.kubeConfig.secretRef) and migrate again".into(),
                );
            }
            _ => {
                m.refused = Some(
                    "spec.kubeConfig names neither a Secret nor a ConfigMap alone (exactly one of secretRef and configMapRef, as Flux requires)".into(),
                );
            }
        }
    }
    // Labels and annotations on every rendered object, as helm-controller puts them.
    if let Some(common) = spec.remove("commonMetadata").filter(is_set) {
        let kept = keep(common, "spec.commonMetadata", &["labels", "annotations"], m);
        if kept.as_object().is_some_and(|o| !o.is_empty()) {
            out.insert("commonMetadata".into(), kept);
        }
    }
    match spec.remove("values") {
        Some(v @ Value::Object(_)) => {
            out.insert("values".into(), v);
        }
        Some(v) => m.drop_field("spec.values", &v),
        None => {}
    }
    let mut list = |key: &str, keys: &[&str]| match spec.remove(key) {
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(i, item)| keep(item, &format!("spec.{key}[{i}]"), keys, m))
            .collect::<Vec<Value>>(),
        _ => Vec::new(),
    };
    let values_from = list(
        "valuesFrom",
        &["kind", "name", "valuesKey", "targetPath", "optional"],
    );
    // CEL health checks: evaluated with Flux's own package, so they mean the same.
    let checks = list(
        "healthCheckExprs",
        &["apiVersion", "kind", "current", "inProgress", "failed"],
    );
    let deps = list("dependsOn", &["name", "namespace", "readyExpr"]);
    for (key, carried) in [("valuesFrom", values_from), ("healthCheckExprs", checks)] {
        if !carried.is_empty() {
            out.insert(key.into(), Value::Array(carried));
        }
    }
    if !deps.is_empty() {
        let names: Vec<String> = deps
            .iter()
            .map(|d| match text(d, "namespace") {
                Some(ns) => format!("{ns}/{}", text(d, "name").unwrap_or_default()),
                None => text(d, "name").unwrap_or_default().to_owned(),
            })
            .collect();
        m.note(format!(
            "spec.dependsOn now names wheelhouse HelmReleases ({}): migrate those too, or this release waits for them (DependencyNotReady)",
            names.join(", ")
        ));
        out.insert("dependsOn".into(), Value::Array(deps));
    }
}

/// One of install, upgrade, test, rollback, uninstall: the fields wheelhouse has with the
/// same meaning, and the same defaults where it defaults them.
pub(super) fn action(section: &str, value: Value, m: &mut Mapping) -> Option<Value> {
    let path = format!("spec.{section}");
    let mut fields = match value {
        Value::Object(fields) => fields,
        Value::Null => Map::new(),
        value => {
            m.drop_field(&path, &value);
            Map::new()
        }
    };
    let same: &[&str] = match section {
        "install" => &[
            "timeout",
            "replace",
            "createNamespace",
            "crds",
            "disableWait",
            "disableWaitForJobs",
            "disableSchemaValidation",
            "disableHooks",
            "serverSideApply",
        ],
        "upgrade" => &[
            "timeout",
            "force",
            "crds",
            "disableWait",
            "disableWaitForJobs",
            "disableSchemaValidation",
            "disableHooks",
            "cleanupOnFail",
            "preserveValues",
            "serverSideApply",
        ],
        "test" => &["enable", "timeout", "ignoreFailures", "filters"],
        "rollback" => &[
            "timeout",
            "disableHooks",
            "disableWait",
            "disableWaitForJobs",
            "force",
            "cleanupOnFail",
            "recreate",
            "serverSideApply",
        ],
        _ => &[
            "timeout",
            "disableHooks",
            "disableWait",
            "keepHistory",
            "deletionPropagation",
        ],
    };
    let mut out = Map::new();
    for key in same {
        if let Some(v) = fields.remove(*key).filter(|v| !v.is_null()) {
            out.insert((*key).into(), v);
        }
    }
    // Deprecated: Flux skips CRDs when it is set and `crds` is not.
    if section == "install"
        && fields.remove("skipCRDs").and_then(|v| v.as_bool()) == Some(true)
        && !out.contains_key("crds")
    {
        out.insert("crds".into(), Value::String("Skip".into()));
    }
    // What helm-controller does without being asked, where wheelhouse must be asked:
    // take over existing objects (Helm's --take-ownership) unless disableTakeOwnership,
    // and force server-side apply conflicts (it always does; under client-side apply, its
    // other mode, it overwrites whatever another manager set).
    if matches!(section, "install" | "upgrade") {
        let disabled = fields
            .remove("disableTakeOwnership")
            .and_then(|v| v.as_bool());
        if disabled != Some(true) {
            out.insert("takeOwnership".into(), Value::Bool(true));
        }
    }
    // Client-side OpenAPI validation: wheelhouse never does it (the API server validates
    // every object on apply), which is what turning it off asks.
    if matches!(section, "install" | "upgrade")
        && fields
            .remove("disableOpenAPIValidation")
            .and_then(|v| v.as_bool())
            == Some(true)
    {
        m.note(format!(
            "{path}.disableOpenAPIValidation: wheelhouse never validates against OpenAPI before applying (the API server validates on apply), as this asks"
        ));
    }
    // RemediateOnFailure or RetryOnFailure, with the retry interval: the same in both.
    if matches!(section, "install" | "upgrade")
        && let Some(strategy) = fields.remove("strategy").filter(is_set)
    {
        let kept = keep(
            strategy,
            &format!("{path}.strategy"),
            &["name", "retryInterval"],
            m,
        );
        if kept.get("name").is_some_and(is_set) {
            out.insert("strategy".into(), kept);
        }
    }
    if matches!(section, "upgrade" | "rollback")
        && fields.get("force").and_then(Value::as_bool) == Some(true)
    {
        m.note(format!(
            "spec.{section}.force is carried: applying client-side, the {section} replaces objects as helm-controller's does; applying server-side, wheelhouse takes it as forcing conflicts (helm-controller forces them on every server-side apply anyway)"
        ));
    }
    if section == "rollback" && fields.get("recreate").and_then(Value::as_bool) == Some(true) {
        m.note(
            "spec.rollback.recreate is carried but has no effect, in wheelhouse as in helm-controller on Helm 4 (Helm 4 removed recreating pods)",
        );
    }
    if matches!(section, "install" | "upgrade")
        && let Some(remediation) = fields.remove("remediation")
    {
        let keys: &[&str] = if section == "install" {
            &["retries", "ignoreTestFailures", "remediateLastFailure"]
        } else {
            &[
                "retries",
                "strategy",
                "remediateLastFailure",
                "ignoreTestFailures",
            ]
        };
        let kept = keep(remediation, &format!("{path}.remediation"), keys, m);
        if kept.as_object().is_some_and(|o| !o.is_empty()) {
            out.insert("remediation".into(), kept);
        }
    }
    for (key, v) in fields {
        m.drop_field(&format!("{path}.{key}"), &v);
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// `driftDetection`: the mode, and the ignore rules (a target by kind, name and namespace;
/// Flux's group, version and label or annotation selectors are not carried).
pub(super) fn drift_detection(value: Value, m: &mut Mapping) -> Option<Value> {
    let Value::Object(mut fields) = value else {
        m.drop_field("spec.driftDetection", &value);
        return None;
    };
    let mut out = Map::new();
    if let Some(mode) = fields.remove("mode").filter(is_set) {
        out.insert("mode".into(), mode);
    }
    if let Some(Value::Array(rules)) = fields.remove("ignore") {
        let mut carried = Vec::new();
        for (i, rule) in rules.into_iter().enumerate() {
            let at = format!("spec.driftDetection.ignore[{i}]");
            let Value::Object(mut kept) = keep(rule, &at, &["paths", "target"], m) else {
                continue;
            };
            if let Some(target) = kept.remove("target").filter(is_set)
                && let Value::Object(target) = keep(
                    target,
                    &format!("{at}.target"),
                    &["kind", "name", "namespace"],
                    m,
                )
                && !target.is_empty()
            {
                kept.insert("target".into(), Value::Object(target));
            }
            if kept.get("paths").is_some_and(is_set) {
                carried.push(Value::Object(kept));
            }
        }
        if !carried.is_empty() {
            out.insert("ignore".into(), Value::Array(carried));
        }
    }
    for (key, v) in fields {
        m.drop_field(&format!("spec.driftDetection.{key}"), &v);
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// `postRenderers`: the same shape in both (Flux's kustomize patches with their targets,
/// and images), applied by wheelhouse's render helper as helm-controller applies them.
/// Keys either side does not know are not carried.
pub(super) fn post_renderers(value: Value, m: &mut Mapping) -> Option<Value> {
    let Value::Array(entries) = value else {
        m.drop_field("spec.postRenderers", &value);
        return None;
    };
    let mut carried = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let at = format!("spec.postRenderers[{i}]");
        let Value::Object(mut kept) = keep(entry, &at, &["kustomize"], m) else {
            continue;
        };
        let Some(kustomize) = kept.remove("kustomize").filter(|v| !v.is_null()) else {
            // An entry without kustomize does nothing in Flux either.
            continue;
        };
        let at = format!("{at}.kustomize");
        let Value::Object(mut k) = keep(kustomize, &at, &["patches", "images"], m) else {
            continue;
        };
        let mut out = Map::new();
        if let Some(Value::Array(patches)) = k.remove("patches") {
            let patches: Vec<Value> = patches
                .into_iter()
                .enumerate()
                .map(|(j, p)| {
                    let at = format!("{at}.patches[{j}]");
                    let mut p = keep(p, &at, &["patch", "target"], m);
                    if let Some(target) = p.as_object_mut().and_then(|p| p.remove("target")) {
                        let target = keep(
                            target,
                            &format!("{at}.target"),
                            &[
                                "group",
                                "version",
                                "kind",
                                "namespace",
                                "name",
                                "annotationSelector",
                                "labelSelector",
                            ],
                            m,
                        );
                        if let Some(p) = p.as_object_mut()
                            && is_set(&target)
                        {
                            p.insert("target".into(), target);
                        }
                    }
                    p
                })
                .collect();
            out.insert("patches".into(), Value::Array(patches));
        }
        if let Some(Value::Array(images)) = k.remove("images") {
            let images: Vec<Value> = images
                .into_iter()
                .enumerate()
                .map(|(j, img)| {
                    keep(
                        img,
                        &format!("{at}.images[{j}]"),
                        &["name", "newName", "newTag", "digest"],
                        m,
                    )
                })
                .collect();
            out.insert("images".into(), Value::Array(images));
        }
        carried.push(json!({"kustomize": out}));
    }
    (!carried.is_empty()).then_some(Value::Array(carried))
}

/// Same name and namespace; labels and annotations but Flux's bookkeeping, which is named.
pub(super) fn metadata(flux: &Value, name: &str, namespace: &str, m: &mut Mapping) -> Value {
    let mut meta = json!({ "name": name, "namespace": namespace });
    for field in ["labels", "annotations"] {
        let Some(Value::Object(entries)) = flux.pointer(&format!("/metadata/{field}")) else {
            continue;
        };
        let mut kept = Map::new();
        for (key, value) in entries {
            match FLUX_BOOKKEEPING.iter().find(|(k, _)| k == key) {
                Some((_, why)) => m.drop_because(&format!("metadata.{field}[{key}]"), why),
                None => {
                    kept.insert(key.clone(), value.clone());
                }
            }
        }
        if !kept.is_empty() {
            meta[field] = Value::Object(kept);
        }
    }
    // The objects the Flux object belongs to made a Flux object, not this one: it is
    // written without owners, whose garbage collection would delete it.
    if let Some(owners) = flux
        .pointer("/metadata/ownerReferences")
        .filter(|v| is_set(v))
    {
        let names: Vec<String> = owners
            .as_array()
            .into_iter()
            .flatten()
            .map(|o| {
                format!(
                    "{} {}",
                    text(o, "kind").unwrap_or_default(),
                    text(o, "name").unwrap_or_default()
                )
            })
            .collect();
        m.drop_because(
            "metadata.ownerReferences",
            format!(
                "the Flux object belongs to {}; the wheelhouse object does not, and is not deleted with it",
                names.join(", ")
            ),
        );
    }
    if let Some(kustomization) = flux
        .pointer("/metadata/labels/kustomize.toolkit.fluxcd.io~1name")
        .and_then(Value::as_str)
    {
        let from = flux
            .pointer("/metadata/labels/kustomize.toolkit.fluxcd.io~1namespace")
            .and_then(Value::as_str)
            .unwrap_or(namespace);
        m.note(format!(
            "Flux Kustomization {from}/{kustomization} manages this Flux HelmRelease: take it out of that Kustomization's source (and commit the wheelhouse one instead), or Flux may resume or recreate it"
        ));
    }
    if flux
        .pointer("/metadata/labels/sharding.fluxcd.io~1key")
        .is_some()
    {
        m.note(
            "label sharding.fluxcd.io/key is kept as is; wheelhouse shards by sharding.wheelhouse.dev/key",
        );
    }
    meta
}

//! Workloads as JSON objects: where their pod template lives, what it consumes, whether it
//! is tracked or gated, and what the tracker should do about it. Pure functions; the same
//! code serves rendered manifests and live objects, so both give the same hash.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::core::v1::PodSpec;
use kube::api::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use super::consumption::{ConsumedObject, consumed_refs, extra_refs, merge};
use super::hash::{Resolved, config_hash};
use super::{CONFIG_HASH_ANNOTATION, CONFIG_PENDING_GATE, TRACK_CONFIG_ANNOTATION};
use crate::helm::apply::manifest::RELEASE_NAME_ANNOTATION;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
}

impl fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl WorkloadKind {
    pub const ALL: [Self; 5] = [
        Self::Deployment,
        Self::StatefulSet,
        Self::DaemonSet,
        Self::Job,
        Self::CronJob,
    ];

    /// The kinds the tracker watches and rolls. A Job's pod template is immutable once it
    /// exists, so Jobs only get their hash (and no gate) when a manifest is prepared.
    pub const ROLLABLE: [Self; 4] = [
        Self::Deployment,
        Self::StatefulSet,
        Self::DaemonSet,
        Self::CronJob,
    ];

    pub fn from_type(api_version: &str, kind: &str) -> Option<Self> {
        match (api_version, kind) {
            ("apps/v1", "Deployment") => Some(Self::Deployment),
            ("apps/v1", "StatefulSet") => Some(Self::StatefulSet),
            ("apps/v1", "DaemonSet") => Some(Self::DaemonSet),
            ("batch/v1", "Job") => Some(Self::Job),
            ("batch/v1", "CronJob") => Some(Self::CronJob),
            _ => None,
        }
    }

    pub fn api_resource(self) -> ApiResource {
        let (group, plural) = match self {
            Self::Deployment => ("apps", "deployments"),
            Self::StatefulSet => ("apps", "statefulsets"),
            Self::DaemonSet => ("apps", "daemonsets"),
            Self::Job => ("batch", "jobs"),
            Self::CronJob => ("batch", "cronjobs"),
        };
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, "v1", &self.to_string()),
            plural,
        )
    }

    /// JSON pointer of the pod template.
    pub fn template_pointer(self) -> &'static str {
        match self {
            Self::CronJob => "/spec/jobTemplate/spec/template",
            _ => "/spec/template",
        }
    }

    pub fn can_gate(self) -> bool {
        self != Self::Job
    }
}

/// A workload by kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadRef {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for WorkloadRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

fn annotations(obj: &Value, pointer: &str) -> BTreeMap<String, String> {
    obj.pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// A watched workload cut down to what config tracking reads: its metadata (without
/// managedFields and kubectl's last-applied copy) and, of its pod template, the metadata,
/// each container's name, env and envFrom, the volumes and the scheduling gates. A
/// release's workloads are mostly what the tracker holds in memory, and the rest
/// (images, probes, resources, affinity, status) is most of each object.
pub fn slim(kind: WorkloadKind, obj: &mut Value) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    root.remove("status");
    if let Some(meta) = root.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
    let template = obj.pointer(kind.template_pointer()).cloned();
    let Some(template) = template else {
        obj.as_object_mut().map(|o| o.remove("spec"));
        return;
    };
    let mut kept = serde_json::Map::new();
    if let Some(meta) = template.get("metadata") {
        kept.insert("metadata".into(), meta.clone());
    }
    if let Some(spec) = template.get("spec").and_then(Value::as_object) {
        let mut pod = serde_json::Map::new();
        for field in ["containers", "initContainers"] {
            if let Some(containers) = spec.get(field).and_then(Value::as_array) {
                let containers = containers
                    .iter()
                    .map(|c| {
                        let keep = ["name", "env", "envFrom"];
                        Value::Object(
                            c.as_object()
                                .into_iter()
                                .flatten()
                                .filter(|(k, _)| keep.contains(&k.as_str()))
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect(),
                        )
                    })
                    .collect();
                pod.insert(field.into(), Value::Array(containers));
            }
        }
        for field in ["volumes", "schedulingGates"] {
            if let Some(v) = spec.get(field) {
                pod.insert(field.into(), v.clone());
            }
        }
        kept.insert("spec".into(), Value::Object(pod));
    }
    // Rebuilt along the template's path (Deployments `spec.template`, CronJobs
    // `spec.jobTemplate.spec.template`), with nothing else beside it.
    let mut value = Value::Object(kept);
    for key in kind.template_pointer().trim_start_matches('/').rsplit('/') {
        value = serde_json::json!({ key: value });
    }
    if let (Some(root), Some(spec)) = (obj.as_object_mut(), value.get("spec").cloned()) {
        root.insert("spec".into(), spec);
    }
}

/// Whether the tracker looks after a live workload. Opted-in ones
/// (`wheelhouse.dev/track-config: "true"`) always; release workloads (Helm's ownership
/// annotation) once [`super::prepare_manifest`] has given their pod template a hash, so a
/// release whose engine does not prepare its manifests (config tracking disabled) is left
/// alone. `wheelhouse.dev/track-config: "false"` opts out.
pub fn is_tracked(kind: WorkloadKind, obj: &Value) -> bool {
    let meta = annotations(obj, "/metadata/annotations");
    match meta.get(TRACK_CONFIG_ANNOTATION).map(String::as_str) {
        Some("true") => true,
        Some("false") => false,
        _ => meta.contains_key(RELEASE_NAME_ANNOTATION) && template_hash(kind, obj).is_some(),
    }
}

/// The objects a workload consumes through its pod template and its extra annotations.
/// `Err` when the pod template is not a valid pod spec.
pub fn consumed_objects(kind: WorkloadKind, obj: &Value) -> Result<Vec<ConsumedObject>, String> {
    let spec = obj
        .pointer(&format!("{}/spec", kind.template_pointer()))
        .cloned()
        .unwrap_or(Value::Null);
    let spec: PodSpec = if spec.is_null() {
        PodSpec::default()
    } else {
        serde_json::from_value(spec).map_err(|e| format!("pod template: {e}"))?
    };
    let meta = annotations(obj, "/metadata/annotations");
    Ok(merge(
        consumed_refs(&spec).into_iter().chain(extra_refs(&meta)),
    ))
}

pub fn template_hash(kind: WorkloadKind, obj: &Value) -> Option<String> {
    annotations(
        obj,
        &format!("{}/metadata/annotations", kind.template_pointer()),
    )
    .remove(CONFIG_HASH_ANNOTATION)
}

fn gates(kind: WorkloadKind, obj: &Value) -> Vec<Value> {
    obj.pointer(&format!("{}/spec/schedulingGates", kind.template_pointer()))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

fn is_ours(gate: &Value) -> bool {
    gate.get("name").and_then(Value::as_str) == Some(CONFIG_PENDING_GATE)
}

/// Whether the pod template carries the `wheelhouse.dev/config-pending` gate.
pub fn is_gated(kind: WorkloadKind, obj: &Value) -> bool {
    gates(kind, obj).iter().any(is_ours)
}

/// Writes the hash into the pod template and adds or removes the gate (used on rendered
/// manifests, before the first apply).
pub fn set_template(kind: WorkloadKind, obj: &mut Value, hash: &str, gate: bool) {
    let mut other_gates: Vec<Value> = gates(kind, obj)
        .into_iter()
        .filter(|g| !is_ours(g))
        .collect();
    if gate && kind.can_gate() {
        other_gates.push(json!({"name": CONFIG_PENDING_GATE}));
    }
    let Some(template) = ensure_path(obj, kind.template_pointer()) else {
        return;
    };
    let metadata = entry_object(template, "metadata");
    let annotations = entry_object(metadata, "annotations");
    annotations.insert(CONFIG_HASH_ANNOTATION.into(), Value::String(hash.into()));
    let spec = entry_object(template, "spec");
    if other_gates.is_empty() {
        spec.remove("schedulingGates");
    } else {
        spec.insert("schedulingGates".into(), Value::Array(other_gates));
    }
}

fn ensure_path<'a>(
    obj: &'a mut Value,
    pointer: &str,
) -> Option<&'a mut serde_json::Map<String, Value>> {
    let mut current = obj.as_object_mut()?;
    for segment in pointer.trim_start_matches('/').split('/') {
        current = entry_object(current, segment);
    }
    Some(current)
}

fn entry_object<'a>(
    map: &'a mut serde_json::Map<String, Value>,
    key: &str,
) -> &'a mut serde_json::Map<String, Value> {
    let slot = map.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot.as_object_mut().expect("made an object above")
}

/// A JSON merge patch that sets the hash and removes only our gate, touching nothing else
/// (the list is replaced whole by a merge patch, so other gates are written back).
pub fn hash_patch(kind: WorkloadKind, obj: &Value, hash: &str) -> Value {
    let others: Vec<Value> = gates(kind, obj)
        .into_iter()
        .filter(|g| !is_ours(g))
        .collect();
    let gates = if others.is_empty() {
        Value::Null
    } else {
        Value::Array(others)
    };
    let mut patch = json!({
        "metadata": {"annotations": {CONFIG_HASH_ANNOTATION: hash}},
        "spec": {"schedulingGates": gates},
    });
    if !is_gated(kind, obj) {
        patch.as_object_mut().unwrap().remove("spec");
    }
    for segment in kind
        .template_pointer()
        .trim_start_matches('/')
        .split('/')
        .rev()
    {
        patch = json!({ segment: patch });
    }
    patch
}

/// What the tracker does with a workload given the current state of what it consumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Up to date, or nothing to track.
    Nothing,
    /// Required objects are missing. A gated workload keeps waiting; a running one is left
    /// alone (rolling it would replace working pods with ones that cannot start).
    Wait { missing: Vec<ConsumedObject> },
    /// Set the hash and remove the gate in one patch: one rollout.
    Patch { hash: String },
}

pub fn decide(
    current_hash: Option<&str>,
    gated: bool,
    resolved: &[Resolved],
    key: &super::hash::HashKey,
) -> Decision {
    let missing: Vec<ConsumedObject> = resolved
        .iter()
        .filter(|r| r.is_missing_required())
        .map(|r| r.object.clone())
        .collect();
    if !missing.is_empty() {
        return Decision::Wait { missing };
    }
    if resolved.is_empty() && !gated && current_hash.is_none() {
        return Decision::Nothing;
    }
    let hash = config_hash(resolved, key);
    // A hash from before the key, of the same data: still in sync (rolling the pods
    // only to re-key the hash would restart them for nothing).
    if !gated && current_hash.is_some_and(|c| c == super::hash::legacy_hash(resolved)) {
        return Decision::Nothing;
    }
    if gated || current_hash != Some(hash.as_str()) {
        Decision::Patch { hash }
    } else {
        Decision::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::super::consumption::{ConfigKind, Selection};
    use super::super::hash::ObjectData;
    use super::*;

    #[test]
    fn a_slimmed_workload_reads_the_same_to_the_tracker() {
        let full = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "apps",
                "annotations": {RELEASE_NAME_ANNOTATION: "web",
                    "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
                "managedFields": [{"manager": "helm"}]},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"},
                        "annotations": {CONFIG_HASH_ANNOTATION: "abc"}},
                    "spec": {
                        "initContainers": [{"name": "init", "image": "i",
                            "envFrom": [{"secretRef": {"name": "init-env"}}]}],
                        "containers": [{"name": "app", "image": "x", "ports": [{"containerPort": 80}],
                            "resources": {"limits": {"cpu": "1"}},
                            "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a"}}}],
                            "envFrom": [{"configMapRef": {"name": "env"}}]}],
                        "volumes": [{"name": "v", "projected": {"sources": [{"secret": {"name": "tls"}}]}}],
                        "schedulingGates": [{"name": CONFIG_PENDING_GATE}],
                        "affinity": {"nodeAffinity": {}}, "tolerations": [{"key": "k"}]}}},
            "status": {"readyReplicas": 3, "conditions": [{"type": "Available"}]}});
        let mut slimmed = full.clone();
        slim(WorkloadKind::Deployment, &mut slimmed);
        let kind = WorkloadKind::Deployment;
        assert_eq!(is_tracked(kind, &slimmed), is_tracked(kind, &full));
        assert_eq!(
            consumed_objects(kind, &slimmed),
            consumed_objects(kind, &full)
        );
        assert_eq!(template_hash(kind, &slimmed), template_hash(kind, &full));
        assert_eq!(is_gated(kind, &slimmed), is_gated(kind, &full));
        assert!(is_tracked(kind, &full) && is_gated(kind, &full));
        assert_eq!(consumed_objects(kind, &full).unwrap().len(), 4);
        let text = slimmed.to_string();
        for gone in [
            "image",
            "resources",
            "affinity",
            "status",
            "managedFields",
            "last-applied",
            "replicas",
        ] {
            assert!(!text.contains(gone), "{gone} kept: {text}");
        }
        // A CronJob's template sits deeper.
        let mut cron = json!({"metadata": {"name": "c"}, "spec": {"schedule": "* * * * *",
            "jobTemplate": {"spec": {"backoffLimit": 1, "template": {"spec": {
                "containers": [{"name": "a", "image": "x", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}}}}}});
        let before = consumed_objects(WorkloadKind::CronJob, &cron);
        slim(WorkloadKind::CronJob, &mut cron);
        assert_eq!(consumed_objects(WorkloadKind::CronJob, &cron), before);
        assert!(!cron.to_string().contains("schedule"));
    }

    fn deployment(extra_meta: Value, template_spec: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "annotations": extra_meta},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": template_spec}}
        })
    }

    #[test]
    fn tracked_by_opt_in_or_as_a_prepared_release_workload_and_opt_out_wins() {
        let spec = json!({"containers": []});
        let kind = WorkloadKind::Deployment;
        let release = deployment(json!({RELEASE_NAME_ANNOTATION: "r"}), spec.clone());
        assert!(
            !is_tracked(kind, &release),
            "not prepared: tracking is off for it"
        );
        let mut prepared = release.clone();
        set_template(kind, &mut prepared, "h", false);
        assert!(is_tracked(kind, &prepared));
        assert!(is_tracked(
            kind,
            &deployment(json!({TRACK_CONFIG_ANNOTATION: "true"}), spec.clone())
        ));
        assert!(!is_tracked(kind, &deployment(json!({}), spec.clone())));
        let mut opted_out = deployment(
            json!({RELEASE_NAME_ANNOTATION: "r", TRACK_CONFIG_ANNOTATION: "false"}),
            spec,
        );
        set_template(kind, &mut opted_out, "h", false);
        assert!(!is_tracked(kind, &opted_out));
    }

    #[test]
    fn cron_job_template_is_found() {
        let cron = json!({
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
                {"name": "a", "envFrom": [{"configMapRef": {"name": "cfg"}}]}
            ]}}}}}
        });
        let objects = consumed_objects(WorkloadKind::CronJob, &cron).unwrap();
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0].name, "cfg");
        let mut cron = cron;
        set_template(WorkloadKind::CronJob, &mut cron, "h1", true);
        assert_eq!(
            template_hash(WorkloadKind::CronJob, &cron).as_deref(),
            Some("h1")
        );
        assert!(is_gated(WorkloadKind::CronJob, &cron));
    }

    #[test]
    fn extra_annotations_join_the_pod_template_refs() {
        let d = deployment(
            json!({"wheelhouse.dev/extra-secrets": "api-token"}),
            json!({"containers": [{"name": "a", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "x"}}}]}]}),
        );
        let objects = consumed_objects(WorkloadKind::Deployment, &d).unwrap();
        assert_eq!(
            objects
                .iter()
                .map(|o| (o.kind, o.name.as_str(), o.selection.clone()))
                .collect::<Vec<_>>(),
            vec![
                (
                    ConfigKind::ConfigMap,
                    "c",
                    Selection::Keys(["x".to_string()].into())
                ),
                (ConfigKind::Secret, "api-token", Selection::Whole),
            ]
        );
    }

    #[test]
    fn set_template_adds_and_removes_only_our_gate() {
        let mut d = deployment(
            json!({}),
            json!({"schedulingGates": [{"name": "other"}], "containers": []}),
        );
        set_template(WorkloadKind::Deployment, &mut d, "abc", true);
        assert_eq!(
            d.pointer("/spec/template/spec/schedulingGates").unwrap(),
            &json!([{"name": "other"}, {"name": CONFIG_PENDING_GATE}])
        );
        assert_eq!(
            d.pointer("/spec/template/metadata/labels/app").unwrap(),
            "web"
        );
        set_template(WorkloadKind::Deployment, &mut d, "def", false);
        assert_eq!(
            d.pointer("/spec/template/spec/schedulingGates").unwrap(),
            &json!([{"name": "other"}])
        );
        assert_eq!(
            template_hash(WorkloadKind::Deployment, &d).as_deref(),
            Some("def")
        );

        let mut job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": {"spec": {}}}});
        set_template(WorkloadKind::Job, &mut job, "abc", true);
        assert!(!is_gated(WorkloadKind::Job, &job));
        assert_eq!(
            template_hash(WorkloadKind::Job, &job).as_deref(),
            Some("abc")
        );
    }

    #[test]
    fn hash_patch_sets_hash_and_ungates_in_one_patch() {
        let mut d = deployment(json!({}), json!({"containers": []}));
        set_template(WorkloadKind::Deployment, &mut d, "old", true);
        assert_eq!(
            hash_patch(WorkloadKind::Deployment, &d, "new"),
            json!({"spec": {"template": {
                "metadata": {"annotations": {CONFIG_HASH_ANNOTATION: "new"}},
                "spec": {"schedulingGates": null}
            }}})
        );
        set_template(WorkloadKind::Deployment, &mut d, "old", false);
        assert_eq!(
            hash_patch(WorkloadKind::Deployment, &d, "new"),
            json!({"spec": {"template": {"metadata": {"annotations": {CONFIG_HASH_ANNOTATION: "new"}}}}})
        );
    }

    fn resolved(optional: bool, data: Option<&[(&str, &str)]>) -> Resolved {
        Resolved {
            object: ConsumedObject {
                kind: ConfigKind::ConfigMap,
                name: "c".into(),
                selection: Selection::Whole,
                optional,
            },
            data: data.map(|d| {
                d.iter()
                    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                    .collect::<ObjectData>()
            }),
        }
    }

    #[test]
    fn decisions() {
        let present = [resolved(false, Some(&[("k", "v")]))];
        let key = super::super::hash::HashKey::Keyed(std::sync::Arc::new([3; 32]));
        let hash = config_hash(&present, &key);
        assert_eq!(
            decide(Some(&hash), false, &present, &key),
            Decision::Nothing
        );
        assert_eq!(
            decide(Some("stale"), false, &present, &key),
            Decision::Patch { hash: hash.clone() }
        );
        assert_eq!(
            decide(None, false, &present, &key),
            Decision::Patch { hash: hash.clone() }
        );
        // Gated with an up-to-date hash still needs the gate removed.
        assert_eq!(
            decide(Some(&hash), true, &present, &key),
            Decision::Patch { hash }
        );

        let missing = [resolved(false, None)];
        for gated in [true, false] {
            assert_eq!(
                decide(Some("x"), gated, &missing, &key),
                Decision::Wait {
                    missing: vec![missing[0].object.clone()]
                }
            );
        }
        // An optional object that is absent does not hold anything back.
        let optional = [resolved(true, None)];
        assert!(matches!(
            decide(None, true, &optional, &key),
            Decision::Patch { .. }
        ));

        assert_eq!(decide(None, false, &[], &key), Decision::Nothing);
        assert!(matches!(
            decide(None, true, &[], &key),
            Decision::Patch { .. }
        ));

        // A workload hashed before the key: left alone while its data is the same, and
        // keyed at the next change (which rolls it anyway).
        let legacy = super::super::hash::legacy_hash(&present);
        assert_eq!(
            decide(Some(&legacy), false, &present, &key),
            Decision::Nothing
        );
        let changed = [resolved(false, Some(&[("k", "w")]))];
        assert_eq!(
            decide(Some(&legacy), false, &changed, &key),
            Decision::Patch {
                hash: config_hash(&changed, &key)
            }
        );
    }
}

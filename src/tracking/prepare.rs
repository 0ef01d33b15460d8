//! Preparing a rendered manifest before it is applied: the config hash (and, for missing
//! required objects, the scheduling gate) goes into every workload's pod template, so the
//! first pods already carry it and never restart to receive it.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};
use serde_json::Value;

use super::Error;
use super::consumption::ConfigKind;
use super::hash::{HashKey, ObjectData, Resolved, config_map_data, secret_data};
use super::workload::{
    Decision, WorkloadKind, consumed_objects, decide, set_template, template_hash,
};
use crate::helm::apply::manifest::split_documents;
use crate::text::yaml::parse_documents;

/// A ConfigMap or Secret by kind, namespace and name.
pub type ConfigKey = (ConfigKind, String, String);

/// The data of one ConfigMap or Secret, read when it is needed (`None`: it does not
/// exist). Nothing keeps the data of config objects in memory: the tracker watches their
/// metadata only and reads the few a workload consumes.
pub async fn read_data(
    client: &Client,
    kind: ConfigKind,
    namespace: &str,
    name: &str,
) -> Result<Option<ObjectData>, Error> {
    match kind {
        ConfigKind::ConfigMap => Api::<ConfigMap>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await
            .map(|o| o.map(|cm| config_map_data(&cm))),
        ConfigKind::Secret => Api::<Secret>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await
            .map(|o| o.map(|s| secret_data(&s))),
    }
    .map_err(|source| Error::Read {
        object: format!("{kind} {namespace}/{name}"),
        source,
    })
}

/// Adds `wheelhouse.dev/config-hash` to the pod template of every tracked Deployment,
/// StatefulSet, DaemonSet, Job and CronJob in `manifest` (a Helm manifest: `---`
/// separated documents with `# Source:` comments; `namespace` is the release namespace,
/// the default of objects without one). Consumed objects that the manifest itself defines
/// are hashed from the manifest (that is what will be live after the apply); the others are
/// read from the cluster. A workload with a missing required object also gets the
/// `wheelhouse.dev/config-pending` scheduling gate (not Jobs: their template is immutable).
///
/// Documents without a change are kept byte for byte; in changed ones only the lines of
/// the hash annotation (and the gate) are added or replaced, so `helm get manifest` shows
/// the YAML as rendered. A changed document that is not block-style YAML along the pod
/// template's path is written as JSON (valid YAML that every YAML 1.1 reader types the
/// same way).
pub async fn prepare_manifest(
    client: &Client,
    manifest: &str,
    namespace: &str,
    key: &HashKey,
    previous: Option<&str>,
) -> Result<PreparedManifest, Error> {
    let needed = live_objects_needed(manifest, namespace)?;
    let mut live = LiveState {
        key: key.clone(),
        known: known_hashes(manifest, previous, namespace),
        ..LiveState::default()
    };
    for key in needed.objects {
        let (kind, ns, name) = &key;
        let data = read_data(client, *kind, ns, name).await?;
        if let Some(data) = data {
            live.objects.insert(key, data);
        }
    }
    for (ns, name) in needed.jobs {
        let job = Api::<Job>::namespaced(client.clone(), &ns)
            .get_opt(&name)
            .await
            .map_err(|source| Error::Read {
                object: format!("Job {ns}/{name}"),
                source,
            })?;
        if let Some(job) = job {
            let hash = serde_json::to_value(&job)
                .ok()
                .and_then(|v| template_hash(WorkloadKind::Job, &v));
            live.jobs.insert((ns, name), hash);
        }
    }
    rewrite(manifest, namespace, &live)
}

/// What [`rewrite_manifest`] needs from the cluster.
#[derive(Debug, Clone, Default)]
pub struct LiveState {
    /// The existing consumed objects the manifest does not define (absent: missing).
    pub objects: HashMap<ConfigKey, ObjectData>,
    /// Jobs of the manifest that already exist, by namespace and name, with the hash their
    /// pod template has. A Job's template is immutable, so an existing Job keeps it (as
    /// Helm, changing it would fail the apply).
    pub jobs: HashMap<(String, String), Option<String>>,
    /// What config hashes are keyed with.
    pub key: HashKey,
    /// The hash each workload had before (in the previous revision, or in the manifest
    /// itself when it is a stored one), by kind, namespace and name: one from before the
    /// key, of the same data, is kept (no restart to re-key it).
    pub known: HashMap<(WorkloadKind, String, String), String>,
}

/// The config hash each workload of `previous` (else of `manifest`) carries.
fn known_hashes(
    manifest: &str,
    previous: Option<&str>,
    namespace: &str,
) -> HashMap<(WorkloadKind, String, String), String> {
    let mut known = HashMap::new();
    for text_of in [Some(manifest), previous].into_iter().flatten() {
        let Ok(docs) = documents(text_of) else {
            continue;
        };
        for (_, kind, v) in workloads(&docs) {
            if let Some(hash) = template_hash(kind, v) {
                let id = (
                    kind,
                    namespace_of(v, namespace),
                    text(v, "/metadata/name").to_owned(),
                );
                known.insert(id, hash);
            }
        }
    }
    known
}

/// What [`prepare_manifest`] reads from the cluster for a manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveNeeds {
    /// Consumed objects the manifest does not define.
    pub objects: BTreeSet<ConfigKey>,
    /// The manifest's tracked Jobs, by namespace and name.
    pub jobs: BTreeSet<(String, String)>,
}

struct Doc<'a> {
    source: Option<&'a str>,
    body: &'a str,
    /// The single object of the document, when it parses to exactly one mapping.
    value: Option<Value>,
}

fn documents(manifest: &str) -> Result<Vec<Doc<'_>>, Error> {
    split_documents(manifest)
        .into_iter()
        .map(|doc| {
            let values = parse_documents(doc.body).map_err(|e| Error::Manifest {
                origin: doc.source.unwrap_or("manifest").to_string(),
                message: e.to_string(),
            })?;
            let value = match <[Value; 1]>::try_from(values) {
                Ok([v]) if v.is_object() => Some(v),
                _ => None,
            };
            Ok(Doc {
                source: doc.source,
                body: doc.body,
                value,
            })
        })
        .collect()
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn namespace_of(v: &Value, default: &str) -> String {
    match text(v, "/metadata/namespace") {
        "" => default.to_string(),
        ns => ns.to_string(),
    }
}

fn workload_kind(v: &Value) -> Option<WorkloadKind> {
    WorkloadKind::from_type(text(v, "/apiVersion"), text(v, "/kind"))
}

/// The ConfigMaps and Secrets the manifest defines, with their data.
fn own_objects(docs: &[Doc<'_>], namespace: &str) -> Result<HashMap<ConfigKey, ObjectData>, Error> {
    let mut own = HashMap::new();
    for doc in docs {
        let Some(v) = &doc.value else { continue };
        let kind = match (text(v, "/apiVersion"), text(v, "/kind")) {
            ("v1", "ConfigMap") => ConfigKind::ConfigMap,
            ("v1", "Secret") => ConfigKind::Secret,
            _ => continue,
        };
        let invalid = |e: serde_json::Error| Error::Manifest {
            origin: doc.source.unwrap_or("manifest").to_string(),
            message: e.to_string(),
        };
        let v = &nulls_read_as_go(v);
        let data = match kind {
            ConfigKind::ConfigMap => {
                config_map_data(&serde_json::from_value(v.clone()).map_err(invalid)?)
            }
            ConfigKind::Secret => secret_data(&serde_json::from_value(v.clone()).map_err(invalid)?),
        };
        let key = (
            kind,
            namespace_of(v, namespace),
            text(v, "/metadata/name").to_string(),
        );
        own.insert(key, data);
    }
    Ok(own)
}

/// A ConfigMap or Secret with its null data values as the API server stores them: Go
/// decodes a null into a string as the empty string (a template's `{{ .Values.x | quote }}`
/// of a value set to null renders `key:` with nothing after it).
fn nulls_read_as_go(object: &Value) -> Value {
    let mut object = object.clone();
    for field in ["data", "stringData", "binaryData"] {
        if let Some(Value::Object(map)) = object.get_mut(field) {
            for value in map.values_mut().filter(|v| v.is_null()) {
                *value = Value::String(String::new());
            }
        }
    }
    object
}

/// The tracked workloads of the manifest and what they consume.
fn workloads<'d>(
    docs: &'d [Doc<'_>],
) -> impl Iterator<Item = (usize, WorkloadKind, &'d Value)> + 'd {
    docs.iter().enumerate().filter_map(|(i, doc)| {
        let v = doc.value.as_ref()?;
        let kind = workload_kind(v)?;
        is_tracked_in_manifest(v).then_some((i, kind, v))
    })
}

/// In a manifest every workload belongs to the release (the Helm annotations are added at
/// apply time), unless it opts out.
fn is_tracked_in_manifest(v: &Value) -> bool {
    text(v, "/metadata/annotations/wheelhouse.dev~1track-config") != "false"
}

/// What must be read from the cluster to prepare `manifest`.
pub fn live_objects_needed(manifest: &str, namespace: &str) -> Result<LiveNeeds, Error> {
    let docs = documents(manifest)?;
    let own = own_objects(&docs, namespace)?;
    let mut needed = LiveNeeds::default();
    for (i, kind, v) in workloads(&docs) {
        let ns = namespace_of(v, namespace);
        let objects =
            consumed_objects(kind, v).map_err(|message| manifest_error(&docs[i], message))?;
        if kind == WorkloadKind::Job && !objects.is_empty() {
            needed
                .jobs
                .insert((ns.clone(), text(v, "/metadata/name").to_string()));
        }
        for object in objects {
            let key = (object.kind, ns.clone(), object.name);
            if !own.contains_key(&key) {
                needed.objects.insert(key);
            }
        }
    }
    Ok(needed)
}

fn manifest_error(doc: &Doc<'_>, message: String) -> Error {
    Error::Manifest {
        origin: doc.source.unwrap_or("manifest").to_string(),
        message,
    }
}

/// A prepared manifest in its two forms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedManifest {
    /// What is applied: the hash, and the `config-pending` gate on workloads whose config
    /// does not exist yet (wheelhouse lifts the gate when it appears).
    pub applied: String,
    /// What the revision stores: the same without the gate, because nothing but a running
    /// wheelhouse lifts it, and a `helm rollback` by hand must end with schedulable pods.
    pub stored: String,
}

/// The manifest as applied: [`rewrite`]'s `applied`.
pub fn rewrite_manifest(
    manifest: &str,
    namespace: &str,
    live: &LiveState,
) -> Result<String, Error> {
    rewrite(manifest, namespace, live).map(|m| m.applied)
}

/// The pure part of [`prepare_manifest`], given what exists in the cluster.
pub fn rewrite(
    manifest: &str,
    namespace: &str,
    live: &LiveState,
) -> Result<PreparedManifest, Error> {
    let docs = documents(manifest)?;
    let own = own_objects(&docs, namespace)?;
    // Per changed document: its kind, the object as applied, and as stored when they differ.
    let mut changed: HashMap<usize, (WorkloadKind, Value, Option<Value>)> = HashMap::new();
    for (i, kind, v) in workloads(&docs) {
        let ns = namespace_of(v, namespace);
        let objects =
            consumed_objects(kind, v).map_err(|message| manifest_error(&docs[i], message))?;
        if objects.is_empty() {
            continue;
        }
        let resolved: Vec<Resolved> = objects
            .into_iter()
            .map(|object| {
                let key = (object.kind, ns.clone(), object.name.clone());
                let data = own.get(&key).or_else(|| live.objects.get(&key)).cloned();
                Resolved { object, data }
            })
            .collect();
        let gate = matches!(
            decide(None, false, &resolved, &live.key),
            Decision::Wait { .. }
        );
        let mut hash = super::hash::config_hash(&resolved, &live.key);
        let id = (kind, ns.clone(), text(v, "/metadata/name").to_owned());
        if live
            .known
            .get(&id)
            .is_some_and(|h| *h == super::hash::legacy_hash(&resolved))
        {
            hash = super::hash::legacy_hash(&resolved);
        }
        if kind == WorkloadKind::Job {
            let job = (ns.clone(), text(v, "/metadata/name").to_string());
            match live.jobs.get(&job) {
                Some(Some(existing)) => hash = existing.clone(),
                Some(None) => continue,
                None => {}
            }
        }
        let mut updated = v.clone();
        set_template(kind, &mut updated, &hash, gate);
        let stored = (gate && kind.can_gate()).then(|| {
            let mut ungated = v.clone();
            set_template(kind, &mut ungated, &hash, false);
            ungated
        });
        changed.insert(i, (kind, updated, stored));
    }

    let applied = write_documents(&docs, manifest.len(), |i| {
        changed.get(&i).map(|(kind, v, _)| (*kind, v))
    });
    let stored = if changed.values().any(|(_, _, s)| s.is_some()) {
        write_documents(&docs, manifest.len(), |i| {
            changed
                .get(&i)
                .map(|(kind, v, stored)| (*kind, stored.as_ref().unwrap_or(v)))
        })
    } else {
        applied.clone()
    };
    Ok(PreparedManifest { applied, stored })
}

/// The documents written out again, `changed(i)` giving the new object of document `i`.
fn write_documents<'v>(
    docs: &[Doc<'_>],
    capacity: usize,
    changed: impl Fn(usize) -> Option<(WorkloadKind, &'v Value)>,
) -> String {
    let mut out = String::with_capacity(capacity + 256);
    for (i, doc) in docs.iter().enumerate() {
        out.push_str("---\n");
        if let Some(source) = doc.source {
            out.push_str("# Source: ");
            out.push_str(source);
            out.push('\n');
        }
        let edited = changed(i).map(|(kind, v)| {
            let original = doc.value.as_ref().expect("changed documents parsed");
            super::edit::edit_workload(doc.body, kind, original, v)
                .ok_or_else(|| serde_json::to_string_pretty(v).expect("JSON values serialize"))
        });
        match edited {
            // The rendered YAML with the hash (and gate) lines added.
            Some(Ok(text)) => {
                out.push_str(&text);
                if !text.ends_with('\n') {
                    out.push('\n');
                }
            }
            // Not block-style YAML along the template's path: written as JSON.
            Some(Err(json)) => {
                out.push_str(&json);
                out.push('\n');
            }
            None => {
                out.push_str(doc.body);
                if !doc.body.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::CONFIG_HASH_ANNOTATION;
    use super::super::consumption::{ConsumedObject, Selection};
    use super::super::hash::config_hash;
    use super::super::workload::{is_gated, template_hash};
    use super::*;
    use crate::helm::apply::parse_manifest;

    const CM: &str = "---\n# Source: demo/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  greeting: hello\n  mode: '0644'\n";

    fn deployment(volumes: &str) -> String {
        format!(
            "---\n# Source: demo/templates/deploy.yaml\napiVersion: apps/v1\nkind: Deployment\n\
             metadata:\n  name: web\nspec:\n  selector:\n    matchLabels: {{app: web}}\n  template:\n\
             \x20   metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n\
             \x20       - name: app\n          image: x\n          env: [{{name: FLAG, value: 'yes'}}]\n\
             \x20     volumes:\n{volumes}"
        )
    }

    fn workload_of(manifest: &str) -> Value {
        let objects = parse_manifest(manifest).unwrap();
        let d = objects
            .iter()
            .find(|o| o.types.as_ref().unwrap().kind == "Deployment")
            .unwrap();
        serde_json::to_value(d).unwrap()
    }

    #[test]
    fn hashes_objects_of_the_same_manifest_from_the_manifest_and_keeps_other_documents() {
        let manifest = format!(
            "{CM}{}",
            deployment("        - {name: c, configMap: {name: web}}\n")
        );
        assert_eq!(
            live_objects_needed(&manifest, "ns").unwrap(),
            LiveNeeds::default()
        );
        let out = rewrite_manifest(&manifest, "ns", &LiveState::default()).unwrap();
        // The ConfigMap document is untouched; the workload's still has its Source line
        // and stays YAML, with the hash added to the template's metadata.
        assert!(out.starts_with(CM), "{out}");
        assert!(
            out.contains(
                "---\n# Source: demo/templates/deploy.yaml\napiVersion: apps/v1\nkind: Deployment\n"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "    metadata:\n      annotations:\n        wheelhouse.dev/config-hash: \""
            ),
            "{out}"
        );
        let d = workload_of(&out);
        // The same hash as the tracker computes from the live ConfigMap the apply creates.
        let live: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"}, "data": {"greeting": "hello", "mode": "0644"}
        }))
        .unwrap();
        let expected = config_hash(
            &[Resolved {
                object: ConsumedObject {
                    kind: ConfigKind::ConfigMap,
                    name: "web".into(),
                    selection: Selection::Whole,
                    optional: false,
                },
                data: Some(config_map_data(&live)),
            }],
            &HashKey::Unkeyed,
        );
        assert_eq!(template_hash(WorkloadKind::Deployment, &d), Some(expected));
        assert!(!is_gated(WorkloadKind::Deployment, &d));
        // YAML 1.1 typing survives the rewrite: the quoted 'yes' stays a string.
        assert_eq!(
            d.pointer("/spec/template/spec/containers/0/env/0/value")
                .unwrap(),
            "yes"
        );
        // Preparing twice gives the same manifest: upgrades do not roll by themselves.
        assert_eq!(
            rewrite_manifest(&out, "ns", &LiveState::default()).unwrap(),
            out
        );
    }

    #[test]
    fn a_null_config_value_reads_as_the_empty_string_go_stores() {
        let null_cm = "---\n# Source: demo/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  greeting:\n";
        let empty_cm = "---\n# Source: demo/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  greeting: \"\"\n";
        let workload = deployment("        - {name: c, configMap: {name: web}}\n");
        let with_null =
            rewrite_manifest(&format!("{workload}{null_cm}"), "ns", &LiveState::default())
                .expect("a null value is no error");
        let with_empty = rewrite_manifest(
            &format!("{workload}{empty_cm}"),
            "ns",
            &LiveState::default(),
        )
        .unwrap();
        assert_eq!(
            template_hash(WorkloadKind::Deployment, &workload_of(&with_null)),
            template_hash(WorkloadKind::Deployment, &workload_of(&with_empty))
        );
    }

    #[test]
    fn the_stored_manifest_never_carries_the_gate() {
        let manifest = format!(
            "{}{CM}",
            deployment("        - {name: c, configMap: {name: late}}\n")
        );
        let prepared = rewrite(&manifest, "ns", &LiveState::default()).unwrap();
        let applied = workload_of(&prepared.applied);
        let stored = workload_of(&prepared.stored);
        assert!(is_gated(WorkloadKind::Deployment, &applied));
        assert!(!is_gated(WorkloadKind::Deployment, &stored));
        assert!(!prepared.stored.contains("schedulingGates"));
        // The same hash in both, and everything else the same bytes.
        assert_eq!(
            template_hash(WorkloadKind::Deployment, &applied),
            template_hash(WorkloadKind::Deployment, &stored)
        );
        assert!(prepared.stored.ends_with(CM));

        let ungated = deployment("        - {name: c, configMap: {name: web}}\n") + CM;
        let prepared = rewrite(&ungated, "ns", &LiveState::default()).unwrap();
        assert_eq!(prepared.applied, prepared.stored);
    }

    #[test]
    fn missing_required_objects_gate_and_optional_ones_do_not() {
        let manifest = deployment("        - {name: c, configMap: {name: late}}\n");
        let needed = live_objects_needed(&manifest, "ns").unwrap();
        assert_eq!(
            needed.objects.into_iter().collect::<Vec<_>>(),
            vec![(ConfigKind::ConfigMap, "ns".to_string(), "late".to_string())]
        );
        assert!(needed.jobs.is_empty());
        let gated = workload_of(&rewrite_manifest(&manifest, "ns", &LiveState::default()).unwrap());
        assert!(is_gated(WorkloadKind::Deployment, &gated));

        let live = LiveState {
            objects: HashMap::from([(
                (ConfigKind::ConfigMap, "ns".to_string(), "late".to_string()),
                ObjectData::from([("k".to_string(), b"v".to_vec())]),
            )]),
            ..Default::default()
        };
        let ready = workload_of(&rewrite_manifest(&manifest, "ns", &live).unwrap());
        assert!(!is_gated(WorkloadKind::Deployment, &ready));
        assert_ne!(
            template_hash(WorkloadKind::Deployment, &gated),
            template_hash(WorkloadKind::Deployment, &ready)
        );

        let optional = deployment("        - {name: c, configMap: {name: late, optional: true}}\n");
        let d = workload_of(&rewrite_manifest(&optional, "ns", &LiveState::default()).unwrap());
        assert!(!is_gated(WorkloadKind::Deployment, &d));
        assert!(template_hash(WorkloadKind::Deployment, &d).is_some());
    }

    #[test]
    fn workloads_without_config_or_opted_out_are_left_alone() {
        let none = deployment("        - {name: c, emptyDir: {}}\n");
        assert_eq!(
            rewrite_manifest(&none, "ns", &LiveState::default()).unwrap(),
            none
        );
        let opted_out = deployment("        - {name: c, configMap: {name: late}}\n").replace(
            "  name: web\nspec:",
            "  name: web\n  annotations: {wheelhouse.dev/track-config: 'false'}\nspec:",
        );
        let out = rewrite_manifest(&opted_out, "ns", &LiveState::default()).unwrap();
        assert_eq!(out, opted_out);
        assert!(!out.contains(CONFIG_HASH_ANNOTATION));
    }

    #[test]
    fn secrets_in_other_namespaces_and_jobs() {
        let manifest = "---\n# Source: demo/templates/job.yaml\napiVersion: batch/v1\nkind: Job\n\
             metadata:\n  name: migrate\n  namespace: other\nspec:\n  template:\n    spec:\n\
             \x20     restartPolicy: Never\n      containers:\n        - name: m\n          image: x\n\
             \x20         envFrom: [{secretRef: {name: db}}]\n";
        let needed = live_objects_needed(manifest, "ns").unwrap();
        assert_eq!(
            needed.objects.iter().cloned().collect::<Vec<_>>(),
            vec![(ConfigKind::Secret, "other".to_string(), "db".to_string())]
        );
        assert_eq!(
            needed.jobs.iter().cloned().collect::<Vec<_>>(),
            vec![("other".to_string(), "migrate".to_string())]
        );
        let job_of = |live: &LiveState| {
            let out = rewrite_manifest(manifest, "ns", live).unwrap();
            serde_json::to_value(&parse_manifest(&out).unwrap()[0]).unwrap()
        };
        // A new Job gets the hash; its template cannot be changed later, so never a gate.
        let job = job_of(&LiveState::default());
        assert!(!is_gated(WorkloadKind::Job, &job));
        assert!(template_hash(WorkloadKind::Job, &job).is_some());
        // An existing Job keeps the template it has, or the apply would fail.
        let key = ("other".to_string(), "migrate".to_string());
        let mut live = LiveState::default();
        live.jobs.insert(key.clone(), Some("earlier".into()));
        assert_eq!(
            template_hash(WorkloadKind::Job, &job_of(&live)).as_deref(),
            Some("earlier")
        );
        live.jobs.insert(key, None);
        assert_eq!(rewrite_manifest(manifest, "ns", &live).unwrap(), manifest);
    }
}

//! Drift: how the live objects of a release differ from what its manifest renders.
//!
//! Each object is server-side applied as a dry run, with the release's field manager and
//! forced, as the next apply would be: the answer is the object as it would be after
//! that apply. Where it differs from the live object, someone changed a field the
//! manifest renders since (`kubectl scale`, `kubectl edit`), whichever manager holds it
//! now. Fields the manifest does not render are not compared, so a controller's own
//! fields (status, an HPA's replicas when the chart leaves them out) are never drift.

use std::collections::BTreeSet;

use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::Error;
use super::applier::{Applier, Owner, Target, identity};
use super::fields::RELEASE_FIELD_MANAGER;
use super::manifest::{ObjectRef, check_ownership, has_keep_policy, parse_manifest, set_ownership};

/// Fields a rule leaves alone, on every object or on those of a kind/name/namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ignore {
    /// JSON pointers (RFC 6901): the field and everything under it.
    pub paths: Vec<String>,
    pub kind: Option<String>,
    pub name: Option<String>,
    pub namespace: Option<String>,
}

impl Ignore {
    fn applies_to(&self, reference: &ObjectRef) -> bool {
        self.kind.as_deref().is_none_or(|k| k == reference.kind)
            && self.name.as_deref().is_none_or(|n| n == reference.name)
            && self
                .namespace
                .as_deref()
                .is_none_or(|n| Some(n) == reference.namespace.as_deref())
    }
}

/// One object that is not as the manifest renders it.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectDrift {
    /// As Helm names objects: `Deployment/web` (with its namespace when it has one).
    pub object: String,
    pub reference: ObjectRef,
    /// The JSON pointers that differ, or empty when the object is missing.
    pub fields: Vec<String>,
    pub missing: bool,
    /// The live object and the object after the dry run, both without server-kept
    /// metadata, for a diff (None when missing).
    pub live: Option<Value>,
    pub desired: Value,
    /// For each drifted field, the field manager other than wheelhouse's that holds it
    /// now (from the live object's managedFields), when one does.
    pub managers: std::collections::BTreeMap<String, String>,
}

impl Applier {
    /// The objects of `manifest` (with ownership metadata set as an apply sets it) that
    /// differ from what is live. An object deleted on purpose from a release with
    /// `helm.sh/resource-policy: keep` is not drift; one that no longer names this
    /// release is someone else's now, and one another record of the same (release name,
    /// namespace) deploys (`owner.others`) is never ours: neither is compared.
    pub async fn drift(
        &self,
        manifest: &str,
        owner: &Owner<'_>,
        ignore: &[Ignore],
    ) -> Result<Vec<ObjectDrift>, Error> {
        let foreign = self.foreign_objects(owner).await?;
        let mut drifted = Vec::new();
        for mut obj in parse_manifest(manifest)? {
            if owner.is_unavailable(&obj) {
                continue;
            }
            let Some(resource) = self.resolve_kind(&obj).await? else {
                continue;
            };
            set_ownership(&mut obj, owner.release_name, owner.namespace);
            let target = Target::new(obj, resource, owner.namespace);
            if foreign.contains_key(&identity(&target.reference)) {
                continue;
            }
            let rules: Vec<&Ignore> = ignore
                .iter()
                .filter(|r| r.applies_to(&target.reference))
                .collect();
            let api = target.api(self.client());
            let live = api
                .get_opt(&target.reference.name)
                .await
                .map_err(|source| Error::Api {
                    action: "get",
                    object: target.reference.to_string(),
                    source,
                })?;
            let Some(live) = live else {
                if !has_keep_policy(&target.obj) {
                    drifted.push(ObjectDrift {
                        object: format!("{}/{}", target.reference.kind, target.reference.name),
                        reference: target.reference.clone(),
                        fields: Vec::new(),
                        missing: true,
                        live: None,
                        desired: comparable(
                            &serde_json::to_value(&target.obj).unwrap_or_default(),
                            &[],
                        ),
                        managers: Default::default(),
                    });
                }
                continue;
            };
            if check_ownership(&live, owner.release_name, owner.namespace).is_err() {
                continue;
            }
            let params = PatchParams::apply(RELEASE_FIELD_MANAGER).force().dry_run();
            let after: DynamicObject = api
                .patch(&target.reference.name, &params, &Patch::Apply(&target.obj))
                .await
                .map_err(|source| Error::Api {
                    action: "dry-run apply",
                    object: target.reference.to_string(),
                    source,
                })?;
            let paths: Vec<&str> = rules
                .iter()
                .flat_map(|r| r.paths.iter().map(String::as_str))
                .collect();
            let entries = live.metadata.managed_fields.clone().unwrap_or_default();
            let live = comparable(&serde_json::to_value(&live).unwrap_or_default(), &paths);
            let desired = comparable(&serde_json::to_value(&after).unwrap_or_default(), &paths);
            let mut fields = BTreeSet::new();
            differences(&live, &desired, &mut String::new(), &mut fields);
            if !fields.is_empty() {
                let managers = fields
                    .iter()
                    .filter_map(|f| Some((f.clone(), holder(&entries, f)?)))
                    .collect();
                drifted.push(ObjectDrift {
                    object: format!("{}/{}", target.reference.kind, target.reference.name),
                    reference: target.reference.clone(),
                    fields: fields.into_iter().collect(),
                    missing: false,
                    live: Some(live),
                    desired,
                    managers,
                });
            }
        }
        Ok(drifted)
    }
}

/// The field manager other than the release's (`helm`) that holds the
/// field at `pointer` according to `entries` (an object's managedFields): the one whose
/// `fieldsV1` has the path's keys (`f:spec` → `f:replicas`). A pointer into a list names
/// the list, which its holder holds as a whole or by keys: the holder of the list is
/// taken. None when no other manager holds it.
pub fn holder(
    entries: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry],
    pointer: &str,
) -> Option<String> {
    let keys: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|k| format!("f:{}", k.replace("~1", "/").replace("~0", "~")))
        .collect();
    let ours = |m: &str| m == RELEASE_FIELD_MANAGER;
    entries
        .iter()
        .filter(|e| e.subresource.as_deref() != Some("status"))
        .filter(|e| e.manager.as_deref().is_some_and(|m| !ours(m)))
        .filter(|e| {
            let mut at = e.fields_v1.as_ref().map(|f| &f.0);
            for key in &keys {
                at = at.and_then(|v| v.get(key));
            }
            at.is_some()
        })
        // The newest writer first (an untimed entry, as the scale subresource writes, last).
        .max_by_key(|e| e.time.as_ref().map(|t| t.0))
        .and_then(|e| e.manager.clone())
}

/// `object` without what the server keeps for itself (status, resourceVersion,
/// generation, managedFields, uid, creationTimestamp) and without the `ignored` fields.
pub fn comparable(object: &Value, ignored: &[&str]) -> Value {
    let mut value = object.clone();
    if let Some(map) = value.as_object_mut() {
        map.remove("status");
    }
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        for key in [
            "managedFields",
            "resourceVersion",
            "generation",
            "uid",
            "creationTimestamp",
            "selfLink",
        ] {
            meta.remove(key);
        }
    }
    for pointer in ignored {
        remove_pointer(&mut value, pointer);
    }
    value
}

/// Removes the field at `pointer` (RFC 6901) from `value`, if it is there.
pub fn remove_pointer(value: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    match value.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.remove(&last);
        }
        Some(Value::Array(items)) => {
            if let Ok(i) = last.parse::<usize>()
                && i < items.len()
            {
                items.remove(i);
            }
        }
        _ => {}
    }
}

/// The JSON pointers at which `a` and `b` differ: the deepest object keys, and whole
/// arrays (a list's elements have no stable identity to point at).
fn differences(a: &Value, b: &Value, at: &mut String, out: &mut BTreeSet<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let len = at.len();
                at.push('/');
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                match (x.get(key), y.get(key)) {
                    (Some(p), Some(q)) => differences(p, q, at, out),
                    _ => {
                        out.insert(at.clone());
                    }
                }
                at.truncate(len);
            }
        }
        _ if a != b => {
            out.insert(if at.is_empty() {
                "/".into()
            } else {
                at.clone()
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_point_at_the_changed_fields_only() {
        let live = serde_json::json!({"metadata": {"name": "web", "resourceVersion": "9",
            "labels": {"a/b": "x"}}, "spec": {"replicas": 5, "template": {"spec": {"containers": [{"image": "v2"}]}}},
            "status": {"readyReplicas": 5}});
        let desired = serde_json::json!({"metadata": {"name": "web", "resourceVersion": "10",
            "labels": {"a/b": "y"}}, "spec": {"replicas": 2, "template": {"spec": {"containers": [{"image": "v1"}]}}},
            "status": {"readyReplicas": 5}});
        let mut fields = BTreeSet::new();
        differences(
            &comparable(&live, &[]),
            &comparable(&desired, &[]),
            &mut String::new(),
            &mut fields,
        );
        assert_eq!(
            fields.into_iter().collect::<Vec<_>>(),
            [
                "/metadata/labels/a~1b",
                "/spec/replicas",
                "/spec/template/spec/containers"
            ]
        );
        let mut fields = BTreeSet::new();
        let ignored = ["/spec/replicas", "/metadata/labels"];
        differences(
            &comparable(&live, &ignored),
            &comparable(&desired, &ignored),
            &mut String::new(),
            &mut fields,
        );
        assert_eq!(
            fields.into_iter().collect::<Vec<_>>(),
            ["/spec/template/spec/containers"]
        );
    }

    #[test]
    fn the_holder_of_a_field_is_read_from_managed_fields() {
        let entries: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry> =
            serde_json::from_value(serde_json::json!([
                {"manager": "helm", "operation": "Apply", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:template": {}}}, "time": "2026-01-01T00:00:00Z"},
                {"manager": "fake-hpa", "operation": "Update", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:spec": {"f:replicas": {}}}, "time": "2026-01-01T00:00:01Z"},
                {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status",
                 "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:replicas": {}}}},
            ]))
            .unwrap();
        assert_eq!(
            holder(&entries, "/spec/replicas").as_deref(),
            Some("fake-hpa")
        );
        assert_eq!(
            holder(&entries, "/spec/template"),
            None,
            "the release's own"
        );
        assert_eq!(
            holder(&entries, "/status/replicas"),
            None,
            "status is not drift"
        );
        assert_eq!(holder(&entries, "/metadata/labels/a~1b"), None);
    }

    #[test]
    fn rules_apply_to_their_kind_and_name() {
        let reference = ObjectRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("apps".into()),
            name: "web".into(),
        };
        let rule = |kind: Option<&str>, name: Option<&str>| Ignore {
            paths: vec!["/spec/replicas".into()],
            kind: kind.map(Into::into),
            name: name.map(Into::into),
            namespace: None,
        };
        assert!(rule(None, None).applies_to(&reference));
        assert!(rule(Some("Deployment"), Some("web")).applies_to(&reference));
        assert!(!rule(Some("StatefulSet"), None).applies_to(&reference));
        assert!(!rule(Some("Deployment"), Some("api")).applies_to(&reference));
    }
}

//! Who owns which field of a release's objects (`metadata.managedFields`), so that an
//! upgrade ends in exactly the new manifest.
//!
//! Server-side apply removes a field the applier stops sending only if the applier is its
//! sole owner. A release last written by someone else (the helm CLI's client-side apply,
//! which records `helm` with operation `Update`; wheelhouse round 1's `wheelhouse`
//! manager; Flux's `helm-controller`, ...) leaves its fields owned by that manager, so a
//! field the new manifest drops would stay behind. `helm upgrade` removes such a field
//! (three-way merge, or `csaupgrade` when it moves to server-side apply), and so must we.
//!
//! [`migrate`] computes the managedFields to write before applying:
//! - entries of [`FOLDED_MANAGERS`] are folded whole into the release manager's `Apply`
//!   entry, as `csaupgrade.UpgradeManagedFields` does for the helm CLI;
//! - from any other manager, only fields that the previous revision rendered and that
//!   still hold the rendered value move over. A field another manager set itself, or
//!   changed since, stays theirs: we never touch what we did not render.

use serde_json::{Map, Value};

/// The field manager of everything a release applies: the name the helm CLI applies with,
/// so wheelhouse and a `helm upgrade`/`helm rollback` by hand hand fields back and forth as
/// two helm runs do, and neither needs `--force-conflicts`.
pub const RELEASE_FIELD_MANAGER: &str = "helm";

/// Managers whose fields on a release's objects are the release's own: the helm CLI
/// (client-side apply records `Update` entries) and wheelhouse before round 2.
pub const FOLDED_MANAGERS: &[&str] = &["helm", "wheelhouse"];

/// The managedFields `live` should have before the release manager applies to it, or
/// `None` when nothing needs to move. `previous` is the object as the release's previous
/// revision rendered it (if it did).
pub fn migrate(live: &Value, previous: Option<&Value>, now: &str) -> Option<Vec<Value>> {
    let api_version = live.get("apiVersion")?.as_str()?;
    let mut entries: Vec<Value> = live.pointer("/metadata/managedFields")?.as_array()?.clone();
    let is_target = |e: &Value| {
        text(e, "manager") == RELEASE_FIELD_MANAGER
            && text(e, "operation") == "Apply"
            && text(e, "subresource").is_empty()
            && text(e, "apiVersion") == api_version
    };
    let mut moved = Map::new();
    for entry in entries.iter_mut().filter(|e| !is_target(e)) {
        // Status and scale writes, other versions and other formats are left alone.
        if !text(entry, "subresource").is_empty()
            || text(entry, "apiVersion") != api_version
            || text(entry, "fieldsType") != "FieldsV1"
        {
            continue;
        }
        let manager = text(entry, "manager").to_string();
        let Some(Value::Object(fields)) = entry.get_mut("fieldsV1") else {
            continue;
        };
        if FOLDED_MANAGERS.contains(&manager.as_str()) {
            union(&mut moved, std::mem::take(fields));
            continue;
        }
        let Some(previous) = previous else { continue };
        let mut leaves = Vec::new();
        collect_leaves(fields, &mut Vec::new(), &mut leaves);
        for leaf in leaves {
            if rendered_and_unchanged(previous, live, &leaf) {
                remove_leaf(fields, &leaf);
                insert_leaf(&mut moved, &leaf);
            }
        }
    }
    if moved.is_empty() {
        return None;
    }
    // Entries left without fields are dropped, as the API server drops them.
    entries.retain(|e| {
        is_target(e)
            || !text(e, "subresource").is_empty()
            || e.get("fieldsV1")
                .is_none_or(|f| f.as_object().is_none_or(|m| !m.is_empty()))
    });
    match entries.iter_mut().find(|e| is_target(e)) {
        Some(target) => {
            let fields = target
                .as_object_mut()?
                .entry("fieldsV1")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(fields) = fields {
                union(fields, moved);
            }
        }
        None => entries.push(serde_json::json!({
            "manager": RELEASE_FIELD_MANAGER,
            "operation": "Apply",
            "apiVersion": api_version,
            "time": now,
            "fieldsType": "FieldsV1",
            "fieldsV1": moved,
        })),
    }
    Some(entries)
}

fn text<'a>(entry: &'a Value, key: &str) -> &'a str {
    entry.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// A leaf of a FieldsV1 tree: the keys down to a field (`f:spec`, `k:{"name":"app"}`,
/// `v:"x"`, `i:0`), ending in `.` when it is the presence of a map or list item itself.
type Leaf = Vec<String>;

fn collect_leaves(tree: &Map<String, Value>, path: &mut Leaf, out: &mut Vec<Leaf>) {
    for (key, child) in tree {
        path.push(key.clone());
        match child.as_object() {
            Some(children) if !children.is_empty() && key != "." => {
                collect_leaves(children, path, out);
            }
            _ => out.push(path.clone()),
        }
        path.pop();
    }
}

fn remove_leaf(tree: &mut Map<String, Value>, leaf: &[String]) {
    let Some((first, rest)) = leaf.split_first() else {
        return;
    };
    if rest.is_empty() {
        tree.remove(first);
        return;
    }
    if let Some(Value::Object(child)) = tree.get_mut(first) {
        remove_leaf(child, rest);
        // An emptied node would read as "owns this whole field": drop it instead.
        if child.is_empty() {
            tree.remove(first);
        }
    }
}

fn insert_leaf(tree: &mut Map<String, Value>, leaf: &[String]) {
    let Some((first, rest)) = leaf.split_first() else {
        return;
    };
    let child = tree
        .entry(first.clone())
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(child) = child {
        insert_leaf(child, rest);
    }
}

fn union(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (key, value) in from {
        match (into.get_mut(&key), value) {
            (Some(Value::Object(a)), Value::Object(b)) => union(a, b),
            (None, value) => {
                into.insert(key, value);
            }
            _ => {}
        }
    }
}

/// Whether the previous revision rendered this field and the live object still holds the
/// value it rendered (for a `.` leaf: the map or list item still exists in both).
fn rendered_and_unchanged(previous: &Value, live: &Value, leaf: &[String]) -> bool {
    let presence = leaf.last().is_some_and(|k| k == ".");
    let path = if presence {
        &leaf[..leaf.len() - 1]
    } else {
        leaf
    };
    match (resolve(previous, path), resolve(live, path)) {
        (Some(_), Some(_)) if presence => true,
        (Some(a), Some(b)) => a == b,
        _ => false,
    }
}

/// Follows FieldsV1 keys through an object.
fn resolve<'a>(mut value: &'a Value, path: &[String]) -> Option<&'a Value> {
    for key in path {
        value = if let Some(field) = key.strip_prefix("f:") {
            value.as_object()?.get(field)?
        } else if let Some(keys) = key.strip_prefix("k:") {
            let want: Map<String, Value> = serde_json::from_str(keys).ok()?;
            value
                .as_array()?
                .iter()
                .find(|item| want.iter().all(|(k, v)| item.get(k) == Some(v)))?
        } else if let Some(member) = key.strip_prefix("v:") {
            let want: Value = serde_json::from_str(member).ok()?;
            value.as_array()?.iter().find(|item| **item == want)?
        } else if let Some(index) = key.strip_prefix("i:") {
            value.as_array()?.get(index.parse::<usize>().ok()?)?
        } else {
            return None;
        };
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: &str = "2026-11-22T00:00:00Z";

    fn entry(manager: &str, operation: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": operation, "apiVersion": "apps/v1",
               "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    fn deployment(spec: Value, managed: Vec<Value>) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "managedFields": managed}, "spec": spec})
    }

    fn manager<'a>(entries: &'a [Value], name: &str, op: &str) -> Option<&'a Value> {
        entries
            .iter()
            .find(|e| e["manager"] == name && e["operation"] == op)
    }

    #[test]
    fn helm_client_side_entries_fold_into_the_apply_entry() {
        let live = deployment(
            json!({"replicas": 2, "template": {"spec": {"nodeSelector": {"disk": "ssd"}}}}),
            vec![
                entry(
                    "helm",
                    "Update",
                    json!({"f:spec": {"f:replicas": {}, "f:template": {
                    "f:spec": {"f:nodeSelector": {".": {}, "f:disk": {}}}}}}),
                ),
                entry(
                    "kube-controller-manager",
                    "Update",
                    json!({"f:metadata": {
                    "f:annotations": {"f:deployment.kubernetes.io/revision": {}}}}),
                ),
            ],
        );
        let entries = migrate(&live, None, NOW).expect("helm's fields move");
        assert!(manager(&entries, "helm", "Update").is_none());
        let apply = manager(&entries, "helm", "Apply").unwrap();
        assert_eq!(
            apply["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:nodeSelector"]["f:disk"],
            json!({})
        );
        assert_eq!(apply["time"], NOW);
        // Another controller's own fields stay its own.
        assert!(manager(&entries, "kube-controller-manager", "Update").is_some());
    }

    #[test]
    fn round_one_wheelhouse_entries_join_an_existing_helm_entry() {
        let live = deployment(
            json!({"replicas": 2, "paused": false}),
            vec![
                entry("helm", "Apply", json!({"f:spec": {"f:replicas": {}}})),
                entry("wheelhouse", "Apply", json!({"f:spec": {"f:paused": {}}})),
            ],
        );
        let entries = migrate(&live, None, NOW).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(
            entries[0]["fieldsV1"],
            json!({"f:spec": {"f:replicas": {}, "f:paused": {}}})
        );
        assert_eq!(entries[0]["time"], "2026-01-01T00:00:00Z");
    }

    #[test]
    fn another_managers_fields_move_only_where_the_previous_revision_rendered_them() {
        let containers = json!([{"name": "app", "image": "web:1", "args": ["--a"]}]);
        let live = deployment(
            json!({"replicas": 5, "template": {"spec": {
                "nodeSelector": {"disk": "ssd"}, "containers": containers}}}),
            vec![entry(
                "helm-controller",
                "Apply",
                json!({"f:spec": {
                    "f:replicas": {},
                    "f:template": {"f:spec": {
                        "f:nodeSelector": {".": {}, "f:disk": {}},
                        "f:containers": {"k:{\"name\":\"app\"}": {
                            ".": {}, "f:name": {}, "f:image": {}, "f:args": {}}},
                        "f:tolerations": {},
                    }},
                }}),
            )],
        );
        // The previous revision rendered replicas 3 (someone scaled to 5 since), the
        // nodeSelector and the container, but no tolerations.
        let previous = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {"replicas": 3, "template": {"spec": {
                "nodeSelector": {"disk": "ssd"},
                "containers": [{"name": "app", "image": "web:1", "args": ["--a"]}]}}}});
        let entries = migrate(&live, Some(&previous), NOW).unwrap();
        let ours = &manager(&entries, "helm", "Apply").unwrap()["fieldsV1"];
        let theirs = &manager(&entries, "helm-controller", "Apply").unwrap()["fieldsV1"];
        let pod = &ours["f:spec"]["f:template"]["f:spec"];
        assert_eq!(pod["f:nodeSelector"], json!({".": {}, "f:disk": {}}));
        assert_eq!(
            pod["f:containers"]["k:{\"name\":\"app\"}"],
            json!({".": {}, "f:name": {}, "f:image": {}, "f:args": {}})
        );
        // Changed since it was rendered, or never rendered: left with its manager.
        assert_eq!(
            theirs,
            &json!({"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:tolerations": {}}}}})
        );
        assert!(ours["f:spec"].get("f:replicas").is_none());
    }

    #[test]
    fn nothing_to_move_is_none() {
        let live = deployment(
            json!({"replicas": 1}),
            vec![
                entry("helm", "Apply", json!({"f:spec": {"f:replicas": {}}})),
                entry(
                    "kubectl-edit",
                    "Update",
                    json!({"f:spec": {"f:paused": {}}}),
                ),
            ],
        );
        assert_eq!(migrate(&live, None, NOW), None);
        let previous = json!({"spec": {"replicas": 1}});
        assert_eq!(migrate(&live, Some(&previous), NOW), None);
    }

    #[test]
    fn status_writes_and_other_versions_are_never_moved() {
        let mut status = entry("helm", "Update", json!({"f:status": {"f:replicas": {}}}));
        status["subresource"] = json!("status");
        let mut old = entry("helm", "Update", json!({"f:spec": {"f:replicas": {}}}));
        old["apiVersion"] = json!("apps/v1beta2");
        let live = deployment(json!({"replicas": 1}), vec![status, old]);
        assert_eq!(migrate(&live, None, NOW), None);
    }

    #[test]
    fn resolves_set_and_index_keys() {
        let v = json!({"a": ["x", "y"], "b": [{"n": 1}, {"n": 2}]});
        let p = |keys: &[&str]| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>();
        assert_eq!(resolve(&v, &p(&["f:a", "v:\"y\""])), Some(&json!("y")));
        assert_eq!(resolve(&v, &p(&["f:b", "i:1", "f:n"])), Some(&json!(2)));
        assert_eq!(
            resolve(&v, &p(&["f:b", "k:{\"n\":2}"])),
            Some(&json!({"n": 2}))
        );
        assert_eq!(resolve(&v, &p(&["f:b", "k:{\"n\":3}"])), None);
    }
}

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
        let mut leaves = Vec::new();
        collect_leaves(fields, &mut Vec::new(), &mut leaves);
        for leaf in leaves {
            // The ownership metadata is the release's to write once the object passed
            // Helm's ownership check (or is taken over on purpose).
            let ours = is_ownership_metadata(&leaf)
                || previous.is_some_and(|p| rendered_and_unchanged(p, live, &leaf));
            if ours {
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

/// A field of a live object that another manager holds with a value other than the one
/// the release renders now: applying would take it from them.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    pub manager: String,
    /// `scale` for a write through the scale subresource, else empty.
    pub subresource: String,
    /// `.spec.replicas`, `.spec.template.spec.containers[name=app].image`, ...
    pub path: String,
    /// Whether the previous revision rendered the same value there (the chart did not
    /// change it): the other manager's value is then kept.
    pub unchanged: bool,
    leaf: Leaf,
}

/// The fields of `live` that a manager other than the release's (and those folded into
/// it) holds with a value other than `rendered` has. `previous` is the object as the
/// previous revision rendered it, if it did. Writes through the scale subresource count:
/// they hold `.spec.replicas` of the object itself.
pub fn conflicts(live: &Value, rendered: &Value, previous: Option<&Value>) -> Vec<Conflict> {
    let Some(api_version) = live.get("apiVersion").and_then(Value::as_str) else {
        return Vec::new();
    };
    let Some(entries) = live
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut found: Vec<Conflict> = Vec::new();
    for entry in entries {
        let manager = text(entry, "manager");
        let subresource = text(entry, "subresource");
        if FOLDED_MANAGERS.contains(&manager)
            || !(subresource.is_empty() || subresource == "scale")
            || text(entry, "apiVersion") != api_version
            || text(entry, "fieldsType") != "FieldsV1"
        {
            continue;
        }
        let Some(fields) = entry.get("fieldsV1").and_then(Value::as_object) else {
            continue;
        };
        let mut leaves = Vec::new();
        collect_leaves(fields, &mut Vec::new(), &mut leaves);
        for leaf in leaves {
            // The presence of a map or list item holds no value to disagree on.
            if leaf.last().is_some_and(|k| k == ".")
                || leaf.first().is_some_and(|k| k == "f:status")
            {
                continue;
            }
            let (Some(want), Some(have)) = (resolve(rendered, &leaf), resolve(live, &leaf)) else {
                continue;
            };
            if want == have || found.iter().any(|c| c.leaf == leaf) {
                continue;
            }
            let before = previous.and_then(|p| resolve(p, &leaf));
            // Still the value the previous revision rendered: the release's own field,
            // written by whoever deployed that revision (Flux's helm-controller before a
            // migration), which [`migrate`] hands to the release manager.
            if before == Some(have) {
                continue;
            }
            let unchanged = before == Some(want);
            found.push(Conflict {
                manager: manager.to_string(),
                subresource: subresource.to_string(),
                path: field_path(&leaf),
                unchanged,
                leaf,
            });
        }
    }
    found
}

impl std::fmt::Display for Conflict {
    /// As the API server words it: `conflict with "kubectl" with subresource "scale":
    /// .spec.replicas`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "conflict with {:?}", self.manager)?;
        if !self.subresource.is_empty() {
            write!(f, " with subresource {:?}", self.subresource)?;
        }
        write!(f, ": {}", self.path)
    }
}

/// Removes a conflict's field from the object about to be applied, so the other manager
/// keeps its value.
pub fn leave_to_them(obj: &mut Value, conflict: &Conflict) {
    remove_value(obj, &conflict.leaf);
}

fn remove_value(value: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        if let (Some(field), Some(map)) = (first.strip_prefix("f:"), value.as_object_mut()) {
            map.remove(field);
        }
        return;
    }
    let child = if let Some(field) = first.strip_prefix("f:") {
        value.as_object_mut().and_then(|m| m.get_mut(field))
    } else if let Some(keys) = first.strip_prefix("k:") {
        let want: Map<String, Value> = serde_json::from_str(keys).unwrap_or_default();
        value.as_array_mut().and_then(|items| {
            items
                .iter_mut()
                .find(|item| want.iter().all(|(k, v)| item.get(k) == Some(v)))
        })
    } else {
        None
    };
    if let Some(child) = child {
        remove_value(child, rest);
    }
}

/// A FieldsV1 path as people write it: `.spec.template.spec.containers[name=app].image`.
fn field_path(leaf: &[String]) -> String {
    let mut out = String::new();
    for key in leaf {
        if let Some(field) = key.strip_prefix("f:") {
            out.push('.');
            out.push_str(field);
        } else if let Some(keys) = key.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(keys).unwrap_or_default();
            let parts: Vec<String> = keys
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => format!("{k}={s}"),
                    other => format!("{k}={other}"),
                })
                .collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(value) = key.strip_prefix("v:") {
            out.push_str(&format!("[{value}]"));
        } else if let Some(index) = key.strip_prefix("i:") {
            out.push_str(&format!("[{index}]"));
        }
    }
    out
}

/// `metadata.annotations.meta.helm.sh/release-name|namespace` and
/// `metadata.labels.app.kubernetes.io/managed-by`: what marks an object as a release's.
fn is_ownership_metadata(leaf: &[String]) -> bool {
    matches!(
        leaf.iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
        [
            "f:metadata",
            "f:annotations",
            "f:meta.helm.sh/release-name" | "f:meta.helm.sh/release-namespace"
        ] | ["f:metadata", "f:labels", "f:app.kubernetes.io/managed-by"]
    )
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

    fn scaled(replicas: i64, manager: &str, subresource: Option<&str>) -> Value {
        let mut theirs = entry(manager, "Update", json!({"f:spec": {"f:replicas": {}}}));
        if let Some(sub) = subresource {
            theirs["subresource"] = json!(sub);
        }
        deployment(
            json!({"replicas": replicas, "template": {"spec": {"containers": [
                {"name": "app", "image": "web:1"}]}}}),
            vec![
                entry(
                    "helm",
                    "Apply",
                    json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"app\"}": {".": {}, "f:name": {}, "f:image": {}}}}}}}),
                ),
                theirs,
            ],
        )
    }

    fn render(replicas: i64, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
               "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                   {"name": "app", "image": image}]}}}})
    }

    #[test]
    fn a_scaled_replica_count_conflicts_and_is_kept_while_the_chart_renders_the_same() {
        let live = scaled(5, "kubectl", Some("scale"));
        let found = conflicts(&live, &render(2, "web:2"), Some(&render(2, "web:1")));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].manager, "kubectl");
        assert_eq!(found[0].path, ".spec.replicas");
        assert_eq!(
            found[0].to_string(),
            r#"conflict with "kubectl" with subresource "scale": .spec.replicas"#
        );
        assert!(found[0].unchanged);

        let mut applied = render(2, "web:2");
        leave_to_them(&mut applied, &found[0]);
        assert_eq!(applied["spec"].get("replicas"), None);
        assert_eq!(
            applied["spec"]["template"]["spec"]["containers"][0]["image"],
            "web:2"
        );
    }

    #[test]
    fn a_changed_rendered_value_is_a_real_conflict() {
        let live = scaled(5, "hpa-controller", None);
        let found = conflicts(&live, &render(3, "web:1"), Some(&render(2, "web:1")));
        assert_eq!(found.len(), 1);
        assert!(!found[0].unchanged);
        // A new object (no previous rendering) is a real conflict as well.
        assert!(!conflicts(&live, &render(3, "web:1"), None)[0].unchanged);
    }

    #[test]
    fn a_field_still_holding_the_previous_render_is_the_releases_own() {
        // Flux's helm-controller deployed replicas 2 (the previous revision); the chart
        // now renders 3: no conflict, the field moves to the release manager.
        let live = scaled(2, "helm-controller", None);
        assert!(conflicts(&live, &render(3, "web:1"), Some(&render(2, "web:1"))).is_empty());
        // Without the previous revision there is nothing to tell it by.
        assert_eq!(conflicts(&live, &render(3, "web:1"), None).len(), 1);
    }

    #[test]
    fn the_same_value_or_our_own_fields_are_no_conflict() {
        assert!(
            conflicts(
                &scaled(2, "kubectl", Some("scale")),
                &render(2, "web:1"),
                None
            )
            .is_empty()
        );
        // helm's own Update entries (the helm CLI's client-side apply) are ours.
        assert!(conflicts(&scaled(5, "helm", None), &render(2, "web:1"), None).is_empty());
        // Status writes hold nothing the chart renders.
        assert!(
            conflicts(
                &scaled(5, "kubectl", Some("status")),
                &render(2, "web:1"),
                None
            )
            .is_empty()
        );
    }

    #[test]
    fn paths_read_as_people_write_them() {
        let leaf: Leaf = [
            "f:spec",
            "f:template",
            "f:spec",
            "f:containers",
            "k:{\"name\":\"app\"}",
            "f:image",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            field_path(&leaf),
            ".spec.template.spec.containers[name=app].image"
        );
        let mut obj = render(2, "web:1");
        remove_value(&mut obj, &leaf);
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"][0],
            json!({"name": "app"})
        );
    }

    #[test]
    fn ownership_metadata_another_manager_wrote_moves_to_the_release() {
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "web", "managedFields": [entry("kubectl-create", "Update", json!({
                "f:metadata": {"f:annotations": {".": {}, "f:meta.helm.sh/release-name": {}, "f:note": {}},
                               "f:labels": {".": {}, "f:app.kubernetes.io/managed-by": {}}},
                "f:data": {"f:a": {}}}))]}});
        let mut live = live;
        live["metadata"]["managedFields"][0]["apiVersion"] = json!("v1");
        let entries = migrate(&live, None, NOW).expect("the ownership metadata moves");
        let ours = &manager(&entries, "helm", "Apply").unwrap()["fieldsV1"];
        assert_eq!(
            ours,
            &json!({"f:metadata": {"f:annotations": {"f:meta.helm.sh/release-name": {}},
                                   "f:labels": {"f:app.kubernetes.io/managed-by": {}}}})
        );
        let theirs = &manager(&entries, "kubectl-create", "Update").unwrap()["fieldsV1"];
        assert_eq!(theirs["f:data"], json!({"f:a": {}}));
        assert_eq!(theirs["f:metadata"]["f:annotations"]["f:note"], json!({}));
    }
}

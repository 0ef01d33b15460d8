//! `spec.commonMetadata`: labels and annotations put on every object the chart rendered,
//! as helm-controller's commonMetadata post-renderer puts them (a kustomize label and
//! annotation transformer on `metadata` only: not on selectors or pod templates; the
//! chart's own value of the same key is overridden). Helm 4 post-renders hooks with the
//! templates (helm-controller's default `postRenderStrategy: combined`), so hooks and
//! tests get them too; the chart's `crds/` are never post-rendered. Helm's ownership
//! label and annotations are set at apply time, after this, so they always win.
//!
//! The result is what the revision stores (`helm get manifest` shows it, and
//! `helm rollback` restores it), and the revision's [`COMMON_METADATA_LABEL`] keeps
//! the digest of what it was made with, so a changed commonMetadata is a new desired
//! state.

use serde_json::{Map, Value};

use crate::api::CommonMetadata;
use crate::helm::apply::manifest::{is_blank_document, split_documents};
use crate::helm::release::Hook;
pub use crate::helm::release::{COMMON_METADATA_LABEL, SOURCE_DIGEST_KEPT};
use crate::helm::render::Rendered;

/// The digest of a commonMetadata that says anything (none for none, or an empty one).
pub fn digest(common: Option<&CommonMetadata>) -> Option<String> {
    use sha2::{Digest, Sha256};
    let common = common.filter(|c| !c.is_empty())?;
    let json = serde_json::to_vec(common).expect("maps of strings serialize");
    Some(hex::encode(Sha256::digest(&json)))
}

/// What [`COMMON_METADATA_LABEL`] keeps of a digest (a label value holds at most 63).
pub fn label_value(digest: &str) -> String {
    digest[..SOURCE_DIGEST_KEPT.min(digest.len())].to_owned()
}

/// Whether every object of `manifest` (and there is one) carries `common`'s labels and
/// annotations with its values: a revision another tool made with the same
/// commonMetadata (Flux's, before a migration) records no digest, but its objects say it.
pub fn carried_by(manifest: &str, common: &CommonMetadata) -> bool {
    let Ok(objects) = crate::helm::apply::manifest::parse_manifest(manifest) else {
        return false;
    };
    let has = |have: &Option<std::collections::BTreeMap<String, String>>,
               want: &std::collections::BTreeMap<String, String>| {
        want.iter()
            .all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
    };
    !objects.is_empty()
        && objects.iter().all(|o| {
            has(&o.metadata.labels, &common.labels)
                && has(&o.metadata.annotations, &common.annotations)
        })
}

/// Puts `common` on every object of `rendered`, its hooks included.
pub fn apply(
    rendered: &mut Rendered,
    common: &CommonMetadata,
) -> Result<(), crate::text::yaml::Error> {
    if common.is_empty() {
        return Ok(());
    }
    rendered.manifest = on_manifest(&rendered.manifest, common)?;
    for hook in &mut rendered.hooks {
        on_hook(hook, common)?;
    }
    Ok(())
}

/// A manifest in Helm's format (`---`, `# Source:`, the document), each object with
/// `common`. Documents without an object stay as they are.
pub fn on_manifest(
    manifest: &str,
    common: &CommonMetadata,
) -> Result<String, crate::text::yaml::Error> {
    let mut out = String::with_capacity(manifest.len() + 64);
    for doc in split_documents(manifest) {
        out.push_str("---\n");
        if let Some(source) = doc.source {
            out.push_str(&format!("# Source: {source}\n"));
        }
        out.push_str(&on_document(doc.body, common)?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}

fn on_hook(hook: &mut Hook, common: &CommonMetadata) -> Result<(), crate::text::yaml::Error> {
    hook.manifest = on_document(&hook.manifest, common)?;
    Ok(())
}

/// One document's objects with `common` (a `List`'s items each).
fn on_document(body: &str, common: &CommonMetadata) -> Result<String, crate::text::yaml::Error> {
    if is_blank_document(body) {
        return Ok(body.to_owned());
    }
    let mut values = crate::text::yaml::parse_documents(body)?;
    for value in &mut values {
        if value_kind_is_list(value)
            && let Some(Value::Array(items)) = value.get_mut("items")
        {
            for item in items.iter_mut() {
                set_metadata(item, common);
            }
        } else {
            set_metadata(value, common);
        }
    }
    let text = crate::text::yaml::to_documents(&values);
    Ok(text.strip_prefix("---\n").unwrap_or(&text).to_owned())
}

fn value_kind_is_list(value: &Value) -> bool {
    value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
}

fn set_metadata(object: &mut Value, common: &CommonMetadata) {
    let Some(object) = object.as_object_mut() else {
        return;
    };
    let metadata = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    for (field, entries) in [
        ("labels", &common.labels),
        ("annotations", &common.annotations),
    ] {
        if entries.is_empty() {
            continue;
        }
        let map = metadata
            .entry(field)
            .or_insert_with(|| Value::Object(Map::new()));
        if !map.is_object() {
            *map = Value::Object(Map::new());
        }
        let map = map.as_object_mut().expect("an object now");
        for (k, v) in entries {
            map.insert(k.clone(), Value::String(v.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn common() -> CommonMetadata {
        CommonMetadata {
            labels: [
                ("team".to_owned(), "web".to_owned()),
                ("tier".to_owned(), "edge".to_owned()),
            ]
            .into(),
            annotations: [("owner".to_owned(), "ops@example.com".to_owned())].into(),
        }
    }

    fn objects(manifest: &str) -> Vec<Value> {
        crate::text::yaml::parse_documents(manifest).unwrap()
    }

    #[test]
    fn every_object_gets_the_labels_and_annotations_over_the_charts_own() {
        let manifest = "---\n# Source: app/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    tier: backend\n    app: a\ndata:\n  port: \"8080\"\n---\n# Source: app/templates/deploy.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: b\nspec:\n  selector:\n    matchLabels: {app: b}\n  template:\n    metadata:\n      labels: {app: b}\n    spec:\n      containers: [{name: c, image: nginx}]\n---\n# Source: app/templates/empty.yaml\n# nothing rendered\n";
        let out = on_manifest(manifest, &common()).unwrap();
        let docs = split_documents(&out);
        assert_eq!(
            docs.iter().map(|d| d.source).collect::<Vec<_>>(),
            [
                Some("app/templates/cm.yaml"),
                Some("app/templates/deploy.yaml"),
                Some("app/templates/empty.yaml")
            ],
            "{out}"
        );
        let objs = objects(&out);
        assert_eq!(objs.len(), 2, "{out}");
        let cm = &objs[0];
        // The chart's `tier` is overridden, its `app` kept.
        assert_eq!(
            cm["metadata"]["labels"],
            serde_json::json!({"app": "a", "team": "web", "tier": "edge"})
        );
        assert_eq!(
            cm["metadata"]["annotations"],
            serde_json::json!({"owner": "ops@example.com"})
        );
        assert_eq!(cm["data"]["port"], "8080", "a string stays a string");
        let deploy = &objs[1];
        assert_eq!(deploy["metadata"]["labels"]["team"], "web");
        // Only metadata: selectors and pod templates are the chart's.
        assert_eq!(
            deploy["spec"]["selector"]["matchLabels"],
            serde_json::json!({"app": "b"})
        );
        assert_eq!(
            deploy["spec"]["template"]["metadata"]["labels"],
            serde_json::json!({"app": "b"})
        );
        // Parsed as the applier parses it.
        assert_eq!(
            crate::helm::apply::manifest::parse_manifest(&out)
                .unwrap()
                .len(),
            2
        );
    }

    #[test]
    fn hooks_get_them_too_and_nothing_changes_without_any() {
        let hook = Hook {
            name: "t".into(),
            kind: "Pod".into(),
            path: "app/templates/test.yaml".into(),
            manifest: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  annotations:\n    helm.sh/hook: test\nspec:\n  containers: [{name: c, image: busybox}]\n".into(),
            ..Hook::default()
        };
        let mut rendered = Rendered {
            manifest: "---\n# Source: app/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n".into(),
            hooks: vec![hook],
            revision: 1,
            unavailable: Vec::new(),
            merged: None,
        };
        let before = (
            rendered.manifest.clone(),
            rendered.hooks[0].manifest.clone(),
        );
        apply(&mut rendered, &CommonMetadata::default()).unwrap();
        assert_eq!(
            (
                rendered.manifest.clone(),
                rendered.hooks[0].manifest.clone()
            ),
            before,
            "an empty commonMetadata changes nothing, byte for byte"
        );
        apply(&mut rendered, &common()).unwrap();
        let pod = &objects(&rendered.hooks[0].manifest)[0];
        assert_eq!(pod["metadata"]["labels"]["tier"], "edge");
        assert_eq!(
            pod["metadata"]["annotations"],
            serde_json::json!({"helm.sh/hook": "test", "owner": "ops@example.com"})
        );
        assert!(!rendered.hooks[0].manifest.starts_with("---"));
    }

    #[test]
    fn a_manifest_made_with_it_elsewhere_is_told_by_its_objects() {
        let made = on_manifest(
            "---\n# Source: a/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n# Source: a/s.yaml\napiVersion: v1\nkind: Service\nmetadata: {name: s, labels: {team: other}}\n",
            &common(),
        )
        .unwrap();
        assert!(carried_by(&made, &common()));
        let mut more = common();
        more.labels.insert("extra".into(), "x".into());
        assert!(!carried_by(&made, &more), "a label it lacks");
        let mut other = common();
        other.labels.insert("team".into(), "api".into());
        assert!(!carried_by(&made, &other), "another value");
        let plain =
            "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, labels: {team: web}}\n";
        assert!(!carried_by(plain, &common()), "no annotation");
        assert!(!carried_by("", &common()), "no object at all");
    }

    #[test]
    fn the_digest_names_what_was_applied() {
        assert_eq!(digest(None), None);
        assert_eq!(digest(Some(&CommonMetadata::default())), None);
        let d = digest(Some(&common())).unwrap();
        assert_eq!(d.len(), 64);
        let mut other = common();
        other.annotations.clear();
        assert_ne!(digest(Some(&other)), Some(d.clone()));
        assert_eq!(label_value(&d).len(), 40);
        assert!(d.starts_with(&label_value(&d)));
    }
}

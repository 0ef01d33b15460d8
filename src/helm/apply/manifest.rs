//! Rendered manifests as Helm writes them (`---` separated documents, each with a
//! `# Source: <template>` comment) and the Kubernetes objects in them.

use std::fmt;

use kube::api::DynamicObject;
use serde_json::Value;

use super::Error;
use crate::text::yaml;

/// Helm's `helm.sh/resource-policy` annotation; `keep` leaves the object in place when the
/// release stops rendering it or is uninstalled.
pub const RESOURCE_POLICY_ANNOTATION: &str = "helm.sh/resource-policy";
/// The label and annotations with which Helm marks the objects a release owns; `helm`
/// refuses to adopt an object without them.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_HELM: &str = "Helm";
pub const RELEASE_NAME_ANNOTATION: &str = "meta.helm.sh/release-name";
pub const RELEASE_NAMESPACE_ANNOTATION: &str = "meta.helm.sh/release-namespace";

/// One YAML document of a manifest and the template it was rendered from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Document<'a> {
    /// The path of the `# Source:` comment, e.g. `mychart/templates/service.yaml`.
    pub source: Option<&'a str>,
    /// The document without its `# Source:` line.
    pub body: &'a str,
}

/// Splits a multi-document manifest like Helm's `releaseutil.SplitManifests`: a line
/// starting with `---` (and any spaces or tabs after it) separates documents, blank
/// documents are dropped and leading whitespace is trimmed. The `# Source:` comment Helm
/// writes at the top of each document is taken off into [`Document::source`].
pub fn split_documents(text: &str) -> Vec<Document<'_>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut line_start = 0;
    loop {
        let line_end = text[line_start..]
            .find('\n')
            .map_or(text.len(), |i| line_start + i);
        let line = &text[line_start..line_end];
        if let Some(after) = line.strip_prefix("---") {
            pieces.push(&text[start..line_start]);
            // What follows the separator on its line belongs to the next document.
            start = line_end - after.trim_start_matches([' ', '\t']).len();
        }
        if line_end == text.len() {
            break;
        }
        line_start = line_end + 1;
    }
    pieces.push(&text[start..]);

    pieces
        .into_iter()
        .filter(|piece| !piece.trim().is_empty())
        .map(|piece| {
            let piece = piece.trim_start();
            let (first, rest) = piece.split_once('\n').unwrap_or((piece, ""));
            match first.strip_prefix("# Source:") {
                Some(path) => Document {
                    source: Some(path.trim()),
                    body: rest,
                },
                None => Document {
                    source: None,
                    body: piece,
                },
            }
        })
        .collect()
}

/// Whether a document holds no YAML node at all: only blank lines and comments.
pub fn is_blank_document(body: &str) -> bool {
    body.lines().all(|line| {
        let line = line.trim();
        line.is_empty() || line.starts_with('#')
    })
}

/// Parses a manifest into objects, in document order. Documents without content are
/// skipped; `List` kinds are flattened into their items, as Helm's resource builder does.
/// Every object needs `apiVersion`, `kind` and `metadata.name`.
///
/// Namespaces are left as written: whether a kind is namespaced is only known through
/// discovery, so [`super::Applier`] fills in the release namespace when it applies.
/// The documents of `manifest` (each with its `---` and `# Source:` lines) whose object is
/// one of `wanted`; a document without a namespace is in `namespace`, and a cluster-scoped
/// `wanted` entry matches whatever namespace its document names. For carrying objects a
/// revision keeps (not pruned) into the revision's stored manifest.
pub fn documents_of(manifest: &str, wanted: &[ObjectRef], namespace: &str) -> String {
    let mut out = String::new();
    for doc in split_documents(manifest) {
        let Ok(objects) = parse_manifest(doc.body) else {
            continue;
        };
        let matches = objects.iter().any(|obj| {
            let mut r = ObjectRef::from_object(obj);
            r.namespace.get_or_insert_with(|| namespace.to_string());
            wanted.iter().any(|w| {
                w.group() == r.group()
                    && w.kind == r.kind
                    && w.name == r.name
                    && (w.namespace.is_none() || w.namespace == r.namespace)
            })
        });
        if matches {
            out.push_str("---\n");
            if let Some(source) = doc.source {
                out.push_str(&format!("# Source: {source}\n"));
            }
            out.push_str(doc.body.trim_end_matches('\n'));
            out.push('\n');
        }
    }
    out
}

pub fn parse_manifest(manifest: &str) -> Result<Vec<DynamicObject>, Error> {
    let mut objects = Vec::new();
    for doc in split_documents(manifest) {
        let origin = doc.source.unwrap_or("manifest");
        let parse_error = |message: String| Error::Parse {
            origin: origin.to_string(),
            message,
        };
        for value in yaml::parse_documents(doc.body).map_err(|e| parse_error(e.to_string()))? {
            flatten(value, &mut |value| {
                objects.push(to_object(value, origin)?);
                Ok(())
            })?;
        }
    }
    Ok(objects)
}

fn flatten(value: Value, push: &mut impl FnMut(Value) -> Result<(), Error>) -> Result<(), Error> {
    let is_list = value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"))
        && value.get("items").is_some_and(Value::is_array);
    if !is_list {
        return push(value);
    }
    let Some(Value::Array(items)) = value.get("items").cloned() else {
        unreachable!("checked above")
    };
    items.into_iter().try_for_each(|item| flatten(item, push))
}

fn to_object(value: Value, origin: &str) -> Result<DynamicObject, Error> {
    let invalid = |what: &str| Error::Parse {
        origin: origin.to_string(),
        message: what.to_string(),
    };
    if !value.is_object() {
        return Err(invalid("a document is not a YAML mapping"));
    }
    let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    if text("/apiVersion").is_empty() {
        return Err(invalid("an object has no apiVersion"));
    }
    if text("/kind").is_empty() {
        return Err(invalid("an object has no kind"));
    }
    if text("/metadata/name").is_empty() {
        return Err(invalid(&format!(
            "a {} has no metadata.name",
            text("/kind")
        )));
    }
    serde_json::from_value(value).map_err(|e| invalid(&e.to_string()))
}

/// Names one object: `Kind/namespace/name`, or `Kind/name` when cluster-scoped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
}

impl ObjectRef {
    /// The object's reference as written (its namespace is not defaulted).
    pub fn from_object(obj: &DynamicObject) -> Self {
        let types = obj.types.as_ref();
        Self {
            api_version: types.map(|t| t.api_version.clone()).unwrap_or_default(),
            kind: types.map(|t| t.kind.clone()).unwrap_or_default(),
            name: obj.metadata.name.clone().unwrap_or_default(),
            namespace: obj.metadata.namespace.clone().filter(|ns| !ns.is_empty()),
        }
    }

    /// The API group (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// What makes two references the same object across revisions: group, kind,
    /// namespace and name; not the version, which a chart may move to a newer one.
    pub fn identity(&self) -> (&str, &str, Option<&str>, &str) {
        (
            self.group(),
            &self.kind,
            self.namespace.as_deref(),
            &self.name,
        )
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.kind, ns, self.name),
            None => write!(f, "{}/{}", self.kind, self.name),
        }
    }
}

/// `helm.sh/resource-policy: keep`, compared as Helm does (trimmed, case-insensitive).
pub fn has_keep_policy(obj: &DynamicObject) -> bool {
    obj.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RESOURCE_POLICY_ANNOTATION))
        .is_some_and(|policy| policy.trim().eq_ignore_ascii_case("keep"))
}

/// Adds the label and annotations Helm puts on every object of a release.
pub fn set_ownership(obj: &mut DynamicObject, release_name: &str, release_namespace: &str) {
    obj.metadata
        .labels
        .get_or_insert_default()
        .insert(MANAGED_BY_LABEL.to_string(), MANAGED_BY_HELM.to_string());
    let annotations = obj.metadata.annotations.get_or_insert_default();
    annotations.insert(
        RELEASE_NAME_ANNOTATION.to_string(),
        release_name.to_string(),
    );
    annotations.insert(
        RELEASE_NAMESPACE_ANNOTATION.to_string(),
        release_namespace.to_string(),
    );
}

/// Helm's ownership check (`checkOwnership` in `pkg/action/validate.go`): an existing
/// object may become part of a release only when it carries the release's label and
/// annotations. `Err` holds Helm's own wording, e.g. `invalid ownership metadata;
/// annotation validation error: key "meta.helm.sh/release-name" must equal "b": current
/// value is "a"`.
pub fn check_ownership(
    obj: &DynamicObject,
    release_name: &str,
    release_namespace: &str,
) -> Result<(), OwnershipMismatch> {
    let labels = obj.metadata.labels.as_ref();
    let annotations = obj.metadata.annotations.as_ref();
    let require = |map: Option<&std::collections::BTreeMap<String, String>>,
                   label: bool,
                   key: &'static str,
                   want: &str|
     -> Option<MetadataMismatch> {
        let actual = map.and_then(|m| m.get(key));
        (actual.map(String::as_str) != Some(want)).then(|| MetadataMismatch {
            label,
            key,
            want: want.to_owned(),
            actual: actual.cloned(),
        })
    };
    let found: Vec<MetadataMismatch> = [
        require(labels, true, MANAGED_BY_LABEL, MANAGED_BY_HELM),
        require(annotations, false, RELEASE_NAME_ANNOTATION, release_name),
        require(
            annotations,
            false,
            RELEASE_NAMESPACE_ANNOTATION,
            release_namespace,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    if found.is_empty() {
        Ok(())
    } else {
        Err(OwnershipMismatch(found))
    }
}

/// Why an existing object is not the release's, in Helm's words: each label or
/// annotation that is missing or names something else.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid ownership metadata; {}",
    .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
)]
pub struct OwnershipMismatch(pub Vec<MetadataMismatch>);

/// One ownership label or annotation that does not hold what the release needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} validation error: {}",
    if *label { "label" } else { "annotation" },
    match actual {
        None => format!("missing key {key:?}: must be set to {want:?}"),
        Some(actual) => format!("key {key:?} must equal {want:?}: current value is {actual:?}"),
    }
)]
pub struct MetadataMismatch {
    /// A label (the managed-by label), else an annotation.
    pub label: bool,
    pub key: &'static str,
    pub want: String,
    /// None when the key is missing.
    pub actual: Option<String>,
}

/// The release an object's ownership annotations name, as `namespace/name`, for messages
/// that say who owns it now.
pub fn owner_of(obj: &DynamicObject) -> Option<String> {
    let annotations = obj.metadata.annotations.as_ref()?;
    let name = annotations.get(RELEASE_NAME_ANNOTATION)?;
    let namespace = annotations
        .get(RELEASE_NAMESPACE_ANNOTATION)
        .map_or("?", String::as_str);
    Some(format!("{namespace}/{name}"))
}

/// How Helm names an object in messages: `ConfigMap "x" in namespace "y"`.
pub fn helm_resource_string(reference: &ObjectRef) -> String {
    format!(
        "{} {:?} in namespace {:?}",
        reference.kind,
        reference.name,
        reference.namespace.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_of_picks_the_wanted_objects_with_their_source() {
        let manifest = "---\n# Source: c/templates/svc.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  name: web-lb\n---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n";
        let wanted = ObjectRef {
            api_version: "v1".into(),
            kind: "Service".into(),
            namespace: Some("apps".into()),
            name: "web-lb".into(),
        };
        assert_eq!(
            documents_of(manifest, std::slice::from_ref(&wanted), "apps"),
            "---\n# Source: c/templates/svc.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  name: web-lb\n"
        );
        assert_eq!(documents_of(manifest, &[wanted], "other"), "");
    }

    #[test]
    fn splits_like_helm() {
        let text = "\n---\n# Source: c/templates/a.yaml\nkind: A\n---   \n\n---\n\
                    # Source: c/templates/b.yaml\nkind: B\n---kind: C\n----\nkind: D\n";
        let docs = split_documents(text);
        assert_eq!(
            docs,
            vec![
                Document {
                    source: Some("c/templates/a.yaml"),
                    body: "kind: A\n"
                },
                Document {
                    source: Some("c/templates/b.yaml"),
                    body: "kind: B\n"
                },
                // Helm's separator regex also splits `---kind: C` (and eats a 4th dash).
                Document {
                    source: None,
                    body: "kind: C\n"
                },
                Document {
                    source: None,
                    body: "-\nkind: D\n"
                },
            ]
        );
        assert!(split_documents("").is_empty());
        assert!(split_documents("---\n \n---\n").is_empty());
        assert_eq!(split_documents("kind: X").len(), 1);
    }

    #[test]
    fn parses_objects_flattens_lists_and_skips_blank_documents() {
        let manifest = "---\n# Source: c/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\n\
                        metadata:\n  name: a\n  namespace: other\ndata:\n  mode: \"0644\"\n\
                        ---\n# Source: c/templates/empty.yaml\n# nothing rendered\n\
                        ---\n# Source: c/templates/list.yaml\napiVersion: v1\nkind: List\nitems:\n\
                        - {apiVersion: v1, kind: Secret, metadata: {name: s}}\n\
                        - {apiVersion: v1, kind: ServiceAccount, metadata: {name: sa}}\n";
        let objects = parse_manifest(manifest).unwrap();
        let refs: Vec<String> = objects
            .iter()
            .map(|o| ObjectRef::from_object(o).to_string())
            .collect();
        assert_eq!(refs, ["ConfigMap/other/a", "Secret/s", "ServiceAccount/sa"]);
        assert_eq!(objects[0].data["data"]["mode"], "0644");
    }

    #[test]
    fn parse_errors_name_the_template() {
        let err = parse_manifest("---\n# Source: c/templates/bad.yaml\nkind: [\n").unwrap_err();
        assert!(err.to_string().contains("c/templates/bad.yaml"), "{err}");
        let err = parse_manifest("---\n# Source: c/templates/x.yaml\napiVersion: v1\nkind: Pod\n")
            .unwrap_err();
        assert!(
            err.to_string().contains("Pod has no metadata.name"),
            "{err}"
        );
        let err = parse_manifest("- 1\n- 2\n").unwrap_err();
        assert!(err.to_string().contains("not a YAML mapping"), "{err}");
    }

    #[test]
    fn object_ref_identity_ignores_version() {
        let a = ObjectRef {
            api_version: "autoscaling/v1".into(),
            kind: "HorizontalPodAutoscaler".into(),
            name: "x".into(),
            namespace: Some("ns".into()),
        };
        let b = ObjectRef {
            api_version: "autoscaling/v2".into(),
            ..a.clone()
        };
        assert_eq!(a.identity(), b.identity());
        assert_eq!(a.group(), "autoscaling");
        assert_eq!(a.to_string(), "HorizontalPodAutoscaler/ns/x");
        let core = ObjectRef {
            api_version: "v1".into(),
            kind: "Namespace".into(),
            name: "n".into(),
            namespace: None,
        };
        assert_eq!(core.group(), "");
        assert_eq!(core.to_string(), "Namespace/n");
    }

    #[test]
    fn keep_policy_and_ownership() {
        let mut obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "labels": {"app": "x"},
                         "annotations": {"helm.sh/resource-policy": " Keep "}}
        }))
        .unwrap();
        assert!(has_keep_policy(&obj));
        set_ownership(&mut obj, "rel", "ns");
        let labels = obj.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["app"], "x");
        assert_eq!(labels[MANAGED_BY_LABEL], "Helm");
        let annotations = obj.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations[RELEASE_NAME_ANNOTATION], "rel");
        assert_eq!(annotations[RELEASE_NAMESPACE_ANNOTATION], "ns");
        assert_eq!(check_ownership(&obj, "rel", "ns"), Ok(()));
        assert_eq!(owner_of(&obj).as_deref(), Some("ns/rel"));
    }

    #[test]
    fn ownership_errors_use_helms_words() {
        let mut obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}
        }))
        .unwrap();
        assert_eq!(
            check_ownership(&obj, "b", "ns").unwrap_err().to_string(),
            "invalid ownership metadata; label validation error: missing key \"app.kubernetes.io/managed-by\": must be set to \"Helm\"; annotation validation error: missing key \"meta.helm.sh/release-name\": must be set to \"b\"; annotation validation error: missing key \"meta.helm.sh/release-namespace\": must be set to \"ns\""
        );
        set_ownership(&mut obj, "a", "ns");
        assert_eq!(
            check_ownership(&obj, "b", "ns").unwrap_err().to_string(),
            "invalid ownership metadata; annotation validation error: key \"meta.helm.sh/release-name\" must equal \"b\": current value is \"a\""
        );
        let reference = ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "a".into(),
            namespace: Some("ns".into()),
        };
        assert_eq!(
            helm_resource_string(&reference),
            "ConfigMap \"a\" in namespace \"ns\""
        );
    }
}

//! Splitting `helm template` output into the release manifest and hooks, as Helm's
//! `releaseutil.SortManifests` does when it builds a release.

use serde_json::Value;

use super::{Error, Rendered};
use crate::apply::manifest::{is_blank_document, split_documents};
use crate::apply::yaml;
use crate::release::{Hook, hook_delete_policy, hook_event};

pub const HOOK_ANNOTATION: &str = "helm.sh/hook";
pub const HOOK_WEIGHT_ANNOTATION: &str = "helm.sh/hook-weight";
pub const HOOK_DELETE_POLICY_ANNOTATION: &str = "helm.sh/hook-delete-policy";

/// Splits rendered output (documents in Helm's format, hooks among them) into the
/// manifest and the hooks. Documents without content are dropped; hooks with an event
/// Helm does not know are skipped, as Helm skips them.
pub fn split_rendered(output: &str) -> Result<Rendered, Error> {
    let mut rendered = Rendered::default();
    for doc in split_documents(output) {
        if is_blank_document(doc.body) {
            continue;
        }
        let origin = doc.source.unwrap_or("manifest");
        let head = yaml::parse_documents(doc.body)
            .map_err(|e| Error::Output(format!("{origin}: {e}")))?
            .into_iter()
            .next()
            .unwrap_or(Value::Null);
        // Helm keeps each document's text as rendered; only surrounding blank lines go.
        let content = format!("{}\n", doc.body.trim_end());

        let annotation = |key: &str| annotation(&head, key);
        let Some(hook_events) = annotation(HOOK_ANNOTATION) else {
            match doc.source {
                Some(path) => {
                    rendered
                        .manifest
                        .push_str(&format!("---\n# Source: {path}\n{content}\n"));
                }
                None => rendered.manifest.push_str(&format!("---\n{content}\n")),
            }
            continue;
        };

        let Some(events) = parse_events(&hook_events) else {
            tracing::info!(hook = %hook_events, template = origin, "skipping unknown hooks");
            continue;
        };
        let mut delete_policies = annotation(HOOK_DELETE_POLICY_ANNOTATION)
            .map(|p| list(&p))
            .unwrap_or_default();
        if delete_policies.is_empty() {
            delete_policies.push(hook_delete_policy::BEFORE_HOOK_CREATION.to_string());
        }
        let text = |pointer: &str| {
            head.pointer(pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        rendered.hooks.push(Hook {
            name: text("/metadata/name"),
            kind: text("/kind"),
            path: doc.source.unwrap_or_default().to_string(),
            manifest: content,
            events,
            weight: annotation(HOOK_WEIGHT_ANNOTATION)
                .and_then(|w| w.parse().ok())
                .unwrap_or(0),
            delete_policies,
            ..Hook::default()
        });
    }
    Ok(rendered)
}

/// An annotation as a string (an unquoted number or bool in YAML counts too).
fn annotation(head: &Value, key: &str) -> Option<String> {
    match head.pointer("/metadata/annotations")?.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(|item| item.trim().to_ascii_lowercase())
        .filter(|item| !item.is_empty())
        .collect()
}

/// The events of a `helm.sh/hook` annotation; `None` if one is unknown. Helm 2's
/// `test-success` means `test`.
fn parse_events(value: &str) -> Option<Vec<String>> {
    const KNOWN: &[&str] = &[
        hook_event::PRE_INSTALL,
        hook_event::POST_INSTALL,
        hook_event::PRE_DELETE,
        hook_event::POST_DELETE,
        hook_event::PRE_UPGRADE,
        hook_event::POST_UPGRADE,
        hook_event::PRE_ROLLBACK,
        hook_event::POST_ROLLBACK,
        hook_event::TEST,
    ];
    value
        .split(',')
        .map(|event| {
            let event = event.trim().to_ascii_lowercase();
            match event.as_str() {
                "test-success" => Some(hook_event::TEST.to_string()),
                e if KNOWN.contains(&e) => Some(event),
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured: `helm template demo tests/fixtures/charts/apply-render --namespace demo`
    /// (helm v4.3.1). The manifest comes first (in install order), then the hooks.
    const SAMPLE: &str = r#"---
# Source: apply-render/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: demo-settings
  namespace: demo
data:
  greeting: "hello"
  isUpgrade: "false"
  kubeVersion: "v1.37.0"
  hasWidgets: "false"

---
# Source: apply-render/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: demo
spec:
  selector:
    app: demo
  ports:
    - port: 80
---
# Source: apply-render/templates/tests/test-connection.yaml
apiVersion: v1
kind: Pod
metadata:
  name: demo-test
  annotations:
    "helm.sh/hook": test
    "helm.sh/hook-weight": "-1"
spec:
  restartPolicy: Never
  containers:
    - name: test
      image: registry.invalid/test:1

---
# Source: apply-render/templates/post-upgrade-job.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: demo-migrate
  annotations:
    "helm.sh/hook": post-upgrade
    "helm.sh/hook-weight": "5"
    "helm.sh/hook-delete-policy": hook-succeeded
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
        - name: migrate
          image: registry.invalid/migrate:1

"#;

    #[test]
    fn splits_manifest_and_hooks_in_helms_format() {
        let rendered = split_rendered(SAMPLE).unwrap();
        // As Helm stores it: every document followed by a blank line.
        assert_eq!(
            rendered.manifest,
            "---\n# Source: apply-render/templates/configmap.yaml\napiVersion: v1\n\
             kind: ConfigMap\nmetadata:\n  name: demo-settings\n  namespace: demo\ndata:\n\
             \x20 greeting: \"hello\"\n  isUpgrade: \"false\"\n  kubeVersion: \"v1.37.0\"\n\
             \x20 hasWidgets: \"false\"\n\n\
             ---\n# Source: apply-render/templates/service.yaml\napiVersion: v1\n\
             kind: Service\nmetadata:\n  name: demo\nspec:\n  selector:\n    app: demo\n\
             \x20 ports:\n    - port: 80\n\n"
        );
        let [pod, job] = rendered.hooks.as_slice() else {
            panic!("two hooks expected: {:#?}", rendered.hooks)
        };
        assert_eq!(pod.name, "demo-test");
        assert_eq!(pod.kind, "Pod");
        assert_eq!(
            pod.path,
            "apply-render/templates/tests/test-connection.yaml"
        );
        assert_eq!(pod.events, ["test"]);
        assert_eq!(pod.weight, -1);
        assert_eq!(pod.delete_policies, ["before-hook-creation"]);
        assert!(pod.manifest.starts_with("apiVersion: v1\nkind: Pod\n"));
        assert!(pod.manifest.ends_with("image: registry.invalid/test:1\n"));

        assert_eq!(job.name, "demo-migrate");
        assert_eq!(job.kind, "Job");
        assert_eq!(job.path, "apply-render/templates/post-upgrade-job.yaml");
        assert_eq!(job.events, ["post-upgrade"]);
        assert_eq!(job.weight, 5);
        assert_eq!(job.delete_policies, ["hook-succeeded"]);
    }

    #[test]
    fn reads_hook_annotations_as_helm_does() {
        let output = "---\n# Source: c/templates/job.yaml\napiVersion: batch/v1\nkind: Job\n\
                      metadata:\n  name: j\n  annotations:\n    helm.sh/hook: post-upgrade, POST-INSTALL\n\
                      \x20   helm.sh/hook-weight: -3\n\
                      \x20   helm.sh/hook-delete-policy: Hook-Succeeded , before-hook-creation\n";
        let rendered = split_rendered(output).unwrap();
        let hook = &rendered.hooks[0];
        assert_eq!(hook.events, ["post-upgrade", "post-install"]);
        assert_eq!(hook.weight, -3);
        assert_eq!(
            hook.delete_policies,
            ["hook-succeeded", "before-hook-creation"]
        );
    }

    #[test]
    fn drops_empty_documents_and_unknown_hooks() {
        let output = "---\n# Source: c/templates/empty.yaml\n# nothing here\n\
                      ---\n# Source: c/templates/blank.yaml\n\n\n\
                      ---\n# Source: c/templates/odd.yaml\napiVersion: v1\nkind: ConfigMap\n\
                      metadata:\n  name: odd\n  annotations:\n    helm.sh/hook: pre-install,sometimes\n\
                      ---\n# Source: c/templates/legacy.yaml\napiVersion: v1\nkind: Pod\n\
                      metadata:\n  name: legacy\n  annotations:\n    helm.sh/hook: test-success\n";
        let rendered = split_rendered(output).unwrap();
        assert_eq!(rendered.manifest, "");
        assert_eq!(rendered.hooks.len(), 1);
        assert_eq!(rendered.hooks[0].name, "legacy");
        assert_eq!(rendered.hooks[0].events, ["test"]);
    }

    #[test]
    fn a_document_that_is_not_yaml_names_its_template() {
        let err =
            split_rendered("---\n# Source: c/templates/bad.yaml\nkey: [unclosed\n").unwrap_err();
        assert!(err.to_string().contains("c/templates/bad.yaml"), "{err}");
    }
}

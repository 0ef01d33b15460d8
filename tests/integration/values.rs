//! Values composition against the local control plane: ConfigMaps and Secrets read from
//! the HelmRelease's namespace, merged in order with inline values last.

use crate::support;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::{TestNamespace, client, from_yaml};
use wheelhouse::api::{HelmRelease, ValuesKind};
use wheelhouse::helm::values::{self, Error, ValuesSourceRef, compose};

fn release(namespace: &str, spec_tail: &str) -> HelmRelease {
    from_yaml(&format!(
        "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: app, namespace: {namespace}}}\nspec:\n  chart: {{path: ./chart}}\n{spec_tail}"
    ))
}

async fn config_map(client: &Client, ns: &str, yaml: &str) -> ConfigMap {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &from_yaml(yaml))
        .await
        .expect("create ConfigMap")
}

async fn secret(client: &Client, ns: &str, yaml: &str) -> Secret {
    let api: Api<Secret> = Api::namespaced(client.clone(), ns);
    api.create(&PostParams::default(), &from_yaml(yaml))
        .await
        .expect("create Secret")
}

#[tokio::test]
async fn configmap_then_secret_then_inline_values_take_precedence_in_order() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "values-merge").await;
    let base = config_map(
        &client,
        &ns.name,
        r#"
metadata: {name: base-values}
data:
  values.yaml: |
    image: {repository: nginx, tag: "1.0", pullPolicy: IfNotPresent}
    replicas: 1
    ingress: {enabled: true, host: a.example}
    list: [1, 2, 3]
"#,
    )
    .await;
    let creds = secret(
        &client,
        &ns.name,
        r#"
metadata: {name: app-secrets}
stringData:
  overrides.yaml: |
    replicas: 2
    database: {password: hunter2}
    list: [9]
"#,
    )
    .await;
    // Keys in binaryData are read too (kubectl puts a --from-file file there when it is
    // not plain UTF-8 text).
    let binary = config_map(
        &client,
        &ns.name,
        "metadata: {name: binary-values}\nbinaryData: {values.yaml: \"aW1hZ2U6IHt0YWc6ICIyLjAifQo=\"}\n",
    )
    .await;
    let hr = release(
        &ns.name,
        r#"  valuesFrom:
  - {kind: ConfigMap, name: base-values}
  - {kind: Secret, name: app-secrets, valuesKey: overrides.yaml}
  - {kind: ConfigMap, name: binary-values}
  values:
    replicas: 3
    ingress: {host: b.example}
"#,
    );

    let composed = compose(&client, &hr).await.expect("compose");
    assert_eq!(
        Value::Object(composed.values.clone()),
        json!({
            "image": {"repository": "nginx", "tag": "2.0", "pullPolicy": "IfNotPresent"},
            "replicas": 3,
            "ingress": {"enabled": true, "host": "b.example"},
            "list": [9],
            "database": {"password": "hunter2"}
        })
    );
    assert_eq!(composed.digest, values::digest(&composed.values));
    assert_eq!(
        composed.sources,
        [
            ValuesSourceRef {
                kind: ValuesKind::ConfigMap,
                name: "base-values".into(),
                key: "values.yaml".into(),
                resource_version: base.metadata.resource_version.clone(),
                optional: false,
                found: true,
            },
            ValuesSourceRef {
                kind: ValuesKind::Secret,
                name: "app-secrets".into(),
                key: "overrides.yaml".into(),
                resource_version: creds.metadata.resource_version.clone(),
                optional: false,
                found: true,
            },
            ValuesSourceRef {
                kind: ValuesKind::ConfigMap,
                name: "binary-values".into(),
                key: "values.yaml".into(),
                resource_version: binary.metadata.resource_version.clone(),
                optional: false,
                found: true,
            },
        ]
    );

    // Same inputs, same digest; a data change shows in the digest and resourceVersion.
    assert_eq!(compose(&client, &hr).await.unwrap().digest, composed.digest);
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    api.patch(
        "base-values",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"values.yaml": "image: {repository: httpd}\n"}})),
    )
    .await
    .unwrap();
    let changed = compose(&client, &hr).await.unwrap();
    assert_ne!(changed.digest, composed.digest);
    assert_ne!(
        changed.sources[0].resource_version,
        composed.sources[0].resource_version
    );
    assert_eq!(changed.values["image"]["repository"], "httpd");
    ns.delete().await;
}

#[tokio::test]
async fn target_path_sets_single_values_typed_like_flux() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "values-target").await;
    config_map(
        &client,
        &ns.name,
        r#"
metadata: {name: settings}
data:
  tag: v2.1.0
  count: "3"
  quoted: '"3"'
  annotation: "true"
"#,
    )
    .await;
    secret(
        &client,
        &ns.name,
        "metadata: {name: db}\nstringData: {password: \"0123\", url: \"postgres://a,b/c\"}\n",
    )
    .await;
    let hr = release(
        &ns.name,
        r#"  valuesFrom:
  - {kind: ConfigMap, name: settings, valuesKey: tag, targetPath: image.tag}
  - {kind: ConfigMap, name: settings, valuesKey: count, targetPath: replicaCount}
  - {kind: ConfigMap, name: settings, valuesKey: quoted, targetPath: "labels.version"}
  - {kind: ConfigMap, name: settings, valuesKey: annotation, targetPath: 'podAnnotations.prometheus\.io/scrape'}
  - {kind: Secret, name: db, valuesKey: password, targetPath: "env[1].value"}
  - {kind: Secret, name: db, valuesKey: url, targetPath: database.url}
  values:
    image: {repository: app}
"#,
    );
    let composed = compose(&client, &hr).await.expect("compose");
    assert_eq!(
        Value::Object(composed.values),
        json!({
            "image": {"repository": "app", "tag": "v2.1.0"},
            "replicaCount": 3,
            "labels": {"version": "3"},
            "podAnnotations": {"prometheus.io/scrape": true},
            "env": [null, {"value": "0123"}],
            "database": {"url": "postgres://a,b/c"}
        })
    );

    let bad = release(
        &ns.name,
        "  valuesFrom:\n  - {kind: ConfigMap, name: settings, valuesKey: tag, targetPath: \"a..b\"}\n",
    );
    let err = compose(&client, &bad).await.unwrap_err();
    assert!(matches!(err, Error::TargetPath { index: 0, .. }), "{err:?}");
    assert!(err.to_string().contains("a..b"), "{err}");
    ns.delete().await;
}

#[tokio::test]
async fn optional_sources_that_are_missing_are_skipped_and_recorded() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "values-optional").await;
    let present = config_map(
        &client,
        &ns.name,
        "metadata: {name: present}\ndata: {values.yaml: \"a: 1\\n\"}\n",
    )
    .await;
    let hr = release(
        &ns.name,
        r#"  valuesFrom:
  - {kind: ConfigMap, name: absent, optional: true}
  - {kind: Secret, name: absent-secret, optional: true}
  - {kind: ConfigMap, name: present}
  - {kind: ConfigMap, name: present, valuesKey: other.yaml, optional: true}
"#,
    );
    let composed = compose(&client, &hr).await.expect("compose");
    assert_eq!(Value::Object(composed.values), json!({"a": 1}));
    let found: Vec<(&str, bool, bool)> = composed
        .sources
        .iter()
        .map(|s| (s.name.as_str(), s.found, s.resource_version.is_some()))
        .collect();
    assert_eq!(
        found,
        [
            ("absent", false, false),
            ("absent-secret", false, false),
            ("present", true, true),
            ("present", false, true),
        ]
    );
    assert_eq!(
        composed.sources[3].resource_version,
        present.metadata.resource_version
    );
    let optional: Vec<bool> = composed.sources.iter().map(|s| s.optional).collect();
    assert_eq!(optional, [true, true, false, true]);
    ns.delete().await;
}

#[tokio::test]
async fn a_required_missing_source_or_key_is_a_clear_error() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "values-missing").await;
    config_map(
        &client,
        &ns.name,
        "metadata: {name: exists}\ndata: {values.yaml: \"a: 1\\n\"}\n",
    )
    .await;

    let hr = release(
        &ns.name,
        "  valuesFrom:\n  - {kind: ConfigMap, name: base-values}\n",
    );
    let err = compose(&client, &hr).await.unwrap_err();
    assert!(
        matches!(
            &err,
            Error::MissingSource {
                kind: ValuesKind::ConfigMap,
                key: None,
                index: 0,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "ConfigMap {}/base-values not found (valuesFrom[0]); nothing was applied",
            ns.name
        )
    );

    let hr = release(
        &ns.name,
        "  valuesFrom:\n  - {kind: ConfigMap, name: exists}\n  - {kind: ConfigMap, name: exists, valuesKey: prod.yaml}\n",
    );
    let err = compose(&client, &hr).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "key prod.yaml not found in ConfigMap {}/exists (valuesFrom[1]); nothing was applied",
            ns.name
        )
    );

    let hr = release(&ns.name, "  valuesFrom:\n  - {kind: Secret, name: creds}\n");
    let err = compose(&client, &hr).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "Secret {}/creds not found (valuesFrom[0]); nothing was applied",
            ns.name
        )
    );
    ns.delete().await;
}

#[tokio::test]
async fn invalid_yaml_names_the_object_and_key_and_never_shows_secret_data() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "values-invalid").await;
    config_map(
        &client,
        &ns.name,
        "metadata: {name: broken}\ndata: {values.yaml: \"image:\\n  tag: [v1\\n\", list.yaml: \"- a\\n- b\\n\"}\n",
    )
    .await;
    secret(
        &client,
        &ns.name,
        "metadata: {name: broken-secret}\nstringData: {values.yaml: \"tok-9f8e7d: [\\\"tok-9f8e7d\\n\"}\n",
    )
    .await;

    let hr = release(
        &ns.name,
        "  valuesFrom:\n  - {kind: ConfigMap, name: broken}\n",
    );
    let err = compose(&client, &hr).await.unwrap_err();
    assert!(matches!(err, Error::InvalidYaml { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "key values.yaml of ConfigMap {}/broken (valuesFrom[0]) is not valid YAML: ",
            ns.name
        )),
        "{message}"
    );
    assert!(
        message.contains("line"),
        "the parse error says where: {message}"
    );

    let hr = release(
        &ns.name,
        "  valuesFrom:\n  - {kind: ConfigMap, name: broken, valuesKey: list.yaml}\n",
    );
    let err = compose(&client, &hr).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "key list.yaml of ConfigMap {}/broken (valuesFrom[0]) must hold a YAML mapping of values, not a list",
            ns.name
        )
    );

    let hr = release(
        &ns.name,
        "  valuesFrom:\n  - {kind: ConfigMap, name: broken, valuesKey: list.yaml, optional: true}\n  - {kind: Secret, name: broken-secret}\n",
    );
    let err = compose(&client, &hr).await.unwrap_err();
    // An optional source that exists but is invalid still fails.
    assert!(
        matches!(err, Error::NotAMapping { index: 0, .. }),
        "{err:?}"
    );

    let hr = release(
        &ns.name,
        "  valuesFrom:\n  - {kind: Secret, name: broken-secret}\n",
    );
    let err = compose(&client, &hr).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidYaml {
                kind: ValuesKind::Secret,
                ..
            }
        ),
        "{err:?}"
    );
    let shown = format!("{err} {err:?}");
    assert!(
        shown.contains(&format!("Secret {}/broken-secret", ns.name)),
        "{shown}"
    );
    assert!(
        !shown.contains("tok-9f8e7d"),
        "Secret content leaked: {shown}"
    );
    ns.delete().await;
}

#[tokio::test]
async fn inline_values_alone_and_null_deletes_are_kept() {
    let client = client().await;
    let ns = TestNamespace::new(&client, "values-inline").await;
    config_map(
        &client,
        &ns.name,
        "metadata: {name: base}\ndata: {values.yaml: \"ingress: {enabled: true}\\nkeep: 1\\n\"}\n",
    )
    .await;
    let hr = release(
        &ns.name,
        "  valuesFrom:\n  - {kind: ConfigMap, name: base}\n  values:\n    ingress: null\n",
    );
    let composed = compose(&client, &hr).await.unwrap();
    // Kept as null so that Helm removes the chart's default `ingress` when rendering.
    assert_eq!(
        Value::Object(composed.values.clone()),
        json!({"ingress": null, "keep": 1})
    );

    let empty = release(&ns.name, "");
    let composed = compose(&client, &empty).await.unwrap();
    assert!(composed.values.is_empty());
    assert!(composed.sources.is_empty());
    assert_eq!(composed.digest, values::digest(&serde_json::Map::new()));
    ns.delete().await;
}

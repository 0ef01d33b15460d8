//! Which ConfigMaps and Secrets a pod template consumes: volumes, projected volumes, env
//! `valueFrom` and `envFrom`, in containers and initContainers, as whole objects or single
//! keys, with their `optional` flags; plus the objects a workload names in its
//! `wheelhouse.dev/extra-configmaps` / `extra-secrets` annotations.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::{Container, EnvVar, KeyToPath, PodSpec};

use super::{EXTRA_CONFIGMAPS_ANNOTATION, EXTRA_SECRETS_ANNOTATION};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigKind {
    ConfigMap,
    Secret,
}

impl fmt::Display for ConfigKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ConfigMap => "ConfigMap",
            Self::Secret => "Secret",
        })
    }
}

/// One reference as the pod spec writes it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConsumedRef {
    pub kind: ConfigKind,
    pub name: String,
    /// `None`: the whole object (envFrom, a volume without `items`, an extra annotation).
    pub key: Option<String>,
    /// The pod starts without it (`optional: true`).
    pub optional: bool,
}

/// What of one object a workload reads.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Selection {
    Whole,
    Keys(BTreeSet<String>),
}

/// Every reference to one object merged: a whole-object reference covers all keys, and the
/// object is required when any reference requires it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConsumedObject {
    pub kind: ConfigKind,
    pub name: String,
    pub selection: Selection,
    pub optional: bool,
}

/// All references of a pod spec, in the order they appear (duplicates included).
pub fn consumed_refs(spec: &PodSpec) -> Vec<ConsumedRef> {
    let mut refs = Vec::new();
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter());
    for container in containers {
        container_refs(container, &mut refs);
    }
    for volume in spec.volumes.iter().flatten() {
        if let Some(cm) = &volume.config_map {
            items_refs(
                ConfigKind::ConfigMap,
                &cm.name,
                cm.items.as_deref(),
                cm.optional,
                &mut refs,
            );
        }
        if let Some(secret) = &volume.secret {
            let name = secret.secret_name.clone().unwrap_or_default();
            items_refs(
                ConfigKind::Secret,
                &name,
                secret.items.as_deref(),
                secret.optional,
                &mut refs,
            );
        }
        let sources = volume
            .projected
            .iter()
            .flat_map(|p| p.sources.iter().flatten());
        for source in sources {
            if let Some(cm) = &source.config_map {
                items_refs(
                    ConfigKind::ConfigMap,
                    &cm.name,
                    cm.items.as_deref(),
                    cm.optional,
                    &mut refs,
                );
            }
            if let Some(secret) = &source.secret {
                items_refs(
                    ConfigKind::Secret,
                    &secret.name,
                    secret.items.as_deref(),
                    secret.optional,
                    &mut refs,
                );
            }
        }
    }
    refs.retain(|r| !r.name.is_empty());
    refs
}

fn container_refs(container: &Container, refs: &mut Vec<ConsumedRef>) {
    for source in container.env_from.iter().flatten() {
        if let Some(cm) = &source.config_map_ref {
            refs.push(whole(ConfigKind::ConfigMap, &cm.name, cm.optional));
        }
        if let Some(secret) = &source.secret_ref {
            refs.push(whole(ConfigKind::Secret, &secret.name, secret.optional));
        }
    }
    for EnvVar { value_from, .. } in container.env.iter().flatten() {
        let Some(from) = value_from else { continue };
        if let Some(sel) = &from.config_map_key_ref {
            refs.push(ConsumedRef {
                kind: ConfigKind::ConfigMap,
                name: sel.name.clone(),
                key: Some(sel.key.clone()),
                optional: sel.optional.unwrap_or(false),
            });
        }
        if let Some(sel) = &from.secret_key_ref {
            refs.push(ConsumedRef {
                kind: ConfigKind::Secret,
                name: sel.name.clone(),
                key: Some(sel.key.clone()),
                optional: sel.optional.unwrap_or(false),
            });
        }
    }
}

fn whole(kind: ConfigKind, name: &str, optional: Option<bool>) -> ConsumedRef {
    ConsumedRef {
        kind,
        name: name.to_string(),
        key: None,
        optional: optional.unwrap_or(false),
    }
}

/// A volume source projects every key, or only the keys its `items` list.
fn items_refs(
    kind: ConfigKind,
    name: &str,
    items: Option<&[KeyToPath]>,
    optional: Option<bool>,
    refs: &mut Vec<ConsumedRef>,
) {
    match items {
        Some(items) if !items.is_empty() => refs.extend(items.iter().map(|item| ConsumedRef {
            kind,
            name: name.to_string(),
            key: Some(item.key.clone()),
            optional: optional.unwrap_or(false),
        })),
        _ => refs.push(whole(kind, name, optional)),
    }
}

/// The objects named in a workload's `wheelhouse.dev/extra-configmaps` and
/// `wheelhouse.dev/extra-secrets` annotations (comma separated names; blanks ignored). The
/// application reads them through the API, so they are whole and required.
pub fn extra_refs(annotations: &BTreeMap<String, String>) -> Vec<ConsumedRef> {
    let mut refs = Vec::new();
    for (annotation, kind) in [
        (EXTRA_CONFIGMAPS_ANNOTATION, ConfigKind::ConfigMap),
        (EXTRA_SECRETS_ANNOTATION, ConfigKind::Secret),
    ] {
        let names = annotations
            .get(annotation)
            .map(String::as_str)
            .unwrap_or("");
        refs.extend(
            names
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
                .map(|name| whole(kind, name, Some(false))),
        );
    }
    refs
}

/// Merges references per object, sorted by kind and name (the hash's stable order).
pub fn merge(refs: impl IntoIterator<Item = ConsumedRef>) -> Vec<ConsumedObject> {
    let mut objects: BTreeMap<(ConfigKind, String), ConsumedObject> = BTreeMap::new();
    for r in refs {
        let entry = objects
            .entry((r.kind, r.name.clone()))
            .or_insert_with(|| ConsumedObject {
                kind: r.kind,
                name: r.name.clone(),
                selection: Selection::Keys(BTreeSet::new()),
                optional: true,
            });
        entry.optional &= r.optional;
        match (&mut entry.selection, r.key) {
            (Selection::Whole, _) => {}
            (selection, None) => *selection = Selection::Whole,
            (Selection::Keys(keys), Some(key)) => {
                keys.insert(key);
            }
        }
    }
    objects.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(yaml: &str) -> PodSpec {
        crate::text::yaml::from_str(yaml).unwrap()
    }

    fn r(kind: ConfigKind, name: &str, key: Option<&str>, optional: bool) -> ConsumedRef {
        ConsumedRef {
            kind,
            name: name.into(),
            key: key.map(Into::into),
            optional,
        }
    }

    const EVERY_PLACE: &str = r#"
initContainers:
  - name: init
    envFrom:
      - configMapRef: {name: init-env}
    env:
      - {name: TOKEN, valueFrom: {secretKeyRef: {name: init-secret, key: token, optional: true}}}
containers:
  - name: app
    envFrom:
      - secretRef: {name: app-secret-env, optional: true}
      - configMapRef: {name: app-env}
    env:
      - {name: PLAIN, value: x}
      - {name: FIELD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
      - {name: LEVEL, valueFrom: {configMapKeyRef: {name: app-config, key: level}}}
volumes:
  - name: whole
    configMap: {name: files}
  - name: some
    configMap: {name: picked, items: [{key: a, path: a.txt}, {key: b, path: b.txt}], optional: true}
  - name: tls
    secret: {secretName: tls}
  - name: proj
    projected:
      sources:
        - configMap: {name: proj-cm}
        - secret: {name: proj-secret, items: [{key: ca, path: ca.crt}]}
        - downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}
        - serviceAccountToken: {path: token}
  - name: scratch
    emptyDir: {}
"#;

    #[test]
    fn finds_every_place_in_containers_init_containers_and_volumes() {
        use ConfigKind::*;
        let mut found = consumed_refs(&spec(EVERY_PLACE));
        found.sort();
        let mut expected = vec![
            r(ConfigMap, "init-env", None, false),
            r(Secret, "init-secret", Some("token"), true),
            r(Secret, "app-secret-env", None, true),
            r(ConfigMap, "app-env", None, false),
            r(ConfigMap, "app-config", Some("level"), false),
            r(ConfigMap, "files", None, false),
            r(ConfigMap, "picked", Some("a"), true),
            r(ConfigMap, "picked", Some("b"), true),
            r(Secret, "tls", None, false),
            r(ConfigMap, "proj-cm", None, false),
            r(Secret, "proj-secret", Some("ca"), false),
        ];
        expected.sort();
        assert_eq!(found, expected);
    }

    #[test]
    fn a_spec_without_config_consumes_nothing() {
        let found = consumed_refs(&spec(
            "containers: [{name: a, image: x, env: [{name: A, value: b}]}]\nvolumes: [{name: v, emptyDir: {}}]",
        ));
        assert!(found.is_empty());
    }

    #[test]
    fn merge_whole_covers_keys_and_required_wins() {
        use ConfigKind::*;
        let merged = merge([
            r(ConfigMap, "b", Some("x"), true),
            r(ConfigMap, "a", Some("k2"), true),
            r(ConfigMap, "a", Some("k1"), true),
            r(ConfigMap, "b", None, true),
            r(ConfigMap, "b", Some("y"), false),
            r(Secret, "a", Some("k"), true),
        ]);
        assert_eq!(
            merged,
            vec![
                ConsumedObject {
                    kind: ConfigMap,
                    name: "a".into(),
                    selection: Selection::Keys(["k1".into(), "k2".into()].into()),
                    optional: true,
                },
                ConsumedObject {
                    kind: ConfigMap,
                    name: "b".into(),
                    selection: Selection::Whole,
                    optional: false,
                },
                ConsumedObject {
                    kind: Secret,
                    name: "a".into(),
                    selection: Selection::Keys(["k".into()].into()),
                    optional: true,
                },
            ]
        );
    }

    #[test]
    fn extra_annotations_are_comma_separated_whole_and_required() {
        use ConfigKind::*;
        let annotations = BTreeMap::from([
            (
                EXTRA_CONFIGMAPS_ANNOTATION.to_string(),
                " one, two ,,three ".to_string(),
            ),
            (EXTRA_SECRETS_ANNOTATION.to_string(), "creds".to_string()),
            ("unrelated".to_string(), "nope".to_string()),
        ]);
        assert_eq!(
            extra_refs(&annotations),
            vec![
                r(ConfigMap, "one", None, false),
                r(ConfigMap, "two", None, false),
                r(ConfigMap, "three", None, false),
                r(Secret, "creds", None, false),
            ]
        );
        assert!(extra_refs(&BTreeMap::new()).is_empty());
        let blank = BTreeMap::from([(EXTRA_SECRETS_ANNOTATION.to_string(), " , ".to_string())]);
        assert!(extra_refs(&blank).is_empty());
    }
}

//! Values composition for a HelmRelease: `spec.valuesFrom` ConfigMaps and Secrets merged
//! in order, then inline `spec.values` last, with a stable digest of the result.
//!
//! Merging follows Helm's handling of several `-f` files (and Flux's valuesFrom): maps
//! merge recursively and the later source wins for everything else. A `null` from a
//! later source replaces the earlier value with `null` rather than removing the key, as
//! in Helm, because that `null` is what tells Helm to delete the key from the chart's
//! default values when it renders; dropping it here would bring the default back.

mod mask;
mod path;
pub mod redact;

use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::api::{HelmRelease, ValuesKind, ValuesReference};

pub use mask::Masker;
pub use path::{PathError, typed_value};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A required ConfigMap/Secret (`key: None`) or key in it does not exist.
    #[error("{}", missing_message(*kind, namespace, name, key.as_deref(), *index))]
    MissingSource {
        kind: ValuesKind,
        namespace: String,
        name: String,
        key: Option<String>,
        index: usize,
        /// The object's resourceVersion when it exists (its key is what is missing).
        resource_version: Option<String>,
    },

    #[error(
        "key {key} of {} {namespace}/{name} (valuesFrom[{index}]) is not valid YAML: {reason}",
        kind_name(*kind)
    )]
    InvalidYaml {
        kind: ValuesKind,
        namespace: String,
        name: String,
        key: String,
        index: usize,
        reason: String,
    },

    #[error(
        "key {key} of {} {namespace}/{name} (valuesFrom[{index}]) must hold a YAML mapping of values, not {found}",
        kind_name(*kind)
    )]
    NotAMapping {
        kind: ValuesKind,
        namespace: String,
        name: String,
        key: String,
        index: usize,
        found: &'static str,
    },

    #[error(
        "key {key} of {} {namespace}/{name} (valuesFrom[{index}]) is not UTF-8 text",
        kind_name(*kind)
    )]
    NotUtf8 {
        kind: ValuesKind,
        namespace: String,
        name: String,
        key: String,
        index: usize,
    },

    #[error(
        "reading {} {namespace}/{name} (valuesFrom[{index}]): {source}",
        kind_name(*kind)
    )]
    Read {
        kind: ValuesKind,
        namespace: String,
        name: String,
        index: usize,
        source: kube::Error,
    },

    #[error(
        "valuesFrom[{index}] ({} {namespace}/{name}): invalid targetPath {path:?}: {reason}",
        kind_name(*kind)
    )]
    TargetPath {
        kind: ValuesKind,
        namespace: String,
        name: String,
        index: usize,
        path: String,
        reason: path::PathError,
    },

    #[error("invalid values path {path:?}: {reason}")]
    InvalidPath {
        path: String,
        reason: path::PathError,
    },

    #[error("spec.values must be a mapping, not {found}")]
    InlineNotAMapping { found: &'static str },

    #[error("HelmRelease {name} has no namespace")]
    NoNamespace { name: String },
}

fn kind_name(kind: ValuesKind) -> &'static str {
    match kind {
        ValuesKind::ConfigMap => "ConfigMap",
        ValuesKind::Secret => "Secret",
    }
}

fn missing_message(
    kind: ValuesKind,
    namespace: &str,
    name: &str,
    key: Option<&str>,
    index: usize,
) -> String {
    let kind = kind_name(kind);
    match key {
        None => format!(
            "{kind} {namespace}/{name} not found (valuesFrom[{index}]); nothing was applied"
        ),
        Some(key) => format!(
            "key {key} not found in {kind} {namespace}/{name} (valuesFrom[{index}]); nothing was applied"
        ),
    }
}

/// One `valuesFrom` entry as read, so callers can watch the objects and tell a real data
/// change (new resourceVersion) from a resync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValuesSourceRef {
    pub kind: ValuesKind,
    pub name: String,
    pub key: String,
    /// The object's resourceVersion; None when the object does not exist.
    pub resource_version: Option<String>,
    pub optional: bool,
    /// Whether the object and its key exist (false only for skipped optional sources).
    pub found: bool,
}

impl fmt::Display for ValuesSourceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} key {}", kind_name(self.kind), self.name, self.key)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ComposedValues {
    pub values: Map<String, Value>,
    /// `sha256:<hex>` of the canonical JSON of `values`.
    pub digest: String,
    pub sources: Vec<ValuesSourceRef>,
    /// The values that came from Secrets, to mask wherever a message may quote them.
    pub secrets: Masker,
}

/// The first `valuesFrom` source that stops the values from composing, as it is now (its
/// resourceVersion when the object exists and only its key is missing): what a failed
/// release waits for to appear.
pub async fn missing_source(client: &kube::Client, hr: &HelmRelease) -> Option<ValuesSourceRef> {
    match compose(client, hr).await {
        Err(Error::MissingSource {
            kind,
            name,
            index,
            resource_version,
            ..
        }) => Some(ValuesSourceRef {
            kind,
            name,
            key: hr.spec.values_from.get(index)?.values_key.clone(),
            resource_version,
            optional: false,
            found: false,
        }),
        _ => None,
    }
}

/// Reads every `valuesFrom` source from the HelmRelease's namespace and merges them, then
/// the inline values. Fails as a whole: partial values are never returned.
pub async fn compose(client: &kube::Client, hr: &HelmRelease) -> Result<ComposedValues, Error> {
    let namespace = hr.namespace().ok_or_else(|| Error::NoNamespace {
        name: hr.name_any(),
    })?;
    let mut values = Map::new();
    let mut secrets = Masker::default();
    let mut sources = Vec::with_capacity(hr.spec.values_from.len());
    for (index, reference) in hr.spec.values_from.iter().enumerate() {
        let (resource_version, data) = read_source(client, &namespace, reference, index).await?;
        sources.push(ValuesSourceRef {
            kind: reference.kind,
            name: reference.name.clone(),
            key: reference.values_key.clone(),
            resource_version: resource_version.clone(),
            optional: reference.optional,
            found: data.is_some(),
        });
        let Some(data) = data else {
            if reference.optional {
                continue;
            }
            return Err(Error::MissingSource {
                kind: reference.kind,
                namespace,
                name: reference.name.clone(),
                key: resource_version
                    .as_ref()
                    .map(|_| reference.values_key.clone()),
                index,
                resource_version,
            });
        };
        let added = apply_source(&mut values, &namespace, reference, index, data)?;
        if reference.kind == ValuesKind::Secret {
            secrets.add_value(&added);
        }
    }
    match &hr.spec.values {
        None | Some(Value::Null) => {}
        Some(Value::Object(inline)) => merge(&mut values, inline.clone()),
        Some(other) => {
            return Err(Error::InlineNotAMapping {
                found: type_name(other),
            });
        }
    }
    Ok(ComposedValues {
        digest: digest(&values),
        values,
        sources,
        secrets,
    })
}

/// Which of a release's values came from `valuesFrom` Secrets, for masking them by
/// origin wherever values are shown (the dashboard's values tab and diffs, an incident's
/// export): a value is hidden because of where it came from, not because its key looks
/// like a credential (`dsn`, `connectionString` do not). Read with `client` (the
/// operator's identity): a Secret it cannot read makes every value that no later source
/// set visibly a secret's, so nothing is shown that might be one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SecretOrigins {
    /// The values as composed, with each value whose last source was a Secret replaced
    /// by [`redact::SECRET_ORIGIN`].
    shadow: Map<String, Value>,
    /// A Secret source could not be read: only what later sources set is known.
    unknown: bool,
}

impl SecretOrigins {
    /// `values` (as the release was made with them) with what came from Secrets masked,
    /// and keys that look like credentials masked too.
    pub fn mask(&self, values: &Value) -> Value {
        self.mask_beside(values, None)
    }

    /// [`Self::mask`], a masked value that differs from `other`'s (the other side of a
    /// diff) reading `*** (changed)`.
    pub fn mask_beside(&self, values: &Value, other: Option<&Value>) -> Value {
        let shadow = Value::Object(self.shadow.clone());
        redact::mask_values(&redact::mask_origins(values, &shadow, self.unknown, other))
    }

    /// Nothing could be read in time: every value is hidden (an operator who may not
    /// read the sources sees no value that may have come from them).
    pub fn unknown() -> Self {
        Self {
            shadow: Map::new(),
            unknown: true,
        }
    }

    /// Whether nothing came from a Secret, as far as could be read.
    pub fn is_empty(&self) -> bool {
        !self.unknown && !redact::holds_secret_origin(&Value::Object(self.shadow.clone()))
    }
}

/// Where a HelmRelease's values come from (wheelhouse's or Flux's, the same fields), to
/// tell which came from Secrets ([`secret_origins`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValuesSources {
    pub namespace: String,
    pub values_from: Vec<ValuesReference>,
    pub inline: Option<Value>,
}

impl ValuesSources {
    pub fn of(hr: &HelmRelease) -> Self {
        Self {
            namespace: hr.namespace().unwrap_or_default(),
            values_from: hr.spec.values_from.clone(),
            inline: hr.spec.values.clone(),
        }
    }

    /// A Flux HelmRelease's (`helm.toolkit.fluxcd.io/v2` has the same fields); an entry
    /// that does not read as one is taken as a Secret that cannot be read.
    pub fn of_flux(hr: &crate::api::flux::FluxHelmRelease) -> Self {
        let values_from = hr
            .spec
            .values_from
            .iter()
            .map(|v| {
                serde_json::from_value(v.clone()).unwrap_or(ValuesReference {
                    kind: ValuesKind::Secret,
                    name: String::new(),
                    values_key: String::new(),
                    target_path: None,
                    optional: false,
                })
            })
            .collect();
        Self {
            namespace: hr.metadata.namespace.clone().unwrap_or_default(),
            values_from,
            inline: hr.spec.values.clone(),
        }
    }

    /// Read with `client`: see [`secret_origins`].
    pub async fn origins(&self, client: &kube::Client) -> SecretOrigins {
        secret_origins(
            client,
            &self.namespace,
            &self.values_from,
            self.inline.as_ref(),
        )
        .await
    }
}

/// The [`SecretOrigins`] of a release whose spec has `values_from` and `inline` values,
/// in `namespace`.
pub async fn secret_origins(
    client: &kube::Client,
    namespace: &str,
    values_from: &[ValuesReference],
    inline: Option<&Value>,
) -> SecretOrigins {
    let mut out = SecretOrigins::default();
    if !values_from.iter().any(|r| r.kind == ValuesKind::Secret) {
        return out;
    }
    for (index, reference) in values_from.iter().enumerate() {
        let secret = reference.kind == ValuesKind::Secret;
        let data = match read_source(client, namespace, reference, index).await {
            Ok((_, Some(data))) => data,
            // Absent: it set nothing (a required one held the release, so the values
            // shown are older and were made with it: unknown).
            Ok((_, None)) => {
                out.unknown |= secret && !reference.optional;
                continue;
            }
            Err(_) => {
                // A ConfigMap that cannot be read only hides what it would have
                // overridden; a Secret hides what it set.
                out.unknown |= secret;
                continue;
            }
        };
        let mut shadow = Map::new();
        if apply_source(&mut shadow, namespace, reference, index, data).is_err() {
            out.unknown |= secret;
            continue;
        }
        let mut shadow = Value::Object(shadow);
        if secret {
            redact::mark_secret_origin(&mut shadow);
        }
        if let Value::Object(map) = shadow {
            merge(&mut out.shadow, map);
        }
    }
    if let Some(Value::Object(inline)) = inline {
        merge(&mut out.shadow, inline.clone());
    }
    out
}

/// The object's resourceVersion (None: no object) and the key's bytes (None: missing).
async fn read_source(
    client: &kube::Client,
    namespace: &str,
    reference: &ValuesReference,
    index: usize,
) -> Result<(Option<String>, Option<Vec<u8>>), Error> {
    let read_error = |source| Error::Read {
        kind: reference.kind,
        namespace: namespace.to_owned(),
        name: reference.name.clone(),
        index,
        source,
    };
    let key = &reference.values_key;
    Ok(match reference.kind {
        ValuesKind::ConfigMap => {
            let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            match api.get_opt(&reference.name).await.map_err(read_error)? {
                None => (None, None),
                Some(cm) => {
                    // `data` first, then `binaryData`, as Flux looks them up.
                    let data = cm
                        .data
                        .as_ref()
                        .and_then(|d| d.get(key))
                        .map(|s| s.as_bytes().to_vec())
                        .or_else(|| {
                            cm.binary_data
                                .as_ref()
                                .and_then(|d| d.get(key))
                                .map(|b| b.0.clone())
                        });
                    (cm.metadata.resource_version, data)
                }
            }
        }
        ValuesKind::Secret => {
            let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
            match api.get_opt(&reference.name).await.map_err(read_error)? {
                None => (None, None),
                Some(secret) => {
                    let data = secret
                        .data
                        .as_ref()
                        .and_then(|d| d.get(key))
                        .map(|b| b.0.clone());
                    (secret.metadata.resource_version, data)
                }
            }
        }
    })
}

fn apply_source(
    values: &mut Map<String, Value>,
    namespace: &str,
    reference: &ValuesReference,
    index: usize,
    data: Vec<u8>,
) -> Result<Value, Error> {
    let kind = reference.kind;
    let name = || reference.name.clone();
    let key = || reference.values_key.clone();
    let text = String::from_utf8(data).map_err(|_| Error::NotUtf8 {
        kind,
        namespace: namespace.to_owned(),
        name: name(),
        key: key(),
        index,
    })?;
    if let Some(target) = &reference.target_path {
        let value = typed_value(&text);
        return path::set(values, target, value.clone())
            .map(|()| value)
            .map_err(|reason| Error::TargetPath {
                kind,
                namespace: namespace.to_owned(),
                name: name(),
                index,
                path: target.clone(),
                reason,
            });
    }
    let parsed =
        parse_yaml(&text, kind == ValuesKind::Secret).map_err(|reason| Error::InvalidYaml {
            kind,
            namespace: namespace.to_owned(),
            name: name(),
            key: key(),
            index,
            reason,
        })?;
    match parsed {
        Value::Object(map) => {
            merge(values, map.clone());
            Ok(Value::Object(map))
        }
        // An empty document (or only comments) adds nothing, as in Helm.
        Value::Null => Ok(Value::Null),
        other => Err(Error::NotAMapping {
            kind,
            namespace: namespace.to_owned(),
            name: name(),
            key: key(),
            index,
            found: type_name(&other),
        }),
    }
}

/// Parses a YAML document into JSON values as Helm does: YAML 1.1 scalars as
/// sigs.k8s.io/yaml reads them (`yes` is true, `0644` is 420), merge keys applied, scalar
/// keys turned into strings ([`crate::text::yaml`]). With `redact`, quoted fragments of the
/// parser's message are hidden, so an error never repeats a Secret's content.
fn parse_yaml(text: &str, redact: bool) -> Result<Value, String> {
    let describe = |message: String| {
        if redact {
            redact_quoted(&message)
        } else {
            message
        }
    };
    let mut documents =
        crate::text::yaml::parse_documents(text).map_err(|e| describe(e.to_string()))?;
    Ok(if documents.is_empty() {
        Value::Null
    } else {
        documents.swap_remove(0)
    })
}

fn redact_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut inside = false;
    for c in message.chars() {
        if c == '"' {
            if inside {
                out.push_str("\"…\"");
            }
            inside = !inside;
        } else if !inside {
            out.push(c);
        }
    }
    out
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Merges `overlay` into `base` as Helm merges user values files: maps merge
/// recursively; for anything else, including `null`, the overlay's value replaces the
/// base's (see the module docs for why `null` is kept).
pub fn merge(base: &mut Map<String, Value>, overlay: Map<String, Value>) {
    for (key, value) in overlay {
        match (base.get_mut(&key), value) {
            (Some(Value::Object(existing)), Value::Object(incoming)) => merge(existing, incoming),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Sets `raw` at `path` in Helm `--set` syntax (`a.b`, `list[0].name`, `a\.b`), typed
/// as Flux types targetPath values (see [`typed_value`]).
pub fn set_path(values: &mut Map<String, Value>, path: &str, raw: &str) -> Result<(), Error> {
    path::set(values, path, typed_value(raw)).map_err(|reason| Error::InvalidPath {
        path: path.to_owned(),
        reason,
    })
}

/// `sha256:<hex>` of the canonical JSON of `values`: keys sorted by their bytes at every
/// level, no whitespace. Independent of insertion order and of serde_json's map features.
pub fn digest(values: &Map<String, Value>) -> String {
    let mut canonical = String::new();
    write_canonical_map(values, &mut canonical);
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical.as_bytes()))
    )
}

fn write_canonical_map(map: &Map<String, Value>, out: &mut String) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(key.clone()).to_string());
        out.push(':');
        write_canonical(value, out);
    }
    out.push('}');
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => write_canonical_map(map, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn values_are_read_as_helm_reads_them_yaml_1_1() {
        let v = parse_yaml(
            "flag: yes\noff: on\nmode: 0644\nname: \"0644\"\nbig: 1e3\n",
            false,
        )
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"flag": true, "false": true, "mode": 420, "name": "0644", "big": 1000})
        );
        assert_eq!(parse_yaml("", false).unwrap(), Value::Null);
        let err = parse_yaml("password: \"s3cret\n", true).unwrap_err();
        assert!(!err.contains("s3cret"), "{err}");
    }

    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    /// Workers compose values inside spawned tasks.
    #[allow(dead_code)]
    fn compose_is_send<'a>(client: &'a kube::Client, hr: &'a HelmRelease) -> impl Send + 'a {
        compose(client, hr)
    }

    #[test]
    fn merge_is_recursive_and_overlay_wins() {
        let mut base = map(json!({
            "image": {"repository": "nginx", "tag": "1.0"},
            "replicas": 1,
            "list": [1, 2, 3],
            "keep": "me",
            "scalarToMap": 5,
            "mapToScalar": {"a": 1}
        }));
        merge(
            &mut base,
            map(json!({
                "image": {"tag": "2.0", "pullPolicy": "Always"},
                "replicas": 3,
                "list": [9],
                "scalarToMap": {"x": 1},
                "mapToScalar": "flat"
            })),
        );
        assert_eq!(
            Value::Object(base),
            json!({
                "image": {"repository": "nginx", "tag": "2.0", "pullPolicy": "Always"},
                "replicas": 3,
                "list": [9],
                "keep": "me",
                "scalarToMap": {"x": 1},
                "mapToScalar": "flat"
            })
        );
    }

    #[test]
    fn merge_keeps_null_so_helm_can_delete_chart_defaults() {
        let mut base = map(json!({"ingress": {"enabled": true}, "a": {"b": 1, "c": 2}}));
        merge(&mut base, map(json!({"ingress": null, "a": {"b": null}})));
        assert_eq!(
            Value::Object(base),
            json!({"ingress": null, "a": {"b": null, "c": 2}})
        );
    }

    #[test]
    fn digest_ignores_key_order_but_not_content() {
        let a = map(serde_json::from_str(
            r#"{"b": {"y": 1, "x": [1, {"q": 1, "p": 2}]}, "a": "s"}"#,
        )
        .unwrap());
        let b = map(serde_json::from_str(
            r#"{"a": "s", "b": {"x": [1, {"p": 2, "q": 1}], "y": 1}}"#,
        )
        .unwrap());
        assert_eq!(digest(&a), digest(&b));
        let d = digest(&a);
        assert!(d.starts_with("sha256:") && d.len() == 7 + 64, "{d}");
        let c = map(json!({"a": "s", "b": {"x": [{"p": 2, "q": 1}, 1], "y": 1}}));
        assert_ne!(digest(&a), digest(&c), "list order matters");
        assert_ne!(digest(&a), digest(&map(json!({"a": "s"}))));
        // A stable value across releases of wheelhouse: changing the canonical form would
        // make every release look changed.
        assert_eq!(
            digest(&map(json!({"b": 1, "a": [true, null, "x"]}))),
            format!(
                "sha256:{}",
                hex::encode(Sha256::digest(br#"{"a":[true,null,"x"],"b":1}"#))
            )
        );
        assert_eq!(
            digest(&Map::new()),
            format!("sha256:{}", hex::encode(Sha256::digest(b"{}")))
        );
    }

    #[test]
    fn set_path_types_and_reports_bad_paths() {
        let mut values = Map::new();
        set_path(&mut values, "a.b", "3").unwrap();
        set_path(&mut values, "a.c", "\"3\"").unwrap();
        set_path(&mut values, "list[1]", "x").unwrap();
        assert_eq!(
            Value::Object(values.clone()),
            json!({"a": {"b": 3, "c": "3"}, "list": [null, "x"]})
        );
        let err = set_path(&mut values, "a..b", "1").unwrap_err();
        assert!(err.to_string().contains("a..b"), "{err}");
    }

    #[test]
    fn yaml_documents_become_json_like_helm_reads_them() {
        let v = parse_yaml(
            "base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n1: one\ntrue: yes\nf: 1.5\nbig: 18446744073709551615\ntagged: !custom 7\n",
            false,
        )
        .unwrap();
        // What helm v4.3.1 itself makes of the same file (`helm template -f`, printed with
        // toJson; tests/integration/render.rs runs the real binary on this text): YAML 1.1, so the key
        // `y` and the value `yes` are booleans, and an application tag leaves its text.
        // Helm then holds numbers as float64 (`big` as 1.8446744073709552e19); the exact
        // integer kept here reaches helm as JSON and is read the same way.
        assert_eq!(
            v,
            json!({
                "base": {"x": 1, "true": 2},
                "derived": {"x": 1, "true": 3},
                "1": "one",
                "true": true,
                "f": 1.5,
                "big": 18446744073709551615u64,
                "tagged": "7"
            })
        );
        assert_eq!(
            parse_yaml("# only a comment\n", false).unwrap(),
            Value::Null
        );
        assert_eq!(parse_yaml("", false).unwrap(), Value::Null);
        assert!(parse_yaml("x: .inf\n", false).is_err());
    }

    #[test]
    fn yaml_errors_from_secrets_hide_quoted_content() {
        // helm v4.3.1 takes the last of duplicate keys, and so do we.
        assert_eq!(
            parse_yaml("password: hunter2\npassword: hunter3\n", true).unwrap(),
            json!({"password": "hunter3"})
        );
        let err = parse_yaml("token: \"s3cret\n", true).unwrap_err();
        assert!(!err.contains("s3cret"), "{err}");
        assert_eq!(
            redact_quoted(r#"duplicate entry with key "s3cret" at line 2"#),
            "duplicate entry with key \"…\" at line 2"
        );
        let plain = parse_yaml("a: [1\n", true).unwrap_err();
        assert!(plain.contains("line"), "{plain}");
    }

    #[test]
    fn missing_source_messages_name_the_object() {
        let err = Error::MissingSource {
            kind: ValuesKind::ConfigMap,
            namespace: "apps".into(),
            name: "base-values".into(),
            key: None,
            index: 0,
            resource_version: None,
        };
        assert_eq!(
            err.to_string(),
            "ConfigMap apps/base-values not found (valuesFrom[0]); nothing was applied"
        );
        let err = Error::MissingSource {
            kind: ValuesKind::Secret,
            namespace: "apps".into(),
            name: "creds".into(),
            key: Some("values.yaml".into()),
            index: 2,
            resource_version: None,
        };
        assert_eq!(
            err.to_string(),
            "key values.yaml not found in Secret apps/creds (valuesFrom[2]); nothing was applied"
        );
    }
}

//! What a screen may show of a release's values and manifests: the data of every Secret
//! and the values of keys that look like credentials masked. (`mask`'s Masker is the
//! other half: it scrubs known secret values from messages.)

/// Replaces the values of every Secret's `data` and `stringData` in a multi-document
/// manifest with `'***'`. Everything else stays byte for byte as Helm rendered it: the
/// separators, comments, key order and quoting of every other document, and of the
/// Secret's other lines.
pub fn mask_manifest(manifest: &str) -> String {
    let mut out = String::with_capacity(manifest.len());
    let mut doc = String::new();
    for line in manifest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            out.push_str(&mask_document(&doc));
            doc.clear();
            out.push_str(line);
        } else {
            doc.push_str(line);
        }
    }
    out.push_str(&mask_document(&doc));
    out
}

const MASK: &str = "'***'";

fn mask_document(doc: &str) -> String {
    let parsed = crate::text::yaml::parse_documents(doc);
    let secret = |v: &serde_json::Value| v.get("kind").and_then(|k| k.as_str()) == Some("Secret");
    let is_secret = doc.lines().any(|l| l.trim_end() == "kind: Secret")
        || parsed
            .as_ref()
            .map_or(doc.contains("Secret"), |docs| docs.iter().any(secret));
    if !is_secret {
        return doc.to_owned();
    }
    let masked = mask_lines(doc);
    if is_masked(&masked) {
        return masked;
    }
    // Not block style (JSON, flow mappings): written out again with the data masked.
    match parsed {
        Ok(mut docs) => {
            for v in docs.iter_mut().filter(|v| secret(v)) {
                for field in ["data", "stringData"] {
                    if let Some(map) = v.get_mut(field).and_then(|d| d.as_object_mut()) {
                        for value in map.values_mut() {
                            *value = serde_json::Value::String("***".into());
                        }
                    }
                }
            }
            let comments: String = doc
                .lines()
                .take_while(|l| l.starts_with('#'))
                .map(|l| format!("{l}\n"))
                .collect();
            format!(
                "{comments}# (Secret written out again to mask its data)\n{}",
                crate::text::yaml::to_documents(&docs)
            )
        }
        Err(_) => "# (a Secret that cannot be read, so not shown)\n".to_owned(),
    }
}

/// Every Secret of the masked text has nothing but `***` in `data` and `stringData`.
fn is_masked(text: &str) -> bool {
    let Ok(docs) = crate::text::yaml::parse_documents(text) else {
        return false;
    };
    docs.iter()
        .filter(|v| v.get("kind").and_then(|k| k.as_str()) == Some("Secret"))
        .all(|v| {
            ["data", "stringData"].iter().all(|f| match v.get(*f) {
                None | Some(serde_json::Value::Null) => true,
                Some(serde_json::Value::String(s)) => s == "***",
                Some(serde_json::Value::Object(m)) => m.values().all(|x| x == "***"),
                Some(_) => false,
            })
        })
}

/// Line-based, so comments (`# Source:`) and key order stay as Helm rendered them:
/// inside a top-level data/stringData block every value becomes `'***'`.
fn mask_lines(doc: &str) -> String {
    let mut out = String::new();
    let mut in_data = false;
    for line in doc.lines() {
        let top_level =
            !line.starts_with(' ') && !line.starts_with('\t') && !line.trim().is_empty();
        if top_level && !line.starts_with('#') {
            in_data = matches!(line.trim_end(), "data:" | "stringData:")
                || line.starts_with("data:")
                || line.starts_with("stringData:");
            if in_data && !line.trim_end().ends_with(':') {
                // Flow style on one line: `data: {a: b}`.
                let key = line.split(':').next().unwrap_or_default();
                out.push_str(&format!("{key}: {MASK}\n"));
                continue;
            }
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if in_data && line.trim().is_empty() {
            // Blank lines say nothing about the data and keep the layout.
            out.push_str(line);
            out.push('\n');
            continue;
        }
        if in_data {
            if let Some((key, _)) = line.split_once(':')
                && !key.trim().is_empty()
                && key.starts_with("  ")
                && !key[2..].starts_with(' ')
                && !key.trim_start().starts_with('#')
            {
                out.push_str(&format!("{key}: {MASK}\n"));
            }
            // Continuation lines of block scalars (and comments) are dropped.
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    if !doc.ends_with('\n') && out.ends_with('\n') {
        out.pop();
    }
    out
}

/// What marks, in a shadow of composed values, a value whose last source was a Secret
/// (see `values::SecretOrigins`); no YAML document or Secret can hold it (a NUL).
pub const SECRET_ORIGIN: &str = "\u{0}wheelhouse:secret-origin\u{0}";

/// Replaces every scalar (and empty list or map) of `value` by [`SECRET_ORIGIN`].
pub fn mark_secret_origin(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(map) if !map.is_empty() => map.values_mut().for_each(mark_secret_origin),
        Value::Array(items) if !items.is_empty() => items.iter_mut().for_each(mark_secret_origin),
        other => *other = Value::String(SECRET_ORIGIN.into()),
    }
}

/// Whether `shadow` marks any value as a Secret's.
pub fn holds_secret_origin(shadow: &serde_json::Value) -> bool {
    use serde_json::Value;
    match shadow {
        Value::String(s) => s == SECRET_ORIGIN,
        Value::Object(map) => map.values().any(holds_secret_origin),
        Value::Array(items) => items.iter().any(holds_secret_origin),
        _ => false,
    }
}

/// `values` with every value masked whose place in `shadow` (the same values as composed
/// with each Secret's marked, [`mark_secret_origin`]) is a Secret's. With `unknown` (a
/// Secret source could not be read), every value masked but those `shadow` shows a
/// ConfigMap or the inline values set: what cannot be told apart is hidden. With `other`
/// (the other side of a diff), a masked value that differs from it reads `*** (changed)`.
pub fn mask_origins(
    values: &serde_json::Value,
    shadow: &serde_json::Value,
    unknown: bool,
    other: Option<&serde_json::Value>,
) -> serde_json::Value {
    use serde_json::Value;
    let masked = |v: &Value| {
        let changed = other.is_some_and(|o| o != v);
        Value::String(if changed { "*** (changed)" } else { "***" }.into())
    };
    match (values, shadow) {
        (Value::Null, _) => Value::Null,
        (v, Value::String(s)) if s == SECRET_ORIGIN => masked(v),
        (Value::Object(map), _) => map
            .iter()
            .map(|(k, v)| {
                let below = shadow.get(k).unwrap_or(&Value::Null);
                let theirs = other.map(|o| o.get(k).unwrap_or(&Value::Null));
                (k.clone(), mask_origins(v, below, unknown, theirs))
            })
            .collect(),
        (Value::Array(items), _) => items
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let theirs = other.map(|o| o.get(i).unwrap_or(&Value::Null));
                mask_origins(v, shadow.get(i).unwrap_or(&Value::Null), unknown, theirs)
            })
            .collect(),
        (v, Value::Null) if unknown => masked(v),
        (v, _) => v.clone(),
    }
}

/// Values as YAML with the values of keys that look like credentials masked.
pub fn mask_values(values: &serde_json::Value) -> serde_json::Value {
    match values {
        serde_json::Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let v = if is_secret_key(k) && is_masked_kind(v) {
                    serde_json::Value::String("***".into())
                } else {
                    mask_values(v)
                };
                (k.clone(), v)
            })
            .collect(),
        serde_json::Value::Array(items) => items.iter().map(mask_values).collect(),
        v => v.clone(),
    }
}

/// A key whose scalar value [`mask_values`] hides: it looks like it holds a credential.
pub fn is_secret_key(key: &str) -> bool {
    let lower = key.to_lowercase();
    [
        "password",
        "secret",
        "token",
        "apikey",
        "api_key",
        "privatekey",
        "private_key",
    ]
    .iter()
    .any(|w| lower.contains(w))
}

/// The values [`mask_values`] hides under a secret key: scalars (maps and lists are
/// walked instead, and null says nothing).
pub fn is_masked_kind(value: &serde_json::Value) -> bool {
    !value.is_object() && !value.is_array() && !value.is_null()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_data_is_masked_and_other_documents_kept() {
        let manifest = "---\n# Source: c/templates/s.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  password: aHVudGVyMg==\n  other: |\n    line one\nstringData:\n  token: abc\ntype: Opaque\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  key: visible\n";
        let masked = mask_manifest(manifest);
        assert!(!masked.contains("aHVudGVyMg=="), "{masked}");
        assert!(!masked.contains("line one"), "{masked}");
        assert!(!masked.contains("abc"), "{masked}");
        assert!(masked.contains("  password: '***'"), "{masked}");
        assert!(masked.contains("  token: '***'"), "{masked}");
        assert!(masked.contains("type: Opaque"), "{masked}");
        assert!(masked.contains("key: visible"), "{masked}");
        assert!(masked.contains("# Source: c/templates/s.yaml"), "{masked}");
        let flow = mask_manifest("kind: Secret\ndata: {a: b}\n");
        assert_eq!(flow, "kind: Secret\ndata: '***'\n");
    }

    #[test]
    fn only_secret_data_changes_and_json_secrets_are_masked_too() {
        // Everything but a Secret's data stays byte for byte, separators included.
        let plain = "---\n# Source: c/templates/cm.yaml\n# a comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  zulu: \"1\"\n  alpha: 'x'   # why\n---\n# Source: c/templates/s.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  # the key\n  k: dg==\ntype: Opaque\n";
        let masked = mask_manifest(plain);
        let (before, _) = plain.split_at(plain.find("# Source: c/templates/s.yaml").unwrap());
        assert!(masked.starts_with(before), "{masked}");
        assert!(
            masked.ends_with("# Source: c/templates/s.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  k: '***'\ntype: Opaque\n"),
            "{masked}"
        );
        let no_secret = "---\n# Source: a\nkind: ConfigMap\ndata: {a: \"b\"}\n---\n# Source: b\n{\"kind\": \"Service\"}\n";
        assert_eq!(mask_manifest(no_secret), no_secret);
        // A Secret written as JSON has no `data:` line to mask: written out again.
        let json = "---\n# Source: c/templates/s.json\n{\"apiVersion\": \"v1\", \"kind\": \"Secret\",\n \"data\": {\"k\": \"c2VjcmV0\"}}\n";
        let masked = mask_manifest(json);
        assert!(!masked.contains("c2VjcmV0"), "{masked}");
        assert!(masked.contains("k: \"***\""), "{masked}");
        assert!(
            masked.starts_with("---\n# Source: c/templates/s.json\n"),
            "{masked}"
        );
    }

    /// A value from a valuesFrom Secret is masked by where it came from, whatever its
    /// key; a later source that sets the same key shows its own value; with a Secret that
    /// could not be read, only what a ConfigMap or the inline values set is shown.
    #[test]
    fn values_from_secrets_are_masked_by_origin() {
        let mut from_secret =
            json!({"db": {"dsn": "postgres://u:pw@db/x", "port": 5432}, "tags": ["a"]});
        mark_secret_origin(&mut from_secret);
        let mut shadow = json!({"db": {"host": "db"}, "replicas": 2});
        if let (serde_json::Value::Object(base), serde_json::Value::Object(over)) =
            (&mut shadow, from_secret)
        {
            crate::helm::values::merge(base, over);
        }
        // The inline values set the port again: it is theirs.
        if let serde_json::Value::Object(base) = &mut shadow {
            crate::helm::values::merge(
                base,
                json!({"db": {"port": 5433}}).as_object().unwrap().clone(),
            );
        }
        assert!(holds_secret_origin(&shadow));
        let values = json!({"db": {"dsn": "postgres://u:pw@db/x", "port": 5433, "host": "db"}, "tags": ["a"], "replicas": 2});
        assert_eq!(
            mask_origins(&values, &shadow, false, None),
            json!({"db": {"dsn": "***", "port": 5433, "host": "db"}, "tags": ["***"], "replicas": 2})
        );
        // Unknown: what the shadow does not know is hidden too.
        let partial = json!({"replicas": 2});
        assert_eq!(
            mask_origins(&values, &partial, true, None),
            json!({"db": {"dsn": "***", "port": "***", "host": "***"}, "tags": ["***"], "replicas": 2})
        );
        // Beside an older revision: a changed secret says so, never to what.
        let older = json!({"db": {"dsn": "postgres://u:old@db/x", "port": 5433, "host": "db"}, "tags": ["a"]});
        assert_eq!(
            mask_origins(&values, &shadow, false, Some(&older))["db"]["dsn"],
            "*** (changed)"
        );
        assert_eq!(
            mask_origins(&values, &shadow, false, Some(&older))["tags"],
            json!(["***"])
        );
    }

    #[test]
    fn credential_values_are_masked() {
        let v = json!({"db": {"password": "hunter2", "host": "x"}, "apiToken": "t", "list": [{"secret": 1}]});
        assert_eq!(
            mask_values(&v),
            json!({"db": {"password": "***", "host": "x"}, "apiToken": "***", "list": [{"secret": "***"}]})
        );
    }
}

//! YAML to JSON the way Helm's loader does it (sigs.k8s.io/yaml): mapping keys become
//! strings, merge keys (`<<`) are applied, tags are dropped, several documents in one
//! values file are merged in order.

use serde_json::{Map, Value};

/// Converts one YAML value to JSON. Fails on what JSON cannot hold (NaN, infinities,
/// mapping keys that are themselves collections), as Helm does.
pub(crate) fn to_json(value: serde_yaml::Value) -> Result<Value, String> {
    use serde_yaml::Value as Y;
    Ok(match value {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(b),
        Y::Number(n) => number(&n)?,
        Y::String(s) => Value::String(s),
        Y::Sequence(items) => {
            Value::Array(items.into_iter().map(to_json).collect::<Result<_, _>>()?)
        }
        Y::Mapping(map) => {
            let mut out = Map::with_capacity(map.len());
            for (k, v) in map {
                out.insert(key(k)?, to_json(v)?);
            }
            Value::Object(out)
        }
        Y::Tagged(tagged) => to_json(tagged.value)?,
    })
}

fn number(n: &serde_yaml::Number) -> Result<Value, String> {
    if let Some(i) = n.as_i64() {
        return Ok(i.into());
    }
    if let Some(u) = n.as_u64() {
        return Ok(u.into());
    }
    let f = n.as_f64().unwrap_or(f64::NAN);
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .ok_or_else(|| format!("unsupported value {n}: JSON cannot hold it"))
}

/// A scalar rendered as text, as YAML-to-JSON conversion does for keys and for fields
/// Helm types as strings (so `version: 1.10` reads as "1.1", exactly as in Helm).
pub(crate) fn scalar_string(value: &serde_yaml::Value) -> Option<String> {
    use serde_yaml::Value as Y;
    match value {
        Y::Null => Some("null".into()),
        Y::Bool(b) => Some(b.to_string()),
        Y::Number(n) => Some(n.to_string()),
        Y::String(s) => Some(s.clone()),
        Y::Tagged(t) => scalar_string(&t.value),
        Y::Sequence(_) | Y::Mapping(_) => None,
    }
}

fn key(k: serde_yaml::Value) -> Result<String, String> {
    scalar_string(&k).ok_or_else(|| "mapping keys must be scalars".to_string())
}

/// Parses a values file as Helm does (YAML 1.1, [`crate::yaml`]): every document must be
/// a mapping (or empty); later documents are deep-merged over earlier ones, as Helm's
/// `LoadValues` does.
pub(crate) fn values(data: &[u8]) -> Result<Map<String, Value>, String> {
    let text = std::str::from_utf8(data).map_err(|e| e.to_string())?;
    let mut merged = Map::new();
    for value in crate::yaml::parse_documents(text)? {
        match value {
            Value::Null => {}
            Value::Object(map) => merged = merge_maps(merged, map),
            other => {
                return Err(format!(
                    "a values document must be a mapping, found {}",
                    kind(&other)
                ));
            }
        }
    }
    Ok(merged)
}

/// One YAML document as a mapping (Chart.yaml, Chart.lock, requirements.yaml); empty
/// input is an empty mapping.
pub(crate) fn mapping(data: &[u8]) -> Result<serde_yaml::Mapping, String> {
    if data.iter().all(u8::is_ascii_whitespace) {
        return Ok(serde_yaml::Mapping::new());
    }
    let mut value: serde_yaml::Value = serde_yaml::from_slice(data).map_err(|e| e.to_string())?;
    value.apply_merge().map_err(|e| e.to_string())?;
    match value {
        serde_yaml::Value::Null => Ok(serde_yaml::Mapping::new()),
        serde_yaml::Value::Mapping(m) => Ok(m),
        other => Err(format!(
            "expected a mapping, found {}",
            kind(&to_json(other).unwrap_or(Value::Null))
        )),
    }
}

/// Helm's `MergeMaps`: values from `b` win; nested maps merge recursively.
pub(crate) fn merge_maps(mut a: Map<String, Value>, b: Map<String, Value>) -> Map<String, Value> {
    for (k, v) in b {
        match (a.remove(&k), v) {
            (Some(Value::Object(old)), Value::Object(new)) => {
                a.insert(k, Value::Object(merge_maps(old, new)));
            }
            (_, v) => {
                a.insert(k, v);
            }
        }
    }
    a
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_become_strings_and_merge_keys_apply() {
        let v = values(b"base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\n1: one\ntrue: x\n").unwrap();
        assert_eq!(
            Value::Object(v),
            // As helm reads it: YAML 1.1, where the key `y` is the boolean true.
            json!({"base": {"x": 1}, "derived": {"x": 1, "true": 2}, "1": "one", "true": "x"})
        );
    }

    #[test]
    fn documents_deep_merge_in_order() {
        let v = values(b"a: {x: 1, z: 1}\nb: 1\n---\na: {z: 2}\nc: 3\n---\n").unwrap();
        assert_eq!(
            Value::Object(v),
            json!({"a": {"x": 1, "z": 2}, "b": 1, "c": 3})
        );
    }

    #[test]
    fn non_mapping_and_broken_yaml_fail() {
        assert!(values(b"- a\n- b\n").unwrap_err().contains("a list"));
        assert!(values(b"a: [1,\n").is_err());
        assert!(values(b"a: .nan\n").unwrap_err().contains("JSON"));
    }

    #[test]
    fn empty_input_is_empty() {
        assert!(values(b"").unwrap().is_empty());
        assert!(values(b"# only a comment\n").unwrap().is_empty());
        assert!(mapping(b"\n").unwrap().is_empty());
    }
}

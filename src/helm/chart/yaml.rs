//! Chart files read the way Helm's loader reads them (sigs.k8s.io/yaml, YAML 1.1, through
//! [`crate::text::yaml`], which already turns keys into strings, applies merge keys and resolves
//! tags): values files with several documents merged in order, and the one-mapping files
//! (Chart.yaml, Chart.lock, requirements.yaml).

use serde_json::{Map, Value};

/// Why a chart file does not read as the YAML Helm expects.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error(transparent)]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error(transparent)]
    Yaml(#[from] crate::text::yaml::Error),
    /// A values document that is a list or a scalar.
    #[error("a values document must be a mapping, found {0}")]
    ValuesNotMapping(&'static str),
    /// Chart.yaml, Chart.lock or requirements.yaml that is not one mapping.
    #[error("expected a mapping, found {0}")]
    NotMapping(&'static str),
}

/// Parses a values file as Helm does (YAML 1.1, [`crate::text::yaml`]): every document must be
/// a mapping (or empty); later documents are deep-merged over earlier ones, as Helm's
/// `LoadValues` does.
pub(crate) fn values(data: &[u8]) -> Result<Map<String, Value>, FileError> {
    let text = std::str::from_utf8(data)?;
    let mut merged = Map::new();
    for value in crate::text::yaml::parse_documents(text)? {
        match value {
            Value::Null => {}
            Value::Object(map) => merged = merge_maps(merged, map),
            other => return Err(FileError::ValuesNotMapping(kind(&other))),
        }
    }
    Ok(merged)
}

/// One YAML document as a mapping (Chart.yaml, Chart.lock, requirements.yaml); empty
/// input is an empty mapping.
pub(crate) fn mapping(data: &[u8]) -> Result<Map<String, Value>, FileError> {
    let text = std::str::from_utf8(data)?;
    match crate::text::yaml::from_str(text)? {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map),
        other => Err(FileError::NotMapping(kind(&other))),
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
        assert!(
            values(b"- a\n- b\n")
                .unwrap_err()
                .to_string()
                .contains("a list")
        );
        assert!(values(b"a: [1,\n").is_err());
        assert!(
            values(b"a: .nan\n")
                .unwrap_err()
                .to_string()
                .contains("JSON")
        );
    }

    #[test]
    fn one_mapping_files_read_as_helm_reads_them() {
        let m = mapping(b"base: &b {x: 1}\nderived:\n  <<: *b\n  y: 2\nversion: 1.10\n").unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"base": {"x": 1}, "derived": {"x": 1, "true": 2}, "version": 1.1})
        );
        assert!(
            mapping(b"- a\n")
                .unwrap_err()
                .to_string()
                .contains("a list")
        );
        let err = mapping(b"a: 1\n---\nb: 2\n").unwrap_err().to_string();
        assert!(err.contains("one YAML document"), "{err}");
        assert!(mapping(b"a: [1,\n").is_err());
    }

    #[test]
    fn empty_input_is_empty() {
        assert!(values(b"").unwrap().is_empty());
        assert!(values(b"# only a comment\n").unwrap().is_empty());
        assert!(mapping(b"\n").unwrap().is_empty());
    }
}

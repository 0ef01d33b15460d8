//! Masking what came from Secrets in text that is copied elsewhere: an error of helm or
//! of the API server may quote a value (an invalid label built from a password, say), and
//! such messages go to status, Events, Helm's release description and logs, which people
//! who may not read the Secret can read.

use base64::Engine as _;
use serde_json::Value;

/// What replaces a secret value.
pub const MASK: &str = "***";

/// Shorter values are not masked: masking `1` or `yes` would shred every message, and a
/// secret that short protects nothing.
const MIN_LEN: usize = 4;

/// The secret strings to hide. Its `Debug` never shows them.
#[derive(Clone, Default, PartialEq)]
pub struct Masker {
    /// Longest first, so a secret that contains another is masked whole.
    needles: Vec<String>,
}

impl std::fmt::Debug for Masker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Masker({} values)", self.needles.len())
    }
}

impl Masker {
    /// Every scalar of `value` (strings, and numbers as written), and every line of a
    /// multi-line string (an error quotes one line of a certificate, say).
    pub fn add_value(&mut self, value: &Value) {
        match value {
            Value::String(s) => self.add_text(s),
            Value::Number(n) => self.add_text(&n.to_string()),
            Value::Array(items) => items.iter().for_each(|v| self.add_value(v)),
            Value::Object(map) => map.values().for_each(|v| self.add_value(v)),
            Value::Bool(_) | Value::Null => {}
        }
    }

    pub fn add_text(&mut self, text: &str) {
        let mut add = |s: &str| {
            let s = s.trim();
            if s.len() >= MIN_LEN && !self.needles.iter().any(|n| n == s) {
                self.needles.push(s.to_string());
            }
        };
        add(text);
        if text.contains('\n') {
            text.lines().for_each(add);
        }
        self.needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
    }

    /// The values of the Secret objects in a rendered manifest (`data` decoded,
    /// `stringData` as is).
    pub fn add_manifest_secrets(&mut self, manifest: &str) {
        let Ok(documents) = crate::yaml::parse_documents(manifest) else {
            return;
        };
        for doc in documents {
            let is_secret = doc.get("kind").and_then(Value::as_str) == Some("Secret")
                && doc.get("apiVersion").and_then(Value::as_str) == Some("v1");
            if !is_secret {
                continue;
            }
            if let Some(Value::Object(data)) = doc.get("data") {
                for encoded in data.values().filter_map(Value::as_str) {
                    let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim());
                    if let Ok(text) = decoded.map(String::from_utf8) {
                        self.add_text(&text.unwrap_or_default());
                    }
                }
            }
            if let Some(string_data) = doc.get("stringData") {
                self.add_value(string_data);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.needles.is_empty()
    }

    /// `text` with every secret value replaced by `***`.
    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_string();
        for needle in &self.needles {
            if out.contains(needle.as_str()) {
                out = out.replace(needle.as_str(), MASK);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_from_secrets_are_masked_longest_first() {
        let mut m = Masker::default();
        m.add_value(&json!({"db": {"password": "hunter2-long", "port": 5432}, "user": "hunter", "on": true}));
        assert_eq!(
            m.mask(r#"metadata.labels: Invalid value: "hunter2-long": must be 63 characters"#),
            r#"metadata.labels: Invalid value: "***": must be 63 characters"#
        );
        assert_eq!(m.mask("user hunter on port 5432"), "user *** on port ***");
        assert_eq!(format!("{m:?}"), "Masker(3 values)");
    }

    #[test]
    fn short_values_and_booleans_are_left() {
        let mut m = Masker::default();
        m.add_value(&json!({"a": "abc", "b": true, "c": 1}));
        assert!(m.is_empty());
        assert_eq!(m.mask("abc true 1"), "abc true 1");
    }

    #[test]
    fn secrets_of_the_manifest_are_read_from_data_and_string_data() {
        let manifest = "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata:\n  token: c2VjcmV0LXRva2Vu\nstringData:\n  pem: |\n    line-one-of-key\n    line-two-of-key\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {plain: visible-value}\n";
        let mut m = Masker::default();
        m.add_manifest_secrets(manifest);
        assert_eq!(
            m.mask("secret-token / line-two-of-key / visible-value"),
            "*** / *** / visible-value"
        );
    }
}

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
    /// Every form of every value, longest first, so a secret that contains another is
    /// masked whole.
    needles: Vec<String>,
    /// How many values were given (for `Debug`).
    values: usize,
}

impl std::fmt::Debug for Masker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Masker({} values)", self.values)
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

    /// `text`, each of its lines, and each of those in every form a message may quote
    /// it in (see [`forms`]).
    pub fn add_text(&mut self, text: &str) {
        let mut found: Vec<String> = Vec::new();
        let mut add = |s: &str| {
            let s = s.trim();
            if s.len() >= MIN_LEN {
                found.extend(forms(s));
            }
        };
        if text.trim().len() >= MIN_LEN && !self.needles.iter().any(|n| n == text.trim()) {
            self.values += 1;
        }
        add(text);
        if text.contains('\n') {
            // Line by line too: an error quotes one line of a certificate.
            text.lines().for_each(add);
        }
        for form in found {
            if form.len() >= MIN_LEN && !self.needles.contains(&form) {
                self.needles.push(form);
            }
        }
        self.needles.sort_by_key(|n| std::cmp::Reverse(n.len()));
    }

    /// The values of the Secret objects in a rendered manifest (`data` decoded,
    /// `stringData` as is).
    pub fn add_manifest_secrets(&mut self, manifest: &str) {
        let Ok(documents) = crate::text::yaml::parse_documents(manifest) else {
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

    /// Every string inside `value` masked (a status about to be written: condition
    /// messages, history descriptions, whatever else quotes an error).
    pub fn mask_json(&self, value: &mut Value) {
        if self.needles.is_empty() {
            return;
        }
        match value {
            Value::String(s) => {
                let masked = self.mask(s);
                if masked != *s {
                    *s = masked;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.mask_json(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.mask_json(v)),
            Value::Bool(_) | Value::Null | Value::Number(_) => {}
        }
    }

    /// `value` with every string inside masked, through its JSON form.
    pub fn masked<T: serde::Serialize + serde::de::DeserializeOwned + Clone>(
        &self,
        value: &T,
    ) -> T {
        if self.needles.is_empty() {
            return value.clone();
        }
        let Ok(mut json) = serde_json::to_value(value) else {
            return value.clone();
        };
        self.mask_json(&mut json);
        serde_json::from_value(json).unwrap_or_else(|_| value.clone())
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

/// `value` in every form a message may carry it: as written; JSON-escaped (serde's and
/// Go's encoding/json, which also escapes `<`, `>`, `&`, U+2028 and U+2029), Go-quoted
/// (`%q`, as the API server quotes an invalid value, and its ASCII-only form with `\u`
/// escapes), each of those escaped once more (a quoted message inside a quoted message),
/// and base64 (standard and URL-safe, with and without padding).
pub fn forms(value: &str) -> Vec<String> {
    let once = [
        value.to_owned(),
        json_escaped(value),
        json_html_escaped(value),
        go_quoted(value),
        go_quoted_ascii(value),
    ];
    let mut out: Vec<String> = Vec::new();
    for form in once.iter().chain(
        once[1..]
            .iter()
            .map(|f| json_escaped(f))
            .collect::<Vec<_>>()
            .iter(),
    ) {
        if !out.contains(form) {
            out.push(form.clone());
        }
    }
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    for engine in [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD] {
        let encoded = engine.encode(value);
        if !out.contains(&encoded) {
            out.push(encoded);
        }
    }
    out
}

/// The inside of a JSON string holding `value` (serde_json's escapes).
fn json_escaped(value: &str) -> String {
    let quoted = serde_json::to_string(value).expect("a string serialises");
    quoted[1..quoted.len() - 1].to_owned()
}

/// Go's encoding/json escapes: serde's, plus `<`, `>`, `&`, U+2028 and U+2029.
fn json_html_escaped(value: &str) -> String {
    json_escaped(value)
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The inside of Go's `strconv.Quote(value)` (`%q`): `\a \b \f \n \r \t \v`, `\"` and
/// `\\`, other control bytes as `\xNN`, printable Unicode as it is, the rest as `\uNNNN`.
fn go_quoted(value: &str) -> String {
    go_quote(value, false)
}

/// `strconv.QuoteToASCII`: as [`go_quoted`], with every non-ASCII character escaped.
fn go_quoted_ascii(value: &str) -> String {
    go_quote(value, true)
}

fn go_quote(value: &str, ascii: bool) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_ascii() => out.push(c),
            c if ascii || c.is_control() => {
                let n = c as u32;
                if n > 0xffff {
                    out.push_str(&format!("\\U{n:08x}"));
                } else {
                    out.push_str(&format!("\\u{n:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out
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

    /// Every special character a value may hold, as a message would carry it: the API
    /// server's `Invalid value: "..."` (Go's %q), JSON (a webhook payload, helm's
    /// output, a status patch), JSON inside JSON, base64, and one line of a multi-line
    /// value. Expected forms are written out by hand, as Go and serde write them.
    #[test]
    fn every_form_of_a_value_with_special_characters_is_masked() {
        let mut m = Masker::default();
        let value = "esc \"S3cretB\" \\ value";
        m.add_text(value);
        for message in [
            r#"Invalid value: "esc \"S3cretB\" \\ value": must be no more than 63 characters"#,
            r#"{"message":"Invalid value: \"esc \\\"S3cretB\\\" \\\\ value\""}"#,
            "ZXNjICJTM2NyZXRCIiBcIHZhbHVl",
            "raw: esc \"S3cretB\" \\ value",
        ] {
            let masked = m.mask(message);
            assert!(!masked.contains("S3cretB"), "{message} -> {masked}");
            assert!(masked.contains(MASK), "{message} -> {masked}");
        }
        // Each special character alone, escaped as Go and JSON escape it.
        let specials = [
            ("tab\there", vec!["tab\\there"]),
            ("nl\nline-two", vec!["nl\\nline-two"]),
            ("ctl\u{1}byte", vec!["ctl\\x01byte", "ctl\\u0001byte"]),
            ("a<b>&c", vec!["a\\u003cb\\u003e\\u0026c"]),
            ("caf\u{e9}-pass", vec!["caf\\u00e9-pass", "caf\u{e9}-pass"]),
            ("emoji\u{1F511}key", vec!["emoji\\U0001f511key"]),
            ("ls\u{2028}sep", vec!["ls\\u2028sep"]),
        ];
        for (value, quoted) in specials {
            let mut m = Masker::default();
            m.add_text(value);
            for q in quoted {
                let masked = m.mask(&format!("before {q} after"));
                assert_eq!(masked, format!("before {MASK} after"), "{value:?} as {q}");
            }
        }
        // A multi-line value: whole, escaped, and line by line.
        let mut m = Masker::default();
        m.add_text("-----BEGIN KEY-----\nMIIEsecretline\n-----END KEY-----");
        assert_eq!(
            m.mask("bad line: MIIEsecretline"),
            format!("bad line: {MASK}")
        );
        assert!(
            !m.mask(r#"{"key":"-----BEGIN KEY-----\nMIIEsecretline\n-----END KEY-----"}"#)
                .contains("MIIEsecretline")
        );
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

//! The values diff the apply confirmation shows: a unified diff (old → new) of
//! `spec.values` as YAML, the way the editor and the Values tab print it, with credential
//! values masked on both sides. A masked value that changes still shows as a change.

use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::model::{is_masked_kind, is_secret_key, mask_values};

/// Lines of context around each change, as `diff -u`.
const CONTEXT: usize = 3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffLine {
    /// `@@ -a,b +c,d @@`
    Hunk(String),
    Same(String),
    Removed(String),
    Added(String),
}

impl DiffLine {
    /// The line as a unified diff prints it (the marker makes it readable without colour).
    pub fn text(&self) -> String {
        match self {
            Self::Hunk(h) => h.clone(),
            Self::Same(l) => format!(" {l}"),
            Self::Removed(l) => format!("-{l}"),
            Self::Added(l) => format!("+{l}"),
        }
    }
}

/// The diff from `old` to `new` values; empty when the YAML is the same.
pub fn values_diff(old: &Value, new: &Value) -> Vec<DiffLine> {
    let old_text = yaml(&mask_values(old));
    let new_text = yaml(&mask_changed(new, Some(old)));
    let diff = TextDiff::from_lines(&old_text, &new_text);
    let mut lines = Vec::new();
    for hunk in diff.unified_diff().context_radius(CONTEXT).iter_hunks() {
        lines.push(DiffLine::Hunk(hunk.header().to_string()));
        for change in hunk.iter_changes() {
            let text = change.value().trim_end_matches('\n').to_owned();
            lines.push(match change.tag() {
                ChangeTag::Equal => DiffLine::Same(text),
                ChangeTag::Delete => DiffLine::Removed(text),
                ChangeTag::Insert => DiffLine::Added(text),
            });
        }
    }
    lines
}

/// As the editor prints values: empty values are `{}`.
fn yaml(values: &Value) -> String {
    if values.as_object().is_some_and(serde_json::Map::is_empty) {
        return "{}\n".into();
    }
    crate::yaml::to_string(values)
}

/// [`mask_values`] for the new side: a credential that differs from the old one at the
/// same place reads `*** (changed)`, so the diff shows that it changes, never to what.
fn mask_changed(new: &Value, old: Option<&Value>) -> Value {
    match new {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let before = old.and_then(|o| o.get(k));
                let v = if is_secret_key(k) && is_masked_kind(v) {
                    let changed = before.is_some_and(|b| is_masked_kind(b) && b != v);
                    Value::String(if changed { "*** (changed)" } else { "***" }.into())
                } else {
                    mask_changed(v, before)
                };
                (k.clone(), v)
            })
            .collect(),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| mask_changed(v, old.and_then(|o| o.get(i))))
            .collect(),
        v => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(lines: &[DiffLine]) -> Vec<String> {
        lines.iter().map(DiffLine::text).collect()
    }

    #[test]
    fn unified_diff_of_the_yaml_with_context() {
        let old = json!({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6, "g": 7, "h": 8});
        let mut new = old.clone();
        new["h"] = json!(9);
        new["i"] = json!("new");
        assert_eq!(
            texts(&values_diff(&old, &new)),
            [
                "@@ -5,4 +5,5 @@",
                " e: 5",
                " f: 6",
                " g: 7",
                "-h: 8",
                "+h: 9",
                "+i: new",
            ]
        );
        assert!(values_diff(&old, &old).is_empty());
        let from_nothing = texts(&values_diff(&json!({}), &json!({"a": 1})));
        assert_eq!(from_nothing, ["@@ -1 +1 @@", "-{}", "+a: 1"]);
    }

    #[test]
    fn credentials_stay_masked_and_a_changed_one_says_so() {
        let old = json!({"db": {"password": "hunter2", "user": "app"}, "apiKey": "k1"});
        let new = json!({"db": {"password": "correct horse", "user": "app"}, "apiKey": "k1",
                         "token": "t0"});
        let lines = texts(&values_diff(&old, &new));
        let all = lines.join("\n");
        for secret in ["hunter2", "correct horse", "k1", "t0"] {
            assert!(!all.contains(secret), "{secret} shown:\n{all}");
        }
        assert!(lines.contains(&"-  password: \"***\"".to_owned()), "{all}");
        assert!(
            lines.contains(&"+  password: \"*** (changed)\"".to_owned()),
            "{all}"
        );
        assert!(lines.contains(&"+token: \"***\"".to_owned()), "{all}");
        assert!(lines.contains(&" apiKey: \"***\"".to_owned()), "{all}");
    }
}

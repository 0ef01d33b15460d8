//! Diffs the dashboard shows before a write and between revisions: a unified diff (old →
//! new) of values as YAML, the way the editor and the Values tab print them, with
//! credential values masked on both sides; and of manifests, object by object (matched
//! by kind, namespace and name), with every Secret's data masked. A masked value that
//! changes still shows as a change, never to what.

use serde_json::Value;
use similar::{ChangeTag, TextDiff};

use super::view_model::{is_masked_kind, is_secret_key, mask_values};

/// Lines of context around each change, as `diff -u`.
const CONTEXT: usize = 3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DiffLine {
    /// What the lines after it are a diff of: `values`, or an object as
    /// `Kind/namespace/name (changed|added|removed)`.
    Section(String),
    /// `@@ -a,b +c,d @@`
    Hunk(String),
    Same(String),
    Removed(String),
    Added(String),
}

impl DiffLine {
    /// The same kind of line with its text mapped by `f`.
    pub fn map_text(self, f: impl Fn(&str) -> String) -> Self {
        match self {
            Self::Section(t) => Self::Section(f(&t)),
            Self::Hunk(t) => Self::Hunk(f(&t)),
            Self::Same(t) => Self::Same(f(&t)),
            Self::Removed(t) => Self::Removed(f(&t)),
            Self::Added(t) => Self::Added(f(&t)),
        }
    }

    /// The line as a unified diff prints it (the marker makes it readable without colour).
    pub fn text(&self) -> String {
        match self {
            Self::Section(s) => format!("━━ {s}"),
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
    text_diff(&old_text, &new_text)
}

/// A unified diff of two texts, line by line.
fn text_diff(old_text: &str, new_text: &str) -> Vec<DiffLine> {
    let diff = TextDiff::from_lines(old_text, new_text);
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

/// How many objects a manifest diff found changed, added, removed and unchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub changed: usize,
    pub added: usize,
    pub removed: usize,
    pub unchanged: usize,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} changed, {} added, {} removed, {} unchanged",
            self.changed, self.added, self.removed, self.unchanged
        )
    }
}

/// One object of a manifest: who it is, and its text as shown (Secret data masked).
struct Object {
    id: String,
    text: String,
    /// The parsed document, for masking a Secret against its other side.
    value: Option<Value>,
}

fn objects(manifest: &str) -> Vec<Object> {
    crate::helm::apply::manifest::split_documents(manifest)
        .into_iter()
        .filter(|d| !crate::helm::apply::manifest::is_blank_document(d.body))
        .enumerate()
        .map(|(i, d)| {
            let value = crate::text::yaml::parse_documents(d.body)
                .ok()
                .and_then(|docs| docs.into_iter().next());
            let field = |v: &Option<Value>, path: &[&str]| {
                let mut at = v.as_ref()?;
                for p in path {
                    at = at.get(*p)?;
                }
                at.as_str().map(str::to_owned)
            };
            let kind = field(&value, &["kind"]);
            let name = field(&value, &["metadata", "name"]);
            let namespace = field(&value, &["metadata", "namespace"]);
            let id = match (kind, name) {
                (Some(k), Some(n)) => match namespace {
                    Some(ns) => format!("{k}/{ns}/{n}"),
                    None => format!("{k}/{n}"),
                },
                // Not an object (a template that renders text): told apart by place.
                _ => format!("{} (document {})", d.source.unwrap_or("manifest"), i + 1),
            };
            let text = if d.body.ends_with('\n') {
                d.body.to_owned()
            } else {
                format!("{}\n", d.body)
            };
            Object { id, text, value }
        })
        .collect()
}

fn is_secret(o: &Object) -> bool {
    o.value
        .as_ref()
        .and_then(|v| v.get("kind"))
        .and_then(Value::as_str)
        == Some("Secret")
}

/// A Secret as shown: its `data` and `stringData` values `***`, or `*** (changed)` on the
/// new side where they differ from `old`'s.
fn masked_secret(secret: &Value, old: Option<&Value>) -> String {
    let mut v = secret.clone();
    for field in ["data", "stringData"] {
        let before = old.and_then(|o| o.get(field));
        if let Some(map) = v.get_mut(field).and_then(Value::as_object_mut) {
            for (k, value) in map.iter_mut() {
                let changed =
                    old.is_some() && before.and_then(|b| b.get(k)).is_none_or(|b| b != value);
                *value = Value::String(if changed { "*** (changed)" } else { "***" }.into());
            }
        }
    }
    crate::text::yaml::to_string(&v)
}

/// The diff from manifest `old` to `new`, object by object: each changed, added or
/// removed object under a [`DiffLine::Section`] naming it, in `new`'s order with the
/// removed ones last. Secret data is masked on both sides.
pub fn manifest_diff(old: &str, new: &str) -> (Vec<DiffLine>, Counts) {
    let before = objects(old);
    let after = objects(new);
    let mut counts = Counts::default();
    let mut lines = Vec::new();
    let shown = |o: &Object, other: Option<&Object>, new_side: bool| -> String {
        match (&o.value, is_secret(o)) {
            (Some(v), true) if new_side => masked_secret(v, other.and_then(|x| x.value.as_ref())),
            (Some(v), true) => masked_secret(v, None),
            // A Secret that does not parse is never shown.
            (None, _) if o.text.contains("kind: Secret") => {
                "# (a Secret that cannot be read)\n".into()
            }
            _ => o.text.clone(),
        }
    };
    for o in &after {
        let old_o = before.iter().find(|b| b.id == o.id);
        let new_text = shown(o, old_o, true);
        match old_o {
            Some(b) => {
                let old_text = shown(b, None, false);
                // A Secret whose data changed but whose masked text did not still changed.
                let same = b.text == o.text;
                if same {
                    counts.unchanged += 1;
                    continue;
                }
                counts.changed += 1;
                lines.push(DiffLine::Section(format!("{} (changed)", o.id)));
                lines.extend(text_diff(&old_text, &new_text));
            }
            None => {
                counts.added += 1;
                lines.push(DiffLine::Section(format!("{} (added)", o.id)));
                lines.extend(new_text.lines().map(|l| DiffLine::Added(l.to_owned())));
            }
        }
    }
    for b in before
        .iter()
        .filter(|b| !after.iter().any(|a| a.id == b.id))
    {
        counts.removed += 1;
        lines.push(DiffLine::Section(format!("{} (removed)", b.id)));
        let text = shown(b, None, false);
        lines.extend(text.lines().map(|l| DiffLine::Removed(l.to_owned())));
    }
    (lines, counts)
}

/// Every line of a values and manifest pair as they are (one revision shown whole), in
/// the same sections a diff has, Secret data masked.
pub fn shown_whole(values: &Value, manifest: &str) -> Vec<DiffLine> {
    let mut lines = vec![DiffLine::Section("values (as Helm stores them)".into())];
    lines.extend(
        yaml(&mask_values(values))
            .lines()
            .map(|l| DiffLine::Same(l.to_owned())),
    );
    for o in objects(manifest) {
        lines.push(DiffLine::Section(o.id.clone()));
        let text = match (&o.value, is_secret(&o)) {
            (Some(v), true) => masked_secret(v, None),
            (None, _) if o.text.contains("kind: Secret") => {
                "# (a Secret that cannot be read)\n".into()
            }
            _ => o.text.clone(),
        };
        lines.extend(text.lines().map(|l| DiffLine::Same(l.to_owned())));
    }
    lines
}

/// Values and manifest from one side to the other: the values diff first, then the
/// manifest's objects; and a one-line summary of both.
pub fn release_diff(
    old_values: &Value,
    old_manifest: &str,
    new_values: &Value,
    new_manifest: &str,
) -> (Vec<DiffLine>, String) {
    let mut lines = Vec::new();
    let values = values_diff(old_values, new_values);
    let values_said = if values.is_empty() {
        "values unchanged"
    } else {
        lines.push(DiffLine::Section("values (as Helm stores them)".into()));
        lines.extend(values);
        "values changed"
    };
    let (objects, counts) = manifest_diff(old_manifest, new_manifest);
    lines.extend(objects);
    (lines, format!("{values_said}; objects: {counts}"))
}

/// As the editor prints values: empty values are `{}`.
fn yaml(values: &Value) -> String {
    if values.as_object().is_some_and(serde_json::Map::is_empty) {
        return "{}\n".into();
    }
    crate::text::yaml::to_string(values)
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

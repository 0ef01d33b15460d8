//! The config hash: an HMAC-SHA256 over the consumed data of a workload's objects, in a
//! stable order (kind, name, key), so the same data always gives the same hash whatever
//! order the pod spec lists it in or the API server returns it in. Keyed with the
//! cluster's own key ([`HashKey`], a Secret beside the engine's Lease), because anyone
//! who may read a Deployment sees the hash: a plain sha256 of a short Secret would be
//! guessed offline; an HMAC proves a change without telling anything of the data.
//!
//! Workloads hashed before the key existed (a plain sha256, [`legacy_hash`]) keep that
//! hash until their data changes, so upgrading wheelhouse restarts no pod.

use std::collections::BTreeMap;
use std::sync::Arc;

use hmac::{KeyInit, Mac};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use sha2::{Digest, Sha256};

/// The Secret beside the engine's Lease holding the cluster's config-hash key.
pub const KEY_SECRET: &str = "wheelhouse-config-hash-key";
/// Its data key.
const KEY_FIELD: &str = "key";

/// What config hashes are keyed with: the cluster's key, or none (an engine that may not
/// read or create the key's Secret hashes as before it existed, and says so).
#[derive(Clone, Default, PartialEq, Eq)]
pub enum HashKey {
    Keyed(Arc<[u8; 32]>),
    #[default]
    Unkeyed,
}

impl std::fmt::Debug for HashKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Keyed(_) => "HashKey::Keyed(<redacted>)",
            Self::Unkeyed => "HashKey::Unkeyed",
        })
    }
}

impl HashKey {
    /// The cluster's key from the Secret [`KEY_SECRET`] in `namespace` (the Lease's), made
    /// with a random key when it does not exist. Every engine of a cluster shares the
    /// Lease's namespace, so all of them hash alike.
    pub async fn load(client: &kube::Client, namespace: &str) -> Result<Self, kube::Error> {
        use kube::api::{Api, PostParams};
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        for _ in 0..3 {
            if let Some(secret) = api.get_opt(KEY_SECRET).await? {
                let key = secret
                    .data
                    .as_ref()
                    .and_then(|d| d.get(KEY_FIELD))
                    .map(|b| Sha256::digest(&b.0).into());
                return Ok(match key {
                    Some(key) => Self::Keyed(Arc::new(key)),
                    None => Self::Unkeyed,
                });
            }
            let mut bytes = [0u8; 32];
            use ring::rand::SecureRandom;
            ring::rand::SystemRandom::new()
                .fill(&mut bytes)
                .map_err(|_| kube::Error::Service("the system's random source failed".into()))?;
            let secret: Secret = serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": KEY_SECRET,
                    "labels": {"app.kubernetes.io/name": "wheelhouse"},
                    "annotations": {"wheelhouse.dev/purpose": "keys the pod-template config hash; deleting it rolls every tracked workload once"},
                },
                "type": "Opaque",
                "data": {KEY_FIELD: base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes)},
            }))
            .expect("a Secret");
            match api.create(&PostParams::default(), &secret).await {
                Ok(_) => {}
                // Another engine made it first: read that one.
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Self::Unkeyed)
    }
}

/// The engine's key, loaded once on first use (shared by its renders and its tracker).
#[derive(Clone)]
pub struct HashKeys {
    client: kube::Client,
    namespace: String,
    key: Arc<tokio::sync::OnceCell<HashKey>>,
}

impl std::fmt::Debug for HashKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HashKeys")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl HashKeys {
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        Self {
            client,
            namespace: namespace.to_owned(),
            key: Arc::default(),
        }
    }

    /// Keys that are already known (tests; engines that hash as before).
    pub fn fixed(client: kube::Client, key: HashKey) -> Self {
        Self {
            client,
            namespace: String::new(),
            key: Arc::new(tokio::sync::OnceCell::new_with(Some(key))),
        }
    }

    /// The key; one that cannot be read or made leaves hashes unkeyed, with a warning.
    pub async fn get(&self) -> HashKey {
        self.key
            .get_or_init(|| async {
                match HashKey::load(&self.client, &self.namespace).await {
                    Ok(key) => key,
                    Err(e) => {
                        tracing::warn!(namespace = %self.namespace, secret = KEY_SECRET, error = %e, "config tracking: cannot read or create the config-hash key; hashing without it (apply wheelhouse's RBAC for its Lease namespace)");
                        HashKey::Unkeyed
                    }
                }
            })
            .await
            .clone()
    }
}

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

/// The hash before keys: a plain sha256 of the same fields. A workload that carries it
/// keeps it while its data is the same.
pub fn legacy_hash(resolved: &[Resolved]) -> String {
    config_hash(resolved, &HashKey::Unkeyed)
}

/// Hex HMAC-SHA256 (keyed with `key`; sha256 when unkeyed) over the selected data of
/// `resolved`. Only the consumed keys count (a key nobody reads can change without a
/// rollout); an absent object and an absent key each hash as a distinct marker, so their
/// appearance changes the hash. Every field is length-prefixed, so no two different
/// inputs share an encoding.
pub fn config_hash(resolved: &[Resolved], key: &HashKey) -> String {
    let mut sorted: Vec<&Resolved> = resolved.iter().collect();
    sorted.sort_by(|a, b| (a.object.kind, &a.object.name).cmp(&(b.object.kind, &b.object.name)));
    let mut hasher = match key {
        HashKey::Keyed(k) => Hasher::Keyed(
            hmac::Hmac::<Sha256>::new_from_slice(k.as_slice()).expect("HMAC takes any key"),
        ),
        HashKey::Unkeyed => Hasher::Plain(Sha256::new()),
    };
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
    match hasher {
        Hasher::Plain(h) => hex::encode(h.finalize()),
        Hasher::Keyed(h) => hex::encode(h.finalize().into_bytes()),
    }
}

enum Hasher {
    Plain(Sha256),
    Keyed(hmac::Hmac<Sha256>),
}

impl Hasher {
    fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Plain(h) => h.update(bytes),
            Self::Keyed(h) => h.update(bytes),
        }
    }
}

fn field(hasher: &mut Hasher, bytes: &[u8]) {
    hasher.update(&(bytes.len() as u64).to_be_bytes());
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

    /// The keyed hash differs from the plain sha256 of the same data, and from another
    /// key's: it proves a change without being a digest anyone can recompute.
    #[test]
    fn the_hash_is_keyed() {
        let r = [resolved(
            object(ConfigKind::Secret, "db", None, false),
            Some(data(&[("password", "hunter2")])),
        )];
        let key = |b: u8| HashKey::Keyed(Arc::new([b; 32]));
        let keyed = config_hash(&r, &key(1));
        assert_eq!(keyed.len(), 64);
        assert_ne!(keyed, legacy_hash(&r));
        assert_ne!(keyed, config_hash(&r, &key(2)));
        assert_eq!(keyed, config_hash(&r, &key(1)));
        assert_eq!(format!("{:?}", key(1)), "HashKey::Keyed(<redacted>)");
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
        let h1 = legacy_hash(&[a.clone(), b.clone()]);
        let h2 = legacy_hash(&[b, a]);
        assert_eq!(h1, h2);
        assert_eq!(h1.len(), 64);
        // Deterministic across runs: a fixed value pins the encoding.
        let again = legacy_hash(&[
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
            legacy_hash(&[resolved(
                object(ConfigKind::ConfigMap, "c", Some(&["used"]), false),
                Some(d),
            )])
        };
        let base = keyed(data(&[("used", "1"), ("other", "a")]));
        assert_eq!(base, keyed(data(&[("used", "1"), ("other", "b")])));
        assert_ne!(base, keyed(data(&[("used", "2"), ("other", "a")])));
        assert_ne!(base, keyed(data(&[("other", "a")])));

        let whole = |d| {
            legacy_hash(&[resolved(
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
        let cm = legacy_hash(&[resolved(
            object(ConfigKind::ConfigMap, "n", None, true),
            d(),
        )]);
        let secret = legacy_hash(&[resolved(object(ConfigKind::Secret, "n", None, true), d())]);
        let other = legacy_hash(&[resolved(
            object(ConfigKind::ConfigMap, "m", None, true),
            d(),
        )]);
        let absent = legacy_hash(&[resolved(
            object(ConfigKind::ConfigMap, "n", None, true),
            None,
        )]);
        let empty = legacy_hash(&[resolved(
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
            legacy_hash(&[resolved(
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

//! When each object of the kinds the dispatcher watches last changed (written by anyone,
//! or deleted), as a sequence number of this engine's watches. A drift check that found
//! a release clean remembers the number it started at and the objects it compared; the
//! next check of the same revision may skip its reads (discovery, each object, a dry-run
//! apply each) when every one of those objects is still there and none changed since.
//! At 10,000 releases the interval checks of an idle fleet were the engine's and the API
//! server's main cost (docs/design.md, "Drift").
//!
//! It vouches only for what its watches saw whole: an object of another kind, or one it
//! never saw, or any check that started before a watch's latest re-list, is checked.
//!
//! Each object also has a fingerprint (its generation, labels and annotations; for a kind
//! without a generation, its resourceVersion), hashed the same way in every process: a
//! clean check records the digest of its objects' fingerprints in the release's status
//! (`status.driftChecked`), so an engine started later skips the check of an object set
//! whose digest is still the same.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

/// The kinds watched (metadata only), by `apiVersion` and `kind` as a manifest names them.
pub const WATCHED: [(&str, &str); 6] = [
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "Service"),
];

/// An object of one of the [`WATCHED`] kinds: a hash of (kind, namespace, name), the
/// same in every process. Two objects sharing one only make a check run that could have
/// been skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey(u64);

impl ObjectKey {
    /// `None` for a kind that is not watched.
    pub fn of(api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Self> {
        let watched = WATCHED
            .iter()
            .position(|(v, k)| *v == api_version && *k == kind)?;
        Some(Self(stable_hash(&[
            watched.to_string().as_bytes(),
            namespace.as_bytes(),
            name.as_bytes(),
        ])))
    }
}

/// The first 8 bytes of the SHA-256 of `parts`, each length-prefixed (so that no two
/// lists of parts hash alike by their concatenation).
fn stable_hash(parts: &[&[u8]]) -> u64 {
    let mut h = Sha256::new();
    for part in parts {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    let digest = h.finalize();
    u64::from_le_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// What a drift check could find changed in an object, as a number: for a kind with a
/// generation, its generation, labels and annotations (a write of its status alone, a
/// rollout's progress, which no drift check compares, leaves it alone); for another
/// kind, its resourceVersion (every write).
pub fn fingerprint(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> u64 {
    fn pairs(m: &Option<BTreeMap<String, String>>) -> Vec<&[u8]> {
        m.iter()
            .flatten()
            .flat_map(|(k, v)| [k.as_bytes(), v.as_bytes()])
            .collect()
    }
    match meta.generation {
        Some(generation) => {
            let generation = generation.to_string();
            let labels = pairs(&meta.labels);
            let annotations = pairs(&meta.annotations);
            let mut parts: Vec<&[u8]> = vec![b"generation", generation.as_bytes(), b"labels"];
            parts.extend(labels);
            parts.push(b"annotations");
            parts.extend(annotations);
            stable_hash(&parts)
        }
        None => stable_hash(&[
            b"resourceVersion",
            meta.resource_version
                .as_deref()
                .unwrap_or_default()
                .as_bytes(),
        ]),
    }
}

/// One event of the watch of `WATCHED[kind]`.
pub enum Seen<'a> {
    /// Written (or listed), with its [`fingerprint`]: a write that leaves it alone is
    /// no change.
    Changed {
        kind: usize,
        namespace: &'a str,
        name: &'a str,
        fingerprint: u64,
    },
    Gone {
        kind: usize,
        namespace: &'a str,
        name: &'a str,
    },
    Relisting(usize),
    Relisted(usize),
}

#[derive(Clone)]
pub struct ObjectChanges(Arc<Shared>);

struct Shared {
    state: Mutex<State>,
    /// Every watch has its list whole.
    whole: tokio::sync::watch::Sender<bool>,
}

impl Default for ObjectChanges {
    fn default() -> Self {
        Self(Arc::new(Shared {
            state: Mutex::default(),
            whole: tokio::sync::watch::channel(false).0,
        }))
    }
}

struct State {
    seq: u64,
    /// Objects present, each with the sequence number of its last change and its
    /// fingerprint.
    present: HashMap<ObjectKey, (u64, u64)>,
    /// Watches whose list is not whole (all, until each has listed once).
    relisting: [bool; WATCHED.len()],
    /// The sequence number at which the latest re-list ended: a check that started
    /// before it may have missed a deletion during the watch's gap.
    relisted_at: u64,
}

impl Default for State {
    fn default() -> Self {
        Self {
            seq: 0,
            present: HashMap::new(),
            relisting: [true; WATCHED.len()],
            relisted_at: 0,
        }
    }
}

impl ObjectChanges {
    pub fn observe(&self, seen: Seen<'_>) {
        let mut st = self.lock();
        st.seq += 1;
        let seq = st.seq;
        match seen {
            Seen::Changed {
                kind,
                namespace,
                name,
                fingerprint,
            } => {
                let entry = st
                    .present
                    .entry(key(kind, namespace, name))
                    .or_insert((seq, fingerprint));
                if entry.1 != fingerprint {
                    *entry = (seq, fingerprint);
                }
            }
            Seen::Gone {
                kind,
                namespace,
                name,
            } => {
                st.present.remove(&key(kind, namespace, name));
            }
            Seen::Relisting(kind) => st.relisting[kind] = true,
            Seen::Relisted(kind) => {
                st.relisting[kind] = false;
                st.relisted_at = seq;
            }
        }
        let whole = !st.relisting.iter().any(|r| *r);
        self.0
            .whole
            .send_if_modified(|w| std::mem::replace(w, whole) != whole);
    }

    /// Waits until every watch has its list whole, at most `within`: whether they have.
    pub async fn whole(&self, within: std::time::Duration) -> bool {
        let mut whole = self.0.whole.subscribe();
        matches!(
            tokio::time::timeout(within, whole.wait_for(|w| *w)).await,
            Ok(Ok(_))
        )
    }

    /// The point a check starts from, to pass to [`Self::unchanged_since`] later.
    pub fn now(&self) -> u64 {
        self.lock().seq
    }

    /// Whether every one of `objects` is present and unchanged since `since`, as watches
    /// that stayed whole since then saw them.
    pub fn unchanged_since(&self, since: u64, objects: &[ObjectKey]) -> bool {
        let st = self.lock();
        if st.relisting.iter().any(|r| *r) || since < st.relisted_at {
            return false;
        }
        objects.iter().all(|o| {
            st.present
                .get(o)
                .is_some_and(|(changed, _)| *changed <= since)
        })
    }

    /// The digest of `objects` as the watches see them now (for `status.driftChecked`),
    /// with the point it stands for; `None` when a watch is not whole or one of them was
    /// never seen.
    pub fn digest(&self, objects: &[ObjectKey]) -> Option<(u64, String)> {
        let st = self.lock();
        if st.relisting.iter().any(|r| *r) {
            return None;
        }
        let mut seen: Vec<(ObjectKey, u64)> = objects
            .iter()
            .map(|o| st.present.get(o).map(|(_, f)| (*o, *f)))
            .collect::<Option<_>>()?;
        seen.sort_unstable();
        let mut h = Sha256::new();
        for (key, fingerprint) in seen {
            h.update(key.0.to_le_bytes());
            h.update(fingerprint.to_le_bytes());
        }
        Some((st.seq, format!("sha256:{}", hex::encode(h.finalize()))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn key(kind: usize, namespace: &str, name: &str) -> ObjectKey {
    let (api_version, kind) = WATCHED[kind];
    ObjectKey::of(api_version, kind, namespace, name).expect("a watched kind")
}

/// The objects of `manifest` (a release's, in `namespace` by default), when all are of
/// watched kinds; `None` when one is not (or the manifest does not parse): such a
/// release's checks are never skipped.
pub fn watched_objects(manifest: &str, namespace: &str) -> Option<Vec<ObjectKey>> {
    let documents = crate::text::yaml::parse_documents(manifest).ok()?;
    documents
        .iter()
        .map(|doc| {
            let field = |p: &str| doc.pointer(p).and_then(serde_json::Value::as_str);
            ObjectKey::of(
                field("/apiVersion")?,
                field("/kind")?,
                field("/metadata/namespace").unwrap_or(namespace),
                field("/metadata/name")?,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEPLOYMENT: usize = 0;
    const CONFIGMAP: usize = 3;

    fn listed(changes: &ObjectChanges) {
        for kind in 0..WATCHED.len() {
            changes.observe(Seen::Relisting(kind));
            changes.observe(Seen::Relisted(kind));
        }
    }

    fn web() -> Vec<ObjectKey> {
        watched_objects(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: other}\n",
            "apps",
        )
        .unwrap()
    }

    fn seen(changes: &ObjectChanges) {
        changes.observe(Seen::Changed {
            kind: DEPLOYMENT,
            namespace: "apps",
            name: "web",
            fingerprint: 1,
        });
        changes.observe(Seen::Changed {
            kind: CONFIGMAP,
            namespace: "other",
            name: "web",
            fingerprint: 1,
        });
    }

    #[test]
    fn a_release_whose_objects_nobody_touched_since_its_check_needs_no_new_one() {
        let changes = ObjectChanges::default();
        seen(&changes);
        assert!(
            !changes.unchanged_since(changes.now(), &web()),
            "the watches have not listed yet"
        );
        listed(&changes);
        let checked = changes.now();
        assert!(changes.unchanged_since(checked, &web()));
        changes.observe(Seen::Changed {
            kind: CONFIGMAP,
            namespace: "apps",
            name: "unrelated",
            fingerprint: 1,
        });
        assert!(changes.unchanged_since(checked, &web()));
    }

    #[test]
    fn a_write_a_deletion_or_a_relist_means_checking_again() {
        let changes = ObjectChanges::default();
        seen(&changes);
        listed(&changes);
        let checked = changes.now();
        changes.observe(Seen::Changed {
            kind: DEPLOYMENT,
            namespace: "apps",
            name: "web",
            fingerprint: 1,
        });
        assert!(
            changes.unchanged_since(checked, &web()),
            "written, its fingerprint the same"
        );
        changes.observe(Seen::Changed {
            kind: DEPLOYMENT,
            namespace: "apps",
            name: "web",
            fingerprint: 2,
        });
        assert!(!changes.unchanged_since(checked, &web()), "written");

        let checked = changes.now();
        changes.observe(Seen::Gone {
            kind: CONFIGMAP,
            namespace: "other",
            name: "web",
        });
        assert!(!changes.unchanged_since(checked, &web()), "deleted");
        seen(&changes);

        let checked = changes.now();
        changes.observe(Seen::Relisting(CONFIGMAP));
        assert!(!changes.unchanged_since(checked, &web()), "mid-relist");
        changes.observe(Seen::Relisted(CONFIGMAP));
        assert!(
            !changes.unchanged_since(checked, &web()),
            "a gap may have hidden a deletion"
        );
        assert!(changes.unchanged_since(changes.now(), &web()));
    }

    #[test]
    fn a_deployments_status_alone_is_no_change_its_spec_or_labels_are() {
        let changes = ObjectChanges::default();
        listed(&changes);
        let mut meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            generation: Some(1),
            ..Default::default()
        };
        let write = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            changes.observe(Seen::Changed {
                kind: DEPLOYMENT,
                namespace: "apps",
                name: "web",
                fingerprint: fingerprint(meta),
            })
        };
        let deployment = [ObjectKey::of("apps/v1", "Deployment", "apps", "web").unwrap()];
        write(&meta);
        let checked = changes.now();
        write(&meta);
        assert!(changes.unchanged_since(checked, &deployment), "status only");
        meta.labels = Some([("team".to_string(), "a".to_string())].into());
        write(&meta);
        assert!(!changes.unchanged_since(checked, &deployment), "labelled");
        let checked = changes.now();
        meta.generation = Some(2);
        write(&meta);
        assert!(
            !changes.unchanged_since(checked, &deployment),
            "spec changed"
        );
    }

    #[test]
    fn the_digest_of_a_release_s_objects_is_what_a_later_engine_compares() {
        let changes = ObjectChanges::default();
        seen(&changes);
        assert_eq!(
            changes.digest(&web()),
            None,
            "the watches have not listed yet"
        );
        listed(&changes);
        let (_, first) = changes.digest(&web()).unwrap();
        // Another engine that saw the same objects computes the same digest.
        let later = ObjectChanges::default();
        listed(&later);
        seen(&later);
        assert_eq!(later.digest(&web()).unwrap().1, first);
        later.observe(Seen::Changed {
            kind: DEPLOYMENT,
            namespace: "apps",
            name: "web",
            fingerprint: 2,
        });
        assert_ne!(later.digest(&web()).unwrap().1, first);
        later.observe(Seen::Gone {
            kind: DEPLOYMENT,
            namespace: "apps",
            name: "web",
        });
        assert_eq!(later.digest(&web()), None, "one of them is gone");
    }

    #[test]
    fn a_release_with_an_unwatched_kind_or_an_object_never_seen_is_always_checked() {
        assert_eq!(
            watched_objects(
                "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: web}\n",
                "apps"
            ),
            None
        );
        assert_eq!(
            watched_objects(
                "apiVersion: example.com/v1\nkind: Deployment\nmetadata: {name: web}\n",
                "apps"
            ),
            None,
            "another group's Deployment"
        );
        let changes = ObjectChanges::default();
        listed(&changes);
        assert!(
            !changes.unchanged_since(changes.now(), &web()),
            "never seen"
        );
    }
}

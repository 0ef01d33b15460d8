//! What an engine's watch of Helm's storage records (metadata only) knows of them, by
//! release name: which namespaces store a release of that name, and each one's newest
//! revision. It lets [`super::stored_elsewhere`] answer "no other record deploys this
//! release" without a cluster-wide list of records per reconcile, which at thousands of
//! releases was the API server's largest cost (each list scans every Secret of its watch
//! cache). It answers only that: whenever a record elsewhere might be a rival, or the
//! watch is not whole, the caller lists as before (docs/design.md, "Never touch what is
//! not ours").
//!
//! What a record deploys (its release namespace, whether it is uninstalled, who claims
//! it) is in its data, which the watch does not carry: it is learned from the reads the
//! caller makes anyway, and trusted only while the record's resourceVersion is the one
//! that was read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::api::PartialObjectMeta;
use kube::runtime::watcher;

/// The stored revisions of one release name: a few at most, so a short list (nested
/// maps cost a kilobyte a name, ten megabytes at 10,000 releases).
type Stored = Vec<Revision>;

struct Revision {
    namespace: Box<str>,
    version: i32,
    resource_version: Box<str>,
}

/// Shared by the dispatcher that feeds it and the reconciles that ask it.
#[derive(Clone, Default)]
pub struct RecordIndex(Arc<Mutex<State>>);

#[derive(Default)]
struct State {
    /// The watch covers every namespace: an engine watching one namespace cannot say
    /// what is stored in the others.
    covers_all: bool,
    /// The one namespace the watch covers, when it covers one.
    only: Option<String>,
    /// The watch's list has been seen whole, and no re-list is under way.
    synced: bool,
    names: HashMap<String, Stored>,
    /// A re-list being gathered, swapped in when it is whole.
    relisting: Option<HashMap<String, Stored>>,
    /// What a record's data said, keyed by (namespace, release name, version), with the
    /// resourceVersion it was read at.
    learned: HashMap<(String, String, i32), (String, Deploys)>,
}

/// What one revision deploys, as its data says.
#[derive(Debug, Clone, PartialEq)]
pub struct Deploys {
    /// The namespace its objects are in.
    pub namespace: String,
    /// Not uninstalled: it still owns its objects.
    pub live: bool,
    /// The HelmRelease uid that claims it, if any.
    pub claimed_by: Option<String>,
}

impl Deploys {
    /// Whether this revision, stored elsewhere, could deploy the objects of a release in
    /// `release_namespace` claimed by `own_uid` (the rule of `deploys_same`).
    fn could_be_rival(&self, release_namespace: &str, own_uid: Option<&str>) -> bool {
        self.live
            && self.namespace == release_namespace
            && !(self.claimed_by.is_some() && self.claimed_by.as_deref() == own_uid)
    }
}

impl RecordIndex {
    /// Says whether the watch feeding the index covers every namespace.
    pub fn watching(&self, covers_all: bool) {
        self.lock().covers_all = covers_all;
    }

    /// Says that the watch feeding the index covers `namespace` alone.
    pub fn watching_only(&self, namespace: &str) {
        let mut st = self.lock();
        st.covers_all = false;
        st.only = Some(namespace.to_owned());
    }

    /// Takes in one event of the watch of `owner=helm` Secrets.
    pub fn observe(&self, event: &watcher::Event<PartialObjectMeta<Secret>>) {
        let mut st = self.lock();
        match event {
            watcher::Event::Init => {
                st.synced = false;
                st.relisting = Some(HashMap::new());
            }
            watcher::Event::InitApply(record) => {
                if let (Some(names), Some((ns, name, version, rv))) =
                    (st.relisting.as_mut(), parts(record))
                {
                    insert(names, ns, name, version, rv);
                }
            }
            watcher::Event::InitDone => {
                if let Some(names) = st.relisting.take() {
                    st.names = names;
                }
                st.synced = true;
                let State { names, learned, .. } = &mut *st;
                learned.retain(|(ns, name, version), _| {
                    names
                        .get(name)
                        .is_some_and(|stored| stored.iter().any(|r| r.is(ns, *version)))
                });
            }
            watcher::Event::Apply(record) => {
                if let Some((ns, name, version, rv)) = parts(record) {
                    insert(&mut st.names, ns, name, version, rv);
                }
            }
            watcher::Event::Delete(record) => {
                if let Some((ns, name, version, _)) = parts(record) {
                    st.learned.remove(&(ns.clone(), name.clone(), version));
                    if let Some(stored) = st.names.get_mut(&name) {
                        stored.retain(|r| !r.is(&ns, version));
                        if stored.is_empty() {
                            st.names.remove(&name);
                        }
                    }
                }
            }
        }
    }

    /// Whether the index knows, without a read, that no record of release `name` stored
    /// in a namespace other than `storage_namespace` deploys into `release_namespace`
    /// (skipping those `own_uid` claims). `false` means "cannot tell": the caller lists.
    pub fn nothing_elsewhere(
        &self,
        storage_namespace: &str,
        name: &str,
        release_namespace: &str,
        own_uid: Option<&str>,
    ) -> bool {
        let st = self.lock();
        if !st.covers_all || !st.synced {
            return false;
        }
        let Some(stored) = st.names.get(name) else {
            return true;
        };
        // The newest revision in each other namespace decides, as Helm's history does.
        let mut newest: Vec<&Revision> = Vec::new();
        for r in stored.iter().filter(|r| &*r.namespace != storage_namespace) {
            match newest.iter_mut().find(|n| n.namespace == r.namespace) {
                Some(n) if n.version < r.version => *n = r,
                Some(_) => {}
                None => newest.push(r),
            }
        }
        newest.iter().all(|r| {
            match st
                .learned
                .get(&(r.namespace.to_string(), name.to_owned(), r.version))
            {
                Some((read_at, deploys)) if **read_at == *r.resource_version => {
                    !deploys.could_be_rival(release_namespace, own_uid)
                }
                _ => false,
            }
        })
    }

    /// The records of release `name` stored in `namespace`, as (version, resourceVersion)
    /// by version, when the watch is whole and covers that namespace; `None`: cannot tell.
    pub fn records_in(&self, namespace: &str, name: &str) -> Option<Vec<(i32, String)>> {
        let st = self.lock();
        let covered = st.covers_all || st.only.as_deref() == Some(namespace);
        if !covered || !st.synced {
            return None;
        }
        let mut records: Vec<(i32, String)> = st
            .names
            .get(name)
            .into_iter()
            .flatten()
            .filter(|r| &*r.namespace == namespace)
            .map(|r| (r.version, r.resource_version.to_string()))
            .collect();
        records.sort();
        Some(records)
    }

    /// Remembers what revision `version` of `name` stored in `namespace` deploys, as read
    /// at resourceVersion `rv`.
    pub fn learn(&self, namespace: &str, name: &str, version: i32, rv: &str, deploys: Deploys) {
        self.lock().learned.insert(
            (namespace.to_owned(), name.to_owned(), version),
            (rv.to_owned(), deploys),
        );
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A record's (namespace, release name, version, resourceVersion), by Helm's labels (a
/// record without a parseable version counts as version 0, as the list's reading does).
fn parts(record: &PartialObjectMeta<Secret>) -> Option<(String, String, i32, String)> {
    let meta = &record.metadata;
    let labels = meta.labels.as_ref()?;
    let name = labels.get("name")?.clone();
    let version = super::storage::record_version(meta);
    Some((
        meta.namespace.clone()?,
        name,
        version,
        meta.resource_version.clone().unwrap_or_default(),
    ))
}

fn insert(names: &mut HashMap<String, Stored>, ns: String, name: String, version: i32, rv: String) {
    let stored = names.entry(name).or_default();
    match stored.iter_mut().find(|r| r.is(&ns, version)) {
        Some(r) => r.resource_version = rv.into(),
        None => stored.push(Revision {
            namespace: ns.into(),
            version,
            resource_version: rv.into(),
        }),
    }
}

impl Revision {
    fn is(&self, namespace: &str, version: i32) -> bool {
        self.version == version && &*self.namespace == namespace
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn record(ns: &str, name: &str, version: i32, rv: &str) -> PartialObjectMeta<Secret> {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(super::super::storage::secret_name(name, version)),
                resource_version: Some(rv.into()),
                labels: Some(
                    [
                        ("name".to_string(), name.to_string()),
                        ("owner".to_string(), "helm".to_string()),
                        ("version".to_string(), version.to_string()),
                    ]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            _phantom: Default::default(),
        }
    }

    fn synced(records: &[PartialObjectMeta<Secret>]) -> RecordIndex {
        let index = RecordIndex::default();
        index.watching(true);
        index.observe(&watcher::Event::Init);
        for r in records {
            index.observe(&watcher::Event::InitApply(r.clone()));
        }
        index.observe(&watcher::Event::InitDone);
        index
    }

    #[test]
    fn records_in_one_namespace_follow_the_watch_and_say_when_they_cannot_tell() {
        let index = RecordIndex::default();
        assert_eq!(index.records_in("a", "web"), None, "nothing listed yet");
        let index = synced(&[
            record("a", "web", 2, "12"),
            record("a", "web", 1, "11"),
            record("b", "web", 1, "13"),
        ]);
        let pairs = |v: &[(i32, &str)]| -> Option<Vec<(i32, String)>> {
            Some(v.iter().map(|(n, rv)| (*n, rv.to_string())).collect())
        };
        assert_eq!(index.records_in("a", "web"), pairs(&[(1, "11"), (2, "12")]));
        assert_eq!(index.records_in("c", "web"), pairs(&[]));
        index.observe(&watcher::Event::Apply(record("a", "web", 2, "14")));
        index.observe(&watcher::Event::Delete(record("a", "web", 1, "11")));
        assert_eq!(index.records_in("a", "web"), pairs(&[(2, "14")]));
        // A re-list under way: not whole, so it cannot tell.
        index.observe(&watcher::Event::Init);
        assert_eq!(index.records_in("a", "web"), None);
        // An engine watching one namespace tells of that one only.
        let one = synced(&[record("a", "web", 1, "11")]);
        one.watching_only("a");
        assert_eq!(one.records_in("a", "web"), pairs(&[(1, "11")]));
        assert_eq!(one.records_in("b", "web"), None);
    }

    fn deploys(namespace: &str) -> Deploys {
        Deploys {
            namespace: namespace.into(),
            live: true,
            claimed_by: None,
        }
    }

    #[test]
    fn a_name_stored_nowhere_else_needs_no_read() {
        let index = synced(&[record("a", "web", 1, "10"), record("b", "api", 1, "11")]);
        assert!(index.nothing_elsewhere("a", "web", "a", None));
        assert!(index.nothing_elsewhere("c", "db", "c", None));
    }

    #[test]
    fn nothing_is_answered_before_the_list_is_whole_or_when_some_namespaces_are_unwatched() {
        let index = RecordIndex::default();
        index.watching(true);
        index.observe(&watcher::Event::Init);
        index.observe(&watcher::Event::InitApply(record("a", "web", 1, "10")));
        assert!(!index.nothing_elsewhere("a", "web", "a", None), "mid-list");
        index.observe(&watcher::Event::InitDone);
        assert!(index.nothing_elsewhere("a", "web", "a", None));
        index.watching(false);
        assert!(
            !index.nothing_elsewhere("a", "web", "a", None),
            "one namespace watched"
        );
    }

    #[test]
    fn a_record_elsewhere_counts_until_its_data_was_read_at_its_current_version() {
        let index = synced(&[record("a", "web", 1, "10"), record("b", "web", 2, "20")]);
        assert!(!index.nothing_elsewhere("a", "web", "a", None), "unread");
        index.learn("b", "web", 2, "20", deploys("b"));
        assert!(
            index.nothing_elsewhere("a", "web", "a", None),
            "deploys into b"
        );
        assert!(
            !index.nothing_elsewhere("a", "web", "b", None),
            "a release deploying into b meets it"
        );
        // Rewritten since it was read (relabelled, or its data edited): read again.
        index.observe(&watcher::Event::Apply(record("b", "web", 2, "21")));
        assert!(!index.nothing_elsewhere("a", "web", "a", None));
        // A newer revision there is what counts.
        index.learn("b", "web", 2, "21", deploys("b"));
        index.observe(&watcher::Event::Apply(record("b", "web", 3, "22")));
        assert!(!index.nothing_elsewhere("a", "web", "a", None));
        index.learn("b", "web", 3, "22", deploys("b"));
        assert!(index.nothing_elsewhere("a", "web", "a", None));
    }

    #[test]
    fn uninstalled_and_own_records_are_not_rivals() {
        let index = synced(&[record("old", "web", 4, "30"), record("t", "web", 1, "31")]);
        index.learn(
            "old",
            "web",
            4,
            "30",
            Deploys {
                claimed_by: Some("u1".into()),
                ..deploys("t")
            },
        );
        index.learn(
            "t",
            "web",
            1,
            "31",
            Deploys {
                live: false,
                ..deploys("t")
            },
        );
        assert!(index.nothing_elsewhere("new", "web", "t", Some("u1")));
        assert!(!index.nothing_elsewhere("new", "web", "t", Some("u2")));
    }

    #[test]
    fn deleting_the_last_record_elsewhere_frees_the_name() {
        let index = synced(&[record("a", "web", 1, "10"), record("b", "web", 1, "20")]);
        assert!(!index.nothing_elsewhere("a", "web", "a", None));
        index.observe(&watcher::Event::Delete(record("b", "web", 1, "25")));
        assert!(index.nothing_elsewhere("a", "web", "a", None));
    }

    #[test]
    fn a_relist_replaces_what_was_known() {
        let index = synced(&[record("b", "web", 1, "20")]);
        assert!(!index.nothing_elsewhere("a", "web", "a", None));
        index.observe(&watcher::Event::Init);
        index.observe(&watcher::Event::InitDone);
        assert!(
            index.nothing_elsewhere("a", "web", "a", None),
            "b's record is gone"
        );
    }
}

//! A release is (storage namespace, release name). Helm's ownership metadata on objects
//! names only (release name, release namespace), so two records stored in different
//! namespaces that both deploy release `x` into namespace `t` write objects that look the
//! same. [`stored_elsewhere`] finds the other records that deploy the same (name,
//! namespace), so a release never takes, overwrites or deletes the objects of another.

use std::collections::BTreeMap;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ListParams, WatchEvent, WatchParams};

use super::record_index::{Deploys, RecordIndex};
use super::storage::{OWNER, ReadFloor, Storage};
use super::{Error, Release, Status};

/// Another release record deploying the same (release name, release namespace).
#[derive(Debug, Clone, PartialEq)]
pub struct Elsewhere {
    pub storage_namespace: String,
    pub name: String,
    pub version: i32,
    pub status: Status,
    /// Its newest revision's manifest: the objects it owns.
    pub manifest: String,
    /// The HelmRelease that manages it (`namespace/name`), from its claim labels.
    pub managed_by: Option<String>,
}

impl Elsewhere {
    /// Who it is, for messages: "Helm release t/x (revision 3, deployed; stored in
    /// namespace t by the helm CLI)".
    pub fn describe(&self) -> String {
        let by = match &self.managed_by {
            Some(hr) => format!("managed by HelmRelease {hr}"),
            None => "not managed by a HelmRelease (the helm CLI or another tool)".to_string(),
        };
        format!(
            "Helm release {} stored in namespace {} (revision {}, {}; {by})",
            self.name,
            self.storage_namespace,
            self.version,
            self.status.as_str()
        )
    }
}

/// What [`stored_elsewhere`] found, and where it looked.
#[derive(Debug, Clone, Default)]
pub struct Scan {
    pub found: Vec<Elsewhere>,
    pub looked: Looked,
}

/// The storage records of one release name as one list saw them: where (every namespace,
/// or one) and at which resourceVersion, so that a watch from there sees every later
/// change and none is lost between the look and the watch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Looked {
    name: String,
    namespace: Option<String>,
    resource_version: String,
}

impl Looked {
    /// Yields once for every change to a storage record of this release name after the
    /// look (a revision written, relabelled or deleted), and when changes can no longer be
    /// followed from there (the watch expired): the caller looks again.
    pub fn changes(&self, client: &kube::Client) -> BoxStream<'static, ()> {
        let api: Api<Secret> = match &self.namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let params = WatchParams::default().labels(&record_selector(&self.name));
        let start = (api, params, self.resource_version.clone());
        futures::stream::unfold(start, |(api, params, mut version)| async move {
            loop {
                let mut events = match api.watch_metadata(&params, &version).await {
                    Ok(events) => events.boxed(),
                    // Cannot follow (refused, no answer): look again, but not at once, or a
                    // failing watch would start reconcile after reconcile.
                    Err(_) => {
                        tokio::time::sleep(UNFOLLOWABLE_RETRY).await;
                        return Some(((), (api, params, version)));
                    }
                };
                while let Some(event) = events.next().await {
                    match event {
                        Ok(WatchEvent::Bookmark(b)) => version = b.metadata.resource_version,
                        // Added, modified or deleted; or the watch expired (410 Gone).
                        Ok(_) => return Some(((), (api, params, version))),
                        Err(_) => {
                            tokio::time::sleep(UNFOLLOWABLE_RETRY).await;
                            return Some(((), (api, params, version)));
                        }
                    }
                }
                // The server closed the watch (its timeout) with nothing changed: go on.
            }
        })
        .boxed()
    }
}

/// How long a watch of records that failed waits before its caller looks again.
const UNFOLLOWABLE_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

fn record_selector(name: &str) -> String {
    format!("name={name},owner={OWNER}")
}

/// The records stored in a namespace other than `storage_namespace` whose newest revision
/// deploys release `name` into `release_namespace` and is not uninstalled, skipping those
/// claimed by the HelmRelease with `own_uid` (its own older storage namespace).
///
/// Looks cluster-wide when allowed, else in `release_namespace` (where the helm CLI stores
/// by default); when neither may be listed, it can see nothing and says so with `Ok(None)`.
/// Reads from `floor` (see [`ReadFloor`]). When `index` knows no record elsewhere can be
/// a rival it reads nothing, and it learns what the records it reads deploy.
pub async fn stored_elsewhere(
    client: &kube::Client,
    index: &RecordIndex,
    storage_namespace: &str,
    name: &str,
    release_namespace: &str,
    own_uid: Option<&str>,
    floor: &ReadFloor,
) -> Result<Option<Scan>, Error> {
    if index.nothing_elsewhere(storage_namespace, name, release_namespace, own_uid) {
        return Ok(Some(Scan {
            found: Vec::new(),
            looked: Looked {
                name: name.to_string(),
                namespace: None,
                resource_version: String::new(),
            },
        }));
    }
    let params = floor.list(ListParams::default().labels(&record_selector(name)));
    let all: Api<Secret> = Api::all(client.clone());
    let (listed, namespace) = match all.list_metadata(&params).await {
        Ok(list) => (list, None),
        Err(kube::Error::Api(s)) if s.code == 403 => {
            let there: Api<Secret> = Api::namespaced(client.clone(), release_namespace);
            match there.list_metadata(&params).await {
                Ok(list) => (list, Some(release_namespace.to_string())),
                Err(kube::Error::Api(s)) if s.code == 403 => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    };
    floor.raise(listed.metadata.resource_version.as_deref());
    let looked = Looked {
        name: name.to_string(),
        namespace,
        resource_version: listed.metadata.resource_version.clone().unwrap_or_default(),
    };
    // The newest revision per storage namespace, by the `version` label, with the
    // resourceVersion it was listed at.
    let mut newest: BTreeMap<String, (i32, String)> = BTreeMap::new();
    for meta in listed.items {
        let version = super::storage::record_version(&meta.metadata);
        let Some(ns) = meta.metadata.namespace else {
            continue;
        };
        if ns == storage_namespace {
            continue;
        }
        let rv = meta.metadata.resource_version.unwrap_or_default();
        let entry = newest.entry(ns).or_insert((version, rv.clone()));
        if version > entry.0 {
            *entry = (version, rv);
        }
    }
    let mut found = Vec::new();
    for (ns, (version, rv)) in newest {
        let storage = Storage::new(client.clone(), &ns);
        let release = match storage.get(name, version).await {
            Ok(Some(release)) => release,
            // Gone meanwhile, or not a record Helm could read either.
            Ok(None) | Err(Error::Decode { .. }) => continue,
            Err(e) => return Err(e),
        };
        index.learn(
            &ns,
            name,
            version,
            &rv,
            Deploys {
                namespace: release.namespace.clone(),
                live: release.info.as_ref().map(|i| i.status).unwrap_or_default()
                    != Status::Uninstalled,
                claimed_by: release
                    .labels
                    .get(crate::helm::release::CLAIM_UID_LABEL)
                    .cloned(),
            },
        );
        if let Some(other) = deploys_same(release, &ns, release_namespace, own_uid) {
            found.push(other);
        }
    }
    Ok(Some(Scan { found, looked }))
}

/// `release` (stored in `storage_namespace`) as a rival, if it is live, deploys into
/// `release_namespace` and is not claimed by `own_uid`.
fn deploys_same(
    release: Release,
    storage_namespace: &str,
    release_namespace: &str,
    own_uid: Option<&str>,
) -> Option<Elsewhere> {
    let status = release.info.as_ref().map(|i| i.status).unwrap_or_default();
    if release.namespace != release_namespace || status == Status::Uninstalled {
        return None;
    }
    let claim = |key: &str| release.labels.get(key).cloned();
    let uid = claim(crate::helm::release::CLAIM_UID_LABEL);
    if uid.is_some() && uid.as_deref() == own_uid {
        return None;
    }
    let managed_by = match (
        claim(crate::helm::release::CLAIM_NAMESPACE_LABEL),
        claim(crate::helm::release::CLAIM_NAME_LABEL),
    ) {
        (Some(ns), Some(n)) => Some(format!("{ns}/{n}")),
        _ => uid.map(|u| format!("with uid {u}")),
    };
    Some(Elsewhere {
        storage_namespace: storage_namespace.to_string(),
        name: release.name,
        version: release.version,
        status,
        manifest: release.manifest,
        managed_by,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helm::release::Info;

    fn record(namespace: &str, status: Status, labels: &[(&str, &str)]) -> Release {
        Release {
            name: "x".into(),
            namespace: namespace.into(),
            version: 3,
            manifest: "m".into(),
            info: Some(Info {
                status,
                ..Info::default()
            }),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Release::default()
        }
    }

    #[test]
    fn a_live_record_deploying_into_the_same_namespace_is_a_rival() {
        let rival = deploys_same(record("t", Status::Deployed, &[]), "t", "t", Some("u1"))
            .expect("the helm CLI's release in t");
        assert_eq!(
            rival.describe(),
            "Helm release x stored in namespace t (revision 3, deployed; not managed by a HelmRelease (the helm CLI or another tool))"
        );
        let failed = deploys_same(record("t", Status::Failed, &[]), "t", "t", None);
        assert!(failed.is_some(), "a failed release still owns its objects");
    }

    #[test]
    fn other_namespaces_uninstalled_records_and_our_own_claim_are_not_rivals() {
        assert_eq!(
            deploys_same(record("u", Status::Deployed, &[]), "a", "t", None),
            None
        );
        assert_eq!(
            deploys_same(record("t", Status::Uninstalled, &[]), "t", "t", None),
            None
        );
        let ours = record(
            "t",
            Status::Deployed,
            &[(crate::helm::release::CLAIM_UID_LABEL, "u1")],
        );
        assert_eq!(deploys_same(ours, "old", "t", Some("u1")), None);
    }

    #[test]
    fn a_rival_managed_by_a_helmrelease_names_it() {
        let other = record(
            "t",
            Status::Deployed,
            &[
                (crate::helm::release::CLAIM_UID_LABEL, "u2"),
                (crate::helm::release::CLAIM_NAMESPACE_LABEL, "b"),
                (crate::helm::release::CLAIM_NAME_LABEL, "web"),
            ],
        );
        let rival = deploys_same(other, "b", "t", Some("u1")).unwrap();
        assert_eq!(rival.managed_by.as_deref(), Some("b/web"));
        assert!(rival.describe().contains("managed by HelmRelease b/web"));
    }
}

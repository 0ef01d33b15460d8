//! Every Helm release of the cluster beside wheelhouse's own HelmReleases: Flux
//! `helm.toolkit.fluxcd.io/v2` HelmReleases, and the releases in Helm's storage (the
//! helm CLI's, CI's `helm upgrade --install`) that no HelmRelease manages.
//!
//! Two watches, published together as a [`tokio::sync::watch`] of [`Others`] (persistent
//! maps, so a reader diffs only what changed), at most every [`PUBLISH_EVERY`]:
//! - Flux HelmReleases, typed as [`FluxHelmRelease`] (only the fields wheelhouse reads).
//!   A cluster without Flux's CRD is not an error: the watch retries quietly and the
//!   dashboard shows no Flux rows.
//! - Helm's storage Secrets (`owner=helm`), reduced to the newest record of each release
//!   ([`Stored`]): status, revision, chart, app version, when it was updated. A record is
//!   decoded only when it is the newest of its release; when the newest goes (a failed
//!   `helm rollback` cleaned up, or storage edited by hand) the one before is read again.
//!
//! Which of the stored releases a HelmRelease manages is the reader's to decide (the
//! dashboard knows wheelhouse's HelmReleases from its engine, Flux's from here).

pub mod flux;
pub mod stored;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

pub use self::stored::Stored;
use crate::api::flux::FluxHelmRelease;
use crate::client::Scope;
use crate::engine::ReleaseKey;

/// How often at most a changed inventory is published.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(250);

/// Who manages a Helm release: the kind of object behind a row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A `wheelhouse.dev/v1alpha1` HelmRelease.
    Wheelhouse,
    /// A Flux `helm.toolkit.fluxcd.io/v2` HelmRelease.
    Flux,
    /// A release in Helm's storage that no HelmRelease manages (the helm CLI's).
    Helm,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Wheelhouse, Kind::Flux, Kind::Helm];

    /// The word the KIND column shows and the filter matches.
    pub fn word(self) -> &'static str {
        match self {
            Self::Wheelhouse => "wheelhouse",
            Self::Flux => "flux",
            Self::Helm => "helm",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// What the two watches have seen.
#[derive(Debug, Clone, Default)]
pub struct Others {
    /// Flux HelmReleases by their own namespace and name.
    pub flux: imbl::OrdMap<ReleaseKey, Arc<FluxHelmRelease>>,
    /// The newest stored record of every Helm release, by storage namespace and release
    /// name (whoever manages it).
    pub helm: imbl::OrdMap<ReleaseKey, Arc<Stored>>,
    /// Whether each watch has completed its first list.
    pub flux_listed: bool,
    pub helm_listed: bool,
}

impl Others {
    /// The Helm releases (storage namespace, name) the Flux HelmReleases manage.
    pub fn flux_managed(&self) -> impl Iterator<Item = ReleaseKey> + '_ {
        self.flux
            .values()
            .map(|hr| ReleaseKey::new(hr.storage_namespace(), hr.release_name()))
    }
}

/// The running watches; dropping it stops them.
pub struct Inventory {
    rx: watch::Receiver<Arc<Others>>,
    task: tokio::task::JoinHandle<()>,
}

impl Inventory {
    /// Starts both watches over `scope` (every namespace, or one).
    pub fn start(client: Client, scope: &Scope) -> Self {
        let (tx, rx) = watch::channel(Arc::new(Others::default()));
        let (flux, secrets): (Api<FluxHelmRelease>, Api<Secret>) = match scope {
            Scope::All => (Api::all(client.clone()), Api::all(client.clone())),
            Scope::Namespace(ns) => (
                Api::namespaced(client.clone(), ns),
                Api::namespaced(client.clone(), ns),
            ),
        };
        let task = tokio::spawn(run(client, flux, secrets, tx));
        Self { rx, task }
    }

    /// The inventory, updated live.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Others>> {
        self.rx.clone()
    }
}

impl Drop for Inventory {
    fn drop(&mut self) {
        self.task.abort();
    }
}

enum Seen {
    Flux(Box<Event<FluxHelmRelease>>),
    Secret(Box<Event<Secret>>),
}

async fn run(
    client: Client,
    flux: Api<FluxHelmRelease>,
    secrets: Api<Secret>,
    tx: watch::Sender<Arc<Others>>,
) {
    let flux_events = watcher::watcher(flux, watcher::Config::default().page_size(100))
        .default_backoff()
        .map(|e| e.map(|e| Seen::Flux(Box::new(e))))
        .boxed();
    // Pages of 50: Helm's records carry the whole release (gzipped), and a page's
    // response is held whole while it is read.
    let secret_events = watcher::watcher(
        secrets,
        watcher::Config::default()
            .labels(stored::SELECTOR)
            .page_size(50),
    )
    .default_backoff()
    .map(|e| e.map(|e| Seen::Secret(Box::new(e))))
    .boxed();
    let mut events = futures::stream::select(flux_events, secret_events);
    let mut state = State::default();
    let mut tick = tokio::time::interval(PUBLISH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            next = events.next() => match next {
                Some(Ok(Seen::Flux(event))) => state.flux(*event),
                Some(Ok(Seen::Secret(event))) => {
                    for key in state.secret(*event) {
                        state.reread(&client, key).await;
                    }
                }
                // No Flux CRD, forbidden, or the API server is away: the backoff
                // retries; the table shows what was seen.
                Some(Err(e)) => tracing::debug!(error = %e, "release inventory watch"),
                None => return,
            },
            _ = tick.tick() => {
                if state.dirty {
                    state.dirty = false;
                    tx.send_replace(Arc::new(state.others.clone()));
                }
            }
            () = tx.closed() => return,
        }
    }
}

/// The records of one stored release: the status label of each revision, and the
/// newest one decoded.
#[derive(Default)]
struct Records {
    revisions: std::collections::BTreeMap<i32, String>,
    newest: Option<Arc<Stored>>,
}

#[derive(Default)]
struct State {
    others: Others,
    flux_relisting: Option<HashMap<ReleaseKey, Arc<FluxHelmRelease>>>,
    records: HashMap<ReleaseKey, Records>,
    secrets_relisting: Option<HashMap<ReleaseKey, Records>>,
    dirty: bool,
}

fn key_of<K: kube::Resource>(o: &K) -> ReleaseKey {
    ReleaseKey::new(o.namespace().unwrap_or_default(), o.name_any())
}

impl State {
    fn flux(&mut self, event: Event<FluxHelmRelease>) {
        match event {
            Event::Init => self.flux_relisting = Some(HashMap::new()),
            Event::InitApply(hr) => {
                self.flux_relisting
                    .get_or_insert_default()
                    .insert(key_of(&hr), Arc::new(hr));
            }
            Event::InitDone => {
                let fresh = self.flux_relisting.take().unwrap_or_default();
                self.others.flux = fresh.into_iter().collect();
                self.others.flux_listed = true;
                self.dirty = true;
            }
            Event::Apply(hr) => {
                self.others.flux.insert(key_of(&hr), Arc::new(hr));
                self.dirty = true;
            }
            Event::Delete(hr) => {
                self.others.flux.remove(&key_of(&hr));
                self.dirty = true;
            }
        }
    }

    /// Takes one storage event; returns the releases whose newest record went, to be
    /// read again.
    fn secret(&mut self, event: Event<Secret>) -> Vec<ReleaseKey> {
        match event {
            Event::Init => {
                self.secrets_relisting = Some(HashMap::new());
                Vec::new()
            }
            Event::InitApply(secret) => {
                let relisting = self.secrets_relisting.get_or_insert_default();
                if let Some((key, version, status)) = stored::labels(&secret) {
                    let records = relisting.entry(key).or_default();
                    records.revisions.insert(version, status);
                    if records
                        .newest
                        .as_ref()
                        .is_none_or(|n| n.revision <= version)
                    {
                        records.newest = stored::decode(&secret).map(Arc::new);
                    }
                }
                Vec::new()
            }
            Event::InitDone => {
                self.records = self.secrets_relisting.take().unwrap_or_default();
                self.others.helm = self
                    .records
                    .iter()
                    .filter_map(|(k, r)| Some((k.clone(), r.newest.clone()?)))
                    .collect();
                self.others.helm_listed = true;
                self.dirty = true;
                Vec::new()
            }
            Event::Apply(secret) => {
                let Some((key, version, status)) = stored::labels(&secret) else {
                    return Vec::new();
                };
                let records = self.records.entry(key.clone()).or_default();
                records.revisions.insert(version, status);
                if records
                    .newest
                    .as_ref()
                    .is_none_or(|n| n.revision <= version)
                {
                    records.newest = stored::decode(&secret).map(Arc::new);
                    self.publish(&key);
                }
                Vec::new()
            }
            Event::Delete(secret) => {
                let Some((key, version, _)) = stored::labels(&secret) else {
                    return Vec::new();
                };
                let Some(records) = self.records.get_mut(&key) else {
                    return Vec::new();
                };
                records.revisions.remove(&version);
                if records.revisions.is_empty() {
                    self.records.remove(&key);
                    self.publish(&key);
                    return Vec::new();
                }
                if records
                    .newest
                    .as_ref()
                    .is_some_and(|n| n.revision == version)
                {
                    records.newest = None;
                    return vec![key];
                }
                Vec::new()
            }
        }
    }

    /// Reads the newest record of a release again (its newest one was deleted).
    async fn reread(&mut self, client: &Client, key: ReleaseKey) {
        let Some(version) = self
            .records
            .get(&key)
            .and_then(|r| r.revisions.keys().next_back().copied())
        else {
            return;
        };
        let api: Api<Secret> = Api::namespaced(client.clone(), &key.namespace);
        let name = crate::release::storage::secret_name(&key.name, version);
        let newest = match tokio::time::timeout(Duration::from_secs(10), api.get_opt(&name)).await {
            Ok(Ok(Some(secret))) => stored::decode(&secret).map(Arc::new),
            _ => None,
        };
        if let Some(records) = self.records.get_mut(&key) {
            records.newest = newest;
        }
        self.publish(&key);
    }

    fn publish(&mut self, key: &ReleaseKey) {
        match self.records.get(key).and_then(|r| r.newest.clone()) {
            Some(newest) => self.others.helm.insert(key.clone(), newest),
            None => self.others.helm.remove(key),
        };
        self.dirty = true;
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;
    use crate::release::{Info, Release, Status};

    /// A storage Secret of `name` revision `version` with `status`, as Helm writes it.
    fn record(ns: &str, name: &str, version: i32, status: Status) -> Secret {
        let release = Release {
            name: name.into(),
            namespace: ns.into(),
            version,
            info: Some(Info {
                status,
                description: format!("revision {version}"),
                ..Info::default()
            }),
            ..Release::default()
        };
        let data = crate::release::storage::encode(&release).unwrap();
        let mut secret = Secret::default();
        secret.metadata.name = Some(crate::release::storage::secret_name(name, version));
        secret.metadata.namespace = Some(ns.into());
        secret.metadata.labels = Some(
            [
                ("name", name.to_owned()),
                ("owner", "helm".to_owned()),
                ("status", status.as_str().to_owned()),
                ("version", version.to_string()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        );
        secret.data = Some([("release".to_owned(), ByteString(data.into_bytes()))].into());
        secret
    }

    fn newest(state: &State, name: &str) -> Option<(i32, Status)> {
        state
            .others
            .helm
            .get(&ReleaseKey::new("apps", name))
            .map(|s| (s.revision, s.status))
    }

    #[test]
    fn the_newest_record_of_each_release_is_the_one_shown() {
        let mut state = State::default();
        state.secret(Event::Init);
        for (v, status) in [(2, Status::Deployed), (1, Status::Superseded)] {
            state.secret(Event::InitApply(record("apps", "web", v, status)));
        }
        state.secret(Event::InitDone);
        assert_eq!(newest(&state, "web"), Some((2, Status::Deployed)));
        assert!(state.others.helm_listed && state.dirty);
        // An upgrade: the new record is the newest at once, then deployed.
        state.secret(Event::Apply(record(
            "apps",
            "web",
            3,
            Status::PendingUpgrade,
        )));
        assert_eq!(newest(&state, "web"), Some((3, Status::PendingUpgrade)));
        // An older record changing (superseded) changes nothing shown.
        state.secret(Event::Apply(record("apps", "web", 2, Status::Superseded)));
        assert_eq!(newest(&state, "web"), Some((3, Status::PendingUpgrade)));
        // The newest going asks for the one before to be read again.
        let reread = state.secret(Event::Delete(record("apps", "web", 3, Status::Failed)));
        assert_eq!(reread, [ReleaseKey::new("apps", "web")]);
        // Every record gone (helm uninstall): the release goes.
        for v in [1, 2] {
            state.secret(Event::Delete(record("apps", "web", v, Status::Superseded)));
        }
        assert_eq!(newest(&state, "web"), None);
    }

    #[test]
    fn a_record_that_does_not_decode_hides_only_itself() {
        let mut state = State::default();
        let mut bad = record("apps", "bad", 1, Status::Deployed);
        bad.data = Some([("release".to_owned(), ByteString(b"not base64!".to_vec()))].into());
        state.secret(Event::Apply(bad));
        state.secret(Event::Apply(record("apps", "good", 1, Status::Deployed)));
        assert_eq!(newest(&state, "good"), Some((1, Status::Deployed)));
        assert_eq!(newest(&state, "bad"), None);
        // A Secret without Helm's labels is not a record.
        let mut stray = record("apps", "stray", 1, Status::Deployed);
        stray.metadata.labels = None;
        state.secret(Event::Apply(stray));
        assert_eq!(newest(&state, "stray"), None);
    }

    #[test]
    fn a_record_a_helm_release_claims_is_read_from_its_labels_alone() {
        let mut state = State::default();
        let mut claimed = record("apps", "web", 3, Status::Deployed);
        // Not even valid: it is never decoded.
        claimed.data = Some([("release".to_owned(), ByteString(b"!".to_vec()))].into());
        let labels = claimed.metadata.labels.as_mut().unwrap();
        labels.insert(crate::release::CLAIM_UID_LABEL.into(), "uid-1".into());
        labels.insert(crate::release::CLAIM_NAMESPACE_LABEL.into(), "apps".into());
        labels.insert(crate::release::CLAIM_NAME_LABEL.into(), "web".into());
        state.secret(Event::Apply(claimed));
        assert_eq!(newest(&state, "web"), Some((3, Status::Deployed)));
        let shown = &state.others.helm[&ReleaseKey::new("apps", "web")];
        assert!(
            shown.description.contains("HelmRelease apps/web"),
            "{shown:?}"
        );
    }
}

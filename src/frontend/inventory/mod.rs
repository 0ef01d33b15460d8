//! Every Helm release of the cluster beside wheelhouse's own HelmReleases: Flux
//! `helm.toolkit.fluxcd.io/v2` HelmReleases, and the releases in Helm's storage (the
//! helm CLI's, CI's `helm upgrade --install`) that no HelmRelease manages.
//!
//! Two watches, published together as a [`tokio::sync::watch`] of [`Others`] (persistent
//! maps, so a reader diffs only what changed), at most every [`PUBLISH_EVERY`]:
//! - Flux HelmReleases, typed as [`FluxHelmRelease`] (only the fields wheelhouse reads).
//!   A cluster without Flux's CRD is not an error: the watch retries quietly and the
//!   dashboard shows no Flux rows.
//! - Helm's storage Secrets (`owner=helm`), watched by their labels only (a record holds
//!   the whole release, gzipped; listing thousands of them whole would move hundreds of
//!   MB), reduced to the newest record of each release ([`Stored`]). The labels give its
//!   revision and status at once; the newest record of a release that no wheelhouse
//!   HelmRelease claims is then read on its own ([`FETCHES`] at a time) for its chart,
//!   app version and description, again whenever its newest revision or status changes
//!   (including when the newest goes and the one before is newest again).
//!
//! Which of the stored releases a HelmRelease manages is the reader's to decide (the
//! dashboard knows wheelhouse's HelmReleases from its engine, Flux's from here).

pub mod chart_sources;
pub mod flux;
pub mod stored;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

pub use self::stored::Stored;
use crate::api::flux::FluxHelmRelease;
use crate::cluster::client::Scope;
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
    /// Every stored record (every revision of every release) as its labels and
    /// metadata tell it: the timeline's revisions, without reading a record whole.
    pub revisions: imbl::OrdMap<(ReleaseKey, i32), Arc<Stored>>,
    /// What Flux's OCIRepositories and HelmCharts say of their charts (for Flux
    /// releases on a `chartRef`).
    pub chart_sources: imbl::OrdMap<chart_sources::SourceKey, Arc<chart_sources::SourceChart>>,
    /// Whether each watch has completed its first list.
    pub flux_listed: bool,
    pub helm_listed: bool,
}

/// The running watches; dropping it stops them.
pub struct Inventory {
    rx: watch::Receiver<Arc<Others>>,
    task: tokio::task::JoinHandle<()>,
}

impl Inventory {
    /// Starts both watches over `scope` (every namespace, or one).
    pub fn start(client: Client, scope: &Scope) -> Self {
        Self::start_reading_after(client, scope, None)
    }

    /// As [`Inventory::start`], reading records whole only once `after` is true: the
    /// dashboard lists its releases first. At 5,000 helm CLI releases the reads (5,000
    /// GETs, each record inflated and parsed) began as soon as the records' labels were
    /// listed and held the HelmReleases' list back by one to two seconds on two cores;
    /// until they are read, those rows show what the labels say.
    pub fn start_reading_after(
        client: Client,
        scope: &Scope,
        after: Option<watch::Receiver<bool>>,
    ) -> Self {
        let (tx, rx) = watch::channel(Arc::new(Others::default()));
        let (flux, secrets): (Api<FluxHelmRelease>, Api<PartialObjectMeta<Secret>>) = match scope {
            Scope::All => (Api::all(client.clone()), Api::all(client.clone())),
            Scope::Namespace(ns) => (
                Api::namespaced(client.clone(), ns),
                Api::namespaced(client.clone(), ns),
            ),
        };
        let sources =
            chart_sources::KINDS.map(|kind| (kind, chart_sources::api(&client, scope, kind)));
        let task = tokio::spawn(run(client, flux, secrets, sources, after, tx));
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
    Record(Box<Event<PartialObjectMeta<Secret>>>),
    Source(&'static str, Box<Event<kube::api::DynamicObject>>),
}

/// Records read at once at most (the newest record of releases nobody claims).
const FETCHES: usize = 8;

async fn run(
    client: Client,
    flux: Api<FluxHelmRelease>,
    secrets: Api<PartialObjectMeta<Secret>>,
    sources: [(&'static str, Api<kube::api::DynamicObject>); 2],
    mut reads_after: Option<watch::Receiver<bool>>,
    tx: watch::Sender<Arc<Others>>,
) {
    // Pages of 500, as the API server's own default: at 5,000 Flux releases, pages of
    // 100 made the table wait for fifty round trips.
    let flux_events = watcher::watcher(flux, watcher::Config::default().page_size(500))
        .default_backoff()
        // Only who set `spec.suspend`, and when, is read (the forgotten suspends): the
        // rest is a map of every field each manager set, as big as the spec.
        .modify(keep_suspend_setter)
        .map(|e| e.map(|e| Seen::Flux(Box::new(e))))
        .boxed();
    // Helm's records carry the whole release (gzipped): the watch reads their labels
    // only, and the newest record of a release nobody claims is read on its own.
    let record_events = watcher::watcher(
        secrets,
        watcher::Config::default()
            .labels(stored::SELECTOR)
            .page_size(500),
    )
    .default_backoff()
    .map(|e| e.map(|e| Seen::Record(Box::new(e))))
    .boxed();
    // Flux's chart sources, for what a chartRef release will get: small objects, watched
    // whole; without Flux's CRDs these watches retry quietly, as the HelmRelease one.
    let source_events = futures::stream::select_all(sources.into_iter().map(|(kind, api)| {
        watcher::watcher(api, watcher::Config::default().page_size(500))
            .default_backoff()
            .map(move |e| e.map(|e| Seen::Source(kind, Box::new(e))))
            .boxed()
    }));
    let mut events = futures::stream::select(
        futures::stream::select(flux_events, record_events),
        source_events,
    );
    let mut state = State::default();
    let mut fetches: tokio::task::JoinSet<(ReleaseKey, i32, Option<Stored>)> =
        tokio::task::JoinSet::new();
    let mut queued: std::collections::VecDeque<(ReleaseKey, i32)> = Default::default();
    let mut reading = reads_after.is_none();
    let mut tick = tokio::time::interval(PUBLISH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        while reading
            && fetches.len() < FETCHES
            && let Some((key, version)) = queued.pop_front()
        {
            fetches.spawn(fetch(client.clone(), key, version));
        }
        tokio::select! {
            // Open (or its sender gone): records are read from now on.
            _ = async {
                if let Some(gate) = reads_after.as_mut() {
                    let _ = gate.wait_for(|open| *open).await;
                }
            }, if !reading => reading = true,
            next = events.next() => match next {
                Some(Ok(Seen::Flux(event))) => state.flux(*event),
                Some(Ok(Seen::Record(event))) => queued.extend(state.record(*event)),
                Some(Ok(Seen::Source(kind, event))) => {
                    state.dirty |= state.sources.event(kind, *event, &mut state.others.chart_sources);
                }
                // No Flux CRD, forbidden, or the API server is away: the backoff
                // retries; the table shows what was seen.
                Some(Err(e)) => tracing::debug!(error = %e, "release inventory watch"),
                None => return,
            },
            Some(Ok((key, version, decoded))) = fetches.join_next(), if !fetches.is_empty() => {
                state.fetched(&key, version, decoded);
                if fetches.is_empty() && queued.is_empty() {
                    tracing::debug!("Helm's records read");
                }
            }
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

/// Reads and decodes one record; `None` when it is gone or does not decode.
async fn fetch(client: Client, key: ReleaseKey, version: i32) -> (ReleaseKey, i32, Option<Stored>) {
    let api: Api<Secret> = Api::namespaced(client, &key.namespace);
    let name = crate::helm::release::storage::secret_name(&key.name, version);
    let decoded = match tokio::time::timeout(Duration::from_secs(10), api.get_opt(&name)).await {
        Ok(Ok(Some(secret))) => stored::decode(&secret),
        _ => None,
    };
    (key, version, decoded)
}

/// One stored release by its records' labels: each revision as its labels tell it,
/// whether the newest is claimed by a wheelhouse HelmRelease, and the newest decoded.
#[derive(Default)]
struct Records {
    revisions: std::collections::BTreeMap<i32, (Arc<Stored>, bool)>,
    decoded: Option<Arc<Stored>>,
}

impl Records {
    /// What the release shows: the newest record decoded when it was read at its
    /// current status, else what its labels say.
    fn shown(&self) -> Option<Arc<Stored>> {
        let (newest, _) = self.revisions.values().next_back()?;
        match &self.decoded {
            Some(d) if d.revision == newest.revision && d.status == newest.status => {
                Some(d.clone())
            }
            _ => Some(newest.clone()),
        }
    }

    /// The newest revision, when it must be read (not claimed, not read at its status).
    fn to_read(&self) -> Option<i32> {
        let (newest, claimed) = self.revisions.values().next_back()?;
        let read = self
            .decoded
            .as_ref()
            .is_some_and(|d| d.revision == newest.revision && d.status == newest.status);
        (!claimed && !read).then_some(newest.revision)
    }
}

#[derive(Default)]
struct State {
    others: Others,
    flux_relisting: Option<HashMap<ReleaseKey, Arc<FluxHelmRelease>>>,
    records: HashMap<ReleaseKey, Records>,
    records_relisting: Option<HashMap<ReleaseKey, Records>>,
    sources: chart_sources::Sources,
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
                tracing::debug!(
                    releases = self.others.flux.len(),
                    "Flux HelmReleases listed"
                );
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

    /// Takes one storage event (labels only); returns the records to read: the newest of
    /// each release nobody claims, when it changed.
    fn record(&mut self, event: Event<PartialObjectMeta<Secret>>) -> Vec<(ReleaseKey, i32)> {
        match event {
            Event::Init => {
                self.records_relisting = Some(HashMap::new());
                Vec::new()
            }
            Event::InitApply(meta) => {
                if let Some((key, stored, claimed)) = stored::from_labels(&meta.metadata) {
                    // What was decoded before a relist stays good for the same status.
                    let relisting = self.records_relisting.get_or_insert_default();
                    let records = relisting.entry(key.clone()).or_insert_with(|| Records {
                        decoded: self.records.get(&key).and_then(|r| r.decoded.clone()),
                        ..Records::default()
                    });
                    records
                        .revisions
                        .insert(stored.revision, (Arc::new(stored), claimed));
                }
                Vec::new()
            }
            Event::InitDone => {
                self.records = self.records_relisting.take().unwrap_or_default();
                self.others.revisions = self
                    .records
                    .iter()
                    .flat_map(|(k, r)| {
                        r.revisions
                            .iter()
                            .map(|(v, (stored, _))| ((k.clone(), *v), stored.clone()))
                    })
                    .collect();
                self.others.helm = self
                    .records
                    .iter()
                    .filter_map(|(k, r)| Some((k.clone(), r.shown()?)))
                    .collect();
                self.others.helm_listed = true;
                self.dirty = true;
                let to_read: Vec<_> = self
                    .records
                    .iter()
                    .filter_map(|(k, r)| Some((k.clone(), r.to_read()?)))
                    .collect();
                tracing::debug!(
                    releases = self.records.len(),
                    to_read = to_read.len(),
                    "Helm's records listed"
                );
                to_read
            }
            Event::Apply(meta) => {
                let Some((key, stored, claimed)) = stored::from_labels(&meta.metadata) else {
                    return Vec::new();
                };
                let records = self.records.entry(key.clone()).or_default();
                let stored = Arc::new(stored);
                self.others
                    .revisions
                    .insert((key.clone(), stored.revision), stored.clone());
                records.revisions.insert(stored.revision, (stored, claimed));
                let read = records.to_read();
                self.publish(&key);
                read.map(|v| (key, v)).into_iter().collect()
            }
            Event::Delete(meta) => {
                let Some((key, stored, _)) = stored::from_labels(&meta.metadata) else {
                    return Vec::new();
                };
                self.others
                    .revisions
                    .remove(&(key.clone(), stored.revision));
                let Some(records) = self.records.get_mut(&key) else {
                    return Vec::new();
                };
                records.revisions.remove(&stored.revision);
                if records.revisions.is_empty() {
                    self.records.remove(&key);
                    self.publish(&key);
                    return Vec::new();
                }
                let read = records.to_read();
                self.publish(&key);
                read.map(|v| (key, v)).into_iter().collect()
            }
        }
    }

    /// A record read: shown if it is still the newest of its release.
    fn fetched(&mut self, key: &ReleaseKey, version: i32, decoded: Option<Stored>) {
        let Some(records) = self.records.get_mut(key) else {
            return;
        };
        if let Some(d) = decoded
            && records.revisions.keys().next_back() == Some(&version)
        {
            records.decoded = Some(Arc::new(d));
            self.publish(key);
        }
    }

    fn publish(&mut self, key: &ReleaseKey) {
        match self.records.get(key).and_then(Records::shown) {
            Some(newest) => self.others.helm.insert(key.clone(), newest),
            None => self.others.helm.remove(key),
        };
        self.dirty = true;
    }
}

/// Drops a Flux HelmRelease's managedFields but the entry of the manager that set
/// `spec.suspend` while it is suspended, cut to that field and its time.
fn keep_suspend_setter(hr: &mut FluxHelmRelease) {
    let fields = hr.metadata.managed_fields.take().unwrap_or_default();
    if !hr.spec.suspend {
        return;
    }
    let owner = fields
        .into_iter()
        .find(crate::api::suspend_owner::owns_suspend);
    hr.metadata.managed_fields = owner.map(|mut f| {
        f.fields_v1 = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
            serde_json::json!(
                {"f:spec": {"f:suspend": {}}}
            ),
        ));
        vec![f]
    });
}

#[cfg(test)]
mod tests {
    use k8s_openapi::ByteString;

    use super::*;
    use crate::helm::release::{Info, Release, Status};

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
        let data = crate::helm::release::storage::encode(&release).unwrap();
        let mut secret = Secret::default();
        secret.metadata.name = Some(crate::helm::release::storage::secret_name(name, version));
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

    /// What the metadata watch delivers of a record.
    fn meta(secret: &Secret) -> PartialObjectMeta<Secret> {
        PartialObjectMeta {
            types: None,
            metadata: secret.metadata.clone(),
            _phantom: Default::default(),
        }
    }

    fn shown(state: &State, name: &str) -> Option<(i32, Status, String)> {
        state
            .others
            .helm
            .get(&ReleaseKey::new("apps", name))
            .map(|s| (s.revision, s.status, s.description.clone()))
    }

    /// Delivers what `requests` asks to read, as the fetch tasks would.
    fn read(state: &mut State, requests: Vec<(ReleaseKey, i32)>, records: &[Secret]) {
        for (key, version) in requests {
            let secret = records.iter().find(|s| {
                s.metadata.name.as_deref()
                    == Some(&crate::helm::release::storage::secret_name(
                        &key.name, version,
                    ))
            });
            state.fetched(&key, version, secret.and_then(stored::decode));
        }
    }

    #[test]
    fn labels_show_a_release_at_once_and_its_newest_record_is_read_once() {
        let mut state = State::default();
        let v1 = record("apps", "web", 1, Status::Superseded);
        let v2 = record("apps", "web", 2, Status::Deployed);
        state.record(Event::Init);
        state.record(Event::InitApply(meta(&v2)));
        state.record(Event::InitApply(meta(&v1)));
        let requests = state.record(Event::InitDone);
        // Shown from its labels before anything is read; only the newest is read.
        assert_eq!(
            shown(&state, "web"),
            Some((2, Status::Deployed, String::new()))
        );
        assert_eq!(requests, [(ReleaseKey::new("apps", "web"), 2)]);
        read(&mut state, requests, &[v1.clone(), v2.clone()]);
        assert_eq!(
            shown(&state, "web"),
            Some((2, Status::Deployed, "revision 2".into()))
        );
        // An older record changing asks for nothing.
        assert!(state.record(Event::Apply(meta(&v1))).is_empty());
        // An upgrade: the new record is shown at once, then read.
        let v3 = record("apps", "web", 3, Status::PendingUpgrade);
        let requests = state.record(Event::Apply(meta(&v3)));
        assert_eq!(shown(&state, "web").unwrap().1, Status::PendingUpgrade);
        assert_eq!(requests, [(ReleaseKey::new("apps", "web"), 3)]);
        // The newest going makes the one before newest again: read again only if its
        // status is not the one it was read at (here it is).
        assert!(state.record(Event::Delete(meta(&v3))).is_empty());
        assert_eq!(
            shown(&state, "web"),
            Some((2, Status::Deployed, "revision 2".into()))
        );
        // Every record gone (helm uninstall): the release goes.
        state.record(Event::Delete(meta(&v2)));
        state.record(Event::Delete(meta(&v1)));
        assert_eq!(shown(&state, "web"), None);
    }

    #[test]
    fn every_record_is_kept_by_its_labels_with_who_wrote_it() {
        let mut state = State::default();
        let revisions = |state: &State| -> Vec<(i32, Status, String)> {
            state
                .others
                .revisions
                .values()
                .map(|s| (s.revision, s.status, s.author.clone()))
                .collect()
        };
        let mut v1 = record("apps", "web", 1, Status::Superseded);
        v1.metadata.managed_fields = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
                manager: Some("Helm".into()),
                ..Default::default()
            },
        ]);
        let mut v2 = record("apps", "web", 2, Status::Deployed);
        v2.metadata.labels.as_mut().unwrap().insert(
            crate::helm::release::MADE_BY_LABEL.into(),
            "wheelhouse".into(),
        );
        state.record(Event::Init);
        state.record(Event::InitApply(meta(&v1)));
        state.record(Event::InitApply(meta(&v2)));
        state.record(Event::InitDone);
        assert_eq!(
            revisions(&state),
            [
                (1, Status::Superseded, "helm CLI".to_owned()),
                (2, Status::Deployed, "wheelhouse".to_owned())
            ]
        );
        let v3 = record("apps", "web", 3, Status::PendingUpgrade);
        state.record(Event::Apply(meta(&v3)));
        assert_eq!(revisions(&state).len(), 3);
        state.record(Event::Delete(meta(&v1)));
        assert_eq!(
            revisions(&state).iter().map(|r| r.0).collect::<Vec<_>>(),
            [2, 3]
        );
    }

    #[test]
    fn a_read_that_comes_after_a_newer_record_is_dropped() {
        let mut state = State::default();
        let v1 = record("apps", "web", 1, Status::Deployed);
        let requests = state.record(Event::Apply(meta(&v1)));
        let v2 = record("apps", "web", 2, Status::PendingUpgrade);
        state.record(Event::Apply(meta(&v2)));
        read(&mut state, requests, &[v1]);
        assert_eq!(shown(&state, "web").unwrap().0, 2);
        assert_eq!(shown(&state, "web").unwrap().2, "");
    }

    #[test]
    fn a_record_that_does_not_decode_keeps_what_its_labels_say() {
        let mut state = State::default();
        let mut bad = record("apps", "bad", 1, Status::Deployed);
        bad.data = Some([("release".to_owned(), ByteString(b"not base64!".to_vec()))].into());
        let requests = state.record(Event::Apply(meta(&bad)));
        read(&mut state, requests, &[bad]);
        assert_eq!(
            shown(&state, "bad"),
            Some((1, Status::Deployed, String::new()))
        );
        // A Secret without Helm's labels is not a record.
        let mut stray = record("apps", "stray", 1, Status::Deployed);
        stray.metadata.labels = None;
        assert!(state.record(Event::Apply(meta(&stray))).is_empty());
        assert_eq!(shown(&state, "stray"), None);
    }

    #[test]
    fn a_record_a_helm_release_claims_is_never_read() {
        let mut state = State::default();
        let mut claimed = record("apps", "web", 3, Status::Deployed);
        let labels = claimed.metadata.labels.as_mut().unwrap();
        labels.insert(crate::helm::release::CLAIM_UID_LABEL.into(), "uid-1".into());
        labels.insert(
            crate::helm::release::CLAIM_NAMESPACE_LABEL.into(),
            "apps".into(),
        );
        labels.insert(crate::helm::release::CLAIM_NAME_LABEL.into(), "web".into());
        assert!(state.record(Event::Apply(meta(&claimed))).is_empty());
        let (revision, status, description) = shown(&state, "web").unwrap();
        assert_eq!((revision, status), (3, Status::Deployed));
        assert!(
            description.contains("HelmRelease apps/web"),
            "{description}"
        );
    }
}

//! Whom a release acts as: the engine's identity, or a ServiceAccount of its namespace by
//! impersonation ([`crate::cluster::tenancy`]). Everything a reconcile does *for* the release
//! (render and `lookup`, valuesFrom and source credentials, apply, prune, hooks, tests,
//! storage) goes through its [`Acting`]; what the engine does for itself (watches, Lease,
//! status, Events, health reads) keeps `Context::client`. A release with `spec.kubeConfig`
//! acts on its remote cluster ([`Remote`]): there, the kubeconfig's user is the engine's
//! identity and `serviceAccountName` is impersonated as it would be here.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use kube::Client;

use super::Context;
use crate::api::HelmRelease;
use crate::cluster::tenancy::{Identity, Policy};
use crate::helm::apply::Applier;

/// The clients of one identity. One per identity for the engine's life: each impersonating
/// client shares the engine's connections, and its applier keeps its own discovery.
pub struct Acting {
    pub identity: Identity,
    pub client: Client,
    pub applier: Applier,
    /// The release's remote cluster (`spec.kubeConfig`); none: the engine's own.
    pub remote: Option<Arc<Remote>>,
}

/// A remote cluster as one kubeconfig reaches it.
pub struct Remote {
    pub checked: crate::cluster::remote::Checked,
    /// The cluster as the kubeconfig's user: what the engine reads there for itself
    /// (health, discovery, the identity guard's look at other namespaces).
    pub client: Client,
    /// The checked kubeconfig, for the renderer (`lookup`, capabilities).
    pub kubeconfig: PathBuf,
    /// Never fed: no watch of this cluster's records vouches for anything, so the
    /// identity guard lists them there.
    records: crate::helm::release::RecordIndex,
    /// Watches shared by every wait on this cluster.
    pub watches: crate::health::WatchHub,
    discovery: crate::helm::render::SharedReads<crate::helm::render::Discovery>,
}

impl Drop for Remote {
    /// Its kubeconfig file goes with it (a rotated credential is not left on disk).
    fn drop(&mut self) {
        crate::cluster::remote::remove_file(&self.kubeconfig);
    }
}

impl Acting {
    pub fn new(identity: Identity, engine: &Client) -> Self {
        Self::on(identity, engine, None)
    }

    fn on(identity: Identity, engine: &Client, remote: Option<Arc<Remote>>) -> Self {
        let client = match identity.username() {
            Some(user) => crate::cluster::tenancy::impersonating(engine, &user),
            None => engine.clone(),
        };
        Self {
            identity,
            applier: Applier::new(client.clone()),
            client,
            remote,
        }
    }

    /// The client the engine reads the release's cluster with for itself: its own here,
    /// the kubeconfig's user on a remote cluster.
    pub fn inspector<'a>(&'a self, engine: &'a Client) -> &'a Client {
        self.remote.as_ref().map_or(engine, |r| &r.client)
    }

    /// The username the API server sees for this identity, for messages.
    pub fn username(&self) -> Option<String> {
        self.identity.username()
    }
}

/// The identities met so far, each built once (per cluster).
#[derive(Default)]
pub struct Identities {
    known: Mutex<HashMap<Identity, Arc<Acting>>>,
    /// On remote clusters, by the kubeconfig's digest; replaced when the Secret changes.
    remote: Mutex<HashMap<(Identity, String), Arc<Acting>>>,
    /// Remote clusters by the kubeconfig's digest, and by Secret the digest last read.
    clusters: Mutex<HashMap<String, Arc<Remote>>>,
    by_secret: Mutex<HashMap<String, String>>,
    /// Where the checked kubeconfigs are kept for the renderer (0700, made at first use,
    /// removed with the engine).
    files: std::sync::OnceLock<tempfile::TempDir>,
}

impl Identities {
    /// Removes every kubeconfig written for the renderer, now: for an engine that stops
    /// without its context being dropped (a dashboard leaves what it holds to the exit),
    /// so no credential stays on disk.
    pub(in crate::engine) fn remove_files(&self) {
        if let Some(dir) = self.files.get() {
            let _ = std::fs::remove_dir_all(dir.path());
        }
    }

    fn get(&self, identity: &Identity, engine: &Client) -> Arc<Acting> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known
            .entry(identity.clone())
            .or_insert_with(|| Arc::new(Acting::new(identity.clone(), engine)))
            .clone()
    }

    async fn on_remote(
        &self,
        identity: &Identity,
        checked: crate::cluster::remote::Checked,
        via: Option<crate::cluster::egress::Via>,
    ) -> Result<Arc<Acting>, crate::cluster::remote::Error> {
        let key = (identity.clone(), cluster_key(&checked, via.as_ref()));
        if let Some(acting) = self
            .remote
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(acting.clone());
        }
        let cluster = self.cluster(checked, via).await?;
        let acting = Arc::new(Acting::on(
            identity.clone(),
            &cluster.client,
            Some(cluster.clone()),
        ));
        let mut remote = self.remote.lock().unwrap_or_else(|e| e.into_inner());
        // Clients of a kubeconfig no Secret holds any more go (a rotated credential).
        let live: std::collections::HashSet<String> = self
            .by_secret
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect();
        remote.retain(|(_, digest), _| live.contains(digest));
        self.clusters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|digest, _| live.contains(digest));
        Ok(remote.entry(key).or_insert(acting).clone())
    }

    async fn cluster(
        &self,
        checked: crate::cluster::remote::Checked,
        via: Option<crate::cluster::egress::Via>,
    ) -> Result<Arc<Remote>, crate::cluster::remote::Error> {
        let key = cluster_key(&checked, via.as_ref());
        self.by_secret
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(checked.secret.clone(), key.clone());
        if let Some(found) = self
            .clusters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Ok(found.clone());
        }
        let dir = match self.files.get() {
            Some(dir) => dir,
            None => {
                let made = tempfile::Builder::new()
                    .prefix("wheelhouse-remote-")
                    .tempdir()
                    .map_err(|source| crate::cluster::remote::Error::File {
                        name: checked.secret.clone(),
                        source,
                    })?;
                let _ = self.files.set(made);
                self.files.get().expect("set above")
            }
        };
        let proxy = via.as_ref().map(crate::cluster::egress::Via::proxy_url);
        let kubeconfig = checked.write_to(dir.path(), proxy.as_deref())?;
        let client = checked.client(proxy.as_deref()).await?;
        let remote = Arc::new(Remote {
            checked,
            watches: crate::health::WatchHub::new(client.clone()),
            client,
            kubeconfig,
            records: Default::default(),
            discovery: Default::default(),
        });
        Ok(self
            .clusters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(key)
            .or_insert(remote)
            .clone())
    }
}

/// A remote cluster's clients by kubeconfig and way out: a policy that starts to police
/// releases' sources gets clients of its own.
fn cluster_key(
    checked: &crate::cluster::remote::Checked,
    via: Option<&crate::cluster::egress::Via>,
) -> String {
    match via {
        None => checked.digest.clone(),
        Some(v) => format!("{}/{:?}", checked.digest, v.class),
    }
}

impl Context {
    /// The tenancy policy this engine enforces now.
    pub fn policy(&self) -> Policy {
        self.policy.borrow().clone()
    }

    /// The clients of `identity`.
    pub fn acting(&self, identity: &Identity) -> Arc<Acting> {
        self.identities.get(identity, &self.client)
    }

    /// The clients `hr` acts with under the current policy: on its remote cluster with
    /// `spec.kubeConfig`, whose Secret is read (as the release's identity here) each time.
    pub async fn acting_for(
        &self,
        hr: &HelmRelease,
    ) -> Result<Arc<Acting>, crate::cluster::remote::Error> {
        let policy = self.policy();
        let identity = policy.identity(hr);
        let here = self.acting(&identity);
        let Some(reference) = &hr.spec.kube_config else {
            return Ok(here);
        };
        let namespace = hr.metadata.namespace.as_deref().unwrap_or_default();
        let checked = crate::cluster::remote::read(
            &here.client,
            namespace,
            reference,
            self.settings.kubeconfig_allowances,
        )
        .await?;
        // The remote server is the tenant's choice: reached under the outbound policy.
        let via = policy
            .polices_egress()
            .then(|| self.source.via(policy.egress_class()))
            .flatten();
        self.identities.on_remote(&identity, checked, via).await
    }

    /// The client and record index the identity guard looks at the records of
    /// `acting`'s cluster with.
    pub fn records_of<'a>(
        &'a self,
        acting: &'a Acting,
    ) -> (&'a Client, &'a crate::helm::release::RecordIndex) {
        match &acting.remote {
            None => (&self.client, &self.known.records),
            Some(remote) => (&remote.client, &remote.records),
        }
    }

    /// Discovery of the cluster `acting` deploys to, read now (shared with renders that
    /// ask at once).
    pub async fn discover_for(
        &self,
        acting: &Acting,
    ) -> Result<crate::helm::render::Discovery, crate::helm::render::Error> {
        match &acting.remote {
            None => self.discover().await,
            Some(remote) => {
                remote
                    .discovery
                    .get(|| crate::helm::render::discover(&remote.client))
                    .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that stops without its context being dropped still leaves no remote
    /// kubeconfig on disk.
    #[test]
    fn removing_the_files_leaves_no_kubeconfig_behind() {
        let identities = Identities::default();
        identities.remove_files();
        let dir = tempfile::Builder::new()
            .prefix("wheelhouse-remote-")
            .tempdir()
            .unwrap();
        let path = dir.path().to_owned();
        std::fs::write(path.join("kubeconfig-1"), "token: t").unwrap();
        identities.files.set(dir).unwrap();
        identities.remove_files();
        assert!(!path.exists());
    }
}

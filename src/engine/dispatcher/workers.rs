//! Which releases this engine reconciles, and their workers: started, handed over and
//! told which releases are ours (for the config tracker).

use super::*;

impl Dispatcher {
    /// Whether this engine may act on the release now: it is in our coverage and, for a
    /// cluster-wide engine, no namespace engine holds its namespace (unless we were
    /// there first: then that engine defers).
    pub(super) fn eligible(&self, key: &ReleaseKey, hr: &HelmRelease) -> bool {
        self.coverage
            .covers(&key.namespace, hr.metadata.labels.as_ref())
            && (self.acting.contains(&key.namespace) || !self.held.is_held(&key.namespace))
    }
    /// Who reconciles a release this engine leaves alone.
    pub(super) fn elsewhere(&self, key: &ReleaseKey, hr: &HelmRelease) -> Option<String> {
        if !self
            .coverage
            .covers(&key.namespace, hr.metadata.labels.as_ref())
        {
            return Some(match coverage::shard_of(hr.metadata.labels.as_ref()) {
                Some(shard) => format!("shard {shard}"),
                None => "the unsharded engine".into(),
            });
        }
        if self.acting.contains(&key.namespace) {
            return None;
        }
        self.held
            .holder(&key.namespace)
            .map(|h| format!("namespace engine {h}"))
    }
    /// Passes a changed release to its worker (starting one if needed), or stops the
    /// worker of a release that left our coverage. A worker started with `handover` (the
    /// term was already running) leaves a pending revision alone for a while.
    pub(super) fn dispatch(
        &mut self,
        workers: &mut HashMap<ReleaseKey, Worker>,
        term: Option<&Term>,
        key: &ReleaseKey,
        hr: &Arc<HelmRelease>,
        handover: bool,
        warmup: Option<&Arc<crate::engine::warmup::Warmup>>,
    ) {
        let Some(term) = term else { return };
        if !self.eligible(key, hr) {
            if let Some(w) = workers.remove(key) {
                tracing::info!(release = %key, "left this engine's coverage: its worker stops after its current step");
                w.hand_over(&self.ctx, key);
            }
            return;
        }
        if let Some(w) = workers.get(key)
            && !w.inbox.is_closed()
        {
            let _ = w.inbox.send(Msg::Updated(hr.clone()));
            return;
        }
        self.acting.insert(key.namespace.clone());
        let (tx, rx) = crate::engine::mailbox::mailbox();
        let mut memory = Box::new(Memory::new(rx, hr.clone()));
        // Started while the term runs: another engine (the shard it was relabelled from)
        // or an earlier worker may still be in its step on this release. Workers of a new
        // term need no such wait: the Lease already made the last holder stop first.
        memory.handoff.handover = handover;
        memory.handoff.warmup = warmup.map(crate::engine::warmup::Warmup::enter);
        // An earlier worker of ours on this release may still be in its step.
        memory.handoff.predecessor = self
            .finished
            .get(key)
            .filter(|f| !f.is_cancelled())
            .cloned();
        let stop = term.0.child_token();
        let finished = CancellationToken::new();
        self.finished.insert(key.clone(), finished.clone());
        // Boxed: a task holds its future's largest state for as long as it lives, and
        // every wrapper around it (the mark, the tracker, the block below) would add a
        // copy of it; at 10,000 releases that was half the engine's memory.
        let run = crate::cluster::slots::marking(Box::pin(worker::run(
            self.ctx.clone(),
            key.clone(),
            memory,
            stop.clone(),
        )));
        let ends = finished.clone().drop_guard();
        self.workers.spawn(term.1.track_future(async move {
            let _ends = ends;
            run.await;
        }));
        workers.insert(
            key.clone(),
            Worker {
                inbox: tx,
                stop,
                finished,
            },
        );
    }
    /// Starts workers for every eligible release that has none (a term began, or a
    /// namespace engine let go).
    pub(super) fn start_eligible(
        &mut self,
        store: &Store,
        workers: &mut HashMap<ReleaseKey, Worker>,
        term: Option<&Term>,
        handover: bool,
    ) {
        let Some(t) = term else {
            return;
        };
        // The term's first workers (its releases listed): their first reconciles are
        // the engine catching up, logged once all are done.
        let warmup =
            (!handover && self.listed).then(|| crate::engine::warmup::Warmup::new(t.0.clone()));
        for (key, hr) in &store.releases {
            if !workers.contains_key(key) && !store.bad.contains_key(key) && self.eligible(key, hr)
            {
                self.dispatch(workers, term, key, hr, handover, warmup.as_ref());
            }
        }
    }
    /// Tells the config tracker which releases are ours and which are other engines'.
    pub(super) fn share_ownership(&self, store: &Store, workers: &HashMap<ReleaseKey, Worker>) {
        let release = |hr: &HelmRelease| (hr.target_namespace(), hr.release_name());
        // A release on a remote cluster (spec.kubeConfig) owns nothing of this one: a
        // workload here with its name is another release's.
        let here = |hr: &&HelmRelease| hr.spec.kube_config.is_none();
        let ours = workers
            .keys()
            .filter_map(|k| store.releases.get(k))
            .map(|hr| hr.as_ref())
            .filter(here)
            .map(release)
            .collect();
        let theirs = store
            .releases
            .iter()
            .filter(|(k, _)| !workers.contains_key(k))
            .map(|(_, hr)| hr.as_ref())
            .filter(here)
            .map(release)
            .collect();
        let namespaces = (self.coverage.shard.is_none()).then(|| {
            let held = self.held.held();
            let acting = self.acting.clone();
            let scope = self.coverage.scope.clone();
            Arc::new(move |ns: &str| {
                let in_scope = match &scope {
                    Scope::All => true,
                    Scope::Namespace(n) => n == ns,
                };
                in_scope && (acting.contains(ns) || !held.contains(ns))
            }) as Arc<dyn Fn(&str) -> bool + Send + Sync>
        });
        self.owned.set(ours, theirs, namespaces);
    }
    /// For a cluster-wide engine: the namespace engines' Lease events.
    pub(super) fn namespace_lease_events(
        &self,
    ) -> futures::stream::BoxStream<'static, watcher::Event<Lease>> {
        match self.coverage.subordinate_lease_name() {
            Some(name) => watcher(
                Api::<Lease>::all(self.ctx.client.clone()),
                watcher::Config::default().fields(&format!("metadata.name={name}")),
            )
            .default_backoff()
            .filter_map(|e| async move {
                e.map_err(|e| tracing::warn!(error = %e, "namespace Lease watch error"))
                    .ok()
            })
            .boxed(),
            None => futures::stream::pending().boxed(),
        }
    }
    pub(super) async fn read_namespace_leases(&mut self) -> kube::Result<()> {
        let Some(name) = self.coverage.subordinate_lease_name() else {
            return Ok(());
        };
        let api = Api::<Lease>::all(self.ctx.client.clone());
        let params = kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
        let list = tokio::time::timeout(PROBE_EVERY * 2, api.list(&params))
            .await
            .map_err(|_| kube::Error::Service("listing namespace Leases timed out".into()))??;
        for lease in list {
            self.held
                .observe(watcher::Event::Apply(lease), &self.identity);
        }
        Ok(())
    }
}

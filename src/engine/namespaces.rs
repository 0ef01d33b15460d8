//! For a cluster-wide engine: the namespaces whose namespace engine holds its Lease
//! (those are left to it).

use std::collections::{BTreeMap, HashMap, HashSet};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::runtime::watcher;

use super::lease;

/// What a cluster-wide engine has seen of the namespace engines' Leases, judged like a
/// candidate judges its own: a holder is live until its record has not changed for the
/// lease duration on our clock.
#[derive(Default)]
pub(super) struct HeldNamespaces {
    leases: HashMap<String, (Option<LeaseSpec>, lease::Observation)>,
    live: BTreeMap<String, String>,
}

impl HeldNamespaces {
    pub(super) fn observe(&mut self, event: watcher::Event<Lease>, identity: &str) {
        match event {
            watcher::Event::Apply(l) | watcher::Event::InitApply(l) => {
                let ns = l.metadata.namespace.clone().unwrap_or_default();
                let entry = self.leases.entry(ns).or_default();
                entry.0 = l.spec;
            }
            watcher::Event::Delete(l) => {
                let ns = l.metadata.namespace.clone().unwrap_or_default();
                self.leases.remove(&ns);
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
        }
        self.refresh(identity);
    }

    /// Re-judges every Lease; true when the set of held namespaces changed.
    pub(super) fn refresh(&mut self, identity: &str) -> bool {
        let now = tokio::time::Instant::now();
        let live: BTreeMap<String, String> = self
            .leases
            .iter_mut()
            .filter_map(|(ns, (spec, observed))| {
                match lease::decide(
                    spec.as_ref(),
                    identity,
                    observed,
                    now,
                    std::time::Duration::from_secs(15),
                ) {
                    lease::Step::Follow(holder) => Some((ns.clone(), holder)),
                    _ => None,
                }
            })
            .collect();
        let changed = live != self.live;
        self.live = live;
        changed
    }

    pub(super) fn is_held(&self, namespace: &str) -> bool {
        self.live.contains_key(namespace)
    }

    pub(super) fn holder(&self, namespace: &str) -> Option<&String> {
        self.live.get(namespace)
    }

    pub(super) fn held(&self) -> HashSet<String> {
        self.live.keys().cloned().collect()
    }
}

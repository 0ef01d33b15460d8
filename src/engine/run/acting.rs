//! Whom a release acts as: the engine's identity, or a ServiceAccount of its namespace by
//! impersonation ([`crate::tenancy`]). Everything a reconcile does *for* the release
//! (render and `lookup`, valuesFrom and source credentials, apply, prune, hooks, tests,
//! storage) goes through its [`Acting`]; what the engine does for itself (watches, Lease,
//! status, Events, health reads) keeps `Context::client`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::Client;

use super::Context;
use crate::api::HelmRelease;
use crate::apply::Applier;
use crate::tenancy::{Identity, Policy};

/// The clients of one identity. One per identity for the engine's life: each impersonating
/// client shares the engine's connections, and its applier keeps its own discovery.
pub struct Acting {
    pub identity: Identity,
    pub client: Client,
    pub applier: Applier,
}

impl Acting {
    pub fn new(identity: Identity, engine: &Client) -> Self {
        let client = match identity.username() {
            Some(user) => crate::tenancy::impersonating(engine, &user),
            None => engine.clone(),
        };
        Self {
            identity,
            applier: Applier::new(client.clone()),
            client,
        }
    }

    /// The username the API server sees for this identity, for messages.
    pub fn username(&self) -> Option<String> {
        self.identity.username()
    }
}

/// The identities met so far, each built once.
#[derive(Default)]
pub struct Identities {
    known: Mutex<HashMap<Identity, Arc<Acting>>>,
}

impl Identities {
    fn get(&self, identity: &Identity, engine: &Client) -> Arc<Acting> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        known
            .entry(identity.clone())
            .or_insert_with(|| Arc::new(Acting::new(identity.clone(), engine)))
            .clone()
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

    /// The clients `hr` acts with under the current policy.
    pub fn acting_for(&self, hr: &HelmRelease) -> Arc<Acting> {
        self.acting(&self.policy().identity(hr))
    }
}

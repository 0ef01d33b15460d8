//! The views front ends show, kept up to date one release at a time and published at
//! most once per PUBLISH_EVERY, and the connection they show.

use super::*;

impl Dispatcher {
    /// Tells front ends whether the API server answers (disconnected since the first
    /// failure, connected again once the watch and the probe both succeed).
    pub(super) fn report_connection(&self, failing: bool, error: Option<String>) {
        if !failing && matches!(*self.connection.borrow(), Connection::Disconnected { .. }) {
            // Back: releases the outage held up try again now.
            self.ctx
                .signals
                .healed
                .send_replace(crate::telemetry::RetryCause::ClusterHealed);
        }
        self.connection.send_if_modified(|c| match (failing, &*c) {
            (true, Connection::Connected) => {
                *c = Connection::Disconnected {
                    since: k8s_openapi::jiff::Timestamp::now(),
                    error: error.unwrap_or_default(),
                };
                true
            }
            (false, Connection::Disconnected { .. }) => {
                *c = Connection::Connected;
                true
            }
            _ => false,
        });
    }
    /// The view of one release as front ends should see it now.
    pub(super) fn view_of(&self, store: &Store, key: &ReleaseKey) -> Option<ReleaseView> {
        let hr = store.releases.get(key)?;
        Some(ReleaseView {
            key: key.clone(),
            release: hr.clone(),
            live: self.seen_live.get(key).cloned().unwrap_or_default(),
            problem: store.bad.get(key).map(|(reason, _)| reason.clone()),
            elsewhere: self.elsewhere(key, hr),
        })
    }
    /// Brings one release's view up to date: O(log n), and nothing when it shows the same.
    pub(super) fn refresh_view(&mut self, store: &Store, key: &ReleaseKey) {
        match self.view_of(store, key) {
            Some(view) => {
                if self.shown.get(key) != Some(&view) {
                    self.shown.insert(key.clone(), view);
                }
            }
            None => {
                self.shown.remove(key);
            }
        }
    }
    /// Every view again: for what touches all releases at once (the term starts or
    /// ends, a namespace engine's Lease), which is rare.
    pub(super) fn refresh_all(&mut self, store: &Store) {
        for key in store.releases.keys() {
            self.refresh_view(store, key);
        }
    }
    /// Publishes the current views: a snapshot of the persistent map, O(1).
    pub(super) fn publish(&self) {
        self.views
            .send_replace(Arc::new(Views::new(self.shown.clone(), self.listed)));
    }
}

//! The Timeline's rows, built from what the dashboard already watches (see
//! `crate::frontend::timeline::from_watched`): no list of the cluster's records when it opens, and
//! only the records on screen read whole.

use super::*;
use crate::frontend::timeline::Change;
use crate::frontend::tui::components::timeline::RecordRef;
use crate::frontend::tui::view_model::Cluster;

/// How far back the Timeline reaches.
pub const TIMELINE_WINDOW_SECONDS: i64 = 24 * 3600;

/// How often at most the rows are built again while the records or releases change:
/// a new change is at the top within a second.
const REBUILD_MILLIS: i64 = 500;

/// How often the audit Events (not watched) are listed again while the Timeline is open.
const AUDIT_EVERY_SECONDS: i64 = 5;

impl App {
    /// Builds the open Timeline's rows again when what they come from changed (at most
    /// every [`REBUILD_MILLIS`]), and asks for the records on screen not read yet. Across
    /// a fleet, every cluster's rows, each with its cluster: the records of another
    /// cluster are read with that cluster's own client.
    pub fn refresh_timeline(&mut self) -> Vec<Effect> {
        let now = self.now;
        let Some(view) = self.timeline.as_mut() else {
            return Vec::new();
        };
        // Every snapshot the rows come from: a new one (any cluster's) builds them again.
        let from = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            let snapshots = std::iter::once((None, &self.others, &self.views)).chain(
                self.fleet
                    .members
                    .iter()
                    .map(|(c, m)| (Some(c), &m.data.others, &m.data.views)),
            );
            for (cluster, others, views) in snapshots {
                cluster.hash(&mut h);
                (Arc::as_ptr(others) as usize).hash(&mut h);
                (Arc::as_ptr(views) as usize).hash(&mut h);
            }
            h.finish()
        };
        // The namespaces the table shows: a switch builds the rows again at once.
        let scope = self.scope.clone();
        if view.built_for.as_ref() != Some(&scope) {
            view.built_for = Some(scope.clone());
            view.built_from = None;
            view.audited.clear();
            view.audit_asked = None;
        }
        view.own_cluster =
            (!self.fleet.members.is_empty()).then(|| Cluster::from(self.context.as_str()));
        let listed = self.others.helm_listed || self.views.listed;
        let due = match view.built_from {
            None => listed,
            Some((built, at)) => {
                built != from && now.as_millisecond() - at.as_millisecond() >= REBUILD_MILLIS
            }
        };
        if due {
            let since = Timestamp::from_second(now.as_second() - TIMELINE_WINDOW_SECONDS)
                .unwrap_or(Timestamp::UNIX_EPOCH);
            let read = &view.read;
            let in_view = |ns: &str| match &scope {
                Scope::All => true,
                Scope::Namespace(shown) => shown == ns,
            };
            let of_cluster = |cluster: Option<&Cluster>, others: &Others, views: &Views| {
                let rows = crate::frontend::timeline::from_watched(
                    &others.revisions,
                    views.values().map(|v| &*v.release),
                    since,
                    in_view,
                    |s| {
                        read.get(&RecordRef {
                            cluster: cluster.cloned(),
                            key: s.key.clone(),
                            version: s.revision,
                            status: s.status,
                        })
                        .cloned()
                    },
                );
                let name = cluster.map(|c| c.to_string());
                rows.into_iter().map(move |c| Change {
                    cluster: name.clone(),
                    ..c
                })
            };
            let mut rows: Vec<Change> = of_cluster(None, &self.others, &self.views).collect();
            for (cluster, member) in &self.fleet.members {
                rows.extend(of_cluster(
                    Some(cluster),
                    &member.data.others,
                    &member.data.views,
                ));
            }
            rows.extend(
                view.audited
                    .values()
                    .flatten()
                    .filter(|c| c.at >= since && in_view(&c.namespace))
                    .cloned(),
            );
            crate::frontend::timeline::newest_first(&mut rows);
            view.loaded(rows, now);
            view.built_from = Some((from, now));
            view.unsorted = false;
        }
        view.settle();
        let (own, members) = (&self.others.revisions, &self.fleet.members);
        let wanted = view.to_read(self.page + 4, |cluster, key, version| {
            let revisions = match cluster {
                None => own,
                Some(c) => &members.get(c)?.data.others.revisions,
            };
            revisions.get(&(key.clone(), version)).map(|s| s.status)
        });
        let mut effects = Vec::new();
        if !wanted.is_empty() {
            effects.push(Effect::ReadRevisions(wanted));
        }
        // The audit Events of every cluster, again every few seconds.
        let asked_for = view.audit_asked.map(|at| now.as_second() - at.as_second());
        if asked_for.is_none_or(|s| s >= AUDIT_EVERY_SECONDS) {
            view.audit_asked = Some(now);
            effects.extend(
                std::iter::once(None)
                    .chain(self.fleet.members.keys().cloned().map(Some))
                    .map(|cluster| Effect::LoadAudit {
                        cluster,
                        scope: scope.clone(),
                    }),
            );
        }
        effects
    }
}

//! The Timeline's rows, built from what the dashboard already watches (see
//! `crate::frontend::timeline::from_watched`): no list of the cluster's records when it opens, and
//! only the records on screen read whole.

use super::*;

/// How far back the Timeline reaches.
pub const TIMELINE_WINDOW_SECONDS: i64 = 24 * 3600;

/// How often at most the rows are built again while the records or releases change:
/// a new change is at the top within a second.
const REBUILD_MILLIS: i64 = 500;

impl App {
    /// Builds the open Timeline's rows again when what they come from changed (at most
    /// every [`REBUILD_MILLIS`]), and asks for the records on screen not read yet.
    pub fn refresh_timeline(&mut self) -> Vec<Effect> {
        let now = self.now;
        let Some(view) = self.timeline.as_mut() else {
            return Vec::new();
        };
        let from = (
            Arc::as_ptr(&self.others) as usize,
            Arc::as_ptr(&self.views) as usize,
        );
        // The namespaces the table shows: a switch builds the rows again at once.
        let scope = self.scope.clone();
        if view.built_for.as_ref() != Some(&scope) {
            view.built_for = Some(scope.clone());
            view.built_from = None;
        }
        let listed = self.others.helm_listed || self.views.listed;
        let due = match view.built_from {
            None => listed,
            Some((others, views, at)) => {
                (others, views) != from
                    && now.as_millisecond() - at.as_millisecond() >= REBUILD_MILLIS
            }
        };
        if due {
            let since = Timestamp::from_second(now.as_second() - TIMELINE_WINDOW_SECONDS)
                .unwrap_or(Timestamp::UNIX_EPOCH);
            let read = &view.read;
            let rows = crate::frontend::timeline::from_watched(
                &self.others.revisions,
                self.views.values().map(|v| &*v.release),
                since,
                |ns| match &scope {
                    Scope::All => true,
                    Scope::Namespace(shown) => shown == ns,
                },
                |s| read.get(&(s.key.clone(), s.revision, s.status)).cloned(),
            );
            view.loaded(rows, now);
            view.built_from = Some((from.0, from.1, now));
            view.unsorted = false;
        }
        view.settle();
        let revisions = &self.others.revisions;
        let wanted = view.to_read(self.page + 4, |key, version| {
            revisions.get(&(key.clone(), version)).map(|s| s.status)
        });
        if wanted.is_empty() {
            Vec::new()
        } else {
            vec![Effect::ReadRevisions(wanted)]
        }
    }
}

//! What the dashboard does with the results of its IO: views, writes' outcomes, loaded
//! details, logs, contexts and favourites.

use super::*;

impl App {
    /// Takes an IO result back; returns the IO it leads to.
    pub fn on_io(&mut self, result: IoResult) -> Vec<Effect> {
        let now = self.now;
        match result {
            IoResult::Audited { cluster, changes } => {
                if let (Some(view), Some(changes)) = (&mut self.timeline, changes) {
                    view.audited_in(cluster, changes);
                }
            }
            IoResult::TimelineRevision(record, change) => {
                if let Some(view) = &mut self.timeline {
                    view.record_read(record, change);
                }
            }
            IoResult::Late { id, outcome } => self.status.late(id, outcome, now),
            IoResult::Unknown { id, why, expect } => {
                self.status.unknown(id, why.clone(), expect, now);
                if let Some(ed) = &mut self.editor
                    && ed.saving == Some(id)
                {
                    ed.saving = None;
                    ed.error = Some(format!(
                        "outcome unknown: {why}; your draft is kept and the release is watched"
                    ));
                }
                // It may have landed before the answer was given up on.
                self.status.resolve_unknown(&self.views, &self.others, now);
            }
            IoResult::Done { id, result } => {
                self.status.done(id, &result, now);
                if let Some(ed) = &mut self.editor
                    && ed.saving == Some(id)
                {
                    ed.saving = None;
                    match result {
                        Ok(()) => self.editor = None,
                        Err(e) => ed.error = Some(format!("not applied: {e}")),
                    }
                }
            }
            IoResult::LogLines { stream, lines } => {
                if let Some(logs) = &mut self.logs {
                    logs.append(stream, lines);
                }
            }
            IoResult::Changes { request, result } => {
                if let Some(view) = &mut self.changes {
                    view.loaded(request, result);
                }
            }
            IoResult::User(user) => self.user = user,
            IoResult::LogEnd { stream, failed } => {
                if let Some(logs) = &mut self.logs {
                    logs.end(stream, failed);
                }
            }
            IoResult::Detail { key, data } => {
                if let Some(d) = &mut self.detail
                    && d.key == key
                {
                    d.data = *data;
                }
            }
            IoResult::Switched(result) => {
                self.switching = None;
                match result {
                    Ok((context, scope, coverage)) => {
                        self.context = context;
                        self.scope = scope;
                        self.coverage = coverage;
                        self.detail = None;
                        self.table.marked.clear();
                        self.table.selected = 0;
                        self.role = Role::Unknown;
                        self.set_views(Arc::default());
                        // Another cluster: its own namespaces and favourites.
                        self.cluster_namespaces.clear();
                        let mut effects = self.remember_scope();
                        effects.push(Effect::LoadCompletions);
                        return effects;
                    }
                    Err(e) => {
                        self.note("switching failed".into(), Progress::Failed(e));
                    }
                }
            }
            // Not allowed to list namespaces (or no answer): the releases' namespaces
            // complete alone, without a notice about something the operator never asked.
            IoResult::Namespaces(result) => self.cluster_namespaces = result.unwrap_or_default(),
            IoResult::Contexts(contexts) => self.contexts = contexts,
            IoResult::FavouritesSaved(Ok(())) => {}
            IoResult::FavouritesSaved(Err(e)) => {
                if !std::mem::replace(&mut self.favourites_unsaved, true) {
                    self.note(
                        "namespace favourites not saved (kept for this session)".into(),
                        Progress::Failed(e),
                    );
                }
            }
        }
        Vec::new()
    }
    /// The favourites as read at start, or why they could not be (said on the status
    /// line; the dashboard starts with none).
    pub fn set_favourites(&mut self, loaded: Result<Favourites, String>) {
        match loaded {
            Ok(f) => self.favourites = f,
            Err(e) => {
                self.note(
                    "namespace favourites not read (starting with none)".into(),
                    Progress::Failed(e),
                );
            }
        }
    }
}

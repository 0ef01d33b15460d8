//! The changes view's part of the dashboard: opening it (a revision shown whole, two
//! revisions compared, and the review before a write that changes the desired state: a
//! values edit, a rollback, the resume of a pinned release), its keys, and its answer.
//! A write reviewed here is made only on `y`, once its diff is loaded.

use super::{App, Overlay};
use crate::engine::Command;
use crate::engine::stored_actions::StoredAction;
use crate::frontend::inventory::Kind;
use crate::frontend::tui::components::changes::{ChangesView, Load, OnYes, Question};
use crate::frontend::tui::components::line_input;
use crate::frontend::tui::components::status_line::Progress;
use crate::frontend::tui::diff::{DiffLine, values_diff};
use crate::frontend::tui::effect::{ChangesOf, Effect};
use crate::frontend::tui::keymap::Action;
use crate::frontend::tui::view_model::{Cluster, RowKey};

impl App {
    /// Opens a changes view of `of`, titled `title`, asking `question` when given.
    /// `cluster`: another cluster's release, read with that cluster's own client.
    pub(super) fn open_changes(
        &mut self,
        cluster: Option<Cluster>,
        title: String,
        of: ChangesOf,
        question: Option<Question>,
        lines: Vec<DiffLine>,
        loading: &str,
    ) -> Vec<Effect> {
        let request = self.id();
        let mut view = ChangesView::new(title, request);
        view.lines = lines;
        view.load = Load::Loading(loading.to_owned());
        view.question = question;
        self.changes = Some(view);
        vec![Effect::LoadChanges {
            request,
            of,
            cluster,
        }]
    }

    /// Whether the detail view's release keeps its records on another cluster
    /// (`spec.kubeConfig`), said in the status line: a revision read there would need
    /// that cluster's records and this one's valuesFrom to mask it, so none is read
    /// (read here, a record of the same name would be another release's).
    fn records_elsewhere(&mut self, what: &str) -> bool {
        let Some((target, _)) = self.detail_target() else {
            return false;
        };
        let Some(remote) = target.remote else {
            return false;
        };
        self.note(
            what.into(),
            Progress::Failed(format!(
                "the records of this release are on the cluster of its {remote}: open its revisions there (wheelhouse --context NAME)"
            )),
        );
        true
    }

    /// The stored release (storage namespace, release name) of the detail view's
    /// release, with the revision under the History tab's cursor.
    fn picked(
        &self,
    ) -> Option<(
        crate::engine::ReleaseKey,
        i32,
        Option<crate::helm::values::ValuesSources>,
    )> {
        let d = self.detail.as_ref()?;
        let revision = d.picked_revision()?;
        let (target, _) = self.detail_target()?;
        Some((
            crate::engine::ReleaseKey::new(&target.storage_namespace, &target.release_name),
            revision,
            target.values,
        ))
    }

    /// `enter` in the History tab: the picked revision's values and manifest.
    pub(super) fn show_revision(&mut self) -> Vec<Effect> {
        if self.records_elsewhere("revision") {
            return Vec::new();
        }
        let Some((release, revision, values)) = self.picked() else {
            return Vec::new();
        };
        self.open_changes(
            self.detail.as_ref().and_then(|d| d.key.cluster.clone()),
            format!("{release}: revision {revision} (values and manifest, Secret data masked)"),
            ChangesOf::Revision {
                release,
                revision,
                values,
            },
            None,
            Vec::new(),
            "reading Helm's storage…",
        )
    }

    /// `x` in the History tab: the diff from the marked revision (else the newest) to
    /// the picked one.
    pub(super) fn compare(&mut self) -> Vec<Effect> {
        if self.records_elsewhere("diff") {
            return Vec::new();
        }
        let Some((release, to, values)) = self.picked() else {
            self.note(
                "diff".into(),
                Progress::Failed("open the History tab (h) and pick a revision (j/k)".into()),
            );
            return Vec::new();
        };
        let d = self.detail.as_ref().expect("picked needs a detail view");
        let Some(from) = d.base.or_else(|| d.newest_revision()) else {
            return Vec::new();
        };
        self.open_changes(
            self.detail.as_ref().and_then(|d| d.key.cluster.clone()),
            format!("{release}: revision {from} → {to} (values and manifest, Secret data masked)"),
            ChangesOf::Revisions {
                release,
                from,
                to,
                values,
            },
            None,
            Vec::new(),
            "reading Helm's storage…",
        )
    }

    /// `w`: how the open release's live objects differ from its newest revision, as the
    /// engine's drift check finds them now.
    pub(super) fn show_drift(&mut self) -> Vec<Effect> {
        let Some(id) = self.detail.as_ref().map(|d| d.key.clone()) else {
            self.note(
                "drift".into(),
                Progress::Failed("open a release first (enter)".into()),
            );
            return Vec::new();
        };
        if !Action::Drift.applies_to(id.kind) {
            self.note(
                format!("drift of {id}"),
                Progress::Failed(format!(
                    "not shown for {} releases: only wheelhouse checks them",
                    id.kind.word()
                )),
            );
            return Vec::new();
        }
        let key = id.key.clone();
        self.open_changes(
            id.cluster.clone(),
            format!("{key}: live objects → their revision (drift, Secret data masked)"),
            ChangesOf::Drift { key },
            None,
            Vec::new(),
            "comparing the live objects by server-side dry run…",
        )
    }

    /// `b`: what rolling back to the picked revision changes, and the question. A helm
    /// CLI release is rolled back as `helm rollback`; a wheelhouse one is pinned there.
    pub(super) fn review_rollback(&mut self) -> Vec<Effect> {
        let Some(id) = self.detail.as_ref().map(|d| d.key.clone()) else {
            self.note(
                "roll back".into(),
                Progress::Failed(
                    "open the release (enter), its History tab (h), pick a revision".into(),
                ),
            );
            return Vec::new();
        };
        if !Action::Rollback.applies_to(id.kind) {
            self.note(
                format!("roll back {id}"),
                Progress::Failed(format!(
                    "not an action of {} releases (their owner rolls them back)",
                    id.kind.word()
                )),
            );
            return Vec::new();
        }
        let Some((release, to, values)) = self.picked() else {
            self.note(
                "roll back".into(),
                Progress::Failed("pick the revision in the History tab first (h, then j/k)".into()),
            );
            return Vec::new();
        };
        let d = self.detail.as_ref().expect("picked needs a detail view");
        let from = d.newest_revision().unwrap_or(to);
        let about = d
            .revision_text(to)
            .unwrap_or_else(|| format!("revision {to}"));
        let key = id.key.clone();
        let (effect, question) = match id.kind {
            Kind::Wheelhouse => (
                Effect::Send {
                    id: self.id(),
                    command: Command::Pin {
                        key: key.clone(),
                        revision: to,
                        by: self.user.clone(),
                    },
                },
                format!(
                    "Roll back {id} and pin it to {about}; it stays suspended until resumed (S), \
                     which returns it to the spec?"
                ),
            ),
            _ => (
                Effect::Stored {
                    id: self.id(),
                    key: key.clone(),
                    action: StoredAction::Rollback { to },
                },
                format!("Roll back {id} to {about}?"),
            ),
        };
        self.open_changes(
            id.cluster.clone(),
            format!("Roll back {id}: revision {from} (now) → revision {to}"),
            ChangesOf::Revisions {
                release,
                from,
                to,
                values,
            },
            Some(Question {
                text: question,
                on_yes: OnYes::Effects(vec![super::writes::in_cluster(
                    id.cluster.as_ref(),
                    effect,
                )]),
            }),
            Vec::new(),
            "reading Helm's storage…",
        )
    }

    /// `S` on a pinned wheelhouse release: what returning to the spec changes (rendered by
    /// the engine), and the question.
    pub(super) fn review_resume(&mut self, id: &RowKey, pinned: &crate::api::Pin) -> Vec<Effect> {
        let effect = Effect::Send {
            id: self.id(),
            command: Command::Resume(id.key.clone()),
        };
        let by = if pinned.by.is_empty() {
            "an operator"
        } else {
            &pinned.by
        };
        self.open_changes(
            id.cluster.clone(),
            format!(
                "Resume {id}: revision {} (pinned by {by}) → the spec",
                pinned.recorded_as
            ),
            ChangesOf::Render {
                key: id.key.clone(),
                values: None,
            },
            Some(Question {
                text: format!(
                    "Resume {id}? It leaves revision {} (pinned by {by}) and applies the spec",
                    pinned.revision
                ),
                on_yes: OnYes::Effects(vec![super::writes::in_cluster(
                    id.cluster.as_ref(),
                    effect,
                )]),
            }),
            Vec::new(),
            "rendering the spec with the engine's renderer…",
        )
    }

    /// ctrl-s with valid values: the values diff at once, then the manifest the engine
    /// renders from them, and the question.
    pub(super) fn review_values(
        &mut self,
        key: &crate::engine::ReleaseKey,
        original: &serde_json::Value,
        values: serde_json::Value,
    ) -> Vec<Effect> {
        let mut lines = vec![DiffLine::Section("spec.values".into())];
        let diff = values_diff(original, &values);
        if diff.is_empty() {
            lines.push(DiffLine::Same(
                "(no change: these are the values the edit started from)".into(),
            ));
        }
        lines.extend(diff);
        self.open_changes(
            None,
            format!("Apply values to {key}: the release now → these values"),
            ChangesOf::Render {
                key: key.clone(),
                values: Some(values.clone()),
            },
            Some(Question {
                text: format!("Apply these values to spec.values of {key}?"),
                on_yes: OnYes::ApplyValues(values),
            }),
            lines,
            "rendering the chart with these values (the engine's renderer)…",
        )
    }

    /// The changes view's keys (it is in front of everything but the overlays).
    pub(super) fn on_changes_action(&mut self, action: Action) -> Vec<Effect> {
        let page = self.page;
        let Some(view) = &mut self.changes else {
            return Vec::new();
        };
        if view.on_action(action, page) {
            return Vec::new();
        }
        match action {
            Action::Back => {
                let asked = view.question.is_some();
                self.changes = None;
                if asked {
                    self.note("not confirmed: nothing was changed".into(), Progress::Note);
                }
            }
            Action::Yes => {
                let loaded = view.load == Load::Loaded;
                match view.question.take() {
                    Some(q) if loaded => {
                        self.changes = None;
                        return match q.on_yes {
                            OnYes::Effects(effects) => self.confirmed(effects),
                            OnYes::ApplyValues(values) => self.apply_values(values),
                        };
                    }
                    Some(q) => {
                        view.question = Some(q);
                        let why = match &view.load {
                            Load::Failed(e) => format!("what it changes is not known: {e}"),
                            _ => "wait for the diff of what it changes".to_owned(),
                        };
                        self.note("not yet".into(), Progress::Failed(why));
                    }
                    None => {}
                }
            }
            Action::Filter => {
                self.overlay = Some(Overlay::Filter(line_input("text to find in the diff")));
            }
            Action::Help => self.overlay = Some(Overlay::Help),
            Action::Quit => return vec![Effect::Quit],
            _ => {}
        }
        Vec::new()
    }
}

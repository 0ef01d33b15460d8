//! Writes from the dashboard on the release under the cursor or the marked ones, each in
//! the way its owner expects: wheelhouse HelmReleases through the engine's commands, Flux
//! HelmReleases through Flux's own API (`spec.suspend`, `reconcile.fluxcd.io`
//! annotations), helm CLI releases by the engine's rollback and uninstall. Suspend only
//! suspends and resume only resumes; an action is never run on a kind it does not exist
//! for. A bulk action, a cancel, an uninstall, or one that leaves some releases unchanged
//! asks first, naming exactly what happens to each; a rollback and the resume of a pinned
//! release ask below the diff of what they change (see `changes`).

use super::{App, Overlay};
use crate::engine::Command;
use crate::engine::stored_actions::StoredAction;
use crate::frontend::inventory::Kind;
use crate::frontend::inventory::flux::Request;
use crate::frontend::tui::components::confirm::Confirm;
use crate::frontend::tui::components::status_line::Progress;
use crate::frontend::tui::effect::Effect;
use crate::frontend::tui::keymap::Action;
use crate::frontend::tui::view_model::RowKey;

/// Why a release is left out of an action.
enum Skip {
    /// Already in the state asked for.
    Already,
    /// The action does not exist for its kind.
    NotFor(Kind),
}

impl App {
    pub(super) fn write(&mut self, action: Action) -> Vec<Effect> {
        if self.readonly {
            self.note(
                "read-only (--readonly)".into(),
                Progress::Failed("writes are disabled".into()),
            );
            return Vec::new();
        }
        let targets = self.targets();
        if targets.is_empty() {
            return Vec::new();
        }
        // Resuming a pinned release returns it to its spec: what that changes first.
        if action == Action::Resume
            && let [id] = targets.as_slice()
            && id.kind == Kind::Wheelhouse
            && let Some(pin) = self
                .views
                .get(&id.key)
                .filter(|v| v.release.spec.suspend)
                .and_then(|v| v.release.status.as_ref()?.pinned.clone())
        {
            let id = id.clone();
            return self.review_resume(&id, &pin);
        }
        let bulk = targets.len() > 1;
        let mut effects = Vec::new();
        let mut skipped: Vec<(RowKey, Skip)> = Vec::new();
        for id in targets {
            if !action.applies_to(id.kind) {
                let kind = id.kind;
                skipped.push((id, Skip::NotFor(kind)));
                continue;
            }
            match self.effect_for(action, &id) {
                Some(effect) => effects.push(effect),
                None => skipped.push((id, Skip::Already)),
            }
        }
        let verb = verb(action);
        if effects.is_empty() {
            self.note(
                format!("nothing to {verb}: {}", skipped_text(action, &skipped)),
                Progress::Note,
            );
            if bulk {
                self.table.marked.clear();
            }
            return Vec::new();
        }
        let asks = matches!(action, Action::CancelWait | Action::Uninstall);
        if !(asks || bulk || !skipped.is_empty()) {
            for e in &effects {
                if let Some(id) = effect_id(e) {
                    self.status
                        .note(id, describe_effect(e), Progress::Pending, self.now);
                }
            }
            return effects;
        }
        // Say exactly what happens to each release; pending only once confirmed.
        let changed: Vec<String> = effects.iter().map(target_of).collect();
        let mut question = format!("{} {}", capitalize(verb), list_of(&changed));
        if let Some(why) = self.consequence(action, &effects) {
            question.push_str(&format!(" ({why})"));
        }
        if let Some(clusters) = self.per_cluster(&effects) {
            question.push_str(&format!(" [{clusters}]"));
        }
        if !skipped.is_empty() {
            question.push_str(&format!("; {}", skipped_text(action, &skipped)));
        }
        self.overlay = Some(Overlay::Confirm(Confirm {
            question: format!("{question}? (y/n)"),
            effects,
        }));
        if bulk {
            self.table.marked.clear();
        }
        Vec::new()
    }

    /// The write `action` makes on `id` (whose kind it exists for), with a fresh id;
    /// `None` when the release is already as asked.
    fn effect_for(&mut self, action: Action, id: &RowKey) -> Option<Effect> {
        let suspended = self
            .table
            .rows
            .iter()
            .find(|r| r.id == *id)
            .map(|r| r.suspended)
            .or_else(|| {
                let (views, others, _) = self.data_of(id.cluster.as_ref())?;
                match id.kind {
                    Kind::Wheelhouse => views.get(&id.key).map(|v| v.release.spec.suspend),
                    Kind::Flux => others.flux.get(&id.key).map(|hr| hr.spec.suspend),
                    Kind::Helm => None,
                }
            })
            .unwrap_or(false);
        if (action == Action::Suspend && suspended) || (action == Action::Resume && !suspended) {
            return None;
        }
        let key = id.key.clone();
        let effect = match id.kind {
            Kind::Wheelhouse => {
                let command = match action {
                    Action::Suspend => Command::Suspend(key),
                    Action::Resume => Command::Resume(key),
                    Action::Reconcile => Command::Reconcile(key),
                    _ => Command::CancelWait(key),
                };
                Effect::Send {
                    id: self.id(),
                    command,
                }
            }
            Kind::Flux => {
                let request = match action {
                    Action::Suspend => Request::Suspend,
                    Action::Resume => Request::Resume,
                    Action::Force => Request::Force,
                    Action::Reset => Request::Reset,
                    // Flux has no cancel of its own: a new reconcile request is what
                    // cancels its health check (with the gate; the question says so).
                    _ => Request::Reconcile,
                };
                Effect::Flux {
                    id: self.id(),
                    key,
                    request,
                }
            }
            // Rollback is reviewed in the changes view (see `changes`).
            Kind::Helm => Effect::Stored {
                id: self.id(),
                key,
                action: StoredAction::Uninstall,
            },
        };
        Some(in_cluster(id.cluster.as_ref(), effect))
    }

    /// What the question adds about the consequence of an action, where it is not plain.
    fn consequence(&self, action: Action, effects: &[Effect]) -> Option<String> {
        let flux = effects.iter().any(|e| match e {
            Effect::In { effect, .. } => matches!(**effect, Effect::Flux { .. }),
            e => matches!(e, Effect::Flux { .. }),
        });
        match action {
            Action::CancelWait if flux => Some(
                "Flux: by a reconcile request, which cancels a running health check only when \
                 helm-controller runs with the CancelHealthCheckOnNewRevision feature gate; \
                 without it the check runs to its timeout"
                    .into(),
            ),
            Action::Uninstall => Some(
                "as helm uninstall: pre/post-delete hooks run, its objects and its history are \
                 deleted"
                    .into(),
            ),
            _ => None,
        }
    }

    /// The confirmed writes of a question: pending now (they were held back while it was
    /// open), a bulk action reported as a whole.
    pub(super) fn confirmed(&mut self, effects: Vec<Effect>) -> Vec<Effect> {
        let group = (effects.len() > 1).then(|| {
            let verb = effects
                .first()
                .map(|e| {
                    describe_effect(e)
                        .split(' ')
                        .next()
                        .unwrap_or("write")
                        .to_owned()
                })
                .unwrap_or_else(|| "write".into());
            let mut label = format!("{verb} {}", effects.len());
            if let Some(clusters) = self.per_cluster(&effects) {
                label.push_str(&format!(" ({clusters})"));
            }
            (self.id(), label)
        });
        let fleet = self.per_cluster(&effects).is_some();
        for e in &effects {
            if let Some(id) = effect_id(e) {
                self.status
                    .start(id, describe_effect(e), group.clone(), self.now);
                if fleet {
                    let cluster = match e {
                        Effect::In { cluster, .. } => cluster.to_string(),
                        _ => self.context.clone(),
                    };
                    self.status.in_cluster(id, &cluster);
                }
            }
        }
        effects
    }

    /// How many of `effects` go to each cluster (`prod-eu 2, prod-us 1`), when they go to
    /// more than one.
    fn per_cluster(&self, effects: &[Effect]) -> Option<String> {
        let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
        for e in effects {
            let cluster = match e {
                Effect::In { cluster, .. } => cluster,
                _ => self.context.as_str(),
            };
            *counts.entry(cluster).or_default() += 1;
        }
        (counts.len() > 1).then(|| {
            counts
                .iter()
                .map(|(c, n)| format!("{c} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
    }

    /// The releases an action applies to: the marked ones, else the one under the cursor.
    fn targets(&self) -> Vec<RowKey> {
        if self.detail.is_none() && !self.table.marked.is_empty() {
            self.table.marked.iter().cloned().collect()
        } else {
            self.selected_key().cloned().into_iter().collect()
        }
    }
}

fn verb(action: Action) -> &'static str {
    match action {
        Action::Suspend => "suspend",
        Action::Resume => "resume",
        Action::Reconcile => "reconcile",
        Action::Force => "force an upgrade of",
        Action::Reset => "reset the failure counters of",
        Action::Rollback => "roll back",
        Action::Uninstall => "uninstall",
        _ => "cancel the running wait of",
    }
}

pub fn effect_id(e: &Effect) -> Option<u64> {
    match e {
        Effect::In { effect, .. } => effect_id(effect),
        Effect::Send { id, .. }
        | Effect::Flux { id, .. }
        | Effect::Stored { id, .. }
        | Effect::Freeze { id, .. }
        | Effect::Thaw { id, .. } => Some(*id),
        _ => None,
    }
}

/// The release a write goes to, as a question names it.
fn target_of(e: &Effect) -> String {
    match e {
        Effect::In { cluster, effect } => format!("{} in {cluster}", target_of(effect)),
        Effect::Send { command, .. } => command.key().to_string(),
        Effect::Flux { key, .. } => RowKey::new(Kind::Flux, key.clone()).to_string(),
        Effect::Stored {
            key,
            action: StoredAction::Rollback { to },
            ..
        } => format!("{} to revision {to}", RowKey::new(Kind::Helm, key.clone())),
        Effect::Stored { key, .. } => RowKey::new(Kind::Helm, key.clone()).to_string(),
        _ => String::new(),
    }
}

fn skipped_text(action: Action, skipped: &[(RowKey, Skip)]) -> String {
    let already: Vec<String> = skipped
        .iter()
        .filter(|(_, s)| matches!(s, Skip::Already))
        .map(|(k, _)| k.to_string())
        .collect();
    let mut parts = Vec::new();
    if !already.is_empty() {
        let already_so = if action == Action::Resume {
            "not suspended"
        } else {
            "already suspended"
        };
        parts.push(format!("{} {already_so}: unchanged", list_of(&already)));
    }
    for kind in Kind::ALL {
        let of_kind: Vec<String> = skipped
            .iter()
            .filter(|(_, s)| matches!(s, Skip::NotFor(k) if *k == kind))
            .map(|(k, _)| k.to_string())
            .collect();
        if !of_kind.is_empty() {
            parts.push(format!(
                "{} left out: not an action of {} releases",
                list_of(&of_kind),
                kind.word()
            ));
        }
    }
    parts.join("; ")
}

/// Releases for a sentence: all of them when few, else the first ones and a count.
fn list_of(keys: &[String]) -> String {
    const SHOWN: usize = 3;
    let names: Vec<&str> = keys.iter().take(SHOWN).map(String::as_str).collect();
    let mut text = match keys.len() {
        1 => names[0].to_owned(),
        n => format!("{n} ({}", names.join(", ")),
    };
    if keys.len() > SHOWN {
        text.push_str(&format!(", +{} more)", keys.len() - SHOWN));
    } else if keys.len() > 1 {
        text.push(')');
    }
    text
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}

fn describe(command: &Command) -> String {
    match command {
        Command::Suspend(k) => format!("suspend {k}"),
        Command::Resume(k) => format!("resume {k}"),
        Command::Reconcile(k) => format!("reconcile {k}"),
        Command::CancelWait(k) => format!("cancel wait of {k}"),
        Command::Pin { key, revision, .. } => {
            format!("roll back {key} to revision {revision} and pin it")
        }
    }
}

/// The audit record of a write the dashboard asks for (`io::audit`), `None` for what is
/// not a write or is audited by the engine (a freeze, a thaw).
pub fn audit_of(e: &Effect) -> Option<crate::frontend::tui::io::Audit> {
    use crate::frontend::tui::io::Audit;
    let (kind, key, action) = match e {
        Effect::Send { command, .. } => {
            let action = match command {
                Command::Suspend(_) => "suspend",
                Command::Resume(_) => "resume",
                Command::Reconcile(_) => "reconcile",
                Command::CancelWait(_) => "cancel",
                Command::Pin { .. } => "pin",
            };
            (Kind::Wheelhouse, command.key().clone(), action.to_owned())
        }
        Effect::Flux { key, request, .. } => (Kind::Flux, key.clone(), request.verb().to_owned()),
        Effect::Stored { key, action, .. } => {
            let verb = match action {
                StoredAction::Rollback { .. } => "rollback",
                StoredAction::Uninstall => "uninstall",
            };
            (Kind::Helm, key.clone(), verb.to_owned())
        }
        Effect::PatchValues { key, .. } => (Kind::Wheelhouse, key.clone(), "values".to_owned()),
        _ => return None,
    };
    let what = match e {
        Effect::PatchValues { key, .. } => format!("edit spec.values of {key}"),
        _ => describe_effect(e),
    };
    Some(Audit {
        kind,
        key,
        what,
        action,
    })
}

/// What the status line calls a write.
pub fn describe_effect(e: &Effect) -> String {
    match e {
        Effect::In { cluster, effect } => format!("{} in {cluster}", describe_effect(effect)),
        Effect::Send { command, .. } => describe(command),
        Effect::Flux { key, request, .. } => {
            format!(
                "{} {}",
                request.verb(),
                RowKey::new(Kind::Flux, key.clone())
            )
        }
        Effect::Stored { key, action, .. } => action.describe(key),
        Effect::Freeze { names, .. } => format!("freeze {} release(s)", names.len()),
        Effect::Thaw { names, .. } => format!("thaw {} release(s)", names.len()),
        _ => String::new(),
    }
}

/// A write to `cluster`'s release: carried by that cluster's own client (`None`: the
/// dashboard's own cluster).
pub(super) fn in_cluster(
    cluster: Option<&crate::frontend::tui::view_model::Cluster>,
    effect: Effect,
) -> Effect {
    match cluster {
        Some(cluster) => Effect::In {
            cluster: cluster.clone(),
            effect: Box::new(effect),
        },
        None => effect,
    }
}

//! Writes from the dashboard: suspend, resume, reconcile and cancel-wait on the release
//! under the cursor or the marked ones. Suspend only suspends and resume only resumes;
//! a bulk action, a cancel, or one that leaves some releases unchanged asks first, naming
//! exactly what happens to each.

use super::{App, Overlay};
use crate::engine::{Command, ReleaseKey};
use crate::tui::components::confirm::Confirm;
use crate::tui::components::status::Progress;
use crate::tui::effect::Effect;
use crate::tui::keymap::Action;

impl App {
    pub(super) fn write(&mut self, action: Action) -> Vec<Effect> {
        if self.readonly {
            self.note(
                "read-only (--readonly)".into(),
                Progress::Failed("suspend, reconcile and cancel are disabled".into()),
            );
            return Vec::new();
        }
        let targets = self.targets();
        if targets.is_empty() {
            return Vec::new();
        }
        let bulk = targets.len() > 1;
        // Suspend only suspends and resume only resumes: a release already in that state
        // is left unchanged, never toggled.
        let suspended = |k: &ReleaseKey| self.views.get(k).is_some_and(|v| v.release.spec.suspend);
        let (commands, unchanged): (Vec<Command>, Vec<ReleaseKey>) = match action {
            Action::Suspend | Action::Resume => {
                let want = action == Action::Suspend;
                let (same, change): (Vec<ReleaseKey>, Vec<ReleaseKey>) =
                    targets.iter().cloned().partition(|k| suspended(k) == want);
                let commands = change
                    .into_iter()
                    .map(|k| {
                        if want {
                            Command::Suspend(k)
                        } else {
                            Command::Resume(k)
                        }
                    })
                    .collect();
                (commands, same)
            }
            Action::Reconcile => (
                targets.iter().cloned().map(Command::Reconcile).collect(),
                Vec::new(),
            ),
            _ => (
                targets.iter().cloned().map(Command::CancelWait).collect(),
                Vec::new(),
            ),
        };
        let verb = match action {
            Action::Suspend => "suspend",
            Action::Resume => "resume",
            Action::Reconcile => "reconcile",
            _ => "cancel the running wait of",
        };
        let already = if action == Action::Suspend {
            "already suspended"
        } else {
            "not suspended"
        };
        if commands.is_empty() {
            self.note(
                format!("nothing to {verb}: {} {already}", list_of(&unchanged)),
                Progress::Note,
            );
            if bulk {
                self.table.marked.clear();
            }
            return Vec::new();
        }
        let ask = action == Action::CancelWait || bulk || !unchanged.is_empty();
        if !ask {
            return commands
                .into_iter()
                .map(|command| {
                    let id = self.note(describe(&command), Progress::Pending);
                    Effect::Send { id, command }
                })
                .collect();
        }
        // Say exactly what happens to each release; pending only once confirmed.
        let changed: Vec<ReleaseKey> = commands.iter().map(|c| c.key().clone()).collect();
        let mut question = format!("{} {}", capitalize(verb), list_of(&changed));
        if !unchanged.is_empty() {
            question.push_str(&format!("; {} {already}: unchanged", list_of(&unchanged)));
        }
        let effects = commands
            .into_iter()
            .map(|command| Effect::Send {
                id: self.id(),
                command,
            })
            .collect();
        self.overlay = Some(Overlay::Confirm(Confirm {
            question: format!("{question}? (y/n)"),
            effects,
        }));
        if bulk {
            self.table.marked.clear();
        }
        Vec::new()
    }

    /// The confirmed writes of a question: pending now (they were held back while it was
    /// open), a bulk action reported as a whole.
    pub(super) fn confirmed(&mut self, effects: Vec<Effect>) -> Vec<Effect> {
        let group = (effects.len() > 1).then(|| {
            let verb = effects
                .iter()
                .find_map(|e| match e {
                    Effect::Send { command, .. } => Some(verb_of(command)),
                    _ => None,
                })
                .unwrap_or("write");
            (self.id(), format!("{verb} {}", effects.len()))
        });
        for e in &effects {
            if let Effect::Send { id, command } = e {
                self.status
                    .start(*id, describe(command), group.clone(), self.now);
            }
        }
        effects
    }

    /// The releases an action applies to: the marked ones, else the one under the cursor.
    fn targets(&self) -> Vec<ReleaseKey> {
        if self.detail.is_none() && !self.table.marked.is_empty() {
            self.table.marked.iter().cloned().collect()
        } else {
            self.selected_key().cloned().into_iter().collect()
        }
    }
}

fn verb_of(command: &Command) -> &'static str {
    match command {
        Command::Suspend(_) => "suspend",
        Command::Resume(_) => "resume",
        Command::Reconcile(_) => "reconcile",
        Command::CancelWait(_) => "cancel wait",
    }
}

/// Releases for a sentence: all of them when few, else the first ones and a count.
fn list_of(keys: &[ReleaseKey]) -> String {
    const SHOWN: usize = 3;
    let names: Vec<String> = keys.iter().take(SHOWN).map(ToString::to_string).collect();
    let mut text = match keys.len() {
        1 => names[0].clone(),
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

pub fn describe(command: &Command) -> String {
    match command {
        Command::Suspend(k) => format!("suspend {k}"),
        Command::Resume(k) => format!("resume {k}"),
        Command::Reconcile(k) => format!("reconcile {k}"),
        Command::CancelWait(k) => format!("cancel wait of {k}"),
    }
}

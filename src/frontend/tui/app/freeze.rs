//! `:freeze DURATION REASON` and `:thaw`: the incident freeze from the dashboard, over the
//! marked rows (or every row in view), said release by release before it asks, and done
//! by the engine's freeze writes (`engine/freeze.rs`) as `wheelhouse freeze` does them.

use std::collections::BTreeSet;

use super::App;
use crate::engine::ReleaseKey;
use crate::frontend::inventory::Kind;
use crate::frontend::tui::components::confirm::Confirm;
use crate::frontend::tui::components::status_line::Progress;
use crate::frontend::tui::effect::Effect;
use crate::frontend::tui::view_model::RowKey;

use super::Overlay;

impl App {
    /// The rows a freeze or thaw is about: the marked ones, else every row in view.
    fn freeze_targets(&self) -> Vec<RowKey> {
        if self.table.marked.is_empty() {
            self.table.rows.iter().map(|r| r.id.clone()).collect()
        } else {
            self.table.marked.iter().cloned().collect()
        }
    }

    fn is_suspended(&self, id: &RowKey) -> bool {
        match id.kind {
            Kind::Wheelhouse => self
                .views
                .get(&id.key)
                .is_some_and(|v| v.release.spec.suspend),
            Kind::Flux => self
                .others
                .flux
                .get(&id.key)
                .is_some_and(|hr| hr.spec.suspend),
            Kind::Helm => false,
        }
    }

    /// `:freeze DURATION REASON`: asks first, saying what it does to each release.
    pub(super) fn freeze_command(&mut self, duration: &str, reason: &str) -> Vec<Effect> {
        if self.readonly {
            self.note(
                "freeze".into(),
                Progress::Failed("read-only: no writes".into()),
            );
            return Vec::new();
        }
        let duration: crate::api::Duration = match duration.parse() {
            Ok(d) => d,
            Err(e) => {
                self.note(
                    format!("freeze {duration}"),
                    Progress::Failed(format!("{e}; e.g. freeze 2h INC-57 bad rollout")),
                );
                return Vec::new();
            }
        };
        let targets = self.freeze_targets();
        let (mut suspend, mut kept, mut helm) = (Vec::new(), Vec::new(), Vec::new());
        for id in &targets {
            match id.kind {
                Kind::Helm => helm.push(id.to_string()),
                _ if self.is_suspended(id) => kept.push(id.to_string()),
                _ => suspend.push(id.to_string()),
            }
        }
        let names: BTreeSet<ReleaseKey> = targets
            .iter()
            .filter(|id| id.kind != Kind::Helm)
            .map(|id| id.key.clone())
            .collect();
        if names.is_empty() {
            self.note("nothing to freeze".into(), Progress::Note);
            return Vec::new();
        }
        let until = self
            .now
            .checked_add(duration.as_std())
            .map(|u| u.strftime("%H:%M UTC").to_string())
            .unwrap_or_else(|_| "-".into());
        let mut question = format!("Freeze for {duration} (until {until}), reason {reason:?}:");
        if !suspend.is_empty() {
            question.push_str(&format!(" suspend {}", suspend.join(", ")));
        }
        if !kept.is_empty() {
            question.push_str(&format!(
                "; record, and leave suspended after the thaw (suspended already): {}",
                kept.join(", ")
            ));
        }
        if !helm.is_empty() {
            question.push_str(&format!(
                "; not automated (helm CLI), left alone: {}",
                helm.join(", ")
            ));
        }
        let effect = Effect::Freeze {
            id: self.id(),
            names: names.into_iter().collect(),
            duration: duration.as_std(),
            reason: reason.to_owned(),
        };
        self.overlay = Some(Overlay::Confirm(Confirm {
            question: format!("{question}? (y/n)"),
            effects: vec![effect],
        }));
        self.table.marked.clear();
        Vec::new()
    }

    /// `:thaw`: the frozen releases among the targets, resumed where the freeze suspended
    /// them (the engine's rule), after asking.
    pub(super) fn thaw_command(&mut self) -> Vec<Effect> {
        if self.readonly {
            self.note(
                "thaw".into(),
                Progress::Failed("read-only: no writes".into()),
            );
            return Vec::new();
        }
        let frozen: Vec<RowKey> = self
            .freeze_targets()
            .into_iter()
            .filter(|id| self.frozen.contains_key(id))
            .collect();
        if frozen.is_empty() {
            self.note(
                "nothing to thaw: no frozen release in view".into(),
                Progress::Note,
            );
            return Vec::new();
        }
        let listed: Vec<String> = frozen.iter().map(ToString::to_string).collect();
        let names: BTreeSet<ReleaseKey> = frozen.into_iter().map(|id| id.key).collect();
        let effect = Effect::Thaw {
            id: self.id(),
            names: names.into_iter().collect(),
        };
        self.overlay = Some(Overlay::Confirm(Confirm {
            question: format!(
                "Thaw {}: resume those the freeze suspended, leave suspended those suspended before it or again since? (y/n)",
                listed.join(", ")
            ),
            effects: vec![effect],
        }));
        self.table.marked.clear();
        Vec::new()
    }
}

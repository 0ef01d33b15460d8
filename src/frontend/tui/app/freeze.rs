//! `z`, `:freeze [-n NS | -A] [-l SELECTOR] DURATION REASON`, `Z` and `:thaw [...]`: the
//! incident freeze from the dashboard, over the marked rows (else every row in view), or
//! the releases a namespace or a label selector names, said release by release before it
//! asks, and done by the engine's freeze writes (`engine/freeze.rs`) as `wheelhouse
//! freeze` does them.

use std::collections::BTreeSet;

use super::App;
use crate::cluster::label_selector::Selector;
use crate::engine::ReleaseKey;
use crate::frontend::inventory::Kind;
use crate::frontend::tui::components::command::CommandLine;
use crate::frontend::tui::components::confirm::Confirm;
use crate::frontend::tui::components::status_line::Progress;
use crate::frontend::tui::effect::Effect;
use crate::frontend::tui::view_model::RowKey;

use super::Overlay;

/// Which releases a `:freeze` or `:thaw` is about.
#[derive(Debug, Default)]
struct Pick {
    namespace: Option<String>,
    every_namespace: bool,
    labels: Option<Selector>,
}

impl Pick {
    fn any(&self) -> bool {
        self.namespace.is_some() || self.every_namespace || self.labels.is_some()
    }
}

/// The leading `-n NS`, `-A` and `-l SELECTOR` of a command's words, and the words after.
fn pick<'w>(mut words: &'w [&'w str]) -> Result<(Pick, &'w [&'w str]), String> {
    let mut pick = Pick::default();
    loop {
        match words {
            ["-n" | "--namespace", ns, rest @ ..] => {
                pick.namespace = Some((*ns).to_owned());
                words = rest;
            }
            ["-A" | "--all-namespaces", rest @ ..] => {
                pick.every_namespace = true;
                words = rest;
            }
            ["-l" | "--selector", selector, rest @ ..] => {
                pick.labels = Some(Selector::parse(selector).map_err(|e| e.to_string())?);
                words = rest;
            }
            ["-n" | "--namespace" | "-l" | "--selector"] => {
                return Err(format!("{} needs a value", words[0]));
            }
            _ => return Ok((pick, words)),
        }
    }
}

impl App {
    /// The rows a freeze or thaw is about: with a namespace or selector, every release
    /// the dashboard knows that they name (the text filter aside); else the marked rows,
    /// else every row in view.
    fn freeze_targets(&self, pick: &Pick) -> Vec<RowKey> {
        if pick.any() {
            let (views, others) = (&self.views, &self.others);
            let wheelhouse = views
                .values()
                .map(|v| (RowKey::wheelhouse(v.key.clone()), &v.release.metadata));
            let flux = others
                .flux
                .iter()
                .map(|(k, hr)| (RowKey::new(Kind::Flux, k.clone()), &hr.metadata));
            let helm = others
                .helm
                .keys()
                .filter(|k| !self.managed.contains_key(*k))
                .map(|k| (RowKey::new(Kind::Helm, k.clone()), None));
            let no_labels = std::collections::BTreeMap::new();
            return wheelhouse
                .chain(flux)
                .map(|(id, meta)| (id, Some(meta)))
                .chain(helm)
                .filter(|(id, _)| {
                    pick.namespace
                        .as_ref()
                        .is_none_or(|ns| &id.key.namespace == ns)
                })
                .filter(|(_, meta)| match &pick.labels {
                    None => true,
                    Some(selector) => {
                        selector.matches(meta.and_then(|m| m.labels.as_ref()).unwrap_or(&no_labels))
                    }
                })
                .map(|(id, _)| id)
                .collect();
        }
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

    /// `z`: the command line, filled with `freeze 2h ` (the default duration), for the
    /// reason; the marks stay until the freeze is asked for.
    pub(super) fn freeze_key(&mut self) -> Vec<Effect> {
        if self.readonly {
            self.note(
                "freeze".into(),
                Progress::Failed("read-only: no writes".into()),
            );
            return Vec::new();
        }
        let mut line = CommandLine::default();
        line.text.insert_str("freeze 2h ");
        self.overlay = Some(Overlay::Command(line));
        Vec::new()
    }

    /// `:freeze [-n NS | -A] [-l SELECTOR] DURATION REASON`: asks first, saying what it
    /// does to each release.
    pub(super) fn freeze_command(&mut self, words: &[&str]) -> Vec<Effect> {
        const USAGE: &str =
            "freeze [-n NS | -l SELECTOR] DURATION REASON, e.g. freeze 2h INC-57 bad rollout";
        if self.readonly {
            self.note(
                "freeze".into(),
                Progress::Failed("read-only: no writes".into()),
            );
            return Vec::new();
        }
        let (pick, rest) = match pick(words) {
            Ok(picked) => picked,
            Err(e) => {
                self.note("freeze".into(), Progress::Failed(format!("{e}; {USAGE}")));
                return Vec::new();
            }
        };
        let [duration, reason @ ..] = rest else {
            self.note("freeze".into(), Progress::Failed(USAGE.into()));
            return Vec::new();
        };
        if reason.is_empty() {
            self.note(
                "freeze".into(),
                Progress::Failed(format!("a reason is required: {USAGE}")),
            );
            return Vec::new();
        }
        let reason = reason.join(" ");
        let duration: crate::api::Duration = match duration.parse() {
            Ok(d) => d,
            Err(e) => {
                self.note(
                    format!("freeze {duration}"),
                    Progress::Failed(format!("{e}; {USAGE}")),
                );
                return Vec::new();
            }
        };
        let targets = self.freeze_targets(&pick);
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

    /// `Z`, `:thaw [-n NS | -A] [-l SELECTOR]`: the frozen releases among the targets, resumed where the freeze suspended
    /// them (the engine's rule), after asking.
    pub(super) fn thaw_command(&mut self, words: &[&str]) -> Vec<Effect> {
        if self.readonly {
            self.note(
                "thaw".into(),
                Progress::Failed("read-only: no writes".into()),
            );
            return Vec::new();
        }
        let pick = match pick(words) {
            Ok((pick, [])) => pick,
            Ok(_) => {
                self.note(
                    "thaw".into(),
                    Progress::Failed("thaw [-n NS | -A] [-l SELECTOR]".into()),
                );
                return Vec::new();
            }
            Err(e) => {
                self.note("thaw".into(), Progress::Failed(e));
                return Vec::new();
            }
        };
        let frozen: Vec<RowKey> = self
            .freeze_targets(&pick)
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

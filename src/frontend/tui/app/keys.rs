//! What keys and `:` commands do: routed to the overlay, the view in front or the table,
//! each answered with the effects the run loop performs.

use super::*;

impl App {
    pub fn on_key(&mut self, ev: KeyEvent) -> Vec<Effect> {
        if ev.code == KeyCode::Char('c') && ev.modifiers.contains(KeyModifiers::CONTROL) {
            return vec![Effect::Quit];
        }
        if let Some(overlay) = self.overlay.take() {
            return self.on_overlay_key(overlay, ev);
        }
        if self.changes.is_some() {
            return match keymap::lookup(Context::Changes, &ev) {
                Some(action) => self.on_changes_action(action),
                None => Vec::new(),
            };
        }
        if self.editor.is_some() {
            return self.on_editor_key(ev);
        }
        if self.timeline.is_some() {
            return match keymap::lookup(Context::Timeline, &ev) {
                Some(action) => self.on_timeline_action(action),
                None => Vec::new(),
            };
        }
        if self.grid.is_some() && self.detail.is_none() {
            return match keymap::lookup(Context::Table, &ev) {
                Some(action) => self.on_grid_action(action),
                None => Vec::new(),
            };
        }
        match keymap::lookup(self.context(), &ev) {
            Some(action) => self.on_action(action),
            None => Vec::new(),
        }
    }
    pub(super) fn on_overlay_key(&mut self, overlay: Overlay, ev: KeyEvent) -> Vec<Effect> {
        match overlay {
            Overlay::Help => Vec::new(), // any key closes it
            Overlay::Confirm(confirm) => match confirm.on_key(ev) {
                Answer::Yes(effects) => self.confirmed(effects),
                Answer::No => {
                    self.note("not confirmed: nothing was changed".into(), Progress::Note);
                    Vec::new()
                }
                Answer::Stay(confirm) => {
                    self.overlay = Some(Overlay::Confirm(confirm));
                    Vec::new()
                }
            },
            Overlay::Filter(mut text) if self.changes.is_some() => {
                let view = self.changes.as_mut().expect("checked");
                match ev.code {
                    KeyCode::Esc => view.search = None,
                    KeyCode::Enter => view.search_next(),
                    _ => {
                        text.input(ev);
                        view.search = Some(text.lines().concat());
                        self.overlay = Some(Overlay::Filter(text));
                    }
                }
                Vec::new()
            }
            Overlay::Filter(mut text) if self.timeline.is_some() => {
                let view = self.timeline.as_mut().expect("checked");
                match ev.code {
                    KeyCode::Esc => view.set_filter(String::new()),
                    KeyCode::Enter => {}
                    _ => {
                        text.input(ev);
                        view.set_filter(text.lines().concat());
                        self.overlay = Some(Overlay::Filter(text));
                    }
                }
                Vec::new()
            }
            Overlay::Filter(mut text) if self.logs.is_some() => {
                let logs = self.logs.as_mut().expect("checked");
                match ev.code {
                    KeyCode::Esc => logs.search = None,
                    KeyCode::Enter => logs.search_next(self.page),
                    _ => {
                        text.input(ev);
                        logs.search = Some(text.lines().concat());
                        self.overlay = Some(Overlay::Filter(text));
                    }
                }
                Vec::new()
            }
            Overlay::Filter(mut text) => {
                match ev.code {
                    KeyCode::Esc => {
                        self.table.filter.clear();
                        self.refresh_rows();
                    }
                    KeyCode::Enter => {}
                    _ => {
                        text.input(ev);
                        let (table, source) = self.table_and_source();
                        table.set_filter(&source, text.lines().concat());
                        self.overlay = Some(Overlay::Filter(text));
                    }
                }
                Vec::new()
            }
            Overlay::Command(mut line) => match line.on_key(ev, |typed| self.completions(typed)) {
                Typed::Cancel => Vec::new(),
                Typed::Run(text) => self.run_command(&text),
                Typed::Editing => {
                    self.overlay = Some(Overlay::Command(line));
                    Vec::new()
                }
            },
        }
    }
    /// `:` commands: `ns NAME`, `ns all` (or `all`), `ctx NAME`, `timeline`, `freeze [-n NS
    /// | -l SELECTOR] DURATION REASON`, `thaw [-n NS | -l SELECTOR]`, `q`/`quit`.
    pub fn run_command(&mut self, line: &str) -> Vec<Effect> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let scope_of = |name: &str| match name {
            "all" | "*" | "-A" => Scope::All,
            ns => Scope::Namespace(ns.to_owned()),
        };
        match words.as_slice() {
            ["q" | "quit" | "q!"] => vec![Effect::Quit],
            ["timeline" | "tl"] => self.open_timeline(),
            ["freeze", rest @ ..] => self.freeze_command(rest),
            ["thaw", rest @ ..] => self.thaw_command(rest),
            ["grid" | "where"] => {
                self.open_grid(false);
                Vec::new()
            }
            ["grid" | "where", "chart"] => {
                self.open_grid(true);
                Vec::new()
            }
            ["all" | "-A"] => self.switch_scope(Scope::All),
            ["ns" | "namespace" | "n", name] => self.switch_scope(scope_of(name)),
            // In a fleet, a filter rather than a switch: the other clusters stay live.
            ["ctx" | "context", name] if self.fleet.is_fleet() => {
                let (_, rest) =
                    crate::frontend::tui::components::table::split_filter(&self.table.filter);
                let filter = match *name {
                    "all" | "*" => rest,
                    name => format!("cluster:{name} {rest}").trim().to_owned(),
                };
                let (table, source) = self.table_and_source();
                table.set_filter(&source, filter);
                Vec::new()
            }
            ["ctx" | "context", name] => {
                self.switching = Some(format!("context {name}"));
                vec![Effect::SwitchContext((*name).to_owned())]
            }
            [] => Vec::new(),
            _ => {
                self.note(
                    format!("unknown command {line:?}"),
                    Progress::Failed(
                        "try ns NAME, ns all, ctx NAME, timeline, grid, grid chart, freeze DURATION REASON, thaw or quit".into(),
                    ),
                );
                Vec::new()
            }
        }
    }
    /// Changes the namespaces shown. The engine's coverage stays as it is: a view filter
    /// never narrows or widens what this process reconciles.
    pub(super) fn switch_scope(&mut self, scope: Scope) -> Vec<Effect> {
        let shown = match (&self.coverage.scope, &scope) {
            (Scope::All, _) => true,
            (Scope::Namespace(have), Scope::Namespace(want)) => have == want,
            (Scope::Namespace(_), Scope::All) => false,
        };
        if shown {
            let known = match &scope {
                Scope::Namespace(ns) => self.known_namespaces().contains(ns),
                Scope::All => false,
            };
            self.scope = scope;
            self.table.marked.clear();
            self.table.selected = 0;
            self.refresh_rows();
            // Only namespaces that exist become favourites, not typos.
            if known {
                return self.remember_scope();
            }
        } else {
            let Scope::Namespace(have) = &self.coverage.scope else {
                unreachable!("a cluster-wide watch shows every namespace")
            };
            self.note(
                "switching namespace".into(),
                Progress::Failed(format!(
                    "this dashboard watches (and its engine reconciles) namespace {have} \
                     only (--engine-scope namespace, or an identity that cannot list \
                     HelmReleases in every namespace); start it with -n NAME for another"
                )),
            );
        }
        Vec::new()
    }
    pub(super) fn on_action(&mut self, action: Action) -> Vec<Effect> {
        // The view in front handles its own keys first.
        let page = self.page;
        if let Some(logs) = &mut self.logs {
            if logs.on_action(action, page) {
                return Vec::new();
            }
            return self.on_logs_action(action);
        }
        if let Some(d) = &mut self.detail {
            if d.on_action(action, page) {
                return Vec::new();
            }
        } else {
            let (table, source) = self.table_and_source();
            if table.on_action(&source, action, page) {
                return Vec::new();
            }
        }
        // On another cluster's row, the values editor (which patches through the
        // dashboard's own session) is not offered yet; diffs, drift, rollback and logs go
        // to the row's cluster.
        if let Some(cluster) = self.selected_key().and_then(|k| k.cluster.clone())
            && action == Action::Edit
        {
            self.note(
                format!("editing values on a row of {cluster}"),
                Progress::Failed(format!(
                    "not offered on another cluster's rows yet: run wheelhouse --context {cluster} for it"
                )),
            );
            return Vec::new();
        }
        match action {
            Action::Quit => return vec![Effect::Quit],
            Action::Help => self.overlay = Some(Overlay::Help),
            Action::Redraw => return vec![Effect::Redraw],
            Action::Timeline => return self.open_timeline(),
            Action::Freeze => return self.freeze_key(),
            Action::Thaw => return self.thaw_command(&[]),
            Action::Command => {
                self.overlay = Some(Overlay::Command(CommandLine::default()));
                return vec![Effect::LoadCompletions];
            }
            Action::Namespace(0) => return self.switch_scope(Scope::All),
            Action::Namespace(n) => {
                let favourite = self.favourites.of(&self.context).get(n as usize - 1);
                match favourite {
                    Some(ns) => return self.switch_scope(Scope::Namespace(ns.clone())),
                    None => {
                        self.note(
                            format!("no namespace on {n} yet: :ns NAME adds one"),
                            Progress::Note,
                        );
                    }
                }
            }
            Action::Filter => {
                // A new filter replaces the old one, as in k9s.
                self.table.filter.clear();
                self.refresh_rows();
                self.overlay = Some(Overlay::Filter(line_input(
                    "text in namespace, name, chart, state or message; is:forgotten: old suspends",
                )));
            }
            Action::Back if self.detail.take().is_none() => {
                self.table.filter.clear();
                self.refresh_rows();
            }
            Action::Open if self.detail.as_ref().is_some_and(|d| d.picking()) => {
                return self.show_revision();
            }
            Action::Compare => return self.compare(),
            Action::Drift => return self.show_drift(),
            Action::Rollback if self.readonly => return self.write(action),
            Action::Rollback => return self.review_rollback(),
            Action::Open | Action::Overview => return self.open(Tab::Overview),
            Action::History => return self.open(Tab::History),
            Action::Values => return self.open(Tab::Values),
            Action::Manifest => return self.open(Tab::Manifest),
            Action::Events => return self.open(Tab::Events),
            Action::Suspend
            | Action::Resume
            | Action::Reconcile
            | Action::CancelWait
            | Action::Force
            | Action::Reset
            | Action::Uninstall => {
                return self.write(action);
            }
            Action::Edit => self.open_editor(),
            Action::Logs => return self.open_logs(),
            _ => {}
        }
        Vec::new()
    }
    /// `l` in the detail view: the logs of the release's first failing pod (its last
    /// lines, or its previous container's when it has restarted), followed.
    pub(super) fn open_logs(&mut self) -> Vec<Effect> {
        let failing = match self.detail.as_ref().map(|d| &d.data.workloads) {
            Some(crate::frontend::tui::view_model::Fetch::Loaded(ws)) => ws
                .iter()
                .find_map(|w| w.failing.first().map(|(pod, _)| pod.clone())),
            _ => None,
        };
        let (Some(pod), Some((target, _))) = (failing, self.detail_target()) else {
            self.note(
                "logs".into(),
                Progress::Failed("no failing pod in this release's rollout".into()),
            );
            return Vec::new();
        };
        // A remote release's pods are in the cluster its records were read in.
        let cluster = self.detail.as_ref().and_then(|d| match &d.data.read_in {
            Some(there) => there.cluster.clone(),
            None => d.key.cluster.clone(),
        });
        let source = LogSource {
            cluster,
            namespace: target.target_namespace,
            pod,
            previous: false,
            follow: true,
            stream: self.id(),
        };
        self.logs = Some(LogView::new(source.clone()));
        vec![Effect::StreamLogs(source)]
    }
    /// The logs view's own actions: follow, previous, search, back.
    pub(super) fn on_logs_action(&mut self, action: Action) -> Vec<Effect> {
        let Some(logs) = &mut self.logs else {
            return Vec::new();
        };
        match action {
            Action::Back => {
                self.logs = None;
                vec![Effect::StopLogs]
            }
            Action::Follow | Action::Previous => {
                let mut source = logs.source.clone();
                if action == Action::Follow {
                    source.follow = !source.follow;
                } else {
                    source.previous = !source.previous;
                    source.follow = !source.previous;
                }
                source.stream = self.id();
                self.logs = Some(LogView::new(source.clone()));
                vec![Effect::StreamLogs(source)]
            }
            Action::Filter => {
                self.overlay = Some(Overlay::Filter(line_input("text to find in the logs")));
                Vec::new()
            }
            Action::Quit => vec![Effect::Quit],
            Action::Help => {
                self.overlay = Some(Overlay::Help);
                Vec::new()
            }
            _ => Vec::new(),
        }
    }
    pub(super) fn open(&mut self, tab: Tab) -> Vec<Effect> {
        if let Some(d) = &mut self.detail {
            d.show(tab);
            return Vec::new();
        }
        let Some(key) = self.selected_key().cloned() else {
            return Vec::new();
        };
        self.detail = Some(Detail::new(key.clone(), tab));
        vec![Effect::LoadDetail(key)]
    }
    pub(super) fn open_editor(&mut self) {
        if self.readonly {
            self.note(
                "read-only (--readonly)".into(),
                Progress::Failed("editing values is disabled".into()),
            );
            return;
        }
        let Some(id) = self.selected_key().cloned() else {
            return;
        };
        if id.kind != Kind::Wheelhouse {
            let why = match id.kind {
                Kind::Flux => "a Flux HelmRelease's values live where Flux gets it from (Git)",
                _ => "a helm CLI release's values change with helm upgrade",
            };
            self.note(
                format!("editing values of {id}"),
                Progress::Failed(format!("not offered: {why}")),
            );
            return;
        }
        let key = id.key;
        let Some(view) = self.views.get(&key) else {
            return;
        };
        let original = view
            .release
            .spec
            .values
            .clone()
            .unwrap_or_else(|| serde_json::json!({}));
        let draft = self.drafts.remove(&key);
        self.editor = Some(Editor::open(key, original, draft, &self.theme));
    }
    pub(super) fn on_editor_key(&mut self, ev: KeyEvent) -> Vec<Effect> {
        let Some(mut ed) = self.editor.take() else {
            return Vec::new();
        };
        match ed.on_key(ev) {
            Edited::Stay => self.editor = Some(ed),
            Edited::Leave => {
                self.drafts.insert(ed.key, (ed.text, ed.original));
            }
            Edited::Review(values) => {
                let (key, original) = (ed.key.clone(), ed.original.clone());
                self.editor = Some(ed);
                return self.review_values(&key, &original, values);
            }
        }
        Vec::new()
    }
    /// The values edit confirmed: patched, guarded by the values it started from.
    pub(super) fn apply_values(&mut self, values: serde_json::Value) -> Vec<Effect> {
        let Some(key) = self.editor.as_ref().map(|ed| ed.key.clone()) else {
            return Vec::new();
        };
        let id = self.note(format!("apply values to {key}"), Progress::Pending);
        let ed = self.editor.as_mut().expect("checked");
        ed.saving = Some(id);
        vec![Effect::PatchValues {
            id,
            key,
            original: ed.original.clone(),
            values,
        }]
    }

    /// `T`, `:timeline`: the Timeline in front (its rows load on the next turn).
    pub(super) fn open_timeline(&mut self) -> Vec<Effect> {
        if self.timeline.is_none() {
            self.timeline = Some(Default::default());
        }
        Vec::new()
    }

    /// The Timeline's keys: move, filter, open a revision's diff, back.
    pub(super) fn on_timeline_action(&mut self, action: Action) -> Vec<Effect> {
        let page = self.page as isize;
        let view = self.timeline.as_mut().expect("called with a timeline");
        match action {
            Action::Down => view.step(1),
            Action::Up => view.step(-1),
            Action::PageDown => view.step(page),
            Action::PageUp => view.step(-page),
            Action::Top => view.selected = 0,
            Action::Bottom => view.bottom(),
            Action::Back => self.timeline = None,
            Action::Filter => {
                view.set_filter(String::new());
                self.overlay = Some(Overlay::Filter(line_input(
                    "words in release, kind, who or what",
                )));
            }
            Action::Open => return self.timeline_diff(),
            Action::Quit => return vec![Effect::Quit],
            Action::Help => self.overlay = Some(Overlay::Help),
            Action::Redraw => return vec![Effect::Redraw],
            Action::Command => {
                self.overlay = Some(Overlay::Command(CommandLine::default()));
                return vec![Effect::LoadCompletions];
            }
            _ => {}
        }
        Vec::new()
    }

    /// `enter` on a Timeline row: the revision it made against the one before (values and
    /// manifest, Secret data masked), or the first revision whole.
    fn timeline_diff(&mut self) -> Vec<Effect> {
        let Some(change) = self.timeline.as_ref().and_then(|v| v.current().cloned()) else {
            return Vec::new();
        };
        let (true, Some(to)) = (change.kind.is_revision(), change.revision) else {
            self.note(
                format!(
                    "{} of {}/{}",
                    change.kind.label(),
                    change.namespace,
                    change.release
                ),
                Progress::Failed("no diff: it made no Helm revision".into()),
            );
            return Vec::new();
        };
        let release = ReleaseKey::new(change.namespace.clone(), change.release.clone());
        let values = self.values_sources_in(change.cluster.as_deref(), &release);
        let (title, of) = if to > 1 {
            (
                format!(
                    "{release}: revision {} → {to} (values and manifest, Secret data masked)",
                    to - 1
                ),
                crate::frontend::tui::effect::ChangesOf::Revisions {
                    release,
                    from: to - 1,
                    to,
                    values,
                },
            )
        } else {
            (
                format!("{release}: revision {to}, whole (Secret data masked)"),
                crate::frontend::tui::effect::ChangesOf::Revision {
                    release,
                    revision: to,
                    values,
                },
            )
        };
        let cluster = change
            .cluster
            .as_deref()
            .map(crate::frontend::tui::view_model::Cluster::from);
        self.open_changes(
            cluster,
            title,
            of,
            None,
            Vec::new(),
            "reading Helm's storage…",
        )
    }
}

//! The dashboard's state and what keys and IO results do to it. Pure: it never performs
//! IO; it returns [`Effect`]s the run loop hands to tasks, and takes their results back
//! as [`IoResult`]s. The views draw from it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use k8s_openapi::jiff::Timestamp;
use tui_textarea::TextArea;

use super::keymap::{self, Action, Context};
use super::model::{DetailData, Row, SortBy, parse_values};
use super::theme::Theme;
use crate::client::Scope;
use crate::engine::{Command, ReleaseKey, Role, Views};
use crate::health::replicas::ReplicaMap;

/// IO the run loop performs on a task.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Send {
        id: u64,
        command: Command,
    },
    LoadDetail(ReleaseKey),
    /// Merge patch for `spec.values`, guarded by the resourceVersion the edit started from.
    PatchValues {
        id: u64,
        key: ReleaseKey,
        original: serde_json::Value,
        values: serde_json::Value,
    },
    SwitchContext(String),
    Redraw,
    Quit,
}

/// Results of IO tasks.
#[derive(Debug)]
pub enum IoResult {
    Done {
        id: u64,
        result: Result<(), String>,
    },
    Detail {
        key: ReleaseKey,
        data: DetailData,
    },
    /// A new session started (namespace or context switch), or failed to.
    Switched(Result<(String, Scope, crate::engine::Coverage), String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Information only (nothing was sent).
    Note,
    Pending,
    Done,
    Failed(String),
}

/// Feedback for one write: pending, then done or failed with the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feedback {
    pub id: u64,
    pub what: String,
    pub progress: Progress,
    /// The bulk action this write belongs to (its verb and size), reported as a whole.
    pub group: Option<(u64, String)>,
    /// When it was noted or last changed; finished notices expire.
    pub at: Timestamp,
}

/// How long a finished notice stays on the status line.
pub const NOTICE_TTL: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Overview,
    History,
    Values,
    Manifest,
    Events,
}

impl Tab {
    pub const ALL: [Tab; 5] = [
        Tab::Overview,
        Tab::History,
        Tab::Values,
        Tab::Manifest,
        Tab::Events,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Self::Overview => "Overview",
            Self::History => "History",
            Self::Values => "Values",
            Self::Manifest => "Manifest",
            Self::Events => "Events",
        }
    }
}

pub struct Detail {
    pub key: ReleaseKey,
    pub tab: Tab,
    pub scroll: u16,
    pub data: DetailData,
}

pub struct Editor {
    pub key: ReleaseKey,
    pub text: TextArea<'static>,
    pub original: serde_json::Value,
    pub error: Option<String>,
    /// Valid values waiting for the operator's yes.
    pub confirm: Option<serde_json::Value>,
    /// The patch in flight.
    pub saving: Option<u64>,
}

pub enum Overlay {
    Help,
    Filter(TextArea<'static>),
    Command(TextArea<'static>),
    Confirm {
        question: String,
        effects: Vec<Effect>,
    },
}

pub struct App {
    pub context: String,
    /// The namespaces the table shows: a view filter, never what the engine reconciles.
    pub scope: Scope,
    /// What the in-process engine reconciles (and its watch covers), fixed per session.
    pub coverage: crate::engine::Coverage,
    pub readonly: bool,
    pub theme: Theme,
    pub role: Role,
    /// Whether the API server answers the HelmRelease watch.
    pub connection: crate::engine::Connection,
    pub now: Timestamp,
    pub views: Arc<Views>,
    /// Ready and desired replicas of every Helm release's workloads (READY column).
    pub replicas: Arc<ReplicaMap>,
    /// Rows after filter and sort, in display order.
    pub rows: Vec<Row>,
    pub selected: usize,
    pub marked: BTreeSet<ReleaseKey>,
    pub filter: String,
    pub sort: SortBy,
    pub reverse: bool,
    pub detail: Option<Detail>,
    pub editor: Option<Editor>,
    pub overlay: Option<Overlay>,
    pub feedback: Vec<Feedback>,
    /// Drafts of values edits left with esc, so nothing typed is lost.
    pub drafts: HashMap<ReleaseKey, Vec<String>>,
    /// Rows per page, from the last draw.
    pub page: usize,
    pub switching: Option<String>,
    next_id: u64,
}

impl App {
    pub fn new(
        context: String,
        scope: Scope,
        readonly: bool,
        theme: Theme,
        now: Timestamp,
    ) -> Self {
        Self {
            context,
            coverage: crate::engine::Coverage::new(scope.clone(), None),
            scope,
            readonly,
            theme,
            role: Role::Unknown,
            connection: crate::engine::Connection::Connected,
            now,
            views: Arc::default(),
            replicas: Arc::default(),
            rows: Vec::new(),
            selected: 0,
            marked: BTreeSet::new(),
            filter: String::new(),
            sort: SortBy::Name,
            reverse: false,
            detail: None,
            editor: None,
            overlay: None,
            feedback: Vec::new(),
            drafts: HashMap::new(),
            page: 10,
            switching: None,
            next_id: 0,
        }
    }

    pub fn set_views(&mut self, views: Arc<Views>) {
        self.views = views;
        self.refresh_rows();
    }

    fn refresh_rows(&mut self) {
        let key = self.rows.get(self.selected).map(|r| r.key.clone());
        let mut rows: Vec<Row> = self
            .views
            .values()
            .filter(|v| match &self.scope {
                Scope::All => true,
                Scope::Namespace(ns) => *ns == v.key.namespace,
            })
            .map(|v| Row::with_replicas(v, &self.replicas))
            .filter(|r| r.matches(&self.filter))
            .collect();
        self.sort.sort(&mut rows, self.reverse);
        self.rows = rows;
        // Keep the cursor on the same release when rows move.
        if let Some(key) = key
            && let Some(i) = self.rows.iter().position(|r| r.key == key)
        {
            self.selected = i;
        }
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
        self.marked.retain(|k| self.views.contains_key(k));
    }

    pub fn set_replicas(&mut self, replicas: Arc<ReplicaMap>) {
        self.replicas = replicas;
        self.refresh_rows();
    }

    pub fn selected_key(&self) -> Option<&ReleaseKey> {
        match &self.detail {
            Some(d) => Some(&d.key),
            None => self.rows.get(self.selected).map(|r| &r.key),
        }
    }

    fn context(&self) -> Context {
        if self.editor.is_some() {
            Context::Editor
        } else if self.detail.is_some() {
            Context::Detail
        } else {
            Context::Table
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn note(&mut self, what: String, progress: Progress) -> u64 {
        let id = self.id();
        let at = self.now;
        self.feedback.push(Feedback {
            id,
            what,
            progress,
            group: None,
            at,
        });
        if self.feedback.len() > 50 {
            self.feedback.remove(0);
        }
        id
    }

    pub fn on_key(&mut self, ev: KeyEvent) -> Vec<Effect> {
        if ev.code == KeyCode::Char('c') && ev.modifiers.contains(KeyModifiers::CONTROL) {
            return vec![Effect::Quit];
        }
        if let Some(overlay) = self.overlay.take() {
            return self.on_overlay_key(overlay, ev);
        }
        if self.editor.is_some() {
            return self.on_editor_key(ev);
        }
        match keymap::lookup(self.context(), &ev) {
            Some(action) => self.on_action(action),
            None => Vec::new(),
        }
    }

    fn on_overlay_key(&mut self, overlay: Overlay, ev: KeyEvent) -> Vec<Effect> {
        match overlay {
            Overlay::Help => Vec::new(), // any key closes it
            Overlay::Confirm { question, effects } => match ev.code {
                KeyCode::Char('y' | 'Y') => {
                    // A bulk action is reported as a whole.
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
                        self.start(e, group.clone());
                    }
                    effects
                }
                KeyCode::Char('n' | 'N') | KeyCode::Esc => {
                    self.note("not confirmed: nothing was changed".into(), Progress::Note);
                    Vec::new()
                }
                _ => {
                    self.overlay = Some(Overlay::Confirm { question, effects });
                    Vec::new()
                }
            },
            Overlay::Filter(mut text) => {
                match ev.code {
                    KeyCode::Esc => {
                        self.filter.clear();
                        self.refresh_rows();
                    }
                    KeyCode::Enter => {}
                    _ => {
                        text.input(ev);
                        self.filter = text.lines().concat();
                        self.selected = 0;
                        self.refresh_rows();
                        self.overlay = Some(Overlay::Filter(text));
                    }
                }
                Vec::new()
            }
            Overlay::Command(mut text) => match ev.code {
                KeyCode::Esc => Vec::new(),
                KeyCode::Enter => self.run_command(&text.lines().concat()),
                _ => {
                    text.input(ev);
                    self.overlay = Some(Overlay::Command(text));
                    Vec::new()
                }
            },
        }
    }

    /// `:` commands: `ns NAME`, `ns all` (or `all`), `ctx NAME`, `q`/`quit`.
    pub fn run_command(&mut self, line: &str) -> Vec<Effect> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let scope_of = |name: &str| match name {
            "all" | "*" | "-A" => Scope::All,
            ns => Scope::Namespace(ns.to_owned()),
        };
        match words.as_slice() {
            ["q" | "quit" | "q!"] => vec![Effect::Quit],
            ["all" | "-A"] => self.switch_scope(Scope::All),
            ["ns" | "namespace" | "n", name] => self.switch_scope(scope_of(name)),
            ["ctx" | "context", name] => {
                self.switching = Some(format!("context {name}"));
                vec![Effect::SwitchContext((*name).to_owned())]
            }
            [] => Vec::new(),
            _ => {
                self.note(
                    format!("unknown command {line:?}"),
                    Progress::Failed("try ns NAME, ns all, ctx NAME or quit".into()),
                );
                Vec::new()
            }
        }
    }

    /// Changes the namespaces shown. The engine's coverage stays as it is: a view filter
    /// never narrows or widens what this process reconciles.
    fn switch_scope(&mut self, scope: Scope) -> Vec<Effect> {
        let shown = match (&self.coverage.scope, &scope) {
            (Scope::All, _) => true,
            (Scope::Namespace(have), Scope::Namespace(want)) => have == want,
            (Scope::Namespace(_), Scope::All) => false,
        };
        if shown {
            self.scope = scope;
            self.marked.clear();
            self.selected = 0;
            self.refresh_rows();
        } else {
            let Scope::Namespace(have) = &self.coverage.scope else {
                unreachable!("a cluster-wide watch shows every namespace")
            };
            self.note(
                "switching namespace".into(),
                Progress::Failed(format!(
                    "this identity cannot list HelmReleases in every namespace, so this \
                     dashboard watches (and its engine reconciles) namespace {have} only; \
                     start it with -n NAME for another"
                )),
            );
        }
        Vec::new()
    }

    fn on_action(&mut self, action: Action) -> Vec<Effect> {
        let len = self.rows.len();
        match action {
            Action::Quit => return vec![Effect::Quit],
            Action::Help => self.overlay = Some(Overlay::Help),
            Action::Redraw => return vec![Effect::Redraw],
            Action::Command => {
                self.overlay = Some(Overlay::Command(line_input("ns NAME | ns all | ctx NAME")))
            }
            Action::Filter => {
                // A new filter replaces the old one, as in k9s.
                self.filter.clear();
                self.refresh_rows();
                self.overlay = Some(Overlay::Filter(line_input(
                    "text in namespace, name, chart, state or message",
                )));
            }
            Action::Back => {
                if self.detail.take().is_none() {
                    self.filter.clear();
                    self.refresh_rows();
                }
            }
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => {
                if let Some(d) = &mut self.detail {
                    d.scroll = match action {
                        Action::Up => d.scroll.saturating_sub(1),
                        Action::Down => d.scroll.saturating_add(1),
                        Action::PageUp => d.scroll.saturating_sub(self.page as u16),
                        Action::PageDown => d.scroll.saturating_add(self.page as u16),
                        Action::Top => 0,
                        _ => u16::MAX / 2,
                    };
                } else if len > 0 {
                    self.selected = match action {
                        Action::Up => self.selected.saturating_sub(1),
                        Action::Down => (self.selected + 1).min(len - 1),
                        Action::PageUp => self.selected.saturating_sub(self.page),
                        Action::PageDown => (self.selected + self.page).min(len - 1),
                        Action::Top => 0,
                        _ => len - 1,
                    };
                }
            }
            Action::SortNext => {
                self.sort = self.sort.next();
                self.refresh_rows();
            }
            Action::SortReverse => {
                self.reverse = !self.reverse;
                self.refresh_rows();
            }
            Action::Mark => {
                if let Some(row) = self.rows.get(self.selected) {
                    let key = row.key.clone();
                    if !self.marked.remove(&key) {
                        self.marked.insert(key);
                    }
                    self.selected = (self.selected + 1).min(len.saturating_sub(1));
                }
            }
            Action::MarkAll => {
                let visible: Vec<ReleaseKey> = self.rows.iter().map(|r| r.key.clone()).collect();
                self.marked.extend(visible);
            }
            Action::ClearMarks => self.marked.clear(),
            Action::Open => return self.open(Tab::Overview),
            Action::Overview => return self.open(Tab::Overview),
            Action::History => return self.open(Tab::History),
            Action::Values => return self.open(Tab::Values),
            Action::Manifest => return self.open(Tab::Manifest),
            Action::Events => return self.open(Tab::Events),
            Action::NextTab => {
                if let Some(d) = &mut self.detail {
                    let i = Tab::ALL.iter().position(|t| *t == d.tab).unwrap_or(0);
                    d.tab = Tab::ALL[(i + 1) % Tab::ALL.len()];
                    d.scroll = 0;
                }
            }
            Action::Suspend | Action::Resume | Action::Reconcile | Action::CancelWait => {
                return self.write(action);
            }
            Action::Edit => self.open_editor(),
            Action::Save => {}
        }
        Vec::new()
    }

    fn open(&mut self, tab: Tab) -> Vec<Effect> {
        if let Some(d) = &mut self.detail {
            d.tab = tab;
            d.scroll = 0;
            return Vec::new();
        }
        let Some(key) = self.selected_key().cloned() else {
            return Vec::new();
        };
        self.detail = Some(Detail {
            key: key.clone(),
            tab,
            scroll: 0,
            data: DetailData::default(),
        });
        vec![Effect::LoadDetail(key)]
    }

    /// The releases an action applies to: the marked ones, else the one under the cursor.
    fn targets(&self) -> Vec<ReleaseKey> {
        if self.detail.is_none() && !self.marked.is_empty() {
            self.marked.iter().cloned().collect()
        } else {
            self.selected_key().cloned().into_iter().collect()
        }
    }

    fn write(&mut self, action: Action) -> Vec<Effect> {
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
                self.marked.clear();
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
        self.overlay = Some(Overlay::Confirm {
            question: format!("{question}? (y/n)"),
            effects,
        });
        if bulk {
            self.marked.clear();
        }
        Vec::new()
    }

    /// Marks confirmed writes pending (they were held back while the question was open).
    fn start(&mut self, effect: &Effect, group: Option<(u64, String)>) {
        if let Effect::Send { id, command } = effect
            && !self.feedback.iter().any(|f| f.id == *id)
        {
            let at = self.now;
            self.feedback.push(Feedback {
                id: *id,
                what: describe(command),
                progress: Progress::Pending,
                group,
                at,
            });
        }
    }

    /// What the status line says now: the newest notice (a bulk action as a whole), or
    /// nothing once a finished one is older than [`NOTICE_TTL`].
    /// How old the shown data may be: `Some(seconds)` while disconnected.
    pub fn stale_for(&self) -> Option<i64> {
        match &self.connection {
            crate::engine::Connection::Connected => None,
            crate::engine::Connection::Disconnected { since, .. } => {
                Some(self.now.duration_since(*since).as_secs().max(0))
            }
        }
    }

    /// `bool`: the text is a bulk summary that already says how each write ended.
    pub fn status_notice(&self) -> Option<(Progress, String, bool)> {
        let last = self.feedback.last()?;
        let Some((group, label)) = &last.group else {
            let expired = last.progress != Progress::Pending
                && self.now.duration_since(last.at).as_secs() >= NOTICE_TTL.as_secs() as i64;
            return (!expired).then(|| (last.progress.clone(), last.what.clone(), false));
        };
        let members: Vec<&Feedback> = self
            .feedback
            .iter()
            .filter(|f| f.group.as_ref().is_some_and(|(g, _)| g == group))
            .collect();
        let count = |p: fn(&Progress) -> bool| members.iter().filter(|f| p(&f.progress)).count();
        let pending = count(|p| *p == Progress::Pending);
        let done = count(|p| *p == Progress::Done);
        let failed: Vec<String> = members
            .iter()
            .filter_map(|f| match &f.progress {
                Progress::Failed(e) => Some(format!("{}: {e}", f.what)),
                _ => None,
            })
            .collect();
        let newest = members.iter().map(|f| f.at).max().unwrap_or(self.now);
        if pending == 0 && self.now.duration_since(newest).as_secs() >= NOTICE_TTL.as_secs() as i64
        {
            return None;
        }
        let mut text = format!("{label}: {done} done");
        if pending > 0 {
            text.push_str(&format!(", {pending} pending"));
        }
        if !failed.is_empty() {
            text.push_str(&format!(
                ", {} failed ({})",
                failed.len(),
                failed.join("; ")
            ));
        }
        let progress = if pending > 0 {
            Progress::Pending
        } else if failed.is_empty() {
            Progress::Done
        } else {
            Progress::Failed(String::new())
        };
        Some((progress, text, true))
    }

    fn open_editor(&mut self) {
        if self.readonly {
            self.note(
                "read-only (--readonly)".into(),
                Progress::Failed("editing values is disabled".into()),
            );
            return;
        }
        let Some(key) = self.selected_key().cloned() else {
            return;
        };
        let Some(view) = self.views.get(&key) else {
            return;
        };
        let original = view
            .release
            .spec
            .values
            .clone()
            .unwrap_or_else(|| serde_json::json!({}));
        let lines = self.drafts.remove(&key).unwrap_or_else(|| {
            let empty = original.as_object().is_none_or(serde_json::Map::is_empty);
            if empty {
                vec![String::new()]
            } else {
                serde_yaml::to_string(&original)
                    .unwrap_or_default()
                    .lines()
                    .map(str::to_owned)
                    .collect()
            }
        });
        let mut text = TextArea::new(lines);
        text.set_line_number_style(self.theme.muted());
        text.set_cursor_line_style(ratatui::style::Style::default());
        self.editor = Some(Editor {
            key,
            text,
            original,
            error: None,
            confirm: None,
            saving: None,
        });
    }

    fn on_editor_key(&mut self, ev: KeyEvent) -> Vec<Effect> {
        let Some(mut ed) = self.editor.take() else {
            return Vec::new();
        };
        if let Some(values) = ed.confirm.take() {
            match ev.code {
                KeyCode::Char('y' | 'Y') => {
                    let id = self.note(format!("apply values to {}", ed.key), Progress::Pending);
                    ed.saving = Some(id);
                    let effect = Effect::PatchValues {
                        id,
                        key: ed.key.clone(),
                        original: ed.original.clone(),
                        values,
                    };
                    self.editor = Some(ed);
                    return vec![effect];
                }
                _ => {
                    // Not confirmed: back to editing, draft intact.
                    self.editor = Some(ed);
                    return Vec::new();
                }
            }
        }
        match keymap::lookup(Context::Editor, &ev) {
            Some(Action::Back) => {
                let lines = ed.text.into_lines();
                self.drafts.insert(ed.key, lines);
            }
            Some(Action::Save) => {
                match parse_values(&ed.text.lines().join("\n")) {
                    Ok(values) => {
                        ed.error = None;
                        ed.confirm = Some(values);
                    }
                    Err(e) => ed.error = Some(e),
                }
                self.editor = Some(ed);
            }
            _ => {
                if ed.saving.is_none() {
                    ed.text.input(ev);
                }
                self.editor = Some(ed);
            }
        }
        Vec::new()
    }

    pub fn on_io(&mut self, result: IoResult) {
        match result {
            IoResult::Done { id, result } => {
                let now = self.now;
                if let Some(f) = self.feedback.iter_mut().find(|f| f.id == id) {
                    f.progress = match &result {
                        Ok(()) => Progress::Done,
                        Err(e) => Progress::Failed(e.clone()),
                    };
                    f.at = now;
                }
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
            IoResult::Detail { key, data } => {
                if let Some(d) = &mut self.detail
                    && d.key == key
                {
                    d.data = data;
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
                        self.marked.clear();
                        self.selected = 0;
                        self.role = Role::Unknown;
                        self.set_views(Arc::default());
                    }
                    Err(e) => {
                        self.note("switching failed".into(), Progress::Failed(e));
                    }
                }
            }
        }
    }
}

fn line_input(placeholder: &str) -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_placeholder_text(placeholder);
    t.set_cursor_line_style(ratatui::style::Style::default());
    t
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

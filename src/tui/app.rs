//! The dashboard's state and what keys and IO results do to it. Pure: it never performs
//! IO; it returns [`Effect`]s the run loop hands to tasks, and takes their results back
//! as [`IoResult`]s. The views draw from it.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use k8s_openapi::jiff::Timestamp;
use tui_textarea::TextArea;

use super::diff::{DiffLine, values_diff};
use super::favourites::Favourites;
use super::keymap::{self, Action, Context};
use super::model::{DetailData, Row, SortBy, parse_values, release_id};
use super::theme::Theme;
use crate::client::Scope;
use crate::engine::{Command, ReleaseKey, Role, Views, changed_keys};
use crate::health::replicas::{ReleaseId, ReplicaMap};

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
    /// What `:` completes: the cluster's namespaces (listed with a time limit; an
    /// identity that may not list them gets the releases' namespaces only) and the
    /// kubeconfig's contexts.
    LoadCompletions,
    /// Write the namespace favourites to the config directory.
    SaveFavourites(Favourites),
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
    /// A write whose answer never came: it may still be applied; `expect` says what the
    /// object shows once it is.
    Unknown {
        id: u64,
        why: String,
        expect: super::io::Expect,
    },
    /// The answer of a write that was reported outcome unknown came after all.
    Late {
        id: u64,
        outcome: super::io::LateOutcome,
    },
    Detail {
        key: ReleaseKey,
        data: DetailData,
    },
    /// A new session started (namespace or context switch), or failed to.
    Switched(Result<(String, Scope, crate::engine::Coverage), String>),
    /// The cluster's namespaces, or why they cannot be listed.
    Namespaces(Result<Vec<String>, String>),
    /// The kubeconfig's contexts.
    Contexts(Vec<String>),
    /// The favourites were written, or why not.
    FavouritesSaved(Result<(), String>),
}

impl IoResult {
    /// How a write ended, as the UI loop hears it.
    pub fn written(id: u64, result: Result<(), super::io::WriteError>) -> Self {
        use super::io::WriteError;
        match result {
            Ok(()) => Self::Done { id, result: Ok(()) },
            Err(WriteError::Refused(e)) => Self::Done { id, result: Err(e) },
            Err(WriteError::Unknown { why, expect, .. }) => Self::Unknown { id, why, expect },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Information only (nothing was sent).
    Note,
    Pending,
    Done,
    Failed(String),
    /// No answer came: it may still be applied (why). Watched until the object shows it.
    Unknown(String),
    /// A write whose answer never came, seen applied on the object afterwards.
    Landed,
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
    /// For a write whose outcome is unknown: what the object shows once it landed.
    pub watch: Option<super::io::Expect>,
}

/// How long after the API server answers again a write of unknown outcome may still not
/// show on its object before the dashboard says it was not applied (it keeps watching, and
/// says so if it lands after all).
pub const UNSEEN_AFTER: std::time::Duration = std::time::Duration::from_secs(30);

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
    /// What the confirmation shows: the diff from the values the edit started from.
    pub diff: Vec<DiffLine>,
    /// First diff line shown, when the diff is longer than the screen.
    pub diff_scroll: usize,
    /// How many diff lines the last draw had room for, so scrolling stops at the end.
    pub diff_window: std::cell::Cell<usize>,
    /// The patch in flight.
    pub saving: Option<u64>,
}

/// The `:` command line.
pub struct CommandLine {
    pub text: TextArea<'static>,
    /// While tab cycles: the text as typed before the first tab, and the match shown.
    pub cycle: Option<(String, usize)>,
}

impl CommandLine {
    /// The text completions are computed from: as typed, not as completed.
    pub fn typed(&self) -> String {
        match &self.cycle {
            Some((typed, _)) => typed.clone(),
            None => self.text.lines().concat(),
        }
    }
}

/// What the command line can complete for some text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Completion {
    /// What is completed: "command", "namespace" or "context" (empty: nothing).
    pub kind: &'static str,
    /// The text before the word being completed.
    pub head: String,
    /// The word being completed, as typed.
    pub stem: String,
    /// Candidates that start with the stem, sorted.
    pub matches: Vec<String>,
}

pub enum Overlay {
    Help,
    Filter(TextArea<'static>),
    Command(CommandLine),
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
    /// When the API server answered again after it last did not.
    pub answering_since: Option<Timestamp>,
    pub now: Timestamp,
    pub views: Arc<Views>,
    /// Ready and desired replicas of every Helm release's workloads (READY column).
    pub replicas: Arc<ReplicaMap>,
    /// Rows after filter and sort, in display order.
    pub rows: Vec<Row>,
    /// The rows in `rows`, by release, with the Helm release each shows: what to look
    /// for when one of them changes.
    row_cache: HashMap<ReleaseKey, (Row, ReleaseId)>,
    /// The rows in `rows` of each Helm release, for a change of its replica counts.
    rows_of_release: HashMap<ReleaseId, BTreeSet<ReleaseKey>>,
    pub selected: usize,
    pub marked: BTreeSet<ReleaseKey>,
    pub filter: String,
    pub sort: SortBy,
    pub reverse: bool,
    pub detail: Option<Detail>,
    pub editor: Option<Editor>,
    pub overlay: Option<Overlay>,
    pub feedback: Vec<Feedback>,
    /// Drafts of values edits left with esc, so nothing typed is lost: the whole text
    /// area, so reopening also puts back the cursor, the scroll position and undo; and
    /// the values the draft started from.
    pub drafts: HashMap<ReleaseKey, (TextArea<'static>, serde_json::Value)>,
    /// Rows per page, from the last draw.
    pub page: usize,
    pub switching: Option<String>,
    /// Namespace favourites of every context (keys `1`..`9`), kept in the config dir.
    pub favourites: Favourites,
    /// The cluster's namespaces, when this identity may list them (else empty).
    pub cluster_namespaces: Vec<String>,
    /// The kubeconfig's contexts, for `:ctx` completion.
    pub contexts: Vec<String>,
    /// Saving the favourites failed once this session (said once, not on every switch).
    favourites_unsaved: bool,
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
            answering_since: None,
            now,
            views: Arc::default(),
            replicas: Arc::default(),
            rows: Vec::new(),
            row_cache: HashMap::new(),
            rows_of_release: HashMap::new(),
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
            favourites: Favourites::default(),
            cluster_namespaces: Vec::new(),
            contexts: Vec::new(),
            favourites_unsaved: false,
            next_id: 0,
        }
    }

    /// What the dashboard does once it runs: the namespace in view joins the favourites,
    /// and the completions load.
    pub fn on_start(&mut self) -> Vec<Effect> {
        let mut effects = self.remember_scope();
        effects.push(Effect::LoadCompletions);
        effects
    }

    /// The namespace in view joins this context's favourites (a save when that changed
    /// them).
    fn remember_scope(&mut self) -> Vec<Effect> {
        match &self.scope {
            Scope::Namespace(ns) if self.favourites.visit(&self.context, ns) => {
                vec![Effect::SaveFavourites(self.favourites.clone())]
            }
            _ => Vec::new(),
        }
    }

    /// The namespaces `:ns` completes: the releases' and, when it could be listed, the
    /// cluster's.
    pub fn known_namespaces(&self) -> BTreeSet<String> {
        self.views
            .keys()
            .map(|k| k.namespace.clone())
            .chain(self.cluster_namespaces.iter().cloned())
            .collect()
    }

    /// What the command line completes for `line`: the command word, then the namespace
    /// of `ns` or the context of `ctx`.
    pub fn completions(&self, line: &str) -> Completion {
        let split = line.rfind(char::is_whitespace).map_or(0, |i| i + 1);
        let (head, stem) = line.split_at(split);
        let words: Vec<&str> = head.split_whitespace().collect();
        let (kind, candidates): (&'static str, Vec<String>) = match words.as_slice() {
            [] => (
                "command",
                ["all", "ctx", "ns", "quit"].map(str::to_owned).to_vec(),
            ),
            ["ns" | "namespace" | "n"] => {
                let mut all = vec!["all".to_owned()];
                all.extend(self.known_namespaces());
                ("namespace", all)
            }
            ["ctx" | "context"] => ("context", self.contexts.clone()),
            _ => return Completion::default(),
        };
        let mut matches: Vec<String> = candidates
            .into_iter()
            .filter(|c| c.starts_with(stem))
            .collect();
        if kind != "command" {
            matches.sort();
            matches.dedup();
        }
        Completion {
            kind,
            head: head.to_owned(),
            stem: stem.to_owned(),
            matches,
        }
    }

    /// Tab on the command line: the first match, then the next one at each tab.
    fn complete(&self, line: &mut CommandLine) {
        let (typed, next) = match &line.cycle {
            Some((typed, i)) => (typed.clone(), i + 1),
            None => (line.text.lines().concat(), 0),
        };
        let c = self.completions(&typed);
        if c.matches.is_empty() {
            return;
        }
        let i = next % c.matches.len();
        // A completed command word is followed by a space, ready for its argument.
        let space = if c.kind == "command" && c.matches.len() == 1 {
            " "
        } else {
            ""
        };
        let mut text = line_input(COMMAND_HINT);
        text.insert_str(format!("{}{}{space}", c.head, c.matches[i]));
        line.text = text;
        line.cycle = (c.matches.len() > 1).then_some((typed, i));
    }

    /// Takes a new snapshot of the views. Only the releases that changed since the last
    /// snapshot are looked at (the persistent maps' `diff` skips what they share), and
    /// each moves to its sorted place, so thousands of releases cost nothing per event.
    pub fn set_views(&mut self, views: Arc<Views>) {
        let old = std::mem::replace(&mut self.views, views);
        let changed = changed_keys(&old, &self.views);
        for key in &changed {
            if !self.views.contains_key(key) {
                self.marked.remove(key);
            }
        }
        self.update_rows(&changed);
        self.resolve_unknown();
    }

    /// The clock moved on: a write of unknown outcome that the object still does not show
    /// a while after the API server answers again is reported not applied (and still
    /// watched).
    pub fn tick(&mut self, now: Timestamp) {
        self.now = now;
        if let crate::engine::Connection::Disconnected { .. } = self.connection {
            return;
        }
        let since = self.answering_since;
        for f in &mut self.feedback {
            let Progress::Unknown(_) = f.progress else {
                continue;
            };
            let from = since.map_or(f.at, |s| s.max(f.at));
            if now.duration_since(from).as_secs() >= UNSEEN_AFTER.as_secs() as i64 {
                let key = f
                    .watch
                    .as_ref()
                    .map(|e| e.key().to_string())
                    .unwrap_or_default();
                f.progress = Progress::Failed(format!(
                    "not applied: the API server answers again and {key} does not show it (still watching; try again if it is still needed)"
                ));
                f.at = now;
            }
        }
    }

    /// Whether the API server answers, and since when.
    pub fn set_connection(&mut self, connection: crate::engine::Connection) {
        let was_down = matches!(
            self.connection,
            crate::engine::Connection::Disconnected { .. }
        );
        if was_down && connection == crate::engine::Connection::Connected {
            self.answering_since = Some(self.now);
        }
        self.connection = connection;
    }

    /// Writes of unknown outcome that the objects now show are reported applied.
    fn resolve_unknown(&mut self) {
        let now = self.now;
        for f in &mut self.feedback {
            let Some(expect) = &f.watch else { continue };
            let shown = self
                .views
                .get(expect.key())
                .is_some_and(|v| expect.landed(&v.release));
            if shown {
                f.progress = Progress::Landed;
                f.watch = None;
                f.at = now;
            }
        }
    }

    /// Moves the rows of `keys` to where they belong now, keeping the cursor on its
    /// release. A first list, or most releases changing at once, is cheaper sorted in
    /// one go.
    fn update_rows<'a>(&mut self, keys: impl IntoIterator<Item = &'a ReleaseKey> + Clone) {
        if keys.clone().into_iter().count() > 64 + self.rows.len() / 8 {
            self.refresh_rows();
            return;
        }
        let selected = self.rows.get(self.selected).map(|r| r.key.clone());
        for key in keys {
            self.update_row(key);
        }
        if let Some(key) = selected {
            self.select_key(&key);
        }
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
    }

    /// Whether a release belongs in the table: its namespace is in view and it matches
    /// the filter.
    fn shown(&self, row: &Row) -> bool {
        let in_view = match &self.scope {
            Scope::All => true,
            Scope::Namespace(ns) => *ns == row.key.namespace,
        };
        in_view && row.matches(&self.filter)
    }

    /// Moves one release's row to where it belongs now (or out of the table).
    fn update_row(&mut self, key: &ReleaseKey) {
        let order = |a: &Row, b: &Row| self.sort.compare(a, b, self.reverse);
        if let Some((old, release)) = self.row_cache.remove(key) {
            if let Ok(i) = self.rows.binary_search_by(|r| order(r, &old)) {
                self.rows.remove(i);
            }
            if let Some(keys) = self.rows_of_release.get_mut(&release) {
                keys.remove(key);
                if keys.is_empty() {
                    self.rows_of_release.remove(&release);
                }
            }
        }
        let Some(view) = self.views.get(key) else {
            return;
        };
        let row = Row::with_replicas(view, &self.replicas);
        if self.shown(&row) {
            let i = self
                .rows
                .binary_search_by(|r| order(r, &row))
                .unwrap_or_else(|i| i);
            self.rows.insert(i, row.clone());
            let release = release_id(view);
            self.rows_of_release
                .entry(release.clone())
                .or_default()
                .insert(key.clone());
            self.row_cache.insert(key.clone(), (row, release));
        }
    }

    /// Puts the cursor on a release's row, if it is in the table.
    fn select_key(&mut self, key: &ReleaseKey) {
        let found = match self.row_cache.get(key) {
            Some((row, _)) => self
                .rows
                .binary_search_by(|r| self.sort.compare(r, row, self.reverse))
                .ok(),
            None => None,
        };
        if let Some(i) = found {
            self.selected = i;
        }
    }

    /// Every row again: when the filter, the namespace in view or the sort order
    /// change, or most releases changed at once.
    fn refresh_rows(&mut self) {
        let key = self.rows.get(self.selected).map(|r| r.key.clone());
        let mut rows: Vec<(Row, ReleaseId)> = self
            .views
            .values()
            .map(|v| (Row::with_replicas(v, &self.replicas), v))
            .filter(|(r, _)| self.shown(r))
            .map(|(r, v)| (r, release_id(v)))
            .collect();
        rows.sort_by(|a, b| self.sort.compare(&a.0, &b.0, self.reverse));
        self.rows_of_release.clear();
        for (row, release) in &rows {
            self.rows_of_release
                .entry(release.clone())
                .or_default()
                .insert(row.key.clone());
        }
        self.rows = rows.iter().map(|(r, _)| r.clone()).collect();
        self.row_cache = rows
            .into_iter()
            .map(|(r, id)| (r.key.clone(), (r, id)))
            .collect();
        // Keep the cursor on the same release when rows move.
        if let Some(key) = key {
            self.select_key(&key);
        }
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
        self.marked.retain(|k| self.views.contains_key(k));
    }

    /// Takes a new snapshot of the workloads' replica counts: like the views, only the
    /// rows of releases whose counts changed move.
    pub fn set_replicas(&mut self, replicas: Arc<ReplicaMap>) {
        let old = std::mem::replace(&mut self.replicas, replicas);
        let keys: BTreeSet<ReleaseKey> = changed_keys(&old, &self.replicas)
            .iter()
            .filter_map(|release| self.rows_of_release.get(release))
            .flatten()
            .cloned()
            .collect();
        self.update_rows(&keys);
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
            watch: None,
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
            Overlay::Command(mut line) => match ev.code {
                KeyCode::Esc => Vec::new(),
                KeyCode::Enter => self.run_command(&line.text.lines().concat()),
                _ => {
                    if keymap::lookup(Context::Command, &ev) == Some(Action::Complete) {
                        self.complete(&mut line);
                    } else {
                        line.text.input(ev);
                        line.cycle = None;
                    }
                    self.overlay = Some(Overlay::Command(line));
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
            let known = match &scope {
                Scope::Namespace(ns) => self.known_namespaces().contains(ns),
                Scope::All => false,
            };
            self.scope = scope;
            self.marked.clear();
            self.selected = 0;
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
                self.overlay = Some(Overlay::Command(CommandLine {
                    text: line_input(COMMAND_HINT),
                    cycle: None,
                }));
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
            Action::Complete => {}
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
                watch: None,
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
            let expired = !matches!(last.progress, Progress::Pending | Progress::Unknown(_))
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
        let unknown = count(|p| matches!(p, Progress::Unknown(_)));
        let done = count(|p| matches!(p, Progress::Done | Progress::Landed));
        let failed: Vec<String> = members
            .iter()
            .filter_map(|f| match &f.progress {
                Progress::Failed(e) => Some(format!("{}: {e}", f.what)),
                _ => None,
            })
            .collect();
        let newest = members.iter().map(|f| f.at).max().unwrap_or(self.now);
        if pending + unknown == 0
            && self.now.duration_since(newest).as_secs() >= NOTICE_TTL.as_secs() as i64
        {
            return None;
        }
        let mut text = format!("{label}: {done} done");
        if pending > 0 {
            text.push_str(&format!(", {pending} pending"));
        }
        if unknown > 0 {
            text.push_str(&format!(
                ", {unknown} outcome unknown (no answer; they may still be applied, watching)"
            ));
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
        } else if unknown > 0 {
            Progress::Unknown(String::new())
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
        // A draft started from other values than the release has now: someone changed
        // them meanwhile. The draft is kept, and said to be older, so that applying it
        // (whose diff is against the values of now) is never a silent overwrite.
        let mut error = None;
        let draft = self.drafts.remove(&key).map(|(text, started_from)| {
            if started_from != original {
                error = Some(
                    "spec.values changed since this draft was started: the apply diff shows \
                     what it changes now, including undoing that change"
                        .to_owned(),
                );
            }
            text
        });
        let text = draft.unwrap_or_else(|| {
            let empty = original.as_object().is_none_or(serde_json::Map::is_empty);
            let lines = if empty {
                vec![String::new()]
            } else {
                crate::yaml::to_string(&original)
                    .lines()
                    .map(str::to_owned)
                    .collect()
            };
            let mut text = TextArea::new(lines);
            text.set_line_number_style(self.theme.muted());
            text.set_cursor_line_style(ratatui::style::Style::default());
            text
        });
        self.editor = Some(Editor {
            key,
            text,
            original,
            error,
            confirm: None,
            diff: Vec::new(),
            diff_scroll: 0,
            diff_window: std::cell::Cell::new(usize::MAX),
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
                    // The moving keys scroll a long diff; any other key goes back to
                    // editing, draft intact.
                    if let Some(action) = keymap::lookup(Context::Global, &ev) {
                        let max = ed.diff.len().saturating_sub(ed.diff_window.get());
                        let page = self.page.max(1);
                        let scroll = ed.diff_scroll;
                        let moved = match action {
                            Action::Up => Some(scroll.saturating_sub(1)),
                            Action::Down => Some(scroll + 1),
                            Action::PageUp => Some(scroll.saturating_sub(page)),
                            Action::PageDown => Some(scroll + page),
                            Action::Top => Some(0),
                            Action::Bottom => Some(max),
                            _ => None,
                        };
                        if let Some(to) = moved {
                            ed.diff_scroll = to.min(max);
                            ed.confirm = Some(values);
                        }
                    }
                    self.editor = Some(ed);
                    return Vec::new();
                }
            }
        }
        match keymap::lookup(Context::Editor, &ev) {
            Some(Action::Back) => {
                self.drafts.insert(ed.key, (ed.text, ed.original));
            }
            Some(Action::Save) => {
                match parse_values(&ed.text.lines().join("\n")) {
                    Ok(values) => {
                        ed.error = None;
                        ed.diff = values_diff(&ed.original, &values);
                        ed.diff_scroll = 0;
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

    /// Takes an IO result back; returns the IO it leads to.
    pub fn on_io(&mut self, result: IoResult) -> Vec<Effect> {
        match result {
            IoResult::Late { id, outcome } => {
                let now = self.now;
                if let Some(f) = self
                    .feedback
                    .iter_mut()
                    .find(|f| f.id == id && f.watch.is_some())
                {
                    match outcome {
                        super::io::LateOutcome::Applied => {
                            f.progress = Progress::Landed;
                            f.watch = None;
                            f.at = now;
                        }
                        super::io::LateOutcome::Refused(e) => {
                            f.progress = Progress::Failed(format!("not applied: {e}"));
                            f.watch = None;
                            f.at = now;
                        }
                        super::io::LateOutcome::Unknown => {}
                    }
                }
            }
            IoResult::Unknown { id, why, expect } => {
                let now = self.now;
                if let Some(f) = self.feedback.iter_mut().find(|f| f.id == id) {
                    f.progress = Progress::Unknown(why.clone());
                    f.watch = Some(expect);
                    f.at = now;
                }
                if let Some(ed) = &mut self.editor
                    && ed.saving == Some(id)
                {
                    ed.saving = None;
                    ed.error = Some(format!(
                        "outcome unknown: {why}; your draft is kept and the release is watched"
                    ));
                }
                // It may have landed before the answer was given up on.
                self.resolve_unknown();
            }
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

const COMMAND_HINT: &str = "ns NAME | ns all | ctx NAME  (tab completes)";

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

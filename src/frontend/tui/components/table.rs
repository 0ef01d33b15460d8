//! The release table: one row per release in view, filtered and sorted, kept in order
//! one release at a time as the views change (thousands of releases cost nothing per
//! event), with the cursor, marks for bulk actions and the filter.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row as TableRow, Table};

use super::fit;
use crate::cluster::client::Scope;
use crate::engine::{ReleaseKey, Views};
use crate::frontend::inventory::{Kind, Others};
use crate::health::replicas::{ReleaseId, ReplicaMap};
use crate::helm::release::Status;

/// What the table shows: its own state, the releases, and whether they are the last
/// known state.
pub struct TableScreen<'a> {
    pub theme: &'a crate::frontend::tui::theme::Theme,
    pub now: k8s_openapi::jiff::Timestamp,
    pub table: &'a ReleaseTable,
    pub views: &'a crate::engine::Views,
    pub others: &'a crate::frontend::inventory::Others,
    pub scope: &'a Scope,
    pub stale_for: Option<i64>,
    /// In a fleet (more than one cluster): the dashboard's own cluster's name, which
    /// the CLUSTER column shows for its rows.
    pub fleet: Option<&'a str>,
    /// For how many seconds each other cluster's rows have been its last known state.
    pub stale_clusters: &'a HashMap<Cluster, i64>,
}

impl TableScreen<'_> {
    /// For how long `r`'s cluster has not answered (its row is its last known state).
    fn stale_of(&self, r: &Row) -> Option<i64> {
        match &r.id.cluster {
            None => self.stale_for,
            Some(c) => self.stale_clusters.get(c).copied(),
        }
    }

    fn cluster_of<'r>(&'r self, r: &'r Row) -> &'r str {
        r.id.cluster.as_deref().unwrap_or(self.fleet.unwrap_or(""))
    }
}
use crate::frontend::tui::fleet_model::Fleet;
use crate::frontend::tui::keymap::Action;
use crate::frontend::tui::suspension;
use crate::frontend::tui::view_model::{Cluster, Row, RowKey, SortBy, State, age};

/// What the rows are made from: the wheelhouse HelmReleases, the Flux HelmReleases and
/// stored Helm releases, which stored releases a HelmRelease manages (shown once, under
/// their manager), their workloads' replica counts, and the namespaces in view.
pub struct Source<'a> {
    pub views: &'a Views,
    pub others: &'a Others,
    pub managed: &'a HashMap<ReleaseKey, usize>,
    pub replicas: &'a ReplicaMap,
    pub scope: &'a Scope,
    /// A suspend since before this, outside any freeze, is forgotten (`/is:forgotten`).
    pub forgotten_before: Timestamp,
    /// The dashboard's own cluster (rows without a cluster in their key), by name.
    pub home: &'a str,
    /// The fleet's other clusters, each with its own releases.
    pub fleet: &'a Fleet,
}

/// One cluster's part of the sources.
struct Parts<'a> {
    views: &'a Views,
    others: &'a Others,
    managed: &'a HashMap<ReleaseKey, usize>,
    replicas: &'a ReplicaMap,
}

impl Parts<'_> {
    fn row(&self, id: &RowKey) -> Option<Row> {
        match id.kind {
            Kind::Wheelhouse => self
                .views
                .get(&id.key)
                .map(|v| Row::with_replicas(v, self.replicas)),
            Kind::Flux => self.others.flux.get(&id.key).map(|hr| {
                Row::of_flux(
                    id.key.clone(),
                    hr,
                    self.replicas,
                    &self.others.chart_sources,
                )
            }),
            Kind::Helm => self
                .others
                .helm
                .get(&id.key)
                .filter(|s| s.status != Status::Uninstalled && !self.managed.contains_key(&id.key))
                .map(|s| Row::of_stored(s, self.replicas)),
        }
    }

    fn ids<'a>(&'a self, cluster: Option<&'a Cluster>) -> impl Iterator<Item = RowKey> + 'a {
        let of = move |kind: Kind| {
            move |k: &ReleaseKey| RowKey::new(kind, k.clone()).in_cluster(cluster)
        };
        self.views
            .keys()
            .map(of(Kind::Wheelhouse))
            .chain(self.others.flux.keys().map(of(Kind::Flux)))
            .chain(self.others.helm.keys().map(of(Kind::Helm)))
    }
}

impl<'s> Source<'s> {
    fn parts(&self, cluster: Option<&Cluster>) -> Option<Parts<'s>> {
        match cluster {
            None => Some(Parts {
                views: self.views,
                others: self.others,
                managed: self.managed,
                replicas: self.replicas,
            }),
            Some(c) => self.fleet.data(c).map(|d| Parts {
                views: &d.views,
                others: &d.others,
                managed: &d.managed,
                replicas: &d.replicas,
            }),
        }
    }

    /// The row of `id` as the sources show it now; `None` when it is gone, or when it
    /// is a stored release that a HelmRelease manages or that was uninstalled.
    pub fn row(&self, id: &RowKey) -> Option<Row> {
        let mut row = self.parts(id.cluster.as_ref())?.row(id)?;
        row.id.cluster = id.cluster.clone();
        Some(row)
    }

    /// Every row the sources could show, of every cluster.
    fn ids(&self) -> Vec<RowKey> {
        let mut ids: Vec<RowKey> = Vec::new();
        if let Some(home) = self.parts(None) {
            ids.extend(home.ids(None));
        }
        for cluster in self.fleet.members.keys() {
            if let Some(parts) = self.parts(Some(cluster)) {
                ids.extend(parts.ids(Some(cluster)));
            }
        }
        ids
    }

    /// The name of the cluster a row lives in.
    pub fn cluster_name<'a>(&'a self, id: &'a RowKey) -> &'a str {
        id.cluster.as_deref().unwrap_or(self.home)
    }
}

#[derive(Default)]
pub struct ReleaseTable {
    /// Rows after filter and sort, in display order.
    pub rows: Vec<Arc<Row>>,
    /// The rows in `rows` (the same allocations): what to look for when one of them
    /// changes.
    row_cache: HashMap<RowKey, Arc<Row>>,
    /// The rows in `rows` of each Helm release, for a change of its replica counts. A
    /// release has one row or two: a `Vec` (a `BTreeSet` node per release took 12 MB at
    /// 20,000 releases).
    rows_of_release: HashMap<ReleaseId, Vec<RowKey>>,
    /// How many of `rows` are in each state, kept as rows come and go: the bottom border
    /// shows them at every frame, and counting 20,000 rows four times a second was most
    /// of an idle dashboard's drawing.
    states: StateCounts,
    /// The same counts per cluster of a fleet (the fleet header's tiles).
    cluster_states: HashMap<Option<Cluster>, StateCounts>,
    pub selected: usize,
    pub marked: BTreeSet<RowKey>,
    pub filter: String,
    pub sort: SortBy,
    pub reverse: bool,
}

impl ReleaseTable {
    /// The row under the cursor.
    pub fn selected_row(&self) -> Option<&Row> {
        self.rows.get(self.selected).map(|r| &**r)
    }

    /// How many of the rows shown are in each state.
    pub fn states(&self) -> &StateCounts {
        &self.states
    }

    /// How many of the rows shown of `cluster` (`None`: the dashboard's own) are in each
    /// state.
    pub fn states_of(&self, cluster: Option<&Cluster>) -> StateCounts {
        self.cluster_states
            .get(&cluster.cloned())
            .cloned()
            .unwrap_or_default()
    }

    /// The row of `key`, if it is in the table.
    pub fn row(&self, key: &RowKey) -> Option<&Row> {
        self.row_cache.get(key).map(|r| &**r)
    }

    /// The release under the cursor.
    pub fn selected_key(&self) -> Option<&RowKey> {
        self.selected_row().map(|r| &r.id)
    }

    /// The rows of the Helm releases in `releases` (whose replica counts changed).
    pub fn rows_of(&self, releases: &[ReleaseId]) -> BTreeSet<RowKey> {
        releases
            .iter()
            .filter_map(|release| self.rows_of_release.get(release))
            .flatten()
            .cloned()
            .collect()
    }

    /// Moves the rows of `keys` to where they belong now, keeping the cursor on its
    /// release. A first list, or most releases changing at once, is cheaper sorted in
    /// one go.
    pub fn update<'a>(
        &mut self,
        source: &Source,
        keys: impl IntoIterator<Item = &'a RowKey> + Clone,
    ) {
        if keys.clone().into_iter().count() > 64 + self.rows.len() / 8 {
            self.refresh(source);
            return;
        }
        let selected = self.selected_key().cloned();
        for key in keys {
            self.update_row(source, key);
        }
        if let Some(key) = selected {
            self.select_key(&key);
        }
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
    }

    /// Whether a release belongs in the table: its namespace is in view and it matches
    /// the filter.
    fn shown(&self, source: &Source, row: &Row) -> bool {
        let in_view = match source.scope {
            Scope::All => true,
            Scope::Namespace(ns) => *ns == row.id.key.namespace,
        };
        if !in_view {
            return false;
        }
        let (clusters, text) = split_filter(&self.filter);
        let cluster = source.cluster_name(&row.id).to_lowercase();
        if !clusters.iter().all(|c| cluster.contains(c.as_str())) {
            return false;
        }
        if text.trim() == suspension::FILTER {
            return row
                .suspended_since
                .is_some_and(|since| since < source.forgotten_before);
        }
        let (terms, text) = chart_terms(&text);
        terms.iter().all(|t| t.matches(row)) && row.matches(&text)
    }

    /// Moves one release's row to where it belongs now (or out of the table).
    fn update_row(&mut self, source: &Source, key: &RowKey) {
        let (sort, reverse) = (self.sort, self.reverse);
        let order = |a: &Row, b: &Row| sort.compare(a, b, reverse);
        if let Some(old) = self.row_cache.remove(key) {
            if let Ok(i) = self.rows.binary_search_by(|r| order(r, &old)) {
                self.rows.remove(i);
                self.states.remove(old.state);
                if let Some(c) = self.cluster_states.get_mut(&old.id.cluster) {
                    c.remove(old.state);
                }
            }
            if let Some(keys) = self.rows_of_release.get_mut(&old.release) {
                keys.retain(|k| k != key);
                if keys.is_empty() {
                    self.rows_of_release.remove(&old.release);
                }
            }
        }
        let Some(row) = source.row(key) else {
            self.marked.remove(key);
            return;
        };
        if self.shown(source, &row) {
            let i = self
                .rows
                .binary_search_by(|r| order(r, &row))
                .unwrap_or_else(|i| i);
            let row = Arc::new(row);
            self.states.add(row.state);
            self.cluster_states
                .entry(row.id.cluster.clone())
                .or_default()
                .add(row.state);
            self.rows.insert(i, row.clone());
            link(&mut self.rows_of_release, &row.release, key);
            self.row_cache.insert(key.clone(), row);
        }
    }

    /// Puts the cursor on a release's row, if it is in the table.
    fn select_key(&mut self, key: &RowKey) {
        let found = match self.row_cache.get(key) {
            Some(row) => self
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
    pub fn refresh(&mut self, source: &Source) {
        let key = self.selected_key().cloned();
        // The old rows go first: at 20,000 releases each copy is tens of MB.
        self.rows = Vec::new();
        self.row_cache = HashMap::new();
        self.rows_of_release.clear();
        let mut rows: Vec<Arc<Row>> = source
            .ids()
            .into_iter()
            .filter_map(|id| source.row(&id))
            .filter(|r| self.shown(source, r))
            .map(Arc::new)
            .collect();
        rows.sort_by(|a, b| self.sort.compare(a, b, self.reverse));
        for row in &rows {
            link(&mut self.rows_of_release, &row.release, &row.id);
        }
        self.row_cache = rows.iter().map(|r| (r.id.clone(), r.clone())).collect();
        self.states = StateCounts::of(&rows);
        self.cluster_states = HashMap::new();
        for row in &rows {
            self.cluster_states
                .entry(row.id.cluster.clone())
                .or_default()
                .add(row.state);
        }
        self.rows = rows;
        // Keep the cursor on the same release when rows move.
        if let Some(key) = key {
            self.select_key(&key);
        }
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
        self.marked.retain(|k| source.row(k).is_some());
    }

    /// A new filter (the cursor goes to the top).
    pub fn set_filter(&mut self, source: &Source, filter: String) {
        self.filter = filter;
        self.selected = 0;
        self.refresh(source);
    }

    /// The table's own keys: moving, sorting, marking. Whether the action was the
    /// table's.
    pub fn on_action(&mut self, source: &Source, action: Action, page: usize) -> bool {
        let len = self.rows.len();
        match action {
            Action::Up
            | Action::Down
            | Action::PageUp
            | Action::PageDown
            | Action::Top
            | Action::Bottom => {
                if len > 0 {
                    self.selected = match action {
                        Action::Up => self.selected.saturating_sub(1),
                        Action::Down => (self.selected + 1).min(len - 1),
                        Action::PageUp => self.selected.saturating_sub(page),
                        Action::PageDown => (self.selected + page).min(len - 1),
                        Action::Top => 0,
                        _ => len - 1,
                    };
                }
            }
            Action::SortNext => {
                self.sort = self.sort.next();
                self.refresh(source);
            }
            Action::SortReverse => {
                self.reverse = !self.reverse;
                self.refresh(source);
            }
            Action::Mark => {
                if let Some(key) = self.selected_key().cloned() {
                    if !self.marked.remove(&key) {
                        self.marked.insert(key);
                    }
                    self.selected = (self.selected + 1).min(len.saturating_sub(1));
                }
            }
            Action::MarkAll => {
                let visible: Vec<RowKey> = self.rows.iter().map(|r| r.id.clone()).collect();
                self.marked.extend(visible);
            }
            Action::ClearMarks => self.marked.clear(),
            _ => return false,
        }
        true
    }
}

/// The filter's `cluster:NAME` terms (lowercase; a row's cluster name must contain each)
/// and the rest of its text, which the row's columns must contain.
pub fn split_filter(filter: &str) -> (Vec<String>, String) {
    if !filter.contains("cluster:") {
        return (Vec::new(), filter.to_owned());
    }
    let mut clusters = Vec::new();
    let mut rest = Vec::new();
    for word in filter.split_whitespace() {
        match word.strip_prefix("cluster:") {
            Some(c) => clusters.push(c.to_lowercase()),
            None => rest.push(word),
        }
    }
    (clusters, rest.join(" "))
}

/// A `chart:NAME` or `version:CONSTRAINT` term of the filter (`/chart:redis
/// version:<18.3`): where a bad chart version runs, on one screen.
#[derive(Debug)]
pub enum ChartTerm {
    /// The row's chart name contains it (lowercase).
    Chart(String),
    /// The row's chart version satisfies it (Helm's constraint syntax); `None`: the
    /// constraint does not parse, and no row satisfies it.
    Version(Option<crate::helm::source::version::Constraint>),
}

impl ChartTerm {
    fn matches(&self, row: &Row) -> bool {
        match self {
            Self::Chart(name) => row.chart.to_lowercase().contains(name.as_str()),
            Self::Version(Some(c)) => crate::helm::source::version::parse_version(&row.version)
                .is_some_and(|v| c.matches(&v)),
            Self::Version(None) => false,
        }
    }
}

/// The `chart:` and `version:` terms of a filter's text, and the rest of it.
pub fn chart_terms(text: &str) -> (Vec<ChartTerm>, String) {
    if !text.contains("chart:") && !text.contains("version:") {
        return (Vec::new(), text.to_owned());
    }
    let mut terms = Vec::new();
    let mut rest = Vec::new();
    for word in text.split_whitespace() {
        if let Some(name) = word.strip_prefix("chart:") {
            terms.push(ChartTerm::Chart(name.to_lowercase()));
        } else if let Some(c) = word.strip_prefix("version:") {
            terms.push(ChartTerm::Version(
                crate::helm::source::version::Constraint::parse(c).ok(),
            ));
        } else {
            rest.push(word);
        }
    }
    (terms, rest.join(" "))
}

/// Records that `key`'s row shows `release`.
fn link(rows_of_release: &mut HashMap<ReleaseId, Vec<RowKey>>, release: &ReleaseId, key: &RowKey) {
    let keys = rows_of_release
        .entry(release.clone())
        .or_insert_with(|| Vec::with_capacity(1));
    if !keys.contains(key) {
        keys.push(key.clone());
    }
}

fn sort_title(sort: SortBy, reverse: bool) -> String {
    let by = match sort {
        SortBy::Name => "name",
        SortBy::State => "state",
        SortBy::LastChange => "last change",
        SortBy::Revision => "revision",
    };
    format!("sorted by {by}{}", if reverse { " (reversed)" } else { "" })
}

pub fn draw(f: &mut Frame, app: &TableScreen<'_>, area: Rect) {
    let t = app.theme;
    let mut counts = app.table.states().to_string();
    if app.stale_for.is_some() && app.fleet.is_none() {
        counts = format!("last known: {counts}");
    }
    // The sort order sits in the top border, which has room for it at 80 columns.
    // Until the watch's first list completes, the count is only what has arrived.
    let count = if app.views.listed {
        app.table.rows.len().to_string()
    } else {
        format!("loading ({} so far)", app.views.len())
    };
    let mut title = format!(
        " Releases {count} · {} ",
        sort_title(app.table.sort, app.table.reverse)
    );
    if !app.table.filter.is_empty() {
        title.push_str(&format!("(filter: {}) ", app.table.filter));
    }
    if !app.table.marked.is_empty() {
        title.push_str(&format!("[{} marked] ", app.table.marked.len()));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.base().fg(t.border))
        .title(Span::styled(title, t.header()))
        .title_bottom(Line::from(format!(" {counts} ")).style(t.muted()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    if app.table.rows.is_empty() {
        let msg = if !app.views.listed {
            "Listing HelmReleases…"
        } else if app.views.is_empty() && app.others.flux.is_empty() && app.others.helm.is_empty() {
            "No Helm releases here (yet). The table fills in live as they appear."
        } else {
            "No release matches the filter (esc clears it)."
        };
        f.render_widget(Paragraph::new(msg).style(t.muted()), inner);
        return;
    }
    let wide = inner.width >= 110;
    let show_ns = wide || matches!(*app.scope, Scope::All);
    let height = inner.height.saturating_sub(1).max(1) as usize;
    let offset = if app.table.selected < height {
        0
    } else {
        app.table.selected + 1 - height
    };
    let rows = &app.table.rows;
    let visible = &rows[offset.min(rows.len())..(offset + height).min(rows.len())];
    let w = |f: &dyn Fn(&Row) -> usize, min: usize, max: usize| {
        visible
            .iter()
            .map(|r| f(r))
            .max()
            .unwrap_or(0)
            .clamp(min, max) as u16
    };
    let mut header = vec![
        "",
        "CLUSTER",
        "NAMESPACE",
        "NAME",
        "KIND",
        "CHART",
        "VERSION",
        "REV",
        "STATE",
        "READY",
        "CHANGED",
        "MESSAGE",
    ];
    // The state column is as wide as its widest text ("⣾ Progressing 119m59s left" is
    // the longest, 26 columns) and never shrinks: the columns that give way when the
    // terminal is narrow are namespace, name, chart and version (see `fit_columns`).
    let mut widths: Vec<u16> = vec![
        2,
        w(&|r| app.cluster_of(r).chars().count(), 7, 16),
        w(&|r| r.id.key.namespace.len(), 9, 16),
        w(&|r| r.id.key.name.len(), 4, if wide { 28 } else { 18 }),
        4,
        w(&|r| r.chart.len(), 5, 16),
        w(&|r| r.version.len(), 7, 10),
        3,
        w(&|r| state_cell(app, r).chars().count(), 5, 64),
        w(&|r| r.ready_text().chars().count(), 5, 16),
        7,
    ];
    // In ascending order: removed from the last.
    let mut drop = Vec::new();
    if app.fleet.is_none() {
        drop.push(1);
    }
    if !show_ns {
        drop.push(2);
    }
    if !wide {
        drop.push(6);
    }
    // (column, narrowest it may become), in the order they give way: the name last.
    let mut shrinkable = vec![(6, 5), (5, 5), (2, 6), (1, 6), (3, 8)];
    shrinkable.retain(|(c, _)| !drop.contains(c));
    for i in drop.iter().rev() {
        header.remove(*i);
        widths.remove(*i);
        for (c, _) in &mut shrinkable {
            if *c > *i {
                *c -= 1;
            }
        }
    }
    // Spacing between every column, the message column included.
    let spacing = widths.len() as u16;
    let budget = inner.width.saturating_sub(spacing + MESSAGE_MIN);
    fit_columns(&mut widths, &shrinkable, budget);
    // The message takes the rest; every cell is cut to its column with `…`.
    let used: u16 = widths.iter().sum::<u16>() + spacing;
    let mut cut: Vec<usize> = widths.iter().map(|w| *w as usize).collect();
    cut.push(inner.width.saturating_sub(used) as usize);
    let widths: Vec<Constraint> = widths
        .into_iter()
        .map(Constraint::Length)
        .chain([Constraint::Fill(1)])
        .collect();
    let rows = visible.iter().enumerate().map(|(i, r)| {
        let marked = app.table.marked.contains(&r.id);
        let here = offset + i == app.table.selected;
        // The cursor and marks are symbols too, not only colour.
        let gutter = match (here, marked) {
            (true, true) => "›●",
            (true, false) => "› ",
            (false, true) => " ●",
            (false, false) => "  ",
        };
        let plain = ratatui::style::Style::default();
        let mut cells: Vec<(String, ratatui::style::Style)> = vec![
            (gutter.to_owned(), plain),
            (app.cluster_of(r).to_owned(), t.base().fg(t.accent)),
            (r.id.key.namespace.clone(), plain),
            (r.id.key.name.clone(), plain),
            (kind_tag(r.id.kind).to_owned(), t.muted()),
            (r.chart.clone(), plain),
            (r.version.clone(), plain),
            (
                r.revision.map_or_else(|| "-".into(), |v| v.to_string()),
                plain,
            ),
            (
                state_cell(app, r),
                if app.stale_of(r).is_some() {
                    t.muted()
                } else {
                    t.state(r.state)
                },
            ),
            (r.ready_text(), plain),
            (
                r.last_change
                    .map_or_else(|| "-".into(), |c| age(c, app.now)),
                plain,
            ),
            (r.message.clone(), t.muted()),
        ];
        for i in drop.iter().rev() {
            cells.remove(*i);
        }
        let cells: Vec<Cell> = cells
            .into_iter()
            .zip(&cut)
            .map(|((text, style), width)| Cell::from(fit(&text, *width)).style(style))
            .collect();
        let style = if here {
            t.selected()
        } else if marked {
            t.base().fg(t.marked)
        } else {
            t.base()
        };
        TableRow::new(cells).style(style)
    });
    let table = Table::new(rows, widths)
        .header(TableRow::new(header).style(t.header()))
        .column_spacing(1)
        .style(t.base());
    f.render_widget(table, inner);
}

/// The KIND column: four columns wide, the filter matches the whole word.
fn kind_tag(kind: Kind) -> &'static str {
    match kind {
        Kind::Wheelhouse => "wh",
        Kind::Flux => "flux",
        Kind::Helm => "helm",
    }
}

/// The message column keeps at least this much room when others give way.
const MESSAGE_MIN: u16 = 5;

/// Narrows the `shrinkable` columns (index, narrowest width), one after the other in the
/// order given, until all `widths` fit in `budget`; other columns keep their width (the
/// state column among them, so its time left is never cut).
fn fit_columns(widths: &mut [u16], shrinkable: &[(usize, u16)], budget: u16) {
    for &(c, min) in shrinkable {
        let total: u16 = widths.iter().sum();
        let excess = total.saturating_sub(budget);
        widths[c] -= excess.min(widths[c].saturating_sub(min));
    }
}

/// The states in the order the bottom border counts them.
const STATES: [State; 7] = [
    State::Ready,
    State::Progressing,
    State::Failed,
    State::Canceled,
    State::Drifted,
    State::Suspended,
    State::Unknown,
];

/// How many rows are in each state (indexed as `STATES`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StateCounts([usize; STATES.len()]);

impl StateCounts {
    /// The counts of `rows`, counted afresh.
    pub fn of(rows: &[Arc<Row>]) -> Self {
        let mut counts = Self::default();
        for row in rows {
            counts.add(row.state);
        }
        counts
    }

    /// `state`'s place in `STATES`; a match, so that a new state cannot go uncounted.
    fn slot(state: State) -> usize {
        match state {
            State::Ready => 0,
            State::Progressing => 1,
            State::Failed => 2,
            State::Canceled => 3,
            State::Drifted => 4,
            State::Suspended => 5,
            State::Unknown => 6,
        }
    }

    fn add(&mut self, state: State) {
        self.0[Self::slot(state)] += 1;
    }

    fn remove(&mut self, state: State) {
        let n = &mut self.0[Self::slot(state)];
        *n = n.saturating_sub(1);
    }
}

/// `✓ 3 ready  ⟳ 1 progressing`: the states present, in `STATES` order.
impl std::fmt::Display for StateCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut first = true;
        for (state, n) in STATES.iter().zip(self.0) {
            if n == 0 {
                continue;
            }
            if !first {
                f.write_str("  ")?;
            }
            first = false;
            write!(f, "{} {n} {}", state.symbol(), state.word().to_lowercase())?;
        }
        Ok(())
    }
}

/// The state column: while disconnected never a confident state, only the last one
/// known and its age.
fn state_cell(app: &TableScreen<'_>, r: &Row) -> String {
    match app.stale_of(r) {
        Some(age) => format!(
            "? {} ({} old)",
            r.state.word(),
            crate::text::age::coarse(age)
        ),
        None => r.state_text(app.now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_state_is_counted_in_its_own_place() {
        for (i, state) in STATES.iter().enumerate() {
            assert_eq!(StateCounts::slot(*state), i, "{state:?}");
        }
    }
}

//! The detail view of one release: tabs for its overview (conditions, rollout with the
//! failing pods, tracked config), history, values, manifest and events. Secret data is
//! masked.

mod events;
mod history;
mod overview;
mod values;

use events::events;
use history::{history, stored_history};
use overview::{other_overview, overview};
use values::{other_values, values};

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Paragraph, Tabs};

use crate::engine::Role;
use crate::frontend::inventory::Kind;
use crate::frontend::tui::keymap::Action;
use crate::frontend::tui::view_model::{DetailData, Fetch, Row, RowKey};

/// What the detail view shows besides its own state: the releases, their workloads'
/// replicas, who reconciles, whom releases act as, and the row under the cursor.
pub struct DetailScreen<'a> {
    pub theme: &'a crate::frontend::tui::theme::Theme,
    pub now: k8s_openapi::jiff::Timestamp,
    pub readonly: bool,
    pub views: &'a crate::engine::Views,
    pub others: &'a crate::frontend::inventory::Others,
    pub replicas: &'a crate::health::replicas::ReplicaMap,
    pub role: &'a Role,
    pub tenancy: &'a crate::cluster::tenancy::Policy,
    pub selected_row: Option<&'a Row>,
}

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

/// The detail view's state: which release, which tab, how far scrolled, and what was
/// loaded for it.
pub struct Detail {
    pub key: RowKey,
    pub tab: Tab,
    pub scroll: u16,
    pub data: DetailData,
    /// The revision under the history's cursor (index, newest first): what `b` rolls
    /// back to (helm CLI releases).
    pub pick: usize,
    /// The revision marked (space in the History tab) to diff the picked one against.
    pub base: Option<i32>,
}

impl Detail {
    pub fn new(key: RowKey, tab: Tab) -> Self {
        Self {
            key,
            tab,
            scroll: 0,
            data: DetailData::default(),
            pick: 0,
            base: None,
        }
    }

    /// Whether the history's cursor picks a revision (the History tab, once Helm's
    /// storage is read).
    pub fn picking(&self) -> bool {
        self.tab == Tab::History && matches!(self.data.revisions, Fetch::Loaded(_))
    }

    /// The newest stored revision, when the History tab has read them.
    pub fn newest_revision(&self) -> Option<i32> {
        match &self.data.revisions {
            Fetch::Loaded(r) => r.first().map(|l| l.revision),
            _ => None,
        }
    }

    /// The revision under the history's cursor, when the History tab shows it.
    pub fn picked_revision(&self) -> Option<i32> {
        match &self.data.revisions {
            Fetch::Loaded(r) if self.picking() => r.get(self.pick).map(|l| l.revision),
            _ => None,
        }
    }

    /// A stored revision as a confirmation names it: chart, app version, status and when
    /// it was deployed.
    pub fn revision_text(&self, revision: i32) -> Option<String> {
        let Fetch::Loaded(lines) = &self.data.revisions else {
            return None;
        };
        let l = lines.iter().find(|l| l.revision == revision)?;
        let when = l
            .updated
            .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
            .unwrap_or_else(|| "never".into());
        Some(format!(
            "revision {revision}: chart {}{}, {}, last deployed {when}; as helm rollback: \
             hooks run, a new revision is recorded",
            l.chart,
            if l.app_version.is_empty() {
                String::new()
            } else {
                format!(" (app {})", l.app_version)
            },
            l.status
        ))
    }

    /// Shows `tab` from its top.
    pub fn show(&mut self, tab: Tab) {
        self.tab = tab;
        self.scroll = 0;
    }

    /// The moving keys scroll; tab goes to the next tab. Whether the action was the view's.
    pub fn on_action(&mut self, action: Action, page: usize) -> bool {
        if self.picking() && action == Action::Mark {
            let picked = self.picked_revision();
            self.base = if self.base == picked { None } else { picked };
            return true;
        }
        if self.picking()
            && let Fetch::Loaded(lines) = &self.data.revisions
            && matches!(action, Action::Up | Action::Down)
        {
            let last = lines.len().saturating_sub(1);
            self.pick = match action {
                Action::Up => self.pick.saturating_sub(1),
                _ => (self.pick + 1).min(last),
            };
            return true;
        }
        let page = page as u16;
        self.scroll = match action {
            Action::Up => self.scroll.saturating_sub(1),
            Action::Down => self.scroll.saturating_add(1),
            Action::PageUp => self.scroll.saturating_sub(page),
            Action::PageDown => self.scroll.saturating_add(page),
            Action::Top => 0,
            Action::Bottom => u16::MAX / 2,
            Action::NextTab => {
                let i = Tab::ALL.iter().position(|t| *t == self.tab).unwrap_or(0);
                self.show(Tab::ALL[(i + 1) % Tab::ALL.len()]);
                return true;
            }
            _ => return false,
        };
        true
    }
}

pub fn draw(f: &mut Frame, app: &DetailScreen<'_>, d: &Detail, area: Rect) {
    let t = &app.theme;
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.base().fg(t.border))
        .title(Span::styled(format!(" {} ", d.key), t.header()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let [tabs, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(inner);
    let titles: Vec<Line> = Tab::ALL
        .iter()
        .map(|tab| {
            let key = match tab {
                Tab::Overview => "d",
                Tab::History => "h",
                Tab::Values => "v",
                Tab::Manifest => "m",
                Tab::Events => "E",
            };
            Line::from(format!("{} ({key})", tab.title()))
        })
        .collect();
    let selected = Tab::ALL.iter().position(|x| *x == d.tab).unwrap_or(0);
    f.render_widget(
        Tabs::new(titles)
            .select(selected)
            .style(t.muted())
            .highlight_style(t.header().add_modifier(Modifier::REVERSED)),
        tabs,
    );
    let view = match d.key.kind {
        Kind::Wheelhouse => app.views.get(&d.key.key),
        _ => None,
    };
    let row = app.selected_row;
    if view.is_none() && (d.key.kind == Kind::Wheelhouse || row.is_none()) {
        f.render_widget(
            Paragraph::new(
                "This release is gone (deleted, out of scope, or now managed by a HelmRelease).",
            )
            .style(t.muted()),
            body,
        );
        return;
    }
    // A wheelhouse release draws from its HelmRelease view; the other kinds from their row
    // and what was fetched.
    let other = || row.expect("checked above");
    let text = match (d.tab, view) {
        (Tab::Overview, Some(v)) => overview(app, d, v),
        (Tab::Overview, None) => other_overview(app, d, other()),
        // Helm's storage once read (as `helm history`, with a cursor); status.history
        // until then.
        (Tab::History, Some(_)) if d.picking() => stored_history(app, d),
        (Tab::History, Some(v)) => history(app, d, v),
        (Tab::History, None) => stored_history(app, d),
        (Tab::Values, Some(v)) => values(app, d, v),
        (Tab::Values, None) => other_values(app, d),
        (Tab::Manifest, _) => fetched(app, &d.data.helm, |h| {
            Text::from(format!(
                "# revision {} (Secret data masked)\n{}",
                h.revision, h.manifest
            ))
        }),
        (Tab::Events, _) => events(app, d),
    };
    f.render_widget(
        Paragraph::new(text)
            .style(t.base())
            .scroll((d.scroll.min(u16::MAX / 2), 0)),
        body,
    );
}

/// Whom everything done for the release is done as, and why, when it is a ServiceAccount
/// (none: the engine's own identity, the cluster is open and the release names none).
fn acts_as(app: &DetailScreen<'_>, hr: &crate::api::HelmRelease) -> Option<String> {
    match (app.tenancy.identity(hr), &hr.spec.service_account_name) {
        (crate::cluster::tenancy::Identity::Engine, _) => None,
        (sa, Some(_)) => Some(format!("{sa} (serviceAccountName)")),
        (sa, None) => Some(format!("{sa} (the cluster's default service account)")),
    }
}

fn section<'a>(app: &DetailScreen<'_>, title: &str) -> Line<'a> {
    Line::from(Span::styled(title.to_owned(), app.theme.header()))
}

fn fetched<'a, T>(app: &DetailScreen<'_>, f: &Fetch<T>, show: impl Fn(&T) -> Text<'a>) -> Text<'a> {
    match f {
        Fetch::Loading => Text::styled("loading…", app.theme.muted()),
        Fetch::Failed(e) => Text::styled(format!("✗ {e}"), app.theme.base().fg(app.theme.error)),
        Fetch::Loaded(v) => show(v),
    }
}

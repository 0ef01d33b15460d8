//! The detail view of one release: tabs for its overview (conditions, rollout with the
//! failing pods, tracked config), history, values, manifest and events. Secret data is
//! masked.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{Block, Borders, Paragraph, Tabs};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::engine::{Phase, ReleaseView, Role};
use crate::inventory::Kind;
use crate::tracking::Selection;
use crate::tui::app::App;
use crate::tui::keymap::Action;
use crate::tui::model::{
    DetailData, Fetch, Row, RowKey, State, Workload, age, left, mask_values, replicas_of,
    short_duration, spinner,
};

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

pub fn draw(f: &mut Frame, app: &App, d: &Detail, area: Rect) {
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
    let row = app.selected_row();
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

/// The overview of a Flux HelmRelease or a stored release: state, replicas, its
/// conditions (Flux) or Helm status (stored), rollout with failing pods, history, events.
fn other_overview<'a>(app: &App, d: &Detail, row: &Row) -> Text<'a> {
    let t = &app.theme;
    let mut lines = vec![Line::from(vec![
        Span::styled("State    ", t.muted()),
        Span::styled(row.state_text(app.now), t.state(row.state)),
        Span::styled(
            format!(
                "   chart {} {}   revision {}",
                row.chart,
                row.version,
                row.revision.map_or("-".into(), |r| r.to_string())
            ),
            t.base(),
        ),
    ])];
    lines.push(Line::from(vec![
        Span::styled("Managed  ", t.muted()),
        Span::raw(match d.key.kind {
            Kind::Flux => {
                "by Flux's helm-controller (s/S suspend/resume, r reconcile, F force, R reset)"
            }
            _ => "by the helm CLI, no HelmRelease (h then b rolls back, D uninstalls)",
        }),
    ]));
    lines.push(Line::from(vec![
        Span::styled("Message  ", t.muted()),
        Span::raw(row.message.replace('\n', " ")),
    ]));
    lines.extend(release_replica_lines(app, row));
    lines.push(Line::raw(""));
    if d.key.kind == Kind::Flux {
        lines.push(section(app, "Conditions"));
        let hr = app.others.flux.get(&d.key.key);
        let conditions = hr
            .and_then(|hr| hr.status.as_ref())
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        lines.extend(condition_lines(app, conditions));
        if let Some(s) = hr.and_then(|hr| hr.status.as_ref()) {
            lines.push(Line::from(vec![
                Span::styled("  last attempted revision ", t.muted()),
                Span::raw(
                    s.last_attempted_revision
                        .clone()
                        .unwrap_or_else(|| "-".into()),
                ),
                Span::styled("   failures ", t.muted()),
                Span::raw(s.failures.to_string()),
            ]));
        }
    } else {
        lines.push(section(app, "Helm status"));
        lines.extend(
            fetched(app, &d.data.helm, |h| {
                Text::raw(format!(
                    "  {} (revision {}): {}",
                    h.status, h.revision, h.description
                ))
            })
            .lines,
        );
    }
    lines.push(Line::raw(""));
    lines.push(section(app, "Rollout"));
    lines.extend(workload_lines(app, d));
    lines.push(Line::raw(""));
    lines.push(section(app, "History (h for all)"));
    lines.extend(stored_history(app, d).lines.into_iter().take(4));
    lines.push(Line::raw(""));
    lines.push(section(app, "Events (E for all)"));
    lines.extend(events(app, d).lines.into_iter().take(5));
    Text::from(lines)
}

/// A release's replicas by workload, with each one's readiness by the engine's rules.
fn release_replica_lines<'a>(app: &App, row: &Row) -> Vec<Line<'a>> {
    let t = &app.theme;
    let Some(replicas) = app
        .replicas
        .get(&row.release)
        .filter(|r| !r.workloads.is_empty())
    else {
        return vec![Line::from(vec![
            Span::styled("Ready    ", t.muted()),
            Span::styled(
                "- (no Deployment, StatefulSet or DaemonSet seen)",
                t.muted(),
            ),
        ])];
    };
    let (ready, desired) = replicas.total();
    let mut lines = vec![Line::from(vec![
        Span::styled("Ready    ", t.muted()),
        Span::raw(format!("{ready}/{desired} replicas")),
    ])];
    for w in &replicas.workloads {
        let (state, why) = match &w.readiness {
            crate::health::readiness::Readiness::Ready => (State::Ready, String::new()),
            crate::health::readiness::Readiness::InProgress(why) => {
                (State::Progressing, why.clone())
            }
            crate::health::readiness::Readiness::Failed(why) => (State::Failed, why.clone()),
        };
        lines.push(Line::from(vec![
            Span::styled(format!("         {} ", state.symbol()), t.state(state)),
            Span::raw(format!("{}/{} {}/{} ", w.kind, w.name, w.ready, w.desired)),
            Span::styled(why, t.muted()),
        ]));
    }
    lines
}

/// `helm history`: every stored revision, newest first; for a helm CLI release a cursor
/// picks the one `b` rolls back to.
fn stored_history<'a>(app: &App, d: &Detail) -> Text<'a> {
    let t = &app.theme;
    fetched(app, &d.data.revisions, |revisions| {
        if revisions.is_empty() {
            return Text::styled("  no revisions stored", t.muted());
        }
        let chart_w = revisions
            .iter()
            .map(|r| r.chart.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let status_w = revisions
            .iter()
            .map(|r| r.status.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let mut lines = vec![Line::styled(
            format!(
                "  {:<4} {:<sw$} {:<chart_w$} {:<11} {:>8}  DESCRIPTION",
                "REV",
                "STATUS",
                "CHART",
                "APP VERSION",
                "UPDATED",
                sw = status_w + 2,
            ),
            t.muted(),
        )];
        for (i, r) in revisions.iter().enumerate() {
            let state = match r.status.as_str() {
                "deployed" | "superseded" => State::Ready,
                "failed" => State::Failed,
                s if s.starts_with("pending") => State::Progressing,
                _ => State::Unknown,
            };
            let picked = d.picking() && i == d.pick;
            let marker = match (picked, d.base == Some(r.revision)) {
                (true, true) => "›◆",
                (true, false) => "› ",
                (false, true) => " ◆",
                (false, false) => "  ",
            };
            let line = Line::from(vec![
                Span::raw(format!("{marker}{:<4} ", r.revision)),
                Span::styled(
                    format!("{} {:<status_w$} ", state.symbol(), r.status),
                    t.state(state),
                ),
                Span::raw(format!(
                    "{:<chart_w$} {:<11} {:>8}  ",
                    r.chart,
                    r.app_version,
                    r.updated.map_or("-".into(), |u| age(u, app.now)),
                )),
                Span::styled(r.description.clone(), t.muted()),
            ]);
            lines.push(if picked {
                line.style(t.selected())
            } else {
                line
            });
        }
        if d.picking() {
            lines.push(Line::raw(""));
            let rollback = if app.readonly || d.key.kind == Kind::Flux {
                ""
            } else {
                " · b roll back (diff, asks)"
            };
            lines.push(Line::styled(
                format!(
                    "  j/k pick · enter show · x diff vs {} · space mark ◆{rollback}",
                    if d.base.is_some() { "◆" } else { "newest" }
                ),
                t.muted(),
            ));
        }
        Text::from(lines)
    })
}

/// Values of a Flux HelmRelease (its spec.values, then the release's) or of a stored
/// release (the release's), credentials masked.
fn other_values<'a>(app: &App, d: &Detail) -> Text<'a> {
    let mut lines = Vec::new();
    if let Some(hr) = app.others.flux.get(&d.key.key) {
        lines.push(section(
            app,
            "spec.values (Flux; edited where Flux reads it from)",
        ));
        let spec = hr
            .spec
            .values
            .as_ref()
            .map(|v| crate::yaml::to_string(&mask_values(v)))
            .unwrap_or_else(|| "{}\n".into());
        lines.extend(spec.lines().map(|l| Line::raw(format!("  {l}"))));
        lines.push(Line::raw(""));
    }
    lines.extend(release_values(
        app,
        d,
        "Values of the last Helm release (credentials masked)",
    ));
    Text::from(lines)
}

/// The values the last Helm release was made with, under `title`.
fn release_values<'a>(app: &App, d: &Detail, title: &str) -> Vec<Line<'a>> {
    let t = &app.theme;
    let mut lines = vec![section(app, title)];
    match &d.data.helm {
        Fetch::Loading => lines.push(Line::styled("  loading…", t.muted())),
        Fetch::Failed(e) => lines.push(Line::styled(format!("  ✗ {e}"), t.base().fg(t.error))),
        Fetch::Loaded(h) => lines.extend(h.values.lines().map(|l| Line::raw(format!("  {l}")))),
    }
    lines
}

fn condition_lines<'a>(app: &App, conditions: &[Condition]) -> Vec<Line<'a>> {
    let t = &app.theme;
    if conditions.is_empty() {
        return vec![Line::styled("  none yet", t.muted())];
    }
    conditions
        .iter()
        .map(|c| {
            let (sym, state) = match (c.type_.as_str(), c.status.as_str()) {
                (_, "True") if c.type_ == "Stalled" || c.type_ == "Reconciling" => {
                    ("!", State::Progressing)
                }
                (_, "True") => ("✓", State::Ready),
                (_, "False") if c.type_ == "Stalled" || c.type_ == "Reconciling" => {
                    ("✓", State::Ready)
                }
                (_, "False") => ("✗", State::Failed),
                _ => ("?", State::Unknown),
            };
            Line::from(vec![
                Span::styled(
                    format!("  {sym} {:<12} {:<7} ", c.type_, c.status),
                    t.state(state),
                ),
                Span::styled(format!("{:<20} ", c.reason), t.base()),
                Span::styled(
                    format!("{:>6}  ", age(c.last_transition_time.0, app.now)),
                    t.muted(),
                ),
                Span::raw(c.message.replace('\n', " ")),
            ])
        })
        .collect()
}

/// The rollout section: each workload of the release's manifest, its counts, its pods
/// that are not ready and why, and its tracked config.
fn workload_lines<'a>(app: &App, d: &Detail) -> Vec<Line<'a>> {
    let t = &app.theme;
    let mut lines = Vec::new();
    match &d.data.workloads {
        Fetch::Loading => lines.push(Line::styled("  loading workloads…", t.muted())),
        Fetch::Failed(e) => lines.push(Line::styled(
            format!("  ✗ cannot read workloads: {e}"),
            t.base().fg(t.error),
        )),
        Fetch::Loaded(ws) if ws.is_empty() => lines.push(Line::styled(
            "  no Deployments, StatefulSets or DaemonSets",
            t.muted(),
        )),
        Fetch::Loaded(ws) => {
            for w in ws {
                let ok = w.ready >= w.desired && w.updated >= w.desired && w.failing.is_empty();
                let state = if ok { State::Ready } else { State::Progressing };
                lines.push(Line::from(vec![
                    Span::styled(
                        format!("  {} {:<32} ", state.symbol(), w.object),
                        t.state(state),
                    ),
                    Span::raw(format!(
                        "desired {}  updated {}  ready {}  available {}",
                        w.desired, w.updated, w.ready, w.available
                    )),
                ]));
                for (pod, why) in &w.failing {
                    lines.push(Line::from(vec![
                        Span::styled(format!("      ✗ pod {pod}: "), t.state(State::Failed)),
                        Span::raw(why.clone()),
                    ]));
                }
                lines.extend(tracking_lines(app, w));
            }
        }
    }
    lines
}

/// Whom everything done for the release is done as, and why, when it is a ServiceAccount
/// (none: the engine's own identity, the cluster is open and the release names none).
fn acts_as(app: &App, hr: &crate::api::HelmRelease) -> Option<String> {
    match (app.tenancy.identity(hr), &hr.spec.service_account_name) {
        (crate::tenancy::Identity::Engine, _) => None,
        (sa, Some(_)) => Some(format!("{sa} (serviceAccountName)")),
        (sa, None) => Some(format!("{sa} (the cluster's default service account)")),
    }
}

fn section<'a>(app: &App, title: &str) -> Line<'a> {
    Line::from(Span::styled(title.to_owned(), app.theme.header()))
}

fn overview<'a>(app: &App, d: &Detail, view: &ReleaseView) -> Text<'a> {
    let t = &app.theme;
    let row = Row::with_replicas(view, &app.replicas);
    let hr = &view.release;
    let mut lines = vec![
        Line::from(vec![
            Span::styled("State    ", t.muted()),
            Span::styled(row.state_text(app.now), t.state(row.state)),
            Span::styled(
                format!(
                    "   chart {} {}   revision {}",
                    row.chart,
                    row.version,
                    row.revision.map_or("-".into(), |r| r.to_string())
                ),
                t.base(),
            ),
        ]),
        Line::from(vec![
            Span::styled("Source   ", t.muted()),
            Span::raw(hr.source_text()),
        ]),
        Line::from(vec![
            Span::styled("Phase    ", t.muted()),
            Span::raw(
                if view.live.phase == Phase::Idle && !matches!(app.role, Role::Leader) {
                    "(the engine runs elsewhere; status below is what it wrote)".to_owned()
                } else {
                    view.live.phase.to_string()
                },
            ),
        ]),
    ];
    // Tenancy in play: say whom everything done for the release is done as.
    if let Some(identity) = acts_as(app, hr) {
        lines.insert(
            2,
            Line::from(vec![
                Span::styled("Acts as  ", t.muted()),
                Span::raw(identity),
            ]),
        );
    }
    lines.extend(replica_lines(app, view, &row));
    if let Some(deadline) = row.deadline {
        let (r, total) = row.wait_progress.unwrap_or((0, 0));
        lines.push(Line::from(vec![
            Span::styled("Wait     ", t.muted()),
            Span::styled(
                format!(
                    "{} {} left · {r}/{total} resources ready",
                    spinner(app.now),
                    short_duration(left(deadline, app.now).as_secs() as i64)
                ),
                t.state(State::Progressing),
            ),
        ]));
    }
    if hr.spec.suspend {
        lines.push(Line::styled(
            if app.readonly {
                "Suspended: no new actions start"
            } else {
                "Suspended: no new actions start (S resumes)"
            },
            t.state(State::Suspended),
        ));
    }
    lines.push(Line::raw(""));
    lines.push(section(app, "Conditions"));
    let conditions = hr
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    lines.extend(condition_lines(app, conditions));
    lines.push(Line::raw(""));
    lines.push(section(app, "Rollout"));
    if let Some(w) = &view.live.wait {
        for (object, what) in &w.progress.pending {
            lines.push(Line::from(vec![
                Span::styled(format!("  ◐ {object}: "), t.state(State::Progressing)),
                Span::raw(what.clone()),
            ]));
        }
    }
    lines.extend(workload_lines(app, d));
    lines.push(Line::raw(""));
    lines.push(section(app, "History (h for all)"));
    lines.extend(history(app, d, view).lines.into_iter().take(4));
    lines.push(Line::raw(""));
    lines.push(section(app, "Events (E for all)"));
    lines.extend(events(app, d).lines.into_iter().take(5));
    Text::from(lines)
}

/// Ready replicas of the release's workloads: the READY column's sum, then each
/// workload's own count.
fn replica_lines<'a>(app: &App, view: &ReleaseView, row: &Row) -> Vec<Line<'a>> {
    let t = &app.theme;
    let Some(replicas) = replicas_of(view, &app.replicas) else {
        return vec![Line::from(vec![
            Span::styled("Ready    ", t.muted()),
            Span::styled(
                "- (no Deployment, StatefulSet or DaemonSet seen)",
                t.muted(),
            ),
        ])];
    };
    let (ready, desired) = row.ready.unwrap_or_default();
    let mut lines = vec![Line::from(vec![
        Span::styled("Ready    ", t.muted()),
        Span::raw(format!("{ready}/{desired} replicas")),
    ])];
    let release_ns = view.release.target_namespace();
    for w in &replicas.workloads {
        let state = if w.ready >= w.desired {
            State::Ready
        } else {
            State::Progressing
        };
        let object = if w.namespace == release_ns {
            format!("{}/{}", w.kind, w.name)
        } else {
            format!("{}/{}/{}", w.kind, w.namespace, w.name)
        };
        lines.push(Line::from(vec![
            Span::styled(format!("         {} ", state.symbol()), t.state(state)),
            Span::raw(format!("{object} {}/{}", w.ready, w.desired)),
        ]));
    }
    lines
}

/// What config tracking looks after in one workload: each consumed object and whether it
/// exists, and whether the pods wait behind the config-pending gate.
fn tracking_lines<'a>(app: &App, w: &Workload) -> Vec<Line<'a>> {
    let t = &app.theme;
    let Some(tracked) = &w.tracking else {
        return vec![Line::styled("      config not tracked", t.muted())];
    };
    let hash = tracked
        .hash
        .as_deref()
        .map(|h| format!(" (hash {})", &h[..h.len().min(12)]))
        .unwrap_or_default();
    let mut lines = vec![Line::styled(
        format!("      config tracked{hash}"),
        t.muted(),
    )];
    if tracked.objects.is_empty() {
        lines.push(Line::styled(
            "        consumes no ConfigMap or Secret",
            t.muted(),
        ));
    }
    for o in &tracked.objects {
        let (symbol, state) = match (o.exists, o.object.optional) {
            (true, _) => ("✓", State::Ready),
            (false, true) => ("·", State::Suspended),
            (false, false) => ("✗", State::Failed),
        };
        let mut spans = vec![
            Span::styled(format!("        {symbol} "), t.state(state)),
            Span::raw(format!("{}/{}", o.object.kind, o.object.name)),
        ];
        if let Selection::Keys(keys) = &o.object.selection {
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            spans.push(Span::styled(
                format!("  keys {}", keys.join(", ")),
                t.muted(),
            ));
        }
        if o.object.optional {
            spans.push(Span::styled("  optional", t.muted()));
        }
        if !o.exists {
            spans.push(Span::styled("  missing", t.state(state)));
        }
        lines.push(Line::from(spans));
    }
    if tracked.gated || w.held > 0 {
        let waiting: Vec<String> = tracked
            .objects
            .iter()
            .filter(|o| !o.exists && !o.object.optional)
            .map(|o| format!("{}/{}", o.object.kind, o.object.name))
            .collect();
        let pods = match w.held {
            1 => "1 pod".to_owned(),
            n => format!("{n} pods"),
        };
        let why = if waiting.is_empty() {
            String::new()
        } else {
            format!(" until {} exists", waiting.join(", "))
        };
        lines.push(Line::from(vec![
            Span::styled("      ⏸ gated: ", t.state(State::Progressing)),
            Span::raw(format!(
                "{pods} held by {}{why}",
                crate::tracking::CONFIG_PENDING_GATE
            )),
        ]));
    }
    lines
}

fn history<'a>(app: &App, d: &Detail, view: &ReleaseView) -> Text<'a> {
    let t = &app.theme;
    let history = view
        .release
        .status
        .as_ref()
        .map(|s| s.history.as_slice())
        .unwrap_or_default();
    // The revision in flight is in Helm's storage before status.history records it.
    let in_flight = match &d.data.helm {
        Fetch::Loaded(h) if history.first().is_none_or(|f| h.revision > f.version) => Some(h),
        _ => None,
    };
    if history.is_empty() && in_flight.is_none() {
        return Text::styled("  no revisions yet", t.muted());
    }
    // Columns as wide as their widest cell (a `pending-rollback` status or a long chart
    // name would otherwise push the rest of its row out of line).
    // A Git chart's revision names its commit, as `git log --oneline` abbreviates it.
    let chart_of = |h: &crate::api::Snapshot| match &h.commit {
        Some(c) => format!(
            "{}-{}@{}",
            h.chart_name,
            h.chart_version,
            &c[..c.len().min(12)]
        ),
        None => format!("{}-{}", h.chart_name, h.chart_version),
    };
    let rev_w = history
        .iter()
        .map(|h| h.version.to_string().len())
        .chain(in_flight.map(|h| h.revision.to_string().len()))
        .chain([3])
        .max()
        .unwrap_or(3);
    let status_w = history
        .iter()
        .map(|h| h.status.len())
        .chain(in_flight.map(|h| h.status.len()))
        .chain([6])
        .max()
        .unwrap_or(6);
    let chart_w = history
        .iter()
        .map(|h| chart_of(h).len())
        .chain(in_flight.map(|h| h.chart.len()))
        .chain([5])
        .max()
        .unwrap_or(5);
    let action_w = history
        .iter()
        .map(|h| h.action.as_deref().unwrap_or_default().len())
        .chain([6])
        .max()
        .unwrap_or(6);
    let mut lines = vec![Line::styled(
        format!(
            "  {:<rev_w$} {:<sw$} {:<chart_w$} {:<action_w$} {:>8}  {}",
            "REV",
            "STATUS",
            "CHART",
            "ACTION",
            "DEPLOYED",
            "DIGEST",
            sw = status_w + 2,
        ),
        t.muted(),
    )];
    if let Some(h) = in_flight {
        let state = if h.status.starts_with("pending") {
            State::Progressing
        } else {
            State::Unknown
        };
        lines.push(Line::from(vec![
            Span::raw(format!("  {:<rev_w$} ", h.revision)),
            Span::styled(
                format!("{} {:<status_w$} ", state.symbol(), h.status),
                t.state(state),
            ),
            Span::raw(format!("{:<chart_w$} ", h.chart)),
            Span::styled(h.description.clone(), t.muted()),
        ]));
    }
    for h in history {
        let state = match h.status.as_str() {
            "deployed" | "superseded" => State::Ready,
            "failed" => State::Failed,
            s if s.starts_with("pending") => State::Progressing,
            _ => State::Unknown,
        };
        let digest: String = h.config_digest.chars().take(15).collect();
        lines.push(Line::from(vec![
            Span::raw(format!("  {:<rev_w$} ", h.version)),
            Span::styled(
                format!("{} {:<status_w$} ", state.symbol(), h.status),
                t.state(state),
            ),
            Span::raw(format!(
                "{:<chart_w$} {:<action_w$} {:>8}  {digest}",
                chart_of(h),
                h.action.clone().unwrap_or_default(),
                h.last_deployed
                    .as_ref()
                    .map_or("-".into(), |d| age(d.0, app.now)),
            )),
        ]));
    }
    Text::from(lines)
}

fn values<'a>(app: &App, d: &Detail, view: &ReleaseView) -> Text<'a> {
    let spec = view
        .release
        .spec
        .values
        .as_ref()
        .map(|v| crate::yaml::to_string(&mask_values(v)))
        .unwrap_or_else(|| "{}\n".into());
    let mut lines = vec![section(
        app,
        if app.readonly {
            "spec.values"
        } else {
            "spec.values (e edits)"
        },
    )];
    lines.extend(spec.lines().map(|l| Line::raw(format!("  {l}"))));
    lines.push(Line::raw(""));
    lines.extend(release_values(
        app,
        d,
        "Values of the last Helm release (valuesFrom merged; credentials masked)",
    ));
    Text::from(lines)
}

fn fetched<'a, T>(app: &App, f: &Fetch<T>, show: impl Fn(&T) -> Text<'a>) -> Text<'a> {
    match f {
        Fetch::Loading => Text::styled("loading…", app.theme.muted()),
        Fetch::Failed(e) => Text::styled(format!("✗ {e}"), app.theme.base().fg(app.theme.error)),
        Fetch::Loaded(v) => show(v),
    }
}

fn events<'a>(app: &App, d: &Detail) -> Text<'a> {
    let t = &app.theme;
    fetched(app, &d.data.events, |events| {
        if events.is_empty() {
            return Text::styled("  no events", t.muted());
        }
        Text::from(
            events
                .iter()
                .map(|e| {
                    let warn = e.kind == "Warning";
                    let (sym, state) = if warn {
                        ("!", State::Failed)
                    } else {
                        ("·", State::Ready)
                    };
                    Line::from(vec![
                        Span::styled(format!("  {sym} {:<7} ", e.kind), t.state(state)),
                        Span::styled(
                            format!("{:>6} ", e.age.map_or("-".into(), |a| age(a, app.now))),
                            t.muted(),
                        ),
                        Span::raw(format!(
                            "{:<20} {}{}",
                            e.reason,
                            e.message.replace('\n', " "),
                            if e.count > 1 {
                                format!(" (x{})", e.count)
                            } else {
                                String::new()
                            }
                        )),
                    ])
                })
                .collect::<Vec<_>>(),
        )
    })
}

//! Drawing: components that render from [`App`] and nothing else.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span, Text};
use ratatui::widgets::{
    Block, Borders, Cell, Clear, Paragraph, Row as TableRow, Table, Tabs, Wrap,
};

use super::app::{App, Detail, Overlay, Progress, Tab};
use super::diff::DiffLine;
use super::keymap;
use super::model::{
    Fetch, Row, SortBy, State, Workload, age, left, mask_values, replicas_of, short_duration,
    spinner,
};
use crate::client::Scope;
use crate::engine::{Phase, ReleaseView, Role};
use crate::tracking::Selection;

pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    f.render_widget(Block::default().style(app.theme.base()), area);
    // The favourites row goes with the table, where the number keys work.
    let table = app.editor.is_none() && app.detail.is_none();
    let [header, favourites, body, status, hints] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(u16::from(table)),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(f, app, header);
    if table {
        draw_favourites(f, app, favourites);
    }
    if let Some(ed) = &app.editor {
        draw_editor(f, app, ed, body);
    } else if let Some(d) = &app.detail {
        draw_detail(f, app, d, body);
    } else {
        draw_table(f, app, body);
    }
    draw_status(f, app, status);
    match &app.overlay {
        Some(Overlay::Command(line)) => draw_suggestions(f, app, line, hints),
        _ => draw_hints(f, app, hints),
    }
    match &app.overlay {
        // Everything under the header, so the whole keymap fits 80x24.
        Some(Overlay::Help) => draw_help(
            f,
            app,
            Rect {
                y: header.bottom(),
                height: area.height.saturating_sub(header.height),
                ..area
            },
        ),
        Some(Overlay::Confirm { question, .. }) => {
            draw_question(f, app, body, question, "y: yes   n/esc: no")
        }
        _ => {}
    }
    if let Some(ed) = &app.editor
        && ed.confirm.is_some()
    {
        draw_values_confirm(f, app, ed, body);
    }
}

/// The apply question of a values edit, above the diff of what it changes. A diff longer
/// than the screen scrolls between "N lines above" and "N more lines" markers, so the
/// question and its answers always stay on screen.
fn draw_values_confirm(f: &mut Frame, app: &App, ed: &super::app::Editor, area: Rect) {
    let t = &app.theme;
    let question = format!("Apply these values to spec.values of {}?", ed.key);
    // Borders, a blank line, the question and its answers.
    const AROUND: usize = 5;
    let room = (area.height as usize).saturating_sub(AROUND);
    let mut lines: Vec<Line> = ed
        .diff
        .iter()
        .map(|l| {
            let style = match l {
                DiffLine::Hunk(_) => t.muted(),
                DiffLine::Same(_) => t.base(),
                DiffLine::Removed(_) => t.base().fg(t.failed),
                DiffLine::Added(_) => t.base().fg(t.ready),
            };
            Line::styled(l.text(), style)
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::styled(
            "(no change: these are the values the edit started from)",
            t.muted(),
        ));
    }
    let long = lines.len() > room;
    ed.diff_window.set(lines.len());
    if long {
        // A marker line above and below the part shown.
        let window = room.saturating_sub(2).max(1);
        ed.diff_window.set(window);
        let start = ed.diff_scroll.min(lines.len().saturating_sub(window));
        let below = lines.len().saturating_sub(start + window);
        let mut shown: Vec<Line> = Vec::with_capacity(window + 2);
        shown.push(Line::styled(
            match start {
                0 => "(start of the diff)".to_owned(),
                n => format!("… {n} lines above"),
            },
            t.muted(),
        ));
        shown.extend(lines.drain(start..start + window.min(lines.len() - start)));
        shown.push(Line::styled(
            match below {
                0 => "(end of the diff)".to_owned(),
                n => format!("… {n} more lines"),
            },
            t.muted(),
        ));
        lines = shown;
    }
    let answers = if long {
        "y: apply   j/k pgup/pgdn g/G: scroll   other keys: keep editing"
    } else {
        "y: apply   any other key: keep editing"
    };
    let widest = lines
        .iter()
        .map(Line::width)
        .chain([question.chars().count(), answers.len()])
        .max()
        .unwrap_or(0);
    let width = (widest as u16 + 2).clamp(60, 100);
    let rect = centered(area, width, (lines.len() + AROUND) as u16);
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        question,
        t.base().add_modifier(Modifier::BOLD),
    ));
    lines.push(Line::styled(answers, t.muted()));
    f.render_widget(Clear, rect);
    f.render_widget(
        Paragraph::new(lines).style(t.base()).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(Style::default().fg(t.progressing))
                .title(" Confirm: spec.values, old → new (credentials masked) "),
        ),
        rect,
    );
}

fn draw_header(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.theme;
    let scope = match &app.scope {
        Scope::All => "all namespaces".to_owned(),
        Scope::Namespace(ns) => ns.clone(),
    };
    let coverage = app.coverage.short();
    let mut role = match (&app.role, app.readonly) {
        (_, true) => "client (read-only: engine not run here)".to_owned(),
        (Role::Leader, _) => format!("engine here: {coverage}"),
        (Role::Follower { holder }, _) => format!("client: {coverage} by {holder}"),
        (Role::Unable { reason }, _) => format!("client: no engine here: {reason}"),
        (Role::Unknown, _) => format!("engine: taking the lease for {coverage}…"),
    };
    // Who reconciles the rest: releases shown here that another engine covers.
    let elsewhere = app.views.values().filter(|v| v.elsewhere.is_some()).count();
    if elsewhere > 0 {
        role.push_str(&format!("; {elsewhere} by other engines"));
    }
    let mut context = app.context.clone();
    let mut scope = scope;
    if app.readonly {
        // " wheelhouse " + " ctx " + "  ns " + "  [READ-ONLY]": what is left is shared by
        // the context and namespace names, the longer one shortened first, so the marker
        // is never cut (an EKS context ARN alone is 50 columns).
        let room = (area.width as usize).saturating_sub(12 + 5 + 5 + 13);
        shorten_pair(&mut context, &mut scope, room);
    }
    let mut spans = vec![
        Span::styled(" wheelhouse ", t.selected()),
        Span::styled(" ctx ", t.muted()),
        Span::styled(context, t.header()),
        Span::styled("  ns ", t.muted()),
        Span::styled(scope, t.header()),
    ];
    // Before the role text, so a narrow terminal cuts the latter, never this.
    if app.readonly {
        spans.push(Span::styled(
            "  [READ-ONLY]",
            t.base().fg(t.error).add_modifier(Modifier::BOLD),
        ));
    }
    spans.push(Span::styled("  ", t.muted()));
    spans.push(Span::styled(role, t.base().fg(t.accent)));
    if let Some(s) = &app.switching {
        spans.push(Span::styled(
            format!("  switching to {s}…"),
            t.base().fg(t.progressing),
        ));
    }
    f.render_widget(Paragraph::new(Line::from(spans)).style(t.base()), area);
}

/// The namespace favourites, as k9s shows them under its header: `<0> all  <1> apps …`,
/// the one in view highlighted and bracketed. Cut with `…` when they do not fit.
fn draw_favourites(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.theme;
    let current = match &app.scope {
        Scope::All => None,
        Scope::Namespace(ns) => Some(ns.as_str()),
    };
    let items: Vec<(String, &str, bool)> =
        std::iter::once(("0".to_owned(), "all", current.is_none()))
            .chain(
                app.favourites
                    .of(&app.context)
                    .iter()
                    .enumerate()
                    .map(|(i, ns)| {
                        (
                            (i + 1).to_string(),
                            ns.as_str(),
                            current == Some(ns.as_str()),
                        )
                    }),
            )
            .collect();
    let width = area.width as usize;
    let mut spans = Vec::new();
    let mut used = 0;
    for (i, (key, name, here)) in items.iter().enumerate() {
        let name = if *here {
            format!("[{name}]")
        } else {
            name.to_string()
        };
        let w = 2 + key.len() + 2 + name.chars().count();
        let more = i + 1 < items.len();
        if used + w + if more { 2 } else { 0 } > width {
            spans.push(Span::styled(" …", t.muted()));
            break;
        }
        used += w;
        spans.push(Span::styled(format!(" <{key}>"), t.base().fg(t.accent)));
        spans.push(Span::raw(" "));
        spans.push(if *here {
            Span::styled(name, t.header())
        } else {
            Span::styled(name, t.muted())
        });
    }
    f.render_widget(Paragraph::new(Line::from(spans)).style(t.base()), area);
}

/// The command line's suggestions, under it as k9s shows them: what tab completes to,
/// the one shown bracketed.
fn draw_suggestions(f: &mut Frame, app: &App, line: &super::app::CommandLine, area: Rect) {
    let t = &app.theme;
    let c = app.completions(&line.typed());
    let keys = "tab completes · enter runs · esc cancels";
    let text = if c.kind.is_empty() {
        Line::styled(keys, t.muted())
    } else if c.matches.is_empty() {
        Line::styled(
            format!("no {} starts with {:?} · {keys}", c.kind, c.stem),
            t.muted(),
        )
    } else {
        let current = line.cycle.as_ref().map(|(_, i)| *i);
        let width = area.width as usize;
        let label = format!("{}s: ", c.kind);
        let mut used = label.chars().count();
        let mut spans = vec![Span::styled(label, t.muted())];
        // Start at the match shown when the ones before it would push it out.
        let fits = |from: usize, to: usize| {
            c.matches[from..=to]
                .iter()
                .map(|m| m.chars().count() + 3)
                .sum::<usize>()
                + used
                + 8
                <= width
        };
        let mut start = 0;
        if let Some(i) = current {
            while start < i && !fits(start, i) {
                start += 1;
            }
        }
        if start > 0 {
            spans.push(Span::styled("… ", t.muted()));
            used += 2;
        }
        for (i, m) in c.matches.iter().enumerate().skip(start) {
            let here = current == Some(i);
            let shown = if here { format!("[{m}]") } else { m.clone() };
            let w = shown.chars().count() + 1;
            let rest = c.matches.len() - i - 1;
            let tail = if rest > 0 {
                format!("… +{rest}").len()
            } else {
                0
            };
            if used + w + tail > width {
                spans.push(Span::styled(
                    format!("… +{}", c.matches.len() - i),
                    t.muted(),
                ));
                break;
            }
            used += w;
            spans.push(if here {
                Span::styled(shown, t.selected())
            } else {
                Span::styled(shown, t.base().fg(t.accent))
            });
            spans.push(Span::raw(" "));
        }
        Line::from(spans)
    };
    f.render_widget(Paragraph::new(text).style(t.base()), area);
}

/// Shortens the longer of two texts (then the other) with a trailing `…` until together
/// they take at most `room` columns; each keeps at least 4.
fn shorten_pair(a: &mut String, b: &mut String, room: usize) {
    let len = |s: &String| s.chars().count();
    while len(a) + len(b) > room {
        let longer = if len(a) >= len(b) { &mut *a } else { &mut *b };
        let n = len(longer);
        if n <= 4 {
            break;
        }
        *longer = longer.chars().take(n - 2).chain(['…']).collect();
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

fn draw_table(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.theme;
    let mut counts = count_states(&app.rows);
    if app.stale_for().is_some() {
        counts = format!("last known: {counts}");
    }
    // The sort order sits in the top border, which has room for it at 80 columns.
    // Until the watch's first list completes, the count is only what has arrived.
    let count = if app.views.listed {
        app.rows.len().to_string()
    } else {
        format!("loading ({} so far)", app.views.len())
    };
    let mut title = format!(" Releases {count} · {} ", sort_title(app.sort, app.reverse));
    if !app.filter.is_empty() {
        title.push_str(&format!("(filter: {}) ", app.filter));
    }
    if !app.marked.is_empty() {
        title.push_str(&format!("[{} marked] ", app.marked.len()));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.base().fg(t.border))
        .title(Span::styled(title, t.header()))
        .title_bottom(Line::from(format!(" {counts} ")).style(t.muted()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    if app.rows.is_empty() {
        let msg = if !app.views.listed {
            "Listing HelmReleases…"
        } else if app.views.is_empty() {
            "No HelmReleases here (yet). The table fills in live as they appear."
        } else {
            "No release matches the filter (esc clears it)."
        };
        f.render_widget(Paragraph::new(msg).style(t.muted()), inner);
        return;
    }
    let wide = inner.width >= 110;
    let show_ns = wide || matches!(app.scope, Scope::All);
    let height = inner.height.saturating_sub(1).max(1) as usize;
    let offset = if app.selected < height {
        0
    } else {
        app.selected + 1 - height
    };
    let visible = &app.rows[offset..(offset + height).min(app.rows.len())];
    let w = |f: &dyn Fn(&Row) -> usize, min: usize, max: usize| {
        visible.iter().map(f).max().unwrap_or(0).clamp(min, max) as u16
    };
    let mut header = vec![
        "",
        "NAMESPACE",
        "NAME",
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
        w(&|r| r.key.namespace.len(), 9, 16),
        w(&|r| r.key.name.len(), 4, if wide { 28 } else { 18 }),
        w(&|r| r.chart.len(), 5, 16),
        w(&|r| r.version.len(), 7, 10),
        3,
        w(&|r| state_cell(app, r).chars().count(), 5, 64),
        w(&|r| r.ready_text().chars().count(), 5, 16),
        7,
    ];
    let mut drop = Vec::new();
    if !show_ns {
        drop.push(1);
    }
    if !wide {
        drop.push(4);
    }
    // (column, narrowest it may become), in the order they give way: the name last.
    let mut shrinkable = vec![(4, 5), (3, 5), (1, 6), (2, 8)];
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
    let widths: Vec<Constraint> = widths
        .into_iter()
        .map(Constraint::Length)
        .chain([Constraint::Fill(1)])
        .collect();
    let rows = visible.iter().enumerate().map(|(i, r)| {
        let marked = app.marked.contains(&r.key);
        let here = offset + i == app.selected;
        // The cursor and marks are symbols too, not only colour.
        let gutter = match (here, marked) {
            (true, true) => "›●",
            (true, false) => "› ",
            (false, true) => " ●",
            (false, false) => "  ",
        };
        let mut cells = vec![
            Cell::from(gutter),
            Cell::from(r.key.namespace.clone()),
            Cell::from(r.key.name.clone()),
            Cell::from(r.chart.clone()),
            Cell::from(r.version.clone()),
            Cell::from(r.revision.map_or_else(|| "-".into(), |v| v.to_string())),
            Cell::from(state_cell(app, r)).style(if app.stale_for().is_some() {
                t.muted()
            } else {
                t.state(r.state)
            }),
            Cell::from(r.ready_text()),
            Cell::from(
                r.last_change
                    .map_or_else(|| "-".into(), |c| age(c, app.now)),
            ),
            Cell::from(r.message.clone()).style(t.muted()),
        ];
        for i in drop.iter().rev() {
            cells.remove(*i);
        }
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

fn count_states(rows: &[Row]) -> String {
    let states = [
        State::Ready,
        State::Progressing,
        State::Failed,
        State::Canceled,
        State::Suspended,
        State::Unknown,
    ];
    let parts: Vec<String> = states
        .iter()
        .filter_map(|s| {
            let n = rows.iter().filter(|r| r.state == *s).count();
            (n > 0).then(|| format!("{} {n} {}", s.symbol(), s.word().to_lowercase()))
        })
        .collect();
    parts.join("  ")
}

fn draw_detail(f: &mut Frame, app: &App, d: &Detail, area: Rect) {
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
    let Some(view) = app.views.get(&d.key) else {
        f.render_widget(
            Paragraph::new("This release is gone (deleted, or out of scope).").style(t.muted()),
            body,
        );
        return;
    };
    let text = match d.tab {
        Tab::Overview => overview(app, d, view),
        Tab::History => history(app, d, view),
        Tab::Values => values(app, d, view),
        Tab::Manifest => fetched(app, &d.data.helm, |h| {
            Text::from(format!(
                "# revision {} (Secret data masked)\n{}",
                h.revision, h.manifest
            ))
        }),
        Tab::Events => events(app, d),
    };
    f.render_widget(
        Paragraph::new(text)
            .style(t.base())
            .scroll((d.scroll.min(u16::MAX / 2), 0)),
        body,
    );
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
    if conditions.is_empty() {
        lines.push(Line::styled("  none yet", t.muted()));
    }
    for c in conditions {
        let (sym, state) = match (c.type_.as_str(), c.status.as_str()) {
            (_, "True") if c.type_ == "Stalled" || c.type_ == "Reconciling" => {
                ("!", State::Progressing)
            }
            (_, "True") => ("✓", State::Ready),
            (_, "False") if c.type_ == "Stalled" || c.type_ == "Reconciling" => ("✓", State::Ready),
            (_, "False") => ("✗", State::Failed),
            _ => ("?", State::Unknown),
        };
        lines.push(Line::from(vec![
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
        ]));
    }
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
    let chart_of = |h: &crate::api::Snapshot| format!("{}-{}", h.chart_name, h.chart_version);
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
    let t = &app.theme;
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
    lines.push(section(
        app,
        "Values of the last Helm release (valuesFrom merged; credentials masked)",
    ));
    match &d.data.helm {
        Fetch::Loading => lines.push(Line::styled("  loading…", t.muted())),
        Fetch::Failed(e) => lines.push(Line::styled(format!("  ✗ {e}"), t.base().fg(t.error))),
        Fetch::Loaded(h) => lines.extend(h.values.lines().map(|l| Line::raw(format!("  {l}")))),
    }
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

fn draw_editor(f: &mut Frame, app: &App, ed: &super::app::Editor, area: Rect) {
    let t = &app.theme;
    let err_height = if ed.error.is_some() { 4 } else { 0 };
    let [editor, error] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(err_height)]).areas(area);
    let title = format!(" Edit spec.values of {} ", ed.key);
    let hint = if ed.saving.is_some() {
        " applying… "
    } else {
        " ctrl-s validate & apply · esc leave (draft kept) "
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.base().fg(t.accent))
        .title(Span::styled(title, t.header()))
        .title_bottom(Line::from(hint).style(t.muted()));
    let inner = block.inner(editor);
    f.render_widget(block, editor);
    f.render_widget(&ed.text, inner);
    if let Some(e) = &ed.error {
        let p = Paragraph::new(vec![
            Line::styled(
                "✗ Not applied — fix the YAML; your draft is kept:",
                t.base().fg(t.error).add_modifier(Modifier::BOLD),
            ),
            Line::styled(e.clone(), t.base().fg(t.error)),
        ])
        .wrap(Wrap { trim: false })
        .style(t.base());
        f.render_widget(p, error);
    }
}

fn draw_status(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.theme;
    if let (crate::engine::Connection::Disconnected { since, .. }, None) =
        (&app.connection, &app.overlay)
    {
        let age = app.stale_for().unwrap_or_default();
        let clock = since.strftime("%H:%M:%S UTC");
        let mut banner = format!(
            "⚠ API server unreachable since {clock} ({} ago): retrying the watch; rows show the last known state",
            short_age(age)
        );
        // A write that got no answer is not hidden by the banner: it may still land.
        if let Some((Progress::Unknown(_), what, _)) = app.status_notice() {
            banner = format!(
                "⚠ API server unreachable for {} · {what}: outcome unknown, it may still be applied",
                short_age(age)
            );
        }
        f.render_widget(
            Paragraph::new(Line::styled(
                banner,
                t.base().fg(t.error).add_modifier(Modifier::BOLD),
            )),
            area,
        );
        return;
    }
    let line = match &app.overlay {
        Some(Overlay::Filter(text)) => return draw_input(f, app, area, "/", text),
        Some(Overlay::Command(line)) => return draw_input(f, app, area, ":", &line.text),
        _ => match app.status_notice() {
            None => Line::raw(""),
            Some((progress, what, summary)) => {
                let pending = app
                    .feedback
                    .iter()
                    .filter(|f| f.progress == Progress::Pending)
                    .count();
                let more = if pending > 1 && !summary {
                    format!("  ({pending} pending)")
                } else {
                    String::new()
                };
                match &progress {
                    Progress::Note => Line::styled(format!("· {what}{more}"), t.muted()),
                    Progress::Pending if summary => {
                        Line::styled(format!("⋯ {what}"), t.state(State::Progressing))
                    }
                    Progress::Pending => Line::styled(
                        format!("⋯ {what} (pending){more}"),
                        t.state(State::Progressing),
                    ),
                    Progress::Done if summary => {
                        Line::styled(format!("✓ {what}"), t.state(State::Ready))
                    }
                    Progress::Done => {
                        Line::styled(format!("✓ {what}: done{more}"), t.state(State::Ready))
                    }
                    Progress::Failed(_) if summary => {
                        Line::styled(format!("✗ {what}"), t.base().fg(t.error))
                    }
                    Progress::Failed(e) => {
                        Line::styled(format!("✗ {what}: {e}{more}"), t.base().fg(t.error))
                    }
                    Progress::Unknown(_) if summary => {
                        Line::styled(format!("⚠ {what}"), t.state(State::Progressing))
                    }
                    Progress::Unknown(why) => Line::styled(
                        format!("⚠ {what}: outcome unknown, {why} (watching){more}"),
                        t.state(State::Progressing),
                    ),
                    Progress::Landed => Line::styled(
                        format!("✓ {what}: applied after the API server answered again{more}"),
                        t.state(State::Ready),
                    ),
                }
            }
        },
    };
    f.render_widget(Paragraph::new(line).style(t.base()), area);
}

fn draw_input(
    f: &mut Frame,
    app: &App,
    area: Rect,
    prompt: &str,
    text: &tui_textarea::TextArea<'static>,
) {
    let [p, input] =
        Layout::horizontal([Constraint::Length(prompt.len() as u16), Constraint::Min(1)])
            .areas(area);
    f.render_widget(
        Paragraph::new(prompt.to_owned()).style(app.theme.header()),
        p,
    );
    f.render_widget(text, input);
}

fn draw_hints(f: &mut Frame, app: &App, area: Rect) {
    let hints: &[&str] = if app.editor.is_some() {
        &["ctrl-s validate", "esc leave (draft kept)", "arrows move"]
    } else if app.detail.is_some() && app.readonly {
        &[
            "READ-ONLY",
            "? help",
            "esc back",
            "tab/d h v m E views",
            "q quit",
        ]
    } else if app.detail.is_some() {
        &[
            "? help",
            "esc back",
            "tab/d h v m E views",
            "s suspend",
            "r reconcile",
            "c cancel wait",
            "e edit",
        ]
    } else if app.readonly {
        &[
            "READ-ONLY",
            "? help",
            "enter details",
            "/ filter",
            ": ns/ctx",
            "o sort",
            "q quit",
        ]
    } else {
        &[
            "? help",
            "enter details",
            "/ filter",
            ": ns/ctx",
            "space mark",
            "s suspend",
            "r reconcile",
            "c cancel",
            "e edit",
            "q quit",
        ]
    };
    // As many as fit; `?` always lists them all.
    let mut line = String::new();
    for h in hints {
        let sep = if line.is_empty() { "" } else { " · " };
        if line.chars().count() + sep.len() + h.chars().count() > area.width as usize {
            break;
        }
        line.push_str(sep);
        line.push_str(h);
    }
    f.render_widget(Paragraph::new(line).style(app.theme.muted()), area);
}

fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn draw_help(f: &mut Frame, app: &App, area: Rect) {
    let t = &app.theme;
    // Two balanced columns so the whole keymap fits an 80x24 terminal.
    // Each line with the context it belongs to (None for headings and the legend).
    let mut lines: Vec<(Line, Option<String>)> = Vec::new();
    for (ctx, rows) in keymap::help() {
        // Read-only: no write is offered, and the values editor cannot be opened.
        let rows: Vec<_> = rows
            .into_iter()
            .filter(|(_, _, action)| !(app.readonly && action.writes()))
            .collect();
        if rows.is_empty() || (app.readonly && ctx == keymap::Context::Editor) {
            continue;
        }
        lines.push((Line::styled(ctx.to_string(), t.header()), None));
        for (keys, help, _) in rows {
            lines.push((
                Line::from(vec![
                    Span::styled(format!(" {keys:<12}"), t.base().fg(t.accent)),
                    Span::raw(help),
                ]),
                Some(ctx.to_string()),
            ));
        }
    }
    lines.push((
        Line::styled("✓ Ready  ◐ Progressing  ✗ Failed", t.muted()),
        None,
    ));
    lines.push((
        Line::styled("‖ Suspended  ⊘ Canceled  ? Unknown", t.muted()),
        None,
    ));
    // Split at the middle; a context cut in two says so at the top of the second column.
    let mut split = lines.len().div_ceil(2);
    // A heading never ends a column: it goes to the next one with its keys.
    if split > 0 && lines[split - 1].1.is_none() {
        split -= 1;
    }
    let mut second: Vec<Line> = Vec::new();
    if let Some((_, Some(ctx))) = lines.get(split) {
        second.push(Line::styled(format!("{ctx} (continued)"), t.header()));
    }
    second.extend(lines.split_off(split).into_iter().map(|(l, _)| l));
    let columns: [Vec<Line>; 2] = [lines.into_iter().map(|(l, _)| l).collect(), second];
    let height = columns.iter().map(Vec::len).max().unwrap_or(0) as u16 + 2;
    let rect = centered(area, 110, height);
    f.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.base().fg(t.accent))
        .title(Span::styled(" Keys (any key closes) ", t.header()));
    let inner = block.inner(rect);
    f.render_widget(block, rect);
    let halves =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).split(inner);
    for (col, half) in columns.into_iter().zip(halves.iter()) {
        f.render_widget(Paragraph::new(col).style(t.base()), *half);
    }
}

fn draw_question(f: &mut Frame, app: &App, area: Rect, question: &str, answers: &str) {
    let t = &app.theme;
    let width = (question.chars().count().max(answers.len()) + 4) as u16;
    let rect = centered(area, width, 4);
    f.render_widget(Clear, rect);
    f.render_widget(
        Paragraph::new(vec![
            Line::styled(question.to_owned(), t.base().add_modifier(Modifier::BOLD)),
            Line::styled(answers.to_owned(), t.muted()),
        ])
        .style(t.base())
        .wrap(Wrap { trim: true })
        .block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(Style::default().fg(t.progressing))
                .title(" Confirm "),
        ),
        rect,
    );
}

/// The state column: while disconnected never a confident state, only the last one
/// known and its age.
fn state_cell(app: &App, r: &Row) -> String {
    match app.stale_for() {
        Some(age) => format!("? {} ({} old)", r.state.word(), short_age(age)),
        None => r.state_text(app.now),
    }
}

/// `42s`, `3m`, `2h`.
fn short_age(secs: i64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s => format!("{}h", s / 3600),
    }
}

//! Where is it? The release x cluster grid (`:grid`, `:grid chart`): one row per release
//! identity (namespace/name and kind), or per chart, one column per cluster of the fleet,
//! each cell the chart version, revision and state there. It is made from the table's
//! rows, so the table's filter (`/redis`, `/cluster:prod`) narrows it too, and a cluster
//! that does not answer has its cells marked as last known.

use std::collections::BTreeMap;
use std::sync::Arc;

use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row as TableRow, Table};

use super::fit;
use crate::frontend::inventory::Kind;
use crate::frontend::tui::keymap::Action;
use crate::frontend::tui::view_model::{Cluster, Row, State};

/// The grid's own state: what a row is, and the cursor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GridView {
    /// Rows by chart rather than by release.
    pub by_chart: bool,
    pub selected: usize,
}

/// One cell: what the release (or the chart's releases) is in one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridCell {
    pub text: String,
    /// The worst state of what it shows.
    pub state: State,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GridRow {
    pub label: String,
    /// One per column, in the columns' order.
    pub cells: Vec<Option<GridCell>>,
}

/// What the grid shows: its columns (each cluster's name, and whether it is stale) and
/// rows, made by [`rows`].
pub struct GridScreen<'a> {
    pub theme: &'a crate::frontend::tui::theme::Theme,
    pub view: &'a GridView,
    pub columns: Vec<(String, bool)>,
    pub rows: Vec<GridRow>,
}

impl GridView {
    /// Its keys: moving; whether the action was the grid's.
    pub fn on_action(&mut self, action: Action, rows: usize, page: usize) -> bool {
        let last = rows.saturating_sub(1);
        self.selected = match action {
            Action::Up => self.selected.saturating_sub(1),
            Action::Down => (self.selected + 1).min(last),
            Action::PageUp => self.selected.saturating_sub(page),
            Action::PageDown => (self.selected + page).min(last),
            Action::Top => 0,
            Action::Bottom => last,
            _ => return false,
        };
        true
    }
}

/// The grid of `table` (the table's rows in view) over `clusters` (`None`: the
/// dashboard's own), by release or by chart.
pub fn rows(table: &[Arc<Row>], clusters: &[Option<Cluster>], by_chart: bool) -> Vec<GridRow> {
    // label -> column -> what is there.
    let mut grid: BTreeMap<String, Vec<Vec<&Row>>> = BTreeMap::new();
    for row in table {
        let Some(column) = clusters.iter().position(|c| *c == row.id.cluster) else {
            continue;
        };
        let label = if by_chart {
            row.chart.clone()
        } else {
            match row.id.kind {
                Kind::Wheelhouse => row.id.key.to_string(),
                kind => format!("{} ({kind})", row.id.key),
            }
        };
        grid.entry(label)
            .or_insert_with(|| vec![Vec::new(); clusters.len()])[column]
            .push(row);
    }
    grid.into_iter()
        .map(|(label, columns)| GridRow {
            label,
            cells: columns
                .into_iter()
                .map(|rows| cell(&rows, by_chart))
                .collect(),
        })
        .collect()
}

fn cell(rows: &[&Row], by_chart: bool) -> Option<GridCell> {
    let state = rows.iter().map(|r| r.state).min()?;
    let text = if by_chart {
        // Each version there, with how many releases run it.
        let mut versions: BTreeMap<&str, usize> = BTreeMap::new();
        for r in rows {
            *versions.entry(r.version.as_str()).or_default() += 1;
        }
        let versions: Vec<String> = versions
            .into_iter()
            .map(|(v, n)| {
                if n > 1 {
                    format!("{v} x{n}")
                } else {
                    v.to_owned()
                }
            })
            .collect();
        format!("{} {}", state.symbol(), versions.join(", "))
    } else {
        let r = rows[0];
        let revision = r.revision.map_or_else(|| "-".into(), |v| format!("r{v}"));
        format!("{} {} {revision}", state.symbol(), r.version)
    };
    Some(GridCell { text, state })
}

pub fn draw(f: &mut Frame, screen: &GridScreen<'_>, area: Rect) {
    let t = screen.theme;
    let by = if screen.view.by_chart {
        "chart"
    } else {
        "release"
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.base().fg(t.border))
        .title(Span::styled(
            format!(
                " Where is it? {} by {by} x {} clusters · :grid{} · esc back ",
                screen.rows.len(),
                screen.columns.len(),
                if screen.view.by_chart {
                    " for releases"
                } else {
                    " chart for charts"
                }
            ),
            t.header(),
        ));
    let inner = block.inner(area);
    f.render_widget(block, area);
    if screen.rows.is_empty() {
        f.render_widget(
            Paragraph::new("No release in view (the table's filter applies here too).")
                .style(t.muted()),
            inner,
        );
        return;
    }
    let label_w = screen
        .rows
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(7)
        .clamp(7, 40);
    let columns = screen.columns.len().max(1);
    let cell_w =
        ((inner.width as usize).saturating_sub(label_w + 2 + columns) / columns).clamp(6, 28);
    let height = inner.height.saturating_sub(1).max(1) as usize;
    let offset = (screen.view.selected + 1).saturating_sub(height);
    let header: Vec<Cell> = std::iter::once(Cell::from("RELEASE".to_owned()))
        .chain(screen.columns.iter().map(|(name, stale)| {
            let name = if *stale {
                format!("{name} (last known)")
            } else {
                name.clone()
            };
            Cell::from(fit(&name, cell_w))
        }))
        .collect();
    let header = if screen.view.by_chart {
        let mut h = header;
        h[0] = Cell::from("CHART".to_owned());
        h
    } else {
        header
    };
    let rows = screen
        .rows
        .iter()
        .enumerate()
        .skip(offset)
        .take(height)
        .map(|(i, row)| {
            let mut cells = vec![Cell::from(fit(&row.label, label_w))];
            for (c, cell) in row.cells.iter().enumerate() {
                let stale = screen.columns.get(c).is_some_and(|(_, s)| *s);
                cells.push(match cell {
                    Some(cell) => Cell::from(fit(&cell.text, cell_w)).style(if stale {
                        t.muted()
                    } else {
                        t.state(cell.state)
                    }),
                    None => Cell::from("-").style(t.muted()),
                });
            }
            let style = if i == screen.view.selected {
                t.selected()
            } else {
                t.base()
            };
            TableRow::new(cells).style(style)
        });
    let widths: Vec<Constraint> = std::iter::once(Constraint::Length(label_w as u16))
        .chain((0..columns).map(|_| Constraint::Length(cell_w as u16)))
        .collect();
    let table = Table::new(rows, widths)
        .header(TableRow::new(header).style(t.header()))
        .column_spacing(1)
        .style(t.base());
    f.render_widget(table, inner);
}

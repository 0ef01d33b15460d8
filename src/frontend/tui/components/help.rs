//! The `?` overlay: the whole keymap in two columns, generated from the one keymap.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

use super::Look;
use super::centered;
use crate::frontend::tui::keymap;

/// The width of a short binding, two of which share a line of a column.
const HALF: usize = 19;
/// The key column (longer keys push their text right).
const SHORT_KEYS: usize = 7;

pub fn draw(f: &mut Frame, app: Look<'_>, area: Rect) {
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
        // Short bindings go two to a line (a column of 38 holds two of 19), so the
        // whole keymap still fits 80x24 as it grows.
        let mut pending: Option<Vec<Span>> = None;
        for (keys, help, _) in rows {
            let (keys_w, help_w) = (keys.chars().count(), help.chars().count());
            let short = keys_w <= SHORT_KEYS && help_w <= HALF - SHORT_KEYS - 3;
            let piece = |short: bool| {
                let pad = SHORT_KEYS;
                let fill = if short { HALF - pad - 2 } else { 0 };
                vec![
                    Span::styled(format!(" {keys:<pad$} "), t.base().fg(t.accent)),
                    Span::raw(format!("{help:<fill$}")),
                ]
            };
            match (short, pending.take()) {
                (true, Some(mut first)) => {
                    first.extend(piece(true));
                    lines.push((Line::from(first), Some(ctx.to_string())));
                }
                (true, None) => pending = Some(piece(true)),
                (false, first) => {
                    if let Some(first) = first {
                        lines.push((Line::from(first), Some(ctx.to_string())));
                    }
                    lines.push((Line::from(piece(false)), Some(ctx.to_string())));
                }
            }
        }
        if let Some(first) = pending {
            lines.push((Line::from(first), Some(ctx.to_string())));
        }
    }
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
        .title(Span::styled(" Keys (any key closes) ", t.header()))
        // The states' symbols, on the bottom border: status is never colour alone.
        .title_bottom(Line::styled(
            " ✓ Ready  ◐ Progressing  ✗ Failed  ‖ Suspended  ⊘ Canceled  ? Unknown ",
            t.muted(),
        ));
    let inner = block.inner(rect);
    f.render_widget(block, rect);
    let halves =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).split(inner);
    for (col, half) in columns.into_iter().zip(halves.iter()) {
        f.render_widget(Paragraph::new(col).style(t.base()), *half);
    }
}

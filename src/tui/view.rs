//! The screen's layout: the header, the view in front (table, detail, logs, editor or changes), the
//! status line and the footer, with the overlays on top. Each part is drawn by its
//! component; this file only places them.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::widgets::Block;

use super::app::{App, Overlay};
use super::components::{
    changes, command, confirm, detail, editor, footer, header, help, logs, status_line, table,
};

pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    f.render_widget(Block::default().style(app.theme.base()), area);
    // The favourites row goes with the table, where the number keys work.
    let in_table = app.editor.is_none() && app.detail.is_none();
    let [top, favourites, body, status_area, hints] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(u16::from(in_table)),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    header::draw(f, app, top);
    if in_table {
        header::draw_favourites(f, app, favourites);
    }
    if let Some(c) = &app.changes {
        changes::draw(f, app, c, body);
    } else if let Some(ed) = &app.editor {
        editor::draw(f, app, ed, body);
    } else if let Some(l) = &app.logs {
        logs::draw(f, app, l, body);
    } else if let Some(d) = &app.detail {
        detail::draw(f, app, d, body);
    } else {
        table::draw(f, app, body);
    }
    status_line::draw(f, app, status_area);
    match &app.overlay {
        Some(Overlay::Command(line)) => command::draw_suggestions(f, app, line, hints),
        _ => footer::draw(f, app, hints),
    }
    match &app.overlay {
        // The whole screen, so the whole keymap fits 80x24.
        Some(Overlay::Help) => help::draw(f, app, area),
        Some(Overlay::Confirm(c)) => confirm::draw(f, app, body, &c.question),
        _ => {}
    }
}

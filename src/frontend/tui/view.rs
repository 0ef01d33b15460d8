//! The screen's layout: the header, the view in front (table, detail, logs, editor or
//! changes), the status line and the footer, with the overlays on top. Each part is drawn
//! by its component from a narrow view of what it shows, built here from the dashboard's
//! state; this file only builds those views and places the parts.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::widgets::Block;

use super::app::{App, Overlay};
use super::components::detail::DetailScreen;
use super::components::header::HeaderScreen;
use super::components::status_line::StatusScreen;
use super::components::table::TableScreen;
use super::components::{
    changes, command, confirm, detail, editor, footer, freeze_banner, header, help, logs,
    status_line, table, timeline,
};

pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    f.render_widget(Block::default().style(app.theme.base()), area);
    // The favourites row goes with the table, where the number keys work.
    let in_table = app.editor.is_none() && app.detail.is_none() && app.timeline.is_none();
    // Every view says a freeze, while one lasts.
    let banner = freeze_banner::text(&app.frozen, app.forgotten_suspends(), app.now);
    let [top, frozen, favourites, body, status_area, hints] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(u16::from(banner.is_some())),
        Constraint::Length(u16::from(in_table)),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let look = app.look();
    let header = HeaderScreen {
        theme: &app.theme,
        readonly: app.readonly,
        context: &app.context,
        scope: &app.scope,
        coverage: &app.coverage,
        role: &app.role,
        tenancy: &app.tenancy,
        elsewhere: app.elsewhere,
        switching: app.switching.as_deref(),
        favourites: app.favourites.of(&app.context),
    };
    header::draw(f, &header, top);
    if let Some((text, overdue)) = &banner {
        freeze_banner::draw(f, &app.theme, text, *overdue, frozen);
    }
    if in_table {
        header::draw_favourites(f, &header, favourites);
    }
    if let Some(c) = &app.changes {
        changes::draw(f, look, c, body);
    } else if let Some(ed) = &app.editor {
        editor::draw(f, look, ed, body);
    } else if let Some(tl) = &app.timeline {
        timeline::draw(f, look, tl, body);
    } else if let Some(l) = &app.logs {
        logs::draw(f, look, l, body);
    } else if let Some(d) = &app.detail {
        let screen = DetailScreen {
            theme: &app.theme,
            now: app.now,
            readonly: app.readonly,
            views: &app.views,
            others: &app.others,
            replicas: &app.replicas,
            role: &app.role,
            tenancy: &app.tenancy,
            selected_row: app.selected_row(),
        };
        detail::draw(f, &screen, d, body);
    } else {
        let screen = TableScreen {
            theme: &app.theme,
            now: app.now,
            table: &app.table,
            views: &app.views,
            others: &app.others,
            scope: &app.scope,
            stale_for: app.stale_for(),
        };
        table::draw(f, &screen, body);
    }
    let status = StatusScreen {
        theme: &app.theme,
        connection: &app.connection,
        overlay: app.overlay.as_ref(),
        stale_for: app.stale_for(),
        notice: app.status_notice(),
        status: &app.status,
    };
    status_line::draw(f, &status, status_area);
    match &app.overlay {
        Some(Overlay::Command(line)) => {
            command::draw_suggestions(f, look, line, app.completions(&line.typed()), hints);
        }
        _ => footer::draw(
            f,
            look,
            app.context(),
            app.selected_key().map(|k| k.kind),
            hints,
        ),
    }
    match &app.overlay {
        // The whole screen, so the whole keymap fits 80x24.
        Some(Overlay::Help) => help::draw(f, look, area),
        Some(Overlay::Confirm(c)) => confirm::draw(f, look, body, &c.question),
        _ => {}
    }
}

//! The screen's layout: the header, the view in front (table, detail, logs, editor or
//! changes), the status line and the footer, with the overlays on top. Each part is drawn
//! by its component from a narrow view of what it shows, built here from the dashboard's
//! state; this file only builds those views and places the parts.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::widgets::Block;

use super::app::{App, Overlay};
use super::components::detail::DetailScreen;
use super::components::fleet_header::{FleetScreen, Tile};
use super::components::grid::{self, GridScreen};
use super::components::header::HeaderScreen;
use super::components::status_line::StatusScreen;
use super::components::table::TableScreen;
use super::components::{
    changes, command, confirm, detail, editor, fleet_header, footer, freeze_banner, header, help,
    logs, status_line, table, timeline,
};
use super::fleet_model::Link;
use crate::engine::Role;

/// Who reconciles a cluster's releases, as its tile says it: this dashboard's engine,
/// the holder of its engine Lease, and Flux when it has Flux's releases.
fn reconciled_by(
    role: &Role,
    engine: bool,
    readonly: bool,
    holder: Option<&str>,
    flux: usize,
) -> String {
    let mut by = reconciled_by_wheelhouse(role, engine, readonly, holder);
    if flux > 0 {
        by.push_str(&format!(" · {flux} by Flux"));
    }
    by
}

fn reconciled_by_wheelhouse(
    role: &Role,
    engine: bool,
    readonly: bool,
    holder: Option<&str>,
) -> String {
    match (role, engine && !readonly) {
        (_, false) => match holder {
            Some(h) => format!("view only: reconciled by {h}"),
            None => "view only: no engine here, none holds its Lease".into(),
        },
        (Role::Leader, _) => "engine here".into(),
        (Role::Follower { holder }, _) => format!("reconciled by {holder}"),
        (Role::Unable { reason }, _) => format!("no engine here: {reason}"),
        (Role::Unknown, _) => "engine: taking the lease…".into(),
    }
}

/// The fleet header's tiles: the dashboard's own cluster first, then the others by name.
fn fleet_screen(app: &App) -> FleetScreen<'_> {
    let home_link = match (&app.fleet.home_link, &app.connection) {
        // The probe tells refused credentials from silence; the watch only that it fails.
        (Some(link @ Link::Credentials { .. }), _) => link.clone(),
        (_, crate::engine::Connection::Disconnected { since, error }) => Link::Unreachable {
            since: *since,
            error: error.clone(),
        },
        (Some(link), _) => link.clone(),
        (None, _) => Link::Connected,
    };
    let mut tiles = vec![Tile {
        name: &app.context,
        home: true,
        link: home_link,
        reconciled_by: if app.readonly {
            "read-only: engine not run here".into()
        } else {
            reconciled_by(&app.role, true, false, None, app.others.flux.len())
        },
        counts: app.table.states_of(None),
    }];
    for (name, m) in &app.fleet.members {
        tiles.push(Tile {
            name,
            home: false,
            link: m.link.clone(),
            reconciled_by: reconciled_by(
                &m.role,
                m.engine,
                app.readonly,
                m.lease_holder.as_deref(),
                m.data.others.flux.len(),
            ),
            counts: app.table.states_of(Some(name)),
        });
    }
    FleetScreen {
        theme: &app.theme,
        now: app.now,
        tiles,
    }
}

pub fn draw(f: &mut Frame, app: &App) {
    let area = f.area();
    f.render_widget(Block::default().style(app.theme.base()), area);
    // The favourites row goes with the table, where the number keys work.
    let in_table = app.editor.is_none() && app.detail.is_none() && app.timeline.is_none();
    // Every view says a freeze, while one lasts.
    let banner = freeze_banner::text(&app.frozen_in_view(), app.forgotten_suspends(), app.now);
    // The fleet header, one line per cluster, leaves the table at least ten lines.
    let clusters = app.fleet.members.len() + 1;
    let fleet_lines = if in_table {
        fleet_header::height(clusters, area.height.saturating_sub(16).max(2))
    } else {
        0
    };
    let [
        top,
        frozen,
        fleet_area,
        favourites,
        body,
        status_area,
        hints,
    ] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(u16::from(banner.is_some())),
        Constraint::Length(fleet_lines),
        Constraint::Length(u16::from(in_table)),
        Constraint::Min(3),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let look = app.look();
    // In a fleet the header names the dashboard's own cluster and how many there are.
    let context = if app.fleet.is_fleet() {
        format!("{} (fleet of {clusters})", app.context)
    } else {
        app.context.clone()
    };
    let header = HeaderScreen {
        theme: &app.theme,
        readonly: app.readonly,
        context: &context,
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
    if fleet_lines > 0 {
        fleet_header::draw(f, &fleet_screen(app), fleet_area);
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
        // A fleet row's detail is drawn from its own cluster's data.
        let (views, others, replicas) =
            app.data_of(d.key.cluster.as_ref())
                .unwrap_or((&app.views, &app.others, &app.replicas));
        let screen = DetailScreen {
            theme: &app.theme,
            now: app.now,
            readonly: app.readonly,
            views,
            others,
            replicas,
            role: &app.role,
            tenancy: &app.tenancy,
            selected_row: app.selected_row(),
        };
        detail::draw(f, &screen, d, body);
    } else if let Some(grid) = &app.grid {
        let stale = app.fleet.stale(app.now);
        let clusters = app.grid_clusters();
        let columns = clusters
            .iter()
            .map(|c| match c {
                None => (app.context.clone(), app.stale_for().is_some()),
                Some(c) => (c.to_string(), stale.contains_key(c)),
            })
            .collect();
        let screen = GridScreen {
            theme: &app.theme,
            view: grid,
            columns,
            rows: grid::rows(&app.table.rows, &clusters, grid.by_chart),
        };
        grid::draw(f, &screen, body);
    } else {
        let stale_clusters = app.fleet.stale(app.now);
        let screen = TableScreen {
            theme: &app.theme,
            now: app.now,
            table: &app.table,
            views: &app.views,
            others: &app.others,
            scope: &app.scope,
            stale_for: app.stale_for(),
            fleet: app.fleet.is_fleet().then_some(app.context.as_str()),
            stale_clusters: &stale_clusters,
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

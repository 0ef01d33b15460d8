//! The header (context, namespace in view, who reconciles) and, under it in the table,
//! the namespace favourites on the number keys.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::fit;
use crate::cluster::client::Scope;
use crate::engine::Role;

/// What the header shows: where the dashboard looks and who reconciles.
pub struct HeaderScreen<'a> {
    pub theme: &'a crate::frontend::tui::theme::Theme,
    pub readonly: bool,
    pub context: &'a str,
    pub scope: &'a Scope,
    pub coverage: &'a crate::engine::Coverage,
    pub role: &'a Role,
    pub tenancy: &'a crate::cluster::tenancy::Policy,
    /// How many releases shown another engine reconciles.
    pub elsewhere: usize,
    pub switching: Option<&'a str>,
    /// The context's favourite namespaces, in key order.
    pub favourites: &'a [String],
}

pub fn draw(f: &mut Frame, app: &HeaderScreen<'_>, area: Rect) {
    let t = app.theme;
    let scope = match app.scope {
        Scope::All => "all namespaces".to_owned(),
        Scope::Namespace(ns) => ns.clone(),
    };
    let coverage = app.coverage.short();
    let mut role = match (app.role, app.readonly) {
        (_, true) => "client (read-only: engine not run here)".to_owned(),
        (Role::Leader, _) => format!("engine here: {coverage}"),
        (Role::Follower { holder }, _) => format!("client: {coverage} by {holder}"),
        (Role::Unable { reason }, _) => format!("client: no engine here: {reason}"),
        (Role::Unknown, _) => format!("engine: taking the lease for {coverage}…"),
    };
    // Releases act as their namespace's ServiceAccount, whichever engine holds the lease.
    if app.tenancy.locked_down() && matches!(app.role, Role::Leader | Role::Follower { .. }) {
        role.push_str(" · locked down");
    }
    // Who reconciles the rest: releases shown here that another engine covers.
    if app.elsewhere > 0 {
        role.push_str(&format!("; {} by other engines", app.elsewhere));
    }
    let mut context = app.context.to_owned();
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
    // What is left of the width, for the role and a switch in progress: cut with `…`.
    let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    let mut room = (area.width as usize).saturating_sub(used);
    if let Some(s) = app.switching {
        let switching = fit(&format!("switching to {s}…  "), room);
        room -= switching.chars().count();
        spans.push(Span::styled(switching, t.base().fg(t.progressing)));
    }
    spans.push(Span::styled(fit(&role, room), t.base().fg(t.accent)));
    f.render_widget(Paragraph::new(Line::from(spans)).style(t.base()), area);
}

/// The namespace favourites, as k9s shows them under its header: `<0> all  <1> apps …`,
/// the one in view highlighted and bracketed. Cut with `…` when they do not fit.
pub fn draw_favourites(f: &mut Frame, app: &HeaderScreen<'_>, area: Rect) {
    let t = app.theme;
    let current = match app.scope {
        Scope::All => None,
        Scope::Namespace(ns) => Some(ns.as_str()),
    };
    let items: Vec<(String, &str, bool)> =
        std::iter::once(("0".to_owned(), "all", current.is_none()))
            .chain(app.favourites.iter().enumerate().map(|(i, ns)| {
                (
                    (i + 1).to_string(),
                    ns.as_str(),
                    current == Some(ns.as_str()),
                )
            }))
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

//! The fleet header: one line per cluster of a fleet, under the header. Each names the
//! cluster, how it answers (connected, degraded since, unreachable since, credentials
//! failed since) in a symbol and words, who reconciles its releases, and how many of its
//! rows in view are in each state.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::fit;
use super::table::StateCounts;
use crate::frontend::tui::fleet_model::Link;

/// One cluster's tile.
pub struct Tile<'a> {
    pub name: &'a str,
    /// The dashboard's own cluster (the current context).
    pub home: bool,
    pub link: Link,
    /// Who reconciles its releases, in words.
    pub reconciled_by: String,
    pub counts: StateCounts,
}

pub struct FleetScreen<'a> {
    pub theme: &'a crate::frontend::tui::theme::Theme,
    pub now: k8s_openapi::jiff::Timestamp,
    pub tiles: Vec<Tile<'a>>,
}

/// The lines the fleet header takes for `clusters` clusters (none for one), at most
/// `room`: past that the last line says how many more there are.
pub fn height(clusters: usize, room: u16) -> u16 {
    if clusters <= 1 {
        return 0;
    }
    (clusters as u16).min(room.max(1))
}

fn since(now: k8s_openapi::jiff::Timestamp, at: k8s_openapi::jiff::Timestamp) -> String {
    crate::text::age::coarse(now.duration_since(at).as_secs().max(0))
}

/// The connection in a symbol, a word and, when not connected, since when and why.
fn link_text(screen: &FleetScreen<'_>, link: &Link) -> (&'static str, String, bool) {
    let now = screen.now;
    match link {
        Link::Connecting => ("…", "connecting".into(), false),
        Link::Connected => ("●", "connected".into(), false),
        Link::Degraded { since: at, error } => (
            "◐",
            format!("degraded since {} ago ({error})", since(now, *at)),
            false,
        ),
        Link::Unreachable { since: at, error } => (
            "✗",
            format!("unreachable since {} ago ({error})", since(now, *at)),
            true,
        ),
        Link::Credentials { since: at, error } => (
            "✗",
            format!("credentials failed since {} ago ({error})", since(now, *at)),
            true,
        ),
    }
}

pub fn draw(f: &mut Frame, screen: &FleetScreen<'_>, area: Rect) {
    let t = screen.theme;
    let width = area.width as usize;
    let name_w = screen
        .tiles
        .iter()
        .map(|tile| tile.name.chars().count())
        .max()
        .unwrap_or(0)
        .min(24);
    let rows = area.height as usize;
    let mut lines = Vec::new();
    for (i, tile) in screen.tiles.iter().enumerate() {
        if i + 1 == rows && screen.tiles.len() > rows {
            let more = screen.tiles.len() - i;
            lines.push(Line::from(Span::styled(
                format!(" … {more} more clusters (/cluster:NAME shows one)"),
                t.muted(),
            )));
            break;
        }
        let (symbol, words, failing) = link_text(screen, &tile.link);
        let style = match &tile.link {
            Link::Connected => t.base().fg(t.ready),
            Link::Degraded { .. } => t.base().fg(t.progressing),
            Link::Connecting => t.muted(),
            _ => t.base().fg(t.error),
        };
        let name = fit(tile.name, name_w);
        let mut spans = vec![
            Span::styled(format!(" {symbol} "), style),
            Span::styled(format!("{name:<name_w$}"), t.header()),
            Span::styled(if tile.home { " * " } else { "   " }, t.base().fg(t.accent)),
        ];
        let mut counts = tile.counts.to_string();
        if counts.is_empty() {
            counts = "no releases in view".into();
        }
        if failing {
            counts = format!("last known: {counts}");
        }
        let used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
        let room = width.saturating_sub(used);
        // The connection first (it never gives way), then the counts, then who reconciles.
        let words = fit(&words, room.min(if failing { room } else { 48 }));
        let room = room.saturating_sub(words.chars().count() + 2);
        spans.push(Span::styled(words, style));
        spans.push(Span::raw("  "));
        let counts = fit(&counts, room);
        let room = room.saturating_sub(counts.chars().count() + 2);
        spans.push(Span::styled(counts, t.base()));
        spans.push(Span::raw("  "));
        spans.push(Span::styled(fit(&tile.reconciled_by, room), t.muted()));
        lines.push(Line::from(spans));
    }
    f.render_widget(Paragraph::new(lines).style(t.base()), area);
}

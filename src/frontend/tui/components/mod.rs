//! The dashboard's components, as gitui has them: each view or overlay owns its state,
//! handles its own keys (looked up in the one keymap) and draws itself from a narrow view
//! of what it shows ([`Look`] and a screen of its own, built by `view.rs`), never from
//! the whole dashboard. They never perform IO: a component that needs some returns an
//! `Effect` (`tui/effect.rs`) for the run loop.

pub mod changes;
pub mod command;
pub mod confirm;
pub mod detail;
pub mod editor;
pub mod fleet_header;
pub mod footer;
pub mod freeze_banner;
pub mod grid;
pub mod header;
pub mod help;
pub mod logs;
pub mod status_line;
pub mod table;
pub mod timeline;

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::widgets::Paragraph;
use tui_textarea::TextArea;

use k8s_openapi::jiff::Timestamp;

use super::theme::Theme;

/// What every component draws with: the theme, the clock, and whether writes are off.
#[derive(Clone, Copy)]
pub struct Look<'a> {
    pub theme: &'a Theme,
    pub now: Timestamp,
    pub readonly: bool,
}

/// The overlay open over the view in front, if any.
pub enum Overlay {
    Help,
    Filter(TextArea<'static>),
    Command(command::CommandLine),
    Confirm(confirm::Confirm),
}

/// For how many seconds the rows have been the last known state (the API server not
/// answering the watch), or None while it answers.
pub fn stale_for(connection: &crate::engine::Connection, now: Timestamp) -> Option<i64> {
    match connection {
        crate::engine::Connection::Connected => None,
        crate::engine::Connection::Disconnected { since, .. } => {
            Some(now.duration_since(*since).as_secs().max(0))
        }
    }
}

/// `text` cut to `width` columns; a cut text ends in `…`, so nothing looks whole that
/// is not.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    match width {
        0 => String::new(),
        w => text.chars().take(w - 1).chain(['…']).collect(),
    }
}

/// A rectangle of at most `width` x `height` in the middle of `area`.
pub fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

/// A one-line text input with a placeholder.
pub fn line_input(placeholder: &str) -> TextArea<'static> {
    let mut t = TextArea::default();
    t.set_placeholder_text(placeholder);
    t.set_cursor_line_style(ratatui::style::Style::default());
    t
}

/// A prompt (`/`, `:`) and the line typed after it.
pub fn draw_input(
    f: &mut Frame,
    theme: &Theme,
    area: Rect,
    prompt: &str,
    text: &TextArea<'static>,
) {
    let [p, input] =
        Layout::horizontal([Constraint::Length(prompt.len() as u16), Constraint::Min(1)])
            .areas(area);
    f.render_widget(Paragraph::new(prompt.to_owned()).style(theme.header()), p);
    f.render_widget(text, input);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_text_ends_in_an_ellipsis() {
        assert_eq!(fit("payments-api", 20), "payments-api");
        assert_eq!(fit("payments-api", 12), "payments-api");
        assert_eq!(fit("payments-api", 8), "payment…");
        assert_eq!(fit("ab", 1), "…");
        assert_eq!(fit("ab", 0), "");
    }
}

//! The values editor: `spec.values` as YAML in a text area, validated on ctrl-s, and
//! applied only after a confirmation that shows what it changes (the values diff at once,
//! then the manifest the engine renders from them; see `changes`). Leaving keeps the
//! draft; a draft older than the release's values says so.

use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use tui_textarea::TextArea;

use super::Look;
use crate::engine::ReleaseKey;
use crate::frontend::tui::keymap::{self, Action, Context};
use crate::frontend::tui::theme::Theme;
use crate::frontend::tui::view_model::parse_values;

pub struct Editor {
    pub key: ReleaseKey,
    pub text: TextArea<'static>,
    pub original: serde_json::Value,
    pub error: Option<String>,
    /// The patch in flight.
    pub saving: Option<u64>,
}

/// What a key did in the editor.
pub enum Edited {
    /// Still editing.
    Stay,
    /// Esc: the editor closes; its text is the draft to keep.
    Leave,
    /// Valid: show what these values change, and ask.
    Review(serde_json::Value),
}

impl Editor {
    /// Opens on `original` (the release's values now), or on a `draft` left earlier: the
    /// draft is kept as it was, and said to be older when it started from other values.
    pub fn open(
        key: ReleaseKey,
        original: serde_json::Value,
        draft: Option<(TextArea<'static>, serde_json::Value)>,
        theme: &Theme,
    ) -> Self {
        // A draft started from other values than the release has now: someone changed
        // them meanwhile. The draft is kept, and said to be older, so that applying it
        // (whose diff is against the values of now) is never a silent overwrite.
        let mut error = None;
        let draft = draft.map(|(text, started_from)| {
            if started_from != original {
                error = Some(
                    "spec.values changed since this draft was started: the apply diff shows \
                     what it changes now, including undoing that change"
                        .to_owned(),
                );
            }
            text
        });
        let text = draft.unwrap_or_else(|| {
            let empty = original.as_object().is_none_or(serde_json::Map::is_empty);
            let lines = if empty {
                vec![String::new()]
            } else {
                crate::text::yaml::to_string(&original)
                    .lines()
                    .map(str::to_owned)
                    .collect()
            };
            let mut text = TextArea::new(lines);
            text.set_line_number_style(theme.muted());
            text.set_cursor_line_style(ratatui::style::Style::default());
            text
        });
        Self {
            key,
            text,
            original,
            error,
            saving: None,
        }
    }

    /// Takes a key: typing, ctrl-s (validate, then review what it changes), esc.
    pub fn on_key(&mut self, ev: KeyEvent) -> Edited {
        match keymap::lookup(Context::Editor, &ev) {
            Some(Action::Back) => return Edited::Leave,
            Some(Action::Save) => match parse_values(&self.text.lines().join("\n")) {
                Ok(values) => {
                    self.error = None;
                    return Edited::Review(values);
                }
                Err(e) => self.error = Some(e),
            },
            _ => {
                if self.saving.is_none() {
                    self.text.input(ev);
                }
            }
        }
        Edited::Stay
    }
}

pub fn draw(f: &mut Frame, app: Look<'_>, ed: &Editor, area: Rect) {
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

//! The values editor: `spec.values` as YAML in a text area, validated on ctrl-s, and
//! applied only after a confirmation that shows the diff from the values the edit started
//! from. Leaving keeps the draft; a draft older than the release's values says so.

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use tui_textarea::TextArea;

use super::centered;
use crate::engine::ReleaseKey;
use crate::tui::app::App;
use crate::tui::diff::{DiffLine, values_diff};
use crate::tui::keymap::{self, Action, Context};
use crate::tui::model::parse_values;
use crate::tui::theme::Theme;

pub struct Editor {
    pub key: ReleaseKey,
    pub text: TextArea<'static>,
    pub original: serde_json::Value,
    pub error: Option<String>,
    /// Valid values waiting for the operator's yes.
    pub confirm: Option<serde_json::Value>,
    /// What the confirmation shows: the diff from the values the edit started from.
    pub diff: Vec<DiffLine>,
    /// First diff line shown, when the diff is longer than the screen.
    pub diff_scroll: usize,
    /// How many diff lines the last draw had room for, so scrolling stops at the end.
    pub diff_window: std::cell::Cell<usize>,
    /// The patch in flight.
    pub saving: Option<u64>,
}

/// What a key did in the editor.
pub enum Edited {
    /// Still editing (or looking at the diff).
    Stay,
    /// Esc: the editor closes; its text is the draft to keep.
    Leave,
    /// Confirmed: apply these values.
    Apply(serde_json::Value),
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
                crate::yaml::to_string(&original)
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
            confirm: None,
            diff: Vec::new(),
            diff_scroll: 0,
            diff_window: std::cell::Cell::new(usize::MAX),
            saving: None,
        }
    }

    /// Takes a key: typing, ctrl-s (validate, then the diff and its question), esc; while
    /// the question is open, `y` applies, the moving keys scroll the diff and any other
    /// key goes back to editing, draft intact.
    pub fn on_key(&mut self, ev: KeyEvent, page: usize) -> Edited {
        if let Some(values) = self.confirm.take() {
            if let KeyCode::Char('y' | 'Y') = ev.code {
                return Edited::Apply(values);
            }
            if let Some(action) = keymap::lookup(Context::Global, &ev) {
                let max = self.diff.len().saturating_sub(self.diff_window.get());
                let page = page.max(1);
                let scroll = self.diff_scroll;
                let moved = match action {
                    Action::Up => Some(scroll.saturating_sub(1)),
                    Action::Down => Some(scroll + 1),
                    Action::PageUp => Some(scroll.saturating_sub(page)),
                    Action::PageDown => Some(scroll + page),
                    Action::Top => Some(0),
                    Action::Bottom => Some(max),
                    _ => None,
                };
                if let Some(to) = moved {
                    self.diff_scroll = to.min(max);
                    self.confirm = Some(values);
                }
            }
            return Edited::Stay;
        }
        match keymap::lookup(Context::Editor, &ev) {
            Some(Action::Back) => return Edited::Leave,
            Some(Action::Save) => match parse_values(&self.text.lines().join("\n")) {
                Ok(values) => {
                    self.error = None;
                    self.diff = values_diff(&self.original, &values);
                    self.diff_scroll = 0;
                    self.confirm = Some(values);
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

pub fn draw(f: &mut Frame, app: &App, ed: &Editor, area: Rect) {
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

/// The apply question of a values edit, above the diff of what it changes. A diff longer
/// than the screen scrolls between "N lines above" and "N more lines" markers, so the
/// question and its answers always stay on screen.
pub fn draw_values_confirm(f: &mut Frame, app: &App, ed: &Editor, area: Rect) {
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

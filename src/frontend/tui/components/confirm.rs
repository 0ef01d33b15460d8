//! The confirmation overlay: a question naming exactly what a write will do, and the
//! writes held back until the operator says yes. The answers line is always on screen,
//! however long the question and however narrow the terminal.

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

use super::Look;
use super::{centered, fit};
use crate::frontend::tui::effect::Effect;

pub const ANSWERS: &str = "y: yes   n/esc: no";

pub struct Confirm {
    pub question: String,
    pub effects: Vec<Effect>,
}

/// What a key did to the question.
pub enum Answer {
    Yes(Vec<Effect>),
    No,
    /// Any other key: the question stays.
    Stay(Confirm),
}

impl Confirm {
    pub fn on_key(self, ev: KeyEvent) -> Answer {
        match ev.code {
            KeyCode::Char('y' | 'Y') => Answer::Yes(self.effects),
            KeyCode::Char('n' | 'N') | KeyCode::Esc => Answer::No,
            _ => Answer::Stay(self),
        }
    }
}

/// How many lines `text` takes word-wrapped at `width` columns (a word longer than the
/// width is broken).
fn wrapped_lines(text: &str, width: usize) -> usize {
    let mut lines = 1;
    let mut used = 0;
    for word in text.split_whitespace() {
        let w = word.chars().count();
        let needed = if used == 0 { w } else { used + 1 + w };
        if needed <= width {
            used = needed;
        } else {
            lines += (used > 0) as usize + (w.saturating_sub(1)) / width;
            used = (w - 1) % width + 1;
        }
    }
    lines
}

pub fn draw(f: &mut Frame, app: Look<'_>, area: Rect, question: &str) {
    draw_question(f, app, area, question, ANSWERS);
}

/// A bordered box in the middle of `area`: the question, wrapped to as many lines as it
/// needs (and the box allows), and the answers on their own last line.
pub fn draw_question(f: &mut Frame, app: Look<'_>, area: Rect, question: &str, answers: &str) {
    let t = &app.theme;
    let widest = question.chars().count().max(answers.chars().count()) + 4;
    let width = (widest as u16).min(area.width);
    let inner_width = width.saturating_sub(2).max(1) as usize;
    let height = (wrapped_lines(question, inner_width) as u16 + 3).min(area.height);
    let rect = centered(area, width, height);
    f.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(Style::default().fg(t.progressing))
        .title(" Confirm ")
        .style(t.base());
    let inner = block.inner(rect);
    f.render_widget(block, rect);
    let [text, answer] = Layout::vertical([Constraint::Min(0), Constraint::Length(1)]).areas(inner);
    f.render_widget(
        Paragraph::new(Line::styled(
            question.to_owned(),
            t.base().add_modifier(Modifier::BOLD),
        ))
        .wrap(Wrap { trim: true })
        .style(t.base()),
        text,
    );
    f.render_widget(
        Paragraph::new(Line::styled(fit(answers, inner.width as usize), t.muted())).style(t.base()),
        answer,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_is_counted_by_words() {
        assert_eq!(wrapped_lines("Cancel the wait? (y/n)", 40), 1);
        assert_eq!(wrapped_lines("Cancel the wait? (y/n)", 10), 3);
        assert_eq!(wrapped_lines("abcdefghijkl", 5), 3);
    }
}

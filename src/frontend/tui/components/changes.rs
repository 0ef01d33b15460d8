//! What changes, shown whole screen: the diff of two revisions (values and manifest), one
//! revision shown whole, or what a write will change before it is made (a values edit, a
//! rollback, the resume of a pinned release), with the question in its title. Lines are
//! coloured by kind and carry their `+`/`-` marker, so nothing depends on colour alone.
//! Only the lines on screen are drawn and a search walks the lines once, so a diff of
//! many thousand lines scrolls and searches as fast as a short one.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::Look;
use super::fit;
use crate::frontend::tui::diff::DiffLine;
use crate::frontend::tui::effect::Effect;
use crate::frontend::tui::keymap::Action;

/// What `y` does when the view asks a question.
#[derive(Debug, Clone, PartialEq)]
pub enum OnYes {
    /// These writes (already described in the question).
    Effects(Vec<Effect>),
    /// Apply the values edit the view was opened from.
    ApplyValues(serde_json::Value),
}

/// A write waiting for the operator's yes, below the diff of what it changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    pub text: String,
    pub on_yes: OnYes,
}

/// Where the lines stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Load {
    /// Still coming: what is being done (e.g. rendering).
    Loading(String),
    Loaded,
    Failed(String),
}

pub struct ChangesView {
    pub title: String,
    /// One line on what the diff holds (values changed, objects changed/added/removed).
    pub summary: String,
    pub lines: Vec<DiffLine>,
    /// How the load stands; until it is done, `lines` are what is known at once (the
    /// values diff of an edit), and stay if it fails.
    pub load: Load,
    /// Tells apart the answers of loads, so a late one for another view is dropped.
    pub request: u64,
    pub top: usize,
    pub search: Option<String>,
    pub question: Option<Question>,
}

impl ChangesView {
    pub fn new(title: String, request: u64) -> Self {
        Self {
            title,
            summary: String::new(),
            lines: Vec::new(),
            load: Load::Loading("loading…".into()),
            request,
            top: 0,
            search: None,
            question: None,
        }
    }

    /// The lines of load `request` (dropped when the view is another one's by now).
    pub fn loaded(&mut self, request: u64, result: Result<(Vec<DiffLine>, String), String>) {
        if request != self.request {
            return;
        }
        match result {
            // The loaded lines say it all (a render's diff has the values too).
            Ok((lines, summary)) => {
                self.lines = lines;
                self.summary = summary;
                self.load = Load::Loaded;
            }
            Err(e) => self.load = Load::Failed(e),
        }
    }

    /// The first line at or after `from` with the search text (case-insensitive).
    fn find_from(&self, from: usize) -> Option<usize> {
        let needle = self
            .search
            .as_deref()
            .filter(|s| !s.is_empty())?
            .to_lowercase();
        let hit = |l: &DiffLine| match l {
            DiffLine::Section(t)
            | DiffLine::Hunk(t)
            | DiffLine::Same(t)
            | DiffLine::Removed(t)
            | DiffLine::Added(t) => contains_ignoring_case(t, &needle),
        };
        (from..self.lines.len()).find(|&i| hit(&self.lines[i]))
    }

    /// Moves to the next line with the search text after the top one, wrapping.
    pub fn search_next(&mut self) {
        let from = if self.search_hit(self.top) {
            self.top + 1
        } else {
            self.top
        };
        if let Some(i) = self.find_from(from).or_else(|| self.find_from(0)) {
            self.top = i;
        }
    }

    fn search_hit(&self, at: usize) -> bool {
        self.find_from(at) == Some(at)
    }

    /// The moving keys scroll; `n` finds the next hit. Whether the action was the view's.
    pub fn on_action(&mut self, action: Action, page: usize) -> bool {
        let last = self.lines.len().saturating_sub(page.max(1));
        self.top = match action {
            Action::Up => self.top.saturating_sub(1),
            Action::Down => (self.top + 1).min(last),
            Action::PageUp => self.top.saturating_sub(page),
            Action::PageDown => (self.top + page).min(last),
            Action::Top => 0,
            Action::Bottom => last,
            Action::SearchNext => {
                self.search_next();
                return true;
            }
            _ => return false,
        };
        true
    }
}

/// `needle` is lowercase already; ASCII lines (almost every manifest line) are compared
/// without allocating.
fn contains_ignoring_case(text: &str, needle: &str) -> bool {
    if text.is_ascii() && needle.is_ascii() {
        let (t, n) = (text.as_bytes(), needle.as_bytes());
        return n.is_empty() || t.windows(n.len()).any(|w| w.eq_ignore_ascii_case(n));
    }
    text.to_lowercase().contains(needle)
}

pub fn draw(f: &mut Frame, app: Look<'_>, v: &ChangesView, area: Rect) {
    let t = &app.theme;
    let mut title = format!(" {} ", v.title);
    if let Some(s) = &v.search {
        title.push_str(&format!("(search: {s}) "));
    }
    let state = match &v.load {
        Load::Loading(what) => format!("{what} "),
        Load::Loaded if v.lines.is_empty() => "no change ".to_owned(),
        Load::Loaded => format!(
            "line {}/{} · {} ",
            (v.top + 1).min(v.lines.len()),
            v.lines.len(),
            v.summary,
        ),
        Load::Failed(e) => format!("✗ {e} "),
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.base().fg(if v.question.is_some() {
            t.progressing
        } else {
            t.border
        }))
        .title(Span::styled(title, t.header()))
        .title_bottom(Line::styled(state, t.muted()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    // The question keeps the last line of the view, whatever is scrolled.
    let answers = v.question.as_ref().map(|q| match (&v.load, &q.on_yes) {
        (Load::Failed(_), OnYes::ApplyValues(_)) => "esc: back to the editor",
        (Load::Failed(_) | Load::Loading(_), _) => "esc: cancel",
        (Load::Loaded, OnYes::ApplyValues(_)) => "y: apply · esc: back to the editor",
        (Load::Loaded, _) => "y: yes · esc: no",
    });
    let ask_height = v.question.as_ref().map_or(0, |q| {
        let len = q.text.chars().count() + 1 + answers.unwrap_or_default().chars().count();
        len.div_ceil(inner.width.max(1) as usize).clamp(1, 4) as u16
    });
    let [inner, ask] =
        Layout::vertical([Constraint::Min(1), Constraint::Length(ask_height)]).areas(inner);
    if let (Some(q), Some(answers)) = (&v.question, answers) {
        let line = Line::from(vec![
            Span::styled(
                format!("{} ", q.text),
                t.base().fg(t.progressing).add_modifier(Modifier::BOLD),
            ),
            Span::styled(answers, t.muted()),
        ]);
        f.render_widget(
            Paragraph::new(line)
                .style(t.base())
                .wrap(ratatui::widgets::Wrap { trim: true }),
            ask,
        );
    }
    let height = inner.height as usize;
    let width = inner.width as usize;
    let needle = v
        .search
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(str::to_lowercase);
    let mut lines: Vec<Line> = v
        .lines
        .iter()
        .skip(v.top)
        .take(height)
        .map(|l| {
            let style = match l {
                DiffLine::Section(_) => t.header().add_modifier(Modifier::BOLD),
                DiffLine::Hunk(_) => t.muted(),
                DiffLine::Same(_) => t.base(),
                DiffLine::Removed(_) => t.base().fg(t.failed),
                DiffLine::Added(_) => t.base().fg(t.ready),
            };
            let text = l.text();
            let style = match &needle {
                Some(n) if contains_ignoring_case(&text, n) => style.patch(t.selected()),
                _ => style,
            };
            Line::styled(fit(&text, width), style)
        })
        .collect();
    if lines.len() < height {
        match &v.load {
            Load::Loading(what) => lines.push(Line::styled(what.clone(), t.muted())),
            Load::Failed(e) => {
                lines.push(Line::styled(format!("✗ {e}"), Style::default().fg(t.error)))
            }
            Load::Loaded if v.lines.is_empty() => {
                lines.push(Line::styled("(no change)", t.muted()));
            }
            Load::Loaded => {}
        }
    }
    f.render_widget(Paragraph::new(lines).style(t.base()), inner);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(n: usize) -> ChangesView {
        let mut v = ChangesView::new("t".into(), 1);
        let lines = (0..n)
            .map(|i| {
                if i % 1000 == 999 {
                    DiffLine::Added(format!("image: Registry/app:{i}"))
                } else {
                    DiffLine::Same(format!("line {i}"))
                }
            })
            .collect();
        v.loaded(1, Ok((lines, String::new())));
        v
    }

    #[test]
    fn a_late_answer_for_another_load_is_dropped() {
        let mut v = ChangesView::new("t".into(), 2);
        v.loaded(1, Ok((vec![DiffLine::Same("old".into())], String::new())));
        assert!(v.lines.is_empty());
        assert!(matches!(v.load, Load::Loading(_)));
        v.loaded(2, Err("render failed".into()));
        assert_eq!(v.load, Load::Failed("render failed".into()));
    }

    #[test]
    fn search_moves_from_hit_to_hit_ignoring_case_and_wraps() {
        let mut v = view(5_000);
        v.search = Some("registry/".into());
        v.search_next();
        assert_eq!(v.top, 999);
        v.search_next();
        assert_eq!(v.top, 1999);
        v.top = 4500;
        v.search_next();
        assert_eq!(v.top, 4999);
        v.search_next();
        assert_eq!(v.top, 999, "wraps to the first hit");
    }

    #[test]
    fn scrolling_stops_at_the_last_page() {
        let mut v = view(100);
        assert!(v.on_action(Action::Bottom, 20));
        assert_eq!(v.top, 80);
        assert!(v.on_action(Action::Down, 20));
        assert_eq!(v.top, 80);
        assert!(v.on_action(Action::PageUp, 20));
        assert_eq!(v.top, 60);
        assert!(!v.on_action(Action::Edit, 20));
    }
}

//! The logs of one pod's container, from the detail view (`l` on a release with a failing
//! pod): its last 200 lines, or the previous container's (`p`) for one that crash-loops,
//! followed live (`f`) and searched (`/`, `n`). The lines arrive from a stream on a task
//! (see `io::stream_logs`); this view only keeps and draws them, so a chatty pod never
//! blocks drawing. At most [`MAX_LINES`] are kept, the oldest dropped first.

use std::collections::VecDeque;

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::Look;
use super::fit;
use crate::frontend::tui::keymap::Action;

/// Lines kept per view.
pub const MAX_LINES: usize = 10_000;

/// Lines asked for when a stream starts.
pub const TAIL: i64 = 200;

/// Which logs a view shows: a stream is started for exactly this, and its lines are
/// taken only while the view still shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSource {
    /// Another cluster of the fleet's pod: streamed with that cluster's own client.
    pub cluster: Option<crate::frontend::tui::view_model::Cluster>,
    pub namespace: String,
    pub pod: String,
    pub previous: bool,
    pub follow: bool,
    /// Tells streams apart when the same pod is asked for again.
    pub stream: u64,
}

/// How the stream stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamState {
    Loading,
    /// Open: lines keep coming (follow).
    Open,
    /// Ended (all lines read, or the container stopped).
    Ended,
    Failed(String),
}

pub struct LogView {
    pub source: LogSource,
    pub lines: VecDeque<String>,
    pub state: StreamState,
    /// First line shown; `None` sticks to the bottom (the newest line).
    pub top: Option<usize>,
    pub search: Option<String>,
}

impl LogView {
    pub fn new(source: LogSource) -> Self {
        Self {
            source,
            lines: VecDeque::new(),
            state: StreamState::Loading,
            top: None,
            search: None,
        }
    }

    /// Lines that arrived for `stream`; ignored when the view moved on to another one.
    pub fn append(&mut self, stream: u64, lines: Vec<String>) {
        if stream != self.source.stream {
            return;
        }
        if self.state == StreamState::Loading {
            self.state = StreamState::Open;
        }
        for line in lines {
            if self.lines.len() == MAX_LINES {
                self.lines.pop_front();
                if let Some(top) = &mut self.top {
                    *top = top.saturating_sub(1);
                }
            }
            self.lines.push_back(line);
        }
    }

    pub fn end(&mut self, stream: u64, failed: Option<String>) {
        if stream == self.source.stream {
            self.state = failed.map_or(StreamState::Ended, StreamState::Failed);
        }
    }

    /// The first line at or after `from` that contains the search text.
    fn find_from(&self, from: usize) -> Option<usize> {
        let needle = self
            .search
            .as_deref()
            .filter(|s| !s.is_empty())?
            .to_lowercase();
        (from..self.lines.len()).find(|&i| self.lines[i].to_lowercase().contains(&needle))
    }

    /// Moves to the first match (from the top shown on).
    pub fn search_next(&mut self, page: usize) {
        let from = self.top.map_or(self.bottom_top(page), |t| t + 1);
        if let Some(i) = self.find_from(from).or_else(|| self.find_from(0)) {
            self.top = Some(i);
        }
    }

    fn bottom_top(&self, page: usize) -> usize {
        self.lines.len().saturating_sub(page)
    }

    /// The moving keys scroll (leaving the bottom stops sticking to it; `G` goes back).
    /// Whether the action was the view's.
    pub fn on_action(&mut self, action: Action, page: usize) -> bool {
        let top = self.top.unwrap_or_else(|| self.bottom_top(page));
        let last = self.bottom_top(page);
        self.top = match action {
            Action::Up => Some(top.saturating_sub(1)),
            Action::Down => Some((top + 1).min(last)),
            Action::PageUp => Some(top.saturating_sub(page)),
            Action::PageDown => Some((top + page).min(last)),
            Action::Top => Some(0),
            Action::Bottom => None,
            Action::SearchNext => {
                self.search_next(page);
                return true;
            }
            _ => return false,
        };
        if self.top == Some(last) {
            self.top = None;
        }
        true
    }
}

pub fn draw(f: &mut Frame, app: Look<'_>, v: &LogView, area: Rect) {
    let t = &app.theme;
    let mode = match (v.source.previous, v.source.follow) {
        (true, _) => "previous container",
        (false, true) => "following",
        (false, false) => "last lines",
    };
    let state = match &v.state {
        StreamState::Loading => "loading…".to_owned(),
        StreamState::Open => format!("{} lines", v.lines.len()),
        StreamState::Ended => format!("{} lines, ended", v.lines.len()),
        StreamState::Failed(e) => format!("✗ {e}"),
    };
    let mut title = format!(
        " Logs {}/{} · {mode} · {state} ",
        v.source.namespace, v.source.pod
    );
    if let Some(s) = &v.search {
        title.push_str(&format!("(search: {s}) "));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(t.base().fg(t.border))
        .title(Span::styled(title, t.header()));
    let inner = block.inner(area);
    f.render_widget(block, area);
    let height = inner.height as usize;
    let top = v.top.unwrap_or_else(|| v.bottom_top(height));
    let needle = v
        .search
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(str::to_lowercase);
    let lines: Vec<Line> = v
        .lines
        .iter()
        .skip(top)
        .take(height)
        .map(|l| {
            let text = fit(l, inner.width as usize);
            match &needle {
                Some(n) if l.to_lowercase().contains(n) => Line::styled(text, t.selected()),
                _ => Line::raw(text),
            }
        })
        .collect();
    f.render_widget(Paragraph::new(lines).style(t.base()), inner);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> LogView {
        LogView::new(LogSource {
            cluster: None,
            namespace: "apps".into(),
            pod: "web-1".into(),
            previous: false,
            follow: true,
            stream: 1,
        })
    }

    #[test]
    fn lines_of_another_stream_are_dropped_and_the_oldest_go_first() {
        let mut v = view();
        v.append(2, vec!["stale".into()]);
        assert!(v.lines.is_empty());
        v.append(1, (0..MAX_LINES + 5).map(|i| format!("line {i}")).collect());
        assert_eq!(v.lines.len(), MAX_LINES);
        assert_eq!(v.lines.front().unwrap(), "line 5");
        assert_eq!(v.state, StreamState::Open);
        v.end(1, Some("container exited".into()));
        assert_eq!(v.state, StreamState::Failed("container exited".into()));
    }

    #[test]
    fn search_finds_the_next_match_and_wraps() {
        let mut v = view();
        v.append(
            1,
            vec![
                "a".into(),
                "ERROR one".into(),
                "b".into(),
                "error two".into(),
            ],
        );
        v.search = Some("error".into());
        v.top = Some(0);
        v.search_next(2);
        assert_eq!(v.top, Some(1));
        v.search_next(2);
        assert_eq!(v.top, Some(3));
        v.search_next(2);
        assert_eq!(v.top, Some(1), "wraps to the first match");
        // G sticks to the bottom again.
        assert!(v.on_action(Action::Bottom, 2));
        assert_eq!(v.top, None);
    }
}

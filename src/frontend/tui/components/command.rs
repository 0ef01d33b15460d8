//! The `:` command line: `ns NAME`, `ns all`, `ctx NAME`, `quit`, with tab completion of
//! the command word, the namespace and the context, and the matches shown under it.

use crossterm::event::{KeyCode, KeyEvent};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use tui_textarea::TextArea;

use super::Look;
use super::line_input;
use crate::frontend::tui::keymap::{self, Action, Context};

pub const COMMAND_HINT: &str = "ns NAME | ns all | ctx NAME  (tab completes)";

/// The `:` command line.
pub struct CommandLine {
    pub text: TextArea<'static>,
    /// While tab cycles: the text as typed before the first tab, and the match shown.
    pub cycle: Option<(String, usize)>,
}

/// What a key did on the command line.
pub enum Typed {
    /// Still typing.
    Editing,
    Cancel,
    /// Enter: run this line.
    Run(String),
}

impl Default for CommandLine {
    fn default() -> Self {
        Self {
            text: line_input(COMMAND_HINT),
            cycle: None,
        }
    }
}

impl CommandLine {
    /// Takes a key; `complete` gives what the text typed so far completes to.
    pub fn on_key(&mut self, ev: KeyEvent, complete: impl Fn(&str) -> Completion) -> Typed {
        match ev.code {
            KeyCode::Esc => Typed::Cancel,
            KeyCode::Enter => Typed::Run(self.text.lines().concat()),
            _ => {
                if keymap::lookup(Context::Command, &ev) == Some(Action::Complete) {
                    self.complete(complete);
                } else {
                    self.text.input(ev);
                    self.cycle = None;
                }
                Typed::Editing
            }
        }
    }

    /// Tab: the first match, then the next one at each tab.
    fn complete(&mut self, completions: impl Fn(&str) -> Completion) {
        let (typed, next) = match &self.cycle {
            Some((typed, i)) => (typed.clone(), i + 1),
            None => (self.text.lines().concat(), 0),
        };
        let c = completions(&typed);
        if c.matches.is_empty() {
            return;
        }
        let i = next % c.matches.len();
        // A completed command word is followed by a space, ready for its argument.
        let space = if c.kind == "command" && c.matches.len() == 1 {
            " "
        } else {
            ""
        };
        let mut text = line_input(COMMAND_HINT);
        text.insert_str(format!("{}{}{space}", c.head, c.matches[i]));
        self.text = text;
        self.cycle = (c.matches.len() > 1).then_some((typed, i));
    }

    /// The text completions are computed from: as typed, not as completed.
    pub fn typed(&self) -> String {
        match &self.cycle {
            Some((typed, _)) => typed.clone(),
            None => self.text.lines().concat(),
        }
    }
}

/// What the command line can complete for some text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Completion {
    /// What is completed: "command", "namespace" or "context" (empty: nothing).
    pub kind: &'static str,
    /// The text before the word being completed.
    pub head: String,
    /// The word being completed, as typed.
    pub stem: String,
    /// Candidates that start with the stem, sorted.
    pub matches: Vec<String>,
}

/// What the command line completes for `line`: the command word, then the namespace of
/// `ns` (among `namespaces`) or the context of `ctx` (among `contexts`).
pub fn completions(
    line: &str,
    namespaces: impl IntoIterator<Item = String>,
    contexts: &[String],
) -> Completion {
    let split = line.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let (head, stem) = line.split_at(split);
    let words: Vec<&str> = head.split_whitespace().collect();
    let (kind, candidates): (&'static str, Vec<String>) = match words.as_slice() {
        [] => (
            "command",
            [
                "all", "ctx", "freeze", "grid", "ns", "quit", "thaw", "timeline",
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
        ["ns" | "namespace" | "n"] => {
            let mut all = vec!["all".to_owned()];
            all.extend(namespaces);
            ("namespace", all)
        }
        ["ctx" | "context"] => ("context", contexts.to_vec()),
        ["grid" | "where"] => ("grid by", vec!["chart".to_owned()]),
        _ => return Completion::default(),
    };
    let mut matches: Vec<String> = candidates
        .into_iter()
        .filter(|c| c.starts_with(stem))
        .collect();
    if kind != "command" {
        matches.sort();
        matches.dedup();
    }
    Completion {
        kind,
        head: head.to_owned(),
        stem: stem.to_owned(),
        matches,
    }
}

/// The command line's suggestions, under it as k9s shows them: what tab completes to,
/// the one shown bracketed.
pub fn draw_suggestions(
    f: &mut Frame,
    app: Look<'_>,
    line: &CommandLine,
    c: Completion,
    area: Rect,
) {
    let t = &app.theme;
    let keys = "tab completes · enter runs · esc cancels";
    let text = if c.kind.is_empty() {
        Line::styled(keys, t.muted())
    } else if c.matches.is_empty() {
        Line::styled(
            format!("no {} starts with {:?} · {keys}", c.kind, c.stem),
            t.muted(),
        )
    } else {
        let current = line.cycle.as_ref().map(|(_, i)| *i);
        let width = area.width as usize;
        let label = format!("{}s: ", c.kind);
        let mut used = label.chars().count();
        let mut spans = vec![Span::styled(label, t.muted())];
        // Start at the match shown when the ones before it would push it out.
        let fits = |from: usize, to: usize| {
            c.matches[from..=to]
                .iter()
                .map(|m| m.chars().count() + 3)
                .sum::<usize>()
                + used
                + 8
                <= width
        };
        let mut start = 0;
        if let Some(i) = current {
            while start < i && !fits(start, i) {
                start += 1;
            }
        }
        if start > 0 {
            spans.push(Span::styled("… ", t.muted()));
            used += 2;
        }
        for (i, m) in c.matches.iter().enumerate().skip(start) {
            let here = current == Some(i);
            let shown = if here { format!("[{m}]") } else { m.clone() };
            let w = shown.chars().count() + 1;
            let rest = c.matches.len() - i - 1;
            let tail = if rest > 0 {
                format!("… +{rest}").len()
            } else {
                0
            };
            if used + w + tail > width {
                spans.push(Span::styled(
                    format!("… +{}", c.matches.len() - i),
                    t.muted(),
                ));
                break;
            }
            used += w;
            spans.push(if here {
                Span::styled(shown, t.selected())
            } else {
                Span::styled(shown, t.base().fg(t.accent))
            });
            spans.push(Span::raw(" "));
        }
        Line::from(spans)
    };
    f.render_widget(Paragraph::new(text).style(t.base()), area);
}

//! The one keymap: key handling and the `?` help screen both read this table, so the help
//! cannot drift from what the keys do.

use std::fmt;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Where a binding applies. `Global` bindings work in the table and the detail view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Global,
    Table,
    Detail,
    Editor,
    /// The `:` command line.
    Command,
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Global => "Everywhere",
            Self::Table => "Release table",
            Self::Detail => "Detail view",
            Self::Editor => "Values editor",
            Self::Command => "Command line (:)",
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    Char(char),
    Ctrl(char),
    Up,
    Down,
    PageUp,
    PageDown,
    Home,
    End,
    Enter,
    Esc,
    Tab,
    Space,
    /// Any of `0`..`9`; the action gets the digit.
    Digit,
}

impl Key {
    fn matches(self, ev: &KeyEvent) -> bool {
        let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
        match (self, ev.code) {
            (Self::Ctrl(c), KeyCode::Char(k)) => ctrl && k.eq_ignore_ascii_case(&c),
            (Self::Space, KeyCode::Char(' ')) => !ctrl,
            (Self::Digit, KeyCode::Char(k)) => !ctrl && k.is_ascii_digit(),
            (Self::Char(c), KeyCode::Char(k)) => !ctrl && k == c,
            (Self::Up, KeyCode::Up)
            | (Self::Down, KeyCode::Down)
            | (Self::PageUp, KeyCode::PageUp)
            | (Self::PageDown, KeyCode::PageDown)
            | (Self::Home, KeyCode::Home)
            | (Self::End, KeyCode::End)
            | (Self::Enter, KeyCode::Enter)
            | (Self::Esc, KeyCode::Esc)
            | (Self::Tab, KeyCode::Tab) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Char(c) => write!(f, "{c}"),
            Self::Ctrl(c) => write!(f, "ctrl-{c}"),
            Self::Up => f.write_str("↑"),
            Self::Down => f.write_str("↓"),
            Self::PageUp => f.write_str("pgup"),
            Self::PageDown => f.write_str("pgdn"),
            Self::Home => f.write_str("home"),
            Self::End => f.write_str("end"),
            Self::Enter => f.write_str("enter"),
            Self::Esc => f.write_str("esc"),
            Self::Tab => f.write_str("tab"),
            Self::Space => f.write_str("space"),
            Self::Digit => f.write_str("0-9"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Quit,
    Up,
    Down,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Open,
    Back,
    Filter,
    Command,
    Help,
    Redraw,
    SortNext,
    SortReverse,
    Mark,
    MarkAll,
    ClearMarks,
    Suspend,
    Resume,
    Reconcile,
    CancelWait,
    Edit,
    Overview,
    History,
    Values,
    Manifest,
    Events,
    NextTab,
    Save,
    /// Namespace favourite `n` (`0`: every namespace).
    Namespace(u8),
    /// Complete the word under the command line's cursor, or the next match.
    Complete,
}

impl Action {
    /// The action changes something in the cluster: `--readonly` neither offers nor runs it.
    pub fn writes(self) -> bool {
        matches!(
            self,
            Self::Suspend
                | Self::Resume
                | Self::Reconcile
                | Self::CancelWait
                | Self::Edit
                | Self::Save
        )
    }
}

pub struct Binding {
    pub context: Context,
    pub keys: &'static [Key],
    pub action: Action,
    pub help: &'static str,
}

const fn b(context: Context, keys: &'static [Key], action: Action, help: &'static str) -> Binding {
    Binding {
        context,
        keys,
        action,
        help,
    }
}

use Context::{Command, Detail, Editor, Global, Table};

pub const KEYMAP: &[Binding] = &[
    b(
        Global,
        &[Key::Char('q'), Key::Ctrl('c')],
        Action::Quit,
        "quit",
    ),
    b(Global, &[Key::Char('?')], Action::Help, "this help"),
    b(
        Global,
        &[Key::Char(':')],
        Action::Command,
        "switch namespace/context",
    ),
    b(
        Global,
        &[Key::Ctrl('l')],
        Action::Redraw,
        "redraw the screen",
    ),
    b(Global, &[Key::Char('j'), Key::Down], Action::Down, "down"),
    b(Global, &[Key::Char('k'), Key::Up], Action::Up, "up"),
    b(
        Global,
        &[Key::PageDown, Key::Ctrl('d')],
        Action::PageDown,
        "page down",
    ),
    b(
        Global,
        &[Key::PageUp, Key::Ctrl('u')],
        Action::PageUp,
        "page up",
    ),
    b(Global, &[Key::Char('g'), Key::Home], Action::Top, "first"),
    b(Global, &[Key::Char('G'), Key::End], Action::Bottom, "last"),
    b(
        Global,
        &[Key::Char('s')],
        Action::Suspend,
        "suspend (never resumes)",
    ),
    b(
        Global,
        &[Key::Char('S')],
        Action::Resume,
        "resume (never suspends)",
    ),
    b(
        Global,
        &[Key::Char('r')],
        Action::Reconcile,
        "reconcile now",
    ),
    b(
        Global,
        &[Key::Char('c')],
        Action::CancelWait,
        "cancel wait (asks first)",
    ),
    b(Global, &[Key::Char('e')], Action::Edit, "edit spec.values"),
    b(Global, &[Key::Char('h')], Action::History, "history"),
    b(Global, &[Key::Char('v')], Action::Values, "values (masked)"),
    b(
        Global,
        &[Key::Char('m')],
        Action::Manifest,
        "manifest (Secrets masked)",
    ),
    b(Global, &[Key::Char('E')], Action::Events, "events"),
    b(Table, &[Key::Enter], Action::Open, "details"),
    b(
        Table,
        &[Key::Char('/')],
        Action::Filter,
        "filter (esc clears)",
    ),
    b(Table, &[Key::Space], Action::Mark, "mark for bulk actions"),
    b(
        Table,
        &[Key::Ctrl('a')],
        Action::MarkAll,
        "mark every visible row",
    ),
    b(Table, &[Key::Char('u')], Action::ClearMarks, "clear marks"),
    b(
        Table,
        &[Key::Char('o')],
        Action::SortNext,
        "sort by next column",
    ),
    b(
        Table,
        &[Key::Char('O')],
        Action::SortReverse,
        "reverse the sort",
    ),
    b(Table, &[Key::Esc], Action::Back, "clear the filter"),
    b(
        Table,
        &[Key::Digit],
        Action::Namespace(0),
        "ns: 0 all, 1-9 favourites",
    ),
    b(Detail, &[Key::Char('d')], Action::Overview, "overview"),
    b(Detail, &[Key::Tab], Action::NextTab, "next tab"),
    b(Detail, &[Key::Esc], Action::Back, "back to the table"),
    b(
        Editor,
        &[Key::Ctrl('s')],
        Action::Save,
        "validate, confirm, apply",
    ),
    b(Editor, &[Key::Esc], Action::Back, "leave (draft kept)"),
    b(
        Command,
        &[Key::Tab],
        Action::Complete,
        "complete ns/ctx (cycles)",
    ),
];

/// The action a key triggers in a context (its own bindings first, then global ones).
pub fn lookup(context: Context, ev: &KeyEvent) -> Option<Action> {
    let find = |ctx: Context| {
        KEYMAP
            .iter()
            .filter(|b| b.context == ctx)
            .find(|b| b.keys.iter().any(|k| k.matches(ev)))
            .map(|b| match (b.action, ev.code) {
                (Action::Namespace(_), KeyCode::Char(c)) => {
                    Action::Namespace(c.to_digit(10).unwrap_or(0) as u8)
                }
                (action, _) => action,
            })
    };
    find(context).or_else(|| match context {
        Context::Editor | Context::Command => None,
        _ => find(Context::Global),
    })
}

/// One line of the help: keys, what they do, and the action (so a read-only help can
/// leave out the writes).
pub type HelpRow = (String, &'static str, Action);

/// The help screen's lines, grouped by context: (heading, [(keys, help, action)]).
pub fn help() -> Vec<(Context, Vec<HelpRow>)> {
    [Global, Table, Detail, Editor, Command]
        .into_iter()
        .map(|ctx| {
            let rows = KEYMAP
                .iter()
                .filter(|b| b.context == ctx)
                .map(|b| {
                    let keys: Vec<String> = b.keys.iter().map(Key::to_string).collect();
                    (keys.join(" "), b.help, b.action)
                })
                .collect();
            (ctx, rows)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(code: KeyCode, modifiers: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, modifiers)
    }

    #[test]
    fn context_bindings_win_and_editor_ignores_globals() {
        let esc = key(KeyCode::Esc, KeyModifiers::NONE);
        assert_eq!(lookup(Context::Detail, &esc), Some(Action::Back));
        let q = key(KeyCode::Char('q'), KeyModifiers::NONE);
        assert_eq!(lookup(Context::Table, &q), Some(Action::Quit));
        assert_eq!(lookup(Context::Editor, &q), None);
        let ctrl_c = key(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(lookup(Context::Table, &ctrl_c), Some(Action::Quit));
        let c = key(KeyCode::Char('c'), KeyModifiers::NONE);
        assert_eq!(lookup(Context::Table, &c), Some(Action::CancelWait));
        let shift_e = key(KeyCode::Char('E'), KeyModifiers::SHIFT);
        assert_eq!(lookup(Context::Detail, &shift_e), Some(Action::Events));
    }

    #[test]
    fn digits_carry_their_number_and_only_in_the_table() {
        let digit = |c| key(KeyCode::Char(c), KeyModifiers::NONE);
        assert_eq!(
            lookup(Context::Table, &digit('0')),
            Some(Action::Namespace(0))
        );
        assert_eq!(
            lookup(Context::Table, &digit('7')),
            Some(Action::Namespace(7))
        );
        assert_eq!(lookup(Context::Detail, &digit('1')), None);
        let tab = key(KeyCode::Tab, KeyModifiers::NONE);
        assert_eq!(lookup(Context::Command, &tab), Some(Action::Complete));
        let q = key(KeyCode::Char('q'), KeyModifiers::NONE);
        assert_eq!(lookup(Context::Command, &q), None, "typed, not a key");
    }

    #[test]
    fn no_key_is_bound_twice_in_one_context() {
        for (i, a) in KEYMAP.iter().enumerate() {
            for b in &KEYMAP[i + 1..] {
                let overlap = a.context == b.context && a.keys.iter().any(|k| b.keys.contains(k));
                assert!(!overlap, "{:?} and {:?} share a key", a.action, b.action);
            }
        }
    }

    #[test]
    fn help_texts_fit_the_two_column_help_at_80_columns() {
        for b in KEYMAP {
            assert!(b.help.chars().count() <= 25, "{:?} is too long", b.help);
        }
    }

    #[test]
    fn help_lists_every_binding() {
        let n: usize = help().iter().map(|(_, rows)| rows.len()).sum();
        assert_eq!(n, KEYMAP.len());
    }
}

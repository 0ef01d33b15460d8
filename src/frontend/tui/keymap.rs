//! The one keymap: key handling and the `?` help screen both read this table, so the help
//! cannot drift from what the keys do.

use std::fmt;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::frontend::inventory::Kind;

/// Where a binding applies. `Global` bindings work in the table and the detail view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    Global,
    Table,
    Detail,
    /// A pod's logs (from the detail view).
    Logs,
    /// A diff, a revision shown whole, or what a write will change (with its question).
    Changes,
    Editor,
    /// The Timeline view (`T`).
    Timeline,
    /// The `:` command line.
    Command,
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Global => "Everywhere",
            Self::Table => "Release table",
            Self::Detail => "Detail view",
            Self::Logs => "Logs",
            Self::Changes => "Changes (diffs)",
            Self::Editor => "Values editor",
            Self::Timeline => "Timeline",
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
    /// Flux: a one-off upgrade (`reconcile.fluxcd.io/forceAt`).
    Force,
    /// Flux: reset the failure counters (`reconcile.fluxcd.io/resetAt`).
    Reset,
    /// Roll back to the revision under the History tab's cursor: a helm CLI release as
    /// `helm rollback` does, a wheelhouse one pinned there (suspended until resumed).
    Rollback,
    /// History tab: the diff of the revision under the cursor and the marked one (or the
    /// newest).
    Compare,
    /// How the live objects differ from the newest revision (wheelhouse releases).
    Drift,
    /// Answer yes to the question of the view in front.
    Yes,
    /// helm CLI releases: uninstall, as `helm uninstall`.
    Uninstall,
    Edit,
    Overview,
    History,
    Values,
    Manifest,
    Events,
    NextTab,
    /// The logs of the release's first failing pod.
    Logs,
    /// Logs: follow new lines, or stop following.
    Follow,
    /// Logs: the previous container's, or the current one's.
    Previous,
    /// Logs: the next line matching the search.
    SearchNext,
    Save,
    /// Namespace favourite `n` (`0`: every namespace).
    Namespace(u8),
    /// Complete the word under the command line's cursor, or the next match.
    Complete,
    /// Every change to any release, newest first.
    Timeline,
    /// An incident freeze of the marked rows (else the view): the command line, filled
    /// with `freeze 2h ` for the reason.
    Freeze,
    /// Thaw the frozen releases among the marked rows (else the view), after asking.
    Thaw,
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
                | Self::Force
                | Self::Reset
                | Self::Rollback
                | Self::Uninstall
                | Self::Edit
                | Self::Save
                | Self::Freeze
                | Self::Thaw
        )
    }

    /// The kinds of release the action exists for, in the way its owner expects; it is
    /// neither offered nor run for the others.
    pub fn kinds(self) -> &'static [Kind] {
        const HR: &[Kind] = &[Kind::Wheelhouse, Kind::Flux];
        match self {
            Self::Suspend
            | Self::Resume
            | Self::Reconcile
            | Self::CancelWait
            | Self::Freeze
            | Self::Thaw => HR,
            Self::Force | Self::Reset => &[Kind::Flux],
            Self::Rollback => &[Kind::Wheelhouse, Kind::Helm],
            Self::Uninstall => &[Kind::Helm],
            Self::Edit | Self::Save | Self::Drift => &[Kind::Wheelhouse],
            _ => &Kind::ALL,
        }
    }

    /// Whether the action exists for `kind`.
    pub fn applies_to(self, kind: Kind) -> bool {
        self.kinds().contains(&kind)
    }
}

pub struct Binding {
    pub context: Context,
    pub keys: &'static [Key],
    pub action: Action,
    pub help: &'static str,
    /// What the footer shows for it (starting with its key), and how much it matters
    /// there: when the width runs out, the highest rank goes first.
    pub hint: Option<(u8, &'static str)>,
}

const fn b(context: Context, keys: &'static [Key], action: Action, help: &'static str) -> Binding {
    Binding {
        context,
        keys,
        action,
        help,
        hint: None,
    }
}

impl Binding {
    /// Shown in the footer as `text`; rank 0 is kept longest.
    const fn hint(self, rank: u8, text: &'static str) -> Self {
        Self {
            hint: Some((rank, text)),
            ..self
        }
    }
}

use Context::{Changes, Command, Detail, Editor, Global, Logs, Table, Timeline};

pub const KEYMAP: &[Binding] = &[
    b(
        Global,
        &[Key::Char('q'), Key::Ctrl('c')],
        Action::Quit,
        "quit",
    )
    .hint(3, "q quit"),
    b(Global, &[Key::Char('?')], Action::Help, "this help").hint(0, "? help"),
    b(Global, &[Key::Ctrl('l')], Action::Redraw, "redraw"),
    b(
        Global,
        &[Key::Char(':')],
        Action::Command,
        "switch namespace/context",
    )
    .hint(4, ": ns/ctx"),
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
    b(Global, &[Key::Char('s')], Action::Suspend, "suspend").hint(1, "s suspend"),
    b(Global, &[Key::Char('S')], Action::Resume, "resume"),
    b(Global, &[Key::Char('r')], Action::Reconcile, "reconcile").hint(1, "r reconcile"),
    b(Global, &[Key::Char('T')], Action::Timeline, "timeline"),
    b(Table, &[Key::Char('z')], Action::Freeze, "freeze").hint(6, "z freeze"),
    b(Table, &[Key::Char('Z')], Action::Thaw, "thaw"),
    b(Global, &[Key::Char('c')], Action::CancelWait, "cancel").hint(1, "c cancel wait"),
    b(Global, &[Key::Char('F')], Action::Force, "force").hint(2, "F force"),
    b(Global, &[Key::Char('R')], Action::Reset, "reset").hint(3, "R reset"),
    b(Global, &[Key::Char('D')], Action::Uninstall, "uninstall").hint(2, "D uninstall"),
    b(Global, &[Key::Char('e')], Action::Edit, "edit spec.values").hint(2, "e edit"),
    b(Global, &[Key::Char('h')], Action::History, "history"),
    b(Global, &[Key::Char('E')], Action::Events, "events"),
    b(Global, &[Key::Char('v')], Action::Values, "values"),
    b(Global, &[Key::Char('m')], Action::Manifest, "manifest"),
    b(Table, &[Key::Enter], Action::Open, "details").hint(2, "enter details"),
    b(Table, &[Key::Char('u')], Action::ClearMarks, "unmark"),
    b(
        Table,
        &[Key::Char('/')],
        Action::Filter,
        "filter (esc clears)",
    )
    .hint(3, "/ filter"),
    b(Table, &[Key::Space], Action::Mark, "mark for bulk actions").hint(5, "space mark"),
    b(
        Table,
        &[Key::Ctrl('a')],
        Action::MarkAll,
        "mark every visible row",
    ),
    b(Table, &[Key::Char('o')], Action::SortNext, "sort by").hint(5, "o sort"),
    b(Table, &[Key::Char('O')], Action::SortReverse, "reverse"),
    b(Table, &[Key::Esc], Action::Back, "clear the filter"),
    b(
        Table,
        &[Key::Digit],
        Action::Namespace(0),
        "ns: 0 all, 1-9 favourites",
    ),
    b(Detail, &[Key::Char('d')], Action::Overview, "overview"),
    b(Detail, &[Key::Tab], Action::NextTab, "next tab").hint(3, "tab/d h v m E views"),
    b(Detail, &[Key::Char('b')], Action::Rollback, "roll back").hint(3, "b roll back"),
    b(Detail, &[Key::Char('x')], Action::Compare, "diff revs").hint(5, "x diff"),
    b(Detail, &[Key::Char('w')], Action::Drift, "drift diff").hint(5, "w drift"),
    b(Detail, &[Key::Space], Action::Mark, "mark rev"),
    b(Detail, &[Key::Enter], Action::Open, "show rev"),
    b(Detail, &[Key::Char('l')], Action::Logs, "pod logs").hint(2, "l logs"),
    b(Logs, &[Key::Char('f')], Action::Follow, "follow").hint(1, "f follow"),
    b(Logs, &[Key::Char('p')], Action::Previous, "previous").hint(1, "p previous"),
    b(Logs, &[Key::Char('/')], Action::Filter, "search").hint(2, "/ search"),
    b(Logs, &[Key::Char('n')], Action::SearchNext, "next hit").hint(2, "n next"),
    b(Logs, &[Key::Esc], Action::Back, "back").hint(0, "esc back"),
    b(Changes, &[Key::Char('y')], Action::Yes, "yes").hint(0, "y yes"),
    b(Changes, &[Key::Char('/')], Action::Filter, "search").hint(2, "/ search"),
    b(Changes, &[Key::Char('n')], Action::SearchNext, "next hit").hint(2, "n next"),
    b(Changes, &[Key::Esc], Action::Back, "close, no").hint(0, "esc close/no"),
    b(Detail, &[Key::Esc], Action::Back, "back").hint(2, "esc back"),
    b(Timeline, &[Key::Enter], Action::Open, "diff").hint(0, "enter diff"),
    b(Timeline, &[Key::Esc], Action::Back, "back").hint(0, "esc back"),
    b(Editor, &[Key::Ctrl('s')], Action::Save, "review").hint(0, "ctrl-s validate & apply"),
    b(Editor, &[Key::Esc], Action::Back, "leave").hint(0, "esc leave (draft kept)"),
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
        // The Timeline filters as the table does (`/`, listed there).
        Context::Timeline => find(Context::Table)
            .filter(|a| *a == Action::Filter)
            .or_else(|| find(Context::Global)),
        _ => find(Context::Global),
    })
}

/// The footer's hints in `context` (its own bindings, then the global ones unless it
/// is the editor), leaving out writes when `readonly` and actions that do not exist for
/// the `kind` of release under the cursor: as (rank, text), in keymap order.
pub fn hints(context: Context, readonly: bool, kind: Option<Kind>) -> Vec<(u8, &'static str)> {
    let global = !matches!(context, Context::Editor | Context::Command);
    KEYMAP
        .iter()
        .filter(|b| b.context == context || (global && b.context == Context::Global))
        // The views in front of a release (logs, changes) and the Timeline take no write
        // from a global key.
        .filter(|b| {
            !(matches!(
                context,
                Context::Logs | Context::Changes | Context::Timeline
            ) && b.context == Context::Global
                && b.action.writes())
        })
        // Read-only: no write, and no marking for the bulk writes.
        .filter(|b| !(readonly && (b.action.writes() || b.action == Action::Mark)))
        .filter(|b| kind.is_none_or(|k| b.action.applies_to(k)))
        .filter_map(|b| b.hint)
        .collect()
}

/// One line of the help: keys, what they do, and the action (so a read-only help can
/// leave out the writes).
pub type HelpRow = (String, &'static str, Action);

/// The help screen's lines, grouped by context: (heading, [(keys, help, action)]).
pub fn help() -> Vec<(Context, Vec<HelpRow>)> {
    [
        Global, Table, Detail, Logs, Changes, Timeline, Editor, Command,
    ]
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
    fn every_hint_starts_with_its_key() {
        for b in KEYMAP {
            if let Some((_, text)) = b.hint {
                let first = b.keys[0].to_string();
                assert!(
                    text.starts_with(&first),
                    "{text:?} does not start with {first}"
                );
            }
        }
    }

    #[test]
    fn help_lists_every_binding() {
        let n: usize = help().iter().map(|(_, rows)| rows.len()).sum();
        assert_eq!(n, KEYMAP.len());
    }
}

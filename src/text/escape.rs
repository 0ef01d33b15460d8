//! Text from the cluster is data: a status message, a Helm description or an Event is
//! written by whoever can write a chart or a HelmRelease, and a terminal reads control
//! characters in it as commands (`ESC ]2;…BEL` retitles the window, `ESC [2J` clears
//! it). Every CLI output that prints such text passes it through [`escape`], which
//! writes each control character as a visible escape; the dashboard drops them
//! (ratatui does not draw a grapheme holding one). `-o json` escapes them by itself.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character (C0 including newline and tab, DEL, C1) and every
/// bidirectional override or isolate (which reorders what the terminal shows) written as
/// `\xNN` or `\u{NNNN}`; a backslash stays as it is. Borrowed when there is nothing to
/// escape, which is nearly always.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            let code = u32::from(c);
            if code < 0x100 {
                let _ = write!(out, "\\x{code:02x}");
            } else {
                let _ = write!(out, "\\u{{{code:04x}}}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_become_visible() {
        let hostile = "upgrade failed\u{1b}]2;pwned\u{7}\u{1b}[2J\r\nnext\u{9b}31m\u{7f}";
        let shown = escape(hostile);
        assert_eq!(
            shown,
            "upgrade failed\\x1b]2;pwned\\x07\\x1b[2J\\x0d\\x0anext\\x9b31m\\x7f"
        );
        assert!(!shown.chars().any(char::is_control), "{shown}");
        assert_eq!(escape("a\u{202e}b"), "a\\u{202e}b");
    }

    #[test]
    fn plain_text_is_borrowed_as_it_is() {
        for text in ["Helm upgrade succeeded", "ünïcødé ✓ 日本", r"C:\path", ""] {
            assert!(matches!(escape(text), Cow::Borrowed(t) if t == text));
        }
    }
}

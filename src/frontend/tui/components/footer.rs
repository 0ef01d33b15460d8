//! The footer: the keys of the view in front, from the one keymap. When the width runs
//! out, the least needed go first (sorting and marking before the actions), so at 80
//! columns the action keys are still there; `?` lists them all.

use crate::frontend::inventory::Kind;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::widgets::Paragraph;

use super::Look;
use crate::frontend::tui::keymap::{self, Context};

const SEPARATOR: &str = " · ";

/// `context`: the view in front; `kind`: the kind of the release under the cursor.
pub fn draw(
    f: &mut Frame,
    app: Look<'_>,
    context: Context,
    kind: Option<crate::frontend::inventory::Kind>,
    area: Rect,
) {
    let line = footer(context, app.readonly, kind, area.width as usize);
    f.render_widget(Paragraph::new(line).style(app.theme.muted()), area);
}

/// The footer text for `context` and the kind of release under the cursor, in `width`
/// columns.
pub fn footer(context: Context, readonly: bool, kind: Option<Kind>, width: usize) -> String {
    let mut hints = keymap::hints(context, readonly, kind);
    // Help first and quit last, the rest in keymap order.
    hints.sort_by_key(|(_, text)| match *text {
        "? help" => 0,
        "q quit" => 2,
        _ => 1,
    });
    let mut shown: Vec<&str> = Vec::new();
    if readonly {
        shown.push("READ-ONLY");
    }
    let mut by_rank: Vec<usize> = (0..hints.len()).collect();
    by_rank.sort_by_key(|&i| hints[i].0);
    let mut keep = vec![false; hints.len()];
    let mut used: usize = shown.iter().map(|s| s.chars().count()).sum();
    for i in by_rank {
        let text = hints[i].1;
        let sep = if used == 0 {
            0
        } else {
            SEPARATOR.chars().count()
        };
        let w = sep + text.chars().count();
        if used + w > width {
            break;
        }
        used += w;
        keep[i] = true;
    }
    shown.extend(
        hints
            .iter()
            .zip(keep)
            .filter(|(_, k)| *k)
            .map(|((_, text), _)| *text),
    );
    shown.join(SEPARATOR)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_80_columns_the_action_keys_stay() {
        for context in [Context::Table, Context::Detail] {
            let line = footer(context, false, Some(Kind::Wheelhouse), 80);
            assert!(line.chars().count() <= 80, "{line}");
            for key in [
                "? help",
                "s suspend",
                "r reconcile",
                "c cancel wait",
                "e edit",
            ] {
                assert!(line.contains(key), "{context}: {line}");
            }
        }
        let editor = footer(Context::Editor, false, None, 80);
        assert!(
            editor.contains("ctrl-s") && editor.contains("esc"),
            "{editor}"
        );
    }

    #[test]
    fn each_kind_is_offered_its_own_actions_only() {
        let flux = footer(Context::Table, false, Some(Kind::Flux), 200);
        for key in [
            "s suspend",
            "r reconcile",
            "c cancel wait",
            "F force",
            "R reset",
        ] {
            assert!(flux.contains(key), "{flux}");
        }
        for key in ["e edit", "D uninstall"] {
            assert!(!flux.contains(key), "{flux}");
        }
        let helm = footer(Context::Detail, false, Some(Kind::Helm), 80);
        assert!(
            helm.contains("b roll back") && helm.contains("D uninstall"),
            "{helm}"
        );
        for key in ["s suspend", "r reconcile", "e edit", "F force"] {
            assert!(!helm.contains(key), "{helm}");
        }
        let wheelhouse = footer(Context::Table, false, Some(Kind::Wheelhouse), 200);
        for key in ["F force", "D uninstall", "b roll back"] {
            assert!(!wheelhouse.contains(key), "{wheelhouse}");
        }
    }

    #[test]
    fn read_only_offers_no_write() {
        let line = footer(Context::Table, true, None, 200);
        assert!(line.starts_with("READ-ONLY"), "{line}");
        for write in ["suspend", "reconcile", "cancel", "edit"] {
            assert!(!line.contains(write), "{line}");
        }
    }
}

//! The freeze banner, under the header while any release in view is frozen: who froze,
//! why, until when (or overdue) and how many releases, read from the records on the
//! releases themselves (`engine/freeze.rs`), so every dashboard on the cluster says it.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::widgets::Paragraph;

use super::fit;
use crate::engine::FreezeRecord;
use crate::frontend::tui::suspension::FORGOTTEN_AFTER;
use crate::frontend::tui::view_model::RowKey;

/// The banner's text and whether some freeze is overdue; `None` while nothing is frozen
/// and no suspend is forgotten. Freezes are told apart by their record (who, why, until);
/// the one ending first leads. `forgotten` releases have been suspended past the
/// threshold with no freeze (`tui::suspension`).
pub fn text(
    frozen: &BTreeMap<RowKey, FreezeRecord>,
    forgotten: usize,
    now: Timestamp,
) -> Option<(String, bool)> {
    let forgotten_note = (forgotten > 0).then(|| {
        format!(
            "⏸ {forgotten} release{} suspended over {} with no freeze (/{} lists them)",
            if forgotten == 1 { "" } else { "s" },
            crate::text::age::coarse(FORGOTTEN_AFTER.as_secs() as i64),
            crate::frontend::tui::suspension::FILTER,
        )
    });
    match (freezes(frozen, now), forgotten_note) {
        (Some((text, overdue)), Some(note)) => Some((format!("{text}  ·  {note}"), overdue)),
        (Some(frozen), None) => Some(frozen),
        (None, Some(note)) => Some((note, false)),
        (None, None) => None,
    }
}

fn freezes(frozen: &BTreeMap<RowKey, FreezeRecord>, now: Timestamp) -> Option<(String, bool)> {
    let mut freezes: BTreeMap<(Option<Timestamp>, &str, &str, bool), usize> = BTreeMap::new();
    for r in frozen.values() {
        *freezes
            .entry((r.until, r.by.as_str(), r.reason.as_str(), r.until_thawed))
            .or_default() += 1;
    }
    let overdue = frozen.values().any(|r| r.overdue(now));
    let ((until, by, reason, until_thawed), count) = freezes.iter().next()?;
    let when = match until {
        Some(u) if *u > now => format!(
            "until {} ({} left{})",
            u.strftime("%H:%M UTC"),
            crate::text::age::since(now, *u),
            if *until_thawed {
                ", then until thawed"
            } else {
                ""
            }
        ),
        Some(u) if *until_thawed => format!("OVERDUE since {}", u.strftime("%H:%M UTC")),
        Some(_) => "ended, thawing".to_owned(),
        None => "OVERDUE".to_owned(),
    };
    let mut text = format!(
        "❄ FROZEN {count} release{} by {by} {when}: {reason}",
        if *count == 1 { "" } else { "s" }
    );
    if freezes.len() > 1 {
        text.push_str(&format!("  (+{} more freezes)", freezes.len() - 1));
    }
    Some((text, overdue))
}

pub fn draw(
    f: &mut Frame,
    theme: &crate::frontend::tui::theme::Theme,
    text: &str,
    overdue: bool,
    area: Rect,
) {
    let style = if overdue {
        theme.base().fg(theme.error).add_modifier(Modifier::BOLD)
    } else {
        theme
            .base()
            .fg(theme.progressing)
            .add_modifier(Modifier::BOLD)
    };
    // The cluster's text (a reason, a username) is data: no control characters reach
    // the terminal.
    let clean: String = text.chars().filter(|c| !c.is_control()).collect();
    f.render_widget(
        Paragraph::new(fit(&clean, area.width as usize)).style(style),
        area,
    );
}

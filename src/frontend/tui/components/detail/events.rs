//! The detail view's events tab.

use ratatui::text::{Line, Span, Text};

use crate::frontend::tui::view_model::{State, age};

use super::{Detail, DetailScreen, fetched};

pub(super) fn events<'a>(app: &DetailScreen<'_>, d: &Detail) -> Text<'a> {
    let t = &app.theme;
    fetched(app, &d.data.events, |events| {
        if events.is_empty() {
            return Text::styled("  no events", t.muted());
        }
        Text::from(
            events
                .iter()
                .map(|e| {
                    let warn = e.kind == "Warning";
                    let (sym, state) = if warn {
                        ("!", State::Failed)
                    } else {
                        ("·", State::Ready)
                    };
                    Line::from(vec![
                        Span::styled(format!("  {sym} {:<7} ", e.kind), t.state(state)),
                        Span::styled(
                            format!("{:>6} ", e.age.map_or("-".into(), |a| age(a, app.now))),
                            t.muted(),
                        ),
                        Span::raw(format!(
                            "{:<20} {}{}",
                            e.reason,
                            e.message.replace('\n', " "),
                            if e.count > 1 {
                                format!(" (x{})", e.count)
                            } else {
                                String::new()
                            }
                        )),
                    ])
                })
                .collect::<Vec<_>>(),
        )
    })
}

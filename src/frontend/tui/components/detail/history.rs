//! The detail view's history tab: every revision in Helm's storage, newest first.

use ratatui::text::{Line, Span, Text};

use crate::engine::ReleaseView;
use crate::frontend::inventory::Kind;
use crate::frontend::tui::view_model::{Fetch, State, age};

use super::{Detail, DetailScreen, fetched};

/// `helm history`: every stored revision, newest first; for a helm CLI release a cursor
/// picks the one `b` rolls back to.
pub(super) fn stored_history<'a>(app: &DetailScreen<'_>, d: &Detail) -> Text<'a> {
    let t = &app.theme;
    fetched(app, &d.data.revisions, |revisions| {
        if revisions.is_empty() {
            return Text::styled("  no revisions stored", t.muted());
        }
        let chart_w = revisions
            .iter()
            .map(|r| r.chart.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let status_w = revisions
            .iter()
            .map(|r| r.status.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let mut lines = vec![Line::styled(
            format!(
                "  {:<4} {:<sw$} {:<chart_w$} {:<11} {:>8}  DESCRIPTION",
                "REV",
                "STATUS",
                "CHART",
                "APP VERSION",
                "UPDATED",
                sw = status_w + 2,
            ),
            t.muted(),
        )];
        for (i, r) in revisions.iter().enumerate() {
            let state = match r.status.as_str() {
                "deployed" | "superseded" => State::Ready,
                "failed" => State::Failed,
                s if s.starts_with("pending") => State::Progressing,
                _ => State::Unknown,
            };
            let picked = d.picking() && i == d.pick;
            let marker = match (picked, d.base == Some(r.revision)) {
                (true, true) => "›◆",
                (true, false) => "› ",
                (false, true) => " ◆",
                (false, false) => "  ",
            };
            let line = Line::from(vec![
                Span::raw(format!("{marker}{:<4} ", r.revision)),
                Span::styled(
                    format!("{} {:<status_w$} ", state.symbol(), r.status),
                    t.state(state),
                ),
                Span::raw(format!(
                    "{:<chart_w$} {:<11} {:>8}  ",
                    r.chart,
                    r.app_version,
                    r.updated.map_or("-".into(), |u| age(u, app.now)),
                )),
                Span::styled(r.description.clone(), t.muted()),
            ]);
            lines.push(if picked {
                line.style(t.selected())
            } else {
                line
            });
        }
        if d.picking() {
            lines.push(Line::raw(""));
            let rollback = if app.readonly || d.key.kind == Kind::Flux {
                ""
            } else {
                " · b roll back (diff, asks)"
            };
            lines.push(Line::styled(
                format!(
                    "  j/k pick · enter show · x diff vs {} · space mark ◆{rollback}",
                    if d.base.is_some() { "◆" } else { "newest" }
                ),
                t.muted(),
            ));
        }
        Text::from(lines)
    })
}

pub(super) fn history<'a>(app: &DetailScreen<'_>, d: &Detail, view: &ReleaseView) -> Text<'a> {
    let t = &app.theme;
    let history = view
        .release
        .status
        .as_ref()
        .map(|s| s.history.as_slice())
        .unwrap_or_default();
    // The revision in flight is in Helm's storage before status.history records it.
    let in_flight = match &d.data.helm {
        Fetch::Loaded(h) if history.first().is_none_or(|f| h.revision > f.version) => Some(h),
        _ => None,
    };
    if history.is_empty() && in_flight.is_none() {
        return Text::styled("  no revisions yet", t.muted());
    }
    // Columns as wide as their widest cell (a `pending-rollback` status or a long chart
    // name would otherwise push the rest of its row out of line).
    // A Git chart's revision names its commit, as `git log --oneline` abbreviates it.
    let chart_of = |h: &crate::api::Snapshot| match &h.commit {
        Some(c) => format!(
            "{}-{}@{}",
            h.chart_name,
            h.chart_version,
            &c[..c.len().min(12)]
        ),
        None => format!("{}-{}", h.chart_name, h.chart_version),
    };
    let rev_w = history
        .iter()
        .map(|h| h.version.to_string().len())
        .chain(in_flight.map(|h| h.revision.to_string().len()))
        .chain([3])
        .max()
        .unwrap_or(3);
    let status_w = history
        .iter()
        .map(|h| h.status.len())
        .chain(in_flight.map(|h| h.status.len()))
        .chain([6])
        .max()
        .unwrap_or(6);
    let chart_w = history
        .iter()
        .map(|h| chart_of(h).len())
        .chain(in_flight.map(|h| h.chart.len()))
        .chain([5])
        .max()
        .unwrap_or(5);
    let action_w = history
        .iter()
        .map(|h| h.action.as_deref().unwrap_or_default().len())
        .chain([6])
        .max()
        .unwrap_or(6);
    let mut lines = vec![Line::styled(
        format!(
            "  {:<rev_w$} {:<sw$} {:<chart_w$} {:<action_w$} {:>8}  {}",
            "REV",
            "STATUS",
            "CHART",
            "ACTION",
            "DEPLOYED",
            "DIGEST",
            sw = status_w + 2,
        ),
        t.muted(),
    )];
    if let Some(h) = in_flight {
        let state = if h.status.starts_with("pending") {
            State::Progressing
        } else {
            State::Unknown
        };
        lines.push(Line::from(vec![
            Span::raw(format!("  {:<rev_w$} ", h.revision)),
            Span::styled(
                format!("{} {:<status_w$} ", state.symbol(), h.status),
                t.state(state),
            ),
            Span::raw(format!("{:<chart_w$} ", h.chart)),
            Span::styled(h.description.clone(), t.muted()),
        ]));
    }
    for h in history {
        let state = match h.status.as_str() {
            "deployed" | "superseded" => State::Ready,
            "failed" => State::Failed,
            s if s.starts_with("pending") => State::Progressing,
            _ => State::Unknown,
        };
        let digest: String = h.config_digest.chars().take(15).collect();
        lines.push(Line::from(vec![
            Span::raw(format!("  {:<rev_w$} ", h.version)),
            Span::styled(
                format!("{} {:<status_w$} ", state.symbol(), h.status),
                t.state(state),
            ),
            Span::raw(format!(
                "{:<chart_w$} {:<action_w$} {:>8}  {digest}",
                chart_of(h),
                h.action.clone().unwrap_or_default(),
                h.last_deployed
                    .as_ref()
                    .map_or("-".into(), |d| age(d.0, app.now)),
            )),
        ]));
    }
    Text::from(lines)
}

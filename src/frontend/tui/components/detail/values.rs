//! The detail view's values tab: the values in effect, credentials masked.

use ratatui::text::{Line, Text};

use crate::engine::ReleaseView;
use crate::frontend::tui::view_model::{Fetch, mask_values};

use super::{Detail, DetailScreen, section};

/// Values of a Flux HelmRelease (its spec.values, then the release's) or of a stored
/// release (the release's), credentials masked.
pub(super) fn other_values<'a>(app: &DetailScreen<'_>, d: &Detail) -> Text<'a> {
    let mut lines = Vec::new();
    if let Some(hr) = app.others.flux.get(&d.key.key) {
        lines.push(section(
            app,
            "spec.values (Flux; edited where Flux reads it from)",
        ));
        let spec = hr
            .spec
            .values
            .as_ref()
            .map(|v| crate::text::yaml::to_string(&mask_values(v)))
            .unwrap_or_else(|| "{}\n".into());
        lines.extend(spec.lines().map(|l| Line::raw(format!("  {l}"))));
        lines.push(Line::raw(""));
    }
    lines.extend(release_values(
        app,
        d,
        "Values of the last Helm release (credentials masked)",
    ));
    Text::from(lines)
}

/// The values the last Helm release was made with, under `title`.
pub(super) fn release_values<'a>(app: &DetailScreen<'_>, d: &Detail, title: &str) -> Vec<Line<'a>> {
    let t = &app.theme;
    let mut lines = vec![section(app, title)];
    match &d.data.helm {
        Fetch::Loading => lines.push(Line::styled("  loading…", t.muted())),
        Fetch::Failed(e) => lines.push(Line::styled(format!("  ✗ {e}"), t.base().fg(t.error))),
        Fetch::Loaded(h) => lines.extend(h.values.lines().map(|l| Line::raw(format!("  {l}")))),
    }
    lines
}

pub(super) fn values<'a>(app: &DetailScreen<'_>, d: &Detail, view: &ReleaseView) -> Text<'a> {
    let spec = view
        .release
        .spec
        .values
        .as_ref()
        .map(|v| crate::text::yaml::to_string(&mask_values(v)))
        .unwrap_or_else(|| "{}\n".into());
    let mut lines = vec![section(
        app,
        if app.readonly {
            "spec.values"
        } else {
            "spec.values (e edits)"
        },
    )];
    lines.extend(spec.lines().map(|l| Line::raw(format!("  {l}"))));
    lines.push(Line::raw(""));
    lines.extend(release_values(
        app,
        d,
        "Values of the last Helm release (valuesFrom merged; credentials masked)",
    ));
    Text::from(lines)
}

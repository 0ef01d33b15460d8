//! The freeze banner: every view says a freeze while one lasts (who, why, until when,
//! how many releases, of both kinds), from the records on the releases, and stops saying
//! it once they are thawed.

use std::sync::Arc;

use super::*;
use crate::engine::Views;

fn record(until: &str, until_thawed: bool) -> std::collections::BTreeMap<String, String> {
    let mut a: std::collections::BTreeMap<String, String> = [
        ("freeze.wheelhouse.dev/by", "jane@example.com"),
        ("freeze.wheelhouse.dev/reason", "INC-57: bad rollout"),
        ("freeze.wheelhouse.dev/at", "2026-03-01T11:30:00Z"),
        ("freeze.wheelhouse.dev/until", until),
        ("freeze.wheelhouse.dev/suspendedBefore", "false"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    if until_thawed {
        a.insert("freeze.wheelhouse.dev/untilThawed".into(), "true".into());
    }
    a
}

/// The views with `annotations` on every release of namespace `ns`.
fn annotated(ns: &str, annotations: &std::collections::BTreeMap<String, String>) -> Arc<Views> {
    let mut views = (*demo::sample()).clone();
    let keys: Vec<ReleaseKey> = views
        .keys()
        .filter(|k| k.namespace == ns)
        .cloned()
        .collect();
    for k in keys {
        let v = views.get_mut(&k).unwrap();
        let mut hr = (*v.release).clone();
        hr.metadata.annotations = Some(annotations.clone());
        v.release = Arc::new(hr);
    }
    Arc::new(views)
}

fn line(app: &App, row: u16) -> String {
    let terminal = render(app, 120, 20);
    let buffer = terminal.backend().buffer();
    (0..buffer.area.width)
        .map(|x| buffer[(x, row)].symbol().to_owned())
        .collect::<String>()
        .trim_end()
        .to_owned()
}

#[test]
fn a_freeze_is_said_under_the_header_until_it_is_thawed() {
    let mut app = app(false);
    let frozen_ns = app.views.keys().next().unwrap().namespace.clone();
    let count = app
        .views
        .keys()
        .filter(|k| k.namespace == frozen_ns)
        .count();
    let without = line(&app, 1);
    app.set_views(annotated(
        &frozen_ns,
        &record("2026-03-01T13:30:00Z", false),
    ));
    let banner = line(&app, 1);
    assert_eq!(
        banner,
        format!(
            "❄ FROZEN {count} release{} by jane@example.com until 13:30 UTC (90m left): INC-57: bad rollout",
            if count == 1 { "" } else { "s" }
        )
    );
    // The favourites row moved one down, whole.
    assert_eq!(line(&app, 2), without);
    // Each frozen row says its freeze first in its message.
    let key = app
        .views
        .keys()
        .find(|k| k.namespace == frozen_ns)
        .unwrap()
        .clone();
    let row = app.table.row(&RowKey::wheelhouse(key)).unwrap();
    assert!(
        row.message
            .starts_with("❄ frozen by jane@example.com until 13:30 UTC: INC-57: bad rollout · "),
        "{}",
        row.message
    );
    // Thawed: the records are gone, and so is the banner.
    app.set_views(demo::sample());
    assert_eq!(line(&app, 1), without);
    assert!(app.frozen.is_empty());
}

#[test]
fn a_freeze_kept_past_its_end_is_said_overdue() {
    let mut app = app(false);
    let ns = app.views.keys().next().unwrap().namespace.clone();
    app.set_views(annotated(&ns, &record("2026-03-01T11:45:00Z", true)));
    let banner = line(&app, 1);
    assert!(
        banner.contains("by jane@example.com OVERDUE since 11:45 UTC: INC-57"),
        "{banner}"
    );
}

/// `:freeze 2h REASON` over the rows in view says what it does to each release before it
/// asks, and on `y` hands the engine's freeze every release by name; `:thaw` asks for
/// the frozen ones only.
#[test]
fn freeze_and_thaw_from_the_command_line_ask_first() {
    let mut app = app(false);
    let suspended: Vec<String> = app
        .views
        .values()
        .filter(|v| v.release.spec.suspend)
        .map(|v| v.key.to_string())
        .collect();
    assert!(app.run_command("freeze 2h INC-57 bad rollout").is_empty());
    let Some(Overlay::Confirm(confirm)) = &app.overlay else {
        panic!("no question: {:?}", app.status_notice());
    };
    let question = confirm.question.clone();
    assert!(
        question.starts_with(
            "Freeze for 2h (until 14:00 UTC), reason \"INC-57 bad rollout\": suspend "
        ),
        "{question}"
    );
    for name in &suspended {
        assert!(
            question.contains("suspended already): ") && question.contains(name.as_str()),
            "{name}: {question}"
        );
    }
    let effects = app.on_key(key('y'));
    match effects.as_slice() {
        [
            Effect::Freeze {
                names,
                duration,
                reason,
                ..
            },
        ] => {
            assert_eq!(names.len(), app.views.len());
            assert_eq!(duration.as_secs(), 7200);
            assert_eq!(reason, "INC-57 bad rollout");
        }
        other => panic!("{other:?}"),
    }
    // Nothing is frozen in these views: a thaw has nothing to ask about.
    assert!(app.run_command("thaw").is_empty());
    assert!(app.overlay.is_none());
    let ns = app.views.keys().next().unwrap().namespace.clone();
    app.set_views(annotated(&ns, &record("2026-03-01T13:30:00Z", false)));
    app.run_command("thaw");
    let Some(Overlay::Confirm(confirm)) = &app.overlay else {
        panic!("no question");
    };
    assert!(
        confirm.question.starts_with("Thaw "),
        "{}",
        confirm.question
    );
    match app.on_key(key('y')).as_slice() {
        [Effect::Thaw { names, .. }] => {
            assert!(
                !names.is_empty() && names.iter().all(|k| k.namespace == ns),
                "{names:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // A read-only dashboard never freezes.
    let mut readonly = super::app(true);
    assert!(readonly.run_command("freeze 2h INC-57").is_empty());
    assert!(readonly.overlay.is_none());
}

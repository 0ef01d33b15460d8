//! The changes view: revisions shown and compared from the History tab, and the review
//! before a write that changes the desired state (rolling a wheelhouse release back and
//! pinning it, resuming a pinned one).

use std::sync::Arc;

use super::kinds::revisions;
use super::*;
use crate::frontend::tui::view_model::RowKey;

/// The detail view of apps/web (wheelhouse) on its History tab, revisions read.
fn history_of_web() -> App {
    let mut app = app(false);
    app.on_io(IoResult::User("alice@example.com".into()));
    select(&mut app, "web");
    app.on_key(code(KeyCode::Enter));
    app.on_io(IoResult::Detail {
        key: RowKey::wheelhouse(k("apps", "web")),
        data: Box::new(revisions("webapp")),
    });
    press(&mut app, "h");
    app
}

fn load_request(effects: &[Effect]) -> (u64, ChangesOf) {
    match effects {
        [
            Effect::LoadChanges {
                request,
                of,
                cluster: None,
            },
        ] => (*request, of.clone()),
        other => panic!("expected a changes load, got {other:?}"),
    }
}

fn answer(app: &mut App, request: u64) {
    let (lines, summary) = crate::frontend::tui::diff::release_diff(
        &serde_json::json!({"image": {"tag": "1.2.3"}}),
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - image: web:1.2.3\n",
        &serde_json::json!({"image": {"tag": "1.2.2"}}),
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n      - image: web:1.2.2\n",
    );
    app.on_io(IoResult::Changes {
        request,
        result: Ok((lines, summary)),
    });
}

#[test]
fn a_wheelhouse_release_is_rolled_back_and_pinned_after_its_diff_and_a_question() {
    let mut app = history_of_web();
    press(&mut app, "jj");
    insta::assert_snapshot!("wheelhouse_history_picker", render(&app, 100, 18).backend());
    let (request, of) = load_request(&press(&mut app, "b"));
    assert_eq!(
        of,
        ChangesOf::Revisions {
            release: k("apps", "web"),
            from: 4,
            to: 2,
            values: app.values_sources_of(&k("apps", "web")),
        }
    );
    let question = app.changes.as_ref().unwrap().question.clone().unwrap().text;
    for part in [
        "Roll back apps/web",
        "revision 2: chart webapp-0.8.0",
        "last deployed",
        "suspended until resumed",
    ] {
        assert!(question.contains(part), "{part}: {question}");
    }
    answer(&mut app, request);
    insta::assert_snapshot!("wheelhouse_pin_diff", render(&app, 100, 24).backend());
    let effects = press(&mut app, "y");
    assert_eq!(
        sent(&effects),
        [Command::Pin {
            key: k("apps", "web"),
            revision: 2,
            by: "alice@example.com".into()
        }]
    );
    assert!(app.changes.is_none());
}

#[test]
fn esc_leaves_a_rollback_unmade() {
    let mut app = history_of_web();
    press(&mut app, "j");
    let (request, _) = load_request(&press(&mut app, "b"));
    answer(&mut app, request);
    assert!(app.on_key(code(KeyCode::Esc)).is_empty());
    assert!(app.changes.is_none());
    assert!(
        app.status
            .feedback
            .last()
            .unwrap()
            .what
            .contains("nothing was changed")
    );
}

#[test]
fn resuming_a_pinned_release_shows_what_returning_to_the_spec_renders() {
    let mut app = app(false);
    let mut views = (*app.views).clone();
    let view = views.get_mut(&k("apps", "web")).unwrap();
    let hr = Arc::make_mut(&mut view.release);
    hr.spec.suspend = true;
    hr.status.get_or_insert_default().pinned = Some(crate::api::Pin {
        revision: 2,
        recorded_as: 5,
        by: "alice@example.com".into(),
        at: "2026-11-24T10:00:00Z".into(),
    });
    app.set_views(Arc::new(views));
    select(&mut app, "web");
    let (request, of) = load_request(&press(&mut app, "S"));
    assert_eq!(
        of,
        ChangesOf::Render {
            key: k("apps", "web"),
            values: None
        }
    );
    let question = app.changes.as_ref().unwrap().question.clone().unwrap().text;
    assert!(
        question.contains("leaves revision 2 (pinned by alice@example.com)"),
        "{question}"
    );
    let loading = render(&app, 100, 12).backend().to_string();
    assert!(loading.contains("rendering the spec"), "{loading}");
    answer(&mut app, request);
    assert_eq!(
        sent(&press(&mut app, "y")),
        [Command::Resume(k("apps", "web"))]
    );
}

#[test]
fn a_suspended_release_that_is_not_pinned_resumes_without_a_diff() {
    let mut app = app(false);
    let mut views = (*app.views).clone();
    let view = views.get_mut(&k("apps", "web")).unwrap();
    Arc::make_mut(&mut view.release).spec.suspend = true;
    app.set_views(Arc::new(views));
    select(&mut app, "web");
    assert_eq!(
        sent(&press(&mut app, "S")),
        [Command::Resume(k("apps", "web"))]
    );
}

#[test]
fn revisions_are_shown_whole_and_compared_with_the_marked_one_or_the_newest() {
    let mut app = history_of_web();
    press(&mut app, "jjj");
    // enter: revision 1 whole.
    let (_, of) = load_request(&app.on_key(code(KeyCode::Enter)));
    assert_eq!(
        of,
        ChangesOf::Revision {
            release: k("apps", "web"),
            revision: 1,
            values: app.values_sources_of(&k("apps", "web")),
        }
    );
    app.on_key(code(KeyCode::Esc));
    // x without a mark: from the newest.
    let (_, of) = load_request(&press(&mut app, "x"));
    assert_eq!(
        of,
        ChangesOf::Revisions {
            release: k("apps", "web"),
            from: 4,
            to: 1,
            values: app.values_sources_of(&k("apps", "web")),
        }
    );
    app.on_key(code(KeyCode::Esc));
    // space marks revision 1; x on revision 3 diffs from it.
    press(&mut app, " kk");
    let screen = render(&app, 100, 18).backend().to_string();
    assert!(screen.contains(" ◆1"), "{screen}");
    let (_, of) = load_request(&press(&mut app, "x"));
    assert_eq!(
        of,
        ChangesOf::Revisions {
            release: k("apps", "web"),
            from: 1,
            to: 3,
            values: app.values_sources_of(&k("apps", "web")),
        }
    );
    // Nothing here writes.
    assert!(app.changes.as_ref().unwrap().question.is_none());
    assert!(press(&mut app, "y").is_empty());
}

#[test]
fn read_only_offers_no_rollback() {
    let mut app = app(true);
    select(&mut app, "web");
    app.on_key(code(KeyCode::Enter));
    app.on_io(IoResult::Detail {
        key: RowKey::wheelhouse(k("apps", "web")),
        data: Box::new(revisions("webapp")),
    });
    press(&mut app, "hj");
    assert!(press(&mut app, "b").is_empty());
    assert!(app.changes.is_none());
    // Looking is not writing.
    assert!(!press(&mut app, "x").is_empty());
}

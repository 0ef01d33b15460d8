//! The values editor: drafts kept whatever happens, validation, and the review of what
//! the values change (values diff, then the manifest the engine renders) asked about
//! before anything is applied.

use super::*;

#[test]
fn editor_keeps_an_invalid_draft_and_shows_the_error() {
    let mut app = app(false);
    select(&mut app, "web");
    press(&mut app, "e");
    assert!(app.editor.is_some());
    let text = &mut app.editor.as_mut().unwrap().text;
    text.move_cursor(tui_textarea::CursorMove::Bottom);
    text.move_cursor(tui_textarea::CursorMove::End);
    app.on_key(code(KeyCode::Enter));
    press(&mut app, "bad: [1");
    let save = KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL);
    assert!(app.on_key(save).is_empty());
    let ed = app.editor.as_ref().unwrap();
    assert!(
        ed.error.as_deref().unwrap().contains("line"),
        "{:?}",
        ed.error
    );
    assert!(ed.text.lines().iter().any(|l| l == "bad: [1"));
    insta::assert_snapshot!(render(&app, 80, 24).backend());

    // Fixed: valid YAML is rendered and reviewed first, and only `y` patches, once the
    // render is there.
    press(&mut app, "]");
    let request = rendering(&app.on_key(save));
    assert!(app.changes.is_some());
    assert!(press(&mut app, "y").is_empty(), "not before the render");
    rendered(&mut app, request);
    let effects = press(&mut app, "y");
    let [
        Effect::PatchValues {
            id, key, values, ..
        },
    ] = effects.as_slice()
    else {
        panic!("{effects:?}")
    };
    assert_eq!(key, &k("apps", "web"));
    assert_eq!(values["bad"], serde_json::json!([1]));
    assert_eq!(values["replicas"], serde_json::json!(2));
    app.on_io(IoResult::Done {
        id: *id,
        result: Ok(()),
    });
    assert!(app.editor.is_none());
    assert_eq!(app.status.feedback.last().unwrap().progress, Progress::Done);
}

#[test]
fn leaving_the_editor_keeps_the_draft() {
    let mut app = app(false);
    select(&mut app, "web");
    press(&mut app, "e");
    press(&mut app, "x");
    app.on_key(code(KeyCode::Esc));
    assert!(app.editor.is_none());
    press(&mut app, "e");
    assert!(app.editor.as_ref().unwrap().text.lines()[0].starts_with('x'));
}

#[test]
fn a_draft_older_than_the_values_says_so_when_reopened() {
    let mut app = app(false);
    select(&mut app, "web");
    press(&mut app, "e");
    press(&mut app, "x");
    app.on_key(code(KeyCode::Esc));
    // Someone else changes the values while the draft waits.
    set_values(&mut app, "web", serde_json::json!({"replicas": 5}));
    select(&mut app, "web");
    press(&mut app, "e");
    let ed = app.editor.as_ref().unwrap();
    assert!(ed.text.lines()[0].starts_with('x'), "the draft is kept");
    assert_eq!(
        ed.original,
        serde_json::json!({"replicas": 5}),
        "diffed against now"
    );
    assert!(
        ed.error
            .as_deref()
            .is_some_and(|e| e.contains("changed since this draft was started")),
        "{:?}",
        ed.error
    );
}

/// Replaces the values of a sample release.
fn set_values(app: &mut App, name: &str, values: serde_json::Value) {
    let mut views = (*app.views).clone();
    let view = views.get_mut(&k("apps", name)).unwrap();
    std::sync::Arc::make_mut(&mut view.release).spec.values = Some(values);
    app.set_views(std::sync::Arc::new(views));
}

#[test]
fn reopening_a_draft_puts_back_its_cursor_and_scroll_position() {
    let mut app = app(false);
    let long: serde_json::Map<String, serde_json::Value> = (0..40)
        .map(|i| (format!("key{i:02}"), serde_json::json!(i)))
        .collect();
    set_values(&mut app, "web", long.into());
    select(&mut app, "web");
    press(&mut app, "e");
    let text = &mut app.editor.as_mut().unwrap().text;
    text.move_cursor(tui_textarea::CursorMove::Jump(30, 7));
    // Drawn once, as the dashboard does after each key: the view follows the cursor.
    render(&app, 80, 24);
    // Scrolled back up a little, so the view is not simply "cursor at the bottom".
    let text = &mut app.editor.as_mut().unwrap().text;
    text.scroll((-3, 0));
    render(&app, 80, 24);
    // The cursor in the middle of the view: a fresh editor would scroll less to show it.
    for _ in 0..5 {
        app.on_key(code(KeyCode::Up));
    }
    press(&mut app, "X");
    render(&app, 80, 24);
    let text = &app.editor.as_ref().unwrap().text;
    let (cursor, scroll) = (text.cursor(), text.scroll_offset());
    assert_eq!(cursor, (22, 8));
    assert_eq!(scroll.0, 9);
    let before = render(&app, 80, 24).backend().to_string();

    app.on_key(code(KeyCode::Esc));
    assert!(app.editor.is_none());
    render(&app, 80, 24);
    press(&mut app, "e");
    let text = &app.editor.as_ref().unwrap().text;
    assert_eq!(text.cursor(), cursor);
    let after = render(&app, 80, 24).backend().to_string();
    assert_eq!(app.editor.as_ref().unwrap().text.scroll_offset(), scroll);
    assert_eq!(after, before, "the same screen as when it was left");
    assert!(after.contains("key22: X22"), "{after}");
    insta::assert_snapshot!(after);
}

/// Replaces the editor's text with `yaml` and presses ctrl-s.
fn save_draft(app: &mut App, yaml: &str) -> Vec<Effect> {
    let ed = app.editor.as_mut().unwrap();
    ed.text = tui_textarea::TextArea::new(yaml.lines().map(str::to_owned).collect());
    app.on_key(KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL))
}

/// The render a review asked for: its request id.
fn rendering(effects: &[Effect]) -> u64 {
    match effects {
        [
            Effect::LoadChanges {
                request,
                of: ChangesOf::Render {
                    values: Some(_), ..
                },
                cluster: None,
            },
        ] => *request,
        other => panic!("expected a render request, got {other:?}"),
    }
}

/// The engine's render of a values edit, as io::load_changes answers it: the release's
/// manifest then and now, diffed by the real diff (a Deployment scaled, a Secret's
/// password changed).
fn rendered(app: &mut App, request: u64) {
    let old = "---\n# Source: web/templates/secret.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: web-db\ndata:\n  password: aHVudGVyMg==\n---\n# Source: web/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 2\n";
    let new = old
        .replace("aHVudGVyMg==", "Y29ycmVjdC1ob3JzZQ==")
        .replace("replicas: 2", "replicas: 3");
    let (lines, summary) = crate::frontend::tui::diff::release_diff(
        &serde_json::json!({"replicas": 2}),
        old,
        &serde_json::json!({"replicas": 3}),
        &new,
    );
    app.on_io(IoResult::Changes {
        request,
        result: Ok((lines, summary)),
    });
}

#[test]
fn apply_review_shows_the_values_and_rendered_diff_with_credentials_masked() {
    let mut app = app(false);
    select(&mut app, "web");
    press(&mut app, "e");
    let effects = save_draft(
        &mut app,
        "replicas: 3\nimage:\n  tag: 1.2.3\ndb:\n  password: correct-horse\nextra: true\n",
    );
    let request = rendering(&effects);
    // The values diff at once, while the engine renders.
    let screen = render(&app, 80, 24).backend().to_string();
    for line in ["-replicas: 2", "+replicas: 3", "rendering the chart"] {
        assert!(screen.contains(line), "{line}:\n{screen}");
    }
    rendered(&mut app, request);
    let screen = render(&app, 100, 30).backend().to_string();
    for secret in [
        "hunter2",
        "correct-horse",
        "aHVudGVyMg",
        "Y29ycmVjdC1ob3JzZQ",
    ] {
        assert!(!screen.contains(secret), "{secret} shown:\n{screen}");
    }
    for line in [
        "━━ values (as Helm stores them)",
        "+replicas: 3",
        "━━ Secret/web-db (changed)",
        "+  password: \"*** (changed)\"",
        "━━ Deployment/web (changed)",
        "-  replicas: 2",
        "Apply these values to spec.values of apps/web?",
        "y: apply",
        "2 changed, 0 added, 0 removed",
    ] {
        assert!(screen.contains(line), "{line}:\n{screen}");
    }
    insta::assert_snapshot!(screen);
    // esc goes back to the draft, nothing sent; y applies it.
    assert!(app.on_key(code(KeyCode::Esc)).is_empty());
    assert!(app.changes.is_none());
    assert!(app.editor.is_some(), "the draft is still open");
    let request = rendering(&save_draft(&mut app, "replicas: 3\n"));
    rendered(&mut app, request);
    assert!(matches!(
        press(&mut app, "y").as_slice(),
        [Effect::PatchValues { .. }]
    ));
}

#[test]
fn a_render_that_fails_is_shown_and_nothing_can_be_applied() {
    let mut app = app(false);
    select(&mut app, "web");
    press(&mut app, "e");
    let request = rendering(&save_draft(&mut app, "replicas: many\n"));
    app.on_io(IoResult::Changes {
        request,
        result: Err("helm failed to render the chart: replicas must be a number".into()),
    });
    let screen = render(&app, 100, 24).backend().to_string();
    assert!(screen.contains("replicas must be a number"), "{screen}");
    assert!(screen.contains("esc: back to the editor"), "{screen}");
    assert!(press(&mut app, "y").is_empty());
    assert!(app.changes.is_some(), "the question stays until esc");
}

#[test]
fn a_diff_of_thousands_of_lines_scrolls_and_searches_with_the_question_on_screen() {
    let mut app = app(false);
    let old: serde_json::Map<String, serde_json::Value> = (0..3000)
        .map(|i| (format!("key{i:04}"), serde_json::json!(i)))
        .collect();
    set_values(&mut app, "web", old.into());
    select(&mut app, "web");
    press(&mut app, "e");
    let new: String = (0..3000)
        .map(|i| format!("key{i:04}: {}\n", i + 1))
        .collect();
    let request = rendering(&save_draft(&mut app, &new));
    let view = app.changes.as_ref().unwrap();
    // A section header, one hunk header and 6,000 changed lines.
    assert_eq!(view.lines.len(), 6002);
    app.on_io(IoResult::Changes {
        request,
        result: Ok((view.lines.clone(), "values changed".into())),
    });
    app.page = 16; // as the event loop sets it for 24 rows
    let screen = render(&app, 80, 24).backend().to_string();
    assert!(screen.contains("Apply these values"), "{screen}");
    assert!(screen.contains("line 1/6002"), "{screen}");
    insta::assert_snapshot!(screen);

    // The moving keys scroll it, and the question stays.
    press(&mut app, "G");
    let end = render(&app, 80, 24).backend().to_string();
    assert!(end.contains("+key2999: 3000"), "{end}");
    assert!(end.contains("Apply these values"), "{end}");
    // `/` finds a line far down, `n` the next one.
    press(&mut app, "g/");
    press(&mut app, "KEY2500:");
    app.on_key(code(KeyCode::Enter));
    let view = app.changes.as_ref().unwrap();
    assert_eq!(view.lines[view.top].text(), "-key2500: 2500");
    press(&mut app, "n");
    let view = app.changes.as_ref().unwrap();
    assert_eq!(view.lines[view.top].text(), "+key2500: 2501");
    let found = render(&app, 80, 24).backend().to_string();
    assert!(found.contains("(search: KEY2500:)"), "{found}");
    insta::assert_snapshot!("a_diff_of_thousands_of_lines_found_by_search", found);
    // Nothing was sent on the way.
    assert!(app.on_key(code(KeyCode::Esc)).is_empty());
    assert!(app.editor.is_some());
}

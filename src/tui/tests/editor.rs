//! The values editor: drafts kept whatever happens, validation, and the diff asked
//! about before anything is applied.

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

    // Fixed: valid YAML asks first, and only `y` patches.
    press(&mut app, "]");
    assert!(app.on_key(save).is_empty());
    assert!(app.editor.as_ref().unwrap().confirm.is_some());
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

#[test]
fn apply_confirmation_shows_the_values_diff_with_credentials_masked() {
    let mut app = app(false);
    select(&mut app, "web");
    press(&mut app, "e");
    let effects = save_draft(
        &mut app,
        "replicas: 3\nimage:\n  tag: 1.2.3\ndb:\n  password: correct-horse\nextra: true\n",
    );
    assert!(effects.is_empty(), "asks first: {effects:?}");
    let screen = render(&app, 80, 24).backend().to_string();
    for secret in ["hunter2", "correct-horse"] {
        assert!(!screen.contains(secret), "{secret} shown:\n{screen}");
    }
    for line in [
        "-replicas: 2",
        "+replicas: 3",
        "+extra: true",
        "+  password: \"*** (changed)\"",
        "y: apply",
    ] {
        assert!(screen.contains(line), "{line}:\n{screen}");
    }
    insta::assert_snapshot!(screen);
    // Any other key goes back to the draft; y applies it.
    press(&mut app, "n");
    assert!(app.editor.as_ref().unwrap().confirm.is_none());
    save_draft(&mut app, "replicas: 3\n");
    assert!(matches!(
        press(&mut app, "y").as_slice(),
        [Effect::PatchValues { .. }]
    ));
}

#[test]
fn a_long_values_diff_scrolls_and_the_question_stays_visible_at_80x24() {
    let mut app = app(false);
    let old: serde_json::Map<String, serde_json::Value> = (0..40)
        .map(|i| (format!("key{i:02}"), serde_json::json!(i)))
        .collect();
    set_values(&mut app, "web", old.into());
    select(&mut app, "web");
    press(&mut app, "e");
    let new: String = (0..40).map(|i| format!("key{i:02}: {}\n", i + 1)).collect();
    save_draft(&mut app, &new);
    // One hunk header and 80 changed lines: far more than the screen holds.
    assert_eq!(app.editor.as_ref().unwrap().diff.len(), 81);
    app.page = 16; // as the event loop sets it for 24 rows
    let screen = render(&app, 80, 24).backend().to_string();
    assert!(screen.contains("(start of the diff)"), "{screen}");
    assert!(screen.contains("more lines"), "{screen}");
    assert!(screen.contains("Apply these values"), "{screen}");
    assert!(screen.contains("pgup/pgdn g/G: scroll"), "{screen}");
    insta::assert_snapshot!(screen);

    // The moving keys scroll it, and the question stays open.
    press(&mut app, "G");
    let end = render(&app, 80, 24).backend().to_string();
    assert!(end.contains("(end of the diff)"), "{end}");
    assert!(end.contains("+key39: 40"), "{end}");
    assert!(end.contains("lines above"), "{end}");
    assert!(end.contains("Apply these values"), "{end}");
    insta::assert_snapshot!("a_long_values_diff_scrolled_to_its_end", end);
    press(&mut app, "kk");
    let up = render(&app, 80, 24).backend().to_string();
    assert!(up.contains("… 2 more lines"), "{up}");
    assert!(app.editor.as_ref().unwrap().confirm.is_some());

    // Any other key goes back to editing, and nothing was sent.
    assert!(press(&mut app, "x").is_empty());
    assert!(app.editor.as_ref().unwrap().confirm.is_none());
}

//! The Timeline view: `T` (or `:timeline`) opens it, its rows arrive newest first, `/`
//! filters, `enter` opens a revision's diff, `esc` goes back.

use super::*;
use crate::timeline::{Change, Kind};
use k8s_openapi::jiff::Timestamp;

fn change(release: &str, kind: Kind, who: &str, revision: Option<i32>, second: i64) -> Change {
    Change {
        at: Timestamp::from_second(1_772_366_000 + second).unwrap(),
        namespace: "apps".into(),
        release: release.into(),
        kind,
        what: format!("{} of {release}", kind.label()),
        who: who.into(),
        revision,
    }
}

#[test]
fn t_opens_the_timeline_and_enter_shows_the_diff_of_a_revision() {
    let mut app = app(false);
    assert!(press(&mut app, "T").is_empty());
    assert!(app.timeline.is_some());
    app.on_io(IoResult::Timeline(Ok(vec![
        change("api", Kind::Suspend, "on-call", None, 30),
        change("cli", Kind::Upgrade, "helm CLI", Some(2), 20),
        change("api", Kind::Install, "wheelhouse", Some(1), 10),
    ])));
    let screen = render(&app, 80, 12).backend().to_string();
    assert!(
        screen.contains("Timeline · 3 changes, newest first"),
        "{screen}"
    );
    let lines: Vec<&str> = screen.lines().collect();
    let row_of = |name: &str| lines.iter().position(|l| l.contains(name)).unwrap();
    assert!(row_of("on-call") < row_of("helm CLI"), "{screen}");

    // A suspend made no revision: nothing to diff, and it says so.
    assert!(app.on_key(code(KeyCode::Enter)).is_empty());
    assert!(app.changes.is_none());
    // The helm CLI's upgrade: revision 1 → 2 of its release.
    press(&mut app, "j");
    let effects = app.on_key(code(KeyCode::Enter));
    match effects.as_slice() {
        [Effect::LoadChanges { of, .. }] => assert_eq!(
            *of,
            ChangesOf::Revisions {
                release: k("apps", "cli"),
                from: 1,
                to: 2
            }
        ),
        other => panic!("no diff asked for: {other:?}"),
    }
    assert!(app.changes.is_some());
    // Back from the diff to the timeline, then a filter, then back to the table.
    app.on_key(code(KeyCode::Esc));
    assert!(app.changes.is_none() && app.timeline.is_some());
    press(&mut app, "/wheelhouse");
    app.on_key(code(KeyCode::Enter));
    let view = app.timeline.as_ref().unwrap();
    assert_eq!(view.visible().len(), 1);
    // The first revision is shown whole.
    match app.on_key(code(KeyCode::Enter)).as_slice() {
        [Effect::LoadChanges { of, .. }] => assert_eq!(
            *of,
            ChangesOf::Revision {
                release: k("apps", "api"),
                revision: 1
            }
        ),
        other => panic!("no revision asked for: {other:?}"),
    }
    app.on_key(code(KeyCode::Esc));
    app.on_key(code(KeyCode::Esc));
    assert!(app.timeline.is_none());
    // `:timeline` opens it too.
    press(&mut app, ":timeline");
    app.on_key(code(KeyCode::Enter));
    assert!(app.timeline.is_some());
}

//! The Timeline view: `T` (or `:timeline`) opens it, its rows arrive newest first, `/`
//! filters, `enter` opens a revision's diff, `esc` goes back.

use super::*;
use crate::frontend::timeline::{Change, Kind};
use k8s_openapi::jiff::Timestamp;

fn change(release: &str, kind: Kind, who: &str, revision: Option<i32>, second: i64) -> Change {
    Change {
        cluster: None,
        at: Timestamp::from_second(1_772_366_000 + second).unwrap(),
        namespace: "apps".into(),
        release: release.into(),
        kind,
        what: format!("{} of {release}", kind.label()),
        who: who.into(),
        revision,
    }
}

/// The records the inventory watches (labels only): the helm CLI's `cli` at revisions
/// 1 and 2, wheelhouse's `api` at 1; and `api`'s HelmRelease keeps a suspend.
fn watched(app: &mut App) {
    use crate::helm::release::Status;
    let mut others = (*app.others).clone();
    for (name, revision, status, who, second) in [
        ("cli", 1, Status::Superseded, "helm CLI", 5),
        ("cli", 2, Status::Deployed, "helm CLI", 20),
        ("api", 1, Status::Deployed, "wheelhouse", 10),
    ] {
        let mut s = demo::stored("apps", name, name, revision, status, "");
        s.created = Some(Timestamp::from_second(1_772_366_000 + second).unwrap());
        s.author = who.into();
        others
            .revisions
            .insert((s.key.clone(), revision), std::sync::Arc::new(s));
    }
    others.helm_listed = true;
    app.set_others(std::sync::Arc::new(others));
    let mut views = (*app.views).clone();
    let key = k("apps", "api");
    let mut view = views.get(&key).expect("a sample release").clone();
    let mut hr = (*view.release).clone();
    hr.status.get_or_insert_default().changes = vec![crate::api::ChangeRecord {
        at: k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
            Timestamp::from_second(1_772_366_030).unwrap(),
        ),
        kind: "suspend".into(),
        message: "suspended".into(),
        by: Some("on-call".into()),
        revision: None,
    }];
    view.release = std::sync::Arc::new(hr);
    views.insert(key, view);
    app.set_views(std::sync::Arc::new(views));
}

#[test]
fn t_opens_the_timeline_from_the_watched_records_and_enter_shows_the_diff_of_a_revision() {
    let mut app = app(false);
    app.now = Timestamp::from_second(1_772_366_100).unwrap();
    watched(&mut app);
    assert!(press(&mut app, "T").is_empty());
    assert!(app.timeline.is_some());
    // Built from what is watched, and the revisions on screen asked for whole.
    let effects = app.refresh_timeline();
    let asked = match effects.as_slice() {
        [
            Effect::ReadRevisions(records),
            Effect::LoadAudit { cluster: None, .. },
        ] => records.clone(),
        other => panic!("no records and audit Events asked for: {other:?}"),
    };
    assert_eq!(asked.len(), 3, "{asked:?}");
    // Asked once; the audit Events again after a few seconds (they are not watched).
    assert!(app.refresh_timeline().is_empty());
    app.now = Timestamp::from_second(1_772_366_105).unwrap();
    assert!(matches!(
        app.refresh_timeline().as_slice(),
        [Effect::LoadAudit { .. }]
    ));
    app.now = Timestamp::from_second(1_772_366_100).unwrap();
    let screen = render(&app, 80, 12).backend().to_string();
    assert!(
        screen.contains("Timeline · 4 changes, newest first"),
        "{screen}"
    );
    let lines: Vec<&str> = screen.lines().collect();
    let row_of = |name: &str| lines.iter().position(|l| l.contains(name)).unwrap();
    assert!(row_of("on-call") < row_of("helm CLI"), "{screen}");
    // Its labels cannot tell an upgrade from a rollback: the record read whole says.
    let cli2 = asked
        .iter()
        .find(|r| r.key.name == "cli" && r.version == 2)
        .unwrap()
        .clone();
    app.on_io(IoResult::TimelineRevision(
        cli2,
        Some(vec![
            change("cli", Kind::Rollback, "helm CLI", Some(2), 35),
            change("cli", Kind::Test, "helm CLI", Some(2), 36),
        ]),
    ));
    let view = app.timeline.as_ref().unwrap();
    let row = view
        .rows
        .iter()
        .find(|c| c.release == "cli" && c.revision == Some(2))
        .unwrap();
    assert_eq!(row.kind, Kind::Rollback);
    // At the record's own time (to the nanosecond; its labels give the second), sorted
    // again at the next turn: here it is the newest.
    assert_eq!(row.at, Timestamp::from_second(1_772_366_035).unwrap());
    app.refresh_timeline();
    let view = app.timeline.as_ref().unwrap();
    // And its last test run, which its labels do not show.
    assert_eq!(
        (view.rows[0].kind, view.rows[1].kind),
        (Kind::Test, Kind::Rollback)
    );
    assert_eq!(
        view.current().unwrap().kind,
        Kind::Suspend,
        "the cursor stays on its change"
    );
    // Built again (a release changed), the record read stays read.
    app.now = Timestamp::from_second(1_772_366_101).unwrap();
    watched(&mut app);
    app.refresh_timeline();
    let view = app.timeline.as_ref().unwrap();
    let row = view
        .rows
        .iter()
        .find(|c| c.release == "cli" && c.revision == Some(2) && c.kind.is_revision())
        .unwrap();
    assert_eq!(row.kind, Kind::Rollback);
    assert_eq!(view.rows.iter().filter(|c| c.kind == Kind::Test).count(), 1);

    // A suspend made no revision: nothing to diff, and it says so.
    assert!(app.on_key(code(KeyCode::Enter)).is_empty());
    assert!(app.changes.is_none());
    // The helm CLI's rollback, above it: revision 1 → 2 of its release.
    press(&mut app, "k");
    let effects = app.on_key(code(KeyCode::Enter));
    match effects.as_slice() {
        [Effect::LoadChanges { of, .. }] => assert_eq!(
            *of,
            ChangesOf::Revisions {
                release: k("apps", "cli"),
                from: 1,
                to: 2,
                values: None,
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
                revision: 1,
                values: app.values_sources_of(&k("apps", "api")),
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
    // The namespaces the table shows are the Timeline's too.
    app.scope = Scope::Namespace("elsewhere".into());
    app.refresh_timeline();
    assert!(app.timeline.as_ref().unwrap().rows.is_empty());
    app.scope = Scope::Namespace("apps".into());
    app.refresh_timeline();
    assert_eq!(app.timeline.as_ref().unwrap().rows.len(), 4);
}

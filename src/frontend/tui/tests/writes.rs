//! Writes from the table: pending, done, failed or of unknown outcome; questions
//! before bulk actions; and the screen while the API server does not answer.

use super::*;

#[test]
fn suspend_resume_reconcile_send_at_once_with_pending_feedback() {
    let mut app = app(false);
    select(&mut app, "web");
    let effects = press(&mut app, "s");
    let [Effect::Send { id, command }] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    assert_eq!(command, &Command::Suspend(k("apps", "web")));
    assert_eq!(
        app.status.feedback.last().unwrap().progress,
        Progress::Pending
    );
    app.on_io(IoResult::Done {
        id: *id,
        result: Err("forbidden".into()),
    });
    assert_eq!(
        app.status.feedback.last().unwrap().progress,
        Progress::Failed("forbidden".into())
    );
    select(&mut app, "billing");
    // billing is suspended: `s` leaves it alone (never resumes), `S` resumes it.
    assert!(press(&mut app, "s").is_empty());
    assert!(
        app.status
            .feedback
            .last()
            .unwrap()
            .what
            .contains("already suspended")
    );
    let effects = press(&mut app, "Sr");
    let commands = sent(&effects);
    assert_eq!(
        commands,
        vec![
            Command::Resume(k("apps", "billing")),
            Command::Reconcile(k("apps", "billing"))
        ]
    );
}

/// The line of the screen (160x24) that speaks of `what`.
fn line_about(app: &App, what: &str) -> String {
    let terminal = render(app, 160, 24);
    let buffer = terminal.backend().buffer();
    (0..buffer.area.height)
        .map(|y| {
            (0..buffer.area.width)
                .map(|x| buffer[(x, y)].symbol())
                .collect::<String>()
        })
        .find(|line| line.contains(what))
        .unwrap_or_default()
        .trim_end()
        .to_string()
}

/// Issue #16: a write whose answer never came is "outcome unknown", never "failed"; the
/// dashboard watches the release and reports the real outcome once it shows.
#[test]
fn a_write_without_an_answer_is_unknown_until_the_release_shows_it() {
    use crate::frontend::tui::io::Expect;
    let mut app = app(false);
    select(&mut app, "web");
    let effects = press(&mut app, "s");
    let [Effect::Send { id, command }] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    app.set_connection(crate::engine::Connection::Disconnected {
        since: demo::now(),
        error: "no answer".into(),
    });
    app.on_io(IoResult::Unknown {
        id: *id,
        why: "no answer from the API server within 15s; it may still be applied".into(),
        expect: Expect::Command {
            command: command.clone(),
            token: "t1".into(),
        },
    });
    let banner = line_about(&app, "suspend apps/web");
    assert!(
        banner.starts_with("⚠ API server unreachable")
            && banner.ends_with("suspend apps/web: outcome unknown, it may still be applied"),
        "{banner}"
    );
    // A long wait without the API server changes nothing: it may still be applied.
    app.tick(demo::now() + std::time::Duration::from_secs(300));
    app.set_connection(crate::engine::Connection::Connected);
    let footer = line_about(&app, "suspend apps/web");
    assert!(
        footer.starts_with("⚠ suspend apps/web: outcome unknown, no answer from the API server"),
        "{footer}"
    );
    assert!(matches!(
        app.status.feedback.last().unwrap().progress,
        Progress::Unknown(_)
    ));

    // The suspend lands.
    let mut views = (*app.views).clone();
    let view = views.get_mut(&k("apps", "web")).unwrap();
    std::sync::Arc::make_mut(&mut view.release).spec.suspend = true;
    app.set_views(std::sync::Arc::new(views));
    assert_eq!(
        app.status.feedback.last().unwrap().progress,
        Progress::Landed
    );
    let footer = line_about(&app, "suspend apps/web");
    assert!(
        footer.starts_with("✓ suspend apps/web: applied after the API server answered again"),
        "{footer}"
    );
}

/// ... and when the API server answers again and the release does not show it for a
/// while, it was not applied; a late landing still turns it into applied.
#[test]
fn an_unknown_write_the_release_never_shows_is_not_applied_until_it_lands() {
    use crate::frontend::tui::io::Expect;
    let mut app = app(false);
    select(&mut app, "web");
    let effects = press(&mut app, "r");
    let [Effect::Send { id, command }] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    app.on_io(IoResult::Unknown {
        id: *id,
        why: "no answer".into(),
        expect: Expect::Command {
            command: command.clone(),
            token: "t2".into(),
        },
    });
    app.tick(demo::now() + std::time::Duration::from_secs(29));
    assert!(matches!(
        app.status.feedback.last().unwrap().progress,
        Progress::Unknown(_)
    ));
    app.tick(demo::now() + std::time::Duration::from_secs(31));
    let Progress::Failed(why) = &app.status.feedback.last().unwrap().progress else {
        panic!("{:?}", app.status.feedback.last())
    };
    assert!(
        why.starts_with("not applied: the API server answers again and apps/web does not show it"),
        "{why}"
    );
    let mut views = (*app.views).clone();
    let view = views.get_mut(&k("apps", "web")).unwrap();
    std::sync::Arc::make_mut(&mut view.release)
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(
            crate::api::annotations::RECONCILE_REQUESTED_AT.into(),
            "t2".into(),
        );
    app.set_views(std::sync::Arc::new(views));
    assert_eq!(
        app.status.feedback.last().unwrap().progress,
        Progress::Landed
    );
}

/// The answer of a write reported outcome unknown may still come (the request is not cut
/// off at the dashboard's limit): it then says how the write ended.
#[test]
fn a_late_answer_ends_an_unknown_write() {
    use crate::frontend::tui::io::{Expect, LateOutcome};
    let mut app = app(false);
    select(&mut app, "web");
    for (outcome, end) in [
        (LateOutcome::Applied, Progress::Landed),
        (
            LateOutcome::Refused("forbidden".into()),
            Progress::Failed("not applied: forbidden".into()),
        ),
    ] {
        let effects = press(&mut app, "r");
        let [Effect::Send { id, command }] = effects.as_slice() else {
            panic!("{effects:?}")
        };
        let id = *id;
        app.on_io(IoResult::Unknown {
            id,
            why: "no answer".into(),
            expect: Expect::Command {
                command: command.clone(),
                token: "t".into(),
            },
        });
        app.on_io(IoResult::Late { id, outcome });
        assert_eq!(app.status.feedback.last().unwrap().progress, end);
    }
}

#[test]
fn cancel_wait_and_bulk_actions_ask_first() {
    let mut app = app(false);
    select(&mut app, "api");
    assert!(press(&mut app, "c").is_empty());
    assert!(matches!(app.overlay, Some(Overlay::Confirm(_))));
    insta::assert_snapshot!(render(&app, 80, 13).backend());
    assert!(press(&mut app, "n").is_empty());
    assert!(app.overlay.is_none());
    press(&mut app, "c");
    let effects = press(&mut app, "y");
    assert!(
        matches!(&effects[..], [Effect::Send { command: Command::CancelWait(key), .. }] if key == &k("apps", "api"))
    );
    assert_eq!(
        app.status.feedback.last().unwrap().progress,
        Progress::Pending
    );

    select(&mut app, "web");
    press(&mut app, " ");
    select(&mut app, "worker");
    press(&mut app, " ");
    assert!(press(&mut app, "r").is_empty());
    let effects = press(&mut app, "y");
    assert_eq!(effects.len(), 2, "{effects:?}");
}

#[test]
fn disconnected_shows_a_banner_and_stale_rows_never_a_confident_ready() {
    let mut app = app(false);
    app.connection = crate::engine::Connection::Disconnected {
        since: app.now - std::time::Duration::from_secs(42),
        error: "client error (Connect)".into(),
    };
    let screen = render(&app, 120, 13).backend().to_string();
    assert!(screen.contains("API server unreachable since"), "{screen}");
    assert!(!screen.contains("✓ Ready"), "{screen}");
    assert!(screen.contains("? Ready (42s old)"), "{screen}");
    insta::assert_snapshot!(screen);
    app.connection = crate::engine::Connection::Connected;
    let screen = render(&app, 120, 13).backend().to_string();
    assert!(!screen.contains("unreachable"), "reconnecting clears it");
}

#[test]
fn ctrl_a_marks_every_visible_row() {
    let mut app = app(false);
    press(&mut app, "/");
    press(&mut app, "data");
    app.on_key(code(KeyCode::Enter));
    app.on_key(KeyEvent::new(KeyCode::Char('a'), KeyModifiers::CONTROL));
    let marked: Vec<_> = app
        .table
        .marked
        .iter()
        .map(|k| k.key.name.as_str())
        .collect();
    assert_eq!(marked, ["cache", "queue"]);
}

#[test]
fn bulk_suspend_says_what_happens_to_each_and_never_resumes() {
    let mut app = app(false);
    // billing is suspended; web and worker are not.
    for name in ["billing", "web", "worker"] {
        select(&mut app, name);
        press(&mut app, " ");
    }
    assert!(press(&mut app, "s").is_empty());
    let Some(Overlay::Confirm(Confirm { question, .. })) = &app.overlay else {
        panic!("asks first")
    };
    assert_eq!(
        question,
        "Suspend 2 (apps/web, apps/worker); apps/billing already suspended: unchanged? (y/n)"
    );
    insta::assert_snapshot!(render(&app, 100, 13).backend());
    assert!(
        app.table.marked.is_empty(),
        "marks are cleared once the action is asked"
    );
    let effects = press(&mut app, "y");
    let commands = sent(&effects);
    assert_eq!(
        commands,
        vec![
            Command::Suspend(k("apps", "web")),
            Command::Suspend(k("apps", "worker"))
        ]
    );
    // The status line reports the bulk action as a whole, then the notice expires.
    let ids: Vec<u64> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Send { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    let (_, text, _) = app.status_notice().unwrap();
    assert_eq!(text, "suspend 2: 0 done, 2 pending");
    app.on_io(IoResult::Done {
        id: ids[0],
        result: Ok(()),
    });
    app.on_io(IoResult::Done {
        id: ids[1],
        result: Err("forbidden".into()),
    });
    let (_, text, _) = app.status_notice().unwrap();
    assert_eq!(
        text,
        "suspend 2: 1 done, 1 failed (suspend apps/worker: forbidden)"
    );
    app.now += crate::frontend::tui::components::status_line::NOTICE_TTL;
    assert!(app.status_notice().is_none(), "old notices expire");
}

//! Snapshot tests of the real views on a test backend, and tests of what keys do. The
//! state is plain data with an injected "now", so every snapshot is deterministic.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::{App, Overlay};
use super::components::confirm::Confirm;
use super::components::status::Progress;
use super::effect::{Effect, IoResult};
use super::model::{
    DetailData, EventLine, Fetch, HelmData, RowKey, SortBy, Workload, mask_manifest,
};
use super::theme::Theme;
use super::{demo, render};
use crate::client::Scope;
use crate::engine::{Command, ReleaseKey, Role};
use crate::tracking::{
    ConfigKind, ConsumedObject, Selection, TrackedObject, TrackedWorkload, WorkloadKind,
    WorkloadRef,
};

fn app(readonly: bool) -> App {
    let mut app = App::new(
        "prod-eu".into(),
        Scope::All,
        readonly,
        Theme::builtin("dark").unwrap(),
        demo::now(),
    );
    app.role = Role::Leader;
    app.set_views(demo::sample());
    app.set_replicas(demo::replicas());
    app
}

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn code(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// The commands a list of effects sends (any other effect fails the test).
fn sent(effects: &[Effect]) -> Vec<Command> {
    effects
        .iter()
        .map(|e| match e {
            Effect::Send { command, .. } => command.clone(),
            e => panic!("{e:?}"),
        })
        .collect()
}

fn press(app: &mut App, keys: &str) -> Vec<Effect> {
    keys.chars().flat_map(|c| app.on_key(key(c))).collect()
}

fn select(app: &mut App, name: &str) {
    app.table.selected = app
        .table
        .rows
        .iter()
        .position(|r| r.id.key.name == name)
        .unwrap();
}

fn k(ns: &str, name: &str) -> ReleaseKey {
    ReleaseKey {
        namespace: ns.into(),
        name: name.into(),
    }
}

fn detail_data() -> DetailData {
    DetailData {
        revisions: Fetch::Loading,
        // Revision 5 is rolling out: in Helm's storage, not yet in status.history.
        helm: Fetch::Loaded(HelmData {
            revision: 5,
            status: "pending-upgrade".into(),
            description: "Preparing upgrade".into(),
            chart: "api-2.4.0".into(),
            values: "replicas: 3\ndb:\n  password: '***'\n".into(),
            manifest: mask_manifest(
                "# Source: api/templates/secret.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: api\ndata:\n  password: aHVudGVyMg==\n---\n# Source: api/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: api\n",
            ),
        }),
        events: Fetch::Loaded(vec![
            EventLine {
                age: Some(demo::now() - std::time::Duration::from_secs(40)),
                kind: "Normal".into(),
                reason: "UpgradeStarted".into(),
                message: "Helm upgrade started for revision 4".into(),
                count: 1,
            },
            EventLine {
                age: Some(demo::now() - std::time::Duration::from_secs(3600)),
                kind: "Warning".into(),
                reason: "HealthCheckFailed".into(),
                message: "Deployment/apps/api: 0 of 3 replicas available".into(),
                count: 2,
            },
        ]),
        workloads: Fetch::Loaded(vec![
            Workload {
                object: "Deployment/api".into(),
                desired: 3,
                updated: 3,
                ready: 1,
                available: 1,
                failing: vec![
                    (
                        "api-6c9f-2xk".into(),
                        "app (CrashLoopBackOff): back-off 40s restarting failed container".into(),
                    ),
                    (
                        "api-6c9f-9qp".into(),
                        "app (ImagePullBackOff): image registry.example/api:2.4.0 not found".into(),
                    ),
                ],
                held: 0,
                tracking: Some(tracked(
                    "api",
                    &[
                        ("ConfigMap", "api-config", &[], false, true),
                        ("Secret", "api-tls", &["tls.crt", "tls.key"], false, true),
                        ("ConfigMap", "api-flags", &[], true, false),
                    ],
                    false,
                )),
            },
            Workload {
                object: "Deployment/worker".into(),
                desired: 2,
                updated: 2,
                ready: 0,
                available: 0,
                failing: Vec::new(),
                held: 2,
                tracking: Some(tracked(
                    "worker",
                    &[("Secret", "worker-db", &["password"], false, false)],
                    true,
                )),
            },
        ]),
    }
}

type ObjectSpec<'a> = (&'a str, &'a str, &'a [&'a str], bool, bool);

/// A tracked workload of namespace apps: (kind, name, keys, optional, exists) per object.
fn tracked(name: &str, objects: &[ObjectSpec], gated: bool) -> TrackedWorkload {
    TrackedWorkload {
        workload: WorkloadRef {
            kind: WorkloadKind::Deployment,
            namespace: "apps".into(),
            name: name.into(),
        },
        release: Some("api".into()),
        objects: objects
            .iter()
            .map(|&(kind, name, keys, optional, exists)| TrackedObject {
                object: ConsumedObject {
                    kind: if kind == "Secret" {
                        ConfigKind::Secret
                    } else {
                        ConfigKind::ConfigMap
                    },
                    name: name.into(),
                    selection: if keys.is_empty() {
                        Selection::Whole
                    } else {
                        Selection::Keys(keys.iter().map(|k| (*k).to_owned()).collect())
                    },
                    optional,
                },
                exists,
            })
            .collect(),
        gated,
        hash: Some("4f2a9c0d5e1b7a3c9e8d".into()),
    }
}

#[test]
fn table_shows_every_state() {
    let mut app = app(false);
    select(&mut app, "api");
    press(&mut app, " ");
    insta::assert_snapshot!(render(&app, 120, 14).backend());
}

#[test]
fn table_fits_80x24() {
    let mut app = app(false);
    app.scope = Scope::Namespace("apps".into());
    app.role = Role::Follower {
        holder: "controller-7f9c/4411".into(),
    };
    insta::assert_snapshot!(render(&app, 80, 24).backend());
}

#[test]
fn readonly_says_so_and_refuses_writes() {
    let mut app = app(true);
    let effects = press(&mut app, "sre");
    assert!(effects.is_empty(), "{effects:?}");
    assert!(app.editor.is_none());
    assert!(matches!(
        app.status.feedback.last().unwrap().progress,
        Progress::Failed(_)
    ));
    insta::assert_snapshot!(render(&app, 100, 11).backend());
}

#[test]
fn detail_view_shows_conditions_wait_rollout_history_and_events() {
    let mut app = app(false);
    select(&mut app, "api");
    let effects = app.on_key(code(KeyCode::Enter));
    assert_eq!(
        effects,
        vec![Effect::LoadDetail(RowKey::wheelhouse(k("apps", "api")))]
    );
    app.on_io(IoResult::Detail {
        key: RowKey::wheelhouse(k("apps", "api")),
        data: detail_data(),
    });
    insta::assert_snapshot!(render(&app, 120, 36).backend());
}

#[test]
fn manifest_view_masks_secret_data() {
    let mut app = app(false);
    select(&mut app, "api");
    app.on_key(key('m'));
    app.on_io(IoResult::Detail {
        key: RowKey::wheelhouse(k("apps", "api")),
        data: detail_data(),
    });
    let screen = render(&app, 80, 20).backend().to_string();
    assert!(!screen.contains("aHVudGVyMg=="), "{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn help_is_generated_from_the_keymap_and_fits_80x24() {
    let mut app = app(false);
    press(&mut app, "?");
    let screen = render(&app, 80, 24).backend().to_string();
    for b in super::keymap::KEYMAP {
        assert!(screen.contains(b.help), "help lacks {:?}", b.help);
    }
    insta::assert_snapshot!(screen);
}

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
    use super::io::Expect;
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
    use super::io::Expect;
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
    use super::io::{Expect, LateOutcome};
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
    app.now += super::components::status::NOTICE_TTL;
    assert!(app.status_notice().is_none(), "old notices expire");
}

#[test]
fn filter_and_sort() {
    let mut app = app(false);
    press(&mut app, "/");
    press(&mut app, "data");
    app.on_key(code(KeyCode::Enter));
    let names: Vec<_> = app
        .table
        .rows
        .iter()
        .map(|r| r.id.key.name.as_str())
        .collect();
    assert_eq!(names, ["cache", "queue"]);
    app.on_key(code(KeyCode::Esc));
    assert_eq!(app.table.rows.len(), 6);
    press(&mut app, "o");
    assert_eq!(
        app.table.rows[0].id.key.name, "worker",
        "failed first when sorted by state"
    );
    press(&mut app, "O");
    assert_eq!(app.table.rows[0].id.key.name, "web");
}

#[test]
fn commands_switch_namespace_and_context() {
    let mut app = app(false);
    let all = app.table.rows.len();
    press(&mut app, ":");
    press(&mut app, "ns data");
    // Only a view filter: the engine (and its coverage) stays as it is; data joins the
    // favourites.
    let effects = app.on_key(code(KeyCode::Enter));
    assert!(
        matches!(&effects[..], [Effect::SaveFavourites(f)] if f.of("prod-eu") == ["data"]),
        "{effects:?}"
    );
    assert_eq!(app.scope, Scope::Namespace("data".into()));
    assert!(app.table.rows.iter().all(|r| r.id.key.namespace == "data"));
    assert!(app.table.rows.len() < all);
    assert_eq!(app.coverage.scope, Scope::All);
    assert!(app.run_command("ns all").is_empty());
    assert_eq!(app.table.rows.len(), all);
    assert_eq!(
        app.run_command("ctx staging"),
        vec![Effect::SwitchContext("staging".into())]
    );
    assert!(app.run_command("frobnicate").is_empty());
    assert!(matches!(
        app.status.feedback.last().unwrap().progress,
        Progress::Failed(_)
    ));
}

#[test]
fn a_namespace_engine_refuses_views_it_cannot_show() {
    let mut app = app(false);
    app.coverage = crate::engine::Coverage::new(Scope::Namespace("apps".into()), None);
    app.scope = Scope::Namespace("apps".into());
    assert!(app.run_command("ns data").is_empty());
    assert_eq!(app.scope, Scope::Namespace("apps".into()));
    let Progress::Failed(why) = &app.status.feedback.last().unwrap().progress else {
        panic!("refused")
    };
    assert!(why.contains("reconciles) namespace apps only"), "{why}");
}

#[test]
fn history_columns_line_up_whatever_the_widths() {
    let mut app = app(false);
    let mut views = (*app.views).clone();
    let view = views.get_mut(&k("apps", "api")).unwrap();
    let hr = std::sync::Arc::make_mut(&mut view.release);
    let history = &mut hr.status.as_mut().unwrap().history;
    history[0].status = "pending-rollback".into();
    history[0].chart_name = "a-much-longer-chart-name".into();
    app.set_views(std::sync::Arc::new(views));
    select(&mut app, "api");
    app.on_key(key('h'));
    app.on_io(IoResult::Detail {
        key: RowKey::wheelhouse(k("apps", "api")),
        data: detail_data(),
    });
    let screen = render(&app, 120, 30).backend().to_string();
    let column = |l: &str, what: &str| l.find(what).map(|b| l[..b].chars().count());
    let digests: Vec<usize> = screen
        .lines()
        .filter_map(|l| column(l, "sha256:"))
        .collect();
    assert!(digests.len() >= 2, "{screen}");
    assert!(digests.windows(2).all(|w| w[0] == w[1]), "{screen}");
    let header = screen
        .lines()
        .find_map(|l| column(l, "DIGEST"))
        .expect("a header");
    assert_eq!(header, digests[0], "{screen}");
}

/// The command line's text.
fn command_text(app: &App) -> String {
    match &app.overlay {
        Some(Overlay::Command(line)) => line.text.lines().concat(),
        _ => panic!("no command line"),
    }
}

#[test]
fn number_keys_switch_the_view_to_favourites_and_0_shows_all() {
    let mut app = app(false);
    for ns in ["data", "apps"] {
        press(&mut app, ":");
        press(&mut app, &format!("ns {ns}"));
        let effects = app.on_key(code(KeyCode::Enter));
        assert!(
            matches!(&effects[..], [Effect::SaveFavourites(_)]),
            "{effects:?}"
        );
    }
    assert_eq!(app.favourites.of("prod-eu"), ["data", "apps"]);
    // Only the view filter: no effect at all (no engine restart, and data keeps key 1).
    assert!(press(&mut app, "1").is_empty());
    assert_eq!(app.scope, Scope::Namespace("data".into()));
    assert!(app.table.rows.iter().all(|r| r.id.key.namespace == "data"));
    assert_eq!(app.favourites.of("prod-eu"), ["data", "apps"]);
    assert!(press(&mut app, "0").is_empty());
    assert_eq!(app.scope, Scope::All);
    assert_eq!(app.table.rows.len(), 6);
    press(&mut app, "2");
    assert_eq!(app.scope, Scope::Namespace("apps".into()));
    // No favourite 5 yet: a notice, and the view stays.
    assert!(press(&mut app, "5").is_empty());
    assert_eq!(app.scope, Scope::Namespace("apps".into()));
    assert!(
        app.status
            .feedback
            .last()
            .unwrap()
            .what
            .contains("no namespace on 5")
    );
    // A namespace nobody knows (a typo) is shown but never becomes a favourite.
    assert!(app.run_command("ns dta").is_empty());
    assert_eq!(app.scope, Scope::Namespace("dta".into()));
    assert_eq!(app.favourites.of("prod-eu"), ["data", "apps"]);
    // The start namespace joins them, and the completions load.
    let mut fresh = App::new(
        "prod-eu".into(),
        Scope::Namespace("kube-system".into()),
        false,
        Theme::builtin("dark").unwrap(),
        demo::now(),
    );
    fresh.set_favourites(Ok(app.favourites.clone()));
    let effects = fresh.on_start();
    assert!(
        matches!(&effects[..], [Effect::SaveFavourites(f), Effect::LoadCompletions]
            if f.of("prod-eu") == ["data", "apps", "kube-system"]),
        "{effects:?}"
    );
}

#[test]
fn favourites_row_fits_80_columns_beside_the_read_only_header() {
    let mut app = app(true);
    app.cluster_namespaces = (1..=9).map(|i| format!("team-{i}-services")).collect();
    for ns in app.cluster_namespaces.clone() {
        app.run_command(&format!("ns {ns}"));
    }
    press(&mut app, "3");
    assert_eq!(app.scope, Scope::Namespace("team-3-services".into()));
    let screen = render(&app, 80, 24).backend().to_string();
    let lines: Vec<&str> = screen.lines().collect();
    assert!(lines[0].contains("ctx prod-eu"), "{screen}");
    assert!(lines[0].contains("[READ-ONLY]"), "{screen}");
    assert!(lines[1].contains("<0> all"), "{screen}");
    assert!(lines[1].contains("<3> [team-3-services]"), "{screen}");
    assert!(lines[1].contains('…'), "cut, not wrapped:\n{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn command_line_completes_namespaces_and_contexts_with_tab() {
    let mut app = app(false);
    let tab = code(KeyCode::Tab);
    assert_eq!(press(&mut app, ":"), vec![Effect::LoadCompletions]);
    // Not allowed to list namespaces: no notice, the releases' namespaces complete.
    let notices = app.status.feedback.len();
    app.on_io(IoResult::Namespaces(Err("namespaces is forbidden".into())));
    assert_eq!(app.status.feedback.len(), notices);
    assert_eq!(app.completions("ns ").matches, ["all", "apps", "data"]);
    app.on_io(IoResult::Namespaces(Ok(vec![
        "apps".into(),
        "data".into(),
        "default".into(),
        "kube-system".into(),
    ])));
    app.on_io(IoResult::Contexts(vec![
        "prod-eu".into(),
        "prod-us".into(),
        "staging".into(),
    ]));
    press(&mut app, "ns d");
    app.on_key(tab);
    assert_eq!(command_text(&app), "ns data");
    let screen = render(&app, 80, 24).backend().to_string();
    assert!(
        screen.contains("namespaces: [data] default"),
        "suggestion line:\n{screen}"
    );
    insta::assert_snapshot!(screen);
    app.on_key(tab);
    assert_eq!(command_text(&app), "ns default");
    app.on_key(tab);
    assert_eq!(command_text(&app), "ns data", "tab cycles");
    // Typing ends the cycle: completions start again from the new text.
    app.on_key(code(KeyCode::Backspace));
    app.on_key(code(KeyCode::Backspace));
    app.on_key(code(KeyCode::Backspace));
    app.on_key(tab);
    assert_eq!(command_text(&app), "ns data");
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.scope, Scope::Namespace("data".into()));

    press(&mut app, ":");
    press(&mut app, "c");
    app.on_key(tab);
    assert_eq!(command_text(&app), "ctx ", "the one command, then a space");
    press(&mut app, "prod");
    app.on_key(tab);
    app.on_key(tab);
    assert_eq!(command_text(&app), "ctx prod-us");
    assert_eq!(
        app.on_key(code(KeyCode::Enter)),
        vec![Effect::SwitchContext("prod-us".into())]
    );
    // Nothing matches: said on the suggestion line, tab leaves the text alone.
    press(&mut app, ":");
    press(&mut app, "ns zz");
    app.on_key(tab);
    assert_eq!(command_text(&app), "ns zz");
    let screen = render(&app, 80, 24).backend().to_string();
    assert!(
        screen.contains("no namespace starts with \"zz\""),
        "{screen}"
    );
}

#[test]
fn favourites_that_cannot_be_read_or_saved_are_a_notice_once() {
    let mut app = app(false);
    app.set_favourites(Err("favourites.yaml: permission denied".into()));
    let Progress::Failed(e) = &app.status.feedback.last().unwrap().progress else {
        panic!("a notice")
    };
    assert!(e.contains("permission denied"));
    let notices = app.status.feedback.len();
    for _ in 0..2 {
        app.on_io(IoResult::FavouritesSaved(Err(
            "read-only file system".into()
        )));
    }
    assert_eq!(app.status.feedback.len(), notices + 1, "said once");
    assert!(app.status_notice().unwrap().1.contains("not saved"));
}

/// Rows kept up to date one release at a time are exactly the rows a full rebuild gives,
/// whatever changes (releases and their workloads' replicas), for every sort order,
/// reversed or not, with a filter.
#[test]
fn incremental_rows_match_a_full_rebuild() {
    use crate::engine::Phase;
    use std::sync::Arc;
    let all = demo::many(300);
    let keys: Vec<ReleaseKey> = all.keys().cloned().collect();
    // A deterministic pseudo-random walk (no test dependency needed for that).
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for sort in [
        SortBy::Name,
        SortBy::State,
        SortBy::LastChange,
        SortBy::Revision,
    ] {
        for reverse in [false, true] {
            let mut app = app(false);
            app.table.sort = sort;
            app.table.reverse = reverse;
            app.table.filter = "team-0".into();
            app.set_views(all.clone());
            let mut replicas = (*demo::many_replicas(300)).clone();
            app.set_replicas(Arc::new(replicas.clone()));
            let mut views = (*all).clone();
            for round in 0..40 {
                // A handful of changes per snapshot, like a publish tick during a rollout.
                for _ in 0..1 + next(5) {
                    let key = &keys[next(keys.len())];
                    match next(4) {
                        0 => {
                            views.remove(key);
                        }
                        1 => {
                            views.insert(key.clone(), all[key].clone());
                        }
                        _ => {
                            if let Some(mut view) = views.get(key).cloned() {
                                let hr = Arc::make_mut(&mut view.release);
                                hr.spec.suspend = !hr.spec.suspend;
                                let history = &mut hr.status.as_mut().unwrap().history;
                                if let Some(last) = history.first_mut() {
                                    last.version += next(3) as i32;
                                }
                                view.live.phase = if next(2) == 0 {
                                    Phase::Idle
                                } else {
                                    Phase::Upgrading
                                };
                                views.insert(key.clone(), view);
                            }
                        }
                    }
                }
                // The workloads of a few releases scale.
                for _ in 0..next(3) {
                    let ids: Vec<_> = replicas.keys().cloned().collect();
                    let id = &ids[next(ids.len())];
                    let mut entry = replicas[id].clone();
                    if let Some(w) = entry.workloads.first_mut() {
                        w.ready = (w.ready + 1) % (w.desired + 1);
                    }
                    replicas.insert(id.clone(), entry);
                }
                app.set_replicas(Arc::new(replicas.clone()));
                let selected = app
                    .table
                    .rows
                    .get(app.table.selected)
                    .map(|r| r.id.key.clone());
                app.set_views(Arc::new(views.clone()));
                let incremental = app.table.rows.clone();
                app.set_views(Arc::new(crate::engine::Views::default()));
                app.set_views(Arc::new(views.clone()));
                assert_eq!(
                    incremental, app.table.rows,
                    "{sort:?} reversed={reverse}, round {round}"
                );
                if let Some(key) = selected
                    && views.contains_key(&key)
                    && incremental.iter().any(|r| r.id.key == key)
                {
                    let i = incremental.iter().position(|r| r.id.key == key).unwrap();
                    assert_eq!(app.table.rows[i].id.key, key);
                }
            }
        }
    }
}

#[test]
fn the_title_says_loading_until_the_first_list_completes() {
    let mut app = App::new(
        "prod-eu".into(),
        Scope::All,
        false,
        Theme::builtin("dark").unwrap(),
        demo::now(),
    );
    app.role = Role::Leader;
    let screen = render(&app, 80, 12).backend().to_string();
    assert!(screen.contains("Releases loading (0 so far)"), "{screen}");
    assert!(screen.contains("Listing HelmReleases"), "{screen}");
    let first_page: crate::engine::Views = demo::sample().values().take(3).cloned().collect();
    let partial = crate::engine::Views::new((*first_page).clone(), false);
    app.set_views(std::sync::Arc::new(partial));
    insta::assert_snapshot!(render(&app, 80, 12).backend());
    app.set_views(demo::sample());
    let screen = render(&app, 80, 12).backend().to_string();
    assert!(!screen.contains("loading"), "{screen}");
}

/// The sample releases plus one with long names whose wait shows the longest time-left
/// text there is (119m59s).
fn app_with_a_long_wait() -> App {
    let mut app = app(false);
    let mut views = (*app.views).clone();
    let hr = demo::release(
        "payments-production",
        "checkout-gateway-canary-eu-west",
        "checkout-gateway-chart",
        Some(("Unknown", "Progressing", "Running upgrade")),
        2,
        30,
    );
    let view = demo::view(hr, demo::waiting(1, 2 * 3600 - 1, 0, &[]));
    views.insert(view.key.clone(), view);
    app.set_views(std::sync::Arc::new(views));
    app
}

#[test]
fn state_column_never_cuts_the_time_left_at_80_columns_or_more() {
    let mut app = app_with_a_long_wait();
    let long = app
        .table
        .rows
        .iter()
        .find(|r| r.id.key.name.starts_with("checkout"))
        .unwrap()
        .state_text(app.now);
    assert!(long.ends_with("119m59s left"), "{long}");
    let short = app
        .table
        .rows
        .iter()
        .find(|r| r.id.key.name == "api")
        .unwrap()
        .state_text(app.now);
    for scope in [Scope::All, Scope::Namespace("payments-production".into())] {
        app.scope = scope.clone();
        app.set_views(app.views.clone());
        for width in 80..=220 {
            let screen = render(&app, width, 24).backend().to_string();
            assert!(screen.contains(&long), "{scope:?} {width}:\n{screen}");
            if matches!(scope, Scope::All) {
                assert!(screen.contains(&short), "{width}:\n{screen}");
            }
        }
    }
    app.scope = Scope::All;
    app.set_views(app.views.clone());
    insta::assert_snapshot!(render(&app, 80, 24).backend());
}

/// What the footer or help would offer if a write were offered in read-only mode.
const WRITE_HINTS: [&str; 6] = [
    "s suspend",
    "r reconcile",
    "c cancel",
    "e edit",
    "resume",
    "edit spec.values",
];

#[test]
fn readonly_at_80x24_keeps_its_marker_and_offers_no_write() {
    let mut app = app(true);
    // A long context (an EKS ARN) must not push the marker off the header.
    app.context = "arn:aws:eks:eu-west-1:123456789012:cluster/production-main".into();
    let screens = {
        let table = render(&app, 80, 24).backend().to_string();
        press(&mut app, "?");
        let help = render(&app, 80, 24).backend().to_string();
        press(&mut app, "x");
        select(&mut app, "billing");
        app.on_key(code(KeyCode::Enter));
        app.on_io(IoResult::Detail {
            key: RowKey::wheelhouse(k("apps", "billing")),
            data: detail_data(),
        });
        let detail = render(&app, 80, 24).backend().to_string();
        press(&mut app, "v");
        let values = render(&app, 80, 24).backend().to_string();
        press(&mut app, "?");
        let detail_help = render(&app, 80, 24).backend().to_string();
        [table, help, detail, values, detail_help]
    };
    for screen in &screens {
        let header = screen.lines().next().unwrap();
        assert!(header.contains("[READ-ONLY]"), "{screen}");
        for hint in WRITE_HINTS {
            assert!(!screen.contains(hint), "{hint:?} offered:\n{screen}");
        }
        assert!(!screen.contains("S resumes"), "{screen}");
        assert!(!screen.contains("e edits"), "{screen}");
        assert!(!screen.contains("cancel wait"), "{screen}");
        assert!(!screen.contains("Values editor"), "{screen}");
    }
    // The read-only help still lists every key that does something here.
    for b in super::keymap::KEYMAP
        .iter()
        .filter(|b| !b.action.writes() && b.context != super::keymap::Context::Editor)
    {
        assert!(screens[1].contains(b.help), "help lacks {:?}", b.help);
    }
    let [table, help, detail, _, _] = screens;
    insta::assert_snapshot!("readonly_table_80x24", table);
    insta::assert_snapshot!("readonly_help_80x24", help);
    insta::assert_snapshot!("readonly_detail_80x24", detail);
}

#[test]
fn ready_counts_replicas_of_the_workloads_even_during_a_wait() {
    use crate::health::replicas::{Kind, ReleaseId, ReleaseReplicas, WorkloadReplicas};
    let mut app = app(false);
    let mut map = (*app.replicas).clone();
    map.insert(
        ReleaseId::new("apps", "api"),
        ReleaseReplicas {
            workloads: vec![WorkloadReplicas::counted(
                Kind::Deployment,
                "apps",
                "api",
                0,
                3,
            )],
        },
    );
    app.set_replicas(std::sync::Arc::new(map));
    let ready = |app: &App, name: &str| {
        app.table
            .rows
            .iter()
            .find(|r| r.id.key.name == name)
            .unwrap()
            .ready_text()
    };
    // api's wait counts 2 of 4 resources ready; READY counts its replicas.
    assert_eq!(ready(&app, "api"), "0/3");
    assert_eq!(
        ready(&app, "cache"),
        "7/7",
        "StatefulSet 3/3 + DaemonSet 4/4"
    );
    assert_eq!(ready(&app, "queue"), "-", "no workloads");
    let table = render(&app, 100, 12).backend().to_string();
    insta::assert_snapshot!("ready_replicas_table", table);
    select(&mut app, "api");
    app.on_key(code(KeyCode::Enter));
    app.on_io(IoResult::Detail {
        key: RowKey::wheelhouse(k("apps", "api")),
        data: detail_data(),
    });
    let detail = render(&app, 100, 14).backend().to_string();
    assert!(detail.contains("Ready    0/3 replicas"), "{detail}");
    assert!(detail.contains("2/4 resources ready"), "{detail}");
    insta::assert_snapshot!("ready_replicas_detail", detail);
    app.on_key(code(KeyCode::Esc));
    select(&mut app, "queue");
    app.on_key(code(KeyCode::Enter));
    let detail = render(&app, 100, 10).backend().to_string();
    assert!(detail.contains("Ready    - (no Deployment"), "{detail}");
}

mod kinds;

//! Snapshot tests of the real views on a test backend, and tests of what keys do. The
//! state is plain data with an injected "now", so every snapshot is deterministic.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::{App, Overlay};
use super::components::confirm::Confirm;
use super::components::status_line::Progress;
use super::components::table::StateCounts;
use super::effect::{ChangesOf, Effect, IoResult};
use super::theme::Theme;
use super::view_model::{
    DetailData, EventLine, Fetch, HelmData, RowKey, SortBy, Workload, mask_manifest,
};
use super::{demo, render};
use crate::cluster::client::Scope;
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
        read_in: None,
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
        data: Box::new(detail_data()),
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
        data: Box::new(detail_data()),
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
        assert!(
            screen.contains(b.help),
            "help lacks {:?}:\n{screen}",
            b.help
        );
    }
    insta::assert_snapshot!(screen);
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
                                view.elsewhere = match view.elsewhere {
                                    None => Some("engine-b".into()),
                                    Some(_) => None,
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
                // The counts kept as rows come and go are those of the rows shown.
                let states = app.table.states().clone();
                assert_eq!(states, StateCounts::of(&incremental), "round {round}");
                let elsewhere = app.elsewhere;
                assert_eq!(
                    elsewhere,
                    views.values().filter(|v| v.elsewhere.is_some()).count(),
                    "round {round}"
                );
                app.set_views(Arc::new(crate::engine::Views::default()));
                assert_eq!(app.elsewhere, 0);
                app.set_views(Arc::new(views.clone()));
                assert_eq!(
                    incremental, app.table.rows,
                    "{sort:?} reversed={reverse}, round {round}"
                );
                assert_eq!(app.elsewhere, elsewhere);
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
            data: Box::new(detail_data()),
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
        data: Box::new(detail_data()),
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

mod changes;
mod editor;
mod fleet;
mod freeze;
mod kinds;
mod logs;
mod navigation;
mod timeline;
mod writes;

/// A release someone scaled by hand (Ready, Drifted) and one whose newest revision the
/// helm CLI wrote (ExternalRevision): both marked drifted in the table, with what
/// drifted as their message.
#[test]
fn drifted_releases_are_marked_in_the_table() {
    let mut app = app(false);
    let mut views = (*app.views).clone();
    let mut scaled = demo::release(
        "data",
        "search",
        "opensearch",
        Some(("True", "InstallSucceeded", "Helm install succeeded")),
        1,
        7200,
    );
    let status = scaled.status.as_mut().unwrap();
    status
        .conditions
        .push(k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
            type_: "Drifted".into(),
            status: "True".into(),
            reason: "Drifted".into(),
            message:
                "live objects differ from revision's manifest: StatefulSet/search: /spec/replicas"
                    .into(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(demo::now()),
            observed_generation: None,
        });
    let rolled = demo::release(
        "data",
        "ledger",
        "ledger",
        Some((
            "False",
            "ExternalRevision",
            "revision 3 (Rollback to 1) was written by Helm, not from this HelmRelease's spec",
        )),
        3,
        60,
    );
    for hr in [scaled, rolled] {
        let view = demo::view(hr, Default::default());
        views.insert(view.key.clone(), view);
    }
    app.set_views(std::sync::Arc::new(views));
    let screen = render(&app, 180, 16).backend().to_string();
    for line in [
        "≠ Drifted",
        "StatefulSet/search: /spec/replicas",
        "revision 3 (Rollback to 1) was",
    ] {
        assert!(screen.contains(line), "{line:?} not in:\n{screen}");
    }
    insta::assert_snapshot!(screen);
}

#[test]
fn the_detail_view_says_whom_a_release_acts_as_and_the_header_says_locked_down() {
    let mut app = app(false);
    select(&mut app, "api");
    app.on_key(code(KeyCode::Enter));
    let open = render(&app, 100, 14).backend().to_string();
    assert!(
        !open.contains("Acts as"),
        "no tenancy, nothing to say: {open}"
    );
    assert!(!open.contains("locked down"), "{open}");
    app.tenancy = crate::cluster::tenancy::Policy {
        default_service_account: Some("tenant-deployer".into()),
        no_cross_namespace_refs: true,
        ..Default::default()
    };
    let locked = render(&app, 100, 14).backend().to_string();
    assert!(
        locked.contains(
            "Acts as  ServiceAccount apps/tenant-deployer (the cluster's default service account)"
        ),
        "{locked}"
    );
    assert!(
        locked.contains("engine here: all ns · locked down"),
        "{locked}"
    );
}

/// Text from the cluster is data: a status message holding terminal escape sequences
/// (a tenant's chart `fail` message) is drawn without its control characters, so the
/// operator's terminal never receives them; the words around them stay.
#[test]
fn control_characters_from_the_cluster_never_reach_the_terminal() {
    let mut app = app(false);
    let hostile = demo::release(
        "apps",
        "hostile",
        "web",
        Some((
            "False",
            "InstallFailed",
            "render failed: \u{1b}]2;owned\u{7}\u{1b}[2Jgone\u{9b}31m",
        )),
        1,
        60,
    );
    app.set_views(super::views_of([demo::view(
        hostile,
        crate::engine::LiveState::default(),
    )]));
    let screen = render(&app, 140, 12);
    let cells: String = screen
        .backend()
        .buffer()
        .content()
        .iter()
        .map(|c| c.symbol())
        .collect();
    assert!(cells.contains("render failed:"), "{cells}");
    assert!(
        !cells.chars().any(|c| c.is_control()),
        "a control character reached the screen: {cells:?}"
    );
}

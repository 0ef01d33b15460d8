//! The fleet on one screen: rows of several clusters in one table with a CLUSTER column,
//! the `cluster:` filter, marks and bulk actions across clusters (each write carried by
//! its own cluster's client), and the fleet header's tiles, a silent cluster's rows kept
//! as its last known state.

use std::sync::Arc;

use super::*;
use crate::frontend::tui::fleet_model::{Fleet, FleetUpdate, Link};
use crate::frontend::tui::view_model::Cluster;

/// prod-eu (the dashboard's own, with the sample releases), and prod-us and staging with
/// a release each of the same name (apps/web) and prod-us one of its own.
fn fleet_app() -> App {
    let mut app = app(false);
    app.fleet = Fleet::of(&["prod-us".into(), "staging".into()], &[]);
    let us = Cluster::from("prod-us");
    let staging = Cluster::from("staging");
    let web = |revisions: i32, ready: Option<(&str, &str, &str)>| {
        demo::view(
            demo::release("apps", "web", "podinfo", ready, revisions, 300),
            Default::default(),
        )
    };
    let cache = demo::view(
        demo::release(
            "apps",
            "sessions",
            "redis",
            Some((
                "False",
                "InstallFailed",
                "timed out waiting for the condition",
            )),
            2,
            900,
        ),
        Default::default(),
    );
    app.on_fleet(&us, FleetUpdate::Link(Link::Connected));
    app.on_fleet(
        &us,
        FleetUpdate::Views(views_of([
            web(
                4,
                Some(("True", "UpgradeSucceeded", "Helm upgrade succeeded")),
            ),
            cache,
        ])),
    );
    app.on_fleet(&staging, FleetUpdate::Link(Link::Connected));
    app.on_fleet(
        &staging,
        FleetUpdate::Views(views_of([web(
            5,
            Some(("False", "UpgradeFailed", "Helm upgrade failed: timed out")),
        )])),
    );
    app
}

fn views_of(
    views: impl IntoIterator<Item = crate::engine::ReleaseView>,
) -> Arc<crate::engine::Views> {
    super::super::views_of(views)
}

fn rows_named(app: &App, name: &str) -> Vec<Option<String>> {
    app.table
        .rows
        .iter()
        .filter(|r| r.id.key.name == name)
        .map(|r| r.id.cluster.as_deref().map(str::to_owned))
        .collect()
}

#[test]
fn one_table_holds_every_clusters_rows_side_by_side() {
    let app = fleet_app();
    // The same release in three clusters: adjacent rows (sorted by release, then cluster).
    assert_eq!(
        rows_named(&app, "web"),
        [None, Some("prod-us".into()), Some("staging".into())]
    );
    assert_eq!(rows_named(&app, "sessions"), [Some("prod-us".into())]);
    insta::assert_snapshot!(render(&app, 120, 22).backend());
}

#[test]
fn the_cluster_filter_shows_one_cluster_and_ctx_is_a_filter() {
    let mut app = fleet_app();
    press(&mut app, "/");
    for c in "cluster:staging".chars() {
        app.on_key(key(c));
    }
    app.on_key(code(KeyCode::Enter));
    assert!(!app.table.rows.is_empty());
    assert!(
        app.table
            .rows
            .iter()
            .all(|r| r.id.cluster.as_deref() == Some("staging")),
        "{:?}",
        app.table
            .rows
            .iter()
            .map(|r| r.id.to_string())
            .collect::<Vec<_>>()
    );
    // The home cluster by its name, with text after it.
    app.table.filter.clear();
    let effects = app.run_command("ctx prod-eu");
    assert!(effects.is_empty(), "a filter, not a switch: {effects:?}");
    assert!(app.switching.is_none());
    assert!(!app.table.rows.is_empty());
    assert!(app.table.rows.iter().all(|r| r.id.cluster.is_none()));
    app.run_command("ctx all");
    assert_eq!(rows_named(&app, "web").len(), 3);
}

#[test]
fn a_bulk_suspend_across_clusters_goes_to_each_rows_own_cluster() {
    let mut app = fleet_app();
    press(&mut app, "/");
    for c in "web".chars() {
        app.on_key(key(c));
    }
    app.on_key(code(KeyCode::Enter));
    app.on_key(KeyEvent::new(KeyCode::Char('a'), KeyModifiers::CONTROL));
    assert_eq!(app.table.marked.len(), 3);
    press(&mut app, "s");
    let Some(Overlay::Confirm(confirm)) = &app.overlay else {
        panic!("a bulk action asks first");
    };
    // It says where each write goes.
    assert!(
        confirm.question.contains("apps/web in prod-us"),
        "{}",
        confirm.question
    );
    assert!(
        confirm.question.contains("apps/web in staging"),
        "{}",
        confirm.question
    );
    // And how many in each cluster, in the question and the status line's report.
    assert!(
        confirm
            .question
            .contains("[prod-eu 1, prod-us 1, staging 1]"),
        "{}",
        confirm.question
    );
    let effects = press(&mut app, "y");
    // The status line reports each cluster's writes: pending, then how each ended.
    let notice = app.status_notice().unwrap().1;
    assert_eq!(
        notice,
        "suspend 3: prod-eu 0 done, 1 pending; prod-us 0 done, 1 pending; \
         staging 0 done, 1 pending"
    );
    let id_in = |cluster: Option<&str>| {
        effects
            .iter()
            .find_map(|e| match (e, cluster) {
                (Effect::In { cluster: c, effect }, Some(want)) if c.to_string() == want => {
                    crate::frontend::tui::app::write_id(effect)
                }
                (Effect::Send { id, .. }, None) => Some(*id),
                _ => None,
            })
            .unwrap()
    };
    let answers = [
        (id_in(None), Ok(())),
        (id_in(Some("prod-us")), Ok(())),
        (id_in(Some("staging")), Err("forbidden".to_owned())),
    ];
    for (id, result) in answers {
        app.on_io(IoResult::Done { id, result });
    }
    let notice = app.status_notice().unwrap().1;
    assert_eq!(
        notice,
        "suspend 3: prod-eu 1 done; prod-us 1 done; staging 0 done, 1 failed \
         (suspend apps/web in staging: forbidden)"
    );
    let mut by_cluster: Vec<(Option<String>, Command)> = effects
        .iter()
        .map(|e| match e {
            Effect::In { cluster, effect } => match &**effect {
                Effect::Send { command, .. } => (Some(cluster.to_string()), command.clone()),
                e => panic!("{e:?}"),
            },
            Effect::Send { command, .. } => (None, command.clone()),
            e => panic!("{e:?}"),
        })
        .collect();
    by_cluster.sort_by(|a, b| a.0.cmp(&b.0));
    let web = k("apps", "web");
    assert_eq!(
        by_cluster,
        [
            (None, Command::Suspend(web.clone())),
            (Some("prod-us".into()), Command::Suspend(web.clone())),
            (Some("staging".into()), Command::Suspend(web)),
        ]
    );
}

#[test]
fn a_silent_cluster_is_marked_and_its_rows_kept_as_last_known_with_their_age() {
    let mut app = fleet_app();
    let us = Cluster::from("prod-us");
    let since = demo::now() - std::time::Duration::from_secs(4);
    app.on_fleet(
        &us,
        FleetUpdate::Link(Link::Unreachable {
            since,
            error: "no answer within 2s".into(),
        }),
    );
    // A later report of the same kind keeps when it began.
    app.on_fleet(
        &us,
        FleetUpdate::Link(Link::Unreachable {
            since: demo::now(),
            error: "no answer within 2s".into(),
        }),
    );
    let staging = Cluster::from("staging");
    app.on_fleet(
        &staging,
        FleetUpdate::Link(Link::Credentials {
            since: demo::now(),
            error: "credentials refused: Unauthorized".into(),
        }),
    );
    app.on_fleet(&staging, FleetUpdate::Views(Default::default()));
    // Its rows are still there.
    assert_eq!(rows_named(&app, "sessions"), [Some("prod-us".into())]);
    let screen = render(&app, 120, 22);
    let text = format!("{}", screen.backend());
    assert!(text.contains("unreachable since 4s ago"), "{text}");
    assert!(text.contains("credentials failed since"), "{text}");
    assert!(text.contains("? Failed (4s old)"), "{text}");
    insta::assert_snapshot!(screen.backend());
}

#[test]
fn writes_to_another_cluster_name_it_and_other_views_are_not_offered_there() {
    let mut app = fleet_app();
    let row = app
        .table
        .rows
        .iter()
        .position(|r| r.id.key.name == "sessions")
        .unwrap();
    app.table.selected = row;
    let effects = press(&mut app, "r");
    let [Effect::In { cluster, effect }] = effects.as_slice() else {
        panic!("{effects:?}");
    };
    assert_eq!(&**cluster, "prod-us");
    assert!(matches!(
        **effect,
        Effect::Send {
            command: Command::Reconcile(_),
            ..
        }
    ));
    assert!(
        app.status_notice()
            .unwrap()
            .1
            .contains("reconcile apps/sessions in prod-us"),
        "{:?}",
        app.status_notice()
    );
    // Values are edited through the dashboard's own session only.
    assert!(press(&mut app, "e").is_empty());
    assert!(app.editor.is_none());
    let notice = app.status_notice().unwrap().1;
    assert!(notice.contains("prod-us"), "{notice}");
}

#[test]
fn one_cluster_has_no_cluster_column_and_no_fleet_header() {
    let app = app(false);
    let text = format!("{}", render(&app, 120, 14).backend());
    assert!(!text.contains("CLUSTER"), "{text}");
}

#[test]
fn the_grid_shows_each_release_and_each_chart_across_clusters() {
    let mut app = fleet_app();
    assert!(app.run_command("grid").is_empty());
    let text = format!("{}", render(&app, 120, 22).backend());
    let web = text
        .lines()
        .find(|l| l.contains("apps/web "))
        .unwrap_or_else(|| panic!("{text}"));
    // The same release at three versions, one column per cluster.
    for cell in ["1.3.0 r3", "1.4.0 r4", "1.5.0 r5"] {
        assert!(web.contains(cell), "{cell}: {web}");
    }
    insta::assert_snapshot!("grid_by_release", render(&app, 120, 22).backend());
    // By chart: redis at two versions in two clusters.
    app.run_command("grid chart");
    let text = format!("{}", render(&app, 120, 22).backend());
    let redis = text
        .lines()
        .find(|l| l.contains("│redis") || l.contains(" redis "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        redis.contains("1.5.0") && redis.contains("1.2.0"),
        "{redis}"
    );
    insta::assert_snapshot!("grid_by_chart", render(&app, 120, 22).backend());
    // The table's filter narrows it; esc goes back to the table.
    press(&mut app, "/");
    for c in "podinfo".chars() {
        app.on_key(key(c));
    }
    app.on_key(code(KeyCode::Enter));
    let text = format!("{}", render(&app, 120, 22).backend());
    assert!(
        text.contains("podinfo") && !text.contains(" redis "),
        "{text}"
    );
    app.on_key(code(KeyCode::Esc));
    assert!(app.grid.is_none());
}

#[test]
fn chart_and_version_terms_find_where_a_version_runs() {
    let mut app = fleet_app();
    press(&mut app, "/");
    for c in "chart:podinfo version:<1.5".chars() {
        app.on_key(key(c));
    }
    app.on_key(code(KeyCode::Enter));
    let shown: Vec<String> = app.table.rows.iter().map(|r| r.id.to_string()).collect();
    // podinfo 1.3.0 (prod-eu) and 1.4.0 (prod-us); not 1.5.0 (staging), not redis.
    assert_eq!(shown, ["apps/web", "apps/web in prod-us"], "{shown:?}");
    // And in the grid, one screen: the table's filter applies there too.
    app.run_command("grid");
    let text = format!("{}", render(&app, 120, 22).backend());
    assert!(
        text.contains("1.4.0 r4") && !text.contains("1.5.0 r5"),
        "{text}"
    );
    // A constraint that does not parse matches nothing (rather than everything).
    app.table.filter = "version:<<1".into();
    app.run_command("ctx all");
    assert!(app.table.rows.is_empty());
}

#[test]
fn a_tile_says_who_holds_a_clusters_lease_and_what_flux_reconciles() {
    let mut app = fleet_app();
    let us = Cluster::from("prod-us");
    app.on_fleet(
        &us,
        FleetUpdate::LeaseHolder(Some("wheelhouse-7d9f-abcde".into())),
    );
    app.on_fleet(&us, FleetUpdate::Others(demo::others()));
    let text = format!("{}", render(&app, 160, 22).backend());
    let tile = text
        .lines()
        .find(|l| l.contains(" prod-us ") && !l.contains('│'))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        tile.contains("view only: reconciled by wheelhouse-7d9f-abcde"),
        "{tile}"
    );
    assert!(tile.contains("by Flux"), "{tile}");
    // The Lease let go: nobody.
    app.on_fleet(&us, FleetUpdate::LeaseHolder(None));
    let text = format!("{}", render(&app, 160, 22).backend());
    assert!(text.contains("none holds its Lease"), "{text}");
}

/// `T` across the fleet: every cluster's changes in one list with a CLUSTER column,
/// `cluster:` narrows it, another cluster's records are read whole with that cluster's
/// client, and `enter` on its change reads the diff there.
#[test]
fn the_timeline_spans_the_fleet_and_reads_each_change_in_its_own_cluster() {
    use crate::frontend::timeline::Kind;
    use crate::helm::release::Status;
    use k8s_openapi::jiff::Timestamp;
    let mut app = fleet_app();
    app.now = Timestamp::from_second(1_772_366_100).unwrap();
    let us = Cluster::from("prod-us");
    let mut others = crate::frontend::inventory::Others::default();
    for (revision, status, second) in [(1, Status::Superseded, 10), (2, Status::Deployed, 40)] {
        let mut s = demo::stored("apps", "cli", "hello", revision, status, "");
        s.created = Some(Timestamp::from_second(1_772_366_000 + second).unwrap());
        s.author = "helm CLI".into();
        others
            .revisions
            .insert((s.key.clone(), revision), Arc::new(s));
    }
    others.helm_listed = true;
    app.on_fleet(&us, FleetUpdate::Others(Arc::new(others)));
    let mut own = (*app.others).clone();
    let mut s = demo::stored("apps", "api", "api", 1, Status::Deployed, "");
    s.created = Some(Timestamp::from_second(1_772_366_020).unwrap());
    s.author = "wheelhouse".into();
    own.revisions.insert((s.key.clone(), 1), Arc::new(s));
    own.helm_listed = true;
    app.set_others(Arc::new(own));

    press(&mut app, "T");
    let effects = app.refresh_timeline();
    let asked = match effects.as_slice() {
        [Effect::ReadRevisions(records), audits @ ..] => {
            // The audit Events of each cluster, each asked of its own.
            let clusters: Vec<Option<&str>> = audits
                .iter()
                .map(|e| match e {
                    Effect::LoadAudit { cluster, .. } => cluster.as_deref(),
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(clusters, [None, Some("prod-us"), Some("staging")]);
            records.clone()
        }
        other => panic!("no records asked for: {other:?}"),
    };
    // Each record asked of its own cluster.
    let of = |cluster: Option<&str>, name: &str, version: i32| {
        asked
            .iter()
            .any(|r| r.cluster.as_deref() == cluster && r.key.name == name && r.version == version)
    };
    assert!(
        of(Some("prod-us"), "cli", 2) && of(Some("prod-us"), "cli", 1),
        "{asked:?}"
    );
    assert!(of(None, "api", 1), "{asked:?}");
    let screen = render(&app, 100, 12).backend().to_string();
    let lines: Vec<&str> = screen.lines().collect();
    let line_of = |text: &str| {
        lines
            .iter()
            .find(|l| l.contains(text))
            .copied()
            .unwrap_or_default()
    };
    assert!(line_of("AGE").contains("CLUSTER"), "{screen}");
    assert!(line_of("apps/cli").contains("prod-us"), "{screen}");
    // The dashboard's own cluster is named by its context.
    assert!(line_of("apps/api").contains(&app.context), "{screen}");
    // The record read whole in prod-us replaces its row there, and only there.
    let cli2 = asked
        .iter()
        .find(|r| r.key.name == "cli" && r.version == 2)
        .unwrap()
        .clone();
    let mut read = crate::frontend::timeline::Change {
        cluster: None,
        at: Timestamp::from_second(1_772_366_040).unwrap(),
        namespace: "apps".into(),
        release: "cli".into(),
        kind: Kind::Rollback,
        what: "revision 2 deployed (hello 0.2.0): Rollback to 1".into(),
        who: "helm CLI".into(),
        revision: Some(2),
    };
    app.on_io(IoResult::TimelineRevision(cli2, Some(vec![read.clone()])));
    app.refresh_timeline();
    read.cluster = Some("prod-us".into());
    let view = app.timeline.as_ref().unwrap();
    assert_eq!(view.current(), Some(&read), "the newest row, read whole");
    // prod-us's audit Events: a freeze there, in the list with its cluster.
    let freeze = crate::frontend::timeline::Change {
        cluster: None,
        at: Timestamp::from_second(1_772_366_030).unwrap(),
        namespace: "apps".into(),
        release: "web".into(),
        kind: Kind::Freeze,
        what: "HelmRelease web: frozen until 12:00 UTC: bad deploy".into(),
        who: "alice".into(),
        revision: None,
    };
    app.on_io(IoResult::Audited {
        cluster: Some(us.clone()),
        changes: Some(vec![freeze]),
    });
    app.refresh_timeline();
    let screen = render(&app, 100, 12).backend().to_string();
    assert!(
        screen
            .lines()
            .any(|l| l.contains("prod-us") && l.contains("freeze") && l.contains("alice")),
        "{screen}"
    );
    // `cluster:` narrows the list to one cluster.
    press(&mut app, "/cluster:prod-us");
    app.on_key(code(KeyCode::Enter));
    let view = app.timeline.as_ref().unwrap();
    assert_eq!(view.visible().len(), 3);
    assert!(
        view.visible()
            .iter()
            .all(|c| c.cluster.as_deref() == Some("prod-us"))
    );
    // `enter`: the diff is read in prod-us, with its own client.
    match app.on_key(code(KeyCode::Enter)).as_slice() {
        [Effect::LoadChanges { of, cluster, .. }] => {
            assert_eq!(cluster.as_deref(), Some("prod-us"));
            assert_eq!(
                *of,
                ChangesOf::Revisions {
                    release: k("apps", "cli"),
                    from: 1,
                    to: 2,
                    values: None,
                }
            );
        }
        other => panic!("no diff asked for: {other:?}"),
    }
}

/// On another cluster's row, the logs of its failing pod stream from that cluster, and a
/// history diff is read there; only the values editor stays the dashboard's own.
#[test]
fn logs_and_diffs_of_another_clusters_row_are_read_in_that_cluster() {
    let mut app = fleet_app();
    let us = Cluster::from("prod-us");
    let row = app
        .table
        .rows
        .iter()
        .position(|r| r.id.key.name == "sessions")
        .unwrap();
    app.table.selected = row;
    let effects = app.on_key(code(KeyCode::Enter));
    let key = app.detail.as_ref().unwrap().key.clone();
    assert_eq!(key.cluster.as_ref(), Some(&us), "{effects:?}");
    app.on_io(IoResult::Detail {
        key: key.clone(),
        data: Box::new(super::detail_data()),
    });
    match press(&mut app, "l").as_slice() {
        [Effect::StreamLogs(source)] => assert_eq!(source.cluster.as_ref(), Some(&us)),
        other => panic!("no log stream: {other:?}"),
    }
    press(&mut app, "\x1b");
    app.on_key(code(KeyCode::Esc));
    assert!(app.logs.is_none());
    // The History tab, the revision under the cursor shown whole: read in prod-us.
    app.on_io(IoResult::Detail {
        key,
        data: Box::new(super::kinds::revisions("redis")),
    });
    press(&mut app, "h");
    match app.on_key(code(KeyCode::Enter)).as_slice() {
        [Effect::LoadChanges { cluster, .. }] => assert_eq!(cluster.as_ref(), Some(&us)),
        other => panic!("no revision asked for: {other:?}"),
    }
}

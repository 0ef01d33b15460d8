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

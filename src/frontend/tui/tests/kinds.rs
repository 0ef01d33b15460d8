//! The table's three kinds of release: wheelhouse, Flux and helm CLI rows, each with the
//! actions its owner expects and no other.

use std::sync::Arc;

use super::*;
use crate::engine::stored_actions::StoredAction;
use crate::frontend::inventory::Kind;
use crate::frontend::inventory::flux::Request;
use crate::frontend::tui::view_model::{RevisionLine, State};
use crate::health::replicas::{Kind as WorkloadKind, WorkloadReplicas};

fn kinds_app() -> App {
    let mut app = app(false);
    app.set_others(demo::others());
    app.set_replicas(demo::others_replicas());
    app
}

fn select_kind(app: &mut App, name: &str, kind: Kind) {
    app.table.selected = app
        .table
        .rows
        .iter()
        .position(|r| r.id.key.name == name && r.id.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} row {name}"));
}

pub(super) fn revisions(chart: &str) -> DetailData {
    let line = |revision, status: &str, version: &str, description: &str| RevisionLine {
        revision,
        updated: Some(demo::now() - std::time::Duration::from_secs(3600 * (5 - revision) as u64)),
        status: status.into(),
        chart: format!("{chart}-{version}"),
        app_version: "0.9".into(),
        description: description.into(),
    };
    DetailData {
        revisions: Fetch::Loaded(vec![
            line(4, "deployed", "0.9.1", "Upgrade complete"),
            line(3, "superseded", "0.9.0", "Upgrade complete"),
            line(2, "superseded", "0.8.0", "Upgrade complete"),
            line(1, "superseded", "0.8.0", "Install complete"),
        ]),
        helm: Fetch::Loaded(HelmData {
            revision: 4,
            status: "deployed".into(),
            description: "Upgrade complete".into(),
            chart: format!("{chart}-0.9.1"),
            values: "replicas: 2\n".into(),
            manifest: "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: legacy\n"
                .into(),
        }),
        events: Fetch::Loaded(Vec::new()),
        workloads: Fetch::Loaded(Vec::new()),
        read_in: None,
    }
}

#[test]
fn three_kinds_share_one_table_and_a_managed_release_shows_once() {
    let app = kinds_app();
    let rows: Vec<(String, Kind)> = app
        .table
        .rows
        .iter()
        .map(|r| (r.id.key.to_string(), r.id.kind))
        .collect();
    // The stored records of apps/web (wheelhouse) and apps/payments (Flux) are not rows
    // of their own.
    for (name, kind) in [
        ("apps/web", Kind::Wheelhouse),
        ("apps/payments", Kind::Flux),
        ("data/search", Kind::Flux),
        ("apps/legacy", Kind::Helm),
        ("data/batch", Kind::Helm),
    ] {
        let n = rows.iter().filter(|(k, _)| k == name).count();
        assert_eq!(n, 1, "{name}: {rows:?}");
        assert!(rows.contains(&(name.to_owned(), kind)), "{name}: {rows:?}");
    }
    insta::assert_snapshot!(render(&app, 120, 20).backend());
}

#[test]
fn a_stored_release_is_ready_only_when_its_workloads_are() {
    let mut app = kinds_app();
    let legacy = |app: &App| {
        app.table
            .rows
            .iter()
            .find(|r| r.id.key.name == "legacy")
            .cloned()
            .unwrap()
    };
    let row = legacy(&app);
    assert_eq!(row.state, State::Progressing);
    assert_eq!(row.message, "Deployment/legacy: 1 of 2 replicas ready");
    let mut replicas = (*app.replicas).clone();
    replicas.insert(
        crate::health::replicas::ReleaseId::new("apps", "legacy"),
        crate::health::replicas::ReleaseReplicas {
            workloads: vec![WorkloadReplicas::counted(
                WorkloadKind::Deployment,
                "apps",
                "legacy",
                2,
                2,
            )],
        },
    );
    app.set_replicas(Arc::new(replicas));
    assert_eq!(legacy(&app).state, State::Ready);
}

#[test]
fn the_filter_matches_the_kind() {
    let mut app = kinds_app();
    app.on_key(key('/'));
    for c in "flux".chars() {
        app.on_key(key(c));
    }
    let kinds: Vec<Kind> = app.table.rows.iter().map(|r| r.id.kind).collect();
    assert_eq!(kinds, [Kind::Flux, Kind::Flux]);
}

#[test]
fn a_release_taken_over_by_a_helm_release_leaves_the_helm_rows() {
    let mut app = kinds_app();
    let helm_rows = |app: &App| {
        app.table
            .rows
            .iter()
            .filter(|r| r.id.kind == Kind::Helm)
            .map(|r| r.id.key.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(helm_rows(&app), ["legacy", "batch"]);
    // A wheelhouse HelmRelease for legacy appears: the stored row goes at once.
    let mut views = (*app.views).clone();
    let hr = demo::release("apps", "legacy", "legacy", None, 4, 60);
    views.insert(ReleaseKey::of(&hr), demo::view(hr, Default::default()));
    app.set_views(Arc::new(views));
    assert_eq!(helm_rows(&app), ["batch"]);
}

#[test]
fn flux_actions_go_through_flux_and_others_are_not_run() {
    let mut app = kinds_app();
    select_kind(&mut app, "payments", Kind::Flux);
    let flux = |effects: &[Effect]| -> Vec<Request> {
        effects
            .iter()
            .map(|e| match e {
                Effect::Flux { request, key, .. } => {
                    assert_eq!(key.to_string(), "apps/payments");
                    *request
                }
                other => panic!("not a Flux write: {other:?}"),
            })
            .collect()
    };
    assert_eq!(flux(&press(&mut app, "s")), [Request::Suspend]);
    assert_eq!(flux(&press(&mut app, "r")), [Request::Reconcile]);
    assert_eq!(flux(&press(&mut app, "F")), [Request::Force]);
    assert_eq!(flux(&press(&mut app, "R")), [Request::Reset]);
    // Not suspended: resume changes nothing.
    assert!(press(&mut app, "S").is_empty());
    // Cancel-wait asks, and says what a reconcile request does in Flux.
    assert!(press(&mut app, "c").is_empty());
    let Some(Overlay::Confirm(confirm)) = &app.overlay else {
        panic!("no question");
    };
    assert!(
        confirm.question.contains("CancelHealthCheckOnNewRevision"),
        "{}",
        confirm.question
    );
    assert_eq!(flux(&press(&mut app, "y")), [Request::Reconcile]);
    // Uninstall and values editing are not Flux actions.
    assert!(press(&mut app, "D").is_empty());
    assert!(app.overlay.is_none() && app.editor.is_none());
    press(&mut app, "e");
    assert!(app.editor.is_none());
    insta::assert_snapshot!(render(&app, 100, 12).backend());
}

#[test]
fn a_helm_release_is_rolled_back_to_the_picked_revision_after_a_question() {
    let mut app = kinds_app();
    select_kind(&mut app, "legacy", Kind::Helm);
    // Suspend does not exist for a helm CLI release.
    assert!(press(&mut app, "s").is_empty());
    assert!(
        app.status
            .feedback
            .last()
            .unwrap()
            .what
            .contains("not an action of helm releases")
    );
    let effects = app.on_key(code(KeyCode::Enter));
    let id = RowKey::new(Kind::Helm, ReleaseKey::new("apps", "legacy"));
    assert_eq!(effects, vec![Effect::LoadDetail(id.clone())]);
    app.on_io(IoResult::Detail {
        key: id,
        data: Box::new(revisions("legacy")),
    });
    // b before a revision is picked says where to pick one.
    assert!(press(&mut app, "b").is_empty() && app.overlay.is_none());
    assert!(
        matches!(&app.status.feedback.last().unwrap().progress, Progress::Failed(why) if why.contains("History tab"))
    );
    press(&mut app, "h");
    // Newest first; two down picks revision 2.
    press(&mut app, "jj");
    insta::assert_snapshot!("helm_history_picker", render(&app, 100, 16).backend());
    // b shows what the rollback changes, with the question under it.
    let effects = press(&mut app, "b");
    let [
        Effect::LoadChanges {
            request,
            of:
                ChangesOf::Revisions {
                    release,
                    from: 4,
                    to: 2,
                    values: None,
                },
            cluster: None,
        },
    ] = effects.as_slice()
    else {
        panic!("{effects:?}")
    };
    assert_eq!(release, &ReleaseKey::new("apps", "legacy"));
    let question = &app
        .changes
        .as_ref()
        .unwrap()
        .question
        .as_ref()
        .unwrap()
        .text;
    assert!(
        question.contains("apps/legacy (helm) to revision 2") && question.contains("legacy-0.8.0"),
        "{question}"
    );
    assert!(
        press(&mut app, "y").is_empty(),
        "not before the diff is there"
    );
    let (lines, summary) = crate::frontend::tui::diff::release_diff(
        &serde_json::json!({"replicas": 2}),
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: legacy\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n      - image: legacy:0.9.1\n",
        &serde_json::json!({"replicas": 1}),
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: legacy\nspec:\n  replicas: 1\n  template:\n    spec:\n      containers:\n      - image: legacy:0.8.0\n",
    );
    app.on_io(IoResult::Changes {
        request: *request,
        result: Ok((lines, format!("revision 4 → 2: {summary}"))),
    });
    insta::assert_snapshot!("helm_rollback_diff", render(&app, 100, 24).backend());
    let effects = press(&mut app, "y");
    assert!(
        matches!(
            effects.as_slice(),
            [Effect::Stored {
                action: StoredAction::Rollback { to: 2 },
                ..
            }]
        ),
        "{effects:?}"
    );
}

#[test]
fn a_flux_release_has_a_detail_view() {
    let mut app = kinds_app();
    select_kind(&mut app, "payments", Kind::Flux);
    let id = RowKey::new(Kind::Flux, ReleaseKey::new("apps", "payments"));
    app.on_key(code(KeyCode::Enter));
    let mut data = revisions("payments");
    data.workloads = Fetch::Loaded(vec![Workload {
        object: "Deployment/payments".into(),
        desired: 2,
        updated: 2,
        ready: 2,
        available: 2,
        failing: Vec::new(),
        held: 0,
        tracking: None,
    }]);
    app.on_io(IoResult::Detail {
        key: id,
        data: Box::new(data),
    });
    insta::assert_snapshot!(render(&app, 110, 30).backend());
}

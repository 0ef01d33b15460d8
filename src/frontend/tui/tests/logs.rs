//! A failing pod's logs from the detail view: streamed, followed, the previous
//! container's, searched.

use super::*;
use crate::frontend::tui::components::logs::{LogSource, StreamState};

fn open_logs(app: &mut App) -> LogSource {
    select(app, "api");
    app.on_key(code(KeyCode::Enter));
    app.on_io(IoResult::Detail {
        key: RowKey::wheelhouse(k("apps", "api")),
        data: Box::new(detail_data()),
    });
    let effects = press(app, "l");
    match effects.as_slice() {
        [Effect::StreamLogs(source)] => source.clone(),
        other => panic!("no log stream: {other:?}"),
    }
}

#[test]
fn l_streams_the_first_failing_pods_logs_and_draws_them_as_they_come() {
    let mut app = app(false);
    let source = open_logs(&mut app);
    assert_eq!(source.pod, "api-6c9f-2xk");
    assert_eq!(source.namespace, "apps");
    assert!(source.follow && !source.previous);
    app.on_io(IoResult::LogLines {
        stream: source.stream,
        lines: (1..=40)
            .map(|i| format!("2026-03-01T11:59:{i:02}Z level=info msg=\"request {i}\""))
            .chain(["2026-03-01T12:00:00Z level=error msg=\"db connection refused\"".into()])
            .collect(),
    });
    // Lines of a stream the view no longer shows are dropped.
    app.on_io(IoResult::LogLines {
        stream: source.stream + 100,
        lines: vec!["stale".into()],
    });
    let logs = app.logs.as_ref().unwrap();
    assert_eq!(logs.lines.len(), 41);
    assert_eq!(logs.state, StreamState::Open);
    insta::assert_snapshot!(render(&app, 100, 16).backend());
}

#[test]
fn p_shows_the_previous_container_and_esc_stops_the_stream() {
    let mut app = app(false);
    let first = open_logs(&mut app);
    let effects = press(&mut app, "p");
    let [Effect::StreamLogs(previous)] = effects.as_slice() else {
        panic!("{effects:?}");
    };
    assert!(previous.previous && !previous.follow);
    assert_ne!(previous.stream, first.stream);
    app.on_io(IoResult::LogEnd {
        stream: previous.stream,
        failed: None,
    });
    assert_eq!(app.logs.as_ref().unwrap().state, StreamState::Ended);
    assert_eq!(app.on_key(code(KeyCode::Esc)), vec![Effect::StopLogs]);
    assert!(app.logs.is_none() && app.detail.is_some());
}

#[test]
fn search_jumps_to_matching_lines() {
    let mut app = app(false);
    let source = open_logs(&mut app);
    app.on_io(IoResult::LogLines {
        stream: source.stream,
        lines: (1..=100)
            .map(|i| {
                if i % 30 == 0 {
                    format!("ERROR {i}")
                } else {
                    format!("ok {i}")
                }
            })
            .collect(),
    });
    press(&mut app, "/error");
    app.on_key(code(KeyCode::Enter));
    let first = app.logs.as_ref().unwrap().top;
    press(&mut app, "n");
    let second = app.logs.as_ref().unwrap().top;
    assert!(
        first.is_some() && second.is_some() && first != second,
        "{first:?} {second:?}"
    );
    let top = second.unwrap();
    assert!(app.logs.as_ref().unwrap().lines[top].starts_with("ERROR"));
}

#[test]
fn a_release_without_a_failing_pod_says_so() {
    let mut app = app(false);
    select(&mut app, "web");
    app.on_key(code(KeyCode::Enter));
    let mut data = detail_data();
    data.workloads = Fetch::Loaded(Vec::new());
    app.on_io(IoResult::Detail {
        key: RowKey::wheelhouse(k("apps", "web")),
        data: Box::new(data),
    });
    assert!(press(&mut app, "l").is_empty());
    assert!(app.logs.is_none());
    assert!(matches!(
        &app.status.feedback.last().unwrap().progress,
        Progress::Failed(why) if why.contains("no failing pod")
    ));
}

/// A remote release's (`spec.kubeConfig`) pods are streamed from the cluster its records
/// were read in, and the detail says which context that is.
#[test]
fn a_remote_releases_logs_come_from_the_cluster_its_records_were_read_in() {
    let mut app = app(false);
    select(&mut app, "api");
    app.on_key(code(KeyCode::Enter));
    let mut data = detail_data();
    data.read_in = Some(crate::frontend::tui::view_model::ReadIn {
        cluster: Some("prod-eu".into()),
        context: "prod-eu".into(),
        via: "kubeConfig Secret apps/prod".into(),
    });
    app.on_io(IoResult::Detail {
        key: RowKey::wheelhouse(k("apps", "api")),
        data: Box::new(data),
    });
    let screen = render(&app, 120, 40).backend().to_string();
    assert!(
        screen.contains("read in context prod-eu, the cluster of its kubeConfig Secret apps/prod"),
        "{screen}"
    );
    match press(&mut app, "l").as_slice() {
        [Effect::StreamLogs(source)] => {
            assert_eq!(source.cluster.as_deref(), Some("prod-eu"));
            assert_eq!(source.pod, "api-6c9f-2xk");
        }
        other => panic!("no log stream: {other:?}"),
    }
}

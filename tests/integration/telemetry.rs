//! The controller as operators watch it (issue #11, point 5): `wheelhouse controller
//! --metrics-addr --health-addr` on the local control plane, scraped over HTTP while it
//! installs, supersedes a stuck wait and fails fast; and its reconciles logged inside a
//! span that names the release.

use crate::support;

use std::time::Duration;

use kube::Api;
use kube::api::PostParams;
use support::controller::Controller;
use support::engine::{is, set_values, wait_for, waiting_on, webapp};
use support::{PATIENCE, TestNamespace, client, install_crd};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wheelhouse::api::HelmRelease;

/// A free port on loopback (the kernel picks it; released for the controller to bind).
fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// `GET path` over plain HTTP/1.1: (status code, body).
async fn get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

async fn until_ok(addr: &str, path: &str, controller: &Controller) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Ok((200, _)) = get(addr, path).await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path} never answered 200; controller log:\n{}",
            controller.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The value of the sample `series` (exact name and labels) in a scrape.
fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

#[tokio::test]
async fn metrics_health_and_reconcile_spans_are_served_as_a_controller_should() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "telemetry").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let (metrics, health) = (free_addr(), free_addr());
    let controller = Controller::start(&[
        "--namespace",
        &ns.name,
        "--lease-namespace",
        &ns.name,
        "--metrics-addr",
        &metrics,
        "--health-addr",
        &health,
    ]);
    until_ok(&health, "/healthz", &controller).await;
    until_ok(&health, "/readyz", &controller).await;
    assert_eq!(get(&health, "/nope").await.unwrap().0, 404);

    // An install, then a stuck upgrade superseded by a fix.
    api.create(
        &PostParams::default(),
        &webapp(
            "web",
            serde_json::json!({"timeout": "5m", "values": {"replicaCount": 1}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    set_values(
        &api,
        "web",
        serde_json::json!({"replicaCount": 1, "behavior": "never-ready"}),
    )
    .await;
    waiting_on(&api, "web", 2).await;
    set_values(
        &api,
        "web",
        serde_json::json!({"replicaCount": 1, "behavior": ""}),
    )
    .await;
    wait_for(&api, "web", "the fix Ready", |h| {
        is(h, "Ready", "True", "UpgradeSucceeded")
            && h.status.as_ref().is_some_and(|s| s.history[0].version == 3)
    })
    .await;

    // A crash-looping install fails fast.
    api.create(
        &PostParams::default(),
        &webapp(
            "crash",
            serde_json::json!({"timeout": "5m", "values": {"replicaCount": 1, "behavior": "crash-loop"}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "crash", "failed fast", |h| {
        is(h, "Ready", "False", "InstallFailed")
    })
    .await;

    // The failed reconcile is counted when it ends (after its remediation).
    let failure =
        r#"controller_runtime_reconcile_total{controller="helmrelease",result="failure"}"#;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let scrape = loop {
        let (status, scrape) = get(&metrics, "/metrics").await.unwrap();
        assert_eq!(status, 200);
        if sample(&scrape, failure).is_some() || tokio::time::Instant::now() > deadline {
            break scrape;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let ns_name = &ns.name;
    let count = |series: String| {
        sample(&scrape, &series).unwrap_or_else(|| panic!("no {series} in\n{scrape}"))
    };
    assert!(
        count(format!(
            r#"gotk_reconcile_duration_seconds_count{{kind="HelmRelease",name="web",namespace="{ns_name}"}}"#
        )) >= 3.0
    );
    assert!(
        count(
            r#"controller_runtime_reconcile_total{controller="helmrelease",result="success"}"#
                .into()
        ) >= 2.0
    );
    assert!(
        count(
            r#"controller_runtime_reconcile_total{controller="helmrelease",result="failure"}"#
                .into()
        ) >= 1.0
    );
    assert!(count(r#"wheelhouse_wait_duration_seconds_count{result="ready"}"#.into()) >= 2.0);
    assert_eq!(
        count(r#"wheelhouse_wait_cancellations_total{trigger="new_revision"}"#.into()),
        1.0
    );
    assert_eq!(
        count("wheelhouse_trigger_to_fix_applied_seconds_count".into()),
        1.0
    );
    assert!(
        scrape
            .lines()
            .any(|l| l.starts_with("wheelhouse_fail_fast_total{reason=")),
        "{scrape}"
    );
    assert_eq!(count("wheelhouse_queue_depth".into()), 0.0);
    // The crash-looping release may still be remediating: only that the gauge is there.
    count("wheelhouse_reconciles_in_flight".into());

    // Each reconcile is a span carrying the release.
    let release = format!("{ns_name}/web");
    let log = controller.log();
    assert!(
        log.lines().any(|l| l.contains(r#""name":"reconcile""#)
            && l.contains(&format!(r#""release":"{release}""#))
            && l.contains(r#""span":"#)),
        "no log line inside a reconcile span of {release}:\n{log}"
    );
    drop(controller);
    ns.delete().await;
}

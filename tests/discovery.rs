//! A degraded discovery (an aggregated API whose backend is down, a crashed
//! metrics-server) never stops shipping fixes: releases render as the helm CLI renders on
//! the same cluster, nothing is pruned on account of what discovery left out, a release
//! that needs the missing group is told which APIService to look at, and the release that
//! owns the broken APIService can be upgraded to fix it. Its own test binary: the broken
//! APIService affects every render on the cluster while it exists, and cargo runs test
//! binaries one at a time.

mod support;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kube::api::PostParams;
use support::discovery::{DeadGroup, apiservices};
use support::engine::{annotate, cause_retries, events_of, helm, release, set_values, wait_for};
use support::{TestNamespace, client, install_crd};
use wheelhouse::api::HelmRelease;

const BROKEN: &str = "v1.broken.wheelhouse.dev";

/// Deletes the test's APIService when the test ends, pass or fail. With kubectl:
/// a drop cannot wait on the test's own (single-threaded) runtime.
struct Cleanup;

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::process::Command::new(support::testbin().join("kubectl"))
            .arg("--kubeconfig")
            .arg(support::kubeconfig_path())
            .args(["delete", "apiservice", BROKEN, "--ignore-not-found"])
            .output();
    }
}

/// The Ready condition's message speaks of the HelmRelease's current generation.
fn settled(h: &HelmRelease, reason: &str) -> bool {
    h.condition("Ready")
        .is_some_and(|c| c.reason == reason && c.observed_generation == h.metadata.generation)
}

#[tokio::test]
async fn a_dead_aggregated_api_never_stops_shipping_fixes() {
    let client = client().await;
    install_crd(&client).await;
    let ns = TestNamespace::new(&client, "discovery").await;
    let (engine, metrics) =
        support::engine::start_with_metrics(&client, &ns.name, "discovery-engine").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    api.create(
        &PostParams::default(),
        &release(
            "web",
            "shared",
            serde_json::json!({"values": {"loadBalancer": true}}),
        ),
    )
    .await
    .unwrap();
    wait_for(&api, "web", "installed", |h| settled(h, "InstallSucceeded")).await;

    // A release of wheelhouse's registers an APIService whose backend does not exist: its
    // group drops out of discovery for the whole cluster.
    let _cleanup = Cleanup;
    api.create(
        &PostParams::default(),
        &release("metrics", "apiservice-owner", serde_json::json!({})),
    )
    .await
    .unwrap();
    wait_for(&api, "metrics", "installed", |h| {
        settled(h, "InstallSucceeded")
    })
    .await;
    let deadline = std::time::Instant::now() + support::PATIENCE;
    while wheelhouse::helm::render::unavailable_groups(&client)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the APIService never went stale"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    // The helm CLI installs and upgrades on the same cluster at the same time ...
    let shared = support::engine::chart("shared");
    helm(&ns.name, &["install", "cli", &shared]);
    helm(&ns.name, &["upgrade", "cli", &shared, "--set", "value=two"]);
    // ... and so does wheelhouse. The render dropped the LoadBalancer Service; with
    // discovery incomplete it stays, and status and an Event say why.
    set_values(
        &api,
        "web",
        serde_json::json!({"value": "two", "loadBalancer": false}),
    )
    .await;
    let upgraded = wait_for(&api, "web", "upgraded", |h| settled(h, "UpgradeSucceeded")).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns.name);
    assert_eq!(
        cms.get("web-config").await.unwrap().data.unwrap()["value"],
        "two"
    );
    let services: Api<Service> = Api::namespaced(client.clone(), &ns.name);
    assert!(
        services.get_opt("web-lb").await.unwrap().is_some(),
        "not pruned"
    );
    let message = upgraded.condition("Ready").unwrap().message.clone();
    assert!(
        message.contains("left in place, not pruned")
            && message.contains(
                "broken.wheelhouse.dev/v1 unavailable: APIService v1.broken.wheelhouse.dev"
            )
            && message.contains("web-lb"),
        "{message}"
    );
    let events = events_of(&client, &ns.name, "web").await;
    assert!(
        events.iter().any(|e| e.starts_with("DiscoveryIncomplete")),
        "{events:?}"
    );

    // A release whose own manifest needs the missing group is told which APIService.
    api.create(
        &PostParams::default(),
        &release("widget", "needs-broken", serde_json::json!({})),
    )
    .await
    .unwrap();
    let failed = wait_for(&api, "widget", "InstallFailed", |h| {
        settled(h, "InstallFailed")
    })
    .await;
    let message = failed.condition("Ready").unwrap().message.clone();
    assert!(
        message.contains("APIService v1.broken.wheelhouse.dev"),
        "{message}"
    );
    // The cluster's failure, not the release's: no retry used (the counters are written
    // with the condition), so it never stalls and is tried again.
    assert!(message.contains("costs no retry"), "{message}");
    let status = failed.status.as_ref().unwrap();
    assert_eq!(
        (status.failures, status.install_failures),
        (0, 0),
        "{status:#?}"
    );
    assert!(
        failed
            .condition("Stalled")
            .is_none_or(|c| c.status != "True")
    );

    // The release that owns the broken APIService is upgraded to fix it (the APIService
    // goes: pruning it is the fix), and discovery is whole again.
    set_values(&api, "metrics", serde_json::json!({"apiService": false})).await;
    wait_for(&api, "metrics", "fixed", |h| settled(h, "UpgradeSucceeded")).await;
    assert!(
        apiservices(&client)
            .get_opt(BROKEN)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        wheelhouse::helm::render::unavailable_groups(&client)
            .await
            .unwrap()
            .is_empty()
    );

    // With discovery whole, the next upgrade prunes what was kept.
    annotate(
        &api,
        "web",
        "reconcile.wheelhouse.dev/forceAt",
        "discovery-whole",
    )
    .await;
    wait_for(&api, "web", "the kept Service pruned", |h| {
        h.status
            .as_ref()
            .is_some_and(|s| s.last_handled_force_at.as_deref() == Some("discovery-whole"))
            && settled(h, "UpgradeSucceeded")
    })
    .await;
    assert!(services.get_opt("web-lb").await.unwrap().is_none());

    // Discovery heals while a release is held up by it: the release is tried again as
    // soon as the engine sees the group served, not when its backoff runs out. An
    // APIService whose backend is gone ...
    let dead = DeadGroup::create(&client, "healing.wheelhouse.dev", &ns.name).await;
    // ... holds up a release that needs its group.
    api.create(
        &PostParams::default(),
        &release(
            "gadget",
            "needs-broken",
            serde_json::json!({"values": {"group": "healing.wheelhouse.dev"}}),
        ),
    )
    .await
    .unwrap();
    let held = wait_for(&api, "gadget", "held up by discovery", |h| {
        settled(h, "InstallFailed")
    })
    .await;
    let message = held.condition("Ready").unwrap().message.clone();
    assert!(message.contains("costs no retry"), "{message}");
    let woken_before = cause_retries(&metrics, "cluster_healed");

    // The cluster heals: the dead APIService goes, and the API server serves the group
    // from the CRD (the APIService it registers for a CRD group).
    let healed = std::time::Instant::now();
    dead.heal(&client).await;
    wait_for(&api, "gadget", "installed once discovery healed", |h| {
        settled(h, "InstallSucceeded")
    })
    .await;
    println!(
        "discovery healed -> release Ready in {:.2} s",
        healed.elapsed().as_secs_f64()
    );
    // Woken by the healing, not by its backoff's clock.
    assert!(
        cause_retries(&metrics, "cluster_healed") > woken_before,
        "{}",
        metrics.encode()
    );
    drop(engine);
    ns.delete().await;
}

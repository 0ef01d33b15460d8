//! Drift benchmark against the local control plane: `tests/bench.sh drift`. With
//! WHEELHOUSE_BENCH_RELEASES releases (default 300) reconciled by one engine, it measures
//! over WHEELHOUSE_BENCH_RUNS releases (default 10):
//!   - `kubectl scale` of a release's Deployment (a patch of its scale subresource by
//!     another field manager, accepted by the API server) -> Drifted=True in the
//!     HelmRelease's status;
//!   - the same with driftDetection enabled -> the replicas restored;
//!   - `helm rollback` by hand (the helm CLI returned) -> ExternalRevision in status.
//!
//! Target (issue #21): edit -> Drifted under 2 s.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use support::engine::{self as eng, is, webapp};
use support::figures::{self, row};
use support::{TestNamespace, client, install_crd};
use wheelhouse::api::HelmRelease;

async fn wait_hr(
    api: &Api<HelmRelease>,
    name: &str,
    what: &str,
    pred: impl Fn(&HelmRelease) -> bool,
) {
    eng::poll_hr(api, name, what, Duration::from_secs(600), pred).await;
}

/// Scales `name`'s Deployment to `replicas` as `kubectl scale` does: through the scale
/// subresource, as another field manager (recorded without a time in managedFields).
async fn scale(client: &Client, ns: &str, name: &str, replicas: i32) -> Instant {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .patch_scale(
            name,
            &PatchParams {
                field_manager: Some("kubectl".into()),
                ..Default::default()
            },
            &Patch::Merge(serde_json::json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
    Instant::now()
}

async fn replicas(client: &Client, ns: &str, name: &str) -> i32 {
    Api::<Deployment>::namespaced(client.clone(), ns)
        .get(name)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.replicas)
        .unwrap_or_default()
}

#[tokio::main]
async fn main() {
    let runs = figures::runs(10);
    let releases: usize = std::env::var("WHEELHOUSE_BENCH_RELEASES")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(300)
        .max(runs * 2);
    let client = client().await;
    install_crd(&client).await;
    println!(
        "Drift benchmark: {releases} releases on one engine, {runs} runs each, local control plane (kwok node), wheelhouse {}",
        env!("CARGO_PKG_VERSION")
    );
    let ns = TestNamespace::new(&client, "bench-drift").await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let engine = eng::start(&client, &ns.name).await;
    let started = Instant::now();
    for i in 0..releases {
        // The first `runs` correct drift; the rest only report it.
        let mode = if i < runs { "enabled" } else { "warn" };
        let spec =
            serde_json::json!({"values": {"replicaCount": 1}, "driftDetection": {"mode": mode}});
        api.create(&PostParams::default(), &webapp(&format!("r{i}"), spec))
            .await
            .unwrap();
    }
    for i in 0..releases {
        wait_hr(&api, &format!("r{i}"), "installed", |h| {
            is(h, "Ready", "True", "InstallSucceeded")
        })
        .await;
    }
    println!(
        "  {releases} releases installed and Ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut reported = Vec::new();
    let mut corrected = Vec::new();
    let mut external = Vec::new();
    for run in 0..runs {
        let warn = format!("r{}", runs + run);
        let at = scale(&client, &ns.name, &warn, 3).await;
        wait_hr(&api, &warn, "Drifted", |h| {
            h.condition("Drifted").is_some_and(|c| c.status == "True")
        })
        .await;
        reported.push(at.elapsed());

        let enabled = format!("r{run}");
        let at = scale(&client, &ns.name, &enabled, 3).await;
        loop {
            if replicas(&client, &ns.name, &enabled).await == 1 {
                break;
            }
            assert!(
                at.elapsed() < Duration::from_secs(120),
                "{enabled}: never corrected"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        corrected.push(at.elapsed());

        // helm rollback by hand needs a second revision first.
        let other = format!("r{}", 2 * runs + run);
        if 2 * runs + run < releases {
            api.patch(
                &other,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({"spec": {"values": {"message": "two"}}})),
            )
            .await
            .unwrap();
            wait_hr(&api, &other, "upgraded", |h| {
                is(h, "Ready", "True", "UpgradeSucceeded")
                    && h.status
                        .as_ref()
                        .is_some_and(|s| s.history.first().is_some_and(|r| r.version == 2))
            })
            .await;
            eng::helm(&ns.name, &["rollback", &other, "1"]);
            let at = Instant::now();
            wait_hr(&api, &other, "ExternalRevision", |h| {
                is(h, "Ready", "False", "ExternalRevision")
            })
            .await;
            external.push(at.elapsed());
        }
    }
    println!();
    println!("With {releases} releases on the engine:");
    let median = row("  kubectl scale -> Drifted=True (warn)", reported);
    row("  kubectl scale -> replicas restored (enabled)", corrected);
    if !external.is_empty() {
        row(
            "  helm rollback by hand returned -> ExternalRevision",
            external,
        );
    }
    println!(
        "  target: edit -> Drifted under 2 s; median {:.2} s ({:.0}x under)",
        median.as_secs_f64(),
        2.0 / median.as_secs_f64()
    );
    engine.handle.shutdown();
    ns.delete().await;
}

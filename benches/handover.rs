//! Handover and healing benchmark (issue "Keeps shipping fixes on a degraded cluster")
//! against the local control plane; run it with `tests/bench.sh handover`. For N runs
//! (WHEELHOUSE_BENCH_RUNS, default 3) it measures:
//!   - a rolling restart: two real `wheelhouse controller` processes, the leader stopped
//!     with SIGTERM, and in the same run with kill -9 (the baseline: nothing released,
//!     the standby waits for the Lease to expire): from the signal to the standby holding
//!     the Lease, and to a release created at the signal being Ready;
//!   - a dead aggregated API healing: a release held up because discovery cannot serve
//!     the group its manifest needs; from the dead APIService going to the release Ready,
//!     and whether the engine was woken by the healing (not by its 5 s backoff).

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::{Api, Client};
use support::controller::Controller;
use support::discovery::DeadGroup;
use support::engine::{self as eng, is, release, webapp};
use support::figures::{self, row};
use support::{TestNamespace, client, install_crd};
use wheelhouse::api::HelmRelease;

const LEASE: &str = "wheelhouse-engine-ns";

#[derive(Clone, Copy)]
enum Stop {
    Term,
    Kill,
}

async fn poll_until<F: std::future::Future<Output = bool>>(
    what: &str,
    mut done: impl FnMut() -> F,
) {
    let limit = Instant::now() + Duration::from_secs(120);
    while !done().await {
        assert!(Instant::now() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn holder(api: &Api<Lease>) -> Option<String> {
    api.get_opt(LEASE)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
}

/// One rolling restart: (signal -> standby holds the Lease, signal -> new release Ready).
async fn restart(client: &Client, stop: Stop) -> (Duration, Duration) {
    let ns = TestNamespace::new(client, "bench-handover").await;
    let scope = ["--namespace", &ns.name, "--lease-namespace", &ns.name];
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns.name);
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let mut first = Controller::start(&scope);
    poll_until("a leader", || async { holder(&leases).await.is_some() }).await;
    let leader = holder(&leases).await.unwrap();
    let second = Controller::start(&scope);
    poll_until("the standby", || async {
        second.log().contains("standing by")
    })
    .await;

    let signalled = Instant::now();
    match stop {
        Stop::Term => first.terminate(),
        Stop::Kill => first.kill(),
    }
    api.create(
        &PostParams::default(),
        &webapp("web", serde_json::json!({})),
    )
    .await
    .unwrap();
    poll_until("the standby to take the Lease", || async {
        holder(&leases).await.is_some_and(|h| h != leader)
    })
    .await;
    let lease = signalled.elapsed();
    poll_until("the release Ready", || async {
        api.get_opt("web")
            .await
            .unwrap()
            .is_some_and(|h| is(&h, "Ready", "True", "InstallSucceeded"))
    })
    .await;
    let ready = signalled.elapsed();
    drop(first);
    drop(second);
    ns.delete().await;
    (lease, ready)
}

/// One healing: (dead APIService deleted -> release Ready, woken by the healing).
async fn healing(client: &Client, run: usize) -> (Duration, bool) {
    let ns = TestNamespace::new(client, "bench-heal").await;
    let (engine, metrics) =
        eng::start_with_metrics(client, &ns.name, &format!("bench-heal-{run}")).await;
    let group = format!("heal{run}.bench.wheelhouse.dev");
    let dead = DeadGroup::create(client, &group, &ns.name).await;
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    api.create(
        &PostParams::default(),
        &release(
            "gadget",
            "needs-broken",
            serde_json::json!({"values": {"group": group}}),
        ),
    )
    .await
    .unwrap();
    eng::wait_for(&api, "gadget", "held up by discovery", |h| {
        is(h, "Ready", "False", "InstallFailed")
    })
    .await;
    let before = eng::cause_retries(&metrics, "cluster_healed");
    let healed = Instant::now();
    dead.heal(client).await;
    eng::wait_for(&api, "gadget", "Ready once healed", |h| {
        is(h, "Ready", "True", "InstallSucceeded")
    })
    .await;
    let took = healed.elapsed();
    let woken = eng::cause_retries(&metrics, "cluster_healed") > before;
    drop(engine);
    drop(dead);
    ns.delete().await;
    (took, woken)
}

#[tokio::main]
async fn main() {
    let runs = figures::runs(3);
    let client = client().await;
    install_crd(&client).await;
    println!(
        "Handover and healing benchmark: {runs} runs each, local control plane, wheelhouse {}",
        env!("CARGO_PKG_VERSION")
    );

    let mut samples = [(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
    for _ in 0..runs {
        for (i, stop) in [Stop::Term, Stop::Kill].into_iter().enumerate() {
            let (lease, ready) = restart(&client, stop).await;
            samples[i].0.push(lease);
            samples[i].1.push(ready);
        }
    }
    let [(term_lease, term_ready), (kill_lease, kill_ready)] = samples;
    println!();
    println!("Rolling restart, a standby running (a release created at the signal):");
    let a = row(
        "  SIGTERM of the leader: signal -> standby holds the Lease",
        term_lease,
    );
    let b = row(
        "  SIGTERM of the leader: signal -> release Ready",
        term_ready,
    );
    let c = row(
        "  kill -9 of the leader: signal -> standby holds the Lease",
        kill_lease,
    );
    let d = row(
        "  kill -9 of the leader: signal -> release Ready",
        kill_ready,
    );
    println!(
        "  ratio kill -9 / SIGTERM: Lease {:.1}x, Ready {:.1}x",
        c.as_secs_f64() / a.as_secs_f64(),
        d.as_secs_f64() / b.as_secs_f64()
    );

    let mut took = Vec::new();
    let mut woken = 0;
    for run in 0..runs {
        let (t, w) = healing(&client, run).await;
        took.push(t);
        woken += usize::from(w);
    }
    println!();
    println!("A dead aggregated API heals (release held up by it, backoff 5 s):");
    row("  dead APIService deleted -> release Ready", took);
    println!("  woken by the healing (not the backoff): {woken} of {runs} runs");
}

//! MTTR benchmark (docs/design.md, "Numbers that matter") against the local control plane; run it with
//! `tests/bench.sh mttr`. For N runs it measures, with cancellation on and (in the same
//! run) off:
//!   - a release stuck on never-ready pods (timeout 5m; 20s for the baseline, which
//!     would otherwise take 5 minutes a run) gets a fix pushed: time from the trigger
//!     (the patch accepted by the API server) to the start of the fix's apply, and to
//!     Ready;
//!   - fail-fast: from the first crash-looping pod of a new revision to the release
//!     reported failed, with fail-fast on and off (timeout 20s);
//!   - the table of fixes by every carrier (`mttr_table`), idle, with Flux beside it.

#[path = "../tests/support/mod.rs"]
mod support;
#[path = "mttr_table/mod.rs"]
mod table;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use support::engine::{self as eng, is, webapp};
use support::figures::{self, row};
use support::{TestNamespace, client, install_crd};
use wheelhouse::api::HelmRelease;
use wheelhouse::engine::{EngineHandle, Phase, ReleaseKey};

fn values(v: serde_json::Value) -> Patch<serde_json::Value> {
    Patch::Merge(serde_json::json!({"spec": {"values": v}}))
}

async fn wait_hr(
    api: &Api<HelmRelease>,
    name: &str,
    what: &str,
    pred: impl Fn(&HelmRelease) -> bool,
) {
    eng::poll_hr(api, name, what, Duration::from_secs(120), pred).await;
}

/// Watches the engine's live state from now on and reports when the worker for `key`
/// starts applying a revision newer than `after` (phase Upgrading; if that moment was
/// coalesced away, the first sight of the new revision's wait, a slight overestimate).
/// The baseline's fix supersedes nothing, so it has no [`wheelhouse::engine::FixTimeline`].
fn apply_started(
    handle: &EngineHandle,
    key: ReleaseKey,
    after: i32,
) -> tokio::task::JoinHandle<Instant> {
    let mut live = handle.live();
    live.borrow_and_update();
    tokio::spawn(async move {
        loop {
            live.changed().await.unwrap();
            let state = live
                .borrow_and_update()
                .get(&key)
                .cloned()
                .unwrap_or_default();
            let newer_wait = state.wait.as_ref().is_some_and(|w| w.revision > after);
            if state.phase == Phase::Upgrading || newer_wait {
                return Instant::now();
            }
        }
    })
}

/// Waits for the worker of `key` to write the first object of a fix triggered after
/// `since`, and returns that fix's steps.
async fn fix_written(
    handle: &EngineHandle,
    key: &ReleaseKey,
    since: Instant,
) -> wheelhouse::engine::FixTimeline {
    let mut live = handle.live();
    loop {
        let fix = live.borrow_and_update().get(key).and_then(|s| s.fix);
        if let Some(fix) = fix.filter(|f| f.triggered >= since && f.first_written.is_some()) {
            return fix;
        }
        live.changed().await.unwrap();
    }
}

struct Sample {
    /// From the patch accepted by the API server.
    to_apply: Duration,
    to_ready: Duration,
    /// From the fix's watch event reaching the worker (with cancellation on).
    steps: Option<Steps>,
}

/// From the fix's watch event to each step.
struct Steps {
    prepared: Duration,
    rendered: Duration,
    apply_started: Duration,
    first_written: Duration,
    ready: Duration,
}

async fn stuck_then_fixed(client: &Client, cancel: bool, runs: usize) -> Vec<Sample> {
    let ns = TestNamespace::new(client, if cancel { "mttr-on" } else { "mttr-off" }).await;
    let (mut config, _cache) = eng::config(&ns.name, "mttr");
    config.cancel_on_new_revision = cancel;
    let handle = wheelhouse::engine::start(client.clone(), config).unwrap();
    let mut role = handle.role();
    role.wait_for(|r| *r == wheelhouse::engine::Role::Leader)
        .await
        .unwrap();
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let timeout = if cancel { "5m" } else { "20s" };
    let mut samples = Vec::new();
    for i in 0..runs {
        let name = format!("web-{i}");
        let key = ReleaseKey {
            namespace: ns.name.clone(),
            name: name.clone(),
        };
        api.create(
            &PostParams::default(),
            &webapp(
                &name,
                serde_json::json!({"timeout": timeout, "values": {"replicaCount": 1}}),
            ),
        )
        .await
        .unwrap();
        wait_hr(&api, &name, "install", |h| {
            is(h, "Ready", "True", "InstallSucceeded")
        })
        .await;
        api.patch(
            &name,
            &PatchParams::default(),
            &values(serde_json::json!({"behavior": "never-ready"})),
        )
        .await
        .unwrap();
        wait_hr(&api, &name, "stuck wait", |h| {
            h.status
                .as_ref()
                .and_then(|s| s.wait.as_ref())
                .is_some_and(|w| w.revision == 2)
        })
        .await;
        tokio::time::sleep(Duration::from_millis(500)).await;

        let applying = (!cancel).then(|| apply_started(&handle, key.clone(), 2));
        let sent = Instant::now();
        let fix = values(serde_json::json!({"behavior": ""}));
        api.patch(&name, &PatchParams::default(), &fix)
            .await
            .unwrap();
        // The trigger is the moment the API server accepted the fix.
        let trigger = Instant::now();
        let (apply_started, steps) = match applying {
            Some(applying) => (applying.await.unwrap(), None),
            None => {
                let steps = fix_written(&handle, &key, sent).await;
                (
                    steps.apply_started.expect("the fix was applied"),
                    Some(steps),
                )
            }
        };
        wait_hr(&api, &name, "fix ready", |h| {
            is(h, "Ready", "True", "UpgradeSucceeded")
                && h.status.as_ref().unwrap().history[0].version == 3
        })
        .await;
        let ready = Instant::now();
        samples.push(Sample {
            to_apply: apply_started.saturating_duration_since(trigger),
            to_ready: ready.saturating_duration_since(trigger),
            steps: steps.map(|steps| {
                let after = |t: Instant| t.saturating_duration_since(steps.triggered);
                Steps {
                    prepared: after(steps.prepared),
                    rendered: after(steps.rendered),
                    apply_started: after(apply_started),
                    first_written: after(steps.first_written.expect("waited for")),
                    ready: after(ready),
                }
            }),
        });
    }
    handle.shutdown();
    ns.delete().await;
    samples
}

async fn fail_fast(client: &Client, on: bool, runs: usize) -> Vec<Duration> {
    let ns = TestNamespace::new(client, if on { "ff-on" } else { "ff-off" }).await;
    let (config, _cache) = eng::config(&ns.name, "failfast");
    let handle = wheelhouse::engine::start(client.clone(), config).unwrap();
    handle
        .role()
        .wait_for(|r| *r == wheelhouse::engine::Role::Leader)
        .await
        .unwrap();
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns.name);
    let mut samples = Vec::new();
    for i in 0..runs {
        let name = format!("app-{i}");
        let spec = serde_json::json!({"timeout": if on { "5m" } else { "20s" }, "healthCheck": {"failFast": on}, "values": {"replicaCount": 1}});
        api.create(&PostParams::default(), &webapp(&name, spec))
            .await
            .unwrap();
        wait_hr(&api, &name, "install", |h| {
            is(h, "Ready", "True", "InstallSucceeded")
        })
        .await;
        api.patch(
            &name,
            &PatchParams::default(),
            &values(serde_json::json!({"behavior": "crash-loop"})),
        )
        .await
        .unwrap();
        // The first crash-looping pod of the new revision.
        let crashing = loop {
            let list = pods
                .list(&ListParams::default().labels(&format!(
                    "app={name},wheelhouse.dev/test-behavior=crash-loop"
                )))
                .await
                .unwrap();
            if list.items.iter().any(|p| {
                p.status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .is_some_and(|cs| {
                        cs.iter().any(|c| {
                            c.state
                                .as_ref()
                                .and_then(|s| s.waiting.as_ref())
                                .and_then(|w| w.reason.as_deref())
                                == Some("CrashLoopBackOff")
                        })
                    })
            }) {
                break Instant::now();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        wait_hr(&api, &name, "reported failed", |h| {
            is(h, "Ready", "False", "UpgradeFailed")
        })
        .await;
        samples.push(crashing.elapsed());
    }
    handle.shutdown();
    ns.delete().await;
    samples
}

#[tokio::main]
async fn main() {
    // WHEELHOUSE_LOG (tracing's filter syntax) shows the engine's logs; with
    // `wheelhouse::cluster::slots=debug` each request a fix makes and its latency: where its time goes.
    support::log_from_env();
    let runs = figures::runs(5);
    let client = client().await;
    install_crd(&client).await;
    println!(
        "MTTR benchmark: {runs} runs each, local control plane (kwok node), wheelhouse {}",
        env!("CARGO_PKG_VERSION")
    );

    // WHEELHOUSE_BENCH_PARTS chooses among steps, table and flux (default: all three).
    let parts = std::env::var("WHEELHOUSE_BENCH_PARTS").unwrap_or("steps,table,flux".into());
    let part = |p: &str| parts.split(',').any(|x| x.trim() == p);
    if part("steps") {
        steps_and_fail_fast(&client, runs).await;
    }
    table(&client, part("table"), part("flux")).await;
}

async fn steps_and_fail_fast(client: &Client, runs: usize) {
    let on = stuck_then_fixed(client, true, runs).await;
    let off = stuck_then_fixed(client, false, runs).await;
    println!();
    println!("Stuck rollout (never-ready pods), fix pushed:");
    let on_apply = row(
        "  cancellation on (timeout 5m):  trigger -> fix apply starts",
        on.iter().map(|s| s.to_apply).collect(),
    );
    let on_ready = row(
        "  cancellation on (timeout 5m):  trigger -> Ready",
        on.iter().map(|s| s.to_ready).collect(),
    );
    let off_apply = row(
        "  cancellation off (timeout 20s): trigger -> fix apply starts",
        off.iter().map(|s| s.to_apply).collect(),
    );
    let off_ready = row(
        "  cancellation off (timeout 20s): trigger -> Ready",
        off.iter().map(|s| s.to_ready).collect(),
    );
    println!(
        "  ratio off/on: apply {:.0}x, Ready {:.0}x (and the baseline's 20s timeout stands for Flux's default 5m)",
        off_apply.as_secs_f64() / on_apply.as_secs_f64(),
        off_ready.as_secs_f64() / on_ready.as_secs_f64()
    );
    println!();
    println!(
        "Where the time goes (cancellation on): from the fix's watch event reaching the worker to"
    );
    let steps: Vec<&Steps> = on.iter().filter_map(|s| s.steps.as_ref()).collect();
    for (i, s) in steps.iter().enumerate() {
        println!(
            "  run {i}: prepared {}  rendered {}  apply started {}  first object written {}  Ready {}",
            figures::fmt(s.prepared),
            figures::fmt(s.rendered),
            figures::fmt(s.apply_started),
            figures::fmt(s.first_written),
            figures::fmt(s.ready)
        );
    }
    for (label, pick) in [
        (
            "  desired state prepared",
            (|s: &Steps| s.prepared) as fn(&Steps) -> Duration,
        ),
        ("  render done", |s| s.rendered),
        ("  apply started (wait cancelled, revision stored)", |s| {
            s.apply_started
        }),
        ("  the fix's first object written", |s| s.first_written),
        ("  Ready", |s| s.ready),
    ] {
        row(label, steps.iter().map(|s| pick(s)).collect());
    }

    let ff_on = fail_fast(client, true, runs).await;
    let ff_off = fail_fast(client, false, runs).await;
    println!();
    println!("Crash-looping upgrade: first CrashLoopBackOff pod -> release reported failed:");
    let a = row("  fail-fast on (timeout 5m)", ff_on);
    let b = row("  fail-fast off (timeout 20s)", ff_off);
    println!("  ratio off/on: {:.0}x", b.as_secs_f64() / a.as_secs_f64());
}

async fn table(client: &Client, ours: bool, flux: bool) {
    let runs = std::env::var("WHEELHOUSE_BENCH_TABLE_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    println!();
    println!(
        "The fix by every carrier, {runs} runs a row: from the trigger (the patch accepted; \
         `helm push` or `git push` returned) to the fix's Deployment written and to Ready:"
    );
    let mut rows = Vec::new();
    if ours {
        rows.extend(table::ours(client, runs, None).await);
        table::print(&rows);
        table::print_stages(&rows);
    }
    if !flux {
        return;
    }
    // Flux's OCI rows wait for source-controller's poll (up to a minute a sample, twice):
    // WHEELHOUSE_BENCH_FLUX_RUNS, default 3 a row.
    let flux_runs = std::env::var("WHEELHOUSE_BENCH_FLUX_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    println!();
    println!("Flux beside it, {flux_runs} runs a row:");
    rows.extend(table::flux(client, flux_runs).await);
    table::print(&rows);
    table::print_ratios(&rows);
}

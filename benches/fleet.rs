//! The fleet on one screen at scale (issue #56); run it with `tests/bench.sh fleet`. It
//! starts its own control planes (tests/cluster/up.sh --bare: a real etcd and API server
//! each, no namespaces standing in for clusters), fills each with HelmReleases and drives
//! the real dashboard over all of them in tmux (`--contexts ... -A --readonly`):
//!   - baseline, same run: a paginated LIST of every cluster's HelmReleases (500 a page,
//!     as the dashboard's watch lists), the slowest cluster's time;
//!   - first screen: from the start until a release row is drawn (within 1 s of the
//!     slowest cluster's list), and until the title counts every cluster's releases
//!     (within 1 s of the first screen);
//!   - change -> screen: a release of each cluster in turn (`/cluster:NAME NAME`), its
//!     Ready message patched and the screen polled every 2 ms (the API's write included);
//!   - the same with one cluster's API server stopped (SIGSTOP), for the clusters still
//!     answering: the stopped one may add at most 20 ms to their p99;
//!   - RSS (VmHWM) at the end, and `q` to the process gone.
//!
//! The releases are wheelhouse HelmReleases, suspended, with the status an engine leaves
//! (so only the table's watches work, as in a read-only dashboard). Sizes:
//! `WHEELHOUSE_BENCH_CLUSTERS` (default 10) x `WHEELHOUSE_BENCH_RELEASES` (default 2,000).
//! Figures are printed with PASS/MISS against the targets, never asserted.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use support::engine::webapp;
use support::figures::fmt;
use support::fleet::{BareCluster, client_of, fleet_kubeconfig};
use support::process::read_rss;
use support::tmux::Dashboard;
use wheelhouse::api::HelmRelease;

const PER_NAMESPACE: usize = 200;
const IN_FLIGHT: usize = 32;
/// Changes timed per phase (nearest-rank p99 of 30 is the slowest).
const CHANGES: usize = 30;
const SCREEN_LIMIT: Duration = Duration::from_secs(300);
const TARGET_FIRST_AFTER_LIST_S: f64 = 1.0;
const TARGET_CHANGE_P99_MS: f64 = 100.0;
const TARGET_STOPPED_ADDS_MS: f64 = 20.0;
const TARGET_RSS_MIB: f64 = 400.0;
const TARGET_QUIT_MS: u128 = 300;

fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

fn name_of(i: usize) -> String {
    format!("svc-{i:05}")
}

fn namespace_of(i: usize) -> String {
    format!("fleet-bench-{:03}", i / PER_NAMESPACE)
}

/// `releases` suspended HelmReleases with a Ready status, in namespaces of 200.
async fn populate(client: &Client, cluster: &str, releases: usize) {
    support::install_crd(client).await;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for n in 0..releases.div_ceil(PER_NAMESPACE) {
        let ns: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(
            serde_json::json!({"metadata": {"name": namespace_of(n * PER_NAMESPACE)}}),
        )
        .unwrap();
        let _ = namespaces.create(&PostParams::default(), &ns).await;
    }
    let jobs = (0..releases).map(|i| {
        let client = client.clone();
        async move {
            let (ns, name) = (namespace_of(i), name_of(i));
            let api: Api<HelmRelease> = Api::namespaced(client, &ns);
            let hr = webapp(&name, serde_json::json!({"suspend": true}));
            api.create(&PostParams::default(), &hr)
                .await
                .unwrap_or_else(|e| panic!("create {ns}/{name}: {e}"));
            let status = ready_status(&format!(
                "Helm upgrade succeeded for release {ns}/{name}.v3 with chart webapp@1.0.0"
            ));
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
                .await
                .unwrap_or_else(|e| panic!("status of {ns}/{name}: {e}"));
        }
    });
    futures::stream::iter(jobs)
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    println!("  {cluster}: {releases} releases");
}

fn ready_status(message: &str) -> serde_json::Value {
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    serde_json::json!({"status": {
        "observedGeneration": 1,
        "conditions": [{"type": "Ready", "status": "True", "reason": "UpgradeSucceeded",
                        "message": message, "lastTransitionTime": now,
                        "observedGeneration": 1}],
    }})
}

/// A paginated LIST of every HelmRelease of one cluster.
async fn list_all(client: &Client) -> (Duration, usize) {
    let api: Api<HelmRelease> = Api::all(client.clone());
    let started = Instant::now();
    let mut count = 0;
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await.expect("list HelmReleases");
        count += page.items.len();
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => break,
        }
    }
    (started.elapsed(), count)
}

/// Changes a release of each of `clusters` in turn and times each from the patch to the
/// screen. The filter is the operator's: `/cluster:NAME svc-00000`.
async fn changes(
    dash: &Dashboard,
    clients: &[(String, Client)],
    clusters: &[usize],
    label: &str,
) -> Vec<Duration> {
    let mut times = Vec::new();
    let target = name_of(0);
    for i in 0..CHANGES {
        let (cluster, client) = &clients[clusters[i % clusters.len()]];
        dash.keys(&["Escape", "/"]);
        dash.type_text(&format!("cluster:{cluster} {target}"));
        dash.keys(&["Enter"]);
        // One row, of that cluster (the title names the filter too).
        dash.until(Duration::from_millis(10), SCREEN_LIMIT, |s| {
            let rows: Vec<&str> = s
                .lines()
                .filter(|l| l.contains(&target) && !l.contains("filter:"))
                .collect();
            rows.len() == 1 && rows[0].contains(&format!(" {cluster} "))
        })
        .await
        .unwrap_or_else(|| panic!("the filter on {cluster}:\n{}", dash.screen()));
        let mark = format!("{label}{i}x");
        let api: Api<HelmRelease> = Api::namespaced(client.clone(), &namespace_of(0));
        let sent = Instant::now();
        api.patch_status(
            &target,
            &PatchParams::default(),
            &Patch::Merge(&ready_status(&format!("{mark} upgrade succeeded"))),
        )
        .await
        .expect("patch the release's status");
        let shown = dash
            .until(Duration::from_millis(2), SCREEN_LIMIT, |s| {
                s.lines().any(|l| l.contains(&target) && l.contains(&mark))
            })
            .await
            .unwrap_or_else(|| panic!("{mark} in {cluster} never shown:\n{}", dash.screen()));
        times.push(shown - sent);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    times
}

fn p99(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    let rank = ((times.len() as f64) * 0.99).ceil() as usize;
    (times[times.len() / 2], times[rank.saturating_sub(1)])
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let count = env_count("WHEELHOUSE_BENCH_CLUSTERS", 10).max(2);
    let releases = env_count("WHEELHOUSE_BENCH_RELEASES", 2000);
    println!("fleet: {count} clusters (a real API server each) x {releases} releases");
    let started = Instant::now();
    let clusters: Vec<BareCluster> = (0..count).map(|_| BareCluster::start()).collect();
    println!("  control planes up in {}", fmt(started.elapsed()));
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("fleet.yaml");
    let names: Vec<String> = (0..count).map(|i| format!("c{i:02}")).collect();
    let paths: Vec<std::path::PathBuf> = clusters.iter().map(BareCluster::kubeconfig).collect();
    let sources: Vec<(&str, &std::path::Path)> = names
        .iter()
        .map(String::as_str)
        .zip(paths.iter().map(|p| p.as_path()))
        .collect();
    fleet_kubeconfig(&sources, &kubeconfig);
    let mut clients = Vec::new();
    for (name, path) in names.iter().zip(&paths) {
        clients.push((name.clone(), client_of(path).await));
    }
    let filled = Instant::now();
    futures::future::join_all(
        clients
            .iter()
            .map(|(name, client)| populate(client, name, releases)),
    )
    .await;
    println!("  filled in {}", fmt(filled.elapsed()));

    let mut slowest = Duration::ZERO;
    for (name, client) in &clients {
        let (took, listed) = list_all(client).await;
        assert_eq!(listed, releases, "{name} lists {listed}");
        slowest = slowest.max(took);
    }
    let total = count * releases;
    let contexts = names.join(",");
    let opened = Instant::now();
    let dash = Dashboard::start_on(
        "wheelhouse-bench-fleet",
        &kubeconfig,
        &["--contexts", &contexts, "-A", "--readonly"],
    );
    let first = dash
        .until(Duration::from_millis(5), SCREEN_LIMIT, |s| {
            s.contains("svc-")
        })
        .await
        .map(|t| t - opened);
    let title = format!("Releases {total} ·");
    let full = dash
        .until(Duration::from_millis(5), SCREEN_LIMIT, |s| {
            s.contains(&title)
        })
        .await
        .map(|t| t - opened);
    let all: Vec<usize> = (0..count).collect();
    let idle = changes(&dash, &clients, &all, "a").await;
    // The last cluster stops answering; the others are changed again.
    let stopped = clusters[count - 1].freeze();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let answering: Vec<usize> = (0..count - 1).collect();
    let beside = changes(&dash, &clients, &answering, "b").await;
    stopped.thaw();
    let rss = read_rss(dash.pid()).map(|(_, hwm_kib)| hwm_kib as f64 / 1024.0);
    let quit = dash.quit().await;

    println!();
    println!("slowest cluster's LIST of {releases}: {}", fmt(slowest));
    let after = |d: Option<Duration>| d.map(|d| d.as_secs_f64() - slowest.as_secs_f64());
    match (first, after(first)) {
        (Some(d), Some(a)) => println!(
            "first screen: {} ({a:+.2} s after the slowest list; target < {TARGET_FIRST_AFTER_LIST_S} s) {}",
            fmt(d),
            verdict(a < TARGET_FIRST_AFTER_LIST_S)
        ),
        _ => println!("first screen: never within {SCREEN_LIMIT:?} MISS"),
    }
    // Every row within 1 s of the first screen (the target).
    match (full, first) {
        (Some(d), Some(f)) => println!(
            "every row ({total}): {} ({:+.2} s after the first screen; target < {TARGET_FIRST_AFTER_LIST_S} s) {}",
            fmt(d),
            (d - f).as_secs_f64(),
            verdict((d - f).as_secs_f64() < TARGET_FIRST_AFTER_LIST_S)
        ),
        _ => println!("every row ({total}): never within {SCREEN_LIMIT:?} MISS"),
    }
    let (idle_p50, idle_p99) = p99(idle);
    println!(
        "change -> screen, every cluster answering: p50 {} p99 {} (target p99 < {TARGET_CHANGE_P99_MS} ms) {}",
        fmt(idle_p50),
        fmt(idle_p99),
        verdict(idle_p99.as_secs_f64() * 1000.0 < TARGET_CHANGE_P99_MS)
    );
    let (beside_p50, beside_p99) = p99(beside);
    let added = (beside_p99.as_secs_f64() - idle_p99.as_secs_f64()) * 1000.0;
    println!(
        "change -> screen, one API server stopped: p50 {} p99 {} ({added:+.1} ms; target < +{TARGET_STOPPED_ADDS_MS} ms) {}",
        fmt(beside_p50),
        fmt(beside_p99),
        verdict(added < TARGET_STOPPED_ADDS_MS)
    );
    match rss {
        Some(mib) => println!(
            "RSS peak (read-only): {mib:.0} MiB (target < {TARGET_RSS_MIB} MiB) {}",
            verdict(mib < TARGET_RSS_MIB)
        ),
        None => println!("RSS peak: not read"),
    }
    println!(
        "quit: {} ms (target < {TARGET_QUIT_MS} ms) {}",
        quit.as_millis(),
        verdict(quit.as_millis() < TARGET_QUIT_MS)
    );
    drop(clusters);
}

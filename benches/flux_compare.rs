//! Flux beside wheelhouse on one local control plane: `tests/bench.sh flux-compare [N]`.
//! The same N releases of the webapp test chart (`replicaCount: 1`: a ConfigMap, a
//! Deployment, a Service; N from the argument or WHEELHOUSE_BENCH_RELEASES, default
//! 1,000), 100 to a namespace, installed with a health-check wait (5 m timeout) by each
//! engine in turn, one after the other in one run:
//!   1. Flux's helm-controller and source-controller (the builds and flags the local
//!      control plane runs: `--concurrent 4` and 2, their defaults), the chart from a
//!      HelmRepository served over HTTP; then every Flux HelmRelease is suspended;
//!   2. `wheelhouse controller` (release build; default `--concurrent 4` renders, a
//!      worker per release), the chart from its path, on a shard of its own;
//!   3. and 4. the same at equal concurrency: Flux's two controllers restarted with
//!      `--concurrent E` and wheelhouse with `--concurrent E` (E from
//!      WHEELHOUSE_BENCH_EQUAL, default 16).
//!
//! For each: time from the first release created until all are Ready (listed every 2 s),
//! CPU seconds of all the engine's processes until then (Flux: both controllers;
//! wheelhouse: the controller and its render helper), and the peak of their summed RSS
//! (sampled every 500 ms). Printed with the ratios; nothing is asserted except that every
//! release becomes Ready within an hour.

#[path = "controller_process/mod.rs"]
#[allow(dead_code)] // `scale` uses the rest
mod controller_process;
#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use support::process::{clock_ticks, read_cpu, read_rss};
use support::{TestNamespace, client, install_crd, kubeconfig_path};
use wheelhouse::api::HelmRelease;
use wheelhouse::api::flux::FluxHelmRelease;

use controller_process::{Controller, duration, helper_rss, mb, render_ticks, wait_for_lease};

const PER_NAMESPACE: usize = 100;
const IN_FLIGHT: usize = 32;
const LIMIT: Duration = Duration::from_secs(3600);
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
const BENCH_LABEL: &str = "wheelhouse.dev/bench";
const SHARD_LABEL: &str = "sharding.wheelhouse.dev/key";

/// One engine's run.
struct Side {
    engine: String,
    to_ready: Duration,
    cpu_s: f64,
    peak_rss_mb: f64,
}

/// The local control plane's process `name` (from the `pids` file beside the kubeconfig).
fn cluster_pid(name: &str) -> u32 {
    let pids = kubeconfig_path().with_file_name("pids");
    std::fs::read_to_string(&pids)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(n, _)| *n == name)
        .filter_map(|(_, pid)| pid.trim().parse().ok())
        .rfind(|pid| alive(*pid))
        .unwrap_or_else(|| panic!("no running {name} in {}", pids.display()))
}

/// Whether `pid` runs (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Samples the summed RSS (KiB) of what `pids` gives, every 500 ms; the peak so far.
fn sample_sum(
    pids: impl Fn() -> Vec<u32> + Send + 'static,
) -> (Arc<Mutex<u64>>, tokio::task::JoinHandle<()>) {
    let peak = Arc::new(Mutex::new(0));
    let task = {
        let peak = peak.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            loop {
                tick.tick().await;
                let sum: u64 = pids().into_iter().filter_map(read_rss).map(|r| r.0).sum();
                let mut p = peak.lock().unwrap();
                *p = (*p).max(sum);
            }
        })
    };
    (peak, task)
}

/// Restarts one of Flux's controllers as it was started, with `--concurrent n` added,
/// recorded in the `pids` file so the control plane's `down.sh` stops it.
fn restart_with_concurrency(name: &str, n: usize) {
    let pid = cluster_pid(name);
    let argv: Vec<String> = std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let env: Vec<(String, String)> = std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect();
    let health = argv
        .iter()
        .position(|a| a == "--health-addr")
        .map(|i| argv[i + 1].clone())
        .expect("Flux's controllers run with --health-addr");
    let status = Command::new("kill").arg(pid.to_string()).status().unwrap();
    assert!(status.success(), "cannot stop {name} ({pid})");
    while alive(pid) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let dir = kubeconfig_path().parent().unwrap().to_path_buf();
    let log = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("logs").join(format!("{name}.log")))
        .unwrap();
    // Left running past this process, as up.sh leaves it: down.sh stops it by its pid.
    #[allow(clippy::zombie_processes)]
    let child = Command::new(&argv[0])
        .args(&argv[1..])
        .args(["--concurrent", &n.to_string()])
        .env_clear()
        .envs(env)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot restart {name}: {e}"));
    let mut pids = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("pids"))
        .unwrap();
    std::io::Write::write_all(&mut pids, format!("{name} {}\n", child.id()).as_bytes()).unwrap();
    // Ready once its health endpoint answers.
    let limit = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(&health).is_err() {
        assert!(Instant::now() < limit, "{name} did not come back");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
}

async fn namespaces(client: &Client, prefix: &str, n: usize) -> Vec<TestNamespace> {
    let mut out = Vec::new();
    for i in 0..n.div_ceil(PER_NAMESPACE) {
        out.push(TestNamespace::new(client, &format!("{prefix}-{i:02}")).await);
    }
    out
}

/// Polls `count_ready` every 2 s until all `n` are; panics after [`LIMIT`].
async fn until_all_ready<F, Fut>(what: &str, n: usize, started: Instant, count_ready: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let mut reported = Instant::now();
    loop {
        let ready = count_ready().await;
        if ready == n {
            return;
        }
        assert!(
            started.elapsed() < LIMIT,
            "{what}: only {ready} of {n} Ready within {}",
            duration(LIMIT)
        );
        if reported.elapsed() >= Duration::from_secs(30) {
            reported = Instant::now();
            eprintln!(
                "  {what}: {ready}/{n} Ready after {}",
                duration(started.elapsed())
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// `run`: a slug for names and labels (`default`, `equal`); `shown`: how it is printed.
async fn flux_side(client: &Client, n: usize, run: &str, shown: &str, url: &str, hz: f64) -> Side {
    let label = format!("flux-{run}");
    let namespaces = namespaces(client, &format!("fc-{label}"), n).await;
    for ns in &namespaces {
        support::flux::helm_repository(client, &ns.name, "charts", url).await;
    }
    let pids = || {
        vec![
            cluster_pid("helm-controller"),
            cluster_pid("source-controller"),
        ]
    };
    let cpu = || -> u64 { pids().into_iter().filter_map(read_cpu).map(|c| c.own).sum() };
    let (peak, sampler) = sample_sum(pids);
    let before = cpu();
    let started = Instant::now();
    let kind = kube::api::ApiResource::erase::<FluxHelmRelease>(&());
    futures::stream::iter((0..n).map(|i| {
        let ns = namespaces[i / PER_NAMESPACE].name.clone();
        let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), &ns, &kind);
        let hr: serde_json::Value = serde_json::json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2",
            "kind": "HelmRelease",
            "metadata": {"name": format!("web-{i:04}"), "namespace": ns,
                         "labels": {BENCH_LABEL: label}},
            "spec": {
                "interval": "10m",
                "timeout": "5m",
                "chart": {"spec": {"chart": "webapp", "version": "1.0.0", "interval": "10m",
                                   "sourceRef": {"kind": "HelmRepository", "name": "charts"}}},
                "values": {"replicaCount": 1},
            },
        });
        async move {
            api.create(&PostParams::default(), &serde_json::from_value(hr).unwrap())
                .await
                .map(drop)
        }
    }))
    .buffer_unordered(IN_FLIGHT)
    .try_collect::<Vec<()>>()
    .await
    .expect("create Flux's HelmReleases");
    let all: Api<FluxHelmRelease> = Api::all(client.clone());
    let selector = format!("{BENCH_LABEL}={label}");
    until_all_ready(&label, n, started, || async {
        all.list(&ListParams::default().labels(&selector))
            .await
            .map_or(0, |l| {
                l.items.iter().filter(|h| support::flux::ready(h)).count()
            })
    })
    .await;
    let to_ready = started.elapsed();
    let cpu_s = (cpu() - before) as f64 / hz;
    sampler.abort();
    let peak_rss_mb = mb(*peak.lock().unwrap());
    // Suspended, so the next runs measure the next engine alone.
    let releases = all
        .list(&ListParams::default().labels(&selector))
        .await
        .unwrap()
        .items;
    futures::stream::iter(releases.into_iter().map(|hr| {
        let api: Api<FluxHelmRelease> =
            Api::namespaced(client.clone(), hr.metadata.namespace.as_deref().unwrap());
        let name = hr.metadata.name.clone().unwrap();
        async move {
            let _ = api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"spec": {"suspend": true}})),
                )
                .await;
        }
    }))
    .buffer_unordered(IN_FLIGHT)
    .collect::<Vec<()>>()
    .await;
    // The namespaces are left for the control plane's teardown.
    drop(namespaces);
    Side {
        engine: format!("Flux ({shown})"),
        to_ready,
        cpu_s,
        peak_rss_mb,
    }
}

async fn wheelhouse_side(
    client: &Client,
    n: usize,
    run: &str,
    shown: &str,
    concurrent: Option<usize>,
    hz: f64,
) -> Side {
    let label = format!("wh-{run}");
    let system = TestNamespace::new(client, &format!("fc-{label}-system")).await;
    let namespaces = namespaces(client, &format!("fc-{label}"), n).await;
    let concurrent = concurrent.map(|c| c.to_string());
    let mut args = vec!["--shard", label.as_str()];
    if let Some(c) = &concurrent {
        args.extend(["--concurrent", c.as_str()]);
    }
    let mut controller = Controller::start_with(&system.name, &args);
    let pid = controller.pid();
    wait_for_lease(client, &system.name, &mut controller).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (peak, sampler) = sample_sum(move || {
        let mut pids = vec![pid];
        pids.extend(support::process::children_named(pid, "wheelhouse-render"));
        pids
    });
    let cpu = || read_cpu(pid).map_or(0, |c| c.own) + render_ticks(pid);
    let before = cpu();
    let started = Instant::now();
    futures::stream::iter((0..n).map(|i| {
        let ns = namespaces[i / PER_NAMESPACE].name.clone();
        let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns);
        let mut hr = support::engine::webapp(
            &format!("web-{i:04}"),
            serde_json::json!({"timeout": "5m", "values": {"replicaCount": 1}}),
        );
        hr.metadata.labels = Some(BTreeMap::from([
            (BENCH_LABEL.to_owned(), label.clone()),
            (SHARD_LABEL.to_owned(), label.clone()),
        ]));
        async move { api.create(&PostParams::default(), &hr).await.map(drop) }
    }))
    .buffer_unordered(IN_FLIGHT)
    .try_collect::<Vec<()>>()
    .await
    .expect("create the HelmReleases");
    let all: Api<HelmRelease> = Api::all(client.clone());
    let selector = format!("{BENCH_LABEL}={label}");
    until_all_ready(&label, n, started, || async {
        all.list(&ListParams::default().labels(&selector))
            .await
            .map_or(0, |l| {
                l.items
                    .iter()
                    .filter(|h| h.condition("Ready").is_some_and(|c| c.status == "True"))
                    .count()
            })
    })
    .await;
    controller.check_running();
    let to_ready = started.elapsed();
    let cpu_s = (cpu() - before) as f64 / hz;
    sampler.abort();
    let helper = helper_rss(pid).map_or(0.0, |(_, hwm)| mb(hwm));
    let peak_rss_mb = mb(*peak.lock().unwrap());
    println!(
        "  ({label}: controller peak RSS {:.0} MB, render helper peak {helper:.0} MB)",
        read_rss(pid).map_or(0.0, |(_, hwm)| mb(hwm))
    );
    drop(controller);
    drop((namespaces, system));
    Side {
        engine: format!("wheelhouse ({shown})"),
        to_ready,
        cpu_s,
        peak_rss_mb,
    }
}

fn compare(flux: &Side, ours: &Side) {
    println!("| engine | all Ready | CPU seconds | peak RSS (all its processes) |");
    println!("|---|---|---|---|");
    println!(
        "| {} | {} | {:.1} s | {:.0} MB |",
        flux.engine,
        duration(flux.to_ready),
        flux.cpu_s,
        flux.peak_rss_mb
    );
    println!(
        "| {} | {} | {:.1} s | {:.0} MB |",
        ours.engine,
        duration(ours.to_ready),
        ours.cpu_s,
        ours.peak_rss_mb
    );
    println!(
        "  all Ready: {:.1}x sooner; CPU: {:.1}x less; peak RSS: {:.1}x less",
        flux.to_ready.as_secs_f64() / ours.to_ready.as_secs_f64(),
        flux.cpu_s / ours.cpu_s,
        flux.peak_rss_mb / ours.peak_rss_mb
    );
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .or_else(|| {
            std::env::var("WHEELHOUSE_BENCH_RELEASES")
                .ok()?
                .parse()
                .ok()
        })
        .unwrap_or(1000);
    let equal: usize = std::env::var("WHEELHOUSE_BENCH_EQUAL")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let hz = clock_ticks();
    let client = client().await;
    install_crd(&client).await;
    support::flux::require_flux(&client).await;
    let chart = PathBuf::from(support::engine::chart("webapp"));
    let (_repo, url) = support::flux::serve(&chart, "webapp", &["1.0.0"]).await;
    println!(
        "Flux beside wheelhouse: {n} releases of the webapp chart, {PER_NAMESPACE} a \
         namespace, health-check wait on, local control plane (kwok node), {} CPUs, \
         wheelhouse {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        env!("CARGO_PKG_VERSION")
    );

    let flux_default = flux_side(&client, n, "default", "defaults", &url, hz).await;
    let ours_default = wheelhouse_side(&client, n, "default", "defaults", None, hz).await;
    println!();
    println!(
        "Each engine at its defaults (Flux: helm-controller --concurrent 4, \
         source-controller 2; wheelhouse: --concurrent 4 renders, a worker per release):"
    );
    compare(&flux_default, &ours_default);
    restart_with_concurrency("helm-controller", equal);
    restart_with_concurrency("source-controller", equal);
    let shown = format!("--concurrent {equal}");
    let flux_equal = flux_side(&client, n, "equal", &shown, &url, hz).await;
    let ours_equal = wheelhouse_side(&client, n, "equal", &shown, Some(equal), hz).await;
    println!();
    println!("At equal concurrency (both controllers of each: --concurrent {equal}):");
    compare(&flux_equal, &ours_equal);
}

//! Scale benchmark (issue #11, docs/design.md, "Numbers that matter") against the local control plane; run it with
//! `tests/bench.sh scale`. It measures the real `wheelhouse controller` process (the
//! release binary, all namespaces, default `--concurrent`):
//!   - setup, before the controller starts: Secrets of 100 KiB and ConfigMaps of 10 KiB
//!     that no release uses, in two namespaces of their own (still inside the
//!     controller's all-namespaces scope), and the release namespaces (100 releases each);
//!   - then the controller is started, and once it holds the lease the HelmReleases of
//!     the `webapp` test chart (`replicaCount: 1`: a ConfigMap, a Deployment and a
//!     Service each) are created, 32 at a time;
//!   - time from the first HelmRelease created until all are Ready (listed every second,
//!     every N seconds at N thousand releases),
//!     the controller's peak RSS (VmHWM) and CPU seconds until then, the CPU of the
//!     renders separately: the render helper's own CPU (a long-lived child) plus that of
//!     helm processes with `--renderer helm` (cutime+cstime: the children it has reaped),
//!     per release too; then CPU per minute over 60 idle seconds and the RSS at the end;
//!   - then a restart with every release in place: SIGTERM, a new controller process, and
//!     the time until it has reconciled every release once (the line the engine logs
//!     then, checked against its metrics endpoint's per-release series, read once: at
//!     10,000 releases a scrape is 22 MB, and polling it took a fifth of a core from
//!     what it timed), the CPU each process spent meanwhile, and the upgrades it made
//!     (Helm's storage records before and after: none expected).
//!
//! `WHEELHOUSE_BENCH_RENDERER=helm` runs the controller with `--renderer helm` (the helm
//! CLI per render), the baseline of the render helper.
//!
//! `WHEELHOUSE_BENCH_INTERVAL` (e.g. `1m`) sets the releases' interval, to profile the
//! interval checks of a large fleet on a small one.
//! Counts: `WHEELHOUSE_BENCH_RELEASES` (default 1000), `WHEELHOUSE_BENCH_NAMESPACES` (one
//! per 100 releases; issue #37's 10,000 run uses 10), `WHEELHOUSE_BENCH_SECRETS` (2000),
//! `WHEELHOUSE_BENCH_CONFIGMAPS` (2000); `WHEELHOUSE_BENCH_CONCURRENT` passes
//! `--concurrent N` (unset: the controller's default). Figures are printed against the
//! targets, never asserted; the benchmark fails only when the releases do not all become
//! Ready within 20 minutes (with the controller's log tail) or the controller exits.

#[path = "controller_process/mod.rs"]
mod controller_process;
#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use controller_process::{
    Controller, duration, helper_rss, mb, render_ticks, secs, verdict, wait_for_lease,
};
use futures::{FutureExt, StreamExt, TryStreamExt};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use support::engine::webapp;
use support::process::{clock_ticks, read_cpu, read_rss};
use support::{TestNamespace, client, install_crd, kubeconfig_path};
use wheelhouse::api::HelmRelease;

const DATA_NAMESPACES: usize = 2;
const SECRET_BYTES: usize = 100 * 1024;
const CONFIGMAP_BYTES: usize = 10 * 1024;
/// Requests in flight while creating objects.
const IN_FLIGHT: usize = 32;
/// Twenty minutes, or more for a larger fleet (0.3 s a release).
fn ready_limit(releases: usize) -> Duration {
    Duration::from_secs((20 * 60).max(releases as u64 * 3 / 10))
}
/// A restart with every release in place: started to every release checked.
const TARGET_RESTART: Duration = Duration::from_secs(60);
const RESTART_LIMIT: Duration = Duration::from_secs(10 * 60);
const IDLE_WINDOW: Duration = Duration::from_secs(60);
const SAMPLE_EVERY: Duration = Duration::from_millis(500);
const BENCH_LABEL: &str = "wheelhouse.dev/bench";
/// Peak RSS targets: the controller alone at up to 1,000 releases; from 10,000 releases
/// (issue #37), the controller and its render helper together.
const TARGET_RSS_MB: f64 = 150.0;
const TARGET_TOTAL_RSS_MB_AT_10K: f64 = 500.0;
const TARGET_IDLE_CPU_PER_MIN: f64 = 1.0;
/// Issue #22: render CPU per release at 1,000 releases.
const TARGET_RENDER_CPU_MS: f64 = 10.0;

fn env_count(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a count")),
        Err(_) => default,
    }
}

/// What the controller's memory and connections consist of, for reading a high RSS:
/// anonymous and file-backed RSS, threads, open sockets.
fn shape(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().trim_end_matches("kB").trim().to_owned())
            .unwrap_or_default()
    };
    let kib = |name: &str| field(name).parse::<u64>().map_or(0.0, mb);
    let sockets = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|target| target.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0);
    format!(
        "anonymous {:.1} MB, file-backed {:.1} MB; {} threads, {sockets} open sockets",
        kib("RssAnon:"),
        kib("RssFile:"),
        field("Threads:")
    )
}

/// RSS samples of the controller, every 500 ms while the benchmark runs.
#[derive(Debug, Default)]
struct Samples {
    count: usize,
    max_rss_kib: u64,
}

fn sample(pid: u32) -> (Arc<Mutex<Samples>>, tokio::task::JoinHandle<()>) {
    let samples = Arc::new(Mutex::new(Samples::default()));
    let task = {
        let samples = samples.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            loop {
                tick.tick().await;
                let Some((rss, _)) = read_rss(pid) else {
                    return;
                };
                let mut s = samples.lock().unwrap();
                s.count += 1;
                s.max_rss_kib = s.max_rss_kib.max(rss);
            }
        })
    };
    (samples, task)
}

/// The local control plane's own processes (from the `pids` file beside the kubeconfig,
/// written by tests/cluster/up.sh), for context: what the API server and etcd spent.
fn cluster_pids() -> Vec<(String, u32)> {
    let pids = kubeconfig_path().with_file_name("pids");
    std::fs::read_to_string(pids)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (name, pid) = l.split_once(' ')?;
            Some((name.to_owned(), pid.trim().parse().ok()?))
        })
        .filter(|(name, _)| name == "kube-apiserver" || name == "etcd")
        .collect()
}

fn cluster_cpu(pids: &[(String, u32)]) -> Vec<u64> {
    pids.iter()
        .map(|(_, pid)| read_cpu(*pid).map_or(0, |c| c.own))
        .collect()
}

/// Deterministic bytes that do not compress (xorshift64*), different per seed.
fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

fn meta(name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        labels: Some(BTreeMap::from([(BENCH_LABEL.into(), "scale".into())])),
        ..Default::default()
    }
}

/// Creates the unrelated Secrets and ConfigMaps, spread over `namespaces`.
async fn create_data(client: &Client, namespaces: &[String], secrets: usize, configmaps: usize) {
    let secret_jobs = (0..secrets).map(|i| {
        let api: Api<Secret> = Api::namespaced(client.clone(), &namespaces[i % namespaces.len()]);
        async move {
            let secret = Secret {
                metadata: meta(format!("blob-{i:05}")),
                data: Some(BTreeMap::from([(
                    "blob".into(),
                    ByteString(noise(i as u64 + 1, SECRET_BYTES)),
                )])),
                ..Default::default()
            };
            api.create(&PostParams::default(), &secret).await.map(drop)
        }
        .boxed()
    });
    let configmap_jobs = (0..configmaps).map(|i| {
        let api: Api<ConfigMap> =
            Api::namespaced(client.clone(), &namespaces[i % namespaces.len()]);
        async move {
            let text: String = noise(i as u64 + 1_000_003, CONFIGMAP_BYTES / 2)
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let cm = ConfigMap {
                metadata: meta(format!("settings-{i:05}")),
                data: Some(BTreeMap::from([("settings".into(), text)])),
                ..Default::default()
            };
            api.create(&PostParams::default(), &cm).await.map(drop)
        }
        .boxed()
    });
    futures::stream::iter(secret_jobs.chain(configmap_jobs))
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<()>>()
        .await
        .expect("create the unrelated Secrets and ConfigMaps");
}

fn ready(hr: &HelmRelease) -> bool {
    hr.condition("Ready").is_some_and(|c| c.status == "True")
}

async fn list_releases(api: &Api<HelmRelease>) -> Vec<HelmRelease> {
    api.list(&ListParams::default().labels(&format!("{BENCH_LABEL}=scale")))
        .await
        .expect("list the benchmark's HelmReleases")
        .items
}

/// What the releases that are not Ready say, grouped by Ready status and reason.
fn not_ready_report(releases: &[HelmRelease]) -> String {
    let mut groups: BTreeMap<String, Vec<&HelmRelease>> = BTreeMap::new();
    for hr in releases.iter().filter(|h| !ready(h)) {
        let key = hr
            .condition("Ready")
            .map_or("no Ready condition".into(), |c| {
                format!("Ready={} {}", c.status, c.reason)
            });
        groups.entry(key).or_default().push(hr);
    }
    let mut out = String::new();
    for (key, hrs) in groups {
        out += &format!("  {key}: {} releases, e.g.\n", hrs.len());
        for hr in hrs.iter().take(3) {
            out += &format!(
                "    {}/{}: {}\n",
                hr.metadata.namespace.as_deref().unwrap_or_default(),
                hr.metadata.name.as_deref().unwrap_or_default(),
                hr.condition("Ready").map_or("", |c| c.message.as_str())
            );
        }
    }
    out
}

/// Helm's storage records (Secrets labelled `owner=helm`) in the release namespaces.
async fn storage_records(client: &Client, namespaces: &[TestNamespace]) -> usize {
    let mut n = 0;
    for ns in namespaces {
        let api: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
        let list = api
            .list_metadata(&ListParams::default().labels("owner=helm"))
            .await
            .expect("list Helm's storage records");
        n += list.items.len();
    }
    n
}

async fn lease_holder(client: &Client, namespace: &str) -> Option<String> {
    let api: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client.clone(), namespace);
    api.list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .find_map(|l| l.spec?.holder_identity.filter(|h| !h.is_empty()))
}

/// How many HelmReleases the controller has reconciled at least once: the distinct
/// objects of `gotk_reconcile_duration_seconds` on its metrics endpoint (0 while it
/// does not answer yet).
async fn releases_checked(addr: &str) -> usize {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return 0;
    };
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return 0;
    }
    let mut body = String::new();
    if stream.read_to_string(&mut body).await.is_err() {
        return 0;
    }
    body.lines()
        .filter(|l| l.starts_with("gotk_reconcile_duration_seconds_count{"))
        .filter(|l| l.contains("kind=\"HelmRelease\""))
        .count()
}

/// Requests the API server has served, by verb and resource (its own
/// `apiserver_request_total`, every client's; what the engine asks for shows there).
async fn api_requests(client: &Client) -> BTreeMap<String, f64> {
    let request = hyper::Request::get("/metrics")
        .body(Vec::new())
        .expect("a request");
    let text = client.request_text(request).await.unwrap_or_default();
    let mut counts = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
    {
        let Some((labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let label = |name: &str| {
            let start = labels.find(&format!("{name}=\""))? + name.len() + 2;
            let end = labels[start..].find('"')? + start;
            Some(&labels[start..end])
        };
        let (Some(verb), Some(resource)) = (label("verb"), label("resource")) else {
            continue;
        };
        let what = match label("subresource").filter(|s| !s.is_empty()) {
            Some(sub) => format!("{verb} {resource}/{sub}"),
            None => format!("{verb} {resource}"),
        };
        *counts.entry(what).or_insert(0.0) += value.parse::<f64>().unwrap_or(0.0);
    }
    counts
}

fn requests_since(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> Vec<(String, u64)> {
    let mut delta: Vec<(String, u64)> = after
        .iter()
        .map(|(what, n)| (what.clone(), (n - before.get(what).unwrap_or(&0.0)) as u64))
        .filter(|(_, n)| *n > 0)
        .collect();
    delta.sort_by_key(|d| std::cmp::Reverse(d.1));
    delta
}

/// The most frequent requests of a window (the benchmark's own among them: its lists
/// of the HelmReleases, the Lease reads, these metrics).
fn print_requests(title: &str, requests: &[(String, u64)]) {
    let total: u64 = requests.iter().map(|(_, n)| n).sum();
    println!("{title}: {total}");
    for (what, n) in requests.iter().take(8) {
        println!("{:<62} {:>12}", format!("    {what}"), n);
    }
}

/// The engine's line saying its term's first reconciles are all done (see
/// `wheelhouse::engine::warmup`): how many releases, and its milliseconds.
fn warmup_line(log: &str) -> Option<(u64, u64)> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| {
            v["fields"]["message"].as_str()
                == Some("every release reconciled once since the engine took the lease")
        })
        .and_then(|v| {
            Some((
                v["fields"]["releases"].as_u64()?,
                v["fields"]["ms"].as_u64()?,
            ))
        })
}

/// Lets the namespaces go: the controller is stopped, so the finalizers it put on the
/// HelmReleases are removed first (nothing is uninstalled; the namespaces take it all).
async fn clean_up(client: &Client, releases: &[HelmRelease], namespaces: Vec<TestNamespace>) {
    let unfinalize = Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    futures::stream::iter(releases.iter().map(|hr| {
        let api: Api<HelmRelease> =
            Api::namespaced(client.clone(), hr.metadata.namespace.as_deref().unwrap());
        let name = hr.metadata.name.clone().unwrap();
        let patch = &unfinalize;
        async move {
            let _ = api.patch(&name, &PatchParams::default(), patch).await;
        }
    }))
    .buffer_unordered(IN_FLIGHT)
    .collect::<Vec<()>>()
    .await;
    // Deleted now rather than with their namespaces (which takes a while), so the next
    // run on the same cluster does not find them.
    for ns in &namespaces {
        let api: Api<HelmRelease> = Api::namespaced(client.clone(), &ns.name);
        let _ = api
            .delete_collection(
                &DeleteParams::default(),
                &ListParams::default().labels(&format!("{BENCH_LABEL}=scale")),
            )
            .await;
    }
    for ns in namespaces {
        ns.delete().await;
    }
}

#[tokio::main]
async fn main() {
    let releases = env_count("WHEELHOUSE_BENCH_RELEASES", 1000);
    let secrets = env_count("WHEELHOUSE_BENCH_SECRETS", 2000);
    let configmaps = env_count("WHEELHOUSE_BENCH_CONFIGMAPS", 2000);
    let concurrent = std::env::var("WHEELHOUSE_BENCH_CONCURRENT").ok().map(|v| {
        v.parse::<usize>()
            .expect("WHEELHOUSE_BENCH_CONCURRENT is a count")
    });
    assert!(releases > 0, "WHEELHOUSE_BENCH_RELEASES must be at least 1");
    let hz = clock_ticks();
    let client = client().await;
    install_crd(&client).await;

    // The controller watches every namespace: releases left by another run would be
    // reconciled too and skew every figure.
    let all: Api<HelmRelease> = Api::all(client.clone());
    if let Some(other) = all
        .list(&ListParams::default().limit(1))
        .await
        .expect("list HelmReleases")
        .items
        .first()
    {
        panic!(
            "the scale benchmark needs a cluster without HelmReleases (its controller watches \
             every namespace), but {}/{} exists: run it with tests/bench.sh scale, which \
             starts a fresh local control plane",
            other.metadata.namespace.as_deref().unwrap_or_default(),
            other.metadata.name.as_deref().unwrap_or_default()
        );
    }

    let release_namespaces =
        env_count("WHEELHOUSE_BENCH_NAMESPACES", releases.div_ceil(100)).clamp(1, releases);
    let per_namespace = releases.div_ceil(release_namespaces);
    // Listing every release each second would be a load of its own at 10,000.
    let poll_every = Duration::from_secs((releases as u64 / 1000).max(1));
    let ready_limit = ready_limit(releases);
    println!(
        "Scale benchmark: {releases} HelmReleases of the webapp test chart (replicaCount 1: a \
         ConfigMap, a Deployment, a Service) in {release_namespaces} namespace(s), beside \
         {secrets} Secrets of {} KiB and {configmaps} ConfigMaps of {} KiB in {DATA_NAMESPACES} \
         other namespaces; `wheelhouse controller` {} (release build, all namespaces, {}), \
         local control plane (kwok node), {} CPUs",
        SECRET_BYTES / 1024,
        CONFIGMAP_BYTES / 1024,
        env!("CARGO_PKG_VERSION"),
        concurrent.map_or("default --concurrent".into(), |n| format!(
            "--concurrent {n}"
        )),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
    );

    // --- setup, before the controller runs ---------------------------------------------
    let setup = Instant::now();
    let system = TestNamespace::new(&client, "scale-system").await;
    let mut data = Vec::new();
    for i in 0..DATA_NAMESPACES {
        data.push(TestNamespace::new(&client, &format!("scale-data-{i}")).await);
    }
    let mut release_ns = Vec::new();
    for i in 0..release_namespaces {
        release_ns.push(TestNamespace::new(&client, &format!("scale-rel-{i:02}")).await);
    }
    let data_names: Vec<String> = data.iter().map(|n| n.name.clone()).collect();
    create_data(&client, &data_names, secrets, configmaps).await;
    println!(
        "setup: {secrets} Secrets + {configmaps} ConfigMaps ({:.0} MB of Secret data) and \
         {} namespaces created in {}",
        (secrets * SECRET_BYTES) as f64 / 1e6,
        DATA_NAMESPACES + release_namespaces + 1,
        duration(setup.elapsed())
    );

    // --- the controller --------------------------------------------------------------
    let mut controller = Controller::start(&system.name, concurrent);
    let pid = controller.pid();
    let (samples, sampler) = sample(pid);
    let started = Instant::now();
    wait_for_lease(&client, &system.name, &mut controller).await;
    let lease_after = started.elapsed();
    // Let the initial lists and watches (Secrets and ConfigMaps among them) settle.
    tokio::time::sleep(Duration::from_secs(5)).await;
    controller.check_running();
    let before = read_cpu(pid).expect("controller stat");
    let renders_before = render_ticks(pid);
    let (rss_before, _) = read_rss(pid).expect("controller status");
    println!(
        "controller: lease held {} after start; 5 s later, before any HelmRelease: RSS {:.1} MB, \
         CPU {:.2} s since start",
        duration(lease_after),
        mb(rss_before),
        secs(before.own, hz)
    );

    // --- the releases ----------------------------------------------------------------
    let cluster = cluster_pids();
    let cluster_before = cluster_cpu(&cluster);
    let first_created = Instant::now();
    // The releases' interval (default: the CRD's, 10 minutes). A short one puts the
    // interval checks a large fleet makes into a small fleet's idle window, to profile.
    let interval = std::env::var("WHEELHOUSE_BENCH_INTERVAL").ok();
    futures::stream::iter((0..releases).map(|i| {
        let ns = &release_ns[i / per_namespace].name;
        let api: Api<HelmRelease> = Api::namespaced(client.clone(), ns);
        let mut spec = serde_json::json!({"timeout": "5m", "values": {"replicaCount": 1}});
        if let Some(every) = &interval {
            spec["interval"] = every.as_str().into();
        }
        let mut hr = webapp(&format!("web-{i:05}"), spec);
        hr.metadata.labels = Some(BTreeMap::from([(BENCH_LABEL.into(), "scale".into())]));
        async move { api.create(&PostParams::default(), &hr).await.map(drop) }
    }))
    .buffer_unordered(IN_FLIGHT)
    .try_collect::<Vec<()>>()
    .await
    .expect("create the HelmReleases");
    let created = first_created.elapsed();
    println!(
        "{releases} HelmReleases created in {} (32 requests in flight)",
        duration(created)
    );

    let mut last_report = Instant::now();
    loop {
        controller.check_running();
        let listed = list_releases(&all).await;
        let n = listed.iter().filter(|h| ready(h)).count();
        if n == releases {
            break;
        }
        if first_created.elapsed() > ready_limit {
            panic!(
                "only {n} of {releases} HelmReleases became Ready within {}; the others:\n{}\
                 The namespaces are left for inspection. The tail of the controller's stderr:\n{}",
                duration(ready_limit),
                not_ready_report(&listed),
                controller.log_tail(60)
            );
        }
        if last_report.elapsed() >= Duration::from_secs(15) {
            last_report = Instant::now();
            let cpu = read_cpu(pid).unwrap_or_default();
            let (rss, _) = read_rss(pid).unwrap_or_default();
            eprintln!(
                "  {:>7}: {n}/{releases} Ready; controller RSS {:.1} MB, CPU {:.1} s, renders {:.1} s",
                duration(first_created.elapsed()),
                mb(rss),
                secs(cpu.own - before.own, hz),
                secs(render_ticks(pid) - renders_before, hz)
            );
        }
        tokio::time::sleep(poll_every).await;
    }
    let to_ready = first_created.elapsed();
    let at_ready = read_cpu(pid).expect("controller stat");
    let renders_at_ready = render_ticks(pid);
    let cluster_at_ready = cluster_cpu(&cluster);
    let (rss_at_ready, hwm_at_ready) = read_rss(pid).expect("controller status");
    let shape_at_ready = shape(pid);

    // --- idle ------------------------------------------------------------------------
    // Said as it starts, for a profiler to attach to the idle engine.
    eprintln!(
        "  {:>7}: all {releases} Ready; the idle window starts",
        duration(to_ready)
    );
    let requests_before_idle = api_requests(&client).await;
    let idle_start = Instant::now();
    tokio::time::sleep(IDLE_WINDOW).await;
    let idle_requests = requests_since(&requests_before_idle, &api_requests(&client).await);
    controller.check_running();
    let idle_elapsed = idle_start.elapsed();
    let after = read_cpu(pid).expect("controller stat");
    let renders_after = render_ticks(pid);
    let helper = helper_rss(pid);
    let (rss_end, hwm_end) = read_rss(pid).expect("controller status");
    let shape_end = shape(pid);
    sampler.abort();
    let samples = std::mem::take(&mut *samples.lock().unwrap());
    let still_ready = list_releases(&all).await;
    let still = still_ready.iter().filter(|h| ready(h)).count();

    let per_min = |ticks: u64| secs(ticks, hz) * 60.0 / idle_elapsed.as_secs_f64();
    let peak = mb(hwm_end);
    let idle = per_min(after.own - at_ready.own);
    println!();
    println!("{:<62} {:>12}   target", "", "measured");
    println!(
        "{:<62} {:>12}   ({:.1} releases/s)",
        format!("time from the first HelmRelease created to all {releases} Ready"),
        duration(to_ready),
        releases as f64 / to_ready.as_secs_f64()
    );
    if releases < 10_000 {
        println!(
            "{:<62} {:>9.1} MB   < {TARGET_RSS_MB:.0} MB    {}",
            "controller peak RSS (VmHWM)",
            peak,
            verdict(peak < TARGET_RSS_MB)
        );
    } else {
        println!("{:<62} {:>9.1} MB", "controller peak RSS (VmHWM)", peak);
    }
    println!(
        "{:<62} {:>10.1} s",
        "controller CPU, first HelmRelease to all Ready",
        secs(at_ready.own - before.own, hz)
    );
    let render_cpu = secs(renders_at_ready - renders_before, hz);
    println!(
        "{:<62} {:>10.1} s   (the render helper, or helm processes; not in the line above)",
        "renders' CPU, same period", render_cpu
    );
    let per_release_ms = render_cpu * 1000.0 / releases as f64;
    println!(
        "{:<62} {:>9.1} ms   < {TARGET_RENDER_CPU_MS:.0} ms    {}",
        "renders' CPU per release",
        per_release_ms,
        verdict(per_release_ms < TARGET_RENDER_CPU_MS)
    );
    if let Some((rss, hwm)) = helper {
        println!(
            "{:<62} {:>9.1} MB   (RSS at the end {:.1} MB)",
            "render helper peak RSS (VmHWM)",
            mb(hwm),
            mb(rss),
        );
        let total = peak + mb(hwm);
        if releases >= 10_000 {
            println!(
                "{:<62} {:>9.1} MB   < {TARGET_TOTAL_RSS_MB_AT_10K:.0} MB    {}",
                "controller + render helper peak RSS",
                total,
                verdict(total < TARGET_TOTAL_RSS_MB_AT_10K)
            );
        } else {
            println!(
                "{:<62} {:>9.1} MB",
                "controller + render helper peak RSS", total
            );
        }
    }
    println!(
        "{:<62} {:>6.2} s/min   < {TARGET_IDLE_CPU_PER_MIN:.0} s/min   {}",
        format!(
            "controller idle CPU after all Ready ({:.0} s window)",
            idle_elapsed.as_secs_f64()
        ),
        idle,
        verdict(idle < TARGET_IDLE_CPU_PER_MIN)
    );
    println!(
        "{:<62} {:>6.2} s/min",
        "renders' CPU in the same window",
        per_min(renders_after - renders_at_ready)
    );
    println!(
        "{:<62} {:>9.1} MB   (peak by then {:.1} MB; before the releases {:.1} MB)",
        "controller RSS when all were Ready",
        mb(rss_at_ready),
        mb(hwm_at_ready),
        mb(rss_before)
    );
    println!(
        "{:<62} {:>9.1} MB",
        "controller RSS at the end of the idle window",
        mb(rss_end)
    );
    println!("controller when all were Ready: RSS {shape_at_ready}");
    println!("controller at the end:          RSS {shape_end}");
    println!(
        "{:<62} {:>12}",
        "still Ready at the end of the idle window",
        format!("{still}/{releases}")
    );
    for ((name, _), (b, a)) in cluster
        .iter()
        .zip(cluster_before.iter().zip(&cluster_at_ready))
    {
        println!(
            "{:<62} {:>10.1} s",
            format!("for context: {name} CPU, same period"),
            secs(a - b, hz)
        );
    }
    let levels = controller.levels();
    println!(
        "controller log lines: {}; RSS sampled {} times every {} ms (max sampled {:.1} MB); \
         CPU from /proc/PID/stat at {hz:.0} ticks/s",
        levels
            .iter()
            .map(|(l, n)| format!("{n} {l}"))
            .collect::<Vec<_>>()
            .join(", "),
        samples.count,
        SAMPLE_EVERY.as_millis(),
        mb(samples.max_rss_kib)
    );
    println!(
        "for comparison: Flux's helm-controller + source-controller use about 205 MB resident \
         with 50 releases"
    );
    if still < releases {
        println!(
            "note: {} releases left Ready during the idle window:\n{}",
            releases - still,
            not_ready_report(&still_ready)
        );
    }
    print_requests("API requests in the idle window", &idle_requests);
    let warnings: BTreeSet<String> = controller
        .log()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| matches!(v["level"].as_str(), Some("WARN" | "ERROR")))
        .filter_map(|v| v["fields"]["message"].as_str().map(str::to_owned))
        .collect();
    if !warnings.is_empty() {
        println!("distinct controller warnings/errors:");
        for w in warnings.iter().take(10) {
            println!("  {w}");
        }
    }

    // --- a restart with every release in place ------------------------------------
    let records_before = storage_records(&client, &release_ns).await;
    let holder_before = lease_holder(&client, &system.name).await;
    let stopped_in = controller.terminate(Duration::from_secs(60));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let metrics_addr = format!("127.0.0.1:{port}");
    let concurrent_arg = concurrent.map(|n| n.to_string());
    let mut args = vec!["--metrics-addr", metrics_addr.as_str()];
    if let Some(n) = &concurrent_arg {
        args.extend(["--concurrent", n.as_str()]);
    }
    let cluster_before_restart = cluster_cpu(&cluster);
    let requests_before_restart = api_requests(&client).await;
    let mut restarted = Controller::start_with(&system.name, &args);
    let restart = Instant::now();
    let mut lease_after = None;
    let checked_after;
    let warmup = loop {
        restarted.check_running();
        if lease_after.is_none() {
            let holder = lease_holder(&client, &system.name).await;
            if holder.is_some() && holder != holder_before {
                lease_after = Some(restart.elapsed());
            }
        }
        if let Some(line) = warmup_line(&restarted.log()) {
            checked_after = restart.elapsed();
            break line;
        }
        assert!(
            restart.elapsed() < RESTART_LIMIT,
            "after a restart the controller did not say it reconciled every release within {}; \
             the tail of its stderr:\n{}",
            duration(RESTART_LIMIT),
            restarted.log_tail(60)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let restart_cpu = read_cpu(restarted.pid()).map_or(0, |c| c.own);
    let cluster_restart: Vec<u64> = cluster_cpu(&cluster)
        .iter()
        .zip(&cluster_before_restart)
        .map(|(after, before)| after - before)
        .collect();
    let restart_requests = requests_since(&requests_before_restart, &api_requests(&client).await);
    // The engine's own word, checked from outside: every release has its series.
    let series = releases_checked(&metrics_addr).await;
    // Anything a check was going to write has been written by now.
    tokio::time::sleep(Duration::from_secs(10)).await;
    restarted.check_running();
    let records_after = storage_records(&client, &release_ns).await;
    let (_, restart_hwm) = read_rss(restarted.pid()).expect("controller status");
    let after_restart = list_releases(&all).await;
    let upgraded: Vec<String> = after_restart
        .iter()
        .filter(|hr| {
            hr.status
                .as_ref()
                .and_then(|s| s.history.first())
                .is_none_or(|h| h.version != 1)
        })
        .map(|hr| {
            format!(
                "{}/{}",
                hr.metadata.namespace.as_deref().unwrap_or_default(),
                hr.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect();
    let ready_after = after_restart.iter().filter(|h| ready(h)).count();
    println!();
    println!("restart with {releases} releases in place (SIGTERM, then a new controller process):");
    println!(
        "{:<62} {:>12}",
        "  SIGTERM to the old controller's exit",
        duration(stopped_in)
    );
    println!(
        "{:<62} {:>12}",
        "  new controller started to the lease held",
        lease_after.map_or("not seen".into(), duration)
    );
    println!(
        "{:<62} {:>12}   < {} {}",
        format!("  started to all {releases} releases checked (reconciled once)"),
        duration(checked_after),
        duration(TARGET_RESTART),
        verdict(checked_after < TARGET_RESTART && series >= releases)
    );
    println!(
        "{:<62} {:>12}   (the engine's log: {} releases, {} after the lease)",
        "  releases with a reconcile series on /metrics then",
        series,
        warmup.0,
        duration(Duration::from_millis(warmup.1))
    );
    println!(
        "{:<62} {:>10.1} s",
        "  CPU meanwhile: the new controller",
        secs(restart_cpu, hz)
    );
    for ((name, _), ticks) in cluster.iter().zip(&cluster_restart) {
        println!(
            "{:<62} {:>10.1} s",
            format!("  CPU meanwhile: {name}"),
            secs(*ticks, hz)
        );
    }
    print_requests("  API requests meanwhile", &restart_requests);
    println!(
        "{:<62} {:>12}   (0 expected) {}",
        "  upgrades the restart made (storage records after - before)",
        records_after as i64 - records_before as i64,
        verdict(records_after == records_before && upgraded.is_empty())
    );
    println!(
        "{:<62} {:>12}",
        "  releases not at revision 1",
        upgraded.len()
    );
    for name in upgraded.iter().take(5) {
        println!("    {name}");
    }
    println!(
        "{:<62} {:>12}",
        "  Ready 10 s after all were checked",
        format!("{ready_after}/{releases}")
    );
    println!(
        "{:<62} {:>9.1} MB",
        "  new controller's peak RSS (VmHWM) by then",
        mb(restart_hwm)
    );

    drop(restarted);
    clean_up(&client, &after_restart, {
        let mut all_ns = release_ns;
        all_ns.extend(data);
        all_ns.push(system);
        all_ns
    })
    .await;
}

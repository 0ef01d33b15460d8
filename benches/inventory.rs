//! The dashboard's inventory of Helm's storage at scale, against the local control plane;
//! run it with `tests/bench.sh inventory`. N releases made by "the helm CLI"
//! (WHEELHOUSE_BENCH_RELEASES, default 2,000), two records each (superseded and
//! deployed), each record a realistic release (a chart with its templates, values and
//! files, a ~12 KB manifest; ~20 KB as stored) encoded as Helm stores it. Measured in the same run:
//!   - the baseline: a paginated LIST of the records whole, what a watch of whole Secrets
//!     would read at every start (time, and bytes of record data);
//!   - the inventory (`wheelhouse::frontend::inventory`): from start to every release listed (from
//!     the labels) and to every release read (chart, app version, description filled),
//!     and the process's RSS before and after.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ListParams, PostParams};
use support::{TestNamespace, client};
use wheelhouse::cluster::client::Scope;
use wheelhouse::frontend::inventory::Inventory;
use wheelhouse::helm::release::storage::{encode, secret_name};
use wheelhouse::helm::release::{Release, Status};

fn release(ns: &str, name: &str, version: i32, status: Status) -> Release {
    let template = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{{{ .Release.Name }}}}\n\
         spec:\n  replicas: {{{{ .Values.replicas }}}}\n  template:\n    spec:\n      containers:\n\
         {}",
        "      - name: app\n        image: registry.example/app:1.2.3\n        env:\n        - {name: A, value: b}\n"
            .repeat(20)
    );
    let manifest = format!(
        "---\n# Source: app/templates/deployment.yaml\n{}",
        template
            .replace("{{ .Release.Name }}", name)
            .replace("{{ .Values.replicas }}", "2")
    );
    let chart: wheelhouse::helm::chart::Chart = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "app", "version": "1.4.2", "appVersion": "1.2.3", "apiVersion": "v2"},
        "templates": [{"name": "templates/deployment.yaml",
                       "data": base64(template.as_bytes())}],
        "values": {"replicas": 2, "image": {"tag": "1.2.3"}},
        "schema": null, "lock": null,
        // A README and a dashboard JSON as charts ship them: text that compresses about
        // as real chart files do, so a record weighs what real ones weigh (~20 KB).
        "files": [{"name": "files/dashboard.json", "data": base64(&filler(name, 24_000))}],
    }))
    .expect("a chart");
    support::records::revision(ns, name, version, status, chart, manifest.repeat(3))
}

/// `len` bytes of hex text derived from `seed`: as incompressible as gzip finds JSON with
/// many distinct ids (about 2:1).
fn filler(seed: &str, len: usize) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut out = Vec::with_capacity(len);
    let mut h = Sha256::digest(seed.as_bytes());
    while out.len() < len {
        out.extend_from_slice(format!("{{\"id\": \"{}\"}},\n", hex::encode(h)).as_bytes());
        h = Sha256::digest(h);
    }
    out.truncate(len);
    out
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn record(ns: &str, r: &Release) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(secret_name(&r.name, r.version));
    s.metadata.namespace = Some(ns.into());
    s.metadata.labels = Some(
        [
            ("name", r.name.clone()),
            ("owner", "helm".into()),
            ("status", r.info.as_ref().unwrap().status.as_str().into()),
            ("version", r.version.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect(),
    );
    s.type_ = Some("helm.sh/release.v1".into());
    s.data = Some(
        [(
            "release".into(),
            ByteString(encode(r).unwrap().into_bytes()),
        )]
        .into(),
    );
    s
}

fn rss_mib() -> f64 {
    // read_rss gives KiB.
    support::process::read_rss(std::process::id()).map_or(0.0, |(rss, _)| rss as f64 / 1024.0)
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("WHEELHOUSE_BENCH_RELEASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let client = client().await;
    let ns = TestNamespace::new(&client, "inventory-bench").await;
    let api: Api<Secret> = Api::namespaced(client.clone(), &ns.name);
    let started = Instant::now();
    futures::stream::iter((0..n).flat_map(|i| {
        let name = format!("svc-{i:05}");
        [
            release(&ns.name, &name, 1, Status::Superseded),
            release(&ns.name, &name, 2, Status::Deployed),
        ]
    }))
    .map(|r| {
        let (api, s) = (api.clone(), record(&ns.name, &r));
        async move { api.create(&PostParams::default(), &s).await.unwrap() }
    })
    .buffer_unordered(32)
    .collect::<Vec<_>>()
    .await;
    println!(
        "{n} releases, {} storage records created in {:.1} s",
        2 * n,
        started.elapsed().as_secs_f64()
    );

    let before = rss_mib();
    let started = Instant::now();
    let inventory = Inventory::start(client.clone(), &Scope::Namespace(ns.name.clone()));
    let mut rx = inventory.subscribe();
    let (mut listed, mut read) = (None, None);
    let limit = Instant::now() + Duration::from_secs(600);
    while read.is_none() {
        assert!(
            Instant::now() < limit,
            "the inventory never read every release"
        );
        let _ = tokio::time::timeout(Duration::from_millis(500), rx.changed()).await;
        let others = rx.borrow_and_update().clone();
        if listed.is_none() && others.helm_listed && others.helm.len() >= n {
            listed = Some(started.elapsed());
        }
        if others.helm.len() >= n && others.helm.values().all(|s| !s.chart.is_empty()) {
            read = Some(started.elapsed());
        }
    }
    let with = rss_mib();
    // Baseline: the records read whole, page by page.
    let started = Instant::now();
    let (mut bytes, mut count, mut next) = (0usize, 0usize, None::<String>);
    loop {
        let mut params = ListParams::default().labels("owner=helm").limit(500);
        if let Some(c) = &next {
            params = params.continue_token(c);
        }
        let page = api.list(&params).await.unwrap();
        for s in &page.items {
            bytes += s
                .data
                .as_ref()
                .map_or(0, |d| d.values().map(|v| v.0.len()).sum());
        }
        count += page.items.len();
        next = page.metadata.continue_.filter(|c| !c.is_empty());
        if next.is_none() {
            break;
        }
    }
    let baseline = started.elapsed();
    println!(
        "baseline: LIST of the {count} records whole            {:>7.2} s   ({:.0} MB of record data)",
        baseline.as_secs_f64(),
        bytes as f64 / 1e6
    );

    let (listed, read) = (listed.unwrap(), read.unwrap());
    println!(
        "inventory: every release listed (labels)              {:>7.2} s   ({:.2}x the baseline)",
        listed.as_secs_f64(),
        listed.as_secs_f64() / baseline.as_secs_f64()
    );
    println!(
        "inventory: every release read (chart, app version)    {:>7.2} s   ({:.2}x the baseline)",
        read.as_secs_f64(),
        read.as_secs_f64() / baseline.as_secs_f64()
    );
    println!("RSS of this process: {before:.0} MiB before the inventory, {with:.0} MiB with it");
    drop(inventory);
    ns.delete().await;
}

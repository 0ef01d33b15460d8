//! The Timeline at scale, against the local control plane; run it with
//! `tests/bench.sh timeline`. N releases (WHEELHOUSE_BENCH_RELEASES, default 5,000) in 10
//! namespaces, R revisions each (WHEELHOUSE_BENCH_REVISIONS, default 10), every record a
//! small release encoded as Helm stores it, all written within the window. Measured in
//! the same run:
//!   - the dashboard's Timeline: with the dashboard's inventory up (every record listed
//!     by its labels, the table's newest records read), from `T` to its first screen
//!     drawn with every revision on it read whole (target < 1 s), the memory opening it
//!     adds (target < 50 MB), and a new revision's record to the top row (live);
//!   - the baseline: `wheelhouse timeline`'s read of the same window (the records' labels
//!     listed, those in the window read whole), the way the view loaded before.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;

use support::{TestNamespace, client, records};
use wheelhouse::cluster::client::Scope;
use wheelhouse::engine::Role;
use wheelhouse::frontend::inventory::Inventory;
use wheelhouse::frontend::tui::app::App;
use wheelhouse::frontend::tui::effect::{Effect, IoResult};
use wheelhouse::frontend::tui::theme::Theme;
use wheelhouse::helm::release::Status;
use wheelhouse::helm::release::storage::Storage;

const NAMESPACES: usize = 10;
const FIRST_SCREEN: Duration = Duration::from_secs(1);
const ADDED_MB: f64 = 50.0;

fn rss_mib() -> f64 {
    support::process::read_rss(std::process::id()).map_or(0.0, |(rss, _)| rss as f64 / 1024.0)
}

fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

#[tokio::main]
async fn main() {
    let var = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let n = var("WHEELHOUSE_BENCH_RELEASES", 5000);
    let revisions = var("WHEELHOUSE_BENCH_REVISIONS", 10) as i32;
    let client = client().await;
    let mut namespaces = Vec::new();
    for _ in 0..NAMESPACES {
        namespaces.push(TestNamespace::new(&client, "timeline-bench").await);
    }
    let names: Vec<String> = namespaces.iter().map(|ns| ns.name.clone()).collect();
    let started = Instant::now();
    futures::stream::iter((0..n).flat_map(|i| {
        let ns = names[i % NAMESPACES].clone();
        (1..=revisions).map(move |v| {
            let status = if v == revisions {
                Status::Deployed
            } else {
                Status::Superseded
            };
            (
                ns.clone(),
                records::release(&ns, &format!("svc-{i:05}"), v, status),
            )
        })
    }))
    .map(|(ns, r)| {
        let storage = Storage::new(client.clone(), &ns);
        async move { storage.create(&r).await.unwrap() }
    })
    .buffer_unordered(64)
    .collect::<Vec<_>>()
    .await;
    let records = n * revisions as usize;
    println!(
        "{n} releases, {records} storage records in {NAMESPACES} namespaces created in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // The dashboard up: its inventory has listed every record and read the table's.
    let inventory = Inventory::start(client.clone(), &Scope::All);
    let mut rx = inventory.subscribe();
    let started = Instant::now();
    let limit = Instant::now() + Duration::from_secs(900);
    loop {
        assert!(
            Instant::now() < limit,
            "the inventory never read every release"
        );
        let _ = tokio::time::timeout(Duration::from_millis(500), rx.changed()).await;
        let others = rx.borrow_and_update().clone();
        let ours = |k: &wheelhouse::engine::ReleaseKey| names.contains(&k.namespace);
        if others.helm_listed
            && others.revisions.keys().filter(|(k, _)| ours(k)).count() >= records
            && others
                .helm
                .iter()
                .filter(|(k, _)| ours(k))
                .all(|(_, s)| !s.chart.is_empty())
        {
            break;
        }
    }
    println!(
        "dashboard inventory: every record listed, the table's read in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let mut app = App::new(
        "bench".into(),
        Scope::All,
        false,
        Theme::builtin("dark").expect("shipped theme"),
        Timestamp::now(),
    );
    app.role = Role::Leader;
    app.page = 40;
    app.set_others(rx.borrow_and_update().clone());
    let before = rss_mib();
    // `T`, then what the run loop does: the rows built, the records on screen read (a
    // task each), the first screen drawn with them.
    let opened = Instant::now();
    app.now = Timestamp::now();
    app.on_key(KeyEvent::new(KeyCode::Char('T'), KeyModifiers::NONE));
    let effects = app.refresh_timeline();
    let built = opened.elapsed();
    let mut read = 0;
    for effect in effects {
        if let Effect::ReadRevisions(wanted) = effect {
            let results = futures::future::join_all(wanted.into_iter().map(|record| {
                let client = client.clone();
                tokio::spawn(async move {
                    let change =
                        wheelhouse::frontend::tui::io::read_revision(client, &record).await;
                    (record, change)
                })
            }))
            .await;
            for result in results {
                let (record, change) = result.unwrap();
                read += usize::from(change.is_some());
                app.on_io(IoResult::TimelineRevision(record, change));
            }
        }
    }
    // The run loop's next turn: the rows sorted again with the records' own times.
    app.refresh_timeline();
    let screen = wheelhouse::frontend::tui::render(&app, 160, 48);
    let first_screen = opened.elapsed();
    let after = rss_mib();
    let rows = app.timeline.as_ref().map_or(0, |v| v.rows.len());
    let text = screen.backend().to_string();
    assert!(text.contains("Timeline ·"), "no timeline drawn:\n{text}");

    // Live: a new revision of one release, to the top row.
    let (ns, name) = (names[0].clone(), "svc-00000".to_owned());
    let storage = Storage::new(client.clone(), &ns);
    let newest = revisions + 1;
    let written = Instant::now();
    storage
        .create(&records::release(&ns, &name, newest, Status::Deployed))
        .await
        .unwrap();
    let live = loop {
        let _ = tokio::time::timeout(Duration::from_millis(100), rx.changed()).await;
        app.set_others(rx.borrow_and_update().clone());
        app.now = Timestamp::now();
        app.refresh_timeline();
        let top = app.timeline.as_ref().and_then(|v| v.rows.first().cloned());
        if top.is_some_and(|c| c.release == name && c.revision == Some(newest)) {
            break written.elapsed();
        }
        assert!(
            written.elapsed() < Duration::from_secs(30),
            "the new revision never came to the top"
        );
    };

    // Baseline: the window read as `wheelhouse timeline` reads it.
    let since = Timestamp::now()
        .checked_sub(jiff_hours(24))
        .unwrap_or(Timestamp::UNIX_EPOCH);
    let started = Instant::now();
    let baseline = wheelhouse::frontend::timeline::collect::changes(&client, &Scope::All, since)
        .await
        .expect("the baseline reads");
    let baseline_took = started.elapsed();

    println!(
        "Timeline over {records} records ({n} releases x {revisions} revisions), wheelhouse {}:",
        env!("CARGO_PKG_VERSION")
    );
    println!(
        "  T -> first screen drawn, its {read} revisions read whole: {:>8.1} ms  (rows built in {:.1} ms, {rows} rows)  target < {} ms: {}",
        first_screen.as_secs_f64() * 1000.0,
        built.as_secs_f64() * 1000.0,
        FIRST_SCREEN.as_millis(),
        verdict(first_screen < FIRST_SCREEN)
    );
    println!(
        "  memory opening it adds:                    {:>8.1} MB  (RSS {before:.0} -> {after:.0} MiB)  target < {ADDED_MB} MB: {}",
        after - before,
        verdict(after - before < ADDED_MB)
    );
    println!(
        "  a new revision's record -> the top row:    {:>8.1} ms",
        live.as_secs_f64() * 1000.0
    );
    println!(
        "  baseline, the window read whole (`wheelhouse timeline`): {:.1} s for {} changes: the view's first screen is {:.0}x sooner",
        baseline_took.as_secs_f64(),
        baseline.len(),
        baseline_took.as_secs_f64() / first_screen.as_secs_f64()
    );
    drop(inventory);
    for ns in namespaces {
        ns.delete().await;
    }
}

fn jiff_hours(hours: i64) -> k8s_openapi::jiff::SignedDuration {
    k8s_openapi::jiff::SignedDuration::from_hours(hours)
}

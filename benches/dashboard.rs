//! Dashboard with 5,000 releases (synthetic engine views): time to take a new views
//! snapshot (rows, filter, sort), time to draw a frame, and the process's memory.
//!
//! Run: `cargo bench --bench dashboard`

use std::time::{Duration, Instant};

use wheelhouse::client::Scope;
use wheelhouse::engine::Role;
use wheelhouse::tui::app::App;
use wheelhouse::tui::theme::Theme;
use wheelhouse::tui::{demo, render};

const RELEASES: usize = 5_000;
const ROUNDS: u32 = 200;

/// Resident and peak resident memory from /proc (Linux), in MiB.
fn memory() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn per_round(total: Duration) -> String {
    format!("{:.2} ms", total.as_secs_f64() * 1000.0 / f64::from(ROUNDS))
}

fn main() {
    let (rss_before, _) = memory();
    let views = demo::many(RELEASES);
    let mut app = App::new(
        "bench".into(),
        Scope::All,
        false,
        Theme::builtin("dark").expect("shipped theme"),
        demo::now(),
    );
    app.role = Role::Leader;
    // READY: replica counts of the releases' workloads, looked up per row.
    app.set_replicas(demo::many_replicas(RELEASES));

    // A new views snapshot arrives (one per watch event): rows rebuilt, filtered, sorted.
    let start = Instant::now();
    for _ in 0..ROUNDS {
        app.set_views(views.clone());
    }
    let update = start.elapsed();

    let mut frames = Vec::new();
    for (w, h) in [(200, 60), (120, 40), (80, 24)] {
        app.selected = RELEASES / 2;
        let start = Instant::now();
        for i in 0..ROUNDS {
            app.now = demo::now() + Duration::from_millis(u64::from(i) * 250);
            std::hint::black_box(render(&app, w, h));
        }
        frames.push(((w, h), start.elapsed()));
    }

    app.filter = "team-07".into();
    let start = Instant::now();
    for _ in 0..ROUNDS {
        app.set_views(views.clone());
    }
    let filtered = start.elapsed();
    let (rss, peak) = memory();

    println!("dashboard benchmark: {RELEASES} releases, mean of {ROUNDS} rounds");
    println!("  views update (rows, sort):        {}", per_round(update));
    println!(
        "  views update with a filter:       {}",
        per_round(filtered)
    );
    for ((w, h), t) in frames {
        println!("  frame {w}x{h} (table, cursor mid-list): {}", per_round(t));
    }
    println!(
        "  memory: {rss:.1} MiB resident ({:.1} MiB for views and app), peak {peak:.1} MiB",
        rss - rss_before
    );
}

//! Dashboard with 5,000 releases (synthetic engine views): time to take the whole list
//! (rows, filter, sort), time to take a snapshot where 10 releases changed (the
//! incremental path, as a ratio to the whole list), time to draw a frame, and memory; and
//! a diff of thousands of lines in the changes view: computing it, drawing a frame of it,
//! a search across it, each beside the table's frame measured in the same run.
//!
//! Run: `cargo bench --bench dashboard`

use std::time::{Duration, Instant};

use wheelhouse::cluster::client::Scope;
use wheelhouse::engine::Role;
use wheelhouse::frontend::tui::app::App;
use wheelhouse::frontend::tui::theme::Theme;
use wheelhouse::frontend::tui::{demo, render};

const RELEASES: usize = 5_000;
const ROUNDS: u32 = 200;
/// Releases changed per snapshot in the incremental case.
const CHANGED: usize = 10;

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

    // The whole list arrives at once (the first list): every row built and sorted.
    let empty = std::sync::Arc::new(wheelhouse::engine::Views::default());
    let start = Instant::now();
    for _ in 0..ROUNDS {
        app.set_views(empty.clone());
        app.set_views(views.clone());
    }
    let update = start.elapsed();
    // Measured before the incremental case, whose 200 prepared snapshots are not the app's.
    let (rss, peak) = memory();

    // A publish tick during a rollout: 10 releases changed since the last snapshot.
    let keys: Vec<_> = views.keys().cloned().collect();
    let snapshots: Vec<_> = (0..ROUNDS as usize)
        .map(|round| {
            let mut next = (*views).clone();
            for i in 0..CHANGED {
                let key = &keys[(round * 7919 + i * 104_729) % keys.len()];
                let mut view = next[key].clone();
                std::sync::Arc::make_mut(&mut view.release).spec.suspend ^= true;
                next.insert(key.clone(), view);
            }
            std::sync::Arc::new(next)
        })
        .collect();
    app.set_views(views.clone());
    let start = Instant::now();
    for snapshot in &snapshots {
        app.set_views(snapshot.clone());
    }
    let incremental = start.elapsed();
    app.set_views(views.clone());
    drop(snapshots);

    let mut frames = Vec::new();
    for (w, h) in [(200, 60), (120, 40), (80, 24)] {
        app.table.selected = RELEASES / 2;
        let start = Instant::now();
        for i in 0..ROUNDS {
            app.now = demo::now() + Duration::from_millis(u64::from(i) * 250);
            std::hint::black_box(render(&app, w, h));
        }
        frames.push(((w, h), start.elapsed()));
    }

    app.table.filter = "team-07".into();
    let start = Instant::now();
    for _ in 0..ROUNDS {
        app.set_views(empty.clone());
        app.set_views(views.clone());
    }
    let filtered = start.elapsed();

    let diff = diff_figures(&mut app);

    println!("dashboard benchmark: {RELEASES} releases, mean of {ROUNDS} rounds");
    println!("  whole list arrives (rows, sort):  {}", per_round(update));
    println!(
        "  {CHANGED} releases changed:             {} ({:.0}x less than the whole list)",
        per_round(incremental),
        update.as_secs_f64() / incremental.as_secs_f64()
    );
    println!(
        "  whole list with a filter:         {}",
        per_round(filtered)
    );
    for ((w, h), t) in frames {
        println!("  frame {w}x{h} (table, cursor mid-list): {}", per_round(t));
    }
    println!(
        "  memory: {rss:.1} MiB resident ({:.1} MiB for views and app), peak {peak:.1} MiB",
        rss - rss_before
    );
    diff.print();
}

/// Objects in the diffed manifests, each of which changes.
const OBJECTS: usize = 600;

struct DiffFigures {
    lines: usize,
    compute: Duration,
    table_frame: Duration,
    frame: Duration,
    search: Duration,
}

impl DiffFigures {
    fn print(&self) {
        let table = self.table_frame.as_secs_f64();
        println!(
            "changes view: a diff of {} lines ({OBJECTS} objects changed)",
            self.lines
        );
        println!(
            "  computed once (values and manifest): {:.1} ms",
            self.compute.as_secs_f64() * 1000.0
        );
        println!(
            "  frame 120x40 mid-diff: {} ({:.2}x the table's frame in this run)",
            per_round(self.frame),
            self.frame.as_secs_f64() / table
        );
        println!(
            "  search `n` across the diff: {} ({:.2}x the table's frame)",
            per_round(self.search),
            self.search.as_secs_f64() / table
        );
    }
}

/// A manifest of OBJECTS Deployments, their image at `tag`.
fn manifest(tag: &str) -> String {
    (0..OBJECTS)
        .map(|i| {
            format!(
                "---\n# Source: app/templates/d{i}.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\n  labels:\n    team: team-{}\nspec:\n  replicas: 2\n  selector:\n    matchLabels:\n      app: app-{i}\n  template:\n    metadata:\n      labels:\n        app: app-{i}\n    spec:\n      containers:\n      - name: app\n        image: registry.example/app-{i}:{tag}\n        ports:\n        - containerPort: 8080\n",
                i % 10
            )
        })
        .collect()
}

fn diff_figures(app: &mut App) -> DiffFigures {
    use wheelhouse::frontend::tui::components::changes::ChangesView;
    let (old, new) = (manifest("1.0.0"), manifest("1.0.1"));
    let start = Instant::now();
    let (lines, summary) = wheelhouse::frontend::tui::diff::release_diff(
        &serde_json::json!({"tag": "1.0.0"}),
        &old,
        &serde_json::json!({"tag": "1.0.1"}),
        &new,
    );
    let compute = start.elapsed();
    let count = lines.len();

    app.table.selected = app.table.rows.len() / 2;
    let start = Instant::now();
    for _ in 0..ROUNDS {
        std::hint::black_box(render(app, 120, 40));
    }
    let table_frame = start.elapsed();

    let mut view = ChangesView::new("bench".into(), 1);
    view.loaded(1, Ok((lines, summary)));
    view.top = count / 2;
    app.changes = Some(view);
    let start = Instant::now();
    for _ in 0..ROUNDS {
        std::hint::black_box(render(app, 120, 40));
    }
    let frame = start.elapsed();

    // The one line that says app-599's new image: found from the top each round.
    let view = app.changes.as_mut().expect("set above");
    view.search = Some("APP-599:1.0.1".into());
    let start = Instant::now();
    for _ in 0..ROUNDS {
        view.top = 0;
        view.search_next();
    }
    let search = start.elapsed();
    assert!(view.lines[view.top].text().contains("app-599:1.0.1"));
    app.changes = None;
    DiffFigures {
        lines: count,
        compute,
        table_frame,
        frame,
        search,
    }
}

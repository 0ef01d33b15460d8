//! The MTTR table (see `mttr_table`) while 1,000 releases upgrade at once: each fix is
//! pushed while at least 300 routine upgrades are still in line (a new burst starts when
//! fewer are); run it with `tests/bench.sh mttr-busy`.

#[path = "../tests/support/mod.rs"]
mod support;
#[path = "mttr_table/mod.rs"]
#[allow(dead_code)] // Flux's rows run in `mttr`
mod table;

#[tokio::main]
async fn main() {
    let runs = std::env::var("WHEELHOUSE_BENCH_TABLE_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(10);
    let releases = std::env::var("WHEELHOUSE_BENCH_RELEASES")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1000);
    support::log_from_env();
    let client = support::client().await;
    support::install_crd(&client).await;
    println!(
        "MTTR while {releases} releases upgrade at once: {runs} runs a row, local control plane \
         (kwok node), wheelhouse {}",
        env!("CARGO_PKG_VERSION")
    );
    let rows = table::ours(&client, runs, Some(releases)).await;
    table::print(&rows);
    table::print_stages(&rows);
}

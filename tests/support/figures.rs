//! How benchmarks print their figures: median, min and max of each sample.

use std::time::Duration;

pub fn stats(mut d: Vec<Duration>) -> (Duration, Duration, Duration) {
    d.sort();
    (d[d.len() / 2], d[0], d[d.len() - 1])
}

pub fn fmt(d: Duration) -> String {
    if d < Duration::from_millis(100) {
        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
    } else if d < Duration::from_secs(2) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// Prints one row (`label`, median, min, max) and returns the median.
pub fn row(label: &str, d: Vec<Duration>) -> Duration {
    let (median, min, max) = stats(d);
    println!(
        "{label:<58} median {:>9}   min {:>9}   max {:>9}",
        fmt(median),
        fmt(min),
        fmt(max)
    );
    median
}

/// `WHEELHOUSE_BENCH_RUNS`, else `default`.
pub fn runs(default: usize) -> usize {
    std::env::var("WHEELHOUSE_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(default)
}

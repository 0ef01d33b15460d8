//! How long ago, or how long left, as the dashboard and the CLI print it: kubectl's style
//! (`45s`, `12m`, `3h`, `5d`), and the same with seconds under two hours (`4m12s`) where
//! a countdown or a recent change is read closely.

use k8s_openapi::jiff::Timestamp;

/// kubectl's age of `then` at `now`: 45s, 12m, 3h, 5d.
pub fn since(then: Timestamp, now: Timestamp) -> String {
    coarse(now.duration_since(then).as_secs().max(0))
}

/// kubectl's style for a number of seconds: 45s, 12m, 3h, 5d.
pub fn coarse(secs: i64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m", s / 60),
        s => days_or_hours(s),
    }
}

/// The same, with the seconds under two hours: 42s, 4m12s, 3h, 5d.
pub fn precise(secs: i64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 2 * 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => days_or_hours(s),
    }
}

fn days_or_hours(secs: i64) -> String {
    if secs < 48 * 3600 {
        format!("{}h", secs / 3600)
    } else {
        format!("{}d", secs / 86400)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_like_kubectl() {
        let now: Timestamp = "2026-01-02T00:00:00Z".parse().unwrap();
        let ago = |s: i64| now - std::time::Duration::from_secs(s as u64);
        assert_eq!(since(ago(5), now), "5s");
        assert_eq!(since(ago(600), now), "10m");
        assert_eq!(since(ago(3 * 3600), now), "3h");
        assert_eq!(since(ago(5 * 86400), now), "5d");
        // A time after now (clock skew) is no age.
        assert_eq!(since(now + std::time::Duration::from_secs(9), now), "0s");
    }

    #[test]
    fn precise_keeps_the_seconds_under_two_hours() {
        assert_eq!(precise(42), "42s");
        assert_eq!(precise(252), "4m12s");
        assert_eq!(precise(3 * 3600 + 5), "3h");
        assert_eq!(precise(3 * 86400), "3d");
    }
}

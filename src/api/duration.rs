//! Go-style durations (`10m`, `1h30m`, `500ms`) as the Kubernetes ecosystem writes them in
//! specs. Parsed into [`std::time::Duration`]; the API server enforces the same grammar
//! through the schema pattern, so an object it accepts always parses here.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The pattern Flux uses for `metav1.Duration` fields, so the same values are accepted.
pub const PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(pub std::time::Duration);

impl Duration {
    pub const fn from_secs(secs: u64) -> Self {
        Self(std::time::Duration::from_secs(secs))
    }

    pub const fn as_std(self) -> std::time::Duration {
        self.0
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Self(d)
    }
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: {reason} (expected e.g. 30s, 5m, 1h30m)")]
pub struct ParseDurationError {
    input: String,
    reason: &'static str,
}

impl FromStr for Duration {
    type Err = ParseDurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| ParseDurationError {
            input: s.to_owned(),
            reason,
        };
        if s.is_empty() {
            return Err(err("empty"));
        }
        // Go accepts a bare "0"; so do we.
        if s == "0" {
            return Ok(Self(std::time::Duration::ZERO));
        }
        let mut rest = s;
        let mut nanos: u128 = 0;
        while !rest.is_empty() {
            let number_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(|| err("missing unit"))?;
            if number_len == 0 {
                return Err(err("expected a number"));
            }
            let (number, tail) = rest.split_at(number_len);
            let unit_len = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, tail) = tail.split_at(unit_len);
            let unit_nanos: u128 = match unit {
                "ns" => 1,
                "us" | "µs" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60 * 1_000_000_000,
                "h" => 3_600 * 1_000_000_000,
                _ => return Err(err("unknown unit")),
            };
            let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
            if whole.is_empty() || (number.contains('.') && frac.is_empty()) {
                return Err(err("malformed number"));
            }
            let whole: u128 = whole.parse().map_err(|_| err("number too large"))?;
            let mut value = whole
                .checked_mul(unit_nanos)
                .ok_or_else(|| err("number too large"))?;
            let mut scale = unit_nanos;
            for digit in frac.bytes() {
                scale /= 10;
                value += u128::from(digit - b'0') * scale;
            }
            nanos = nanos
                .checked_add(value)
                .ok_or_else(|| err("number too large"))?;
            rest = tail;
        }
        let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| err("number too large"))?;
        Ok(Self(std::time::Duration::new(
            secs,
            (nanos % 1_000_000_000) as u32,
        )))
    }
}

impl fmt::Display for Duration {
    /// Compact Go-like form: `1h30m`, `5m`, `45s`, `250ms`, `0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let total = self.0;
        if total.is_zero() {
            return f.write_str("0s");
        }
        let secs = total.as_secs();
        let sub = total.subsec_nanos();
        if secs == 0 {
            return if sub.is_multiple_of(1_000_000) {
                write!(f, "{}ms", sub / 1_000_000)
            } else {
                write!(f, "{sub}ns")
            };
        }
        let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 || sub > 0 {
            if sub > 0 {
                let frac = format!("{:09}", sub);
                write!(f, "{s}.{}s", frac.trim_end_matches('0'))?;
            } else {
                write!(f, "{s}s")?;
            }
        }
        Ok(())
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = Cow::<str>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Duration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": PATTERN,
            "description": "A duration such as 30s, 5m or 1h30m.",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> std::time::Duration {
        s.parse::<Duration>().unwrap().0
    }

    #[test]
    fn parses_go_durations() {
        assert_eq!(d("10m"), std::time::Duration::from_secs(600));
        assert_eq!(d("1h30m"), std::time::Duration::from_secs(5400));
        assert_eq!(d("1.5s"), std::time::Duration::from_millis(1500));
        assert_eq!(d("250ms"), std::time::Duration::from_millis(250));
        assert_eq!(d("2us"), std::time::Duration::from_micros(2));
        assert_eq!(d("2µs"), std::time::Duration::from_micros(2));
        assert_eq!(d("0"), std::time::Duration::ZERO);
        assert_eq!(d("1m0s"), std::time::Duration::from_secs(60));
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "5", "m", "5 m", "5d", "1.m", ".5s", "-5s", "5m3"] {
            assert!(bad.parse::<Duration>().is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn displays_compactly_and_round_trips() {
        for s in ["10m", "1h30m", "45s", "250ms", "1.5s", "0s", "2h"] {
            assert_eq!(s.parse::<Duration>().unwrap().to_string(), s);
        }
    }
}

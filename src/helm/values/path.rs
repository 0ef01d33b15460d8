//! `targetPath`: Helm `--set` key syntax (`a.b`, `list[0].name`, `a\.b` for a key with a
//! dot) and Flux's typing of the value set there.

use serde_json::{Map, Value};

/// Helm caps list indexes the same way, so a typo cannot allocate gigabytes.
const MAX_INDEX: usize = 65_536;

/// What is wrong with a path in `--set` syntax.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("empty path")]
    Empty,
    #[error("must start with a key")]
    StartsWithIndex,
    #[error("empty key (two dots, or a leading dot)")]
    EmptyKey,
    #[error("ends with '.'")]
    TrailingDot,
    #[error("ends with a lone backslash")]
    LoneBackslash,
    #[error("a list index must follow a key")]
    IndexWithoutKey,
    #[error("expected '.' or '[' after ']'")]
    AfterIndex,
    #[error("unclosed '['")]
    Unclosed,
    #[error("']' without '['")]
    Unopened,
    #[error("list index {0:?} is not a non-negative number")]
    NotAnIndex(String),
    #[error("list index {0} is above the limit {max}", max = MAX_INDEX)]
    IndexTooLarge(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

fn parse(path: &str) -> Result<Vec<Segment>, PathError> {
    let mut segments = Vec::new();
    let mut key = String::new();
    let mut chars = path.chars().peekable();
    // Whether a key is expected next: at the start and after a '.'.
    let mut want_key = true;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let escaped = chars.next().ok_or(PathError::LoneBackslash)?;
                if !want_key {
                    return Err(PathError::AfterIndex);
                }
                key.push(escaped);
            }
            '.' => {
                if want_key {
                    if key.is_empty() {
                        return Err(PathError::EmptyKey);
                    }
                    segments.push(Segment::Key(std::mem::take(&mut key)));
                }
                want_key = true;
            }
            '[' => {
                if want_key {
                    if key.is_empty() {
                        return Err(PathError::IndexWithoutKey);
                    }
                    segments.push(Segment::Key(std::mem::take(&mut key)));
                }
                let mut digits = String::new();
                loop {
                    match chars.next() {
                        Some(']') => break,
                        Some(d) => digits.push(d),
                        None => return Err(PathError::Unclosed),
                    }
                }
                let index: usize = digits
                    .trim()
                    .parse()
                    .map_err(|_| PathError::NotAnIndex(digits.clone()))?;
                if index > MAX_INDEX {
                    return Err(PathError::IndexTooLarge(index));
                }
                segments.push(Segment::Index(index));
                want_key = false;
            }
            ']' => return Err(PathError::Unopened),
            c => {
                if !want_key {
                    return Err(PathError::AfterIndex);
                }
                key.push(c);
            }
        }
    }
    if want_key {
        if key.is_empty() {
            return Err(if segments.is_empty() {
                PathError::Empty
            } else {
                PathError::TrailingDot
            });
        }
        segments.push(Segment::Key(key));
    }
    Ok(segments)
}

/// Flux's typing for a targetPath value: wrapped in single or double quotes, it is the
/// string inside them; otherwise Helm's `--set` typing applies (`true`/`false`/`null` in
/// any case, integers without a leading zero), and anything else — floats, `0123`,
/// `yes` — stays a string. Unlike `--set`, commas do not split the value.
pub fn typed_value(raw: &str) -> Value {
    let quoted = raw.len() >= 2
        && ((raw.starts_with('"') && raw.ends_with('"'))
            || (raw.starts_with('\'') && raw.ends_with('\'')));
    if quoted {
        return Value::String(raw.trim_matches(['"', '\'']).to_owned());
    }
    if raw.eq_ignore_ascii_case("true") {
        return Value::Bool(true);
    }
    if raw.eq_ignore_ascii_case("false") {
        return Value::Bool(false);
    }
    if raw.eq_ignore_ascii_case("null") {
        return Value::Null;
    }
    if raw == "0" {
        return Value::from(0);
    }
    if !raw.starts_with('0')
        && let Ok(n) = raw.parse::<i64>()
    {
        return Value::from(n);
    }
    Value::String(raw.to_owned())
}

/// Sets `value` at `path`, creating maps and lists on the way (lists are padded with
/// nulls, as Helm does) and replacing anything of the wrong type.
pub fn set(values: &mut Map<String, Value>, path: &str, value: Value) -> Result<(), PathError> {
    let segments = parse(path)?;
    let Some((Segment::Key(first), rest)) = segments.split_first() else {
        return Err(PathError::StartsWithIndex);
    };
    let slot = values.entry(first.clone()).or_insert(Value::Null);
    set_in(slot, rest, value);
    Ok(())
}

fn set_in(slot: &mut Value, segments: &[Segment], value: Value) {
    let Some((segment, rest)) = segments.split_first() else {
        *slot = value;
        return;
    };
    match segment {
        Segment::Key(key) => {
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            let map = slot.as_object_mut().expect("just made an object");
            set_in(map.entry(key.clone()).or_insert(Value::Null), rest, value);
        }
        Segment::Index(index) => {
            if !slot.is_array() {
                *slot = Value::Array(Vec::new());
            }
            let list = slot.as_array_mut().expect("just made an array");
            if list.len() <= *index {
                list.resize(index + 1, Value::Null);
            }
            set_in(&mut list[*index], rest, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys(path: &str) -> Vec<Segment> {
        parse(path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
    }

    #[test]
    fn parses_helm_set_paths() {
        use Segment::{Index as I, Key as K};
        assert_eq!(keys("a"), [K("a".into())]);
        assert_eq!(keys("a.b.c"), [K("a".into()), K("b".into()), K("c".into())]);
        assert_eq!(
            keys("a.list[2].name"),
            [K("a".into()), K("list".into()), I(2), K("name".into())]
        );
        assert_eq!(keys("m[0][1]"), [K("m".into()), I(0), I(1)]);
        assert_eq!(
            keys(r"podAnnotations.prometheus\.io/scrape"),
            [K("podAnnotations".into()), K("prometheus.io/scrape".into())]
        );
        assert_eq!(keys(r"a\\b"), [K(r"a\b".into())]);
    }

    #[test]
    fn rejects_malformed_paths() {
        for bad in [
            "", ".a", "a..b", "a.", "[0]", "a[x]", "a[-1]", "a[1", "a]", "a[0]b", r"a\", "a[70000]",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn sets_nested_values_and_pads_lists() {
        let mut values = Map::new();
        set(&mut values, "image.tag", json!("v2")).unwrap();
        set(&mut values, "hosts[2].name", json!("c")).unwrap();
        set(&mut values, r"ann.a\.b", json!(1)).unwrap();
        assert_eq!(
            Value::Object(values),
            json!({
                "image": {"tag": "v2"},
                "hosts": [null, null, {"name": "c"}],
                "ann": {"a.b": 1}
            })
        );
    }

    #[test]
    fn keeps_siblings_and_replaces_wrong_types() {
        let mut values =
            json!({"image": {"repo": "x", "tag": "v1"}, "list": "scalar", "n": [1, 2]})
                .as_object()
                .unwrap()
                .clone();
        set(&mut values, "image.tag", json!("v2")).unwrap();
        set(&mut values, "list[0]", json!("a")).unwrap();
        set(&mut values, "n[1]", json!(9)).unwrap();
        set(&mut values, "image.repo.deeper", json!(true)).unwrap();
        assert_eq!(
            Value::Object(values),
            json!({"image": {"repo": {"deeper": true}, "tag": "v2"}, "list": ["a"], "n": [1, 9]})
        );
    }

    #[test]
    fn types_values_like_flux() {
        assert_eq!(typed_value("3"), json!(3));
        assert_eq!(typed_value("-12"), json!(-12));
        assert_eq!(typed_value("0"), json!(0));
        assert_eq!(typed_value("0123"), json!("0123"));
        assert_eq!(typed_value("1.5"), json!("1.5"));
        assert_eq!(typed_value("TRUE"), json!(true));
        assert_eq!(typed_value("false"), json!(false));
        assert_eq!(typed_value("Null"), json!(null));
        assert_eq!(typed_value("yes"), json!("yes"));
        assert_eq!(typed_value("a,b=c"), json!("a,b=c"));
        assert_eq!(typed_value("\"3\""), json!("3"));
        assert_eq!(typed_value("'true'"), json!("true"));
        assert_eq!(typed_value("\""), json!("\""));
        assert_eq!(typed_value("multi\nline\n"), json!("multi\nline\n"));
        assert_eq!(
            typed_value("99999999999999999999"),
            json!("99999999999999999999")
        );
    }
}

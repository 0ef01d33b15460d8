//! What a scalar resolves to: go-yaml v2's YAML 1.1 rules for plain scalars, the core
//! tags, and YAML 1.2's core schema for the second reading of what the writer writes.

use base64::Engine as _;
use granit_parser::{ScalarStyle, Tag};
use serde_json::{Number, Value};

use super::Error;

pub(super) fn resolve_scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    yaml_1_2: bool,
) -> Result<Value, Error> {
    if let Some(tag) = tag {
        // `!!binary` is a YAML type but not one of the core schema's, so it is matched here.
        let core = tag.core_suffix().or_else(|| {
            (tag.handle() == "tag:yaml.org,2002:" && tag.suffix() == "binary").then_some("binary")
        });
        if let Some(core) = core {
            return resolve_tagged(text, core);
        }
        // An application tag (`!foo`): go-yaml v2 resolves no type for it, so the scalar
        // stays the text it is (`!custom 5` is "5"), as helm v4.3.1 reads it.
        return Ok(Value::String(text.to_string()));
    }
    if style != ScalarStyle::Plain {
        return Ok(Value::String(text.to_string()));
    }
    if yaml_1_2 {
        return resolve_plain_1_2(text);
    }
    resolve_plain(text)
}

fn resolve_tagged(text: &str, core: &str) -> Result<Value, Error> {
    let bad = || Error::Tagged {
        text: text.to_owned(),
        tag: core.to_owned(),
    };
    match core {
        "str" => Ok(Value::String(text.to_string())),
        "null" => Ok(Value::Null),
        "bool" => match resolve_plain(text)? {
            v @ Value::Bool(_) => Ok(v),
            _ => Err(bad()),
        },
        "int" => parse_go_int(&text.replace('_', ""))
            .map(Value::Number)
            .ok_or_else(bad),
        "float" => match resolve_plain(text)? {
            Value::Number(n) => Ok(Value::Number(n)),
            _ => Err(bad()),
        },
        "binary" => {
            let compact: String = text.split_whitespace().collect();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(compact)
                .map_err(|_| bad())?;
            String::from_utf8(bytes)
                .map(Value::String)
                .map_err(|_| Error::BinaryNotText(text.to_owned()))
        }
        // !!map, !!seq, !!timestamp and the like: keep the text.
        _ => Ok(Value::String(text.to_string())),
    }
}

/// go-yaml v2's `resolve` for an untagged plain scalar.
pub(super) fn resolve_plain(text: &str) -> Result<Value, Error> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Ok(Value::Bool(true));
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Ok(Value::Bool(false));
        }
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => {
            return Err(Error::NotJson(text.to_owned()));
        }
        _ => {}
    }
    if !text.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.')) {
        return Ok(Value::String(text.to_string()));
    }
    let plain = text.replace('_', "");
    if let Some(n) = parse_go_int(&plain) {
        return Ok(Value::Number(n));
    }
    if is_yaml_float(&plain) {
        let f: f64 = plain
            .parse()
            .map_err(|_| Error::NotANumber(text.to_owned()))?;
        return Ok(Value::Number(
            go_float(f).ok_or_else(|| Error::NotJson(text.to_owned()))?,
        ));
    }
    Ok(Value::String(text.to_string()))
}

/// YAML 1.2's core schema for an untagged plain scalar, as YAML 1.2 readers (most outside
/// Go) resolve it: fewer forms than YAML 1.1 are booleans and numbers (`yes`, `0b1` and
/// `1_000` are strings), but `0644` is the decimal 644.
pub(super) fn resolve_plain_1_2(text: &str) -> Result<Value, Error> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => {
            return Err(Error::NotJson(text.to_owned()));
        }
        _ => {}
    }
    let digits = |s: &str, radix| !s.is_empty() && s.chars().all(|c| c.is_digit(radix));
    let prefixed = match (text.strip_prefix("0o"), text.strip_prefix("0x")) {
        (Some(octal), _) if digits(octal, 8) => Some((octal, 8)),
        (_, Some(hex)) if digits(hex, 16) => Some((hex, 16)),
        _ => None,
    };
    if let Some((body, radix)) = prefixed {
        return u64::from_str_radix(body, radix)
            .map(|n| Value::Number(n.into()))
            .map_err(|_| Error::TooLarge(text.to_owned()));
    }
    // The float pattern also covers the decimal integers, `[-+]?[0-9]+`.
    if !is_yaml_float(text) {
        return Ok(Value::String(text.to_string()));
    }
    if let Ok(n) = text.parse::<i64>() {
        return Ok(Value::Number(n.into()));
    }
    if let Ok(n) = text.parse::<u64>() {
        return Ok(Value::Number(n.into()));
    }
    text.parse::<f64>()
        .ok()
        .and_then(go_float)
        .map(Value::Number)
        .ok_or_else(|| Error::NotJson(text.to_owned()))
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint`: optional sign, `0x`/`0o`/`0b`
/// prefixes, and a leading `0` for octal.
fn parse_go_int(s: &str) -> Option<Number> {
    let (negative, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = digits.to_ascii_lowercase();
    let (radix, body) = if let Some(rest) = lower.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = lower.strip_prefix("0o") {
        (8, rest)
    } else if let Some(rest) = lower.strip_prefix("0b") {
        (2, rest)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    if body.is_empty() || !body.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u64::from_str_radix(body, radix).ok()?;
    if negative {
        // i64::MIN has no positive counterpart, so compare in u64.
        if magnitude > i64::MAX as u64 + 1 {
            return None;
        }
        Some(Number::from((magnitude as i64).wrapping_neg()))
    } else if let Ok(v) = i64::try_from(magnitude) {
        Some(Number::from(v))
    } else {
        Some(Number::from(magnitude))
    }
}

/// go-yaml v2's `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn is_yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        None => digits(mantissa),
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

/// Go's encoding/json writes a float64 with no fraction as an integer (`1e3` is `1000`),
/// which integer fields of the API require; other floats stay floats.
fn go_float(f: f64) -> Option<Number> {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        if f >= i64::MIN as f64 && f <= i64::MAX as f64 {
            return Some(Number::from(f as i64));
        }
        if f >= 0.0 && f <= u64::MAX as f64 {
            return Some(Number::from(f as u64));
        }
    }
    Number::from_f64(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn float_regex() {
        for ok in ["1.", ".5", "-1.5e-3", "+2E10", "08", "1e3"] {
            assert!(is_yaml_float(ok), "{ok}");
        }
        for bad in [".", "e3", "1.2.3", "1e", "--1", "1.5x"] {
            assert!(!is_yaml_float(bad), "{bad}");
        }
    }

    #[test]
    fn the_second_yaml_reading_is_yaml_1_2_core() {
        for (plain, want) in [
            ("yes", json!("yes")),
            ("on", json!("on")),
            ("y", json!("y")),
            ("0644", json!(644)),
            ("0o17", json!(15)),
            ("0x1F", json!(31)),
            ("0b101", json!("0b101")),
            ("1_000", json!("1_000")),
            ("+12", json!(12)),
            ("-1.5e3", json!(-1500)),
            ("2.5", json!(2.5)),
            ("True", json!(true)),
            ("~", json!(null)),
            ("18446744073709551615", json!(18446744073709551615u64)),
        ] {
            assert_eq!(resolve_plain_1_2(plain).unwrap(), want, "{plain}");
        }
        assert!(resolve_plain_1_2("-.inf").is_err());
    }
}

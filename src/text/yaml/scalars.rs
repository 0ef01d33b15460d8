//! What a scalar resolves to: go-yaml v2's YAML 1.1 rules for plain scalars, the core
//! tags, and YAML 1.2's core schema for the second reading of what the writer writes.

use base64::Engine as _;
use granit_parser::{ScalarStyle, Tag};
use serde_json::{Number, Value};

use super::Error;

/// The rules a plain scalar is resolved by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) enum PlainRules {
    /// go-yaml v2's YAML 1.1, as Kubernetes clients read manifests.
    #[default]
    GoYaml11,
    /// YAML 1.1's whole type repository, as PyYAML reads it ([`resolve_plain_1_1_types`]).
    #[cfg(test)]
    Yaml11Types,
    /// YAML 1.2's core schema.
    #[cfg(test)]
    Yaml12Core,
}

pub(super) fn resolve_scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    rules: PlainRules,
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
    match rules {
        PlainRules::GoYaml11 => resolve_plain(text),
        #[cfg(test)]
        PlainRules::Yaml11Types => resolve_plain_1_1_types(text),
        #[cfg(test)]
        PlainRules::Yaml12Core => resolve_plain_1_2(text),
    }
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

/// The types a reader with YAML 1.1's whole type repository (yaml.org/type, as PyYAML's
/// resolver and the tools built on it match them) gives an untagged plain scalar besides
/// `str`. go-yaml v2 ([`resolve_plain`]) leaves timestamps and sexagesimal numbers
/// strings; these readers do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Yaml11Type {
    Bool,
    Int,
    Float,
    /// `<<`, the merge key.
    Merge,
    Null,
    Timestamp,
    /// `=`, the value key.
    Value,
}

/// The type PyYAML's resolver gives the plain scalar `text`; `None` for a string.
pub(super) fn yaml_1_1_type(text: &str) -> Option<Yaml11Type> {
    let typed = match text {
        "yes" | "Yes" | "YES" | "no" | "No" | "NO" | "true" | "True" | "TRUE" | "false"
        | "False" | "FALSE" | "on" | "On" | "ON" | "off" | "Off" | "OFF" => Yaml11Type::Bool,
        "" | "~" | "null" | "Null" | "NULL" => Yaml11Type::Null,
        "<<" => Yaml11Type::Merge,
        "=" => Yaml11Type::Value,
        _ if is_float_1_1(text) => Yaml11Type::Float,
        _ if is_int_1_1(text) => Yaml11Type::Int,
        _ if is_timestamp_1_1(text) => Yaml11Type::Timestamp,
        _ => return None,
    };
    Some(typed)
}

/// A plain scalar as a YAML 1.1 type-repository reader (PyYAML's `safe_load`) reads it,
/// for tests that read what the writer writes as those readers do. A timestamp, which no
/// JSON value is, reads as the text `!!timestamp <text>`; `=` as `!!value =`.
#[cfg(test)]
pub(super) fn resolve_plain_1_1_types(text: &str) -> Result<Value, Error> {
    let not_a_number = || Error::NotANumber(text.to_owned());
    match yaml_1_1_type(text) {
        None => Ok(Value::String(text.to_owned())),
        Some(Yaml11Type::Null) => Ok(Value::Null),
        Some(Yaml11Type::Bool) => Ok(Value::Bool(
            matches!(text.as_bytes()[0], b'y' | b'Y' | b't' | b'T')
                || text.eq_ignore_ascii_case("on"),
        )),
        Some(Yaml11Type::Int) => {
            let plain = text.replace('_', "");
            let (negative, body) = match plain.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, plain.strip_prefix('+').unwrap_or(&plain)),
            };
            let magnitude = if let Some(bits) = body.strip_prefix("0b") {
                u64::from_str_radix(bits, 2).map_err(|_| not_a_number())?
            } else if let Some(hex) = body.strip_prefix("0x") {
                u64::from_str_radix(hex, 16).map_err(|_| not_a_number())?
            } else if body.contains(':') {
                sexagesimal(body).ok_or_else(not_a_number)?
            } else if body.len() > 1
                && let Some(octal) = body.strip_prefix('0')
            {
                u64::from_str_radix(octal, 8).map_err(|_| not_a_number())?
            } else {
                body.parse().map_err(|_| not_a_number())?
            };
            if !negative {
                return Ok(Value::Number(magnitude.into()));
            }
            let signed = i64::try_from(magnitude).map_err(|_| Error::TooLarge(text.to_owned()))?;
            Ok(Value::Number((-signed).into()))
        }
        Some(Yaml11Type::Float) => {
            let plain = text.replace('_', "").to_ascii_lowercase();
            let (negative, body) = match plain.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, plain.strip_prefix('+').unwrap_or(&plain)),
            };
            let magnitude = match body.split_once('.') {
                Some((whole, fraction)) if whole.contains(':') => {
                    let fraction: f64 = format!("0.{fraction}")
                        .parse()
                        .map_err(|_| not_a_number())?;
                    sexagesimal(whole).ok_or_else(not_a_number)? as f64 + fraction
                }
                _ => body.parse::<f64>().map_err(|_| not_a_number())?,
            };
            let f = if negative { -magnitude } else { magnitude };
            Number::from_f64(f)
                .map(Value::Number)
                .ok_or_else(|| Error::NotJson(text.to_owned()))
        }
        Some(tag @ (Yaml11Type::Timestamp | Yaml11Type::Value | Yaml11Type::Merge)) => {
            let name = match tag {
                Yaml11Type::Timestamp => "timestamp",
                Yaml11Type::Value => "value",
                _ => "merge",
            };
            Ok(Value::String(format!("!!{name} {text}")))
        }
    }
}

/// `1:20:30` in base 60.
#[cfg(test)]
fn sexagesimal(text: &str) -> Option<u64> {
    text.split(':').try_fold(0u64, |total, digit| {
        total.checked_mul(60)?.checked_add(digit.parse().ok()?)
    })
}

fn digits_or_underscores(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_digit() || b == b'_')
}

/// `[0-9][0-9_]*`
fn decimal_head(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit()) && digits_or_underscores(s)
}

/// `(:[0-5]?[0-9])+` after the first part: each later part one base-60 digit.
fn base_60_parts<'a>(mut parts: impl Iterator<Item = &'a str>) -> bool {
    let mut any = false;
    let all = parts.all(|p| {
        any = true;
        matches!(p.as_bytes(), [d] | [b'0'..=b'5', d] if d.is_ascii_digit())
    });
    any && all
}

/// PyYAML's int: `[-+]?(0b[0-1_]+|0[0-7_]+|0|[1-9][0-9_]*|0x[0-9a-fA-F_]+|[1-9][0-9_]*(:[0-5]?[0-9])+)`.
fn is_int_1_1(text: &str) -> bool {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    let some_all = |s: &str, ok: fn(u8) -> bool| !s.is_empty() && s.bytes().all(ok);
    if let Some(bits) = body.strip_prefix("0b") {
        return some_all(bits, |b| matches!(b, b'0' | b'1' | b'_'));
    }
    if let Some(hex) = body.strip_prefix("0x") {
        return some_all(hex, |b| b.is_ascii_hexdigit() || b == b'_');
    }
    if body == "0" {
        return true;
    }
    if let Some(octal) = body.strip_prefix('0') {
        return some_all(octal, |b| matches!(b, b'0'..=b'7' | b'_'));
    }
    let mut parts = body.split(':');
    let head = parts.next().unwrap_or_default();
    let head_ok = head.starts_with(|c: char| matches!(c, '1'..='9')) && digits_or_underscores(head);
    head_ok && (!body.contains(':') || base_60_parts(parts))
}

/// PyYAML's float, with `\.[0-9_]+` for its `\.[0-9][0-9_]*` (matching more only quotes
/// more):
/// `[-+]?[0-9][0-9_]*\.[0-9_]*([eE][-+][0-9]+)?`, `\.[0-9_]+([eE][-+][0-9]+)?`,
/// `[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*`, `[-+]?\.(inf|Inf|INF)`, `\.(nan|NaN|NAN)`.
fn is_float_1_1(text: &str) -> bool {
    let sign = text.starts_with(['-', '+']);
    let body = if sign { &text[1..] } else { text };
    if matches!(body, ".inf" | ".Inf" | ".INF") || matches!(text, ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let Some((whole, fraction)) = mantissa.split_once('.') else {
        return false;
    };
    if whole.contains(':') {
        let mut parts = whole.split(':');
        return exponent.is_none()
            && decimal_head(parts.next().unwrap_or_default())
            && base_60_parts(parts)
            && digits_or_underscores(fraction);
    }
    let exponent_ok = exponent.is_none_or(|e| {
        matches!(e.as_bytes(), [b'-' | b'+', rest @ ..] if !rest.is_empty() && rest.iter().all(u8::is_ascii_digit))
    });
    let mantissa_ok = if whole.is_empty() {
        !sign && !fraction.is_empty() && digits_or_underscores(fraction)
    } else {
        decimal_head(whole) && digits_or_underscores(fraction)
    };
    exponent_ok && mantissa_ok
}

/// PyYAML's timestamp: `YYYY-MM-DD`, or `YYYY-M-D` then `T`, `t` or blanks, `H:MM:SS`, a
/// fraction, and a zone (`Z`, `+H`, `-HH:MM`) after optional blanks.
fn is_timestamp_1_1(text: &str) -> bool {
    let b = text.as_bytes();
    let digit = |c: &u8| c.is_ascii_digit();
    if b.len() == 10
        && b[..4].iter().all(digit)
        && b[4] == b'-'
        && b[5..7].iter().all(digit)
        && b[7] == b'-'
        && b[8..].iter().all(digit)
    {
        return true;
    }
    let mut at = 0;
    // Up to `most` digits, at least `least`.
    let digits = |at: &mut usize, least: usize, most: usize| {
        let n = b[*at..]
            .iter()
            .take(most)
            .take_while(|c| c.is_ascii_digit())
            .count();
        *at += n;
        n >= least
    };
    let byte = |at: &mut usize, wanted: &[u8]| {
        let found = b.get(*at).is_some_and(|c| wanted.contains(c));
        if found {
            *at += 1;
        }
        found
    };
    let blanks = |at: &mut usize| {
        let n = b[*at..]
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t'))
            .count();
        *at += n;
        n
    };
    let date = digits(&mut at, 4, 4)
        && byte(&mut at, b"-")
        && digits(&mut at, 1, 2)
        && byte(&mut at, b"-")
        && digits(&mut at, 1, 2);
    let separated = date && (byte(&mut at, b"Tt") || blanks(&mut at) > 0);
    let time = separated
        && digits(&mut at, 1, 2)
        && byte(&mut at, b":")
        && digits(&mut at, 2, 2)
        && byte(&mut at, b":")
        && digits(&mut at, 2, 2);
    if !time {
        return false;
    }
    if byte(&mut at, b".") {
        digits(&mut at, 0, usize::MAX);
    }
    if at == b.len() {
        return true;
    }
    blanks(&mut at);
    let zone = byte(&mut at, b"Z")
        || (byte(&mut at, b"-+")
            && digits(&mut at, 1, 2)
            && (!byte(&mut at, b":") || digits(&mut at, 2, 2)));
    zone && at == b.len()
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

    /// Each as PyYAML 6.0.3's resolver types it (`Resolver().resolve(ScalarNode, text,
    /// (True, False))`), but `._5`, which this counts as a float too.
    #[test]
    fn yaml_1_1_types_are_pyyamls() {
        use Yaml11Type::*;
        for (text, typed) in [
            ("2024-01-01", Some(Timestamp)),
            ("2001-12-14t21:59:43.10-05:00", Some(Timestamp)),
            ("2001-12-14 21:59:43.10 -5", Some(Timestamp)),
            ("2001-12-14T21:59:43Z", Some(Timestamp)),
            ("2026-1-2 3:04:05", Some(Timestamp)),
            ("2026-01-02  03:04:05 Z", Some(Timestamp)),
            ("2026-01-02T03:04:05.", Some(Timestamp)),
            ("2026-01-02T03:04:05+01:00", Some(Timestamp)),
            ("2024-1-1", None),
            ("2024-01", None),
            ("2024-01-01x", None),
            ("20240101", Some(Int)),
            ("1:20", Some(Int)),
            ("-1:20:30", Some(Int)),
            ("190:20:30.15", Some(Float)),
            ("1:60", None),
            ("1:5", Some(Int)),
            ("0:20", None),
            ("8080:30", Some(Int)),
            ("8080:80", None),
            ("1_000", Some(Int)),
            ("1_000.5", Some(Float)),
            ("1__0", Some(Int)),
            ("0b1_0", Some(Int)),
            ("0b", None),
            ("0x_1F", Some(Int)),
            ("0X1F", None),
            ("0o17", None),
            ("0644", Some(Int)),
            ("0_", Some(Int)),
            ("09", None),
            ("08.5", Some(Float)),
            ("1.", Some(Float)),
            ("1.e+3", Some(Float)),
            ("1.5e3", None),
            ("1e3", None),
            ("1.5E-7", Some(Float)),
            ("._5", Some(Float)),
            (".5", Some(Float)),
            (".", None),
            ("-.5", None),
            ("+.inf", Some(Float)),
            (".NaN", Some(Float)),
            ("-.nan", None),
            ("=", Some(Value)),
            ("<<", Some(Merge)),
            ("yes", Some(Bool)),
            ("Yes", Some(Bool)),
            ("yEs", None),
            ("y", None),
            ("on", Some(Bool)),
            ("OFF", Some(Bool)),
            ("null", Some(Null)),
            ("~", Some(Null)),
            ("", Some(Null)),
            ("1.2.3", None),
            ("v1", None),
            ("1-2", None),
        ] {
            assert_eq!(yaml_1_1_type(text), typed, "{text:?}");
        }
    }

    #[test]
    fn yaml_1_1_types_read_as_pyyaml_constructs_them() {
        for (plain, want) in [
            ("1:20", json!(80)),
            ("-1:20:30", json!(-4830)),
            ("190:20:30.15", json!(685230.15)),
            ("0b1_0", json!(2)),
            ("0644", json!(420)),
            ("0x_1F", json!(31)),
            ("1_000.5", json!(1000.5)),
            ("1.", json!(1.0)),
            ("Off", json!(false)),
            ("YES", json!(true)),
            ("~", json!(null)),
            ("2024-01-01", json!("!!timestamp 2024-01-01")),
            ("=", json!("!!value =")),
            ("1.5e3", json!("1.5e3")),
            ("y", json!("y")),
        ] {
            assert_eq!(resolve_plain_1_1_types(plain).unwrap(), want, "{plain}");
        }
        assert!(resolve_plain_1_1_types("0b_").is_err());
    }
}

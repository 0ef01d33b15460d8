//! YAML to JSON the way Kubernetes clients read manifests (`sigs.k8s.io/yaml` on go-yaml v2,
//! which Helm and kubectl use): YAML 1.1 resolution of plain scalars, so `defaultMode: 0644`
//! is the number 420 and `enabled: yes` is `true`, while quoted and block scalars stay
//! strings. A YAML 1.2 reader turns `0644` into the string "0644", which the API server
//! rejects, and a reader that only hands out values cannot tell a quoted scalar from a plain
//! one, so this module builds values from granit-parser's events, which carry each scalar's
//! style.
//!
//! Also as go-yaml does: anchors and aliases, merge keys (`<<`), `!!str`/`!!int`/`!!float`/
//! `!!bool`/`!!null`/`!!binary` tags, and non-string map keys turned into strings.
//! Timestamps stay strings (go-yaml v2 keeps them so for untyped targets).
//!
//! Typed reads ([`from_str`], [`from_value`]) coerce scalars into string fields as
//! sigs.k8s.io/yaml does, and typed writes ([`to_string`]) go through JSON to
//! [`to_documents`], so every YAML the project reads or writes takes this one path.

use std::collections::HashMap;

use base64::Engine as _;
use granit_parser::{Event, Parser, ScalarStyle, Tag};
use serde::Serialize;
use serde::de::value::{MapAccessDeserializer, MapDeserializer, SeqDeserializer};
use serde::de::{DeserializeOwned, Deserializer, IntoDeserializer, Visitor};
use serde_json::{Map, Number, Value};

/// Parses every document of `text`; empty documents (`null`) are left out.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, String> {
    load(text, Loader::default())
}

fn load(text: &str, mut loader: Loader) -> Result<Vec<Value>, String> {
    for item in Parser::new_from_str(text) {
        let (event, _span) = item.map_err(|e| e.to_string())?;
        loader.event(event)?;
    }
    Ok(loader.documents)
}

/// Reads the one YAML document of `text` into `T` as sigs.k8s.io/yaml's `Unmarshal` does
/// ([`parse_documents`], then [`from_value`]). Empty text, or only comments, reads as
/// null (so an `Option` is `None`, and a map, list or struct is empty); more than one
/// document is an error.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let mut documents = parse_documents(text)?;
    let document = match documents.len() {
        0 => Value::Null,
        1 => documents.swap_remove(0),
        n => return Err(format!("expected one YAML document, found {n}")),
    };
    from_value(document)
}

/// Decodes `value` into `T` as sigs.k8s.io/yaml does after reading YAML: where `T` wants a
/// string, a number or boolean reads as its text as Go formats it ([`go_string`]: `1.10`
/// is "1.1", `0644` is "420", `yes` is "true") and null as "", and null where a list, map
/// or struct is wanted is an empty one (Go's zero value); everything else decodes as
/// [`serde_json::from_value`] would.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, String> {
    T::deserialize(GoValue(value)).map_err(|e| e.to_string())
}

/// `value` as one YAML document, written by [`to_documents`].
///
/// # Panics
///
/// If `value` does not serialize to JSON (a map with keys that are not strings, or a
/// `Serialize` that fails); the project's types and JSON values always do.
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> String {
    let value = serde_json::to_value(value).expect("the value serializes to JSON");
    to_documents(std::slice::from_ref(&value))
}

/// The text sigs.k8s.io/yaml gives a scalar where a Go string is wanted: a boolean as
/// `true`/`false`, a number as Go's `strconv` writes it (a fraction through float32, as
/// the library does, so `1.10` is "1.1"), and null as "" (Go leaves the string empty).
/// `None` for a list or mapping, which no string can hold.
pub fn go_string(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some(String::new()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(number_text(n)),
        Value::String(s) => Some(s.clone()),
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// A number as sigs.k8s.io/yaml turns it into a string, for values and map keys alike:
/// integers in decimal, floats as `strconv.FormatFloat(f, 'g', -1, 32)`.
fn number_text(n: &Number) -> String {
    match n.as_f64() {
        Some(f) if n.is_f64() => go_float32_text(f),
        _ => n.to_string(),
    }
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)`: the fewest digits that read back as the
/// same float32, with an exponent (`1e-05`, `1.2345675e+06`) when it is below -4 or from 6.
fn go_float32_text(f: f64) -> String {
    let f = f as f32;
    if !f.is_finite() {
        return match f {
            f if f.is_nan() => "NaN".to_owned(),
            f if f > 0.0 => "+Inf".to_owned(),
            _ => "-Inf".to_owned(),
        };
    }
    // Rust's `{:e}` gives the same shortest digits: `1.2345675e6`, `-1e-5`, `0e0`.
    let shortest = format!("{f:e}");
    let (mantissa, exponent) = shortest.split_once('e').unwrap_or((&shortest, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let sign = if mantissa.starts_with('-') { "-" } else { "" };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let point = if rest.is_empty() { "" } else { "." };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{first}{point}{rest}e{exp_sign}{:02}", exponent.abs());
    }
    // Plain notation: `exponent + 1` digits before the point.
    let before = exponent + 1;
    if before <= 0 {
        let zeros = "0".repeat(before.unsigned_abs() as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let before = before as usize;
    if digits.len() <= before {
        return format!("{sign}{digits:0<before$}");
    }
    let (int, frac) = digits.split_at(before);
    format!("{sign}{int}.{frac}")
}

/// A JSON value read the way sigs.k8s.io/yaml decodes it into a Go type (see
/// [`from_value`]).
struct GoValue(Value);

impl GoValue {
    /// Null where a list, map or struct is wanted is an empty one, as Go leaves the zero
    /// value there (so an empty file reads as an empty struct).
    fn or_empty(self, empty: Value) -> Self {
        if self.0.is_null() { Self(empty) } else { self }
    }
}

fn entries(map: Map<String, Value>) -> impl Iterator<Item = (String, GoValue)> {
    map.into_iter().map(|(k, v)| (k, GoValue(v)))
}

impl IntoDeserializer<'_, serde_json::Error> for GoValue {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> Deserializer<'de> for GoValue {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(items) => {
                let mut seq = SeqDeserializer::new(items.into_iter().map(GoValue));
                let value = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(value)
            }
            Value::Object(map) => {
                let mut map = MapDeserializer::new(entries(map));
                let value = visitor.visit_map(&mut map)?;
                map.end()?;
                Ok(value)
            }
            scalar => scalar.deserialize_any(visitor),
        }
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.deserialize_string(visitor)
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match go_string(&self.0) {
            Some(text) => visitor.visit_string(text),
            None => self.deserialize_any(visitor),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.or_empty(Value::Array(Vec::new()))
            .deserialize_any(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        self.or_empty(Value::Object(Map::new()))
            .deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::String(variant) => visitor.visit_enum(variant.into_deserializer()),
            Value::Object(map) if map.len() == 1 => {
                let map = MapDeserializer::new(entries(map));
                visitor.visit_enum(MapAccessDeserializer::new(map))
            }
            other => other.deserialize_enum(name, variants, visitor),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char bytes byte_buf unit
        unit_struct tuple tuple_struct identifier
    }
}

/// How many nodes aliases may copy in all, so a small "billion laughs" document cannot
/// exhaust memory (go-yaml rejects such documents as "excessive aliasing" too).
const MAX_ALIASED_NODES: usize = 1_000_000;

#[derive(Default)]
struct Loader {
    documents: Vec<Value>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Value>,
    aliased_nodes: usize,
    /// Resolve plain scalars with YAML 1.2's core schema instead of YAML 1.1's (tests
    /// read what [`to_documents`] writes both ways).
    yaml_1_2: bool,
}

enum Frame {
    Sequence {
        items: Vec<Value>,
        anchor: usize,
    },
    Mapping {
        entries: Map<String, Value>,
        /// Keys merged in through `<<`; explicit keys win over them, as YAML's merge says.
        merged: Map<String, Value>,
        key: Option<Key>,
        anchor: usize,
    },
}

/// A mapping key waiting for its value. A plain `<<` is the merge key.
enum Key {
    Merge,
    Name(String),
}

impl Loader {
    fn event(&mut self, event: Event<'_>) -> Result<(), String> {
        match event {
            Event::DocumentStart(..) => {
                self.anchors.clear();
            }
            Event::Scalar(text, style, anchor, tag) => {
                let is_merge_key =
                    style == ScalarStyle::Plain && tag.is_none() && text.as_ref() == "<<";
                if is_merge_key && self.expects_key() {
                    return self.push_key(Key::Merge);
                }
                let value = resolve_scalar(&text, style, tag.as_deref(), self.yaml_1_2)?;
                if anchor != 0 {
                    self.anchors.insert(anchor, value.clone());
                }
                self.push(value)?;
            }
            Event::Alias(id) => {
                let value = self
                    .anchors
                    .get(&id)
                    .ok_or_else(|| "alias to an unknown anchor".to_string())?;
                let budget = MAX_ALIASED_NODES - self.aliased_nodes;
                let size = count_nodes(value, budget)
                    .ok_or_else(|| "the document contains excessive aliasing".to_string())?;
                self.aliased_nodes += size;
                let value = value.clone();
                self.push(value)?;
            }
            Event::SequenceStart(_, anchor, _) => self.stack.push(Frame::Sequence {
                items: Vec::new(),
                anchor,
            }),
            Event::MappingStart(_, anchor, _) => self.stack.push(Frame::Mapping {
                entries: Map::new(),
                merged: Map::new(),
                key: None,
                anchor,
            }),
            Event::SequenceEnd | Event::MappingEnd => {
                let (value, anchor) = match self.stack.pop() {
                    Some(Frame::Sequence { items, anchor }) => (Value::Array(items), anchor),
                    Some(Frame::Mapping {
                        mut entries,
                        merged,
                        anchor,
                        ..
                    }) => {
                        for (k, v) in merged {
                            entries.entry(k).or_insert(v);
                        }
                        (Value::Object(entries), anchor)
                    }
                    None => return Err("unbalanced YAML collection".to_string()),
                };
                if anchor != 0 {
                    self.anchors.insert(anchor, value.clone());
                }
                self.push(value)?;
            }
            // Stream and document ends, comments and anchor metadata carry no data.
            _ => {}
        }
        Ok(())
    }

    fn expects_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Mapping { key: None, .. }))
    }

    fn push_key(&mut self, key: Key) -> Result<(), String> {
        match self.stack.last_mut() {
            Some(Frame::Mapping { key: slot, .. }) => {
                *slot = Some(key);
                Ok(())
            }
            _ => Err("mapping key outside a mapping".to_string()),
        }
    }

    /// Adds a finished value to the enclosing collection (or ends a document).
    fn push(&mut self, value: Value) -> Result<(), String> {
        match self.stack.last_mut() {
            None => {
                if !value.is_null() {
                    self.documents.push(value);
                }
            }
            Some(Frame::Sequence { items, .. }) => items.push(value),
            Some(Frame::Mapping {
                entries,
                merged,
                key,
                ..
            }) => match key.take() {
                None => *key = Some(Key::Name(key_string(value)?)),
                Some(Key::Name(name)) => {
                    entries.insert(name, value);
                }
                Some(Key::Merge) => merge_into(merged, value)?,
            },
        }
        Ok(())
    }
}

/// The number of nodes in `value`, or `None` once it exceeds `budget`.
fn count_nodes(value: &Value, budget: usize) -> Option<usize> {
    let mut count = 1;
    let children: Box<dyn Iterator<Item = &Value>> = match value {
        Value::Array(items) => Box::new(items.iter()),
        Value::Object(map) => Box::new(map.values()),
        _ => Box::new(std::iter::empty()),
    };
    for child in children {
        count += count_nodes(child, budget.checked_sub(count)?)?;
    }
    (count <= budget).then_some(count)
}

/// `<<: *map` or `<<: [*a, *b]`: earlier maps win over later ones.
fn merge_into(merged: &mut Map<String, Value>, value: Value) -> Result<(), String> {
    let not_maps = || "map merge requires a map or a sequence of maps".to_string();
    let maps = match value {
        Value::Array(items) => items,
        single => vec![single],
    };
    for map in maps {
        let Value::Object(map) = map else {
            return Err(not_maps());
        };
        for (k, v) in map {
            merged.entry(k).or_insert(v);
        }
    }
    Ok(())
}

/// JSON keys are strings; sigs.k8s.io/yaml formats resolved scalar keys the way Go does.
fn key_string(key: Value) -> Result<String, String> {
    match key {
        Value::String(s) => Ok(s),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(number_text(&n)),
        Value::Null => Err("null is not a valid map key".to_string()),
        Value::Array(_) | Value::Object(_) => {
            Err("a collection is not a valid map key".to_string())
        }
    }
}

fn resolve_scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    yaml_1_2: bool,
) -> Result<Value, String> {
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

fn resolve_tagged(text: &str, core: &str) -> Result<Value, String> {
    let bad = || format!("cannot decode {text:?} as !!{core}");
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
                .map_err(|_| format!("!!binary value {text:?} is not UTF-8 text"))
        }
        // !!map, !!seq, !!timestamp and the like: keep the text.
        _ => Ok(Value::String(text.to_string())),
    }
}

/// go-yaml v2's `resolve` for an untagged plain scalar.
fn resolve_plain(text: &str) -> Result<Value, String> {
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
            return Err(format!("{text} cannot be represented in JSON"));
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
            .map_err(|_| format!("cannot parse {text:?} as a number"))?;
        return Ok(Value::Number(
            go_float(f).ok_or_else(|| format!("{text} cannot be represented in JSON"))?,
        ));
    }
    Ok(Value::String(text.to_string()))
}

/// YAML 1.2's core schema for an untagged plain scalar, as YAML 1.2 readers (most outside
/// Go) resolve it: fewer forms than YAML 1.1 are booleans and numbers (`yes`, `0b1` and
/// `1_000` are strings), but `0644` is the decimal 644.
fn resolve_plain_1_2(text: &str) -> Result<Value, String> {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf" | "-.Inf" | "-.INF"
        | ".nan" | ".NaN" | ".NAN" => {
            return Err(format!("{text} cannot be represented in JSON"));
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
            .map_err(|_| format!("{text} does not fit in 64 bits"));
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
        .ok_or_else(|| format!("{text} cannot be represented in JSON"))
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

/// Writes `documents` as a YAML stream (`---` between documents) that reads back as the
/// same JSON under YAML 1.1, as kubectl and Helm read it ([`parse_documents`]), and under
/// YAML 1.2. A writer for YAML 1.2 only would write a string such as `on`, `y` or `1_000`
/// plain, and it would reach the API server as a boolean or a number; here a string is
/// written plain only when both readings give that string back, as a literal block (`|`)
/// when it is text of several lines that one reads back exactly, and double-quoted
/// otherwise.
pub fn to_documents(documents: &[Value]) -> String {
    let mut out = String::new();
    for (i, doc) in documents.iter().enumerate() {
        if i > 0 {
            out.push_str("---\n");
        }
        match doc {
            Value::Object(map) if !map.is_empty() => write_map(&mut out, map, 0, false),
            Value::Array(items) if !items.is_empty() => write_seq(&mut out, items, 0),
            scalar => {
                out.push_str(&scalar_text(scalar));
                out.push('\n');
            }
        }
    }
    out
}

/// A block mapping at `indent`; with `inline_first` its first key follows a `- ` already
/// written.
fn write_map(out: &mut String, map: &Map<String, Value>, indent: usize, inline_first: bool) {
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 || !inline_first {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(&string_text(key));
        out.push(':');
        match value {
            Value::Object(inner) if !inner.is_empty() => {
                out.push('\n');
                write_map(out, inner, indent + 2, false);
            }
            // A sequence under a key sits at the key's indentation, as kubectl writes it.
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                write_seq(out, items, indent);
            }
            scalar => write_scalar(out, scalar, indent + 2),
        }
    }
}

fn write_seq(out: &mut String, items: &[Value], indent: usize) {
    for item in items {
        out.push_str(&" ".repeat(indent));
        out.push('-');
        match item {
            Value::Object(map) if !map.is_empty() => {
                out.push(' ');
                write_map(out, map, indent + 2, true);
            }
            Value::Array(inner) if !inner.is_empty() => {
                out.push('\n');
                write_seq(out, inner, indent + 2);
            }
            scalar => write_scalar(out, scalar, indent + 2),
        }
    }
}

/// A scalar after a key or a `-`, with its line break; text of several lines as a literal
/// block whose lines are indented by `indent`.
fn write_scalar(out: &mut String, value: &Value, indent: usize) {
    let Some((text, breaks)) = value.as_str().and_then(literal_block) else {
        out.push(' ');
        out.push_str(&scalar_text(value));
        out.push('\n');
        return;
    };
    // The chomping indicator: `-` strips the last line break, none keeps one, `+` all.
    out.push_str(match breaks {
        0 => " |-\n",
        1 => " |\n",
        _ => " |+\n",
    });
    for line in text.split('\n') {
        // Empty lines carry no indentation, so no line ends in spaces.
        if !line.is_empty() {
            out.push_str(&" ".repeat(indent));
            out.push_str(line);
        }
        out.push('\n');
    }
    // `|+` keeps the line breaks after the last line: one ended it, the rest are empty lines.
    for _ in 1..breaks {
        out.push('\n');
    }
}

/// A string of several lines that a literal block reads back exactly, as its text without
/// the line breaks at its end and how many those are. `None` when it must be quoted
/// instead: a single line; characters a block cannot hold (control characters but the
/// line break, tabs included, and what YAML reads as a line break or BOM); a first line
/// that is empty or starts with a space (the first line sets the block's indentation); or
/// a line of only spaces (read as indentation).
fn literal_block(s: &str) -> Option<(&str, usize)> {
    let text = s.trim_end_matches('\n');
    let no_bad_chars = !s.chars().any(|c| {
        (c.is_control() && c != '\n') || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}')
    });
    let first_sets_indent = !text.starts_with([' ', '\n']) && !text.is_empty();
    let no_blank_lines = text
        .split('\n')
        .all(|line| line.is_empty() || !line.bytes().all(|b| b == b' '));
    if !(s.contains('\n') && no_bad_chars && first_sets_indent && no_blank_lines) {
        return None;
    }
    Some((text, s.len() - text.len()))
}

/// A scalar, or an empty collection in flow style.
fn scalar_text(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => string_text(s),
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "{}".to_owned(),
    }
}

fn string_text(s: &str) -> String {
    if plain_is_safe(s) {
        return s.to_owned();
    }
    let mut quoted = String::with_capacity(s.len() + 2);
    quoted.push('"');
    for c in s.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\t' => quoted.push_str("\\t"),
            // Other control characters, and what YAML reads as line breaks or a BOM.
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') => {
                quoted.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => quoted.push(c),
        }
    }
    quoted.push('"');
    quoted
}

/// Whether `s` can be written as a plain scalar: only characters without meaning to YAML
/// in block context, no indicator first, and read back as this string by YAML 1.1 (go-yaml
/// v2, [`resolve_plain`]) and by YAML 1.2 ([`resolve_plain_1_2`]).
fn plain_is_safe(s: &str) -> bool {
    let harmless = |c: char| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                ' ' | '-' | '_' | '.' | '/' | ':' | '=' | '+' | '@' | '(' | ')' | ','
            )
    };
    // `-` only before a character (`--flag`, not `- x`); never a document marker.
    let first_ok = match s.as_bytes() {
        [b'-', next, ..] => *next != b' ',
        [first, ..] => first.is_ascii_alphanumeric() || matches!(first, b'/' | b'.' | b'_'),
        [] => false,
    };
    first_ok
        && !s.starts_with("---")
        && !s.starts_with("...")
        && s.chars().all(harmless)
        && !s.ends_with([' ', ':'])
        && !s.contains(": ")
        && resolve_plain(s).is_ok_and(|v| v.as_str() == Some(s))
        && resolve_plain_1_2(s).is_ok_and(|v| v.as_str() == Some(s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(text: &str) -> Value {
        let mut docs = parse_documents(text).unwrap();
        assert_eq!(docs.len(), 1, "{docs:?}");
        docs.remove(0)
    }

    #[test]
    fn plain_scalars_resolve_as_yaml_1_1() {
        let v = one(
            "mode: 0644\nhex: 0x1F\nbin: 0b101\noct: 0o17\ndec: 42\nneg: -7\n\
             under: 1_000\nexp: 1e3\nfloat: 1.5\nleading: 08\nagree: yes\noff: off\n\
             tilde: ~\nempty:\nver: 1.2.3\nts: 2001-12-14t21:59:43.10-05:00\nbig: 18446744073709551615\n",
        );
        assert_eq!(
            v,
            json!({
                "mode": 420, "hex": 31, "bin": 5, "oct": 15, "dec": 42, "neg": -7,
                "under": 1000, "exp": 1000, "float": 1.5, "leading": 8,
                "agree": true, "false": false, "tilde": null, "empty": null,
                "ver": "1.2.3", "ts": "2001-12-14t21:59:43.10-05:00",
                "big": 18446744073709551615u64
            })
        );
        // As in go-yaml v2, even the keys `y` and `n` are booleans.
        assert_eq!(one("y: 1\nn: 2\n"), json!({"true": 1, "false": 2}));
    }

    #[test]
    fn quoted_and_block_scalars_stay_strings() {
        let v = one("a: \"0644\"\nb: 'yes'\nc: |\n  0644\nd: >-\n  true\ne: !!str 12\n");
        assert_eq!(
            v,
            json!({"a": "0644", "b": "yes", "c": "0644\n", "d": "true", "e": "12"})
        );
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let v = one("base: &b {x: 1, w: 2}\nlist: &l [1, 2]\ncopy: *l\n\
             derived:\n  <<: *b\n  w: 3\nmulti:\n  <<: [*b, {z: 4, x: 9}]\n");
        assert_eq!(v["copy"], json!([1, 2]));
        assert_eq!(v["derived"], json!({"x": 1, "w": 3}));
        assert_eq!(v["multi"], json!({"x": 1, "w": 2, "z": 4}));
        // A quoted "<<" is an ordinary key.
        assert_eq!(one("'<<': 1\n"), json!({"<<": 1}));
    }

    #[test]
    fn alias_bombs_are_refused() {
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for (name, prev) in ["b", "c", "d", "e", "f", "g", "h"]
            .iter()
            .zip(["a", "b", "c", "d", "e", "f", "g"])
        {
            let refs = vec![format!("*{prev}"); 10].join(", ");
            bomb.push_str(&format!("{name}: &{name} [{refs}]\n"));
        }
        let err = parse_documents(&bomb).unwrap_err();
        assert!(err.contains("excessive aliasing"), "{err}");
    }

    #[test]
    fn tags_and_keys() {
        // Expectations as helm v4.3.1 reads the same text (tests/integration/render.rs compares with
        // the real binary): an application tag leaves a scalar its text.
        let v = one("a: !!int \"7\"\nb: !!binary aGVsbG8=\nc: !custom 5\n1: one\ntrue: t\n");
        assert_eq!(
            v,
            json!({"a": 7, "b": "hello", "c": "5", "1": "one", "true": "t"})
        );
        assert!(parse_documents("a: !!int x\n").is_err());
        assert!(parse_documents("a: .inf\n").is_err());
    }

    #[test]
    fn documents_and_errors() {
        let docs = parse_documents("a: 1\n---\n# only a comment\n---\nb: 2\n").unwrap();
        assert_eq!(docs, vec![json!({"a": 1}), json!({"b": 2})]);
        let err = parse_documents("a: [1, 2\n").unwrap_err();
        assert!(err.contains("line"), "{err}");
    }

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
    fn written_documents_read_back_the_same_under_yaml_1_1_and_1_2() {
        let tricky = [
            "y",
            "n",
            "on",
            "Off",
            "yes",
            "null",
            "~",
            "",
            " lead",
            "trail ",
            "0644",
            "08",
            "1_000",
            "1e3",
            "0x1F",
            "0o17",
            ".inf",
            "-1",
            "+1",
            "1.5",
            "1:20",
            "a: b",
            "a:",
            "#x",
            "x #y",
            "- x",
            "-",
            "-x",
            "--flag",
            "---",
            "--- x",
            "...",
            "-.5",
            "&a",
            "*a",
            "!t",
            "%p",
            "@at",
            "`b",
            "'q'",
            "\"q\"",
            "{}",
            "[a]",
            "?",
            "|",
            ">",
            "multi\nline\n",
            "multi\nline",
            "kept\n\n",
            "blank\n\nlines\n\n\n",
            "more\n  indented\n",
            "# not a comment\n- not a list\n---\n...\n",
            " leading space\nx\n",
            "\nleading break",
            "\n",
            "\n\n",
            "only spaces\n  \nbetween",
            "tab\nin\tblock\n",
            "tab\there",
            "bell\u{7}",
            "del\u{7f}",
            "line\u{2028}sep",
            "é",
            "ghcr.io/wheelhouse-dev/wheelhouse:v0.1.0",
            "0.0.0.0:8080",
            "app.kubernetes.io/name",
            "true",
            "2001-12-14",
        ];
        let strings: Vec<Value> = tricky.iter().map(|s| json!(s)).collect();
        let keys: Map<String, Value> = tricky.iter().map(|s| (s.to_string(), json!(s))).collect();
        let docs = vec![
            json!({
                "strings": strings,
                "keys": keys,
                "numbers": [0, -7, 1.5, 18446744073709551615u64],
                "others": [true, false, null, {}, []],
                "nested": [[1, [2]], [{"a": [{"b": {}}], "c": "d"}], {"e": {"f": [[]]}}],
                "empty": {"map": {}, "list": []},
            }),
            json!([{"k": "v"}, "s"]),
            json!("scalar document"),
            json!({"---": "---", "...": "...", "--flag": "-"}),
            json!("---"),
            json!("..."),
        ];
        let text = to_documents(&docs);
        assert_eq!(parse_documents(&text).unwrap(), docs, "{text}");
        let yaml_1_2 = Loader {
            yaml_1_2: true,
            ..Loader::default()
        };
        assert_eq!(load(&text, yaml_1_2).unwrap(), docs, "{text}");
        for written in [
            // Plain where that is safe, as a person would write it.
            "- ghcr.io/wheelhouse-dev/wheelhouse:v0.1.0\n",
            "\n  app.kubernetes.io/name: app.kubernetes.io/name\n",
            "- \"on\"\n",
            "- --flag\n",
            // Text of several lines as a literal block, with its trailing line breaks.
            "\n- |\n  multi\n  line\n",
            "\n- |-\n  multi\n  line\n",
            "\n- |+\n  kept\n\n- ",
            "\n- \" leading space\\nx\\n\"\n",
            "\n  \"multi\\nline\": |-\n    multi\n",
        ] {
            assert!(text.contains(written), "{written:?} in:\n{text}");
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

    #[test]
    fn typed_reads_coerce_scalars_into_strings_as_sigs_k8s_io_yaml_does() {
        #[derive(Debug, PartialEq, serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Meta {
            name: String,
            version: Option<String>,
            app_version: Option<String>,
            keywords: Vec<String>,
            annotations: std::collections::BTreeMap<String, String>,
            replicas: Option<u32>,
            deprecated: bool,
            kind: Option<Kind>,
        }
        #[derive(Debug, PartialEq, serde::Deserialize)]
        enum Kind {
            Plain,
            Weighted(u8),
        }
        // What helm v4 (sigs.k8s.io/yaml v1.6.0) decodes from the same text.
        let meta: Meta = from_str(
            "name: 1e-5\nversion: 1.0\nappVersion: 1.10\nreplicas: 3\ndeprecated: yes\n\
             keywords: [1.5, 3.14159265358979, null, on, 0644, 1234567.5, 100000.5]\n\
             annotations: {n: 1, y: 2.50, k: ~}\nkind: Plain\n",
        )
        .unwrap();
        assert_eq!(
            meta,
            Meta {
                name: "1e-05".into(),
                version: Some("1".into()),
                app_version: Some("1.1".into()),
                keywords: [
                    "1.5",
                    "3.1415927",
                    "",
                    "true",
                    "420",
                    "1.2345675e+06",
                    "100000.5"
                ]
                .map(String::from)
                .to_vec(),
                annotations: [("false", "1"), ("true", "2.5"), ("k", "")]
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .into(),
                replicas: Some(3),
                deprecated: true,
                kind: Some(Kind::Plain),
            }
        );
        let weighted: Kind = from_str("Weighted: 7\n").unwrap();
        assert_eq!(weighted, Kind::Weighted(7));
        // Nothing else is coerced: a string is no number, a mapping no string.
        assert!(from_str::<Meta>("name: x\nreplicas: \"3\"\n").is_err());
        assert!(from_str::<Meta>("name: {a: 1}\n").is_err());
        // Empty text is null, and null an empty list, map or struct, as in Go; more than
        // one document is refused.
        assert_eq!(from_str::<Option<Meta>>("# nothing\n").unwrap(), None);
        let err = from_str::<Meta>("").unwrap_err();
        assert!(err.contains("missing field `name`"), "{err}");
        let meta: Meta =
            from_str("name: x\nkeywords: ~\nannotations:\ndeprecated: false\n").unwrap();
        assert!(meta.keywords.is_empty() && meta.annotations.is_empty());
        let err = from_str::<Value>("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(err.contains("one YAML document"), "{err}");
        // Float keys are formatted as the library formats them.
        assert_eq!(
            one("3.14159265358979: a\n0.1: b\n1.0: c\n"),
            json!({"3.1415927": "a", "0.1": "b", "1": "c"})
        );
    }

    #[test]
    fn float32_text_is_go_s() {
        for (f, want) in [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.1, "1.1"),
            (-2.5, "-2.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123456.0, "123456"),
            (1234567.0, "1.234567e+06"),
            (1e21, "1e+21"),
            (1e300, "+Inf"),
            (-1e300, "-Inf"),
        ] {
            assert_eq!(go_float32_text(f), want, "{f}");
        }
    }

    #[test]
    fn typed_writes_go_through_json() {
        #[derive(serde::Serialize)]
        struct Favourites {
            contexts: std::collections::BTreeMap<&'static str, Vec<&'static str>>,
        }
        let f = Favourites {
            contexts: [("prod", vec!["apps", "no", "123"]), ("empty", vec![])].into(),
        };
        assert_eq!(
            to_string(&f),
            "contexts:\n  empty: []\n  prod:\n  - apps\n  - \"no\"\n  - \"123\"\n"
        );
        assert_eq!(to_string(&json!({})), "{}\n");
    }
}

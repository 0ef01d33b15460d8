//! Values decoded into Rust types the way sigs.k8s.io/yaml decodes them into Go types:
//! scalars read as their Go text where a string is wanted, null as the zero value.

use serde::de::value::{MapAccessDeserializer, MapDeserializer, SeqDeserializer};
use serde::de::{Deserializer, IntoDeserializer, Visitor};
use serde_json::{Map, Number, Value};

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
pub(super) fn number_text(n: &Number) -> String {
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
/// `from_value`).
pub(super) struct GoValue(pub(super) Value);

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

#[cfg(test)]
mod tests {
    use super::*;

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
}

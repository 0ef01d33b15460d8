//! The one YAML writer: block style, strings plain only where YAML 1.1 and 1.2 readers
//! all read them back as the same string, multi-line text as a literal block.

use serde_json::{Map, Number, Value};

use super::scalars::{resolve_plain, resolve_plain_1_2, yaml_1_1_type};

/// Writes `documents` as a YAML stream (`---` between documents) that reads back as the
/// same JSON under YAML 1.1, as kubectl and Helm read it (`parse_documents`), under YAML
/// 1.1's whole type repository, as PyYAML and the tools on it read it (dates, `1:20`),
/// and under YAML 1.2. A writer for YAML 1.2 only would write a string such as `on`, `y`
/// or `1_000` plain, and it would reach the API server as a boolean or a number; here a
/// string is written plain only when every reading gives that string back, as a literal
/// block (`|`) when it is text of several lines that one reads back exactly, and
/// double-quoted otherwise.
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
        Value::Number(n) => number_literal(n),
        Value::String(s) => string_text(s),
        Value::Array(_) => "[]".to_owned(),
        Value::Object(_) => "{}".to_owned(),
    }
}

/// A number as every reading takes it for one: JSON's `1e21` is a string to PyYAML,
/// whose floats need a point and a signed exponent (`1.0e+21`).
fn number_literal(n: &Number) -> String {
    let text = n.to_string();
    let Some((mantissa, exponent)) = text.split_once(['e', 'E']) else {
        return text;
    };
    let point = if mantissa.contains('.') { "" } else { ".0" };
    let sign = if exponent.starts_with(['-', '+']) {
        ""
    } else {
        "+"
    };
    format!("{mantissa}{point}e{sign}{exponent}")
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
/// v2, [`resolve_plain`]; the whole type repository, [`yaml_1_1_type`]) and by YAML 1.2
/// ([`resolve_plain_1_2`]). The words YAML 1.1 makes booleans and null are quoted in every
/// spelling of their case (`yEs`): a string that near a boolean is not left to a reader.
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
        && yaml_1_1_type(s).is_none()
        && !["y", "n", "yes", "no", "on", "off", "true", "false", "null"]
            .iter()
            .any(|word| s.eq_ignore_ascii_case(word))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::text::yaml::loader::{Loader, load};
    use crate::text::yaml::parse_documents;
    use crate::text::yaml::scalars::PlainRules;

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
            // What YAML 1.1's type repository (PyYAML) types and go-yaml v2 does not.
            "2024-01-01",
            "2001-12-14t21:59:43.10-05:00",
            "2001-12-14 21:59:43.10 -5",
            "2001-12-14T21:59:43Z",
            "2026-1-2 3:04:05",
            "1:20",
            "-1:20:30",
            "190:20:30.15",
            "8080:30",
            "1_000.5",
            "0b1_0",
            "0x_1F",
            "._5",
            "=",
            "<<",
            "yEs",
            "nULL",
            "tRUE",
            "8080:80",
            "2024-01",
            "1.2.3",
        ];
        let strings: Vec<Value> = tricky.iter().map(|s| json!(s)).collect();
        let keys: Map<String, Value> = tricky.iter().map(|s| (s.to_string(), json!(s))).collect();
        let docs = vec![
            json!({
                "strings": strings,
                "keys": keys,
                "numbers": [0, -7, 1.5, 18446744073709551615u64, 1e21, 1.5e-7, -2e-9],
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
        for rules in [PlainRules::Yaml11Types, PlainRules::Yaml12Core] {
            let mut loader = Loader::default();
            loader.rules = rules;
            assert_eq!(load(&text, loader).unwrap(), docs, "{rules:?}:\n{text}");
        }
        for written in [
            // Plain where that is safe, as a person would write it.
            "- ghcr.io/wheelhouse-dev/wheelhouse:v0.1.0\n",
            "\n  app.kubernetes.io/name: app.kubernetes.io/name\n",
            "- \"on\"\n",
            "- --flag\n",
            "- \"2024-01-01\"\n",
            "- \"1:20\"\n",
            "- 1.0e+21\n",
            // Strings no reader types stay plain.
            "- 8080:80\n",
            "- 2024-01\n",
            "- 1.2.3\n",
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
}

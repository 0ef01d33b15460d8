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
//!
//! By job: the typed reads and writes (`mod.rs`), events to values (`loader.rs`), what a
//! scalar resolves to (`scalars.rs`), values decoded into Go's shapes (`go_decode.rs`),
//! and the writer (`emit.rs`).

mod emit;
mod go_decode;
mod loader;
mod scalars;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use emit::to_documents;
use go_decode::GoValue;
pub use go_decode::go_string;
use loader::{Loader, load};

/// Why YAML text did not read as JSON values, or not as the type asked for. The messages
/// are go-yaml's where it has one.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The text is not YAML (the parser's message, with the line and column).
    #[error(transparent)]
    Syntax(#[from] granit_parser::ScanError),
    #[error("alias to an unknown anchor")]
    UnknownAnchor,
    /// Aliases would copy more nodes than a document may hold ("billion laughs").
    #[error("the document contains excessive aliasing")]
    ExcessiveAliasing,
    #[error("unbalanced YAML collection")]
    Unbalanced,
    #[error("mapping key outside a mapping")]
    KeyOutsideMapping,
    #[error("map merge requires a map or a sequence of maps")]
    MergeNotMaps,
    #[error("null is not a valid map key")]
    NullKey,
    #[error("a collection is not a valid map key")]
    CollectionKey,
    /// A scalar with a core tag (`!!int x`) that is not of that type.
    #[error("cannot decode {text:?} as !!{tag}")]
    Tagged { text: String, tag: String },
    #[error("!!binary value {0:?} is not UTF-8 text")]
    BinaryNotText(String),
    /// `.inf`, `.nan`, or a number JSON cannot hold.
    #[error("{0} cannot be represented in JSON")]
    NotJson(String),
    #[error("cannot parse {0:?} as a number")]
    NotANumber(String),
    #[error("{0} does not fit in 64 bits")]
    TooLarge(String),
    /// A typed read wants one document; the text holds this many.
    #[error("expected one YAML document, found {0}")]
    Documents(usize),
    /// The YAML read, but not as the type asked for (serde's message).
    #[error(transparent)]
    Decode(serde_json::Error),
}

/// Parses every document of `text`; empty documents (`null`) are left out.
pub fn parse_documents(text: &str) -> Result<Vec<Value>, Error> {
    load(text, Loader::default())
}

/// Parses every document of `text` as a reader with YAML 1.1's whole type repository
/// (PyYAML's `safe_load`) does: dates, sexagesimal numbers and `0b1_0` are not strings.
/// A timestamp, which no JSON value is, reads as the text `!!timestamp <text>`. For tests
/// of what the writer writes.
#[cfg(test)]
pub(crate) fn parse_documents_yaml_1_1_types(text: &str) -> Result<Vec<Value>, Error> {
    let mut loader = Loader::default();
    loader.rules = scalars::PlainRules::Yaml11Types;
    load(text, loader)
}

/// Parses every document of `text` with YAML 1.2's core schema, as YAML 1.2 readers do
/// (`yes` and `0b1` are strings, `0644` the decimal 644). For tests of what the writer
/// writes.
#[cfg(test)]
pub(crate) fn parse_documents_yaml_1_2(text: &str) -> Result<Vec<Value>, Error> {
    let mut loader = Loader::default();
    loader.rules = scalars::PlainRules::Yaml12Core;
    load(text, loader)
}

/// Reads the one YAML document of `text` into `T` as sigs.k8s.io/yaml's `Unmarshal` does
/// ([`parse_documents`], then [`from_value`]). Empty text, or only comments, reads as
/// null (so an `Option` is `None`, and a map, list or struct is empty); more than one
/// document is an error.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    let mut documents = parse_documents(text)?;
    let document = match documents.len() {
        0 => Value::Null,
        1 => documents.swap_remove(0),
        n => return Err(Error::Documents(n)),
    };
    from_value(document)
}

/// Decodes `value` into `T` as sigs.k8s.io/yaml does after reading YAML: where `T` wants a
/// string, a number or boolean reads as its text as Go formats it ([`go_string`]: `1.10`
/// is "1.1", `0644` is "420", `yes` is "true") and null as "", and null where a list, map
/// or struct is wanted is an empty one (Go's zero value); everything else decodes as
/// [`serde_json::from_value`] would.
pub fn from_value<T: DeserializeOwned>(value: Value) -> Result<T, Error> {
    T::deserialize(GoValue(value)).map_err(Error::Decode)
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
        let err = parse_documents(&bomb).unwrap_err().to_string();
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
        let err = parse_documents("a: [1, 2\n").unwrap_err().to_string();
        assert!(err.contains("line"), "{err}");
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
        let err = from_str::<Meta>("").unwrap_err().to_string();
        assert!(err.contains("missing field `name`"), "{err}");
        let meta: Meta =
            from_str("name: x\nkeywords: ~\nannotations:\ndeprecated: false\n").unwrap();
        assert!(meta.keywords.is_empty() && meta.annotations.is_empty());
        let err = from_str::<Value>("a: 1\n---\nb: 2\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("one YAML document"), "{err}");
        // Float keys are formatted as the library formats them.
        assert_eq!(
            one("3.14159265358979: a\n0.1: b\n1.0: c\n"),
            json!({"3.1415927": "a", "0.1": "b", "1": "c"})
        );
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

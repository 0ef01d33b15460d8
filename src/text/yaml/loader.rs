//! YAML events to JSON values: collections, anchors and aliases (bounded), merge keys,
//! and map keys as Go formats them.

use std::collections::HashMap;

use granit_parser::{Event, Parser, ScalarStyle};
use serde_json::{Map, Value};

use super::Error;
use super::go_decode::number_text;
use super::scalars::{PlainRules, resolve_scalar};

pub(super) fn load(text: &str, mut loader: Loader) -> Result<Vec<Value>, Error> {
    for item in Parser::new_from_str(text) {
        let (event, _span) = item?;
        loader.event(event)?;
    }
    Ok(loader.documents)
}

/// How many nodes aliases may copy in all, so a small "billion laughs" document cannot
/// exhaust memory (go-yaml rejects such documents as "excessive aliasing" too).
const MAX_ALIASED_NODES: usize = 1_000_000;

#[derive(Default)]
pub(super) struct Loader {
    documents: Vec<Value>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Value>,
    aliased_nodes: usize,
    /// How plain scalars resolve: go-yaml v2's YAML 1.1 unless a test reads what
    /// `to_documents` writes as other readers do.
    pub(super) rules: PlainRules,
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
    fn event(&mut self, event: Event<'_>) -> Result<(), Error> {
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
                let value = resolve_scalar(&text, style, tag.as_deref(), self.rules)?;
                if anchor != 0 {
                    self.anchors.insert(anchor, value.clone());
                }
                self.push(value)?;
            }
            Event::Alias(id) => {
                let value = self.anchors.get(&id).ok_or(Error::UnknownAnchor)?;
                let budget = MAX_ALIASED_NODES - self.aliased_nodes;
                let size = count_nodes(value, budget).ok_or(Error::ExcessiveAliasing)?;
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
                    None => return Err(Error::Unbalanced),
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

    fn push_key(&mut self, key: Key) -> Result<(), Error> {
        match self.stack.last_mut() {
            Some(Frame::Mapping { key: slot, .. }) => {
                *slot = Some(key);
                Ok(())
            }
            _ => Err(Error::KeyOutsideMapping),
        }
    }

    /// Adds a finished value to the enclosing collection (or ends a document).
    fn push(&mut self, value: Value) -> Result<(), Error> {
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
fn merge_into(merged: &mut Map<String, Value>, value: Value) -> Result<(), Error> {
    let maps = match value {
        Value::Array(items) => items,
        single => vec![single],
    };
    for map in maps {
        let Value::Object(map) = map else {
            return Err(Error::MergeNotMaps);
        };
        for (k, v) in map {
            merged.entry(k).or_insert(v);
        }
    }
    Ok(())
}

/// JSON keys are strings; sigs.k8s.io/yaml formats resolved scalar keys the way Go does.
fn key_string(key: Value) -> Result<String, Error> {
    match key {
        Value::String(s) => Ok(s),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(number_text(&n)),
        Value::Null => Err(Error::NullKey),
        Value::Array(_) | Value::Object(_) => Err(Error::CollectionKey),
    }
}

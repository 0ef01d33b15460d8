//! HelmReleases read leniently, one object at a time.
//!
//! A list or watch of the typed [`HelmRelease`] fails as a whole when one object does not
//! decode (a field out of range, values nested deeper than the JSON decoder's recursion
//! limit, ...), which would stop every release in scope. [`RawHelmRelease`] keeps spec and
//! status as raw JSON: serde_json skips a raw value iteratively, with no depth limit, so
//! the list always decodes; each object is then decoded on its own by
//! [`RawHelmRelease::decode`], and one bad object affects only itself.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{HelmRelease, HelmReleaseSpec, HelmReleaseStatus};

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct RawHelmRelease {
    // Plain fields, not a flattened TypeMeta: flatten buffers the whole object through
    // serde's recursive Content, which would bring the depth limit back.
    #[serde(
        rename = "apiVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Without managedFields: their FieldsV1 mirror the spec, as deep as its values.
    #[serde(deserialize_with = "meta_without_managed_fields")]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Box<RawValue>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Box<RawValue>>,
}

impl Resource for RawHelmRelease {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(dt: &()) -> Cow<'_, str> {
        HelmRelease::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        HelmRelease::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        HelmRelease::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        HelmRelease::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A HelmRelease whose spec wheelhouse cannot read.
#[derive(Debug, Clone)]
pub struct Undecodable {
    /// A stand-in with the object's metadata, the status if it decodes, and a spec that
    /// names no chart; for front ends that list it.
    pub placeholder: HelmRelease,
    /// Why, fit for a status message (never the object itself).
    pub reason: String,
}

impl RawHelmRelease {
    /// The typed object, or why it cannot be had. The status is best effort: the engine
    /// rewrites it anyway, so a status that does not decode is dropped, not fatal.
    pub fn decode(self) -> Result<HelmRelease, Box<Undecodable>> {
        let status = self.status.as_deref().and_then(|s| {
            serde_json::from_str::<HelmReleaseStatus>(s.get())
                .inspect_err(|e| {
                    tracing::warn!(object = %name(&self.metadata), error = %e, "ignoring a HelmRelease status that does not decode");
                })
                .ok()
        });
        let too_deep = || {
            format!(
                "its spec nests deeper than the {MAX_SPEC_DEPTH} levels wheelhouse reads (look for deeply nested values)"
            )
        };
        let spec = match self.spec.as_deref() {
            None => Err("it has no spec".to_string()),
            // Every typed read of the object (a patch's answer, say) decodes it whole, its
            // managedFields mirror included: a spec that fits alone but not there would
            // fail every write after the first read.
            Some(raw) if nesting(raw.get()) > MAX_SPEC_DEPTH => Err(too_deep()),
            Some(raw) => serde_json::from_str::<HelmReleaseSpec>(raw.get()).map_err(|e| {
                if e.to_string().contains("recursion limit") {
                    too_deep()
                } else {
                    format!("its spec does not decode: {e}")
                }
            }),
        };
        match spec {
            Ok(spec) => Ok(HelmRelease {
                metadata: self.metadata,
                spec,
                status,
            }),
            Err(reason) => {
                let spec: HelmReleaseSpec =
                    serde_json::from_value(serde_json::json!({"chart": {}}))
                        .expect("a spec with defaults");
                Err(Box::new(Undecodable {
                    placeholder: HelmRelease {
                        metadata: self.metadata,
                        spec,
                        status,
                    },
                    reason: format!("wheelhouse cannot read this HelmRelease: {reason}"),
                }))
            }
        }
    }
}

/// The deepest spec whose object still decodes wherever a client reads it typed: serde_json
/// stops at 128 nested arrays and objects; the API server's copy holds the spec twice,
/// once under the root and once mirrored in `metadata.managedFields[].fieldsV1`, deeper by
/// the path to it and by the empty object that stands for each leaf; and a list
/// (`{"items": [...]}`) or a watch event (`{"object": ...}`) wraps it once more. Checked
/// against real decodes of a list holding the whole object in the tests below.
pub const MAX_SPEC_DEPTH: usize = 119;

/// How deeply arrays and objects nest in a JSON text (a scalar is 0), read iteratively so
/// any depth is measured.
fn nesting(json: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for b in json.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn meta_without_managed_fields<'de, D>(d: D) -> Result<ObjectMeta, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let mut fields: std::collections::BTreeMap<String, Box<RawValue>> =
        Deserialize::deserialize(d)?;
    fields.remove("managedFields");
    let text = serde_json::to_string(&fields).map_err(serde::de::Error::custom)?;
    serde_json::from_str(&text).map_err(serde::de::Error::custom)
}

fn name(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(depth: usize) -> String {
        let mut v = String::from("1");
        for _ in 0..depth {
            v = format!("{{\"a\":{v}}}");
        }
        v
    }

    /// The managedFields mirror of `values` as the API server writes it: `f:` keys, and
    /// an empty object for each leaf.
    fn mirror(values: &str) -> String {
        // `values` is `nested(n)` or a flat object: n `{`, each one key deep. Built from
        // the text, as serde_json cannot hold the deepest ones.
        let depth = values.matches('{').count();
        let mut out = String::from("{}");
        for _ in 0..depth {
            out = format!("{{\"f:a\":{out}}}");
        }
        out
    }

    fn object(name: &str, values: &str) -> String {
        let mirror = mirror(values);
        format!(
            r#"{{"apiVersion":"wheelhouse.dev/v1alpha1","kind":"HelmRelease","metadata":{{"name":"{name}","namespace":"apps","managedFields":[{{"manager":"kubectl","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{{"f:spec":{{"f:values":{mirror}}}}}}}]}},"spec":{{"chart":{{"path":"./c"}},"values":{values}}},"status":{{"conditions":[]}}}}"#
        )
    }

    #[test]
    fn a_deep_object_in_a_list_leaves_the_others_readable() {
        let list = format!(
            r#"{{"items":[{},{}]}}"#,
            object("deep", &nested(300)),
            object("fine", "{\"a\":1}")
        );
        // The typed list cannot be read at all ...
        #[derive(Deserialize)]
        #[allow(dead_code)]
        struct Typed {
            items: Vec<HelmRelease>,
        }
        assert!(serde_json::from_str::<Typed>(&list).is_err());
        // ... the raw one can, and only the deep object fails to decode.
        #[derive(Deserialize)]
        struct Raw {
            items: Vec<RawHelmRelease>,
        }
        let raw: Raw = serde_json::from_str(&list).unwrap();
        let mut items = raw.items.into_iter().map(RawHelmRelease::decode);
        let deep = items.next().unwrap().unwrap_err();
        assert!(deep.reason.contains("nests deeper"), "{}", deep.reason);
        assert_eq!(deep.placeholder.metadata.name.as_deref(), Some("deep"));
        let fine = items.next().unwrap().unwrap();
        assert_eq!(fine.spec.values, Some(serde_json::json!({"a": 1})));
    }

    #[test]
    fn values_a_hundred_levels_deep_are_read() {
        let raw: RawHelmRelease = serde_json::from_str(&object("ok", &nested(100))).unwrap();
        assert!(raw.decode().is_ok());
    }

    /// What is read is exactly what a typed list of the whole object (managed fields
    /// included, as the API server returns it) can decode: the band where the spec alone
    /// decodes but the object does not is refused up front.
    #[test]
    fn a_spec_is_read_exactly_when_a_list_of_its_whole_object_decodes() {
        #[derive(Deserialize)]
        #[allow(dead_code)]
        struct Typed {
            items: Vec<HelmRelease>,
        }
        for depth in 90..140 {
            let text = object("x", &nested(depth));
            let whole = serde_json::from_str::<Typed>(&format!(r#"{{"items":[{text}]}}"#)).is_ok();
            let raw: RawHelmRelease = serde_json::from_str(&text).unwrap();
            assert_eq!(raw.decode().is_ok(), whole, "values nested {depth} deep");
        }
    }

    #[test]
    fn nesting_skips_strings() {
        assert_eq!(nesting("1"), 0);
        assert_eq!(nesting(r#"{"a":[{"b":"{[\"]}"}]}"#), 3);
    }

    #[test]
    fn a_field_out_of_range_names_itself() {
        let text =
            r#"{"metadata":{"name":"x"},"spec":{"chart":{"path":"./c"},"maxHistory":99999999999}}"#;
        let raw: RawHelmRelease = serde_json::from_str(text).unwrap();
        let err = raw.decode().unwrap_err();
        assert!(err.reason.contains("does not decode"), "{}", err.reason);
        assert!(err.reason.contains("99999999999"), "{}", err.reason);
    }
}

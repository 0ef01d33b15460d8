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
        let spec = match self.spec.as_deref() {
            None => Err("it has no spec".to_string()),
            Some(raw) => serde_json::from_str::<HelmReleaseSpec>(raw.get()).map_err(|e| {
                if e.to_string().contains("recursion limit") {
                    "its spec nests deeper than the 128 levels wheelhouse reads (look for deeply nested values)".to_string()
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

    fn object(name: &str, values: &str) -> String {
        format!(
            r#"{{"apiVersion":"wheelhouse.dev/v1alpha1","kind":"HelmRelease","metadata":{{"name":"{name}","namespace":"apps","managedFields":[{{"manager":"kubectl","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{{"f:spec":{{"f:values":{values}}}}}}}]}},"spec":{{"chart":{{"path":"./c"}},"values":{values}}},"status":{{"conditions":[]}}}}"#
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
        let raw: RawHelmRelease = serde_json::from_str(&object("ok", &nested(120))).unwrap();
        assert!(raw.decode().is_ok());
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

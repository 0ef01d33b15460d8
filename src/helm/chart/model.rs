//! Helm's chart as stored inside a release (`helm.sh/helm/v4/pkg/chart/v2`): metadata,
//! templates, default values, schema and other files. Stored whole in every revision so
//! `helm rollback` and `helm get` keep working on wheelhouse's releases.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Chart {
    pub metadata: Option<Metadata>,
    /// Chart.lock, when present.
    pub lock: Option<serde_json::Value>,
    pub templates: Vec<File>,
    /// The chart's values.yaml.
    pub values: serde_json::Map<String, serde_json::Value>,
    /// values.schema.json, base64 in JSON as Go writes []byte.
    #[serde(with = "bytes_b64_opt")]
    pub schema: Option<Vec<u8>>,
    /// Every other file (README, NOTES.txt is a template, crds/, files read with .Files).
    pub files: Vec<File>,
}

/// Chart.yaml. Fields wheelhouse reads are typed; the rest is kept as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub name: String,
    #[serde(default)]
    pub version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct File {
    pub name: String,
    #[serde(with = "bytes_b64")]
    pub data: Vec<u8>,
}

mod bytes_b64 {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(b))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = Option::<String>::deserialize(d)?.unwrap_or_default();
        STANDARD.decode(s).map_err(serde::de::Error::custom)
    }
}

mod bytes_b64_opt {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &Option<Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
        match b {
            Some(b) => s.serialize_str(&STANDARD.encode(b)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(s) if !s.is_empty() => STANDARD
                .decode(s)
                .map(Some)
                .map_err(serde::de::Error::custom),
            _ => Ok(None),
        }
    }
}

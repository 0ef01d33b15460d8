//! A Helm repository's `index.yaml`: only the fields wheelhouse reads, parsed leniently
//! (Helm skips entries it cannot use rather than refusing the whole index).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Index {
    #[serde(default, deserialize_with = "entries")]
    pub entries: BTreeMap<String, Vec<ChartVersion>>,
}

/// One published version of a chart. A scalar where a string is wanted reads as Helm reads
/// it ([`crate::text::yaml::from_value`]): `version: 1.0` is "1" and `appVersion: 1.10` is
/// "1.1", which is why Helm asks for such versions to be quoted.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChartVersion {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub app_version: Option<String>,
    #[serde(default, deserialize_with = "strings")]
    pub urls: Vec<String>,
    /// sha256 of the .tgz, hex (Helm writes it without a prefix).
    #[serde(default)]
    pub digest: Option<String>,
    #[serde(default)]
    pub created: Option<String>,
}

/// Why a repository's index does not read.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error(transparent)]
    Yaml(#[from] crate::text::yaml::Error),
}

impl Index {
    pub fn parse(text: &[u8]) -> Result<Self, IndexError> {
        let text = std::str::from_utf8(text)?;
        Ok(crate::text::yaml::from_str(text)?)
    }
}

impl ChartVersion {
    /// The digest as bare lowercase hex, if the index gives one.
    pub fn sha256(&self) -> Option<String> {
        let d = self.digest.as_deref()?.trim();
        let hex = d.strip_prefix("sha256:").unwrap_or(d);
        (!hex.is_empty()).then(|| hex.to_ascii_lowercase())
    }
}

/// `entries`, dropping null lists and versions without a version string.
fn entries<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, Vec<ChartVersion>>, D::Error> {
    let raw = Option::<BTreeMap<String, Option<Vec<Option<ChartVersion>>>>>::deserialize(d)?;
    Ok(raw
        .unwrap_or_default()
        .into_iter()
        .map(|(name, versions)| {
            let versions = versions
                .unwrap_or_default()
                .into_iter()
                .flatten()
                .filter(|v| v.version.as_deref().is_some_and(|s| !s.is_empty()))
                .collect();
            (name, versions)
        })
        .collect())
}

fn strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::Array(items) => items
            .into_iter()
            .filter_map(|v| match v {
                serde_json::Value::String(s) => Some(s),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_helm_written_index() {
        let index = Index::parse(
            br#"
apiVersion: v1
entries:
  podinfo:
  - apiVersion: v2
    appVersion: 6.5.0
    created: "2024-01-02T03:04:05.123456789Z"
    description: Podinfo Helm chart for Kubernetes
    digest: 6c8e3b0bd6ad6a5b7c3d6e5f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b
    name: podinfo
    urls:
    - https://example.com/podinfo-6.5.0.tgz
    version: 6.5.0
  - appVersion: 1.10
    name: podinfo
    urls: [podinfo-1.0.tgz]
    version: 1.0
  - name: podinfo
    description: broken entry without version
  empty: null
generated: "2024-01-02T03:04:05Z"
"#,
        )
        .unwrap();
        let podinfo = &index.entries["podinfo"];
        assert_eq!(podinfo.len(), 2);
        assert_eq!(podinfo[0].version.as_deref(), Some("6.5.0"));
        assert_eq!(podinfo[0].app_version.as_deref(), Some("6.5.0"));
        assert_eq!(
            podinfo[0].sha256().as_deref(),
            Some("6c8e3b0bd6ad6a5b7c3d6e5f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b")
        );
        // Unquoted, these are the floats 1 and 1.1, and helm v4 reads them so.
        assert_eq!(podinfo[1].version.as_deref(), Some("1"));
        assert_eq!(podinfo[1].app_version.as_deref(), Some("1.1"));
        assert_eq!(podinfo[1].urls, ["podinfo-1.0.tgz"]);
        assert_eq!(podinfo[1].sha256(), None);
        assert!(index.entries["empty"].is_empty());
    }

    #[test]
    fn rejects_what_is_not_an_index() {
        assert!(Index::parse(b"entries: [1, 2").is_err());
        assert!(Index::parse(b"- just\n- a list\n").is_err());
        assert_eq!(Index::parse(b"{}").unwrap(), Index::default());
    }
}

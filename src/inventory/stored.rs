//! A Helm release as its newest storage record shows it: what `helm list` prints.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use crate::engine::ReleaseKey;
use crate::release::Status;

/// The label selector of Helm's storage Secrets.
pub const SELECTOR: &str = "owner=helm";

/// The newest record of a stored Helm release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Storage namespace and release name.
    pub key: ReleaseKey,
    /// Where its objects go (the release's namespace; the storage namespace for the
    /// helm CLI).
    pub target_namespace: String,
    pub revision: i32,
    pub status: Status,
    pub chart: String,
    pub chart_version: String,
    pub app_version: String,
    /// `info.last_deployed`, `helm list`'s UPDATED.
    pub updated: Option<Timestamp>,
    pub description: String,
}

/// (release, revision, status label) of a storage Secret; `None` for a Secret that is
/// not a Helm record.
pub fn labels(secret: &Secret) -> Option<(ReleaseKey, i32, String)> {
    let labels = secret.metadata.labels.as_ref()?;
    let name = labels.get("name")?;
    let version = labels.get("version")?.parse().ok()?;
    let status = labels.get("status").cloned().unwrap_or_default();
    Some((
        ReleaseKey::new(secret.namespace().unwrap_or_default(), name.clone()),
        version,
        status,
    ))
}

/// The record a storage Secret holds, reduced; `None` when it does not decode (one bad
/// record hides only itself).
///
/// A record a wheelhouse HelmRelease claims (its claim labels) is that HelmRelease's: the
/// table shows it under the HelmRelease, so it is reduced from its labels alone and not
/// decoded (at thousands of releases, decoding every managed record would cost seconds of
/// CPU for rows never shown). Its row appears only if the HelmRelease is gone, and then
/// says whose it was.
pub fn decode(secret: &Secret) -> Option<Stored> {
    let (key, version, status) = labels(secret)?;
    let all = secret.metadata.labels.as_ref()?;
    if all.contains_key(crate::release::CLAIM_UID_LABEL) {
        let claimed_by = match (
            all.get(crate::release::CLAIM_NAMESPACE_LABEL),
            all.get(crate::release::CLAIM_NAME_LABEL),
        ) {
            (Some(ns), Some(name)) => format!("{ns}/{name}"),
            _ => "a wheelhouse HelmRelease".to_owned(),
        };
        return Some(Stored {
            target_namespace: key.namespace.clone(),
            key,
            revision: version,
            status: status.parse().unwrap_or_default(),
            chart: String::new(),
            chart_version: String::new(),
            app_version: String::new(),
            updated: all
                .get("modifiedAt")
                .and_then(|t| t.parse::<i64>().ok())
                .and_then(|t| Timestamp::from_second(t).ok()),
            description: format!("claimed by HelmRelease {claimed_by}, which is not in view"),
        });
    }
    let data = secret.data.as_ref()?.get("release")?;
    let release = match crate::release::storage::decode(&data.0) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(secret = %secret.name_any(), error = %e, "undecodable Helm record");
            return None;
        }
    };
    Some(of(key, &release))
}

/// A decoded record, reduced.
pub fn of(key: ReleaseKey, release: &crate::release::Release) -> Stored {
    let info = release.info.clone().unwrap_or_default();
    let meta = release.chart.as_ref().and_then(|c| c.metadata.as_ref());
    Stored {
        key,
        target_namespace: release.namespace.clone(),
        revision: release.version,
        status: info.status,
        chart: meta.map(|m| m.name.clone()).unwrap_or_default(),
        chart_version: meta.map(|m| m.version.clone()).unwrap_or_default(),
        app_version: meta.and_then(|m| m.app_version.clone()).unwrap_or_default(),
        updated: info.last_deployed,
        description: info.description,
    }
}

//! A Helm release as its newest storage record shows it: what `helm list` prints.

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::ObjectMeta;

use crate::engine::ReleaseKey;
use crate::helm::release::Status;

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
    /// When its storage Secret was created: when the revision's action began.
    pub created: Option<Timestamp>,
    /// Who wrote it (see [`crate::helm::release::written_by`]).
    pub author: String,
}

/// What a storage Secret's labels say: the release (storage namespace, name), the
/// revision, and the record as far as labels tell it (status, when it was modified,
/// whose claim it carries). `None` for a Secret that is not a Helm record.
pub fn from_labels(meta: &ObjectMeta) -> Option<(ReleaseKey, Stored, bool)> {
    let labels = meta.labels.as_ref()?;
    let name = labels.get("name")?;
    let revision = labels.get("version")?.parse().ok()?;
    let key = ReleaseKey::new(meta.namespace.clone().unwrap_or_default(), name.clone());
    let claimed = labels.contains_key(crate::helm::release::CLAIM_UID_LABEL);
    let description = if claimed {
        // Its row is the HelmRelease's; it shows only if that HelmRelease is gone.
        let by = match (
            labels.get(crate::helm::release::CLAIM_NAMESPACE_LABEL),
            labels.get(crate::helm::release::CLAIM_NAME_LABEL),
        ) {
            (Some(ns), Some(name)) => format!("HelmRelease {ns}/{name}"),
            _ => "a wheelhouse HelmRelease".to_owned(),
        };
        format!("claimed by {by}, which is not in view")
    } else {
        String::new()
    };
    let stored = Stored {
        target_namespace: key.namespace.clone(),
        key: key.clone(),
        revision,
        status: labels
            .get("status")
            .and_then(|s| s.parse().ok())
            .unwrap_or_default(),
        chart: String::new(),
        chart_version: String::new(),
        app_version: String::new(),
        updated: labels
            .get("modifiedAt")
            .and_then(|t| t.parse::<i64>().ok())
            .and_then(|t| Timestamp::from_second(t).ok()),
        description,
        created: meta.creation_timestamp.as_ref().map(|t| t.0),
        author: crate::helm::release::written_by(
            labels,
            meta.managed_fields
                .iter()
                .flatten()
                .find_map(|m| m.manager.as_deref()),
        ),
    };
    Some((key, stored, claimed))
}

/// The record a storage Secret holds, decoded and reduced; `None` when it does not decode
/// (one bad record hides only itself).
pub fn decode(secret: &Secret) -> Option<Stored> {
    let (key, labelled, _) = from_labels(&secret.metadata)?;
    let data = secret.data.as_ref()?.get("release")?;
    let release = match crate::helm::release::storage::decode(&data.0) {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(secret = %secret.name_any(), error = %e, "undecodable Helm record");
            return None;
        }
    };
    Some(Stored {
        created: labelled.created,
        author: labelled.author,
        ..of(key, &release)
    })
}

/// A decoded record, reduced.
pub fn of(key: ReleaseKey, release: &crate::helm::release::Release) -> Stored {
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
        created: None,
        author: crate::helm::release::written_by(
            &release.labels,
            release.managers.first().map(String::as_str),
        ),
    }
}

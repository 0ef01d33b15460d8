//! One HelmRelease per Helm release. A Helm release (storage namespace + release name)
//! is claimed by the HelmRelease that manages it through labels on its storage Secrets;
//! the helm CLI carries custom labels over to the revisions it writes, so the claim
//! survives a `helm upgrade` or `helm rollback` by hand. A second HelmRelease naming the
//! same release is refused, and deleting it uninstalls nothing.

use std::collections::BTreeMap;

use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

use crate::api::HelmRelease;
use crate::helm::release::{Release, storage};

pub use crate::helm::release::{
    CLAIM_NAME_LABEL as NAME_LABEL, CLAIM_NAMESPACE_LABEL as NAMESPACE_LABEL,
    CLAIM_UID_LABEL as UID_LABEL,
};

/// Who manages a Helm release, as its newest revision says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This HelmRelease.
    Ours,
    /// Nobody yet: a release of the helm CLI, of wheelhouse before claims, or none.
    Unclaimed,
    /// Another HelmRelease (its namespace and name when the labels could hold them).
    Other {
        uid: String,
        namespace: Option<String>,
        name: Option<String>,
    },
}

impl Claim {
    /// The claim recorded on `newest` (the newest stored revision), seen by the
    /// HelmRelease with `uid`.
    pub fn of(newest: Option<&Release>, uid: &str) -> Self {
        let Some(labels) = newest.map(|r| &r.labels) else {
            return Self::Unclaimed;
        };
        match labels.get(UID_LABEL) {
            None => Self::Unclaimed,
            Some(owner) if owner == uid => Self::Ours,
            Some(owner) => Self::Other {
                uid: owner.clone(),
                namespace: labels.get(NAMESPACE_LABEL).cloned(),
                name: labels.get(NAME_LABEL).cloned(),
            },
        }
    }

    pub fn describe_owner(&self) -> String {
        match self {
            Self::Other {
                namespace: Some(ns),
                name: Some(name),
                ..
            } => format!("HelmRelease {ns}/{name}"),
            Self::Other { uid, .. } => format!("the HelmRelease with uid {uid}"),
            Self::Ours => "this HelmRelease".into(),
            Self::Unclaimed => "no HelmRelease".into(),
        }
    }
}

/// The labels by which `hr` claims the revisions it writes. A name too long for a label
/// value is left out; the uid is what counts.
pub fn labels(hr: &HelmRelease) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    if let Some(uid) = &hr.metadata.uid {
        labels.insert(UID_LABEL.to_string(), uid.clone());
    }
    for (key, value) in [
        (NAMESPACE_LABEL, hr.metadata.namespace.as_deref()),
        (NAME_LABEL, hr.metadata.name.as_deref()),
    ] {
        if let Some(value) = value.filter(|v| v.len() <= 63) {
            labels.insert(key.to_string(), value.to_string());
        }
    }
    labels
}

/// Whether the HelmRelease another claim names still exists. A claim whose HelmRelease is
/// gone (deleted while suspended, so its release was kept) may be taken over.
pub async fn holder_exists(client: &Client, claim: &Claim) -> kube::Result<bool> {
    let Claim::Other {
        uid,
        namespace: Some(namespace),
        name: Some(name),
    } = claim
    else {
        // Without a name to look up, assume it exists: refusing is the safe side.
        return Ok(matches!(claim, Claim::Other { .. }));
    };
    let api: Api<HelmRelease> = Api::namespaced(client.clone(), namespace);
    match api.get_metadata_opt(name).await? {
        Some(meta) => Ok(meta.metadata.uid.as_deref() == Some(uid.as_str())),
        None => Ok(false),
    }
}

/// Stamps `hr`'s claim on the newest revision's Secret, guarded by the Secret's
/// resourceVersion so two HelmReleases racing for an unclaimed release cannot both win.
pub async fn stamp(
    client: &Client,
    storage_namespace: &str,
    newest: &Release,
    hr: &HelmRelease,
) -> kube::Result<()> {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> =
        Api::namespaced(client.clone(), storage_namespace);
    let name = storage::secret_name(&newest.name, newest.version);
    let current = secrets.get_metadata(&name).await?;
    let patch = serde_json::json!({"metadata": {
        "labels": labels(hr),
        "resourceVersion": current.metadata.resource_version,
    }});
    secrets
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(labels: &[(&str, &str)]) -> Release {
        Release {
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Release::default()
        }
    }

    #[test]
    fn claims_are_read_from_the_newest_revision() {
        assert_eq!(Claim::of(None, "u1"), Claim::Unclaimed);
        assert_eq!(Claim::of(Some(&release(&[])), "u1"), Claim::Unclaimed);
        assert_eq!(
            Claim::of(Some(&release(&[(UID_LABEL, "u1")])), "u1"),
            Claim::Ours
        );
        let other = Claim::of(
            Some(&release(&[
                (UID_LABEL, "u2"),
                (NAMESPACE_LABEL, "apps"),
                (NAME_LABEL, "web-a"),
            ])),
            "u1",
        );
        assert_eq!(other.describe_owner(), "HelmRelease apps/web-a");
    }

    #[test]
    fn labels_leave_out_names_too_long_for_a_label() {
        let hr: HelmRelease = serde_json::from_value(serde_json::json!({
            "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease",
            "metadata": {"name": "x".repeat(70), "namespace": "apps", "uid": "u1"},
            "spec": {"chart": {"path": "./c"}}
        }))
        .unwrap();
        let l = labels(&hr);
        assert_eq!(l[UID_LABEL], "u1");
        assert_eq!(l[NAMESPACE_LABEL], "apps");
        assert!(!l.contains_key(NAME_LABEL));
    }
}

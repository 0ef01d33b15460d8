//! The Helm release Flux manages, which the migrated object continues: its name (shortened
//! as helm-controller shortens it), namespace and storage namespace.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::mapping::{Mapping, is_set};
use crate::api::flux::FluxHelmRelease;

/// Helm's longest release name; Flux shortens longer names ([`shorten_name`]).
const MAX_RELEASE_NAME: usize = 53;

/// A Helm release as Flux recorded it: the one the migrated object must resolve to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelmIdentity {
    pub release_name: String,
    pub target_namespace: String,
    pub storage_namespace: String,
    /// The newest revision Flux recorded, if it installed one.
    pub revision: Option<i64>,
}

/// Helm release name shortening as helm-controller's `release.ShortenName` does it: a
/// name over 53 characters becomes its first 40, `-`, and 12 hex digits of its SHA-256.
pub fn shorten_name(name: &str) -> String {
    if name.len() <= MAX_RELEASE_NAME {
        return name.to_owned();
    }
    let sum = hex::encode(Sha256::digest(name.as_bytes()));
    let keep = MAX_RELEASE_NAME - 13;
    // Kubernetes names are ASCII; a cut inside a character (never expected) keeps less.
    let head = name.get(..keep).unwrap_or_else(|| {
        let end = (0..=keep)
            .rev()
            .find(|i| name.is_char_boundary(*i))
            .unwrap_or(0);
        &name[..end]
    });
    format!("{head}-{}", &sum[..12])
}

/// The Helm release Flux manages: what it recorded in status (the name after shortening,
/// the namespace it deployed to, where it stored the records), else what its spec says.
pub(super) fn helm_identity(
    typed: &FluxHelmRelease,
    spec: &Map<String, Value>,
    namespace: &str,
    m: &mut Mapping,
) -> HelmIdentity {
    let name = typed.metadata.name.clone().unwrap_or_default();
    let status = typed.status.as_ref();
    let latest = status.and_then(|s| s.history.first());
    let spec_text = |key: &str| {
        spec.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let by_spec_target = spec_text("targetNamespace").unwrap_or_else(|| namespace.to_owned());
    let by_spec_name = shorten_name(
        &match (spec_text("releaseName"), spec_text("targetNamespace")) {
            (Some(r), _) => r,
            (None, Some(t)) => format!("{t}-{name}"),
            (None, None) => name.clone(),
        },
    );
    // FluxHelmRelease::release_name() prefers the recorded name; the rule it falls back
    // to is Flux's, with the shortening helm-controller applies on top.
    let release_name = shorten_name(&typed.release_name());
    let target_namespace = latest
        .map(|s| s.namespace.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| typed.target_namespace());
    let storage_namespace = typed.storage_namespace();
    if let Some(latest) = latest
        && (latest.name != by_spec_name || target_namespace != by_spec_target)
    {
        m.note(format!(
            "Flux recorded Helm release {} in namespace {}, but its spec now names {by_spec_name} in {by_spec_target} (a change helm-controller had not made yet): kept the recorded release; change releaseName/targetNamespace afterwards to move it",
            latest.name, target_namespace
        ));
    }
    HelmIdentity {
        release_name,
        target_namespace,
        storage_namespace,
        revision: latest.map(|s| i64::from(s.version)).filter(|v| *v > 0),
    }
}

/// `releaseName`, `targetNamespace` and `storageNamespace`: set whenever Flux's release
/// differs from what wheelhouse would default to, or Flux's spec set them.
pub(super) fn names(
    spec: &mut Map<String, Value>,
    name: &str,
    namespace: &str,
    helm: &HelmIdentity,
    out: &mut Map<String, Value>,
) {
    let given = |v: Option<Value>| v.is_some_and(|v| is_set(&v));
    let release_given = given(spec.remove("releaseName"));
    let target_given = given(spec.remove("targetNamespace"));
    let storage_given = given(spec.remove("storageNamespace"));
    let target = target_given || helm.target_namespace != namespace;
    if target {
        out.insert(
            "targetNamespace".into(),
            Value::String(helm.target_namespace.clone()),
        );
    }
    let default_name = if target {
        format!("{}-{name}", helm.target_namespace)
    } else {
        name.to_owned()
    };
    if release_given || helm.release_name != default_name {
        out.insert(
            "releaseName".into(),
            Value::String(helm.release_name.clone()),
        );
    }
    if storage_given || helm.storage_namespace != namespace {
        out.insert(
            "storageNamespace".into(),
            Value::String(helm.storage_namespace.clone()),
        );
    }
}

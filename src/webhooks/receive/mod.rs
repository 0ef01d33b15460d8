//! Webhook receivers: a push to a chart source (a registry's new tag, a forge's new
//! commit) wakes the releases whose chart it names at once, instead of at their next
//! poll, as Flux's notification-controller Receivers wake its sources.
//!
//! Receivers are declared in the ConfigMap [`CONFIGMAP`] beside the engine's Lease
//! (`config.yaml`: `receivers: [{name, type, secretRef: {name}, sources}]`), each with
//! a Secret whose `token` key authenticates its calls. A receiver listens at Flux's path,
//! `/hook/<sha256 of token + name + namespace>` (unguessable without the token); the
//! engine reads the setting again every few seconds. `docs/user-guide/receivers.md` has
//! the sender's side of each type.

mod server;
pub mod verify;

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::{Api, Client};
use serde::Deserialize;
use sha2::{Digest, Sha256};

pub use server::serve;
pub use verify::Kind;

/// The setting's ConfigMap, beside the engine's Lease.
pub const CONFIGMAP: &str = "wheelhouse-receivers";
/// Its key.
pub const KEY: &str = "config.yaml";
/// The key of a receiver's Secret holding its token (as Flux's).
pub const TOKEN_KEY: &str = "token";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    receivers: Vec<Spec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Spec {
    name: String,
    #[serde(rename = "type")]
    kind: Kind,
    secret_ref: crate::api::LocalObjectReference,
    /// Generic receivers: the chart sources (URLs) a call wakes.
    #[serde(default)]
    sources: Vec<String>,
    /// The HelmReleases a call may wake (Flux's Receiver `resources`): a token holder
    /// wakes these and nothing else, whatever repository its call names.
    #[serde(default)]
    resources: Vec<crate::helm::source::pushed::Resource>,
}

/// One receiver, ready to hear calls.
#[derive(Clone)]
pub struct Receiver {
    pub name: String,
    pub kind: Kind,
    token: Vec<u8>,
    pub sources: Vec<String>,
    pub resources: Vec<crate::helm::source::pushed::Resource>,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// Receivers by the path they listen at.
pub type Receivers = HashMap<String, Arc<Receiver>>;

/// Flux's webhook path: `/hook/` and the hex SHA-256 of token, name and namespace.
pub fn path_of(token: &[u8], name: &str, namespace: &str) -> String {
    let mut h = Sha256::new();
    h.update(token);
    h.update(name.as_bytes());
    h.update(namespace.as_bytes());
    format!("/hook/{}", hex::encode(h.finalize()))
}

/// Why the receivers' setting could not be read: the API server's error, or a setting
/// that does not read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read ConfigMap {namespace}/{configmap}: {source}", configmap = CONFIGMAP)]
    Read {
        namespace: String,
        source: kube::Error,
    },
    #[error("{namespace}/{configmap} {key}: {source}", configmap = CONFIGMAP, key = KEY)]
    Setting {
        namespace: String,
        source: crate::text::yaml::Error,
    },
}

/// Reads the setting in `namespace`: each receiver with its token. A receiver whose
/// Secret or token is missing is left out, and said so (the rest work). No ConfigMap: no
/// receivers.
pub async fn load(client: &Client, namespace: &str) -> Result<Receivers, LoadError> {
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Some(cm) = configmaps
        .get_opt(CONFIGMAP)
        .await
        .map_err(|source| LoadError::Read {
            namespace: namespace.to_owned(),
            source,
        })?
    else {
        return Ok(Receivers::new());
    };
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(KEY))
        .cloned()
        .unwrap_or_default();
    let config: Config =
        crate::text::yaml::from_str(&text).map_err(|source| LoadError::Setting {
            namespace: namespace.to_owned(),
            source,
        })?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut out = Receivers::new();
    for spec in config.receivers {
        let secret = &spec.secret_ref.name;
        let token = match secrets.get_opt(secret).await {
            Ok(Some(s)) => s
                .data
                .and_then(|d| d.get(TOKEN_KEY).map(|t| t.0.clone()))
                .filter(|t| !t.is_empty()),
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(receiver = %spec.name, error = %e, "cannot read the receiver's Secret");
                None
            }
        };
        let Some(token) = token else {
            tracing::warn!(receiver = %spec.name, secret = %secret, "the receiver's Secret has no {TOKEN_KEY:?}: it hears nothing until it does");
            continue;
        };
        if matches!(spec.kind, Kind::Generic | Kind::GenericHmac) && spec.sources.is_empty() {
            tracing::warn!(receiver = %spec.name, "a generic receiver without sources wakes nothing");
        }
        if spec.resources.is_empty() {
            tracing::warn!(receiver = %spec.name, "a receiver without resources wakes nothing: list the HelmReleases it may wake (resources: [{{kind: HelmRelease, name: '*', namespace: NS}}])");
        }
        if let Some(r) = spec.resources.iter().find(|r| r.kind != "HelmRelease") {
            tracing::warn!(receiver = %spec.name, kind = %r.kind, "a receiver's resources name HelmReleases only; this entry wakes nothing");
        }
        let path = path_of(&token, &spec.name, namespace);
        out.insert(
            path,
            Arc::new(Receiver {
                name: spec.name,
                kind: spec.kind,
                token,
                sources: spec.sources,
                resources: spec.resources,
            }),
        );
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_fluxs() {
        // echo -n 'tokenwebapps' | sha256sum
        assert_eq!(
            path_of(b"token", "web", "apps"),
            format!("/hook/{}", hex::encode(Sha256::digest(b"tokenwebapps")))
        );
    }

    #[test]
    fn the_setting_reads_each_type() {
        let config: Config = crate::text::yaml::from_str(
            "receivers:\n- {name: r, type: registry, secretRef: {name: s}, resources: [{kind: HelmRelease, name: '*', namespace: apps}]}\n- {name: g, type: generic-hmac, secretRef: {name: s}, sources: [oci://x/y]}\n",
        )
        .unwrap();
        assert_eq!(config.receivers[0].kind, Kind::Registry);
        assert_eq!(config.receivers[1].kind, Kind::GenericHmac);
        assert_eq!(
            config.receivers[0].resources[0].namespace.as_deref(),
            Some("apps")
        );
        assert!(config.receivers[1].resources.is_empty());
        assert!(
            crate::text::yaml::from_str::<Config>(
                "receivers:\n- {name: r, type: ftp, secretRef: {name: s}}\n"
            )
            .is_err()
        );
    }
}

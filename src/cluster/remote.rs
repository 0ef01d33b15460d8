//! Releases deployed to another cluster (`spec.kubeConfig`, Flux's field): the kubeconfig
//! a Secret of the release's namespace holds, checked before anything uses it, and the
//! client built on it.
//!
//! The kubeconfig is a tenant's input that the engine acts with, so only what names
//! nothing of the engine's own machine is taken: inline certificates and keys, a token,
//! a username and password. A file path (which would hand the tenant the engine's own
//! token or certificate), an auth provider, impersonation (the release's identity is
//! `serviceAccountName`'s, as in Flux) and a proxy are refused, each with its reason;
//! `exec` and `insecure-skip-tls-verify` only when the engine's flags allow them (Flux's
//! `--insecure-kubeconfig-exec` and `--insecure-kubeconfig-tls`). Where Flux drops what it
//! does not allow and fails later on the cluster's answer, the release says why at once.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::config::{
    AuthInfo, Cluster, Context, Kubeconfig, NamedAuthInfo, NamedCluster, NamedContext,
};

use crate::api::KubeConfigReference;

/// The Secret keys looked at when the reference names none, in order (Flux's).
pub const DEFAULT_KEYS: [&str; 2] = ["value", "value.yaml"];

/// What the engine allows in a kubeconfig beyond the default (its flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allowances {
    /// `--insecure-kubeconfig-exec`: run the `exec` credential plugin a kubeconfig names.
    pub exec: bool,
    /// `--insecure-kubeconfig-tls`: honour `insecure-skip-tls-verify`.
    pub insecure_tls: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read the kubeConfig Secret {name}: {source}")]
    Read {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the kubeConfig Secret {name} has no key {key:?}")]
    NoKey { name: String, key: String },
    #[error("the kubeConfig Secret {name} has neither a \"value\" nor a \"value.yaml\" key")]
    NoDefaultKey { name: String },
    #[error("the kubeconfig in Secret {name} does not read: {reason}")]
    Unreadable { name: String, reason: String },
    #[error("the kubeconfig in Secret {name} is refused: {reason}")]
    Refused { name: String, reason: String },
    #[error("cannot build a client for the cluster of the kubeConfig Secret {name}: {reason}")]
    Client { name: String, reason: String },
    #[error("cannot keep the kubeconfig of Secret {name} for the renderer: {source}")]
    File {
        name: String,
        #[source]
        source: std::io::Error,
    },
}

/// A kubeconfig as read from its Secret and checked: one cluster, one user, one context.
#[derive(Clone)]
pub struct Checked {
    /// `namespace/name` of the Secret, for messages.
    pub secret: String,
    /// A digest of what is kept (the same kubeconfig gives the same clients).
    pub digest: String,
    kubeconfig: Kubeconfig,
}

/// Without the kubeconfig: it holds credentials.
impl std::fmt::Debug for Checked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checked")
            .field("secret", &self.secret)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

/// Reads the kubeconfig `reference` names in `namespace` with `client` (the release's
/// identity in the engine's cluster: under tenancy, the Secret must be one its
/// ServiceAccount may read), and checks it.
pub async fn read(
    client: &kube::Client,
    namespace: &str,
    reference: &KubeConfigReference,
    allowed: Allowances,
) -> Result<Checked, Error> {
    let (name, bytes) = secret_bytes(client, namespace, reference).await?;
    check(&name, &bytes, allowed)
}

/// The kubeconfig `reference` names, as stored, with the Secret's `namespace/name`.
pub async fn secret_bytes(
    client: &kube::Client,
    namespace: &str,
    reference: &KubeConfigReference,
) -> Result<(String, Vec<u8>), Error> {
    let name = format!("{namespace}/{}", reference.secret_ref.name);
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get(&reference.secret_ref.name)
        .await
        .map_err(|source| Error::Read {
            name: name.clone(),
            source,
        })?;
    let mut data = secret.data.unwrap_or_default();
    let bytes = match &reference.secret_ref.key {
        Some(key) => data.remove(key).ok_or_else(|| Error::NoKey {
            name: name.clone(),
            key: key.clone(),
        })?,
        None => DEFAULT_KEYS
            .iter()
            .find_map(|k| data.remove(*k))
            .ok_or_else(|| Error::NoDefaultKey { name: name.clone() })?,
    };
    Ok((name, bytes.0))
}

/// The server a kubeconfig's current context names, and nothing else of it: what the
/// dashboard matches against its own contexts to read a remote release there as the
/// operator (it never acts with the Secret's credentials, so nothing else is checked).
pub fn server_of(name: &str, bytes: &[u8]) -> Result<String, Error> {
    let (cluster, _) = current_of(name, bytes)?;
    cluster
        .server
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::Unreadable {
            name: name.to_owned(),
            reason: "its cluster has no server".into(),
        })
}

/// The cluster and user of a kubeconfig's current context.
fn current_of(name: &str, bytes: &[u8]) -> Result<(Cluster, AuthInfo), Error> {
    let unreadable = |reason: String| Error::Unreadable {
        name: name.to_owned(),
        reason,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| unreadable(e.to_string()))?;
    let config = Kubeconfig::from_yaml(text).map_err(|e| unreadable(e.to_string()))?;
    let current = config
        .current_context
        .clone()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| unreadable("it has no current-context".into()))?;
    let context = config
        .contexts
        .iter()
        .find(|c| c.name == current)
        .and_then(|c| c.context.clone())
        .ok_or_else(|| unreadable(format!("its current-context {current:?} is not defined")))?;
    let cluster = config
        .clusters
        .iter()
        .find(|c| c.name == context.cluster)
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| unreadable(format!("its cluster {:?} is not defined", context.cluster)))?;
    let user_name = context.user.clone().unwrap_or_default();
    let user = config
        .auth_infos
        .iter()
        .find(|u| u.name == user_name)
        .and_then(|u| u.auth_info.clone())
        .unwrap_or_default();
    Ok((cluster, user))
}

/// Checks the kubeconfig `bytes` of the Secret `name`, keeping only its current context.
pub fn check(name: &str, bytes: &[u8], allowed: Allowances) -> Result<Checked, Error> {
    let unreadable = |reason: String| Error::Unreadable {
        name: name.to_owned(),
        reason,
    };
    let refused = |reason: String| Error::Refused {
        name: name.to_owned(),
        reason,
    };
    let (cluster, user) = current_of(name, bytes)?;

    let server = cluster
        .server
        .clone()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| unreadable("its cluster has no server".into()))?;
    if !server.starts_with("https://") && !server.starts_with("http://") {
        return Err(unreadable(format!(
            "its server {server:?} is not an http(s) URL"
        )));
    }
    // Plain HTTP sends the credentials in clear and trusts whatever answers: as insecure
    // as turning verification off, so it takes the same flag.
    if server.starts_with("http://") && !allowed.insecure_tls {
        return Err(refused(format!(
            "its server {} is plain http://, which sends the credentials unencrypted (the engine allows it only with --insecure-kubeconfig-tls)",
            crate::text::url::redact(&server)
        )));
    }
    let file = |field: &str| {
        refused(format!(
            "{field} names a file of the engine's machine; only inline data is accepted (its -data form)"
        ))
    };
    if cluster.certificate_authority.is_some() {
        return Err(file("certificate-authority"));
    }
    if user.client_certificate.is_some() {
        return Err(file("client-certificate"));
    }
    if user.client_key.is_some() {
        return Err(file("client-key"));
    }
    if user.token_file.is_some() {
        return Err(file("tokenFile"));
    }
    if cluster.insecure_skip_tls_verify == Some(true) && !allowed.insecure_tls {
        return Err(refused(
            "insecure-skip-tls-verify turns off TLS verification (the engine allows it only with --insecure-kubeconfig-tls)".into(),
        ));
    }
    if cluster.proxy_url.is_some() {
        return Err(refused("proxy-url is not supported".into()));
    }
    if user.auth_provider.is_some() {
        return Err(refused(
            "auth-provider plugins are not supported (Kubernetes removed them; use a token or client certificate)".into(),
        ));
    }
    if user.exec.is_some() && !allowed.exec {
        return Err(refused(
            "exec runs a program on the engine's machine (the engine allows it only with --insecure-kubeconfig-exec)".into(),
        ));
    }
    if user.impersonate.is_some()
        || user.impersonate_uid.is_some()
        || user.impersonate_groups.is_some()
        || user.impersonate_user_extra.is_some()
    {
        return Err(refused(
            "impersonation in a kubeConfig Secret is not taken (the release acts as spec.serviceAccountName, as in Flux)".into(),
        ));
    }
    // Nothing else of it is kept: fields this check does not know are no one's to honour.
    let (mut cluster, mut user) = (cluster, user);
    cluster.other.clear();
    cluster.extensions = None;
    user.other.clear();
    user.extensions = None;
    const ONE: &str = "remote";
    let kept = Kubeconfig {
        current_context: Some(ONE.into()),
        clusters: vec![NamedCluster {
            name: ONE.into(),
            other: Default::default(),
            cluster: Some(cluster),
        }],
        auth_infos: vec![NamedAuthInfo {
            name: ONE.into(),
            other: Default::default(),
            auth_info: Some(user),
        }],
        contexts: vec![NamedContext {
            name: ONE.into(),
            other: Default::default(),
            context: Some(Context {
                cluster: ONE.into(),
                user: Some(ONE.into()),
                ..Default::default()
            }),
        }],
        ..Default::default()
    };
    let serialized = serde_json::to_vec(&kept).map_err(|e| unreadable(e.to_string()))?;
    use sha2::Digest;
    let digest = hex::encode(&sha2::Sha256::digest(&serialized)[..12]);
    Ok(Checked {
        secret: name.to_owned(),
        digest,
        kubeconfig: kept,
    })
}

impl Checked {
    /// The server the kubeconfig names.
    pub fn server(&self) -> &str {
        self.kubeconfig
            .clusters
            .first()
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.server.as_deref())
            .unwrap_or_default()
    }

    /// A client of the remote cluster as the kubeconfig's user, connecting through
    /// `proxy` (the cluster's outbound policy) when given. An error answer that is not a
    /// Kubernetes Status is never quoted ([`answers_as_data`]).
    pub async fn client(&self, proxy: Option<&str>) -> Result<kube::Client, Error> {
        let failed = |reason: String| Error::Client {
            name: self.secret.clone(),
            reason,
        };
        let mut config = kube::Config::from_custom_kubeconfig(
            self.kubeconfig.clone(),
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| failed(e.to_string()))?;
        if let Some(proxy) = proxy {
            config.proxy_url =
                Some(proxy.parse().map_err(|_| {
                    failed("the outbound policy's proxy URL does not parse".into())
                })?);
        }
        let client = kube::Client::try_from(config).map_err(|e| failed(e.to_string()))?;
        Ok(answers_as_data(&client))
    }

    /// Writes the checked kubeconfig (nothing else of the Secret) to a new file of its own
    /// in `dir`, readable by the engine's user only: the renderer's `--kubeconfig`. Its
    /// owner removes it when done ([`remove_file`]).
    pub fn write_to(&self, dir: &Path, proxy: Option<&str>) -> Result<PathBuf, Error> {
        let failed = |source| Error::File {
            name: self.secret.clone(),
            source,
        };
        // The renderer (lookup, discovery) reaches the cluster through the same policy.
        let mut kubeconfig = self.kubeconfig.clone();
        if let Some(cluster) = kubeconfig
            .clusters
            .first_mut()
            .and_then(|c| c.cluster.as_mut())
        {
            cluster.proxy_url = proxy.map(str::to_owned);
        }
        let text = serde_json::to_vec(&kubeconfig).expect("a checked kubeconfig serialises");
        let mut file = tempfile::Builder::new()
            .prefix(&format!("{}-", self.digest))
            .suffix(".kubeconfig")
            .tempfile_in(dir)
            .map_err(failed)?;
        std::io::Write::write_all(&mut file, &text).map_err(failed)?;
        let (_, path) = file.keep().map_err(|e| failed(e.error))?;
        Ok(path)
    }
}

/// The largest error answer read to tell whether it is a Kubernetes Status.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// `client` whose error answers are Kubernetes Status objects or a fixed description:
/// kube quotes an error body it cannot parse as the error's message, and a remote
/// cluster's address is a tenant's choice, so what answers there is data, never status
/// text (docs/operations/multi-tenancy.md, "Outbound requests").
pub fn answers_as_data(client: &kube::Client) -> kube::Client {
    use http_body_util::BodyExt;
    let inner = client.clone();
    let service = tower::service_fn(move |request: hyper::Request<kube::client::Body>| {
        let inner = inner.clone();
        async move {
            let response = inner
                .send(request)
                .await
                .map_err(|e| -> tower::BoxError { Box::new(e) })?;
            let status = response.status();
            if !(status.is_client_error() || status.is_server_error()) {
                return Ok::<_, tower::BoxError>(response);
            }
            let (mut parts, body) = response.into_parts();
            parts.headers.remove(hyper::header::CONTENT_LENGTH);
            let bytes = http_body_util::Limited::new(body, MAX_ERROR_BODY)
                .collect()
                .await
                .map(|b| b.to_bytes().to_vec())
                .unwrap_or_default();
            let is_status = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .is_some_and(|v| v.get("kind").and_then(|k| k.as_str()) == Some("Status"));
            let body = if is_status {
                bytes
            } else {
                serde_json::to_vec(&serde_json::json!({
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "code": status.as_u16(),
                    "reason": status.canonical_reason().unwrap_or_default(),
                    "message": format!(
                        "the server answered HTTP {} with something other than a Kubernetes Status (its content is not shown)",
                        status.as_u16()
                    ),
                }))
                .unwrap_or_default()
            };
            Ok::<_, tower::BoxError>(hyper::Response::from_parts(
                parts,
                kube::client::Body::from(body),
            ))
        }
    });
    kube::Client::new(service, client.default_namespace().to_owned())
}

/// Removes a kubeconfig file [`Checked::write_to`] made (best effort: the directory goes
/// with the engine anyway).
pub fn remove_file(path: &Path) {
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(cluster: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {{cluster: k, user: u, namespace: team}}\nclusters:\n- name: k\n  cluster:\n    server: https://10.0.0.1:6443\n{cluster}\nusers:\n- name: u\n  user:\n{user}\n"
        )
    }

    fn checked(cluster: &str, user: &str, allowed: Allowances) -> Result<Checked, Error> {
        check("team/remote", kubeconfig(cluster, user).as_bytes(), allowed)
    }

    #[test]
    fn inline_credentials_are_kept_alone() {
        let c = checked(
            "    certificate-authority-data: Q0E=",
            "    token: abc",
            Allowances::default(),
        )
        .unwrap();
        let server = c.kubeconfig.clusters[0]
            .cluster
            .as_ref()
            .unwrap()
            .server
            .clone();
        assert_eq!(server.as_deref(), Some("https://10.0.0.1:6443"));
        let text = serde_json::to_string(&c.kubeconfig).unwrap();
        assert!(
            !text.contains("team"),
            "the context's namespace is not kept: {text}"
        );
        // The same kubeconfig, the same digest.
        let again = checked(
            "    certificate-authority-data: Q0E=",
            "    token: abc",
            Allowances::default(),
        )
        .unwrap();
        assert_eq!(c.digest, again.digest);
    }

    #[test]
    fn the_renderers_copy_is_the_checked_kubeconfig_readable_by_the_engine_alone() {
        use std::os::unix::fs::PermissionsExt;
        let c = checked(
            "    certificate-authority-data: Q0E=",
            "    token: abc",
            Allowances::default(),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (
            c.write_to(dir.path(), None).unwrap(),
            c.write_to(dir.path(), None).unwrap(),
        );
        assert_ne!(first, second, "each owner has a file of its own");
        let mode = std::fs::metadata(&first).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let text = std::fs::read_to_string(&first).unwrap();
        let read = Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(read.current_context.as_deref(), Some("remote"));
        assert!(!text.contains("team"), "{text}");
        remove_file(&first);
        assert!(!first.exists() && second.exists());
    }

    #[test]
    fn files_of_the_engines_machine_are_refused() {
        for (cluster, user, field) in [
            (
                "    certificate-authority: /etc/ca.crt",
                "    token: t",
                "certificate-authority",
            ),
            (
                "",
                "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
                "tokenFile",
            ),
            (
                "",
                "    client-certificate: /c.crt\n    client-key-data: S0VZ",
                "client-certificate",
            ),
            (
                "",
                "    client-certificate-data: Q1JU\n    client-key: /c.key",
                "client-key",
            ),
        ] {
            let e = checked(cluster, user, Allowances::default()).unwrap_err();
            assert!(matches!(e, Error::Refused { .. }), "{field}: {e}");
            assert!(e.to_string().contains(field), "{e}");
        }
    }

    #[test]
    fn exec_and_insecure_tls_need_the_engines_allowance() {
        let exec = "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/true";
        let e = checked("", exec, Allowances::default()).unwrap_err();
        assert!(e.to_string().contains("--insecure-kubeconfig-exec"), "{e}");
        let allowed = Allowances {
            exec: true,
            insecure_tls: false,
        };
        assert!(checked("", exec, allowed).is_ok());

        let insecure = "    insecure-skip-tls-verify: true";
        let e = checked(insecure, "    token: t", Allowances::default()).unwrap_err();
        assert!(e.to_string().contains("--insecure-kubeconfig-tls"), "{e}");
        let allowed = Allowances {
            exec: false,
            insecure_tls: true,
        };
        assert!(checked(insecure, "    token: t", allowed).is_ok());
    }

    #[test]
    fn impersonation_auth_providers_and_proxies_are_refused() {
        for (cluster, user, says) in [
            ("", "    as: admin", "serviceAccountName"),
            ("", "    as-groups: [system:masters]", "serviceAccountName"),
            ("", "    auth-provider: {name: oidc}", "auth-provider"),
            (
                "    proxy-url: http://proxy:3128",
                "    token: t",
                "proxy-url",
            ),
        ] {
            let e = checked(cluster, user, Allowances::default()).unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    #[test]
    fn what_does_not_read_says_why() {
        for (text, says) in [
            ("not: [a kubeconfig", "does not read"),
            ("apiVersion: v1\nkind: Config\n", "no current-context"),
            ("current-context: x\n", "is not defined"),
        ] {
            let e = check("team/remote", text.as_bytes(), Allowances::default()).unwrap_err();
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }
}

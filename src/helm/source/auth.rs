//! Credentials for a chart repository, read from the Secret named by `chart.secretRef`.

use std::fmt;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

use super::Error;

/// Basic-auth credentials and an extra CA for one repository.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RepoAuth {
    pub username: Option<String>,
    pub password: Option<String>,
    /// PEM certificates trusted in addition to the system roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Registry credentials from `.dockerconfigjson`: (registry, username, password).
    pub registries: Vec<(String, String, String)>,
    /// Git over HTTPS: sent as `Authorization: Bearer` (Flux's `bearerToken`).
    pub bearer_token: Option<String>,
    /// Git over SSH: the private key (`identity`, OpenSSH or PEM) and the server's
    /// accepted keys (`known_hosts`), as Flux's GitRepository Secrets hold them.
    pub ssh_identity: Option<String>,
    pub known_hosts: Option<String>,
}

impl fmt::Debug for RepoAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RepoAuth")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field(
                "ca_pem",
                &self
                    .ca_pem
                    .as_ref()
                    .map(|pem| format!("<{} bytes>", pem.len())),
            )
            .field(
                "registries",
                &self
                    .registries
                    .iter()
                    .map(|(r, u, _)| (r, u))
                    .collect::<Vec<_>>(),
            )
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "ssh_identity",
                &self.ssh_identity.as_ref().map(|_| "<redacted>"),
            )
            .field("known_hosts", &self.known_hosts)
            .finish()
    }
}

impl RepoAuth {
    /// Reads `username`/`password` and `ca.crt` (or Flux's older `caFile`) from a Secret.
    /// Username and password go together, as in Flux.
    pub async fn from_secret(
        client: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<Self, Error> {
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let secret = api
            .get_opt(name)
            .await
            .map_err(|source| Error::AuthSecretRead {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            })?
            .ok_or_else(|| Error::AuthSecretNotFound {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })?;
        Self::from_secret_data(&secret, namespace, name)
    }

    fn from_secret_data(secret: &Secret, namespace: &str, name: &str) -> Result<Self, Error> {
        let invalid = |reason: &str| Error::AuthSecretInvalid {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            reason: reason.to_owned(),
        };
        let data = secret.data.clone().unwrap_or_default();
        let text = |key: &str| -> Result<Option<String>, Error> {
            data.get(key)
                .map(|v| {
                    String::from_utf8(v.0.clone())
                        .map_err(|_| invalid(&format!("key {key} is not UTF-8 text")))
                })
                .transpose()
        };
        let username = text("username")?;
        let password = text("password")?;
        match (&username, &password) {
            (Some(_), None) => return Err(invalid("has username but no password")),
            (None, Some(_)) => return Err(invalid("has password but no username")),
            _ => {}
        }
        let ca_pem = data
            .get("ca.crt")
            .or_else(|| data.get("caFile"))
            .map(|v| v.0.clone());
        let registries = match data.get(".dockerconfigjson") {
            Some(json) => docker_config(&json.0).map_err(|why| invalid(&why))?,
            None => Vec::new(),
        };
        let bearer_token = text("bearerToken")?;
        let ssh_identity = text("identity")?;
        let known_hosts = text("known_hosts")?;
        if username.is_none()
            && ca_pem.is_none()
            && registries.is_empty()
            && bearer_token.is_none()
            && ssh_identity.is_none()
        {
            return Err(invalid(
                "has none of the keys username/password, .dockerconfigjson, bearerToken, identity, ca.crt (or caFile)",
            ));
        }
        Ok(Self {
            username,
            password,
            ca_pem,
            registries,
            bearer_token,
            ssh_identity,
            known_hosts,
        })
    }

    /// The credentials for an OCI `registry` (`host[:port]`): its `.dockerconfigjson`
    /// entry, else `username`/`password`.
    pub(crate) fn registry_basic(&self, registry: &str) -> Option<(&str, &str)> {
        self.registries
            .iter()
            .find(|(r, _, _)| r == registry)
            .map(|(_, u, p)| (u.as_str(), p.as_str()))
            .or_else(|| self.basic())
    }

    pub(crate) fn basic(&self) -> Option<(&str, &str)> {
        match (&self.username, &self.password) {
            (Some(u), Some(p)) => Some((u.as_str(), p.as_str())),
            _ => None,
        }
    }
}

/// The registries of a Docker config (`{"auths": {"host": {"username", "password"} or
/// {"auth": base64("user:password")}}}`), keyed by `host[:port]` (a scheme or path in
/// the key, as `docker login` once wrote them, is dropped).
fn docker_config(json: &[u8]) -> Result<Vec<(String, String, String)>, String> {
    use base64::Engine;
    let value: serde_json::Value = serde_json::from_slice(json)
        .map_err(|e| format!("key .dockerconfigjson is not JSON: {e}"))?;
    let auths = value
        .get("auths")
        .and_then(|a| a.as_object())
        .ok_or("key .dockerconfigjson has no auths")?;
    let mut out = Vec::new();
    for (key, entry) in auths {
        let host = key
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default()
            .to_owned();
        let field = |k: &str| entry.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        let (user, password) = match (field("username"), field("password"), field("auth")) {
            (Some(u), Some(p), _) => (u, p),
            (_, _, Some(auth)) => {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(auth.trim())
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| {
                        format!(".dockerconfigjson: auth of {key} is not base64 user:password")
                    })?;
                let (u, p) = decoded.split_once(':').ok_or_else(|| {
                    format!(".dockerconfigjson: auth of {key} is not user:password")
                })?;
                (u.to_owned(), p.to_owned())
            }
            _ => {
                return Err(format!(
                    ".dockerconfigjson: {key} has neither username/password nor auth"
                ));
            }
        };
        out.push((host, user, password));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn secret(pairs: &[(&str, &[u8])]) -> Secret {
        Secret {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn a_docker_config_gives_each_registry_its_credentials() {
        let json = br#"{"auths": {
            "https://ghcr.io/v1/": {"auth": "Ym9iOmh1bnRlcjI="},
            "127.0.0.1:5000": {"username": "alice", "password": "s3cret"}}}"#;
        let mut got = docker_config(json).unwrap();
        got.sort();
        assert_eq!(
            got,
            [
                ("127.0.0.1:5000".into(), "alice".into(), "s3cret".into()),
                ("ghcr.io".into(), "bob".into(), "hunter2".into()),
            ]
        );
        assert!(docker_config(b"{}").is_err());
        assert!(docker_config(br#"{"auths": {"x": {"auth": "no-colon"}}}"#).is_err());
        let auth = RepoAuth::from_secret_data(&secret(&[(".dockerconfigjson", json)]), "ns", "reg")
            .unwrap();
        assert_eq!(auth.registry_basic("ghcr.io"), Some(("bob", "hunter2")));
        assert_eq!(auth.registry_basic("quay.io"), None);
    }

    #[test]
    fn debug_never_shows_the_password() {
        let auth = RepoAuth {
            username: Some("bob".into()),
            password: Some("hunter2".into()),
            ca_pem: Some(b"-----BEGIN CERTIFICATE-----".to_vec()),
            registries: vec![("ghcr.io".into(), "bob".into(), "hunter3".into())],
            bearer_token: Some("hunter4".into()),
            ssh_identity: Some("hunter5".into()),
            known_hosts: None,
        };
        let shown = format!("{auth:?} {auth:#?}");
        for secret in ["hunter3", "hunter4", "hunter5"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("bob") && shown.contains("<redacted>"),
            "{shown}"
        );
    }

    #[test]
    fn reads_flux_style_keys() {
        let s = secret(&[("username", b"u"), ("password", b"p"), ("caFile", b"PEM")]);
        let auth = RepoAuth::from_secret_data(&s, "ns", "creds").unwrap();
        assert_eq!(auth.basic(), Some(("u", "p")));
        assert_eq!(auth.ca_pem.as_deref(), Some(&b"PEM"[..]));
        let s = secret(&[("ca.crt", b"A"), ("caFile", b"B")]);
        let auth = RepoAuth::from_secret_data(&s, "ns", "creds").unwrap();
        assert_eq!(auth.ca_pem.as_deref(), Some(&b"A"[..]));
        assert_eq!(auth.basic(), None);
    }

    #[test]
    fn half_credentials_or_nothing_useful_is_an_error() {
        for pairs in [
            &[("username", &b"u"[..])][..],
            &[("password", &b"p"[..])][..],
            &[("token", &b"t"[..])][..],
        ] {
            let err = RepoAuth::from_secret_data(&secret(pairs), "ns", "creds").unwrap_err();
            let message = err.to_string();
            assert!(message.contains("ns/creds"), "{message}");
            assert!(!message.contains("\"p\""), "{message}");
        }
    }
}

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
        if username.is_none() && ca_pem.is_none() {
            return Err(invalid(
                "has none of the keys username/password, ca.crt (or caFile)",
            ));
        }
        Ok(Self {
            username,
            password,
            ca_pem,
        })
    }

    pub(crate) fn basic(&self) -> Option<(&str, &str)> {
        match (&self.username, &self.password) {
            (Some(u), Some(p)) => Some((u.as_str(), p.as_str())),
            _ => None,
        }
    }
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
    fn debug_never_shows_the_password() {
        let auth = RepoAuth {
            username: Some("bob".into()),
            password: Some("hunter2".into()),
            ca_pem: Some(b"-----BEGIN CERTIFICATE-----".to_vec()),
        };
        let shown = format!("{auth:?} {auth:#?}");
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

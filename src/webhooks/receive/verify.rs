//! What one webhook call says, once it proves it comes from who it claims: each kind of
//! sender authenticates as Flux's notification-controller Receivers check it, and its
//! payload names the pushes (a registry's new tag, a forge's pushed repository). Pure:
//! the server hands it headers and body.

use std::collections::BTreeMap;

use hmac::{KeyInit, Mac};
use serde::Deserialize;
use serde_json::Value;

use crate::helm::source::pushed::Pushed;

/// Who sends the calls, and so how they are authenticated and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// The CNCF distribution registry's notifications: `Authorization: Bearer <token>`
    /// (the endpoint's `headers` in the registry's configuration), an envelope of events.
    Registry,
    /// `X-Hub-Signature-256: sha256=<HMAC of the body>`; `push` events.
    Github,
    /// `X-Gitlab-Token: <token>`; `Push Hook` and `Tag Push Hook` events.
    Gitlab,
    /// `X-Gitea-Signature: <hex HMAC of the body>`; `push` events.
    Gitea,
    /// Flux's `generic`: the secret path alone; wakes the receiver's `sources`.
    Generic,
    /// Flux's `generic-hmac`: `X-Signature: sha256=<HMAC>` (or `sha512=`); its
    /// `sources`.
    GenericHmac,
}

/// What a call said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// Pushes to wake the releases of.
    Pushes(Vec<Pushed>),
    /// A call to answer but act on: why (a `ping`, an event other than a push).
    Ignored(String),
}

/// Why a call is refused. Never quotes the body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("unsigned: no {0} header")]
    Unsigned(&'static str),
    #[error("the {0} header does not match the receiver's token")]
    BadSignature(&'static str),
    #[error("malformed: {0}")]
    Malformed(String),
    #[error("it names no source this receiver wakes ({0})")]
    UnknownSource(String),
}

/// Headers by lower-case name.
pub type Headers = BTreeMap<String, String>;

/// Authenticates and reads one call to a receiver of `kind` whose token is `token`;
/// `sources` are a generic receiver's.
pub fn hear(
    kind: Kind,
    token: &[u8],
    sources: &[String],
    headers: &Headers,
    body: &[u8],
) -> Result<Heard, Refused> {
    let header = |name: &str| headers.get(name).map(String::as_str);
    match kind {
        Kind::Registry => {
            let given = header("authorization").ok_or(Refused::Unsigned("Authorization"))?;
            let bearer = given
                .strip_prefix("Bearer ")
                .ok_or(Refused::BadSignature("Authorization"))?;
            if !constant_time_eq(bearer.as_bytes(), token) {
                return Err(Refused::BadSignature("Authorization"));
            }
            registry_pushes(body)
        }
        Kind::Github => {
            let given =
                header("x-hub-signature-256").ok_or(Refused::Unsigned("X-Hub-Signature-256"))?;
            let hex = given
                .strip_prefix("sha256=")
                .ok_or(Refused::BadSignature("X-Hub-Signature-256"))?;
            verify_hmac_sha256(token, body, hex, "X-Hub-Signature-256")?;
            match header("x-github-event") {
                Some("push") => forge_pushes(
                    body,
                    "/repository",
                    &["clone_url", "ssh_url", "html_url", "git_url"],
                ),
                Some(other) => Ok(Heard::Ignored(format!("a GitHub {other:?} event"))),
                None => Err(Refused::Malformed("no X-GitHub-Event header".into())),
            }
        }
        Kind::Gitlab => {
            let given = header("x-gitlab-token").ok_or(Refused::Unsigned("X-Gitlab-Token"))?;
            if !constant_time_eq(given.as_bytes(), token) {
                return Err(Refused::BadSignature("X-Gitlab-Token"));
            }
            match header("x-gitlab-event") {
                Some("Push Hook" | "Tag Push Hook") => forge_pushes(
                    body,
                    "/project",
                    &["git_http_url", "git_ssh_url", "web_url"],
                ),
                Some(other) => Ok(Heard::Ignored(format!("a GitLab {other:?} event"))),
                None => Err(Refused::Malformed("no X-Gitlab-Event header".into())),
            }
        }
        Kind::Gitea => {
            let given =
                header("x-gitea-signature").ok_or(Refused::Unsigned("X-Gitea-Signature"))?;
            verify_hmac_sha256(token, body, given, "X-Gitea-Signature")?;
            match header("x-gitea-event") {
                Some("push") => {
                    forge_pushes(body, "/repository", &["clone_url", "ssh_url", "html_url"])
                }
                Some(other) => Ok(Heard::Ignored(format!("a Gitea {other:?} event"))),
                None => Err(Refused::Malformed("no X-Gitea-Event header".into())),
            }
        }
        Kind::Generic => generic_pushes(body, sources),
        Kind::GenericHmac => {
            let given = header("x-signature").ok_or(Refused::Unsigned("X-Signature"))?;
            match given.split_once('=') {
                Some(("sha256", hex)) => verify_hmac_sha256(token, body, hex, "X-Signature")?,
                Some(("sha512", hex)) => {
                    let mut mac = hmac::Hmac::<sha2::Sha512>::new_from_slice(token)
                        .expect("HMAC takes any key");
                    mac.update(body);
                    let given =
                        hex::decode(hex).map_err(|_| Refused::BadSignature("X-Signature"))?;
                    mac.verify_slice(&given)
                        .map_err(|_| Refused::BadSignature("X-Signature"))?;
                }
                _ => return Err(Refused::BadSignature("X-Signature")),
            }
            generic_pushes(body, sources)
        }
    }
}

fn verify_hmac_sha256(
    token: &[u8],
    body: &[u8],
    hex: &str,
    header: &'static str,
) -> Result<(), Refused> {
    let given = hex::decode(hex.trim()).map_err(|_| Refused::BadSignature(header))?;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(token).expect("HMAC takes any key");
    mac.update(body);
    mac.verify_slice(&given)
        .map_err(|_| Refused::BadSignature(header))
}

/// Equal bytes, in time that does not depend on where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn json(body: &[u8]) -> Result<Value, Refused> {
    serde_json::from_slice(body).map_err(|e| Refused::Malformed(format!("not JSON ({e})")))
}

/// The manifests pushed in a distribution registry's notification envelope; pushes of
/// blobs (layers) and other actions are left out.
fn registry_pushes(body: &[u8]) -> Result<Heard, Refused> {
    let envelope = json(body)?;
    let events = envelope
        .get("events")
        .and_then(Value::as_array)
        .ok_or_else(|| Refused::Malformed("no events".into()))?;
    let mut pushes = Vec::new();
    for event in events {
        let text = |p: &str| {
            event
                .pointer(p)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        if text("/action") != Some("push") {
            continue;
        }
        let manifest = text("/target/tag").is_some()
            || text("/target/mediaType").is_some_and(|m| m.contains("manifest"));
        let Some(repository) = text("/target/repository").filter(|_| manifest) else {
            continue;
        };
        let pushed = Pushed::Oci {
            registry: text("/request/host").map(str::to_owned),
            repository: repository.to_owned(),
            tag: text("/target/tag").map(str::to_owned),
        };
        if !pushes.contains(&pushed) {
            pushes.push(pushed);
        }
    }
    if pushes.is_empty() {
        return Ok(Heard::Ignored("no manifest pushed".into()));
    }
    Ok(Heard::Pushes(pushes))
}

/// The repository a forge's push event is about, by every URL it gives.
fn forge_pushes(body: &[u8], at: &str, keys: &[&str]) -> Result<Heard, Refused> {
    let payload = json(body)?;
    let repository = payload.pointer(at).ok_or_else(|| {
        Refused::Malformed(format!("no {} in the event", at.trim_start_matches('/')))
    })?;
    let urls: Vec<String> = keys
        .iter()
        .filter_map(|k| repository.get(*k).and_then(Value::as_str))
        .filter(|u| !u.is_empty())
        .map(str::to_owned)
        .collect();
    if urls.is_empty() {
        return Err(Refused::Malformed(
            "the event gives no repository URL".into(),
        ));
    }
    Ok(Heard::Pushes(vec![Pushed::Git { urls }]))
}

/// A generic receiver wakes its `sources`; a body `{"source": URL}` narrows that to the
/// one it names, which must be one of them.
fn generic_pushes(body: &[u8], sources: &[String]) -> Result<Heard, Refused> {
    let named = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        let payload = json(body)?;
        payload
            .get("source")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let chosen: Vec<&String> = match &named {
        Some(url) => {
            let wanted = url.trim_end_matches('/');
            let found: Vec<&String> = sources
                .iter()
                .filter(|s| s.trim_end_matches('/') == wanted)
                .collect();
            if found.is_empty() {
                return Err(Refused::UnknownSource(url.clone()));
            }
            found
        }
        None => sources.iter().collect(),
    };
    Ok(Heard::Pushes(
        chosen
            .into_iter()
            .map(|url| Pushed::Url { url: url.clone() })
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &[u8] = b"s3cret-token";

    fn headers(pairs: &[(&str, &str)]) -> Headers {
        pairs
            .iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), (*v).to_owned()))
            .collect()
    }

    fn sign256(body: &[u8]) -> String {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(TOKEN).unwrap();
        mac.update(body);
        hex::encode(mac.finalize().into_bytes())
    }

    #[test]
    fn a_registry_notification_names_the_manifests_pushed() {
        let body = br#"{"events": [
            {"action": "push", "target": {"mediaType": "application/octet-stream", "repository": "charts/webapp", "digest": "sha256:aa"}, "request": {"host": "127.0.0.1:5000"}},
            {"action": "push", "target": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "repository": "charts/webapp", "tag": "1.0.1", "digest": "sha256:bb"}, "request": {"host": "127.0.0.1:5000"}},
            {"action": "pull", "target": {"repository": "charts/api", "tag": "1.0.0"}}
        ]}"#;
        let auth = headers(&[("Authorization", "Bearer s3cret-token")]);
        assert_eq!(
            hear(Kind::Registry, TOKEN, &[], &auth, body),
            Ok(Heard::Pushes(vec![Pushed::Oci {
                registry: Some("127.0.0.1:5000".into()),
                repository: "charts/webapp".into(),
                tag: Some("1.0.1".into()),
            }]))
        );
        for (given, refused) in [
            (headers(&[]), Refused::Unsigned("Authorization")),
            (
                headers(&[("Authorization", "Bearer wrong")]),
                Refused::BadSignature("Authorization"),
            ),
            (
                headers(&[("Authorization", "Basic s3cret-token")]),
                Refused::BadSignature("Authorization"),
            ),
        ] {
            assert_eq!(hear(Kind::Registry, TOKEN, &[], &given, body), Err(refused));
        }
        assert!(matches!(
            hear(Kind::Registry, TOKEN, &[], &auth, b"not json"),
            Err(Refused::Malformed(_))
        ));
    }

    #[test]
    fn forges_sign_as_flux_checks_them() {
        let body = br#"{"ref": "refs/heads/main", "repository": {"clone_url": "https://git.example/t/charts.git", "ssh_url": "git@git.example:t/charts.git"}}"#;
        let good = headers(&[
            ("X-Hub-Signature-256", &format!("sha256={}", sign256(body))),
            ("X-GitHub-Event", "push"),
        ]);
        let Ok(Heard::Pushes(pushes)) = hear(Kind::Github, TOKEN, &[], &good, body) else {
            panic!("a signed push is heard");
        };
        assert_eq!(
            pushes,
            [Pushed::Git {
                urls: vec![
                    "https://git.example/t/charts.git".into(),
                    "git@git.example:t/charts.git".into()
                ]
            }]
        );
        let tampered = br#"{"ref": "refs/heads/main", "repository": {"clone_url": "https://git.example/t/other.git"}}"#;
        assert_eq!(
            hear(Kind::Github, TOKEN, &[], &good, tampered),
            Err(Refused::BadSignature("X-Hub-Signature-256"))
        );
        let ping = headers(&[
            ("X-Hub-Signature-256", &format!("sha256={}", sign256(b"{}"))),
            ("X-GitHub-Event", "ping"),
        ]);
        assert!(matches!(
            hear(Kind::Github, TOKEN, &[], &ping, b"{}"),
            Ok(Heard::Ignored(_))
        ));
        let gitea = headers(&[
            ("X-Gitea-Signature", &sign256(body)),
            ("X-Gitea-Event", "push"),
        ]);
        assert!(matches!(
            hear(Kind::Gitea, TOKEN, &[], &gitea, body),
            Ok(Heard::Pushes(_))
        ));
        let gitlab_body = br#"{"project": {"git_http_url": "https://gl.example/t/charts.git"}}"#;
        let gitlab = headers(&[
            ("X-Gitlab-Token", "s3cret-token"),
            ("X-Gitlab-Event", "Push Hook"),
        ]);
        assert!(matches!(
            hear(Kind::Gitlab, TOKEN, &[], &gitlab, gitlab_body),
            Ok(Heard::Pushes(_))
        ));
        let wrong = headers(&[("X-Gitlab-Token", "nope"), ("X-Gitlab-Event", "Push Hook")]);
        assert_eq!(
            hear(Kind::Gitlab, TOKEN, &[], &wrong, gitlab_body),
            Err(Refused::BadSignature("X-Gitlab-Token"))
        );
    }

    #[test]
    fn generic_receivers_wake_their_sources() {
        let sources = vec![
            "oci://reg.example/charts/webapp".to_owned(),
            "https://charts.example".to_owned(),
        ];
        let all = hear(Kind::Generic, TOKEN, &sources, &headers(&[]), b"").unwrap();
        assert!(matches!(all, Heard::Pushes(ref p) if p.len() == 2));
        let one = br#"{"source": "https://charts.example/"}"#;
        let signed = headers(&[("X-Signature", &format!("sha256={}", sign256(one)))]);
        assert_eq!(
            hear(Kind::GenericHmac, TOKEN, &sources, &signed, one),
            Ok(Heard::Pushes(vec![Pushed::Url {
                url: "https://charts.example".into()
            }]))
        );
        let unknown = br#"{"source": "https://elsewhere.example"}"#;
        assert!(matches!(
            hear(Kind::Generic, TOKEN, &sources, &headers(&[]), unknown),
            Err(Refused::UnknownSource(_))
        ));
        assert_eq!(
            hear(Kind::GenericHmac, TOKEN, &sources, &headers(&[]), one),
            Err(Refused::Unsigned("X-Signature"))
        );
    }
}

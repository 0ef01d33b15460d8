//! Charts in OCI registries (`chart.repository: oci://host/path`), as `helm pull oci://`
//! reads them: the tag is the chart version (`+` written `_`), a semver range is resolved
//! against the repository's tags, and `version: 1.2.3@sha256:…` (or `@sha256:…` alone)
//! pins the manifest's digest. The manifest must be a Helm chart's (its config of Helm's
//! media type); its chart layer is pulled with its digest checked and cached by that
//! digest and the source's identity (registry, repository and credentials), so a tag
//! moved to other content is a new chart, an unchanged one costs one manifest request,
//! and a manifest naming another tenant's layer never gets it from the cache.
//!
//! Transport: TLS verified against the system roots plus the Secret's `ca.crt`. Plain
//! HTTP only with `chart.insecure: true`, or for a registry on a loopback address that
//! does not answer TLS (as Docker treats localhost registries).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::identity::IdentityKey;
use super::{Error, RepoAuth, ResolvedChart, local, version};

/// Helm's media types (helm.sh/helm/v4/pkg/registry).
pub const HELM_CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
pub const HELM_CHART_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";
/// What charts pushed by Helm 3.0-3.7 carry.
const LEGACY_CHART_MEDIA_TYPE: &str = "application/tar+gzip";
const MAX_CHART_BYTES: usize = 128 * 1024 * 1024;

/// `oci://host[:port]/path` and a chart name, as one repository reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRepository {
    /// `host[:port]`
    pub registry: String,
    /// `path/name`
    pub repository: String,
}

impl OciRepository {
    pub fn parse(url: &str, name: &str) -> Result<Self, Error> {
        let invalid = |reason: &str| Error::InvalidUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = url
            .strip_prefix("oci://")
            .ok_or_else(|| invalid("expected oci://host/path"))?
            .trim_end_matches('/');
        let (registry, path) = rest.split_once('/').unwrap_or((rest, ""));
        if registry.is_empty() || registry.contains('@') {
            return Err(invalid(
                "expected oci://host[:port]/path, without credentials",
            ));
        }
        let repository = if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}/{name}")
        };
        Ok(Self {
            registry: registry.to_owned(),
            repository,
        })
    }

    fn tagged(&self, tag: &str) -> Reference {
        Reference::with_tag(
            self.registry.clone(),
            self.repository.clone(),
            tag.to_owned(),
        )
    }

    fn pinned(&self, digest: &str) -> Reference {
        Reference::with_digest(
            self.registry.clone(),
            self.repository.clone(),
            digest.to_owned(),
        )
    }

    /// As users write it: `oci://host/path/name`.
    pub fn shown(&self) -> String {
        format!("oci://{}/{}", self.registry, self.repository)
    }

    fn host(&self) -> &str {
        match self.registry.rsplit_once(':') {
            Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
            _ => &self.registry,
        }
    }

    fn is_loopback(&self) -> bool {
        let host = self.host().trim_start_matches('[').trim_end_matches(']');
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }
}

/// What `chart.version` asks of an OCI chart.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wanted<'a> {
    /// A version or range (none: the newest stable), and a manifest digest it must have.
    Version {
        constraint: Option<&'a str>,
        digest: Option<&'a str>,
    },
}

fn wanted(version: Option<&str>) -> Result<Wanted<'_>, Error> {
    let Some(text) = version.map(str::trim) else {
        return Ok(Wanted::Version {
            constraint: None,
            digest: None,
        });
    };
    let (constraint, digest) = match text.split_once('@') {
        Some((v, d)) => (Some(v.trim()).filter(|v| !v.is_empty()), Some(d.trim())),
        None => (Some(text), None),
    };
    if let Some(d) = digest {
        let hex = d.strip_prefix("sha256:").unwrap_or_default();
        if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(Error::InvalidUrl {
                url: text.to_owned(),
                reason: "a digest pin is @sha256: and 64 hex digits".into(),
            });
        }
    }
    Ok(Wanted::Version { constraint, digest })
}

/// An exact version (`1.2.3`, `v1.2.3`), which is a tag as it is; anything else is a
/// range resolved against the tags.
fn exact(constraint: &str) -> Option<String> {
    let plain = constraint.strip_prefix('v').unwrap_or(constraint);
    semver::Version::parse(plain)
        .ok()
        .map(|_| constraint.to_owned())
}

/// OCI clients, one per way of reaching a registry (protocol, extra CA, credentials), so
/// the registries' tokens are reused between resolves. Credentials are part of the key:
/// a client keeps the first credentials it was given for a registry, so a Secret whose
/// password changed must get a client of its own. Only their digest is kept.
#[derive(Default)]
pub struct OciClients {
    clients: Mutex<HashMap<ClientKey, Arc<Client>>>,
}

/// Plain HTTP, the extra CA, the credentials' digest, and the outbound policy's class
/// (none: direct).
type ClientKey = (
    bool,
    Option<Vec<u8>>,
    String,
    Option<crate::cluster::egress::Class>,
);

impl OciClients {
    fn get(
        &self,
        plain_http: bool,
        ca: Option<&[u8]>,
        credentials: &RegistryAuth,
        timeout: Duration,
        via: Option<&crate::cluster::egress::Via>,
    ) -> Arc<Client> {
        // rustls needs a process-wide provider: ring, as kube and our HTTP client use.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let who = match credentials {
            RegistryAuth::Basic(u, p) => local::sha256_hex(format!("{u}\0{p}").as_bytes()),
            RegistryAuth::Bearer(t) => local::sha256_hex(t.as_bytes()),
            RegistryAuth::Anonymous => String::new(),
        };
        let key = (
            plain_http,
            ca.map(<[u8]>::to_vec),
            who,
            via.map(|v| v.class),
        );
        // Every connection (the registry, its token realm, a blob's storage host) goes
        // through the proxy that enforces the cluster's outbound policy.
        let proxy = via.map(crate::cluster::egress::Via::proxy_url);
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients
            .entry(key)
            .or_insert_with(|| {
                Arc::new(Client::new(ClientConfig {
                    protocol: if plain_http {
                        ClientProtocol::Http
                    } else {
                        ClientProtocol::Https
                    },
                    extra_root_certificates: ca
                        .map(|pem| {
                            vec![Certificate {
                                encoding: CertificateEncoding::Pem,
                                data: pem.to_vec(),
                            }]
                        })
                        .unwrap_or_default(),
                    read_timeout: Some(timeout),
                    connect_timeout: Some(timeout.min(Duration::from_secs(10))),
                    https_proxy: proxy.clone(),
                    http_proxy: proxy,
                    ..Default::default()
                }))
            })
            .clone()
    }
}

/// The cache a resolve reads and fills.
#[derive(Clone, Copy)]
pub struct Cache<'a> {
    pub dir: &'a Path,
    pub identity: &'a IdentityKey,
}

/// Resolves and fetches the OCI chart `chart` (repository `oci://…`, name, version,
/// insecure) into the cache.
pub async fn resolve(
    clients: &OciClients,
    cache: Cache<'_>,
    timeout: Duration,
    chart: &crate::api::ChartSpec,
    auth: &RepoAuth,
    via: Option<&crate::cluster::egress::Via>,
) -> Result<ResolvedChart, Error> {
    let (Some(url), Some(name)) = (chart.repository.as_deref(), chart.name.as_deref()) else {
        return Err(Error::InvalidSpec);
    };
    let version = chart.version.as_deref();
    let repo = OciRepository::parse(url, name)?;
    let credentials = match auth.registry_basic(&repo.registry) {
        Some((u, p)) => RegistryAuth::Basic(u.to_owned(), p.to_owned()),
        None => RegistryAuth::Anonymous,
    };
    let sent_credentials = !matches!(credentials, RegistryAuth::Anonymous);
    // A layer is content-addressed, but its digest is no proof of access: one cached for
    // another repository or other credentials is never served here (docs/operations/
    // multi-tenancy.md, "Caches").
    let source = cache.identity.oci(&repo.registry, &repo.repository, auth);
    let cache_dir = cache.dir;
    let ca = auth.ca_pem.as_deref();
    let attempt = |plain_http: bool| {
        let client = clients.get(plain_http, ca, &credentials, timeout, via);
        let (repo, credentials, source) = (repo.clone(), credentials.clone(), source.clone());
        async move {
            fetch(
                &client,
                cache_dir,
                &source,
                &repo,
                version,
                &credentials,
                sent_credentials,
            )
            .await
        }
    };
    // A refused connection says so: the registry's own host, or (when the failure is the
    // proxy's answer: a tunnel refused, a 403) the hop it was refused at.
    let refused = |result: Result<ResolvedChart, Error>| match (result, via) {
        (Err(e), Some(via)) if !matches!(e, Error::OutboundRefused { .. }) => {
            let by_proxy =
                matches!(e, Error::Auth { status: 403, .. }) || e.to_string().contains("tunnel");
            let registry = format!("https://{}", repo.registry);
            match via
                .refused(&registry, by_proxy)
                .or_else(|| via.refused(&format!("http://{}", repo.registry), false))
            {
                Some(reason) => Err(Error::OutboundRefused {
                    url: repo.shown(),
                    reason,
                }),
                None => Err(e),
            }
        }
        (other, _) => other,
    };
    if chart.insecure {
        return refused(attempt(true).await);
    }
    refused(match attempt(false).await {
        // A loopback registry without TLS: over plain HTTP, as Docker does for localhost.
        // Its answer is reported only if it gets further than the TLS attempt did.
        Err(tls @ Error::Unreachable { .. } | tls @ Error::Tls { .. }) if repo.is_loopback() => {
            match attempt(true).await {
                Err(Error::Unreachable { .. }) => Err(tls),
                other => other,
            }
        }
        other => other,
    })
}

async fn fetch(
    client: &Client,
    cache_dir: &Path,
    source: &str,
    repo: &OciRepository,
    version: Option<&str>,
    auth: &RegistryAuth,
    sent_credentials: bool,
) -> Result<ResolvedChart, Error> {
    let shown = repo.shown();
    let fail = |e: OciDistributionError| classify(e, &shown, sent_credentials);
    let Wanted::Version { constraint, digest } = wanted(version)?;
    let reference = match (constraint, digest) {
        (_, Some(d)) => repo.pinned(d),
        (Some(c), None) if exact(c).is_some() => repo.tagged(&c.replace('+', "_")),
        (c, None) => {
            let tags = client
                .list_tags(&repo.tagged("latest"), auth, None, None)
                .await
                .map_err(fail)?
                .tags;
            // Helm writes `+` as `_` in tags (OCI tags cannot hold `+`).
            let versions: Vec<String> = tags.iter().map(|t| t.replace('_', "+")).collect();
            let texts: Vec<&str> = versions.iter().map(String::as_str).collect();
            match version::select(&texts, c) {
                Ok(i) => repo.tagged(&tags[i]),
                Err(version::SelectError::Constraint(e)) => {
                    return Err(Error::InvalidConstraint(e));
                }
                Err(version::SelectError::NoMatch { available }) => {
                    return Err(Error::NoMatchingVersion {
                        name: shown,
                        constraint: c.unwrap_or("*").trim().to_owned(),
                        available,
                    });
                }
                Err(version::SelectError::NoStable { available }) => {
                    return Err(Error::NoStableVersion {
                        name: shown,
                        available,
                    });
                }
            }
        }
    };
    let (raw, served_digest) = client
        .pull_manifest_raw(&reference, auth, &[OCI_IMAGE_MEDIA_TYPE])
        .await
        .map_err(fail)?;
    // The manifest is what its digest names: computed here, whatever the registry said.
    let actual = format!("sha256:{}", local::sha256_hex(&raw));
    let expected = digest.unwrap_or(served_digest.as_str());
    if actual != expected {
        return Err(Error::DigestMismatch {
            url: format!("{shown} (manifest)"),
            expected: expected.trim_start_matches("sha256:").to_owned(),
            actual: actual.trim_start_matches("sha256:").to_owned(),
        });
    }
    // serde's message would quote the document: only where it stopped is said.
    let manifest: OciImageManifest =
        serde_json::from_slice(&raw).map_err(|e| Error::NotAChart {
            reference: reference.whole(),
            why: format!(
                "its manifest ({} bytes) is not an OCI image manifest (it stops reading at line {}, column {}; its content is not shown)",
                raw.len(),
                e.line(),
                e.column()
            ),
        })?;
    if manifest.config.media_type != HELM_CONFIG_MEDIA_TYPE {
        return Err(Error::NotAChart {
            reference: reference.whole(),
            why: format!(
                "its config is {}, not a Helm chart's ({HELM_CONFIG_MEDIA_TYPE})",
                manifest.config.media_type
            ),
        });
    }
    let layer = manifest
        .layers
        .iter()
        .find(|l| l.media_type == HELM_CHART_MEDIA_TYPE || l.media_type == LEGACY_CHART_MEDIA_TYPE)
        .ok_or_else(|| Error::NotAChart {
            reference: reference.whole(),
            why: format!("it has no layer of {HELM_CHART_MEDIA_TYPE}"),
        })?;
    if usize::try_from(layer.size).unwrap_or(usize::MAX) > MAX_CHART_BYTES {
        return Err(Error::TooLarge {
            url: shown,
            limit: MAX_CHART_BYTES,
        });
    }
    let layer_hex = layer
        .digest
        .strip_prefix("sha256:")
        .filter(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()))
        .ok_or_else(|| Error::NotAChart {
            reference: reference.whole(),
            why: format!("its chart layer's digest {} is not sha256", layer.digest),
        })?
        .to_owned();
    let path = cache_dir
        .join("oci")
        .join(format!("{layer_hex}-{source}.tgz"));
    // Flux's OCI revision, `<version>@sha256:<manifest digest>`: two contents pushed
    // under one tag are two desired states.
    let revision = |version: &str| Some(format!("{version}@{actual}"));
    if let Some(mut resolved) = super::cached_chart(&path, Some(&layer_hex), &shown).await? {
        resolved.revision = revision(&resolved.version);
        return Ok(resolved);
    }
    let mut body = Vec::with_capacity(usize::try_from(layer.size).unwrap_or(0));
    // pull_blob checks the layer's digest as it reads.
    client
        .pull_blob(&reference, layer, &mut body)
        .await
        .map_err(fail)?;
    let mut resolved = super::store_chart(
        body,
        Some(layer_hex),
        path,
        format!("{shown} (chart layer)"),
    )
    .await?;
    resolved.revision = revision(&resolved.version);
    Ok(resolved)
}

/// The error a user can act on, for what the OCI client says.
fn classify(e: OciDistributionError, shown: &str, sent_credentials: bool) -> Error {
    let auth = |status: u16| Error::Auth {
        url: shown.to_owned(),
        status,
        sent_credentials,
    };
    match e {
        OciDistributionError::AuthenticationFailure(_)
        | OciDistributionError::UnauthorizedError { .. } => auth(401),
        // A registry's words (an error body, an envelope's messages) are never repeated:
        // the status and the registry's error codes say what happened.
        OciDistributionError::ServerError { code, .. } => match code {
            401 => auth(401),
            403 => auth(403),
            404 => Error::OciNotFound {
                reference: shown.to_owned(),
                detail: "HTTP 404".into(),
            },
            _ => Error::HttpStatus {
                url: shown.to_owned(),
                status: code,
                reason: hyper::StatusCode::from_u16(code)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                    .unwrap_or_default()
                    .to_owned(),
            },
        },
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes: Vec<String> = envelope
                .errors
                .iter()
                .map(|e| format!("{:?}", e.code))
                .collect();
            let text = format!("registry error {}", codes.join(", "));
            if codes.iter().any(|c| c.contains("Unauthorized")) {
                auth(401)
            } else if codes.iter().any(|c| c.contains("Denied")) {
                auth(403)
            } else if codes.iter().any(|c| c.contains("Unknown")) {
                Error::OciNotFound {
                    reference: shown.to_owned(),
                    detail: text,
                }
            } else {
                Error::HttpStatus {
                    url: shown.to_owned(),
                    status: 0,
                    reason: text,
                }
            }
        }
        OciDistributionError::ImageManifestNotFoundError(_) => Error::OciNotFound {
            reference: shown.to_owned(),
            detail: "no such manifest".into(),
        },
        OciDistributionError::DigestError(d) => Error::DigestMismatch {
            url: shown.to_owned(),
            expected: String::new(),
            actual: d.to_string(),
        },
        OciDistributionError::RequestError(r) => {
            let chain = error_chain(&r);
            if chain.contains("certificate") || chain.contains("UnknownIssuer") {
                Error::UnknownCa {
                    url: shown.to_owned(),
                    cause: chain,
                }
            } else if r.is_timeout() {
                Error::Timeout {
                    url: shown.to_owned(),
                    after: Duration::ZERO,
                }
            } else if chain.contains("tls")
                || chain.contains("TLS")
                || chain.contains("InvalidContentType")
            {
                Error::Tls {
                    url: shown.to_owned(),
                    cause: chain,
                }
            } else {
                Error::Unreachable {
                    url: shown.to_owned(),
                    cause: chain,
                }
            }
        }
        // What the registry sent would be quoted by these (a token response, a body that
        // is not a manifest): only what kind of answer it was is said.
        OciDistributionError::GenericError(_)
        | OciDistributionError::JsonError(_)
        | OciDistributionError::ManifestParsingError(_)
        | OciDistributionError::VersionedParsingError(_)
        | OciDistributionError::RegistryTokenDecodeError(_)
        | OciDistributionError::SpecViolationError(_)
        | OciDistributionError::HeaderValueError(_) => Error::HttpStatus {
            url: shown.to_owned(),
            status: 0,
            reason: "the registry's answer is not what the OCI distribution API sends (its content is not shown)".into(),
        },
        other => Error::Unreachable {
            url: shown.to_owned(),
            cause: other.to_string(),
        },
    }
}

/// An error and its sources, which is where reqwest says why a connection failed.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_registry_and_path_plus_name() {
        let r = OciRepository::parse("oci://ghcr.io/stefanprodan/charts/", "podinfo").unwrap();
        assert_eq!(r.registry, "ghcr.io");
        assert_eq!(r.repository, "stefanprodan/charts/podinfo");
        assert_eq!(r.shown(), "oci://ghcr.io/stefanprodan/charts/podinfo");
        assert!(!r.is_loopback());
        let local = OciRepository::parse("oci://127.0.0.1:5000", "app").unwrap();
        assert_eq!(
            (local.registry.as_str(), local.repository.as_str()),
            ("127.0.0.1:5000", "app")
        );
        assert!(local.is_loopback());
        assert!(
            OciRepository::parse("oci://localhost:5000/x", "a")
                .unwrap()
                .is_loopback()
        );
        assert!(OciRepository::parse("https://example.com", "a").is_err());
        assert!(OciRepository::parse("oci://user:pw@example.com/x", "a").is_err());
    }

    #[test]
    fn versions_ranges_and_digest_pins() {
        let d = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            wanted(Some(&format!("1.2.3@{d}"))).unwrap(),
            Wanted::Version {
                constraint: Some("1.2.3"),
                digest: Some(&d)
            }
        );
        assert_eq!(
            wanted(Some(&format!("@{d}"))).unwrap(),
            Wanted::Version {
                constraint: None,
                digest: Some(&d)
            }
        );
        assert!(wanted(Some("1.2.3@sha256:abc")).is_err());
        assert_eq!(exact("1.2.3"), Some("1.2.3".into()));
        assert_eq!(
            exact("v1.2.3-rc.1+build.5"),
            Some("v1.2.3-rc.1+build.5".into())
        );
        assert_eq!(exact(">=1.0.0"), None);
        assert_eq!(exact("~1.4"), None);
    }
}

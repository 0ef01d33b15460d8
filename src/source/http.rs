//! GET over HTTP(S) for chart repositories: hyper-util's pooled client on rustls (ring),
//! trusting the system roots plus an optional CA, with redirects, basic auth, a timeout
//! per request and a cap on the response size.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{StatusCode, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::Error;
use super::url::{authority, redact, resolve_reference};

/// Redirects followed per request, as a browser or Go's client would (Go allows 10).
const MAX_REDIRECTS: usize = 5;
const USER_AGENT: &str = concat!("wheelhouse/", env!("CARGO_PKG_VERSION"));

#[derive(Clone)]
pub(crate) struct HttpClient {
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    timeout: Duration,
}

/// Credentials, sent only to the repository's own host (as Helm does unless told to
/// pass them everywhere), so a redirect to a CDN does not leak them.
pub(crate) struct Credentials<'a> {
    pub username: &'a str,
    pub password: &'a str,
    pub authority: &'a str,
}

pub(crate) struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

/// The system's trust roots, loaded once (it reads files and can take a few ms).
pub(crate) fn system_roots() -> RootCertStore {
    let mut roots = RootCertStore::empty();
    let loaded = rustls_native_certs::load_native_certs();
    for error in &loaded.errors {
        tracing::debug!(%error, "skipping an unreadable system trust root");
    }
    let (added, ignored) = roots.add_parsable_certificates(loaded.certs);
    tracing::debug!(added, ignored, "loaded system trust roots");
    roots
}

/// TLS trusting `roots` plus the PEM certificates in `ca_pem`, on ring.
pub(crate) fn tls_config(
    roots: &RootCertStore,
    ca_pem: Option<&[u8]>,
) -> Result<rustls::ClientConfig, Error> {
    let mut roots = roots.clone();
    if let Some(pem) = ca_pem {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| Error::InvalidCa(e.to_string()))?;
        if certs.is_empty() {
            return Err(Error::InvalidCa("no PEM certificate found".into()));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| Error::InvalidCa(e.to_string()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::TlsSetup(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

impl HttpClient {
    /// A client trusting `roots` plus the PEM certificates in `ca_pem`.
    pub fn new(
        roots: &RootCertStore,
        ca_pem: Option<&[u8]>,
        timeout: Duration,
    ) -> Result<Self, Error> {
        let tls = tls_config(roots, ca_pem)?;
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(timeout.min(Duration::from_secs(30))));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        Ok(Self { client, timeout })
    }

    /// GETs `url`, following redirects. Returns 2xx and 304 responses; every other
    /// status is an error. `extra` headers (conditional requests) go with every hop.
    pub async fn get(
        &self,
        url: &str,
        credentials: Option<&Credentials<'_>>,
        extra: &[(header::HeaderName, String)],
        limit: usize,
    ) -> Result<Response, Error> {
        let mut current = url.to_owned();
        for _ in 0..=MAX_REDIRECTS {
            let uri = parse_uri(&current)?;
            let mut request = hyper::Request::get(uri.clone())
                .header(header::USER_AGENT, USER_AGENT)
                .body(Empty::new())
                .map_err(|e| Error::InvalidUrl {
                    url: redact(&current),
                    reason: e.to_string(),
                })?;
            let headers = request.headers_mut();
            for (name, value) in extra {
                if let Ok(value) = HeaderValue::from_str(value) {
                    headers.insert(name.clone(), value);
                }
            }
            let sent_credentials = match credentials {
                Some(c) if authority(&current) == Some(c.authority) => {
                    headers.insert(header::AUTHORIZATION, basic_auth(c.username, c.password));
                    true
                }
                _ => false,
            };
            let response = tokio::time::timeout(self.timeout, self.send(request, &current, limit))
                .await
                .map_err(|_| Error::Timeout {
                    url: redact(&current),
                    after: self.timeout,
                })??;
            let status = response.status;
            if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
                let location = response
                    .headers
                    .get(header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| Error::HttpStatus {
                        url: redact(&current),
                        status: status.as_u16(),
                        reason: "redirect without a Location".into(),
                    })?;
                current = resolve_reference(&current, location);
                continue;
            }
            if status.is_success() || status == StatusCode::NOT_MODIFIED {
                return Ok(response);
            }
            if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
                return Err(Error::Auth {
                    url: redact(&current),
                    status: status.as_u16(),
                    sent_credentials,
                });
            }
            return Err(Error::HttpStatus {
                url: redact(&current),
                status: status.as_u16(),
                reason: status.canonical_reason().unwrap_or("").to_owned(),
            });
        }
        Err(Error::TooManyRedirects {
            url: redact(url),
            max: MAX_REDIRECTS,
        })
    }

    async fn send(
        &self,
        request: hyper::Request<Empty<Bytes>>,
        url: &str,
        limit: usize,
    ) -> Result<Response, Error> {
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| connect_error(url, &e))?;
        let (parts, body) = response.into_parts();
        // Redirect and error bodies are not needed; don't read (or cap) them.
        if !parts.status.is_success() {
            return Ok(Response {
                status: parts.status,
                headers: parts.headers,
                body: Bytes::new(),
            });
        }
        let body = Limited::new(body, limit)
            .collect()
            .await
            .map_err(|e| {
                if e.downcast_ref::<http_body_util::LengthLimitError>()
                    .is_some()
                {
                    Error::TooLarge {
                        url: redact(url),
                        limit,
                    }
                } else {
                    Error::Unreachable {
                        url: redact(url),
                        cause: format!("reading the response: {}", chain(e.as_ref())),
                    }
                }
            })?
            .to_bytes();
        Ok(Response {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }
}

fn parse_uri(url: &str) -> Result<Uri, Error> {
    let uri: Uri = url
        .parse()
        .map_err(|e: hyper::http::uri::InvalidUri| Error::InvalidUrl {
            url: redact(url),
            reason: e.to_string(),
        })?;
    match uri.scheme_str() {
        Some("http" | "https") if uri.authority().is_some() => Ok(uri),
        _ => Err(Error::InvalidUrl {
            url: redact(url),
            reason: "expected an http:// or https:// URL".into(),
        }),
    }
}

pub(super) fn basic_auth(username: &str, password: &str) -> HeaderValue {
    let token = BASE64.encode(format!("{username}:{password}"));
    let mut value =
        HeaderValue::from_str(&format!("Basic {token}")).expect("base64 is a valid header value");
    // Keeps the header out of hyper's debug output and HPACK tables.
    value.set_sensitive(true);
    value
}

/// Classifies a failed request: TLS trust problems get their own errors because the fix
/// (add a CA) differs from a network problem.
pub(super) fn connect_error(url: &str, error: &(dyn std::error::Error + 'static)) -> Error {
    for e in causes(error) {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return match tls {
                rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => {
                    Error::UnknownCa {
                        url: redact(url),
                        cause: tls.to_string(),
                    }
                }
                _ => Error::Tls {
                    url: redact(url),
                    cause: tls.to_string(),
                },
            };
        }
    }
    Error::Unreachable {
        url: redact(url),
        cause: chain(error),
    }
}

/// An error and its causes. `io::Error::source()` skips the error it wraps (it returns
/// that error's source), so wrapped errors are reached through `get_ref()` instead.
fn causes<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Vec<&'a (dyn std::error::Error + 'static)> {
    let mut out = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        out.push(e);
        next = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
        if out.len() > 16 {
            break;
        }
    }
    out
}

/// An error and its causes on one line, without hyper's generic outer layers and
/// without repeating a message a wrapper copied from its cause.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in causes(error) {
        let text = e.to_string();
        if text.starts_with("client error (") || parts.last() == Some(&text) {
            continue;
        }
        parts.push(text);
    }
    if parts.is_empty() {
        error.to_string()
    } else {
        parts.join(": ")
    }
}

//! GET over HTTP(S) for chart repositories, on reqwest: the one HTTP client stack of the
//! process (Git through gix, OCI, notifications). rustls on ring trusting the system roots
//! plus an optional CA, redirects followed here, basic auth, a timeout per request and a
//! cap on the response size.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use reqwest::header::{self, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::Error;
use super::url::{redact, resolve_reference};

/// Redirects followed per request, as a browser or Go's client would (Go allows 10).
const MAX_REDIRECTS: usize = 5;
const USER_AGENT: &str = concat!("wheelhouse/", env!("CARGO_PKG_VERSION"));

#[derive(Clone)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    timeout: Duration,
    /// The outbound policy's proxy every connection goes through, when one applies.
    via: Option<crate::cluster::egress::Via>,
}

/// Credentials, sent only to the repository's own origin (scheme, host and port, as
/// Helm does unless told to pass them everywhere), so a redirect to a CDN, or to plain
/// HTTP on the same host, does not carry them.
pub(crate) struct Credentials<'a> {
    pub username: &'a str,
    pub password: &'a str,
    /// `scheme://host[:port]` of the repository.
    pub origin: String,
}

pub(crate) struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
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

/// A pooled client on `tls`, for chart repositories and notifications alike.
pub(crate) fn client(
    tls: rustls::ClientConfig,
    connect_timeout: Duration,
) -> reqwest::Result<reqwest::Client> {
    builder(tls, connect_timeout).build()
}

fn builder(mut tls: rustls::ClientConfig, connect_timeout: Duration) -> reqwest::ClientBuilder {
    // reqwest leaves a preconfigured config's ALPN alone; without it no server speaks h2.
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        // Callers follow redirects themselves, to choose which hosts get credentials.
        .redirect(reqwest::redirect::Policy::none())
        // Direct connections, as docs/user-guide/notifications.md promises: reqwest would
        // otherwise read HTTP(S)_PROXY from the environment.
        .no_proxy()
        .user_agent(USER_AGENT)
        .connect_timeout(connect_timeout)
        .pool_idle_timeout(Duration::from_secs(90))
}

/// `scheme://host[:port]` of `url` (the port the scheme's default when not written), for
/// deciding where credentials may go.
pub(crate) fn origin(url: &str) -> Option<String> {
    let u = Url::parse(url).ok()?;
    Some(format!(
        "{}://{}:{}",
        u.scheme(),
        u.host_str()?.to_ascii_lowercase(),
        u.port_or_known_default()?
    ))
}

/// `url` without userinfo. Only credentials set on purpose (chart.secretRef's) are sent,
/// where reqwest's request builder would turn userinfo into basic auth.
pub(crate) fn without_userinfo(mut url: Url) -> Url {
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url
}

impl HttpClient {
    /// A client trusting `roots` plus the PEM certificates in `ca_pem`.
    pub fn new(
        roots: &RootCertStore,
        ca_pem: Option<&[u8]>,
        timeout: Duration,
        via: Option<crate::cluster::egress::Via>,
    ) -> Result<Self, Error> {
        let tls = tls_config(roots, ca_pem)?;
        let mut builder = builder(tls, timeout.min(Duration::from_secs(30)));
        if let Some(via) = &via {
            let proxy =
                reqwest::Proxy::all(via.proxy_url()).map_err(|e| Error::TlsSetup(chain(&e)))?;
            builder = builder.proxy(proxy);
        }
        let client = builder.build().map_err(|e| Error::TlsSetup(chain(&e)))?;
        Ok(Self {
            client,
            timeout,
            via,
        })
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
            let target = parse_url(&current)?;
            let mut request = reqwest::Request::new(Method::GET, target);
            let headers = request.headers_mut();
            for (name, value) in extra {
                if let Ok(value) = HeaderValue::from_str(value) {
                    headers.insert(name.clone(), value);
                }
            }
            let sent_credentials = match credentials {
                Some(c) if origin(&current).as_deref() == Some(c.origin.as_str()) => {
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
            if status == StatusCode::FORBIDDEN
                && self.via.is_some()
                && let Some(why) = response
                    .headers
                    .get(crate::cluster::egress::REFUSED_HEADER)
                    .and_then(|v| v.to_str().ok())
            {
                return Err(Error::OutboundRefused {
                    url: redact(&current),
                    reason: why.to_owned(),
                });
            }
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
        request: reqwest::Request,
        url: &str,
        limit: usize,
    ) -> Result<Response, Error> {
        let mut response = self.client.execute(request).await.map_err(|e| {
            match self.via.as_ref().and_then(|v| v.refused(url, false)) {
                Some(reason) => Error::OutboundRefused {
                    url: redact(url),
                    reason,
                },
                None => connect_error(url, &e),
            }
        })?;
        let status = response.status();
        let headers = std::mem::take(response.headers_mut());
        // Redirect and error bodies are not needed; don't read (or cap) them.
        if !status.is_success() {
            return Ok(Response {
                status,
                headers,
                body: Vec::new(),
            });
        }
        let too_large = || Error::TooLarge {
            url: redact(url),
            limit,
        };
        let announced = response.content_length().unwrap_or(0);
        if announced > limit as u64 {
            return Err(too_large());
        }
        // Read chunk by chunk, so a body past the limit is never held whole.
        let mut body = Vec::with_capacity(announced as usize);
        while let Some(chunk) = response.chunk().await.map_err(|e| Error::Unreachable {
            url: redact(url),
            cause: format!("reading the response: {}", chain(&e)),
        })? {
            if body.len() + chunk.len() > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

/// `url` as reqwest's URL, if it is an http:// or https:// URL with a host.
fn parse_url(url: &str) -> Result<Url, Error> {
    let invalid = |reason: String| Error::InvalidUrl {
        url: redact(url),
        reason,
    };
    // http's grammar first: it refuses what the url crate would silently percent-encode.
    let uri: hyper::Uri = url
        .parse()
        .map_err(|e: hyper::http::uri::InvalidUri| invalid(e.to_string()))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.authority().is_none() {
        return Err(invalid("expected an http:// or https:// URL".into()));
    }
    Url::parse(url)
        .map(without_userinfo)
        .map_err(|e| invalid(e.to_string()))
}

pub(super) fn basic_auth(username: &str, password: &str) -> HeaderValue {
    let token = BASE64.encode(format!("{username}:{password}"));
    let mut value =
        HeaderValue::from_str(&format!("Basic {token}")).expect("base64 is a valid header value");
    // Keeps the header out of debug output and HPACK tables.
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

/// An error and its causes on one line, without the generic outer layers of reqwest
/// ("error sending request for url (...)", which would also show a URL's userinfo) and
/// hyper ("client error (Connect)"), and without repeating a message a wrapper copied
/// from its cause.
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    for e in causes(error) {
        let text = without_url(e);
        let generic = e.is::<reqwest::Error>() && e.source().is_some();
        if generic || text.starts_with("client error (") || parts.last() == Some(&text) {
            continue;
        }
        parts.push(text);
    }
    if parts.is_empty() {
        without_url(error)
    } else {
        parts.join(": ")
    }
}

/// `error`'s message, without the URL reqwest appends to its own.
fn without_url(error: &(dyn std::error::Error + 'static)) -> String {
    let text = error.to_string();
    match error.downcast_ref::<reqwest::Error>().and_then(|r| r.url()) {
        Some(url) => text.replace(&format!(" for url ({url})"), ""),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Answers one connection on 127.0.0.1 with `response`; hands back the request head.
    async fn answer_once(response: Vec<u8>) -> (String, tokio::task::JoinHandle<String>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let served = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.ends_with(b"\r\n\r\n") {
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "the client closed before its request ended");
                head.extend_from_slice(&buf[..n]);
            }
            // The client may hang up once it has had enough.
            let _ = stream.write_all(&response).await;
            String::from_utf8(head).unwrap()
        });
        (url, served)
    }

    fn client() -> HttpClient {
        HttpClient::new(&RootCertStore::empty(), None, Duration::from_secs(5), None).unwrap()
    }

    #[tokio::test]
    async fn a_body_past_the_limit_is_refused_while_streaming() {
        // Chunked, so no Content-Length announces the size.
        let mut response = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..4 {
            response.extend_from_slice(b"400\r\n");
            response.extend_from_slice(&[b'x'; 0x400]);
            response.extend_from_slice(b"\r\n");
        }
        response.extend_from_slice(b"0\r\n\r\n");
        let (url, _served) = answer_once(response).await;
        let err = client()
            .get(&format!("{url}/index.yaml"), None, &[], 3000)
            .await
            .err()
            .expect("refused");
        assert_eq!(
            err.to_string(),
            format!("{url}/index.yaml: response larger than 3000 bytes")
        );
    }

    #[tokio::test]
    async fn userinfo_is_never_sent_and_credentials_are_marked_sensitive() {
        let (url, served) =
            answer_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()).await;
        let with_userinfo = url.replacen("http://", "http://user:pa55@", 1);
        let response = client()
            .get(&format!("{with_userinfo}/index.yaml"), None, &[], 100)
            .await
            .unwrap();
        assert_eq!(response.body, b"ok");
        let head = served.await.unwrap().to_lowercase();
        assert!(!head.contains("authorization"), "{head}");
        assert!(head.starts_with("get /index.yaml http/1.1\r\n"), "{head}");
        assert!(basic_auth("u", "p").is_sensitive());
    }

    /// Credentials go to the repository's own origin only: a redirect to another port
    /// (or scheme) of the same host gets none.
    #[tokio::test]
    async fn credentials_never_follow_a_redirect_to_another_origin() {
        let (other, second) =
            answer_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()).await;
        let (url, first) = answer_once(
            format!("HTTP/1.1 302 Found\r\nLocation: {other}/moved\r\nContent-Length: 0\r\n\r\n")
                .into_bytes(),
        )
        .await;
        let credentials = Credentials {
            username: "u",
            password: "hunter22",
            origin: origin(&url).unwrap(),
        };
        let response = client()
            .get(&format!("{url}/index.yaml"), Some(&credentials), &[], 100)
            .await
            .unwrap();
        assert_eq!(response.body, b"ok");
        assert!(
            first
                .await
                .unwrap()
                .to_lowercase()
                .contains("authorization: basic")
        );
        let head = second.await.unwrap().to_lowercase();
        assert!(!head.contains("authorization"), "{head}");
        assert_ne!(origin("https://h.example/x"), origin("http://h.example/x"));
        assert_eq!(
            origin("https://H.example/x"),
            origin("https://h.example:443/y")
        );
    }

    /// A policed client goes through the outbound policy's proxy: a loopback repository
    /// is refused with the reason (never its answer), and passes once allowed.
    #[tokio::test]
    async fn the_outbound_policy_refuses_and_allows_through_its_proxy() {
        use crate::cluster::egress::{Class, Egress, Rules, Via};
        let (rules_tx, rules_rx) =
            tokio::sync::watch::channel(std::sync::Arc::new(Rules::default()));
        let egress = Egress::start(rules_rx).unwrap();
        let policed = HttpClient::new(
            &RootCertStore::empty(),
            None,
            Duration::from_secs(5),
            Some(Via {
                egress: egress.clone(),
                class: Class::Tenant,
            }),
        )
        .unwrap();
        let (url, _served) =
            answer_once(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nSECRET".to_vec()).await;
        let err = policed
            .get(&format!("{url}/index.yaml"), None, &[], 100)
            .await
            .err()
            .unwrap();
        let text = err.to_string();
        assert!(matches!(err, Error::OutboundRefused { .. }), "{err:?}");
        assert!(text.contains("127.0.0.1 is a loopback address"), "{text}");
        assert!(!text.contains("SECRET"), "{text}");
        // An https:// URL goes through CONNECT: refused the same way.
        let port = url.rsplit(':').next().unwrap();
        let err = policed
            .get(
                &format!("https://127.0.0.1:{port}/index.yaml"),
                None,
                &[],
                100,
            )
            .await
            .err()
            .unwrap();
        assert!(matches!(err, Error::OutboundRefused { .. }), "{err:?}");
        // Allowed by the policy: the request is forwarded, the answer comes back.
        rules_tx.send_replace(std::sync::Arc::new(Rules {
            allowed: crate::cluster::egress::parse_networks("127.0.0.0/8").unwrap(),
            ..Rules::default()
        }));
        let (url, served) =
            answer_once(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec()).await;
        let response = policed
            .get(&format!("{url}/index.yaml"), None, &[], 100)
            .await
            .unwrap();
        assert_eq!(response.body, b"ok");
        let head = served.await.unwrap().to_lowercase();
        assert!(head.starts_with("get /index.yaml http/1.1\r\n"), "{head}");
        assert!(!head.contains("proxy-authorization"), "{head}");
    }

    #[tokio::test]
    async fn a_refused_connection_is_one_line_without_reqwest_s_wrapping() {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let url = format!("http://u:secret@127.0.0.1:{port}/index.yaml");
        let err = client()
            .get(&url, None, &[], 100)
            .await
            .err()
            .expect("refused");
        let Error::Unreachable { cause, .. } = &err else {
            panic!("{err:?}");
        };
        assert!(cause.starts_with("tcp connect error: "), "{cause}");
        assert!(cause.to_lowercase().contains("refused"), "{cause}");
        assert!(!err.to_string().contains("secret"), "{err}");
    }
}

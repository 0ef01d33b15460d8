//! Where a release's sources may connect: the cluster's outbound policy for chart
//! repositories, OCI registries, Git servers and remote kubeconfigs, enforced on every
//! connection (every redirect hop, a registry's token realm, a blob's storage host).
//!
//! A tenant names the URLs; the engine's network position is not the tenant's, so under
//! the lockdown loopback, link-local, unspecified and multicast addresses and the
//! cluster's own Service and Pod ranges are refused unless the policy allows them
//! (`allowedNetworks`), and `deniedNetworks` are refused for every release
//! (docs/operations/multi-tenancy.md, "Outbound requests").
//!
//! The HTTP clients that connect for sources are three crates' (ours on reqwest,
//! oci-client's, gitoxide's), and two of them let nothing but a proxy see each
//! connection. So the rule is enforced in one place for all of them: an in-process HTTP
//! proxy on loopback that each client of a policed release goes through. It resolves
//! the host itself, connects only to an allowed address (no second lookup, so a name
//! that resolves elsewhere the next time gains nothing), and answers every refused
//! connection with 403 and the reason, which is kept by destination for the release's
//! status. SSH connects through [`Egress::connect`] with the same check.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use ipnet::IpNet;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// How long one connection to a source may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Refusals remembered for the messages of the resolves that met them.
const REFUSALS_KEPT: usize = 1024;
/// The header a refusal carries (a forwarded plain-HTTP request's 403).
pub const REFUSED_HEADER: &str = "x-wheelhouse-egress-refused";

/// Which rules a connection answers to: a release acting as a tenant (lockdown), or any
/// other release (only `deniedNetworks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    Tenant,
    Engine,
}

impl Class {
    fn user(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::Engine => "engine",
        }
    }
}

/// The cluster's outbound policy for sources, as the engine enforces it now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Refused for every release (`deniedNetworks`).
    pub denied: Vec<IpNet>,
    /// Exceptions to the tenant defaults (`allowedNetworks`).
    pub allowed: Vec<IpNet>,
    /// The cluster's own Service and Pod ranges, as found (refused for tenants).
    pub cluster: Vec<IpNet>,
}

/// Why an address is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{address} is {why}, which the cluster's outbound policy refuses for {whom} (kube-public/wheelhouse-tenancy: {rule})"
)]
pub struct Refusal {
    pub address: IpAddr,
    pub why: String,
    whom: &'static str,
    rule: &'static str,
}

impl Rules {
    /// Whether a release of `class` may connect to `ip`.
    pub fn check(&self, class: Class, ip: IpAddr) -> Result<(), Refusal> {
        let ip = canonical(ip);
        if let Some(net) = self.denied.iter().find(|n| n.contains(&ip)) {
            return Err(Refusal {
                address: ip,
                why: format!("in {net}"),
                whom: "every release's sources",
                rule: "deniedNetworks",
            });
        }
        if class == Class::Engine || self.allowed.iter().any(|n| n.contains(&ip)) {
            return Ok(());
        }
        let why = if ip.is_loopback() {
            Some("a loopback address".to_owned())
        } else if is_link_local(ip) {
            Some("a link-local address (where cloud metadata services answer)".to_owned())
        } else if ip.is_unspecified() {
            Some("the unspecified address".to_owned())
        } else if ip.is_multicast() {
            Some("a multicast address".to_owned())
        } else {
            self.cluster
                .iter()
                .find(|n| n.contains(&ip))
                .map(|n| format!("in the cluster's own range {n} (its Services and Pods)"))
        };
        match why {
            None => Ok(()),
            Some(why) => Err(Refusal {
                address: ip,
                why,
                whom: "tenants' sources",
                rule: "allowedNetworks lists the exceptions",
            }),
        }
    }
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn is_link_local(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

/// Parses a list of CIDRs (`10.0.0.0/8, 192.168.1.5`), a bare address as its /32 or /128.
pub fn parse_networks(text: &str) -> Result<Vec<IpNet>, String> {
    text.split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<IpNet>()
                .or_else(|_| s.parse::<IpAddr>().map(IpNet::from))
                .map(|n| n.trunc())
                .map_err(|_| format!("{s:?} is not a network (CIDR) or an address"))
        })
        .collect()
}

/// The proxy every policed source connection goes through.
pub struct Egress {
    addr: SocketAddr,
    /// The proxy's password: only this process's clients use it.
    token: String,
    rules: watch::Receiver<Arc<Rules>>,
    refusals: Mutex<VecDeque<Refused>>,
}

/// A refusal as remembered: where to, why, when.
struct Refused {
    destination: String,
    why: String,
    at: Instant,
}

/// How long a refusal explains the failure of a resolve that met it.
const REFUSAL_EXPLAINS: Duration = Duration::from_secs(10);

impl std::fmt::Debug for Egress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Egress").field("addr", &self.addr).finish()
    }
}

impl Egress {
    /// Starts the proxy on a free loopback port, enforcing what `rules` says at each
    /// connection. It runs until the process ends. Must be called within the runtime.
    pub fn start(rules: watch::Receiver<Arc<Rules>>) -> std::io::Result<Arc<Self>> {
        let bound = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))?;
        bound.set_nonblocking(true)?;
        let listener = TcpListener::from_std(bound)?;
        let egress = Arc::new(Self {
            addr: listener.local_addr()?,
            token: random_token()?,
            rules,
            refusals: Mutex::new(VecDeque::new()),
        });
        let serving = egress.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let egress = serving.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let egress = egress.clone();
                        async move { Ok::<_, std::convert::Infallible>(egress.serve(req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .preserve_header_case(true)
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        Ok(egress)
    }

    /// The proxy URL a client of a `class` release is given.
    pub fn proxy_url(&self, class: Class) -> String {
        format!("http://{}:{}@{}", class.user(), self.token, self.addr)
    }

    /// Why a connection to `host:port` was refused just now, if it was.
    pub fn refusal_for(&self, host: &str, port: u16) -> Option<String> {
        let key = destination(host, port);
        let kept = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
        kept.iter()
            .rev()
            .take_while(|r| r.at.elapsed() < REFUSAL_EXPLAINS)
            .find(|r| r.destination == key)
            .map(|r| r.why.clone())
    }

    /// The newest refusal of all, if recent: for a failure whose destination is not known
    /// (a redirect's, a token realm's).
    pub fn last_refusal(&self) -> Option<String> {
        let kept = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
        kept.back()
            .filter(|r| r.at.elapsed() < REFUSAL_EXPLAINS)
            .map(|r| r.why.clone())
    }

    /// Connects to `host:port` for a `class` release, to an allowed address only.
    pub async fn connect(&self, class: Class, host: &str, port: u16) -> std::io::Result<TcpStream> {
        match self.open(class, host, port).await {
            Ok(stream) => Ok(stream),
            Err(Failure::Refused(why)) => Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                why,
            )),
            Err(Failure::Io(e)) => Err(e),
        }
    }

    async fn open(&self, class: Class, host: &str, port: u16) -> Result<TcpStream, Failure> {
        let rules = self.rules.borrow().clone();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let candidates: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
            Ok(ip) => vec![SocketAddr::new(ip, port)],
            Err(_) => tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::lookup_host((bare, port)))
                .await
                .map_err(|_| {
                    Failure::Io(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("resolving {bare} took over {}s", CONNECT_TIMEOUT.as_secs()),
                    ))
                })?
                .map_err(Failure::Io)?
                .collect(),
        };
        let mut refused = None;
        let mut last_error = None;
        for addr in candidates {
            if let Err(r) = rules.check(class, addr.ip()) {
                refused.get_or_insert(r);
                continue;
            }
            match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(e)) => last_error = Some(e),
                Err(_) => {
                    last_error = Some(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "connecting to {addr} took over {}s",
                            CONNECT_TIMEOUT.as_secs()
                        ),
                    ))
                }
            }
        }
        if let Some(e) = last_error {
            return Err(Failure::Io(e));
        }
        let why = match refused {
            Some(r) => format!("{bare}: {r}"),
            None => format!("{bare} resolves to no address"),
        };
        self.remember(bare, port, &why);
        Err(Failure::Refused(why))
    }

    fn remember(&self, host: &str, port: u16, why: &str) {
        tracing::warn!(%host, port, reason = %why, "outbound connection refused by the cluster's policy");
        let mut kept = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= REFUSALS_KEPT {
            kept.pop_front();
        }
        kept.push_back(Refused {
            destination: destination(host, port),
            why: why.to_owned(),
            at: Instant::now(),
        });
    }

    fn class_of(&self, req: &Request<Incoming>) -> Option<Class> {
        let value = req
            .headers()
            .get(hyper::header::PROXY_AUTHORIZATION)?
            .to_str()
            .ok()?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(value.strip_prefix("Basic ")?.trim())
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (user, password) = text.split_once(':')?;
        if !constant_time_eq(password.as_bytes(), self.token.as_bytes()) {
            return None;
        }
        match user {
            "tenant" => Some(Class::Tenant),
            "engine" => Some(Class::Engine),
            _ => None,
        }
    }

    async fn serve(&self, req: Request<Incoming>) -> Response<BoxBody<Bytes, hyper::Error>> {
        let Some(class) = self.class_of(&req) else {
            let mut response = answer(StatusCode::PROXY_AUTHENTICATION_REQUIRED, "");
            response.headers_mut().insert(
                hyper::header::PROXY_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Basic realm=\"wheelhouse\""),
            );
            return response;
        };
        if req.method() == Method::CONNECT {
            return self.tunnel(class, req).await;
        }
        self.forward(class, req).await
    }

    /// CONNECT host:port: a tunnel to an allowed address (TLS, end to end).
    async fn tunnel(
        &self,
        class: Class,
        req: Request<Incoming>,
    ) -> Response<BoxBody<Bytes, hyper::Error>> {
        let Some(authority) = req.uri().authority().cloned() else {
            return answer(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
        };
        let port = authority.port_u16().unwrap_or(443);
        let upstream = match self.open(class, authority.host(), port).await {
            Ok(s) => s,
            Err(f) => return f.answer(),
        };
        tokio::spawn(async move {
            if let Ok(upgraded) = hyper::upgrade::on(req).await {
                let mut client = TokioIo::new(upgraded);
                let mut upstream = upstream;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
        });
        answer(StatusCode::OK, "")
    }

    /// A plain-HTTP request in absolute form: sent on to an allowed address.
    async fn forward(
        &self,
        class: Class,
        mut req: Request<Incoming>,
    ) -> Response<BoxBody<Bytes, hyper::Error>> {
        let uri = req.uri().clone();
        let (Some(host), Some("http")) = (uri.host(), uri.scheme_str()) else {
            return answer(
                StatusCode::BAD_REQUEST,
                "only absolute http:// requests and CONNECT",
            );
        };
        let port = uri.port_u16().unwrap_or(80);
        let upstream = match self.open(class, host, port).await {
            Ok(s) => s,
            Err(f) => return f.answer(),
        };
        let Ok((mut sender, connection)) =
            hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await
        else {
            return answer(StatusCode::BAD_GATEWAY, "the upstream connection failed");
        };
        tokio::spawn(connection);
        let path = uri
            .path_and_query()
            .map_or("/".to_owned(), ToString::to_string);
        *req.uri_mut() = path.parse().unwrap_or_default();
        let headers = req.headers_mut();
        for hop in [
            hyper::header::PROXY_AUTHORIZATION,
            hyper::header::HeaderName::from_static("proxy-connection"),
        ] {
            headers.remove(hop);
        }
        match sender.send_request(req).await {
            Ok(response) => response.map(BodyExt::boxed),
            Err(_) => answer(StatusCode::BAD_GATEWAY, "the upstream request failed"),
        }
    }
}

fn destination(host: &str, port: u16) -> String {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    format!("{}:{port}", host.to_ascii_lowercase())
}

/// A release's way out: through the proxy, under `class`'s rules.
#[derive(Clone, Debug)]
pub struct Via {
    pub egress: Arc<Egress>,
    pub class: Class,
}

impl Via {
    pub fn proxy_url(&self) -> String {
        self.egress.proxy_url(self.class)
    }

    /// Why a request to `url` (its host and port) was refused just now, if it was; with
    /// `anywhere`, a recent refusal of another destination too (a redirect's).
    pub fn refused(&self, url: &str, anywhere: bool) -> Option<String> {
        let parsed = reqwest::Url::parse(url).ok();
        let here = parsed.as_ref().and_then(|u| {
            let port = u.port_or_known_default()?;
            self.egress.refusal_for(u.host_str()?, port)
        });
        here.or_else(|| anywhere.then(|| self.egress.last_refusal()).flatten())
    }
}

enum Failure {
    Refused(String),
    Io(std::io::Error),
}

impl Failure {
    fn answer(self) -> Response<BoxBody<Bytes, hyper::Error>> {
        match self {
            Self::Refused(why) => {
                let mut response = answer(StatusCode::FORBIDDEN, &why);
                if let Ok(value) = hyper::header::HeaderValue::from_str(&why) {
                    response.headers_mut().insert(REFUSED_HEADER, value);
                }
                response
            }
            Self::Io(e) => answer(StatusCode::BAD_GATEWAY, &e.to_string()),
        }
    }
}

fn answer(status: StatusCode, text: &str) -> Response<BoxBody<Bytes, hyper::Error>> {
    let body = if text.is_empty() {
        Empty::new().map_err(|never| match never {}).boxed()
    } else {
        Full::new(Bytes::from(text.to_owned()))
            .map_err(|never| match never {})
            .boxed()
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
}

fn random_token() -> std::io::Result<String> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| std::io::Error::other("the system's random source failed"))?;
    Ok(hex::encode(bytes))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn tenants_reach_neither_the_engines_machine_nor_the_cluster() {
        let rules = Rules {
            denied: parse_networks("203.0.113.0/24").unwrap(),
            allowed: parse_networks("10.9.0.0/16").unwrap(),
            cluster: parse_networks("10.96.0.0/12, 10.244.0.0/16").unwrap(),
        };
        for refused in [
            "127.0.0.1",
            "::1",
            "::ffff:127.0.0.1",
            "169.254.169.254",
            "fe80::1",
            "0.0.0.0",
            "10.96.0.10",
            "10.244.3.7",
            "224.0.0.1",
        ] {
            let e = rules.check(Class::Tenant, ip(refused)).unwrap_err();
            assert!(e.to_string().contains("allowedNetworks"), "{e}");
            assert!(rules.check(Class::Engine, ip(refused)).is_ok(), "{refused}");
        }
        for allowed in ["93.184.216.34", "10.9.1.1", "2606:4700::1111"] {
            assert!(rules.check(Class::Tenant, ip(allowed)).is_ok(), "{allowed}");
        }
        // Denied for every release, allowed or not.
        for class in [Class::Tenant, Class::Engine] {
            let e = rules.check(class, ip("203.0.113.9")).unwrap_err();
            assert!(e.to_string().contains("deniedNetworks"), "{e}");
        }
        let loopback = Rules {
            allowed: parse_networks("127.0.0.0/8").unwrap(),
            ..Rules::default()
        };
        assert!(loopback.check(Class::Tenant, ip("127.0.0.1")).is_ok());
        assert!(parse_networks("10.0.0.0/33").is_err());
        assert_eq!(
            parse_networks(" 192.168.1.5 ,fd00::/8").unwrap(),
            vec![
                "192.168.1.5/32".parse::<IpNet>().unwrap(),
                "fd00::/8".parse().unwrap()
            ]
        );
    }
}

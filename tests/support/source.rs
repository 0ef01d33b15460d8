//! A Helm chart repository served over plain HTTP on 127.0.0.1 for the source tests, and
//! builders for chart archives and index files.
//!
//! The server is deliberately small (one request per connection) but real: the client
//! under test talks HTTP/1.1 to it over TCP. It records every request so tests can assert
//! what was (not) downloaded, and it answers conditional requests with 304 like a real
//! static file server. It also serves HTTPS, with a certificate from a test CA.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A test-only CA (valid until 2126) and the certificate it signed for 127.0.0.1 and
/// localhost, with its key. Generated once with openssl; they protect nothing.
pub const TEST_CA_PEM: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBojCCAUegAwIBAgIUR4eQzLkQp5wm950AaUu+5nT+0GgwCgYIKoZIzj0EAwIw\n\
HTEbMBkGA1UEAwwSd2hlZWxob3VzZSB0ZXN0IENBMCAXDTI2MTEyMTExMjQzMFoY\n\
DzIxMjYxMDI4MTEyNDMwWjAdMRswGQYDVQQDDBJ3aGVlbGhvdXNlIHRlc3QgQ0Ew\n\
WTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQ78zJwRoz5jZZ11dyOaG+43G76wD72\n\
ARi8VWJXDroK8IQwXgm6X5Xlnm+I6+YAkIYFcbwosOH6Ouwy2Aitr31Xo2MwYTAd\n\
BgNVHQ4EFgQU09c2dgnXLS4f3y2z7G2Mcq+4fc4wHwYDVR0jBBgwFoAU09c2dgnX\n\
LS4f3y2z7G2Mcq+4fc4wDwYDVR0TAQH/BAUwAwEB/zAOBgNVHQ8BAf8EBAMCAQYw\n\
CgYIKoZIzj0EAwIDSQAwRgIhAJ0FUvSFPjPzGmjKLVKoYWQ5RiVd/dPAmys/eO4l\n\
Sv49AiEAtt5Aae1HBaRrT2KQUGOEb9TUjr19qmQp4L1S1CL8B14=\n\
-----END CERTIFICATE-----\n\
";
const SERVER_CERT_PEM: &str = "-----BEGIN CERTIFICATE-----\n\
MIIBxzCCAW6gAwIBAgIUNobM012VtB+9i+7VSUT4ftuFhC8wCgYIKoZIzj0EAwIw\n\
HTEbMBkGA1UEAwwSd2hlZWxob3VzZSB0ZXN0IENBMCAXDTI2MTEyMTExMjQzMFoY\n\
DzIxMjYxMDI4MTEyNDMwWjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjO\n\
PQIBBggqhkjOPQMBBwNCAATvmpBvYMeQbStgsIpmEzCz3rZlwkFPq4Il6TsEjYmm\n\
eQ1UhCzGv7WRvuB/wWtQOcSHOL1Oka4Ccc0x6ON7IQF5o4GSMIGPMAwGA1UdEwEB\n\
/wQCMAAwDgYDVR0PAQH/BAQDAgeAMBMGA1UdJQQMMAoGCCsGAQUFBwMBMBoGA1Ud\n\
EQQTMBGHBH8AAAGCCWxvY2FsaG9zdDAdBgNVHQ4EFgQUy0gdwY0Qn4RkFKzrtiw6\n\
zMHB42owHwYDVR0jBBgwFoAU09c2dgnXLS4f3y2z7G2Mcq+4fc4wCgYIKoZIzj0E\n\
AwIDRwAwRAIgFbkaYocciQ+35R8GsbDKdckMSkF7Pc7nccaAPQAJBr0CIDqEf2Oj\n\
FO5RGX0Wre+RZZvCCpXLxKAbE3mRG308PU7e\n\
-----END CERTIFICATE-----\n\
";
const SERVER_KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----\n\
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg1ad71OZysYjtvL9H\n\
4wyEI1qVa+oJfqPdqDlhbt+OsEGhRANCAATvmpBvYMeQbStgsIpmEzCz3rZlwkFP\n\
q4Il6TsEjYmmeQ1UhCzGv7WRvuB/wWtQOcSHOL1Oka4Ccc0x6ON7IQF5\n\
-----END PRIVATE KEY-----\n\
";

/// One request the server answered.
#[derive(Debug, Clone)]
pub struct Served {
    pub path: String,
    pub status: u16,
    pub authorization: Option<String>,
}

#[derive(Default)]
struct State {
    files: HashMap<String, Vec<u8>>,
    redirects: HashMap<String, String>,
    basic_auth: Option<(String, String)>,
    log: Vec<Served>,
}

pub struct RepoServer {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
    https: bool,
}

impl Drop for RepoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RepoServer {
    /// Plain HTTP.
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// HTTPS with a certificate for 127.0.0.1 signed by [`TEST_CA_PEM`].
    pub async fn start_tls() -> Self {
        let certs = CertificateDer::pem_slice_iter(SERVER_CERT_PEM.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(SERVER_KEY_PEM.as_bytes()).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        Self::start_with(Some(Arc::new(config))).await
    }

    async fn start_with(tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let https = tls.is_some();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                match &tls {
                    Some(config) => {
                        let config = config.clone();
                        let Ok(stream) = stream.into_std() else {
                            continue;
                        };
                        tokio::task::spawn_blocking(move || serve_tls(stream, config, state));
                    }
                    None => {
                        tokio::spawn(async move {
                            // A stuck client must not keep a task forever.
                            let _ =
                                tokio::time::timeout(Duration::from_secs(10), serve(stream, state))
                                    .await;
                        });
                    }
                }
            }
        });
        Self {
            addr,
            state,
            task,
            https,
        }
    }

    /// `http(s)://127.0.0.1:<port>` followed by `path` (which starts with '/').
    pub fn url(&self, path: &str) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.addr)
    }

    pub fn put(&self, path: &str, body: impl Into<Vec<u8>>) {
        self.state
            .lock()
            .unwrap()
            .files
            .insert(path.to_owned(), body.into());
    }

    pub fn redirect(&self, from: &str, to: &str) {
        self.state
            .lock()
            .unwrap()
            .redirects
            .insert(from.to_owned(), to.to_owned());
    }

    pub fn require_basic_auth(&self, username: &str, password: &str) {
        self.state.lock().unwrap().basic_auth = Some((username.to_owned(), password.to_owned()));
    }

    /// Statuses of the requests for `path`, in order.
    pub fn statuses(&self, path: &str) -> Vec<u16> {
        self.state
            .lock()
            .unwrap()
            .log
            .iter()
            .filter(|s| s.path == path)
            .map(|s| s.status)
            .collect()
    }

    pub fn log(&self) -> Vec<Served> {
        self.state.lock().unwrap().log.clone()
    }
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<State>>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 64 * 1024 {
            return;
        }
    }
    let response = respond(&state, &head);
    let _ = stream.write_all(&response).await;
    let _ = stream.shutdown().await;
}

/// The same over TLS, with rustls on a blocking socket (run on the blocking pool; the
/// socket timeouts bound it).
fn serve_tls(
    stream: std::net::TcpStream,
    config: Arc<rustls::ServerConfig>,
    state: Arc<Mutex<State>>,
) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
    let Ok(connection) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(connection, stream);
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        // A client that rejects the certificate ends here, during the handshake.
        match std::io::Read::read(&mut tls, &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > 64 * 1024 {
            return;
        }
    }
    let response = respond(&state, &head);
    let _ = tls.write_all(&response);
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

/// Answers one request (its head, up to the blank line) and logs it.
fn respond(state: &Mutex<State>, head: &[u8]) -> Vec<u8> {
    let head = String::from_utf8_lossy(head).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let target = request_line.split(' ').nth(1).unwrap_or("/").to_owned();
    let path = target.split('?').next().unwrap_or("/").to_owned();
    let mut headers = HashMap::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let authorization = headers.get("authorization").cloned();

    let mut state = state.lock().unwrap();
    let authorized = match &state.basic_auth {
        None => true,
        Some((u, p)) => {
            let expected = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            );
            authorization.as_deref() == Some(expected.as_str())
        }
    };
    let (status, extra, body) = if !authorized {
        (
            401,
            vec![(
                "WWW-Authenticate".to_owned(),
                "Basic realm=\"charts\"".to_owned(),
            )],
            Vec::new(),
        )
    } else if let Some(location) = state.redirects.get(&path) {
        (
            302,
            vec![("Location".to_owned(), location.clone())],
            Vec::new(),
        )
    } else if let Some(body) = state.files.get(&path) {
        let etag = format!("\"{}\"", hex::encode(Sha256::digest(body)));
        if headers.get("if-none-match") == Some(&etag) {
            (304, vec![("ETag".to_owned(), etag)], Vec::new())
        } else {
            (200, vec![("ETag".to_owned(), etag)], body.clone())
        }
    } else {
        (404, Vec::new(), b"not found".to_vec())
    };
    state.log.push(Served {
        path,
        status,
        authorization,
    });
    let reason = match status {
        200 => "OK",
        302 => "Found",
        304 => "Not Modified",
        401 => "Unauthorized",
        _ => "Not Found",
    };
    let mut response = format!("HTTP/1.1 {status} {reason}\r\nConnection: close\r\n");
    for (k, v) in extra {
        response.push_str(&format!("{k}: {v}\r\n"));
    }
    if status != 304 {
        response.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    response.push_str("\r\n");
    let mut bytes = response.into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

/// A packaged chart `<name>/{Chart.yaml,values.yaml,templates/configmap.yaml}`.
pub fn chart_tgz(name: &str, version: &str, app_version: &str) -> Vec<u8> {
    let chart_yaml = format!(
        "apiVersion: v2\nname: {name}\nversion: {version}\nappVersion: \"{app_version}\"\n"
    );
    let files: [(&str, &[u8]); 3] = [
        ("Chart.yaml", chart_yaml.as_bytes()),
        ("values.yaml", b"greeting: hello\n"),
        (
            "templates/configmap.yaml",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting | quote }}\n",
        ),
    ];
    let encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(encoder);
    for (file, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        tar.append_data(&mut header, format!("{name}/{file}"), data)
            .unwrap();
    }
    let mut encoder = tar.into_inner().unwrap();
    encoder.flush().unwrap();
    encoder.finish().unwrap()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// One `index.yaml` entry.
pub struct Entry<'a> {
    pub name: &'a str,
    pub version: &'a str,
    pub app_version: &'a str,
    pub url: String,
    pub digest: Option<String>,
}

/// An index.yaml in the shape `helm repo index` writes.
pub fn index_yaml(entries: &[Entry<'_>]) -> String {
    let mut out = String::from("apiVersion: v1\nentries:\n");
    let mut names: Vec<&str> = entries.iter().map(|e| e.name).collect();
    names.dedup();
    for name in names {
        out.push_str(&format!("  {name}:\n"));
        for e in entries.iter().filter(|e| e.name == name) {
            out.push_str(&format!(
                "  - apiVersion: v2\n    appVersion: \"{}\"\n    created: \"2024-05-01T10:00:00Z\"\n    name: {}\n    urls:\n    - {}\n    version: {}\n",
                e.app_version, e.name, e.url, e.version
            ));
            if let Some(d) = &e.digest {
                out.push_str(&format!("    digest: {d}\n"));
            }
        }
    }
    out.push_str("generated: \"2024-05-01T10:00:00Z\"\n");
    out
}

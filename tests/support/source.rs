//! A Helm chart repository served over plain HTTP on 127.0.0.1 for the source tests, and
//! builders for chart archives and index files.
//!
//! The server is deliberately small (one request per connection) but real: the client
//! under test talks HTTP/1.1 to it over TCP. It records every request so tests can assert
//! what was (not) downloaded, and it answers conditional requests with 304 like a real
//! static file server.

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
}

impl Drop for RepoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RepoServer {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    // A stuck client must not keep a task forever.
                    let _ =
                        tokio::time::timeout(Duration::from_secs(10), serve(stream, state)).await;
                });
            }
        });
        Self { addr, state, task }
    }

    /// `http://127.0.0.1:<port>` followed by `path` (which starts with '/').
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
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
    let head = String::from_utf8_lossy(&head).into_owned();
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

    let (status, extra, body) = {
        let state = state.lock().unwrap();
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
        if !authorized {
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
        }
    };
    state.lock().unwrap().log.push(Served {
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
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.write_all(&body).await;
    let _ = stream.shutdown().await;
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

//! A webhook receiver on 127.0.0.1: records every request it gets (path, headers, body)
//! and answers with the status codes a test chose for each path, then 200.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::PATIENCE;

/// One request as it arrived, and what it was answered.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    pub body: String,
    pub answered: u16,
}

impl Received {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| {
            panic!(
                "{} got a body that is not JSON ({e}): {}",
                self.path, self.body
            )
        })
    }
}

/// Stops serving when dropped.
pub struct Receiver {
    pub addr: SocketAddr,
    seen: watch::Receiver<Vec<Received>>,
    _stop: DropGuard,
}

type Answers = Arc<Mutex<HashMap<String, VecDeque<u16>>>>;

impl Receiver {
    /// A receiver answering 200 to everything.
    pub async fn start() -> Self {
        Self::answering(&[]).await
    }

    /// A receiver answering requests to each path with the codes given for it, in order,
    /// and 200 once they are used up. An error answer's body names the path, as some
    /// receivers quote the request.
    pub async fn answering(answers: &[(&str, &[u16])]) -> Self {
        let answers: Answers = Arc::new(Mutex::new(
            answers
                .iter()
                .map(|(path, codes)| ((*path).to_owned(), codes.iter().copied().collect()))
                .collect(),
        ));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, seen) = watch::channel(Vec::new());
        let tx = Arc::new(tx);
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = tokio::select! {
                    () = stopped.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok(conn) => conn,
                        Err(_) => continue,
                    },
                };
                let (tx, answers) = (tx.clone(), answers.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let (tx, answers) = (tx.clone(), answers.clone());
                        async move { Ok::<_, Infallible>(record(req, &tx, &answers).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            addr,
            seen,
            _stop: stop.drop_guard(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Everything received so far, oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.seen.borrow().clone()
    }

    /// Waits until what was received satisfies `pred`; fails saying `what` it waited for
    /// and what it got.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let mut seen = self.seen.clone();
        match tokio::time::timeout(PATIENCE, seen.wait_for(|r| pred(r))).await {
            Ok(Ok(got)) => got.clone(),
            _ => panic!(
                "gave up waiting for {what}; received:\n{:#?}",
                self.received()
            ),
        }
    }
}

async fn record(
    req: Request<Incoming>,
    tx: &watch::Sender<Vec<Received>>,
    answers: &Answers,
) -> Response<Full<Bytes>> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let code = answers
        .lock()
        .unwrap()
        .get_mut(&path)
        .and_then(VecDeque::pop_front)
        .unwrap_or(200);
    let headers = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                v.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    tx.send_modify(|r| {
        r.push(Received {
            method: parts.method.to_string(),
            path: path.clone(),
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
            answered: code,
        });
    });
    let text = if code < 300 {
        "ok".to_owned()
    } else {
        format!("cannot take a message for {path}")
    };
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = StatusCode::from_u16(code).unwrap();
    response
}

//! The receivers' HTTP listener (`--receiver-addr`): POST `/hook/<path>` only, bodies of
//! at most [`MAX_BODY`], at most [`RATE`] calls a second per receiver (a burst of
//! [`BURST`]). Every refusal is logged with the receiver, the reason and the peer, never
//! the body; nothing refused wakes anything.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use kube::Client;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::verify::{Headers, Heard, Kind, Refused, hear};
use super::{Receiver, Receivers};
use crate::engine::Pusher;

/// The largest body read (GitHub's push payloads are a few kB; 25 MB at their largest).
pub const MAX_BODY: usize = 1024 * 1024;
/// Calls a second each receiver takes, on average, and in a burst.
pub const RATE: f64 = 10.0;
pub const BURST: f64 = 30.0;
/// How often the setting is read again.
const REFRESH: Duration = Duration::from_secs(5);

/// Binds `addr` and serves the receivers declared in `namespace` until `stop`, handing
/// what they hear to `pusher`. Returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    client: Client,
    namespace: String,
    pusher: Pusher,
    metrics: crate::telemetry::Metrics,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let (tx, rx) = watch::channel(Arc::new(Receivers::new()));
    tokio::spawn(keep_loaded(client, namespace, tx, stop.clone()));
    let state = Arc::new(State {
        receivers: rx,
        pusher,
        metrics,
        buckets: Mutex::new(HashMap::new()),
    });
    tokio::spawn(async move {
        loop {
            let (stream, peer) = tokio::select! {
                () = stop.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(conn) => conn,
                    Err(e) => {
                        tracing::warn!(error = %e, "receivers: cannot accept a connection");
                        continue;
                    }
                },
            };
            let state = state.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(state.respond(req, peer).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(10))
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

/// Reads the setting now and every [`REFRESH`]; a failed read keeps the last one.
async fn keep_loaded(
    client: Client,
    namespace: String,
    tx: watch::Sender<Arc<Receivers>>,
    stop: CancellationToken,
) {
    let mut every = tokio::time::interval(REFRESH);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut said: Option<String> = None;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        match super::load(&client, &namespace).await {
            Ok(receivers) => {
                let names = {
                    let mut n: Vec<String> = receivers
                        .values()
                        .map(|r| format!("{} ({:?})", r.name, r.kind))
                        .collect();
                    n.sort();
                    n.join(", ")
                };
                if said.as_deref() != Some(&names) {
                    tracing::info!(receivers = %names, "webhook receivers in force");
                    said = Some(names);
                }
                tx.send_replace(Arc::new(receivers));
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the webhook receivers; keeping the last ones")
            }
        }
    }
}

struct State {
    receivers: watch::Receiver<Arc<Receivers>>,
    pusher: Pusher,
    metrics: crate::telemetry::Metrics,
    /// Token buckets by receiver name: (tokens, last refill).
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

impl State {
    async fn respond(&self, req: Request<Incoming>, peer: SocketAddr) -> Response<Full<Bytes>> {
        let path = req.uri().path().to_owned();
        let receiver = self.receivers.borrow().get(&path).cloned();
        let Some(receiver) = receiver else {
            // An unknown path says nothing about which exist.
            tracing::debug!(%peer, "receivers: a call to an unknown path");
            self.metrics.receiver_call("unknown", "not_found");
            return text(StatusCode::NOT_FOUND, "not found\n");
        };
        let refuse = |status: StatusCode, result: &str, why: &str| {
            tracing::warn!(receiver = %receiver.name, %peer, reason = %why, "receivers: a call refused");
            self.metrics.receiver_call(&receiver.name, result);
            text(status, &format!("{why}\n"))
        };
        if req.method() != Method::POST {
            return refuse(StatusCode::METHOD_NOT_ALLOWED, "refused", "POST only");
        }
        if !self.take(&receiver.name) {
            // Not logged per call: a flood would flood the log too.
            self.metrics.receiver_call(&receiver.name, "rate_limited");
            return text(StatusCode::TOO_MANY_REQUESTS, "too many calls\n");
        }
        if req
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
            .is_some_and(|n| n > MAX_BODY)
        {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                "the body is larger than 1 MiB",
            );
        }
        let headers: Headers = req
            .headers()
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return refuse(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "too_large",
                    "the body is larger than 1 MiB or was cut off",
                );
            }
        };
        self.heard(&receiver, &headers, &body, &refuse)
    }

    fn heard(
        &self,
        receiver: &Receiver,
        headers: &Headers,
        body: &[u8],
        refuse: &Refuse<'_>,
    ) -> Response<Full<Bytes>> {
        let heard = hear(
            receiver.kind,
            &receiver.token,
            &receiver.sources,
            headers,
            body,
        );
        if heard.is_ok() {
            self.refund(&receiver.name);
        }
        match heard {
            Err(e @ (Refused::Unsigned(_) | Refused::BadSignature(_))) => {
                refuse(StatusCode::UNAUTHORIZED, "unauthorized", &e.to_string())
            }
            Err(e @ Refused::Malformed(_)) => {
                refuse(StatusCode::BAD_REQUEST, "malformed", &e.to_string())
            }
            Err(e @ Refused::UnknownSource(_)) => {
                refuse(StatusCode::NOT_FOUND, "unknown_source", &e.to_string())
            }
            Ok(Heard::Ignored(why)) => {
                tracing::info!(receiver = %receiver.name, "receivers: {why}, nothing to wake");
                self.metrics.receiver_call(&receiver.name, "ignored");
                text(StatusCode::OK, &format!("ignored: {why}\n"))
            }
            Ok(Heard::Pushes(pushes)) => {
                let mut woken = 0;
                let mut sources = Vec::new();
                for pushed in pushes {
                    sources.push(pushed.describe());
                    woken += self.pusher.push(pushed);
                }
                let sources = sources.join(", ");
                if woken == 0 && receiver.kind == Kind::Registry {
                    // A registry notifies every push, deployed or not, and retries a
                    // refused notification, holding back the ones behind it: nothing to
                    // wake is an answer, not a refusal.
                    tracing::info!(receiver = %receiver.name, %sources, "receivers: no release of this engine comes from there");
                    self.metrics.receiver_call(&receiver.name, "ignored");
                    return text(StatusCode::OK, "no release comes from there\n");
                }
                if woken == 0 {
                    return refuse(
                        StatusCode::NOT_FOUND,
                        "unknown_source",
                        &format!("no release of this engine comes from {sources}"),
                    );
                }
                tracing::info!(receiver = %receiver.name, %sources, woken, "receivers: a push woke its releases");
                self.metrics.receiver_call(&receiver.name, "woke");
                text(StatusCode::OK, &format!("woke {woken} release(s)\n"))
            }
        }
    }

    /// Gives back the token of a call that proved its sender: the bucket bounds what
    /// unproven calls cost, while a registry that notifies every pull and push is never
    /// held back (a notification it must retry holds back the ones behind it).
    fn refund(&self, name: &str) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((tokens, _)) = buckets.get_mut(name) {
            *tokens = (*tokens + 1.0).min(BURST);
        }
    }

    /// Takes a token from the receiver's bucket; false when it is empty.
    fn take(&self, name: &str) -> bool {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let (tokens, at) = buckets.entry(name.to_owned()).or_insert((BURST, now));
        *tokens = (*tokens + now.duration_since(*at).as_secs_f64() * RATE).min(BURST);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Answers a refused call, logging and counting it.
type Refuse<'a> = dyn Fn(StatusCode, &str, &str) -> Response<Full<Bytes>> + 'a;

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response
}

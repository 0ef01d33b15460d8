//! The receivers' HTTP listener (`--receiver-addr`): POST `/hook/<path>` only, bodies of
//! at most [`MAX_BODY`], at most [`RATE`] unproven calls a second per receiver (a burst
//! of [`BURST`]). Every refusal is logged with the receiver, the reason and the peer, never
//! the body; nothing refused wakes anything.
//!
//! A call that proves its sender is answered `202 Accepted` and nothing else: whether any
//! release comes from the repository it names, and how many, is the engine's log's to
//! say, not the caller's (a token holder could otherwise map every tenant's sources). A
//! call seen before (the same body or the sender's delivery id within [`REPLAY_WINDOW`])
//! is refused; a call wakes each release at most once, only among the receiver's
//! `resources`; and past [`RATE`] proven calls a second a receiver's wakes are routine
//! work, never urgent.

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

use super::verify::{Headers, Heard, Refused, hear};
use super::{Receiver, Receivers};
use crate::helm::source::pushed::Wakes;

/// The largest body read (GitHub's push payloads are a few kB; 25 MB at their largest).
pub const MAX_BODY: usize = 1024 * 1024;
/// Calls a second each receiver takes, on average, and in a burst.
pub const RATE: f64 = 10.0;
pub const BURST: f64 = 30.0;
/// How often the setting is read again.
const REFRESH: Duration = Duration::from_secs(5);
/// How long a call is remembered, so the same one again is refused as a replay.
pub const REPLAY_WINDOW: Duration = Duration::from_secs(600);
/// Calls remembered per receiver (a full memory forgets the oldest first).
const REMEMBERED: usize = 4096;
/// The headers by which senders number their deliveries.
const DELIVERY_HEADERS: [&str; 4] = [
    "x-github-delivery",
    "x-gitea-delivery",
    "x-gitlab-event-uuid",
    "idempotency-key",
];

/// Binds `addr` and serves the receivers declared in `namespace` until `stop`, handing
/// what they hear to `pusher`. Returns the bound address.
pub async fn serve(
    addr: SocketAddr,
    client: Client,
    namespace: String,
    pusher: Arc<dyn Wakes>,
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
        proven: Mutex::new(HashMap::new()),
        seen: Mutex::new(HashMap::new()),
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
    pusher: Arc<dyn Wakes>,
    metrics: crate::telemetry::Metrics,
    /// Token buckets by receiver name: (tokens, last refill).
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
    /// The same for proven calls: past it, their wakes are routine.
    proven: Mutex<HashMap<String, (f64, Instant)>>,
    /// Calls seen per receiver, by digest, for [`REPLAY_WINDOW`].
    seen: Mutex<HashMap<String, Seen>>,
}

/// The digests of a receiver's recent calls, oldest first, with when each came.
type Seen = std::collections::VecDeque<([u8; 32], Instant)>;

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
        if !take(&self.buckets, &receiver.name) {
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
        let pushes = match heard {
            Err(e @ (Refused::Unsigned(_) | Refused::BadSignature(_))) => {
                return refuse(StatusCode::UNAUTHORIZED, "unauthorized", &e.to_string());
            }
            Err(e @ Refused::Malformed(_)) => {
                return refuse(StatusCode::BAD_REQUEST, "malformed", &e.to_string());
            }
            // Proven from here on: the answer says nothing of what it names.
            Err(e @ Refused::UnknownSource(_)) => {
                tracing::info!(receiver = %receiver.name, reason = %e, "receivers: a call woke nothing");
                self.metrics.receiver_call(&receiver.name, "unknown_source");
                return accepted();
            }
            Ok(Heard::Ignored(why)) => {
                tracing::info!(receiver = %receiver.name, "receivers: {why}, nothing to wake");
                self.metrics.receiver_call(&receiver.name, "ignored");
                return accepted();
            }
            Ok(Heard::Pushes(pushes)) => pushes,
        };
        if !self.first_time(&receiver.name, headers, body) {
            return refuse(
                StatusCode::CONFLICT,
                "replayed",
                "this call was delivered before (a replay)",
            );
        }
        let urgent = take(&self.proven, &receiver.name);
        let wake = crate::helm::source::pushed::Wake {
            pushes,
            resources: Some(receiver.resources.clone()),
            urgent,
        };
        let sources = wake.describe();
        let woken = self.pusher.wake(wake);
        if woken == 0 {
            tracing::info!(receiver = %receiver.name, %sources, "receivers: no release this receiver may wake comes from there");
            self.metrics.receiver_call(&receiver.name, "unknown_source");
        } else {
            tracing::info!(receiver = %receiver.name, %sources, woken, urgent, "receivers: a push woke its releases");
            self.metrics.receiver_call(&receiver.name, "woke");
        }
        accepted()
    }

    /// Gives back the token of a call that proved its sender: the bucket bounds what
    /// unproven calls cost, while a registry that notifies every pull and push is never
    /// held back (a notification it must retry holds back the ones behind it). Proven
    /// calls count against their own bucket ([`State::proven`]).
    fn refund(&self, name: &str) {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((tokens, _)) = buckets.get_mut(name) {
            *tokens = (*tokens + 1.0).min(BURST);
        }
    }

    /// Whether this call (its body, and the sender's delivery id when it gives one) is new
    /// to `receiver` within [`REPLAY_WINDOW`]; remembers it.
    fn first_time(&self, receiver: &str, headers: &Headers, body: &[u8]) -> bool {
        use sha2::Digest;
        let mut keys = vec![<[u8; 32]>::from(sha2::Sha256::digest(body))];
        for name in DELIVERY_HEADERS {
            if let Some(id) = headers.get(name).filter(|v| !v.is_empty()) {
                let mut h = sha2::Sha256::new();
                h.update(name.as_bytes());
                h.update(b"\0");
                h.update(id.as_bytes());
                keys.push(h.finalize().into());
            }
        }
        let now = Instant::now();
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let remembered = seen.entry(receiver.to_owned()).or_default();
        while remembered
            .front()
            .is_some_and(|(_, at)| now.duration_since(*at) > REPLAY_WINDOW)
        {
            remembered.pop_front();
        }
        if remembered.iter().any(|(k, _)| keys.contains(k)) {
            return false;
        }
        for key in keys {
            if remembered.len() >= REMEMBERED {
                remembered.pop_front();
            }
            remembered.push_back((key, now));
        }
        true
    }
}

/// Takes a token from `name`'s bucket in `buckets`; false when it is empty.
fn take(buckets: &Mutex<HashMap<String, (f64, Instant)>>, name: &str) -> bool {
    let now = Instant::now();
    let mut buckets = buckets.lock().unwrap_or_else(|e| e.into_inner());
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

/// The one answer a proven call gets.
fn accepted() -> Response<Full<Bytes>> {
    text(StatusCode::ACCEPTED, "accepted\n")
}

/// Answers a refused call, logging and counting it.
type Refuse<'a> = dyn Fn(StatusCode, &str, &str) -> Response<Full<Bytes>> + 'a;

fn text(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_owned())));
    *response.status_mut() = status;
    response
}

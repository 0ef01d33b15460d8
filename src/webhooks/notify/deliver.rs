//! Delivery: a router task takes messages from the engine's queue and hands each to the
//! queue of every provider a route sends it to; one task per provider posts them in
//! order, each retried with backoff, so a slow or failing webhook delays only its own
//! messages and never a reconcile.
//!
//! HTTP runs on the reqwest client chart repositories use (rustls on ring), trusting the
//! system roots; TLS is always verified. Addresses are credentials (a Slack webhook URL
//! is one): every error logged is scrubbed of its address (see `address`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderValue};
use reqwest::{Method, StatusCode, Url};
use tokio::sync::{mpsc, watch};

use super::settings::{Endpoint, Settings};
use super::{Error, Notification, ProviderType, format};
use crate::helm::source::http;

/// Messages waiting for one provider; past this, new ones for it are dropped.
const PROVIDER_QUEUE: usize = 256;
/// The most of an answer's body read (and quoted, scrubbed, in an error).
const ANSWER_LIMIT: usize = 4096;
const QUOTED_ANSWER: usize = 200;

/// The HTTP(S) client every provider task shares (pooled connections).
#[derive(Clone)]
pub(super) struct Http {
    client: reqwest::Client,
}

/// How one attempt ended, when it did not deliver.
#[derive(Debug, PartialEq)]
enum Failure {
    /// Worth another attempt: the network, a timeout, 429, a 5xx.
    Retry(String),
    /// The receiver refused the message itself (4xx): another attempt would be refused
    /// too.
    Refused(String),
}

impl Http {
    pub(super) fn new() -> Result<Self, Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| Error::Tls(e.to_string()))?
            .with_root_certificates(http::system_roots())
            .with_no_client_auth();
        let client =
            http::client(tls, Duration::from_secs(10)).map_err(|e| Error::Tls(http::chain(&e)))?;
        Ok(Self { client })
    }

    /// POSTs `body` as JSON to `endpoint` within `timeout`.
    async fn post(
        &self,
        endpoint: &Endpoint,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Sent, Failure> {
        let address = &endpoint.address;
        let url = Url::parse(&address.uri().to_string())
            .map(http::without_userinfo)
            .map_err(|e| Failure::Refused(address.scrub(&e.to_string())))?;
        let mut request = reqwest::Request::new(Method::POST, url);
        request
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        *request.body_mut() = Some(body.into());
        let exchange = async {
            let mut response = self
                .client
                .execute(request)
                .await
                .map_err(|e| Failure::Retry(address.scrub(&http::chain(&e))))?;
            // Read (a bounded part of) the answer so the connection can be reused, and
            // to quote a refusal.
            let mut answer = Vec::new();
            while answer.len() < ANSWER_LIMIT
                && let Ok(Some(chunk)) = response.chunk().await
            {
                answer.extend_from_slice(&chunk);
            }
            answer.truncate(ANSWER_LIMIT);
            Ok::<_, Failure>((response.status(), answer))
        };
        let (status, answer) = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| {
                Failure::Retry(format!(
                    "no answer within {}",
                    crate::api::Duration::from(timeout)
                ))
            })??;
        judge(endpoint.type_, status, &address.scrub(&quote(&answer)))
    }
}

/// What a delivered message came to.
#[derive(Debug, PartialEq)]
enum Sent {
    Delivered,
    /// Flux's receiver answers 429 to an event it has just seen (its de-duplication):
    /// done, as Flux's own recorder treats it.
    Duplicate,
}

/// Whether an answer delivered the message, is worth another attempt, or refused it.
fn judge(type_: ProviderType, status: StatusCode, answer: &str) -> Result<Sent, Failure> {
    let said = || {
        let reason = status.canonical_reason().unwrap_or("");
        if answer.is_empty() {
            format!("answered {} {reason}", status.as_u16())
        } else {
            format!("answered {} {reason}: {answer}", status.as_u16())
        }
    };
    if status.is_success() {
        Ok(Sent::Delivered)
    } else if status == StatusCode::TOO_MANY_REQUESTS && type_ == ProviderType::Flux {
        Ok(Sent::Duplicate)
    } else if status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
        || (status.is_server_error() && status != StatusCode::NOT_IMPLEMENTED)
    {
        Err(Failure::Retry(said()))
    } else {
        Err(Failure::Refused(said()))
    }
}

/// The start of an answer's body, on one line.
fn quote(answer: &[u8]) -> String {
    let text = String::from_utf8_lossy(answer);
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(QUOTED_ANSWER) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line,
    }
}

/// One provider's queue, and whether its overflow was logged.
struct ProviderQueue {
    tx: mpsc::Sender<Notification>,
    overflowing: bool,
}

/// The router: sends each message to the queue of every provider a route names for it,
/// under the setting in force when it arrives. Ends when the engine's queue closes.
pub(super) async fn route(
    mut rx: mpsc::Receiver<Notification>,
    settings: watch::Receiver<Arc<Settings>>,
    http: Http,
    metrics: crate::telemetry::Metrics,
) {
    let mut queues: HashMap<String, ProviderQueue> = HashMap::new();
    while let Some(n) = rx.recv().await {
        let current = settings.borrow().clone();
        let release = format!("{}/{}", n.namespace, n.name);
        let Some(config) = &current.config else {
            tracing::debug!(%release, event = n.severity.as_str(), "notifications are off: not sent");
            continue;
        };
        // A provider no longer defined: its task finishes with what it holds.
        queues.retain(|name, _| config.providers.iter().any(|p| &p.name == name));
        let providers =
            config.providers_for(&n.namespace, &n.name, n.chart_name.as_deref(), n.severity);
        if providers.is_empty() {
            tracing::debug!(%release, event = n.severity.as_str(), "no route sends it");
        }
        for provider in providers {
            let queue = queues.entry(provider.name.clone()).or_insert_with(|| {
                let (tx, rx) = mpsc::channel(PROVIDER_QUEUE);
                tokio::spawn(deliver_all(
                    provider.name.clone(),
                    rx,
                    settings.clone(),
                    http.clone(),
                    metrics.clone(),
                ));
                ProviderQueue {
                    tx,
                    overflowing: false,
                }
            });
            match queue.tx.try_send(n.clone()) {
                Ok(()) => queue.overflowing = false,
                Err(_) => {
                    metrics.notification_dropped("provider_queue_full");
                    if !std::mem::replace(&mut queue.overflowing, true) {
                        tracing::warn!(
                            provider = %provider.name, %release,
                            "notifications to this provider are dropped: {PROVIDER_QUEUE} are waiting for it (counted in wheelhouse_notifications_dropped_total)"
                        );
                    }
                }
            }
        }
    }
}

/// One provider's task: its messages in order, each until delivered or given up.
async fn deliver_all(
    provider: String,
    mut rx: mpsc::Receiver<Notification>,
    settings: watch::Receiver<Arc<Settings>>,
    http: Http,
    metrics: crate::telemetry::Metrics,
) {
    while let Some(n) = rx.recv().await {
        deliver(&provider, &n, &settings, &http, &metrics).await;
    }
}

/// Attempts one message under the retry policy; reads the provider's address afresh
/// for every attempt, so a fixed Secret is used by the next one.
async fn deliver(
    provider: &str,
    n: &Notification,
    settings: &watch::Receiver<Arc<Settings>>,
    http: &Http,
    metrics: &crate::telemetry::Metrics,
) {
    let release = format!("{}/{}", n.namespace, n.name);
    let event = n.severity.as_str();
    let removed = || {
        tracing::info!(%provider, %release, event, "provider removed from the setting (or notifications turned off): notification not sent");
        metrics.notification_dropped("provider_removed");
    };
    let Some((retry, timeout)) = settings
        .borrow()
        .config
        .as_ref()
        .map(|c| (c.retry, c.timeout.as_std()))
    else {
        return removed();
    };
    let mut last = String::new();
    for attempt in 1..=retry.attempts {
        let endpoint = settings.borrow().endpoints.get(provider).cloned();
        let outcome = match endpoint {
            None => return removed(),
            // Its Secret may be created or fixed before the attempts run out.
            Some(Err(problem)) => Err(Failure::Retry(problem.to_string())),
            Some(Ok(endpoint)) => {
                let body = serde_json::to_vec(&format::body(endpoint.type_, n))
                    .expect("a JSON value serializes");
                http.post(&endpoint, body, timeout)
                    .await
                    .map(|sent| (sent, endpoint.type_))
            }
        };
        match outcome {
            Ok((sent, type_)) => {
                metrics.notification_delivered(type_.as_str());
                tracing::debug!(%provider, %release, event, attempt, duplicate = (sent == Sent::Duplicate), "notification delivered");
                return;
            }
            Err(Failure::Refused(why)) => {
                metrics.notification_dropped("refused");
                tracing::warn!(%provider, %release, event, attempt, "notification refused, not retried: {why}");
                return;
            }
            Err(Failure::Retry(why)) => {
                if attempt < retry.attempts {
                    let delay = retry.delay(attempt);
                    tracing::debug!(%provider, %release, event, attempt, "notification not delivered ({why}); next attempt in {}", crate::api::Duration::from(delay));
                    tokio::time::sleep(delay).await;
                }
                last = why;
            }
        }
    }
    metrics.notification_dropped("undelivered");
    tracing::warn!(%provider, %release, event, attempts = retry.attempts, "notification not delivered, giving up: {last}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_judged_as_flux_s_recorder_judges_them() {
        use ProviderType::{Flux, Slack};
        let cases = [
            (Slack, 200, Some(Sent::Delivered)),
            (Slack, 204, Some(Sent::Delivered)),
            (Flux, 202, Some(Sent::Delivered)),
            (Flux, 429, Some(Sent::Duplicate)),
        ];
        for (type_, code, expected) in cases {
            let got = judge(type_, StatusCode::from_u16(code).unwrap(), "");
            assert_eq!(got.ok(), expected, "{type_:?} {code}");
        }
        for code in [429, 408, 500, 502, 503, 504] {
            let got = judge(Slack, StatusCode::from_u16(code).unwrap(), "busy");
            assert!(matches!(got, Err(Failure::Retry(_))), "{code}: {got:?}");
        }
        for code in [301, 400, 403, 404, 410, 501] {
            let got = judge(Slack, StatusCode::from_u16(code).unwrap(), "no_service");
            assert!(matches!(got, Err(Failure::Refused(_))), "{code}: {got:?}");
        }
        assert_eq!(
            judge(Slack, StatusCode::FORBIDDEN, "invalid_token"),
            Err(Failure::Refused(
                "answered 403 Forbidden: invalid_token".into()
            ))
        );
        assert_eq!(
            judge(Slack, StatusCode::INTERNAL_SERVER_ERROR, ""),
            Err(Failure::Retry("answered 500 Internal Server Error".into()))
        );
    }

    #[test]
    fn a_quoted_answer_is_one_short_line() {
        assert_eq!(quote(b"no_text\n  please  "), "no_text please");
        let long = "x".repeat(500);
        let q = quote(long.as_bytes());
        assert_eq!(q.len(), QUOTED_ANSWER + 3);
        assert!(q.ends_with("..."));
    }
}

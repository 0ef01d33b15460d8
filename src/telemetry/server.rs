//! The controller's HTTP endpoints, each on its own address as controller-runtime does:
//! `--metrics-addr` serves `/metrics`; `--health-addr` serves `/healthz` (the process
//! answers) and `/readyz` (the engine works: its renderer runs and the API server
//! answers; a standby replica is ready too, as in controller-runtime, so a rollout of
//! the controller never waits for the lease).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::Metrics;

/// Whether the engine is ready; `Err` says why not.
pub type Readiness = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// What one listener serves.
#[derive(Clone)]
pub enum Endpoints {
    Metrics(Metrics),
    Health(Readiness),
}

/// Binds `addr` (so a taken port is an error at start, not later) and serves until
/// `stop`. Returns the bound address (port 0 picks a free one).
pub async fn serve(
    addr: SocketAddr,
    endpoints: Endpoints,
    stop: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let (stream, _) = tokio::select! {
                () = stop.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(conn) => conn,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot accept a connection");
                        continue;
                    }
                },
            };
            let endpoints = endpoints.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| {
                    let endpoints = endpoints.clone();
                    async move { Ok::<_, Infallible>(respond(&endpoints, &req)) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(bound)
}

fn respond(endpoints: &Endpoints, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into());
    }
    match (endpoints, req.uri().path()) {
        (Endpoints::Metrics(m), "/metrics") => {
            let mut response = text(StatusCode::OK, m.encode());
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            response
        }
        (Endpoints::Health(_), "/healthz") => text(StatusCode::OK, "ok\n".into()),
        (Endpoints::Health(ready), "/readyz") => match ready() {
            Ok(()) => text(StatusCode::OK, "ok\n".into()),
            Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
        },
        _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

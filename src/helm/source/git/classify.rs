//! What a failed Git exchange means: the error a user can act on, from what gitoxide (and
//! under it reqwest, rustls or the SSH client) says.

use std::sync::atomic::Ordering;

use super::Job;
use crate::helm::source::{Error, http, url};

impl Job {
    pub(super) fn internal(&self, e: &dyn std::fmt::Display) -> Error {
        Error::GitProtocol {
            url: self.shown.clone(),
            cause: e.to_string(),
        }
    }

    /// A fetch that failed after the ref was found: a commit the server does not have
    /// is its own error; the rest as [`Self::classify`].
    pub(super) fn classify_fetch(
        &self,
        e: &(dyn std::error::Error + 'static),
        commit: &str,
    ) -> Error {
        let text = chain(e);
        if text.contains("not our ref")
            || text.contains("not found")
            || text.contains("no such")
            || text.contains("unadvertised object")
        {
            return Error::GitRefNotFound {
                url: self.shown.clone(),
                wanted: format!("commit {commit}"),
                available: Vec::new(),
            };
        }
        self.classify(e)
    }

    /// The error a user can act on, from what gitoxide (and under it reqwest, rustls or
    /// the SSH client) says.
    pub(super) fn classify(&self, e: &(dyn std::error::Error + 'static)) -> Error {
        if let Some(via) = &self.via {
            let tunnel = chain(e).contains("tunnel");
            if let Some(reason) = via.refused(&self.url, tunnel) {
                return Error::OutboundRefused {
                    url: self.shown.clone(),
                    reason,
                };
            }
        }
        let sent_credentials = self.auth.bearer_token.is_some() || self.auth.basic().is_some();
        if self.refused.load(Ordering::Relaxed) {
            return Error::Auth {
                url: self.shown.clone(),
                status: 401,
                sent_credentials,
            };
        }
        let mut errors = Vec::new();
        collect(e, &mut errors);
        for e in &errors {
            if let Some(r) = e.downcast_ref::<reqwest::Error>()
                && let Some(status) = r.status()
            {
                return match status.as_u16() {
                    code @ (401 | 403) => Error::Auth {
                        url: self.shown.clone(),
                        status: code,
                        sent_credentials,
                    },
                    404 => Error::GitRepositoryNotFound {
                        url: self.shown.clone(),
                    },
                    code => Error::HttpStatus {
                        url: self.shown.clone(),
                        status: code,
                        reason: status.canonical_reason().unwrap_or_default().to_owned(),
                    },
                };
            }
            if e.downcast_ref::<gix::protocol::transport::client::AuthenticationRequired>()
                .is_some()
            {
                return Error::Auth {
                    url: self.shown.clone(),
                    status: 401,
                    sent_credentials,
                };
            }
            if e.downcast_ref::<rustls::Error>().is_some() {
                return http::connect_error(&self.url, *e);
            }
            if let Some(r) = e.downcast_ref::<reqwest::Error>()
                && r.is_timeout()
            {
                return Error::Timeout {
                    url: self.shown.clone(),
                    after: self.timeout,
                };
            }
            if let Some(io) = e.downcast_ref::<std::io::Error>()
                && matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::HostUnreachable
                )
            {
                return Error::Unreachable {
                    url: self.shown.clone(),
                    cause: io.to_string(),
                };
            }
            if let Some(r) = e.downcast_ref::<reqwest::Error>()
                && r.is_connect()
            {
                return Error::Unreachable {
                    url: self.shown.clone(),
                    cause: chain(*e),
                };
            }
        }
        Error::GitProtocol {
            url: self.shown.clone(),
            cause: chain(e),
        }
    }
}

/// Every error in `e`'s tree, descending into `io::Error`s' wrapped errors too.
fn collect<'a>(
    e: &'a (dyn std::error::Error + 'static),
    out: &mut Vec<&'a (dyn std::error::Error + 'static)>,
) {
    if out.len() > 64 {
        return;
    }
    out.push(e);
    if let Some(g) = e.downcast_ref::<gix::Error>() {
        for inner in g.iter_errors().skip(1) {
            collect(inner, out);
        }
        return;
    }
    let next = match e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
    {
        Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
        None => e.source(),
    };
    if let Some(next) = next {
        collect(next, out);
    }
}

/// `e` and its causes on one line, each message once.
pub(super) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut errors = Vec::new();
    collect(e, &mut errors);
    let mut parts: Vec<String> = Vec::new();
    for e in errors {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    url::redact(&parts.join(": "))
}

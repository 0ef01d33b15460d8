//! The connection to the repository: HTTPS through gitoxide's reqwest client with our TLS
//! and the Secret's credentials as a header, or SSH through russh; never a prompt.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gix::remote::Direction;

use super::classify::chain;
use super::wanted::Endpoint;
use super::{Job, ssh};
use crate::helm::source::Error;

impl Job {
    pub(super) fn remote<'r>(
        &self,
        repo: &'r gix::Repository,
        spec: &str,
    ) -> Result<gix::Remote<'r>, Error> {
        repo.remote_at(self.url.as_str())
            .and_then(|r| r.with_refspecs([spec], Direction::Fetch))
            .map_err(|e| Error::InvalidUrl {
                url: self.shown.clone(),
                reason: chain(&e),
            })
    }

    pub(super) fn connect<'a, 'r>(
        &self,
        remote: &'a gix::Remote<'r>,
    ) -> Result<
        gix::remote::Connection<
            'a,
            'static,
            'r,
            Box<dyn gix::protocol::transport::client::blocking_io::Transport + Send>,
        >,
        Error,
    > {
        let connection = match &self.endpoint {
            Endpoint::Http { .. } => {
                let connection = remote
                    .connect(Direction::Fetch)
                    .map_err(|e| self.classify(&e))?;
                connection.with_transport_options(Box::new(self.http_options()))
            }
            Endpoint::Ssh(target) => {
                let transport = ssh::connect(
                    &self.runtime,
                    target,
                    &self.auth,
                    self.timeout,
                    &self.shown,
                    self.via.as_ref(),
                )?;
                let boxed: Box<
                    dyn gix::protocol::transport::client::blocking_io::Transport + Send,
                > = Box::new(transport);
                remote.to_connection_with_transport(boxed)
            }
        };
        // Credentials go out as a header with every request; a 401 is reported, never
        // answered from a helper or a prompt.
        let refused = self.refused.clone();
        Ok(connection.with_credentials(move |action| {
            if matches!(action, gix::credentials::helper::Action::Get(_)) {
                refused.store(true, Ordering::Relaxed);
            }
            Ok(None)
        }))
    }

    fn http_options(&self) -> gix::protocol::transport::client::blocking_io::http::Options {
        use gix::protocol::transport::client::blocking_io::http;
        let tls = self.tls.clone();
        let timeout = self.timeout;
        // reqwest only fails to take a proxy URL it cannot parse; ours always parses.
        let proxy = self
            .via
            .as_ref()
            .and_then(|v| reqwest::Proxy::all(v.proxy_url()).ok());
        let authorization = match (&self.auth.bearer_token, self.auth.basic()) {
            (Some(token), _) => {
                let mut value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| Error::AuthSecretInvalid {
                        namespace: String::new(),
                        name: String::new(),
                        reason: "bearerToken is not a valid HTTP header value".into(),
                    });
                if let Ok(v) = &mut value {
                    v.set_sensitive(true);
                }
                Some(value)
            }
            (None, Some((user, password))) => Some(Ok(super::http::basic_auth(user, password))),
            _ => None,
        };
        let backend = http::reqwest::Options {
            configure_client: Some(Box::new(move |builder| {
                let mut builder = builder
                    .timeout(timeout)
                    .connect_timeout(timeout.min(Duration::from_secs(30)))
                    .no_proxy();
                // Every connection, redirects' too, through the outbound policy's proxy.
                if let Some(proxy) = &proxy {
                    builder = builder.proxy(proxy.clone());
                }
                Ok(match &tls {
                    Some(tls) => builder.tls_backend_preconfigured((**tls).clone()),
                    None => builder,
                })
            })),
            configure_request: Some(Box::new(move |request| {
                if let Some(Ok(value)) = &authorization {
                    request
                        .headers_mut()
                        .insert(reqwest::header::AUTHORIZATION, value.clone());
                }
                Ok(())
            })),
        };
        http::Options {
            connect_timeout: Some(timeout.min(Duration::from_secs(30))),
            user_agent: Some(format!("wheelhouse/{}", env!("CARGO_PKG_VERSION"))),
            backend: Some(Arc::new(Mutex::new(backend))),
            ..Default::default()
        }
    }
}

//! Git over SSH with russh: the session runs on the engine's runtime, and gitoxide reads
//! and writes the `git-upload-pack` channel through blocking bridges from its own thread.
//! The server's key must be in the Secret's `known_hosts`; there is no trust on first use.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use gix::protocol::transport::Protocol;
use gix::protocol::transport::client::git::ConnectMode;
use gix::protocol::transport::client::git::blocking_io::Connection;
use russh::client::{self, Handle, Msg};
use russh::keys::{PrivateKeyWithHashAlg, PublicKeyOrCertificate};
use tokio::io::{ReadHalf, WriteHalf};
use tokio_util::io::SyncIoBridge;

use super::super::{Error, RepoAuth};

/// `ssh://user@host:port/path`, taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: String,
    pub port: u16,
    pub user: String,
    pub path: String,
}

type Stream = russh::ChannelStream<Msg>;

/// The channel's output; holds the session so it lives as long as the transport.
pub struct Reader {
    inner: SyncIoBridge<ReadHalf<Stream>>,
    _session: Arc<Handle<Verifier>>,
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf)
    }
}

pub struct Writer {
    inner: SyncIoBridge<WriteHalf<Stream>>,
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Accepts the server only if its key is listed for `[host]:port` in `known_hosts`.
pub struct Verifier {
    host: String,
    port: u16,
    known_hosts: Arc<tempfile::NamedTempFile>,
    /// The key the server offered, for the error message when it is not known.
    offered: Arc<std::sync::Mutex<Option<String>>>,
}

impl client::Handler for Verifier {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        server_key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let PublicKeyOrCertificate::PublicKey { key, .. } = server_key else {
            return Ok(false);
        };
        *self.offered.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!(
            "{} {}",
            key.algorithm(),
            key.fingerprint(Default::default())
        ));
        // A changed key for a listed host is an error from russh; both mean "no".
        Ok(
            russh::keys::check_known_hosts_path(
                &self.host,
                self.port,
                key,
                self.known_hosts.path(),
            )
            .unwrap_or(false),
        )
    }
}

/// Opens a session, authenticates with the Secret's key and starts `git-upload-pack` on
/// the repository; the returned transport speaks Git's protocol over that channel.
pub fn connect(
    runtime: &tokio::runtime::Handle,
    target: &Target,
    auth: &RepoAuth,
    timeout: Duration,
    shown: &str,
    via: Option<&crate::cluster::egress::Via>,
) -> Result<Connection<Reader, Writer>, Error> {
    let failed = |why: String| Error::GitSsh {
        url: shown.to_owned(),
        why,
    };
    let identity = auth.ssh_identity.as_deref().ok_or_else(|| {
        failed("chart.secretRef needs an `identity` (a private key) and `known_hosts` for an ssh:// URL".into())
    })?;
    let known_hosts = auth
        .known_hosts
        .as_deref()
        .filter(|k| !k.trim().is_empty())
        .ok_or_else(|| {
            failed(
                "chart.secretRef has no `known_hosts`: the server's key cannot be verified".into(),
            )
        })?;
    let key = russh::keys::decode_secret_key(identity, None).map_err(|e| {
        failed(format!(
            "the Secret's identity is not a usable private key: {e}"
        ))
    })?;
    let mut file = tempfile::NamedTempFile::new()
        .map_err(|e| Error::Internal(format!("known_hosts scratch file: {e}")))?;
    file.write_all(known_hosts.as_bytes())
        .map_err(|e| Error::Internal(format!("known_hosts scratch file: {e}")))?;
    let offered = Arc::new(std::sync::Mutex::new(None));
    let verifier = Verifier {
        host: target.host.clone(),
        port: target.port,
        known_hosts: Arc::new(file),
        offered: offered.clone(),
    };
    let config = Arc::new(client::Config {
        inactivity_timeout: Some(timeout),
        ..Default::default()
    });
    let address = (target.host.clone(), target.port);
    let user = target.user.clone();
    let command = format!("git-upload-pack '{}'", target.path.replace('\'', "'\\''"));
    let via = via.cloned();
    let stream = runtime.block_on(async move {
        // Under the outbound policy, the TCP connection is the policy's to open.
        let connecting = async {
            match &via {
                None => client::connect(config, address, verifier).await,
                Some(via) => {
                    let tcp = via
                        .egress
                        .connect(via.class, &address.0, address.1)
                        .await
                        .map_err(russh::Error::IO)?;
                    client::connect_stream(config, tcp, verifier).await
                }
            }
        };
        let mut session = match tokio::time::timeout(timeout, connecting).await {
            Err(_) => {
                return Err(Error::Timeout {
                    url: shown.to_owned(),
                    after: timeout,
                });
            }
            Ok(Err(russh::Error::UnknownKey)) => {
                let key = offered
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
                    .unwrap_or_default();
                return Err(failed(format!(
                    "the server's host key ({key}) is not in known_hosts of chart.secretRef"
                )));
            }
            Ok(Err(russh::Error::IO(io)))
                if io.kind() == std::io::ErrorKind::PermissionDenied && via.is_some() =>
            {
                return Err(Error::OutboundRefused {
                    url: shown.to_owned(),
                    reason: io.to_string(),
                });
            }
            Ok(Err(russh::Error::IO(io))) => {
                return Err(Error::Unreachable {
                    url: shown.to_owned(),
                    cause: io.to_string(),
                });
            }
            Ok(Err(e)) => return Err(failed(e.to_string())),
            Ok(Ok(session)) => session,
        };
        let hash = session
            .best_supported_rsa_hash()
            .await
            .map_err(|e| failed(e.to_string()))?
            .flatten();
        let authenticated = session
            .authenticate_publickey(
                user.clone(),
                PrivateKeyWithHashAlg::new(Arc::new(key), hash),
            )
            .await
            .map_err(|e| failed(e.to_string()))?;
        if !authenticated.success() {
            return Err(failed(format!(
                "the server refused the identity of chart.secretRef for user {user}"
            )));
        }
        let channel = session
            .channel_open_session()
            .await
            .map_err(|e| failed(e.to_string()))?;
        // Asks for protocol v2 (ls-refs, fetch by commit); a server that does not pass
        // the variable on speaks v0, which gitoxide detects.
        let _ = channel.set_env(false, "GIT_PROTOCOL", "version=2").await;
        channel
            .exec(true, command)
            .await
            .map_err(|e| failed(e.to_string()))?;
        Ok((channel.into_stream(), Arc::new(session)))
    })?;
    let (stream, session) = stream;
    let (read, write) = tokio::io::split(stream);
    let reader = Reader {
        inner: SyncIoBridge::new_with_handle(read, runtime.clone()),
        _session: session,
    };
    let writer = Writer {
        inner: SyncIoBridge::new_with_handle(write, runtime.clone()),
    };
    Ok(Connection::new(
        reader,
        writer,
        Protocol::V2,
        target.path.clone(),
        None::<(String, Option<u16>)>,
        ConnectMode::Process,
        false,
    )
    .custom_url(Some(
        format!(
            "ssh://{}@{}:{}{}",
            target.user, target.host, target.port, target.path
        )
        .into(),
    )))
}

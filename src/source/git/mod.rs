//! Charts in Git repositories (`chart.git: {url, ref, path}`), fetched with gitoxide.
//!
//! Each resolve asks the server which commit the ref names (one ls-refs exchange); a
//! commit already checked out is served from the cache without fetching. A new commit is
//! fetched shallow (depth 1, only that commit's objects) into a scratch repository, the
//! chart directory at `path` is written out of its tree into
//! `<cache>/git/checkouts/<commit>-<path digest>`, validated as a chart, and the scratch
//! repository removed. The commit is the chart's source revision: part of the desired
//! state, so every new commit is one (docs/design.md, "Revisions and sources").
//!
//! Transports: HTTPS (and plain HTTP) through gitoxide's reqwest client, TLS verified
//! against the system roots plus the Secret's `ca.crt`, credentials sent as an
//! `Authorization` header (basic or bearer); SSH through russh (never an `ssh` program),
//! the server's key checked against the Secret's `known_hosts`. gitoxide's other
//! transports (`file://`, `git://`, its SSH which runs `ssh`) are never used.

mod ssh;

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gix::bstr::ByteSlice;
use gix::protocol::handshake::Ref;
use gix::remote::Direction;
use rustls::RootCertStore;

use super::{Error, RepoAuth, ResolvedChart, cache, http, local, url, version};
use crate::api::{GitRef, GitSource};

/// What the spec asks for, checked before anything is fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wanted {
    DefaultBranch,
    Branch(String),
    Tag(String),
    Semver(String),
    Commit(String),
}

impl Wanted {
    fn of(git: &GitSource) -> Result<Self, Error> {
        let invalid = |reason: &str| Error::InvalidGitRef {
            reason: reason.to_owned(),
        };
        let name_ok = |name: &str| {
            !name.is_empty()
                && !name.starts_with('-')
                && !name.contains("..")
                && !name
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control() || "~^:?*[\\".contains(c))
        };
        Ok(match &git.reference {
            None => Self::DefaultBranch,
            Some(GitRef {
                branch: Some(b),
                tag: None,
                semver: None,
                commit: None,
            }) if name_ok(b) => Self::Branch(b.clone()),
            Some(GitRef {
                branch: None,
                tag: Some(t),
                semver: None,
                commit: None,
            }) if name_ok(t) => Self::Tag(t.clone()),
            Some(GitRef {
                branch: None,
                tag: None,
                semver: Some(r),
                commit: None,
            }) => {
                version::Constraint::parse(r)?;
                Self::Semver(r.clone())
            }
            Some(GitRef {
                branch: None,
                tag: None,
                semver: None,
                commit: Some(c),
            }) if c.len() == 40 && c.bytes().all(|b| b.is_ascii_hexdigit()) => {
                Self::Commit(c.to_ascii_lowercase())
            }
            Some(GitRef {
                commit: Some(_), ..
            }) => return Err(invalid("commit must be a full 40-character SHA")),
            Some(GitRef {
                branch: None,
                tag: None,
                semver: None,
                commit: None,
            }) => Self::DefaultBranch,
            Some(r)
                if [&r.branch, &r.tag, &r.semver]
                    .iter()
                    .filter(|x| x.is_some())
                    .count()
                    > 1 =>
            {
                return Err(invalid("takes one of branch, tag, semver or commit"));
            }
            Some(_) => {
                return Err(invalid(
                    "the branch or tag name is not a valid Git ref name",
                ));
            }
        })
    }

    /// The refspec whose remote side lists the candidates.
    fn listing(&self) -> String {
        match self {
            Self::DefaultBranch => "HEAD".into(),
            Self::Branch(b) => format!("refs/heads/{b}"),
            Self::Tag(t) => format!("refs/tags/{t}"),
            Self::Semver(_) => "refs/tags/*:refs/tags/*".into(),
            Self::Commit(c) => c.clone(),
        }
    }

    fn shown(&self) -> String {
        match self {
            Self::DefaultBranch => "default branch (HEAD)".into(),
            Self::Branch(b) => format!("branch {b}"),
            Self::Tag(t) => format!("tag {t}"),
            Self::Semver(r) => format!("tag matching {r}"),
            Self::Commit(c) => format!("commit {c}"),
        }
    }
}

/// Where the repository is, and how to reach it.
#[derive(Clone)]
enum Endpoint {
    Http { url: String },
    Ssh(ssh::Target),
}

impl Endpoint {
    fn parse(text: &str) -> Result<Self, Error> {
        let invalid = |reason: &str| Error::InvalidUrl {
            url: url::redact(text),
            reason: reason.to_owned(),
        };
        let parsed = gix::url::parse(text.as_bytes().as_bstr())
            .map_err(|e| invalid(&format!("not a Git URL ({e})")))?;
        match parsed.scheme {
            gix::url::Scheme::Https | gix::url::Scheme::Http => {
                if parsed.host().is_none() {
                    return Err(invalid("the URL has no host"));
                }
                Ok(Self::Http {
                    url: text.to_owned(),
                })
            }
            gix::url::Scheme::Ssh if text.starts_with("ssh://") => {
                let host = parsed
                    .host()
                    .ok_or_else(|| invalid("the URL has no host"))?
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned();
                Ok(Self::Ssh(ssh::Target {
                    host,
                    port: parsed.port.unwrap_or(22),
                    user: parsed.user().unwrap_or("git").to_owned(),
                    path: parsed.path.to_str_lossy().into_owned(),
                }))
            }
            _ => Err(invalid(
                "expected https://, http:// or ssh:// (file://, git:// and scp-like addresses are not accepted)",
            )),
        }
    }
}

/// Everything one resolve needs on its blocking thread.
struct Job {
    git_dir: PathBuf,
    url: String,
    shown: String,
    endpoint: Endpoint,
    wanted: Wanted,
    path: String,
    auth: RepoAuth,
    tls: Option<Arc<rustls::ClientConfig>>,
    timeout: Duration,
    runtime: tokio::runtime::Handle,
    interrupt: Arc<AtomicBool>,
    /// Set when gitoxide asked for credentials: the server answered 401.
    refused: Arc<AtomicBool>,
}

/// Serialises writes to one checkout directory between workers of this process.
static CHECKOUTS: Mutex<()> = Mutex::new(());

/// Resolves `git` to a chart directory checked out of its commit.
pub async fn resolve(
    cache_dir: &Path,
    system_roots: &RootCertStore,
    timeout: Duration,
    git: &GitSource,
    auth: &RepoAuth,
) -> Result<ResolvedChart, Error> {
    // reqwest builds plain-HTTP clients on the process-wide rustls provider: ring, as
    // kube and our other clients use.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let wanted = Wanted::of(git)?;
    let endpoint = Endpoint::parse(&git.url)?;
    let path = chart_path(git.path.as_deref())?;
    let tls = match &endpoint {
        Endpoint::Http { url } if url.starts_with("https://") => Some(Arc::new(http::tls_config(
            system_roots,
            auth.ca_pem.as_deref(),
        )?)),
        _ => None,
    };
    let interrupt = Arc::new(AtomicBool::new(false));
    let job = Job {
        git_dir: cache_dir.join("git"),
        url: git.url.clone(),
        shown: url::redact(&git.url),
        endpoint,
        wanted,
        path,
        auth: auth.clone(),
        tls,
        timeout,
        runtime: tokio::runtime::Handle::current(),
        interrupt: interrupt.clone(),
        refused: Arc::new(AtomicBool::new(false)),
    };
    let shown = job.shown.clone();
    // Each network step is bounded by `timeout` on its own (reqwest's and russh's
    // timeouts); this bounds the whole resolve, and stops gitoxide at its next check.
    let work = tokio::task::spawn_blocking(move || job.run());
    match tokio::time::timeout(timeout * 3, work).await {
        Ok(joined) => joined.map_err(|e| Error::Internal(format!("git task failed: {e}")))?,
        Err(_) => {
            interrupt.store(true, Ordering::Relaxed);
            Err(Error::Timeout {
                url: shown,
                after: timeout * 3,
            })
        }
    }
}

/// `path` inside the repository, normalised: no leading or trailing `/`, no `.` or `..`.
fn chart_path(path: Option<&str>) -> Result<String, Error> {
    let path = path.unwrap_or_default().trim_matches('/');
    let mut parts = Vec::new();
    for part in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
        if part == ".." {
            return Err(Error::InvalidGitRef {
                reason: format!("path {path} leaves the repository"),
            });
        }
        parts.push(part);
    }
    Ok(parts.join("/"))
}

impl Job {
    fn run(self) -> Result<ResolvedChart, Error> {
        std::fs::create_dir_all(&self.git_dir).map_err(|source| Error::Cache {
            path: self.git_dir.clone(),
            source,
        })?;
        let (commit, revision) = self.find_commit()?;
        let checkout = self.git_dir.join("checkouts").join(format!(
            "{commit}-{}",
            &local::sha256_hex(self.path.as_bytes())[..16]
        ));
        let chart = match self.cached(&checkout, &commit)? {
            Some(chart) => chart,
            None => self.fetch_and_check_out(&commit, &checkout)?,
        };
        Ok(ResolvedChart {
            name: chart.meta.name,
            version: chart.meta.version,
            app_version: chart.meta.app_version,
            digest: chart.digest,
            path: chart.path,
            revision: Some(revision),
        })
    }

    /// The commit the ref names now, and the revision as status shows it
    /// (`main@sha1:<commit>`, as Flux writes a GitRepository's revision).
    fn find_commit(&self) -> Result<(String, String), Error> {
        if let Wanted::Commit(c) = &self.wanted {
            return Ok((c.clone(), format!("sha1:{c}")));
        }
        let repo = self.scratch_repo(&self.git_dir.join("ls.git"))?;
        let remote = self.remote(&repo, &self.wanted.listing())?;
        let connection = self.connect(&remote)?;
        let (map, _) = connection
            .ref_map(gix::progress::Discard, Default::default())
            .map_err(|e| self.classify(&e))?;
        let refs: Vec<(String, String)> = map
            .remote_refs
            .iter()
            .filter_map(|r| {
                let (name, object) = match r {
                    Ref::Peeled {
                        full_ref_name,
                        object,
                        ..
                    }
                    | Ref::Direct {
                        full_ref_name,
                        object,
                    } => (full_ref_name.to_string(), object),
                    Ref::Symbolic { target, object, .. } => (target.to_string(), object),
                    Ref::Unborn { .. } => return None,
                };
                Some((name, object.to_string()))
            })
            .collect();
        let found = |full: &str| refs.iter().find(|(n, _)| n == full).map(|(_, o)| o.clone());
        let short = |full: &str, prefix: &str| full.strip_prefix(prefix).unwrap_or(full).to_owned();
        let missing = |prefix: &str| Error::GitRefNotFound {
            url: self.shown.clone(),
            wanted: self.wanted.shown(),
            available: self.list(&repo, prefix).unwrap_or_default(),
        };
        let (name, commit) = match &self.wanted {
            Wanted::DefaultBranch => {
                let head = map.remote_refs.iter().find_map(|r| match r {
                    Ref::Symbolic {
                        full_ref_name,
                        target,
                        object,
                        ..
                    } if full_ref_name == "HEAD" => Some((
                        short(&target.to_string(), "refs/heads/"),
                        object.to_string(),
                    )),
                    Ref::Direct {
                        full_ref_name,
                        object,
                    } if full_ref_name == "HEAD" => Some(("HEAD".to_owned(), object.to_string())),
                    _ => None,
                });
                head.ok_or_else(|| missing("refs/heads/"))?
            }
            Wanted::Branch(b) => (
                b.clone(),
                found(&format!("refs/heads/{b}")).ok_or_else(|| missing("refs/heads/"))?,
            ),
            Wanted::Tag(t) => (
                t.clone(),
                found(&format!("refs/tags/{t}")).ok_or_else(|| missing("refs/tags/"))?,
            ),
            Wanted::Semver(range) => {
                let tags: Vec<(String, String)> = refs
                    .iter()
                    .filter_map(|(n, o)| {
                        n.strip_prefix("refs/tags/")
                            .filter(|t| !t.ends_with("^{}"))
                            .map(|t| (t.to_owned(), o.clone()))
                    })
                    .collect();
                let texts: Vec<&str> = tags.iter().map(|(t, _)| t.as_str()).collect();
                match version::select(&texts, Some(range)) {
                    Ok(i) => tags[i].clone(),
                    Err(version::SelectError::Constraint(e)) => {
                        return Err(Error::InvalidConstraint(e));
                    }
                    Err(_) => {
                        return Err(Error::GitRefNotFound {
                            url: self.shown.clone(),
                            wanted: self.wanted.shown(),
                            available: version::newest_first(&texts),
                        });
                    }
                }
            }
            Wanted::Commit(_) => unreachable!("handled above"),
        };
        Ok((commit.clone(), format!("{name}@sha1:{commit}")))
    }

    /// The names under `prefix` (`refs/heads/`, `refs/tags/`), for a "not found" message.
    fn list(&self, repo: &gix::Repository, prefix: &str) -> Result<Vec<String>, Error> {
        let remote = self.remote(repo, &format!("{prefix}*:{prefix}*"))?;
        let (map, _) = self
            .connect(&remote)?
            .ref_map(gix::progress::Discard, Default::default())
            .map_err(|e| self.classify(&e))?;
        let mut names: Vec<String> = map
            .remote_refs
            .iter()
            .filter_map(|r| match r {
                Ref::Peeled { full_ref_name, .. } | Ref::Direct { full_ref_name, .. } => {
                    full_ref_name
                        .to_string()
                        .strip_prefix(prefix)
                        .map(str::to_owned)
                }
                _ => None,
            })
            .collect();
        names.sort();
        Ok(names)
    }

    /// A checkout made earlier for `commit`, if complete.
    fn cached(&self, checkout: &Path, commit: &str) -> Result<Option<local::LocalChart>, Error> {
        if !checkout.join(COMPLETE).is_file() {
            return Ok(None);
        }
        self.load_chart(checkout, commit).map(Some)
    }

    fn load_chart(&self, checkout: &Path, commit: &str) -> Result<local::LocalChart, Error> {
        let not_a_chart = |why: String| Error::GitPathNotChart {
            url: self.shown.clone(),
            commit: commit.to_owned(),
            path: if self.path.is_empty() {
                "/".into()
            } else {
                self.path.clone()
            },
            why,
        };
        match local::load(&checkout.join(CHART_DIR)) {
            Ok(chart) => Ok(chart),
            Err(Error::NoChartYaml { .. }) => Err(not_a_chart("it has no Chart.yaml".into())),
            Err(Error::InvalidChartYaml { reason, .. }) => Err(not_a_chart(format!(
                "its Chart.yaml does not parse: {reason}"
            ))),
            Err(e) => Err(e),
        }
    }

    /// Fetches `commit` alone (depth 1) into a scratch repository and writes the chart
    /// directory out of its tree into `checkout`.
    fn fetch_and_check_out(
        &self,
        commit: &str,
        checkout: &Path,
    ) -> Result<local::LocalChart, Error> {
        let scratch = tempfile::Builder::new()
            .prefix(".fetch-")
            .tempdir_in(&self.git_dir)
            .map_err(|source| Error::Cache {
                path: self.git_dir.clone(),
                source,
            })?;
        let repo = gix::init_bare(scratch.path()).map_err(|e| self.internal(&e))?;
        let remote = self.remote(&repo, commit)?;
        let connection = self.connect(&remote)?;
        let depth = NonZeroU32::new(1).expect("1 is not zero");
        let outcome = connection
            .prepare_fetch(gix::progress::Discard, Default::default())
            .map_err(|e| self.classify(&e))?
            .with_shallow(gix::remote::fetch::Shallow::DepthAtRemote(depth))
            .receive(gix::progress::Discard, &self.interrupt)
            .map_err(|e| self.classify_fetch(&e, commit))?;
        if let gix::remote::fetch::Status::Change {
            write_pack_bundle, ..
        } = &outcome.status
        {
            tracing::debug!(
                url = %self.shown,
                commit,
                objects = write_pack_bundle.index.num_objects,
                shallow = repo.is_shallow().unwrap_or(false),
                "fetched a Git commit"
            );
        }

        let id = gix::ObjectId::from_hex(commit.as_bytes()).map_err(|e| self.internal(&e))?;
        let tree = repo
            .find_commit(id)
            .and_then(|c| c.tree())
            .map_err(|e| self.classify_fetch(&e, commit))?;
        let not_a_chart = |why: &str| Error::GitPathNotChart {
            url: self.shown.clone(),
            commit: commit.to_owned(),
            path: self.path.clone(),
            why: why.to_owned(),
        };
        let tree = if self.path.is_empty() {
            tree
        } else {
            let entry = tree
                .lookup_entry_by_path(&self.path)
                .map_err(|e| self.internal(&e))?
                .ok_or_else(|| not_a_chart("no such directory at this commit"))?;
            if !entry.mode().is_tree() {
                return Err(not_a_chart("it is a file, not a directory"));
            }
            entry.object().map_err(|e| self.internal(&e))?.into_tree()
        };

        let checkouts = self.git_dir.join("checkouts");
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| Error::Cache { path, source }
        };
        std::fs::create_dir_all(&checkouts).map_err(io(&checkouts))?;
        let staging = tempfile::Builder::new()
            .prefix(".checkout-")
            .tempdir_in(&checkouts)
            .map_err(io(&checkouts))?;
        write_tree(&tree, &staging.path().join(CHART_DIR), &|why| {
            not_a_chart(&why)
        })?;
        let chart = self.load_chart(staging.path(), commit)?;
        std::fs::write(staging.path().join(COMPLETE), commit).map_err(io(staging.path()))?;
        let _guard = CHECKOUTS.lock().unwrap_or_else(|e| e.into_inner());
        if checkout.join(COMPLETE).is_file() {
            // Another worker checked out the same commit meanwhile.
            return self.load_chart(checkout, commit);
        }
        let _ = std::fs::remove_dir_all(checkout);
        let staged = staging.keep();
        std::fs::rename(&staged, checkout).map_err(io(checkout))?;
        drop(chart);
        self.load_chart(checkout, commit)
    }

    /// An empty bare repository to run the protocol from (gitoxide needs one).
    fn scratch_repo(&self, path: &Path) -> Result<gix::Repository, Error> {
        match gix::open(path) {
            Ok(repo) => Ok(repo),
            Err(_) => {
                let _ = std::fs::remove_dir_all(path);
                gix::init_bare(path).map_err(|e| self.internal(&e))
            }
        }
    }

    fn remote<'r>(&self, repo: &'r gix::Repository, spec: &str) -> Result<gix::Remote<'r>, Error> {
        repo.remote_at(self.url.as_str())
            .and_then(|r| r.with_refspecs([spec], Direction::Fetch))
            .map_err(|e| Error::InvalidUrl {
                url: self.shown.clone(),
                reason: chain(&e),
            })
    }

    fn connect<'a, 'r>(
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
                let transport =
                    ssh::connect(&self.runtime, target, &self.auth, self.timeout, &self.shown)?;
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
                let builder = builder
                    .timeout(timeout)
                    .connect_timeout(timeout.min(Duration::from_secs(30)));
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

    fn internal(&self, e: &dyn std::fmt::Display) -> Error {
        Error::GitProtocol {
            url: self.shown.clone(),
            cause: e.to_string(),
        }
    }

    /// A fetch that failed after the ref was found: a commit the server does not have
    /// is its own error; the rest as [`Self::classify`].
    fn classify_fetch(&self, e: &(dyn std::error::Error + 'static), commit: &str) -> Error {
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
    fn classify(&self, e: &(dyn std::error::Error + 'static)) -> Error {
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

/// Marks a checkout complete (written last, so a crash mid-write leaves none).
const COMPLETE: &str = ".complete";
/// The chart's own directory inside a checkout, so the marker is not a chart file.
const CHART_DIR: &str = "chart";

/// Writes `tree` to `dir`: blobs as files, subtrees as directories. A symlink is refused
/// (its target could lie outside the chart, or outside the repository), a submodule
/// skipped (Helm reads none).
fn write_tree(
    tree: &gix::Tree<'_>,
    dir: &Path,
    refuse: &dyn Fn(String) -> Error,
) -> Result<(), Error> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Cache { path, source }
    };
    let internal =
        |e: &dyn std::fmt::Display| Error::Internal(format!("reading the Git tree: {e}"));
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    for entry in tree.iter() {
        let entry = entry.map_err(|e| internal(&e))?;
        let name = entry.filename().to_str_lossy().into_owned();
        if name.contains('/') || name == ".." || name == "." {
            return Err(refuse(format!("the tree holds an invalid name {name:?}")));
        }
        let target = dir.join(&name);
        let mode = entry.mode();
        if mode.is_tree() {
            let sub = entry.object().map_err(|e| internal(&e))?.into_tree();
            write_tree(&sub, &target, refuse)?;
        } else if mode.is_link() {
            return Err(refuse(format!(
                "{name} is a symbolic link, which wheelhouse does not follow out of a Git tree"
            )));
        } else if mode.is_blob() {
            let blob = entry.object().map_err(|e| internal(&e))?;
            cache::write_atomic(&target, &blob.data).map_err(io(&target))?;
        }
    }
    Ok(())
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
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn git(reference: Option<GitRef>) -> GitSource {
        GitSource {
            url: "https://example.com/charts.git".into(),
            reference,
            path: None,
        }
    }

    #[test]
    fn refs_are_checked_before_anything_is_fetched() {
        let r = |branch: Option<&str>,
                 tag: Option<&str>,
                 semver: Option<&str>,
                 commit: Option<&str>| {
            Wanted::of(&git(Some(GitRef {
                branch: branch.map(Into::into),
                tag: tag.map(Into::into),
                semver: semver.map(Into::into),
                commit: commit.map(Into::into),
            })))
        };
        assert_eq!(Wanted::of(&git(None)).unwrap(), Wanted::DefaultBranch);
        assert_eq!(
            r(Some("main"), None, None, None).unwrap(),
            Wanted::Branch("main".into())
        );
        assert_eq!(
            r(None, Some("v1.0.0"), None, None).unwrap(),
            Wanted::Tag("v1.0.0".into())
        );
        assert_eq!(
            r(None, None, Some(">=1.0.0"), None).unwrap(),
            Wanted::Semver(">=1.0.0".into())
        );
        let sha = "0123456789abcdef0123456789ABCDEF01234567";
        assert_eq!(
            r(None, None, None, Some(sha)).unwrap(),
            Wanted::Commit(sha.to_ascii_lowercase())
        );
        for bad in [
            r(Some("main"), Some("v1"), None, None),
            r(Some("a b"), None, None, None),
            r(Some("../x"), None, None, None),
            r(Some("-x"), None, None, None),
            r(None, None, None, Some("abc123")),
            r(None, None, Some("not a range!"), None),
        ] {
            assert!(bad.is_err(), "{bad:?}");
        }
    }

    #[test]
    fn only_network_transports_are_accepted() {
        assert!(matches!(
            Endpoint::parse("https://h/r.git"),
            Ok(Endpoint::Http { .. })
        ));
        assert!(matches!(
            Endpoint::parse("http://127.0.0.1:8080/r.git"),
            Ok(Endpoint::Http { .. })
        ));
        match Endpoint::parse("ssh://deploy@git.example.com:2222/team/charts.git") {
            Ok(Endpoint::Ssh(t)) => {
                assert_eq!(
                    (t.host.as_str(), t.port, t.user.as_str()),
                    ("git.example.com", 2222, "deploy")
                );
                assert_eq!(t.path, "/team/charts.git");
            }
            _ => panic!("an ssh:// URL"),
        }
        for bad in [
            "file:///etc",
            "git://h/r.git",
            "/tmp/repo",
            "git@github.com:a/b.git",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn chart_paths_stay_inside_the_repository() {
        assert_eq!(chart_path(None).unwrap(), "");
        assert_eq!(chart_path(Some("/charts/app/")).unwrap(), "charts/app");
        assert_eq!(chart_path(Some("./charts//app")).unwrap(), "charts/app");
        assert!(chart_path(Some("charts/../../etc")).is_err());
    }
}

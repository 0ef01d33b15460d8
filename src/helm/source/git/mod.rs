//! Charts in Git repositories (`chart.git: {url, ref, path}`), fetched with gitoxide.
//!
//! Each resolve asks the server which commit the ref names (one ls-refs exchange); a
//! commit already checked out is served from the cache without fetching. A new commit is
//! fetched shallow (depth 1, only that commit's objects) into a scratch repository, the
//! chart directory at `path` is written out of its tree into
//! `<cache>/git/checkouts/<commit>-<source identity>-<path digest>`, validated as a
//! chart, and the scratch repository removed. The source identity (repository and
//! credentials, `source/identity.rs`) keeps one tenant's checkout from another: a commit
//! is served from the cache only to a resolve that reaches the same repository with the
//! same credentials; any other fetches it from its own server (a pinned commit too, which
//! is never taken as proof of access). The commit is the chart's source revision: part of the desired
//! state, so every new commit is one (docs/design.md, "Revisions and sources").
//!
//! Transports: HTTPS (and plain HTTP) through gitoxide's reqwest client, TLS verified
//! against the system roots plus the Secret's `ca.crt`, credentials sent as an
//! `Authorization` header (basic or bearer); SSH through russh (never an `ssh` program),
//! the server's key checked against the Secret's `known_hosts`. gitoxide's other
//! transports (`file://`, `git://`, its SSH which runs `ssh`) are never used.
//!
//! By job: the resolve and which commit a ref names (`mod.rs`), what the spec asks for and
//! where the repository is (`wanted.rs`), the checkout cache (`checkout.rs`), the
//! connection (`transport.rs`, with SSH in `ssh.rs`), and what a failure means
//! (`classify.rs`).

mod checkout;
mod classify;
mod ssh;
mod transport;
mod wanted;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gix::protocol::handshake::Ref;
use rustls::RootCertStore;

use self::wanted::{Endpoint, Wanted, chart_path};
use super::identity::IdentityKey;
use super::{Error, RepoAuth, ResolvedChart, http, local, url, version};
use crate::api::GitSource;

/// The cache a resolve reads and fills.
#[derive(Clone, Copy)]
pub struct Cache<'a> {
    pub dir: &'a Path,
    pub identity: &'a IdentityKey,
}

/// Everything one resolve needs on its blocking thread.
struct Job {
    git_dir: PathBuf,
    /// Who may read what this resolve checks out: the repository's location and the
    /// credentials it is reached with (see `source/identity.rs`). A checkout is reused
    /// only under the same identity, so a commit (which is no secret) named from another
    /// place or with other credentials is fetched from there, or refused there.
    source: String,
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
    /// The outbound policy's proxy every connection goes through, when one applies.
    via: Option<crate::cluster::egress::Via>,
}

/// Resolves `git` to a chart directory checked out of its commit.
pub async fn resolve(
    cache: Cache<'_>,
    system_roots: &RootCertStore,
    timeout: Duration,
    git: &GitSource,
    auth: &RepoAuth,
    via: Option<&crate::cluster::egress::Via>,
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
    let source = cache.identity.git(&endpoint.location(), auth);
    let job = Job {
        git_dir: cache.dir.join("git"),
        source,
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
        via: via.cloned(),
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
impl Job {
    fn run(self) -> Result<ResolvedChart, Error> {
        std::fs::create_dir_all(&self.git_dir).map_err(|source| Error::Cache {
            path: self.git_dir.clone(),
            source,
        })?;
        let (commit, revision) = self.find_commit()?;
        let checkout = self.git_dir.join("checkouts").join(format!(
            "{commit}-{}-{}",
            self.source,
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
            stamp: None,
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
}

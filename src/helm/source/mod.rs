//! Chart sources: turning a HelmRelease's `spec.chart` into a chart on local disk that
//! `helm template` accepts — a path chart as it is, or a repository chart downloaded
//! (digest-checked) into an on-disk cache.
//!
//! The repository's index is fetched on every resolve, since a newer version matching
//! the range may have appeared; it is fetched conditionally (ETag / Last-Modified) and
//! kept parsed in memory, so an unchanged index costs one small request. Chart archives
//! are downloaded once per repository, name, version and digest.

mod auth;
mod cache;
mod git;
/// The process's HTTP client stack (chart repositories, notifications).
pub(crate) mod http;
mod identity;
mod index;
mod local;
mod oci;
pub mod pushed;
mod url;
pub mod version;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header;
use rustls::RootCertStore;
use sha2::{Digest, Sha256};

pub use auth::RepoAuth;
pub use index::IndexError;
pub use local::{ChartYamlError, Stamp, stamp as local_stamp};
pub use url::redact as redact_url;

use crate::api::ChartSpec;
use crate::cluster::egress;
use http::{Credentials, HttpClient};
use index::Index;
use version::SelectError;

/// Per request (connect, headers and body); a slow mirror still fits a chart in this.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Large public indexes (bitnami's) are tens of MiB.
const MAX_INDEX_BYTES: usize = 256 * 1024 * 1024;
const MAX_CHART_BYTES: usize = 128 * 1024 * 1024;
/// Versions listed in a "no version matches" message.
const LISTED_VERSIONS: usize = 10;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("chart needs either path, repository and name, or git")]
    InvalidSpec,

    #[error("chart path {} does not exist", path.display())]
    PathNotFound { path: PathBuf },

    #[error(
        "chart path {} is relative, and this engine has no chart root to resolve it against \
         (set --chart-root or WHEELHOUSE_CHART_ROOT to the same directory on every engine, \
         or use an absolute path)",
        path.display()
    )]
    RelativePath { path: PathBuf },

    /// A `chart.path` the engine will not read; `rule` says which rule and why.
    #[error("chart.path {path:?} refused: {rule}")]
    PathRefused { path: String, rule: String },

    #[error("chart path {}: {source}", path.display())]
    PathIo {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("{} is not a chart: it has no Chart.yaml", path.display())]
    NoChartYaml { path: PathBuf },

    /// Boxed, as the YAML error it may hold would make every source error larger.
    #[error("cannot parse {}: {reason}", path.display())]
    InvalidChartYaml {
        path: PathBuf,
        #[source]
        reason: Box<local::ChartYamlError>,
    },

    #[error("{origin} is not a chart archive: {reason}")]
    InvalidArchive { origin: String, reason: String },

    #[error("invalid repository URL {url}: {reason}")]
    InvalidUrl { url: String, reason: String },

    #[error("repository {url} is unreachable: {cause}")]
    Unreachable { url: String, cause: String },

    #[error(
        "{url}: the server's certificate is not signed by a trusted CA ({cause}); put the CA in ca.crt of the Secret in chart.secretRef"
    )]
    UnknownCa { url: String, cause: String },

    #[error("{url}: TLS error: {cause}")]
    Tls { url: String, cause: String },

    #[error("{url}: no response within {}s", after.as_secs_f32())]
    Timeout { url: String, after: Duration },

    #[error("{url}: HTTP {status} {reason}")]
    HttpStatus {
        url: String,
        status: u16,
        reason: String,
    },

    #[error(
        "{url}: authentication failed (HTTP {status}); {}",
        if *sent_credentials {
            "the repository refused the credentials from chart.secretRef"
        } else {
            "the repository needs credentials: set chart.secretRef to a Secret with username and password"
        }
    )]
    Auth {
        url: String,
        status: u16,
        sent_credentials: bool,
    },

    #[error("{url}: more than {max} redirects")]
    TooManyRedirects { url: String, max: usize },

    #[error("{url}: response larger than {limit} bytes")]
    TooLarge { url: String, limit: usize },

    /// The reason stays out of the message: it would quote the response, and a tenant's
    /// URL may point at what only the engine can reach (the engine's log has it).
    #[error(
        "the index of repository {url} ({bytes} bytes) does not read as a Helm repository index (its content is not shown)"
    )]
    IndexParse {
        url: String,
        bytes: usize,
        #[source]
        reason: Box<index::IndexError>,
    },

    /// A connection the cluster's outbound policy refuses (src/cluster/egress.rs).
    #[error("{url}: refused by the cluster's outbound policy: {reason}")]
    OutboundRefused { url: String, reason: String },

    #[error("chart {name} not found in repository {url}")]
    ChartNotFound { name: String, url: String },

    #[error("chart.version: {0}")]
    InvalidConstraint(#[from] version::ConstraintError),

    #[error(
        "no version of {name} matches {constraint} (available: {})",
        list_versions(available)
    )]
    NoMatchingVersion {
        name: String,
        constraint: String,
        available: Vec<String>,
    },

    #[error(
        "{name} has no stable version (available: {}); set chart.version to pick a pre-release, e.g. \">=0.0.0-0\"",
        list_versions(available)
    )]
    NoStableVersion {
        name: String,
        available: Vec<String>,
    },

    #[error("chart {name} {version} has no download URL in repository {url}")]
    NoChartUrl {
        name: String,
        version: String,
        url: String,
    },

    #[error(
        "digest mismatch for {url}: the index says sha256:{expected}, the download is sha256:{actual}"
    )]
    DigestMismatch {
        url: String,
        expected: String,
        actual: String,
    },

    #[error("chart cache {}: {source}", path.display())]
    Cache {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("invalid CA certificate (ca.crt): {0}")]
    InvalidCa(String),

    #[error("TLS setup: {0}")]
    TlsSetup(String),

    #[error("chart.secretRef: Secret {namespace}/{name} not found")]
    AuthSecretNotFound { namespace: String, name: String },

    #[error("chart.secretRef: reading Secret {namespace}/{name}: {source}")]
    AuthSecretRead {
        namespace: String,
        name: String,
        source: kube::Error,
    },

    #[error("chart.secretRef: Secret {namespace}/{name} {reason}")]
    AuthSecretInvalid {
        namespace: String,
        name: String,
        reason: String,
    },

    #[error("{reference} is not a Helm chart: {why}")]
    NotAChart { reference: String, why: String },

    #[error("{reference}: not found in the registry ({detail})")]
    OciNotFound { reference: String, detail: String },

    #[error("chart.git.ref: {reason}")]
    InvalidGitRef { reason: String },

    #[error("{url}: no {wanted}{}", found(available))]
    GitRefNotFound {
        url: String,
        wanted: String,
        available: Vec<String>,
    },

    #[error("{url}: repository not found (HTTP 404)")]
    GitRepositoryNotFound { url: String },

    #[error("chart.git.path {path} at {url}@{commit} is not a chart: {why}")]
    GitPathNotChart {
        url: String,
        commit: String,
        path: String,
        why: String,
    },

    #[error("{url}: SSH: {why}")]
    GitSsh { url: String, why: String },

    #[error("{url}: git: {cause}")]
    GitProtocol { url: String, cause: String },

    #[error("internal error: {0}")]
    Internal(String),
}

/// " (found: a, b)" after a ref that is not there, or nothing when there is nothing to list.
fn found(available: &[String]) -> String {
    if available.is_empty() {
        String::new()
    } else {
        format!(" (found: {})", list_versions(available))
    }
}

fn list_versions(available: &[String]) -> String {
    if available.is_empty() {
        return "none".into();
    }
    let shown = available[..available.len().min(LISTED_VERSIONS)].join(", ");
    match available.len().saturating_sub(LISTED_VERSIONS) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// A chart ready for rendering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedChart {
    pub name: String,
    pub version: String,
    pub app_version: Option<String>,
    /// `sha256:<hex>` of the .tgz (repository charts and packaged path charts) or of the
    /// chart directory's files in a stable order.
    pub digest: String,
    /// A chart directory or .tgz.
    pub path: PathBuf,
    /// Where in its source the chart came from, when that is more than its version:
    /// a Git chart's `<ref>@sha1:<commit>`, an OCI chart's `<tag>@sha256:<manifest
    /// digest>` (Flux's revision formats).
    pub revision: Option<String>,
    /// A `chart.path` chart's stamp when its digest was taken: while the path's stamp is
    /// the same, so are its contents.
    pub stamp: Option<local::Stamp>,
}

impl ResolvedChart {
    /// The Git commit (hex) of a chart from Git.
    pub fn commit(&self) -> Option<&str> {
        crate::api::commit_of(self.revision.as_deref()?)
    }

    /// The OCI manifest digest (hex) of a chart from an OCI registry.
    pub fn manifest_digest(&self) -> Option<&str> {
        crate::api::manifest_digest_of(self.revision.as_deref()?)
    }
}

/// Resolves charts; one per engine, shared by its workers.
pub struct ChartSource {
    cache_dir: PathBuf,
    /// What a relative `chart.path` is relative to. Never the process's working
    /// directory, so every engine (dashboard or controller) resolves it the same way.
    chart_root: Option<PathBuf>,
    timeout: Duration,
    system_roots: Arc<RootCertStore>,
    /// One pooled client per extra CA (None: system roots only) and way out (direct, or
    /// the outbound policy's proxy under one class's rules).
    clients: Mutex<HashMap<ClientKey, HttpClient>>,
    /// The proxy a policed release's sources connect through (none: every connection is
    /// direct, as for an engine started without it).
    egress: Option<Arc<egress::Egress>>,
    /// Last index per (index URL, credentials), for conditional requests.
    indexes: Mutex<HashMap<String, CachedIndex>>,
    oci: oci::OciClients,
    /// Names cached Git checkouts and OCI layers by who may read them.
    identity: identity::IdentityKey,
    /// `chart.path` charts by canonical path, as last read: an unchanged stamp reuses the
    /// digest instead of reading and hashing every file again at each reconcile.
    local: Mutex<HashMap<PathBuf, ResolvedChart>>,
}

/// An HTTP client's extra CA (its digest) and way out.
type ClientKey = (Option<String>, Option<egress::Class>);

/// Path charts remembered at most (each a few hundred bytes); beyond it, forgotten.
const LOCAL_CHARTS_KEPT: usize = 4096;

struct CachedIndex {
    etag: Option<String>,
    last_modified: Option<String>,
    body_sha256: String,
    index: Arc<Index>,
}

impl ChartSource {
    /// `cache_dir` holds downloaded archives (created when missing), e.g.
    /// `ProjectDirs::from("dev", "wheelhouse", "wheelhouse").cache_dir().join("charts")`.
    pub fn new(cache_dir: PathBuf) -> Result<Self, Error> {
        std::fs::create_dir_all(&cache_dir).map_err(|source| Error::Cache {
            path: cache_dir.clone(),
            source,
        })?;
        cache::sweep_stale_temporaries(&cache_dir);
        let identity = identity::IdentityKey::load_or_create(&cache_dir)?;
        Ok(Self {
            cache_dir,
            chart_root: None,
            timeout: DEFAULT_REQUEST_TIMEOUT,
            system_roots: Arc::new(http::system_roots()),
            clients: Mutex::new(HashMap::new()),
            indexes: Mutex::new(HashMap::new()),
            oci: oci::OciClients::default(),
            identity,
            egress: None,
            local: Mutex::new(HashMap::new()),
        })
    }

    /// Bounds every HTTP request (default [`DEFAULT_REQUEST_TIMEOUT`]).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self.clients.get_mut().expect("not poisoned").clear();
        self
    }

    /// The way out of a release whose sources answer to `class`'s outbound rules.
    pub fn via(&self, class: egress::Class) -> Option<egress::Via> {
        self.egress.as_ref().map(|egress| egress::Via {
            egress: egress.clone(),
            class,
        })
    }

    /// Sends the connections of policed releases through `egress`.
    pub fn with_egress(mut self, egress: Arc<egress::Egress>) -> Self {
        self.egress = Some(egress);
        self
    }

    /// Resolves relative `chart.path`s against `root`.
    pub fn with_chart_root(mut self, root: Option<PathBuf>) -> Self {
        self.chart_root = root;
        self
    }

    pub fn cache_dir(&self) -> &std::path::Path {
        &self.cache_dir
    }

    /// Resolves `chart` connecting directly (no outbound policy).
    pub async fn resolve(
        &self,
        chart: &ChartSpec,
        auth: &RepoAuth,
    ) -> Result<ResolvedChart, Error> {
        self.resolve_for(chart, auth, None).await
    }

    /// Resolves `chart` for a release whose sources answer to `policed`'s outbound rules
    /// (none: direct). An engine without a proxy refuses a policed resolve rather than
    /// connect unchecked.
    pub async fn resolve_for(
        &self,
        chart: &ChartSpec,
        auth: &RepoAuth,
        policed: Option<egress::Class>,
    ) -> Result<ResolvedChart, Error> {
        let via = match (policed, &self.egress) {
            (None, _) => None,
            (Some(class), Some(egress)) => Some(egress::Via {
                egress: egress.clone(),
                class,
            }),
            (Some(_), None) if chart.path.is_some() => None,
            (Some(_), None) => {
                return Err(Error::Internal(
                    "the cluster's outbound policy applies to this release, and this engine has no proxy to enforce it".into(),
                ));
            }
        };
        if let Some(git) = &chart.git {
            if chart.path.is_some() || chart.repository.is_some() || chart.name.is_some() {
                return Err(Error::InvalidSpec);
            }
            let cache = git::Cache {
                dir: &self.cache_dir,
                identity: &self.identity,
            };
            return git::resolve(
                cache,
                &self.system_roots,
                self.timeout,
                git,
                auth,
                via.as_ref(),
            )
            .await;
        }
        match (&chart.path, &chart.repository, &chart.name) {
            (Some(path), None, None) => {
                let rules = local::PathRules {
                    root: self.chart_root.clone(),
                    cache: self.cache_dir.clone(),
                };
                let spec = path.clone();
                let (real, stamp) = blocking(move || rules.resolve(&spec)).await?;
                let known = self.local.lock().expect("not poisoned").get(&real).cloned();
                if let Some(known) = known.filter(|k| k.stamp == Some(stamp) && stamp.settled()) {
                    return Ok(known);
                }
                let read = real.clone();
                let (local, after) =
                    blocking(move || Ok((local::load(&read)?, local::stamp(&read)?))).await?;
                let resolved = ResolvedChart {
                    name: local.meta.name,
                    version: local.meta.version,
                    app_version: local.meta.app_version,
                    digest: local.digest,
                    path: local.path,
                    revision: None,
                    // Only when nothing changed while it was read.
                    stamp: (after == stamp).then_some(stamp),
                };
                if resolved.stamp.is_some_and(|s| s.settled()) {
                    let mut kept = self.local.lock().expect("not poisoned");
                    if kept.len() >= LOCAL_CHARTS_KEPT {
                        kept.clear();
                    }
                    kept.insert(real, resolved.clone());
                }
                Ok(resolved)
            }
            (None, Some(repository), Some(_)) if repository.starts_with("oci://") => {
                let cache = oci::Cache {
                    dir: &self.cache_dir,
                    identity: &self.identity,
                };
                oci::resolve(&self.oci, cache, self.timeout, chart, auth, via.as_ref()).await
            }
            (None, Some(repository), Some(name)) => {
                self.resolve_from_repository(
                    repository,
                    name,
                    chart.version.as_deref(),
                    auth,
                    via.as_ref(),
                )
                .await
            }
            _ => Err(Error::InvalidSpec),
        }
    }

    async fn resolve_from_repository(
        &self,
        repository: &str,
        name: &str,
        constraint: Option<&str>,
        auth: &RepoAuth,
        via: Option<&egress::Via>,
    ) -> Result<ResolvedChart, Error> {
        let shown_repo = url::redact(repository);
        let client = self.client_for(auth.ca_pem.as_deref(), via)?;
        let repo_origin = http::origin(repository).ok_or_else(|| Error::InvalidUrl {
            url: shown_repo.clone(),
            reason: "expected an http:// or https:// URL".into(),
        })?;
        let credentials = auth.basic().map(|(username, password)| Credentials {
            username,
            password,
            origin: repo_origin,
        });

        let index = self
            .fetch_index(&client, repository, credentials.as_ref(), auth)
            .await?;
        let versions = index
            .entries
            .get(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| Error::ChartNotFound {
                name: name.to_owned(),
                url: shown_repo.clone(),
            })?;
        let texts: Vec<&str> = versions
            .iter()
            .map(|v| v.version.as_deref().unwrap_or_default())
            .collect();
        let chosen = match version::select(&texts, constraint) {
            Ok(i) => &versions[i],
            Err(SelectError::Constraint(e)) => return Err(Error::InvalidConstraint(e)),
            Err(SelectError::NoMatch { available }) => {
                return Err(Error::NoMatchingVersion {
                    name: name.to_owned(),
                    constraint: constraint.unwrap_or("*").trim().to_owned(),
                    available,
                });
            }
            Err(SelectError::NoStable { available }) => {
                return Err(Error::NoStableVersion {
                    name: name.to_owned(),
                    available,
                });
            }
        };
        let version = chosen.version.clone().unwrap_or_default();
        let reference = chosen.urls.first().ok_or_else(|| Error::NoChartUrl {
            name: name.to_owned(),
            version: version.clone(),
            url: shown_repo.clone(),
        })?;
        let chart_url = url::chart_url(repository, reference);
        let expected = chosen.sha256();
        let identity = expected
            .clone()
            .or_else(|| chosen.created.clone())
            .unwrap_or_default();
        let cached = cache::chart_path(&self.cache_dir, repository, name, &version, &identity);

        if let Some(resolved) = cached_chart(&cached, expected.as_deref(), &chart_url).await? {
            return Ok(resolved);
        }

        let response = client
            .get(&chart_url, credentials.as_ref(), &[], MAX_CHART_BYTES)
            .await?;
        let shown_url = url::redact(&chart_url);
        store_chart(response.body, expected, cached, shown_url).await
    }

    /// The repository's index: downloaded when it changed, otherwise the parsed copy.
    async fn fetch_index(
        &self,
        client: &HttpClient,
        repository: &str,
        credentials: Option<&Credentials<'_>>,
        auth: &RepoAuth,
    ) -> Result<Arc<Index>, Error> {
        let index_url = url::index_url(repository);
        let key = index_cache_key(&index_url, auth);
        let mut conditional = Vec::new();
        let previous_sha = {
            let indexes = self.indexes.lock().expect("not poisoned");
            indexes.get(&key).map(|c| {
                if let Some(etag) = &c.etag {
                    conditional.push((header::IF_NONE_MATCH, etag.clone()));
                }
                if let Some(modified) = &c.last_modified {
                    conditional.push((header::IF_MODIFIED_SINCE, modified.clone()));
                }
                c.body_sha256.clone()
            })
        };
        let response = client
            .get(&index_url, credentials, &conditional, MAX_INDEX_BYTES)
            .await?;
        let header_text = |name: header::HeaderName| {
            response
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let etag = header_text(header::ETAG);
        let last_modified = header_text(header::LAST_MODIFIED);

        if response.status == reqwest::StatusCode::NOT_MODIFIED {
            let indexes = self.indexes.lock().expect("not poisoned");
            if let Some(cached) = indexes.get(&key) {
                return Ok(cached.index.clone());
            }
            return Err(Error::HttpStatus {
                url: url::redact(&index_url),
                status: 304,
                reason: "Not Modified for a request that was not conditional".into(),
            });
        }
        let body = response.body;
        let body_sha256 = local::sha256_hex(&body);
        if previous_sha.as_deref() == Some(body_sha256.as_str()) {
            let mut indexes = self.indexes.lock().expect("not poisoned");
            if let Some(cached) = indexes.get_mut(&key) {
                cached.etag = etag;
                cached.last_modified = last_modified;
                return Ok(cached.index.clone());
            }
        }
        let shown = url::redact(repository);
        let index = blocking(move || {
            Index::parse(&body).map_err(|reason| {
                tracing::debug!(url = %shown, error = %reason, "an index that does not read");
                Error::IndexParse {
                    url: shown,
                    bytes: body.len(),
                    reason: Box::new(reason),
                }
            })
        })
        .await?;
        let index = Arc::new(index);
        self.indexes.lock().expect("not poisoned").insert(
            key,
            CachedIndex {
                etag,
                last_modified,
                body_sha256,
                index: index.clone(),
            },
        );
        Ok(index)
    }

    fn client_for(
        &self,
        ca_pem: Option<&[u8]>,
        via: Option<&egress::Via>,
    ) -> Result<HttpClient, Error> {
        let key = (ca_pem.map(local::sha256_hex), via.map(|v| v.class));
        let mut clients = self.clients.lock().expect("not poisoned");
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let client = HttpClient::new(&self.system_roots, ca_pem, self.timeout, via.cloned())?;
        clients.insert(key, client.clone());
        Ok(client)
    }
}

/// A cached archive, if present and intact. A corrupt one is removed so it is
/// downloaded again.
/// A downloaded archive checked against its `expected` sha256 (hex), validated as a chart,
/// then written to `path` in the cache: the cache only ever holds charts.
async fn store_chart(
    body: impl AsRef<[u8]> + Send + 'static,
    expected: Option<String>,
    path: PathBuf,
    origin: String,
) -> Result<ResolvedChart, Error> {
    blocking(move || {
        let body = body.as_ref();
        let actual = local::sha256_hex(body);
        if let Some(expected) = expected
            && expected != actual
        {
            return Err(Error::DigestMismatch {
                url: origin,
                expected,
                actual,
            });
        }
        let meta = local::archive_meta(body, &origin)?;
        cache::write_atomic(&path, body).map_err(|source| Error::Cache {
            path: path.clone(),
            source,
        })?;
        Ok(ResolvedChart {
            name: meta.name,
            version: meta.version,
            app_version: meta.app_version,
            digest: format!("sha256:{actual}"),
            path,
            revision: None,
            stamp: None,
        })
    })
    .await
}

async fn cached_chart(
    path: &std::path::Path,
    expected: Option<&str>,
    chart_url: &str,
) -> Result<Option<ResolvedChart>, Error> {
    let path = path.to_owned();
    let expected = expected.map(str::to_owned);
    let origin = url::redact(chart_url);
    blocking(move || {
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(Error::Cache { path, source }),
        };
        let actual = local::sha256_hex(&bytes);
        let meta = match local::archive_meta(&bytes, &origin) {
            Ok(meta) if expected.as_deref().is_none_or(|e| e == actual) => meta,
            _ => {
                tracing::warn!(path = %path.display(), "discarding a corrupt cached chart");
                let _ = std::fs::remove_file(&path);
                return Ok(None);
            }
        };
        Ok(Some(ResolvedChart {
            name: meta.name,
            version: meta.version,
            app_version: meta.app_version,
            digest: format!("sha256:{actual}"),
            path,
            revision: None,
            stamp: None,
        }))
    })
    .await
}

/// Separates cached indexes by credentials too, so one tenant's index is never served
/// to a request with other (possibly invalid) credentials without asking the server.
fn index_cache_key(index_url: &str, auth: &RepoAuth) -> String {
    let mut hasher = Sha256::new();
    for part in [
        auth.username.as_deref().unwrap_or_default().as_bytes(),
        auth.password.as_deref().unwrap_or_default().as_bytes(),
        auth.ca_pem.as_deref().unwrap_or_default(),
    ] {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    format!("{index_url}#{}", hex::encode(hasher.finalize()))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("blocking task failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_lists_are_bounded() {
        let many: Vec<String> = (0..13).map(|i| format!("1.{i}.0")).collect();
        let text = list_versions(&many);
        assert!(text.ends_with("1.9.0 and 3 more"), "{text}");
        assert_eq!(list_versions(&[]), "none");
    }

    #[test]
    fn index_cache_key_depends_on_credentials() {
        let url = "https://h/index.yaml";
        let none = index_cache_key(url, &RepoAuth::default());
        let a = RepoAuth {
            username: Some("a".into()),
            password: Some("b".into()),
            ..Default::default()
        };
        let b = RepoAuth {
            username: Some("ab".into()),
            password: Some(String::new()),
            ..Default::default()
        };
        assert_ne!(index_cache_key(url, &a), none);
        assert_ne!(index_cache_key(url, &a), index_cache_key(url, &b));
        // The password itself never appears in the key.
        let c = RepoAuth {
            password: Some("hunter2".into()),
            ..a.clone()
        };
        assert!(!index_cache_key(url, &c).contains("hunter2"));
    }

    /// The engine shares one ChartSource between workers spawned on the runtime.
    #[test]
    fn source_is_shareable_and_resolving_is_send() {
        fn shareable<T: Send + Sync>() {}
        fn send<T: Send>(_: &T) {}
        shareable::<ChartSource>();
        let dir = tempfile::tempdir().unwrap();
        let source = ChartSource::new(dir.path().to_owned()).unwrap();
        let (spec, auth) = (ChartSpec::default(), RepoAuth::default());
        send(&source.resolve(&spec, &auth));
    }

    #[tokio::test]
    async fn spec_needs_path_or_repository_and_name() {
        let dir = tempfile::tempdir().unwrap();
        let source = ChartSource::new(dir.path().join("charts")).unwrap();
        for spec in [
            ChartSpec::default(),
            ChartSpec {
                repository: Some("https://h".into()),
                ..Default::default()
            },
            ChartSpec {
                path: Some("x".into()),
                name: Some("x".into()),
                ..Default::default()
            },
        ] {
            let err = source
                .resolve(&spec, &RepoAuth::default())
                .await
                .unwrap_err();
            assert!(matches!(err, Error::InvalidSpec), "{err}");
        }
    }

    use super::local::SETTLED_AFTER_FOR_TESTS;

    /// A chart.path whose files did not change is not read again; any change to a file
    /// (even one of the same size) is seen at the next resolve.
    #[tokio::test]
    async fn an_unchanged_chart_path_is_reused_and_a_changed_one_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let chart = dir.path().join("app");
        std::fs::create_dir_all(chart.join("templates")).unwrap();
        std::fs::write(chart.join("Chart.yaml"), "name: app\nversion: 1.0.0\n").unwrap();
        std::fs::write(chart.join("templates/cm.yaml"), "kind: ConfigMap\n").unwrap();
        let source = ChartSource::new(dir.path().join("cache")).unwrap();
        let spec = ChartSpec {
            path: Some(chart.display().to_string()),
            ..Default::default()
        };
        let auth = RepoAuth::default();
        // Just written: not settled, so not kept (a write within the clock's resolution
        // could follow unseen).
        let fresh = source.resolve(&spec, &auth).await.unwrap();
        assert!(fresh.stamp.is_some_and(|s| !s.settled()));
        assert!(source.local.lock().unwrap().is_empty());
        tokio::time::sleep(SETTLED_AFTER_FOR_TESTS).await;
        let first = source.resolve(&spec, &auth).await.unwrap();
        assert_eq!(first.digest, fresh.digest);
        assert!(first.stamp.is_some_and(|s| s.settled()));
        let real = std::fs::canonicalize(&chart).unwrap();
        assert_eq!(source.local.lock().unwrap().get(&real), Some(&first));
        assert_eq!(source.resolve(&spec, &auth).await.unwrap(), first);
        // The same size, other bytes.
        std::fs::write(chart.join("templates/cm.yaml"), "kind: Secretxx\n").unwrap();
        let edited = source.resolve(&spec, &auth).await.unwrap();
        assert_ne!(edited.digest, first.digest);
        assert_eq!(edited.digest, local::load(&real).unwrap().digest);
        // A file added.
        std::fs::write(chart.join("templates/other.yaml"), "kind: ConfigMap\n").unwrap();
        let added = source.resolve(&spec, &auth).await.unwrap();
        assert_ne!(added.digest, edited.digest);
    }
}

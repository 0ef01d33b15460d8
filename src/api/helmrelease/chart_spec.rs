//! Where a release's chart comes from: a path, a Helm repository or OCI registry, or a
//! directory in a Git repository.

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::duration::Duration;

/// Exactly one of `path`, `repository` + `name` (with an optional `version`), or `git`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.path) || has(self.git) || (has(self.repository) && has(self.name))")
        .message("chart needs either path, repository and name, or git"),
    validation = Rule::new("!has(self.path) || !(has(self.repository) || has(self.name) || has(self.version) || has(self.secretRef) || has(self.git))")
        .message("chart.path cannot be combined with repository, name, version, secretRef or git"),
    validation = Rule::new("!has(self.git) || !(has(self.repository) || has(self.name) || has(self.version) || has(self.insecure))")
        .message("chart.git cannot be combined with repository, name, version or insecure (the chart is the directory git.path)"),
)]
pub struct ChartSpec {
    /// URL of an HTTP(S) Helm repository (the folder holding index.yaml), or of an OCI
    /// registry path (`oci://host/path`, the chart being `path/name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.startsWith('https://') || self.startsWith('http://') || self.startsWith('oci://')")
        .message("chart.repository must be an http:// or https:// Helm repository URL, or oci://host/path"))]
    pub repository: Option<String>,

    /// Chart name in the repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$')")
        .message("chart.name must be a chart name such as podinfo"))]
    pub name: Option<String>,

    /// Exact version or semver range (e.g. `1.2.3`, `>=1.0.0 <2.0.0`, `~1.4`). Defaults to
    /// the latest stable version. For an OCI chart, `@sha256:<digest>` after the version
    /// (or alone) pins the manifest's digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) > 0").message("chart.version must not be empty; omit it for the latest stable version"))]
    pub version: Option<String>,

    /// A chart directory or packaged `.tgz` on the engine's filesystem.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("size(self) > 0").message("chart.path must not be empty"))]
    pub path: Option<String>,

    /// Secret in the HelmRelease's namespace with `username`/`password` for basic auth
    /// (or, for an OCI registry, `.dockerconfigjson` as a `kubernetes.io/dockerconfigjson`
    /// Secret holds it) and/or `ca.crt` for a private CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<LocalObjectReference>,

    /// OCI only: reach the registry over plain HTTP. Without it, plain HTTP is used only
    /// for a registry on a loopback address that does not answer TLS.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,

    /// How often the chart's source is checked for a new version, manifest digest or
    /// commit (Flux's `chart.spec.interval`). Default: the release's interval, and 15s
    /// while the release waits on a health check or has failed. A push (a webhook
    /// receiver) is seen at once either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,

    /// A chart directory in a Git repository, fetched shallow at the commit `ref` names.
    /// Every new commit is a new desired state. Credentials come from `secretRef`:
    /// `username`/`password` or `bearerToken` (HTTPS, with an optional `ca.crt`), or
    /// `identity` and `known_hosts` (SSH), as in Flux's GitRepository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSource>,

    /// Values files that replace the chart's own values (Flux's `chart.spec.valuesFiles`):
    /// merged in order, each over the last, into the chart's default values (values.yaml
    /// is not included unless listed). Paths are inside the chart, or for `git`, from the
    /// repository's root. Below the release's values, as the chart's defaults are. A path
    /// that is absolute or leaves the source with `..` fails the chart (checked when the
    /// chart is read: a CEL rule over a list of strings exceeds the API server's cost
    /// budget).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_files: Vec<String>,

    /// A values file of `valuesFiles` that does not exist is skipped instead of failing
    /// the chart.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub ignore_missing_values_files: bool,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GitSource {
    /// `https://host/repo.git`, `http://` (loopback or trusted networks only), or
    /// `ssh://user@host[:port]/repo.git`.
    #[x_kube(validation = Rule::new("self.startsWith('https://') || self.startsWith('http://') || self.startsWith('ssh://')")
        .message("chart.git.url must be an https://, http:// or ssh:// URL"))]
    pub url: String,

    /// What to check out; the default branch (HEAD) when omitted.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<GitRef>,

    /// The chart directory inside the repository (default: the repository's root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// At most one of these; Flux's GitRepository `ref`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("[has(self.branch), has(self.tag), has(self.semver), has(self.commit)].filter(x, x).size() <= 1")
        .message("chart.git.ref takes one of branch, tag, semver or commit"),
)]
pub struct GitRef {
    /// The branch's newest commit; each new commit is a new desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// The highest tag matching this semver range (a leading `v` in tags is allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub semver: Option<String>,
    /// A full commit SHA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[0-9a-f]{40}$')")
        .message("chart.git.ref.commit must be a full 40-character commit SHA"))]
    pub commit: Option<String>,
}

impl ChartSpec {
    /// Where the chart comes from, as the dashboard shows it: a path, a repository's
    /// chart, or an OCI reference (with the version asked for, which may be a range or a
    /// digest pin).
    pub fn source_text(&self) -> String {
        let version = self
            .version
            .as_deref()
            .map_or_else(|| " (newest stable)".to_owned(), |v| format!(" {v}"));
        if let Some(git) = &self.git {
            return git.source_text(None);
        }
        match (&self.path, &self.repository, &self.name) {
            (Some(path), _, _) => format!("path {path}"),
            (None, Some(repo), Some(name)) if repo.starts_with("oci://") => format!(
                "{}/{name}{version}{}",
                repo.trim_end_matches('/'),
                if self.insecure { " (plain HTTP)" } else { "" }
            ),
            (None, Some(repo), Some(name)) => format!("{name} from {repo}{version}"),
            _ => "(no chart source)".to_owned(),
        }
    }
}

impl GitSource {
    /// `url@commit` (the first 12 digits of the commit, when known) with the ref and
    /// path asked for, as the dashboard shows it.
    pub fn source_text(&self, commit: Option<&str>) -> String {
        let reference = match &self.reference {
            Some(GitRef {
                branch: Some(b), ..
            }) => format!(" branch {b}"),
            Some(GitRef { tag: Some(t), .. }) => format!(" tag {t}"),
            Some(GitRef {
                semver: Some(r), ..
            }) => format!(" tags {r}"),
            Some(GitRef {
                commit: Some(c), ..
            }) => format!(" commit {}", &c[..c.len().min(12)]),
            _ => " (default branch)".to_owned(),
        };
        let path = self
            .path
            .as_deref()
            .filter(|p| !p.trim_matches('/').is_empty())
            .map(|p| format!(" path {p}"))
            .unwrap_or_default();
        let at = commit
            .map(|c| format!("@{}", &c[..c.len().min(12)]))
            .unwrap_or_default();
        format!("{}{at}{reference}{path}", self.url)
    }
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LocalObjectReference {
    pub name: String,
}

//! A push to a chart source (a new tag in a registry, a commit to a repository), as a
//! webhook receiver (`src/receive/`) heard it, and which charts it names. A release
//! whose chart it names is woken at once: whether its desired state really changed is
//! for its next reconcile to find out.

use crate::api::ChartSpec;

/// What was pushed, as the sender named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// A manifest pushed to an OCI registry: the registry (`host[:port]`, when the
    /// notification says) and the repository (`charts/webapp`).
    Oci {
        registry: Option<String>,
        repository: String,
        tag: Option<String>,
    },
    /// Commits pushed to a Git repository, by every URL the forge gives it (HTTPS, SSH).
    Git { urls: Vec<String> },
    /// A Helm repository (or any chart source) named by its URL (generic receivers).
    Url { url: String },
}

impl Pushed {
    /// Whether `chart` comes from where this push happened.
    pub fn names(&self, chart: &ChartSpec) -> bool {
        match self {
            Self::Oci {
                registry,
                repository,
                ..
            } => {
                let (Some(url), Some(name)) = (chart.repository.as_deref(), chart.name.as_deref())
                else {
                    return false;
                };
                let Some((chart_registry, chart_repository)) = oci_parts(url, name) else {
                    return false;
                };
                chart_repository == *repository
                    && registry
                        .as_deref()
                        .is_none_or(|r| same_registry(r, &chart_registry))
            }
            Self::Git { urls } => chart.git.as_ref().is_some_and(|git| {
                let Some(ours) = git_key(&git.url) else {
                    return false;
                };
                urls.iter().filter_map(|u| git_key(u)).any(|k| k == ours)
            }),
            Self::Url { url } => {
                let url = url.trim_end_matches('/');
                let same = |u: &str| u.trim_end_matches('/') == url;
                chart.repository.as_deref().is_some_and(same)
                    || chart
                        .git
                        .as_ref()
                        .is_some_and(|g| git_key(&g.url).is_some_and(|k| Some(k) == git_key(url)))
                    || match (chart.repository.as_deref(), chart.name.as_deref()) {
                        (Some(repo), Some(name)) if repo.starts_with("oci://") => {
                            same(&format!("{}/{name}", repo.trim_end_matches('/')))
                        }
                        _ => false,
                    }
            }
        }
    }

    /// As a log line names it.
    pub fn describe(&self) -> String {
        match self {
            Self::Oci {
                registry,
                repository,
                tag,
            } => format!(
                "oci://{}/{repository}{}",
                registry.as_deref().unwrap_or("<registry>"),
                tag.as_deref().map(|t| format!(":{t}")).unwrap_or_default()
            ),
            Self::Git { urls } => urls.first().cloned().unwrap_or_default(),
            Self::Url { url } => url.clone(),
        }
    }
}

/// `(registry, repository)` of an `oci://` chart: `oci://host:5000/charts` + `webapp` is
/// `("host:5000", "charts/webapp")`.
fn oci_parts(url: &str, name: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("oci://")?.trim_end_matches('/');
    let (registry, path) = rest.split_once('/').unwrap_or((rest, ""));
    let repository = if path.is_empty() {
        name.to_owned()
    } else {
        format!("{path}/{name}")
    };
    Some((registry.to_ascii_lowercase(), repository))
}

/// Two registry addresses are one: the same, or loopback names for the same port.
fn same_registry(a: &str, b: &str) -> bool {
    let split = |r: &str| -> (String, String) {
        let r = r.to_ascii_lowercase();
        match r.rsplit_once(':') {
            Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => {
                (host.to_owned(), port.to_owned())
            }
            _ => (r, String::new()),
        }
    };
    let loopback = |h: &str| matches!(h, "localhost" | "127.0.0.1" | "[::1]" | "::1");
    let ((ha, pa), (hb, pb)) = (split(a), split(b));
    pa == pb && (ha == hb || (loopback(&ha) && loopback(&hb)))
}

/// A Git repository's identity across its URLs: host (no user, no port) and path (no
/// `.git`, no slashes around), lower-case. `https://host/o/r.git`, `ssh://git@host:22/o/r`
/// and `git@host:o/r.git` are one repository.
fn git_key(url: &str) -> Option<String> {
    let url = url.trim();
    let (host, path) = if let Some((_, rest)) = url.split_once("://") {
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        (host.to_owned(), path.to_owned())
    } else {
        // scp-like: user@host:path
        let (authority, path) = url.split_once(':')?;
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        (host.to_owned(), path.to_owned())
    };
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h.to_owned(),
        _ => host,
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    (!host.is_empty() && !path.is_empty()).then(|| {
        format!(
            "{}/{}",
            host.to_ascii_lowercase(),
            path.to_ascii_lowercase()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chart(yaml: &str) -> ChartSpec {
        crate::yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn a_registry_push_names_the_charts_of_its_repository() {
        let webapp =
            chart("{repository: oci://127.0.0.1:5000/charts, name: webapp, version: '1.x'}");
        let push = |registry: Option<&str>, repository: &str| Pushed::Oci {
            registry: registry.map(str::to_owned),
            repository: repository.into(),
            tag: Some("1.0.1".into()),
        };
        assert!(push(Some("127.0.0.1:5000"), "charts/webapp").names(&webapp));
        assert!(push(Some("localhost:5000"), "charts/webapp").names(&webapp));
        assert!(push(None, "charts/webapp").names(&webapp));
        assert!(!push(Some("127.0.0.1:5001"), "charts/webapp").names(&webapp));
        assert!(!push(Some("registry.example"), "charts/webapp").names(&webapp));
        assert!(!push(Some("127.0.0.1:5000"), "charts/api").names(&webapp));
        let http = chart("{repository: 'https://charts.example/stable', name: webapp}");
        assert!(!push(None, "charts/webapp").names(&http));
    }

    #[test]
    fn a_git_push_names_the_charts_of_its_repository_by_any_url() {
        let git = chart("{git: {url: 'https://git.example/Team/Charts.git', ref: {branch: main}}}");
        let push = |urls: &[&str]| Pushed::Git {
            urls: urls.iter().map(|u| (*u).to_owned()).collect(),
        };
        assert!(push(&["https://git.example/team/charts"]).names(&git));
        assert!(push(&["git@git.example:team/charts.git"]).names(&git));
        assert!(push(&["ssh://git@git.example:2222/team/charts.git"]).names(&git));
        assert!(!push(&["https://git.example/team/other.git"]).names(&git));
        assert!(!push(&["https://elsewhere.example/team/charts.git"]).names(&git));
        assert!(!push(&[]).names(&git));
    }

    #[test]
    fn a_generic_push_names_a_source_by_url() {
        let http = chart("{repository: 'https://charts.example/stable/', name: webapp}");
        let oci = chart("{repository: oci://reg.example/charts, name: webapp}");
        let url = |u: &str| Pushed::Url { url: u.into() };
        assert!(url("https://charts.example/stable").names(&http));
        assert!(url("oci://reg.example/charts/webapp").names(&oci));
        assert!(!url("oci://reg.example/charts/api").names(&oci));
        assert!(!url("https://charts.example/other").names(&http));
    }
}

//! A push to a chart source (a new tag in a registry, a commit to a repository), as a
//! webhook receiver (`src/webhooks/receive/`) heard it, and which charts it names. A release
//! whose chart it names is woken at once: whether its desired state really changed is
//! for its next reconcile to find out.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::api::{ChartSpec, HelmRelease};

/// One webhook call's pushes, as the engine's releases hear them: a release is woken at
/// most once per call (whatever number of tags an envelope names), only if the receiver
/// may wake it ([`Resource`]s), and at urgent priority only while the receiver is within
/// its rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    pub pushes: Vec<Pushed>,
    /// The releases the receiver may wake; none: any (an engine's own use).
    pub resources: Option<Vec<Resource>>,
    pub urgent: bool,
}

impl Wake {
    /// Whether this call wakes `hr`: one of its pushes names its chart, and the receiver
    /// may wake it.
    pub fn wakes(&self, hr: &HelmRelease) -> bool {
        self.pushes.iter().any(|p| p.names(&hr.spec.chart))
            && self
                .resources
                .as_ref()
                .is_none_or(|r| r.iter().any(|r| r.matches(hr)))
    }

    /// As a log line names it.
    pub fn describe(&self) -> String {
        let shown: Vec<String> = self.pushes.iter().take(3).map(Pushed::describe).collect();
        match self.pushes.len().saturating_sub(3) {
            0 => shown.join(", "),
            more => format!("{} and {more} more", shown.join(", ")),
        }
    }
}

/// Who hears a call's wakes (the engine, which wakes its releases): how many releases the
/// wake reached.
pub trait Wakes: Send + Sync {
    fn wake(&self, wake: Wake) -> usize;
}

/// What a receiver may wake, as Flux's Receiver `resources` name what it may reconcile:
/// HelmReleases by name (`*` for any) in a namespace, or by labels.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resource {
    /// `HelmRelease` (the only kind a wheelhouse receiver wakes).
    pub kind: String,
    #[serde(default)]
    pub api_version: Option<String>,
    /// A name, or `*` for every HelmRelease that matches the rest.
    pub name: String,
    /// None: every namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

impl Resource {
    pub fn matches(&self, hr: &HelmRelease) -> bool {
        let labels = hr.metadata.labels.as_ref();
        self.kind == "HelmRelease"
            && (self.name == "*" || hr.metadata.name.as_deref() == Some(self.name.as_str()))
            && self
                .namespace
                .as_deref()
                .is_none_or(|ns| hr.metadata.namespace.as_deref() == Some(ns))
            && self
                .match_labels
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
    }
}

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
        crate::text::yaml::from_str(yaml).unwrap()
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

    /// A call wakes a release only inside the receiver's resources.
    #[test]
    fn a_wake_stays_inside_the_receivers_resources() {
        let hr = |ns: &str, name: &str, labels: &str| -> HelmRelease {
            crate::text::yaml::from_str(&format!(
                "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: {name}, namespace: {ns}, labels: {{{labels}}}}}\nspec: {{chart: {{repository: oci://reg.example/charts, name: webapp}}}}"
            ))
            .unwrap()
        };
        let push = Pushed::Oci {
            registry: Some("reg.example".into()),
            repository: "charts/webapp".into(),
            tag: None,
        };
        let resource = |yaml: &str| -> Resource { crate::text::yaml::from_str(yaml).unwrap() };
        let wake = Wake {
            pushes: vec![push],
            resources: Some(vec![
                resource("{kind: HelmRelease, name: '*', namespace: team-a}"),
                resource("{kind: HelmRelease, name: '*', matchLabels: {team: b}}"),
            ]),
            urgent: true,
        };
        assert!(wake.wakes(&hr("team-a", "web", "")));
        assert!(wake.wakes(&hr("other", "web", "team: b")));
        assert!(!wake.wakes(&hr("other", "web", "team: c")));
        let anyone = Wake {
            resources: None,
            ..wake.clone()
        };
        assert!(anyone.wakes(&hr("other", "web", "")));
        let named = Wake {
            resources: Some(vec![resource(
                "{kind: HelmRelease, name: api, namespace: team-a}",
            )]),
            ..wake
        };
        assert!(!named.wakes(&hr("team-a", "web", "")));
        assert!(named.wakes(&hr("team-a", "api", "")));
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

//! The crate-wide error type. Each module keeps its own precise error enum; this one
//! wraps them so callers handle one type, and its messages go into status and logs as
//! they are (none of them carries Secret data).

use thiserror::Error;

/// Why this process does not run the engine: it never takes a lease, and says why once
/// (the dashboard's header shows it).
#[derive(Debug, Error)]
pub enum Unable {
    #[error("this process cannot render charts, so it does not run the engine: {0}")]
    Render(crate::helm::render::Error),
    /// The published policy cannot be read, or conflicts with the engine's flags.
    #[error(transparent)]
    Policy(#[from] crate::cluster::tenancy::PolicyError),
    #[error(
        "the cluster is {policy}: every release acts as a ServiceAccount of its namespace, and this identity may not impersonate service accounts {scope}, so it does not run the engine (it would act with its own rights); the installed controller reconciles instead"
    )]
    CannotImpersonate { policy: String, scope: String },
}

#[derive(Debug, Error)]
pub enum Error {
    #[error(transparent)]
    Connect(#[from] crate::cluster::client::ConnectError),

    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),

    #[error(
        "the HelmRelease CRD is not installed in this cluster; install it with `wheelhouse crd | kubectl apply -f -`"
    )]
    CrdMissing,

    #[error(transparent)]
    Source(#[from] crate::helm::source::Error),

    /// Boxed: values errors carry several names and keep the crate's error small.
    #[error(transparent)]
    Values(Box<crate::helm::values::Error>),

    #[error(transparent)]
    Chart(#[from] crate::helm::chart::Error),

    #[error(transparent)]
    Render(#[from] crate::helm::render::Error),

    #[error(transparent)]
    Apply(#[from] crate::helm::apply::Error),

    #[error(transparent)]
    Storage(#[from] crate::helm::release::Error),

    #[error(transparent)]
    Remote(#[from] crate::cluster::remote::Error),

    #[error("config tracking: {0}")]
    Tracking(Box<crate::tracking::Error>),

    #[error("{0}")]
    Io(#[from] std::io::Error),

    #[error("notifications: {0}")]
    Notify(#[from] crate::webhooks::notify::Error),

    /// The engine stopped during an action; the revision stays pending for the next one.
    #[error("the engine stopped mid-action; the next engine unlocks the revision and retries")]
    Stopped,
}

impl From<crate::helm::values::Error> for Error {
    fn from(e: crate::helm::values::Error) -> Self {
        Self::Values(Box::new(e))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The API server's message when this error is its refusal of a call (403): which
    /// identity may not do what, where.
    pub fn forbidden(&self) -> Option<String> {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = next {
            if let Some(kube::Error::Api(status)) = e.downcast_ref::<kube::Error>()
                && status.code == 403
            {
                return Some(status.message.clone());
            }
            next = e.source();
        }
        None
    }

    /// Why this error is the cluster's and not the release's, when it is: the API server
    /// refused the call (403), did not answer or answered 5xx/429, or its discovery cannot
    /// serve an API group the release needs. Such a failure costs the release no retry and
    /// never stalls it; it is tried again with backoff.
    pub fn cluster_cause(&self) -> Option<&'static str> {
        // Transparent variants hand `source()` on past themselves: look at them first.
        match self {
            Self::Apply(crate::helm::apply::Error::Unavailable { .. }) => {
                return Some("an API group is not discovered");
            }
            Self::Render(crate::helm::render::Error::Discovery(_)) => {
                return Some("discovery could not be read");
            }
            Self::Render(crate::helm::render::Error::Helper { .. }) => {
                return Some("the engine's render helper failed");
            }
            Self::Render(crate::helm::render::Error::Failed { stderr, .. })
                if stderr.contains(crate::helm::render::NEEDS_UNAVAILABLE_GROUP) =>
            {
                return Some("an API group is not discovered");
            }
            // A `lookup` the API server refused (helm fails the render on it, as with the
            // same credentials by hand): granted later, the release tries again.
            Self::Render(crate::helm::render::Error::Failed { stderr, .. })
                if crate::cluster::rbac::Access::refused_in(stderr).is_some() =>
            {
                return Some("the API server refused a call of the chart's `lookup`");
            }
            _ => {}
        }
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(self);
        while let Some(e) = next {
            if let Some(k) = e.downcast_ref::<kube::Error>() {
                return match k {
                    kube::Error::Api(s) if s.code == 403 => {
                        Some("the API server refused the engine's call")
                    }
                    kube::Error::Api(s) if s.code >= 500 || s.code == 429 => {
                        Some("the API server could not serve the call")
                    }
                    kube::Error::Api(_) | kube::Error::SerdeError(_) => None,
                    _ => Some("the API server could not be reached"),
                };
            }
            next = e.source();
        }
        None
    }

    /// The message for status, Events and logs: kube writes a debug dump of the API
    /// server's answer after its message, which is left out.
    pub fn describe(&self) -> String {
        without_dumps(&self.to_string())
    }
}

/// `text` without kube's `ApiError: ` prefixes and ` (Status { ... })` dumps.
fn without_dumps(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" (Status {") {
        out.push_str(&rest[..at]);
        // Skip to the parenthesis that closes the dump.
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, c) in rest[at + 1..].char_indices() {
            match c {
                '(' | '{' | '[' => depth += 1,
                ')' | '}' | ']' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = at + 1 + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out.replace("ApiError: ", "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forbidden() -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status {
            message: r#"secrets is forbidden: User "engine" cannot list resource "secrets" in API group "" in the namespace "vault""#.into(),
            reason: "Forbidden".into(),
            code: 403,
            ..Default::default()
        }))
    }

    #[test]
    fn a_refusal_is_found_through_the_error_chain_and_shown_without_a_dump() {
        let e = Error::Storage(crate::helm::release::Error::Kube(forbidden()));
        assert!(
            e.forbidden()
                .unwrap()
                .starts_with("secrets is forbidden: User \"engine\"")
        );
        let shown = e.describe();
        assert!(
            !shown.contains("Status {") && !shown.contains("ApiError"),
            "{shown}"
        );
        assert!(
            shown.contains("cannot list resource \"secrets\""),
            "{shown}"
        );
        assert_eq!(Error::Stopped.forbidden(), None);
    }

    #[test]
    fn the_clusters_failures_are_told_from_the_releases() {
        let refused = Error::Storage(crate::helm::release::Error::Kube(forbidden()));
        assert!(refused.cluster_cause().is_some());
        let unavailable = Error::Apply(crate::helm::apply::Error::Unavailable {
            object: "Widget/w".into(),
            group_version: "broken.example/v1".into(),
            apiservice: "v1.broken.example".into(),
        });
        assert!(unavailable.cluster_cause().is_some());
        let template = Error::Render(crate::helm::render::Error::Failed {
            status: "exit status: 1".into(),
            stderr: "template: x: fail".into(),
        });
        assert_eq!(template.cluster_cause(), None);
        let refused_lookup = Error::Render(crate::helm::render::Error::Failed {
            status: "exit status: 1".into(),
            stderr: r#"template: t/templates/c.yaml:3:9: executing "t/templates/c.yaml" at <lookup "v1" "Secret" "victim" "db">: error calling lookup: secrets "db" is forbidden: User "system:serviceaccount:t:default" cannot get resource "secrets" in API group "" in the namespace "victim""#.into(),
        });
        assert!(refused_lookup.cluster_cause().is_some());
        let invalid = Error::Kube(kube::Error::Api(Box::new(kube::core::Status {
            code: 422,
            ..Default::default()
        })));
        assert_eq!(invalid.cluster_cause(), None);
    }
}

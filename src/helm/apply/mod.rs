//! Putting a rendered release into the cluster: server-side apply in Helm's install order,
//! pruning what a new revision no longer renders, uninstalling in Helm's uninstall order,
//! the chart's CRDs, and hooks (including tests) run as Helm runs them.
//!
//! Everything goes through [`Applier`], which owns a kube client and a discovery cache.

mod applier;
pub mod client_side;
pub mod drift_detection;
pub mod fields;
mod hooks;
pub mod manifest;
pub mod order;

use std::time::Duration;

use thiserror::Error;

pub use applier::{Applied, Applier, Owner, Removed, Seen};
pub use fields::RELEASE_FIELD_MANAGER;
pub use hooks::{ContainerExit, HookFailure, RunningHook, execution_order};
pub use manifest::{ObjectRef, parse_manifest};

#[derive(Debug, Error)]
pub enum Error {
    /// A manifest document is not valid YAML or not a Kubernetes object. `origin` is the
    /// template it came from (its `# Source:` path).
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },

    #[error(
        "{object}: the API server serves no kind {kind} in {api_version} (is its CustomResourceDefinition installed?)"
    )]
    UnknownKind {
        object: String,
        api_version: String,
        kind: String,
    },

    #[error("discovering the resources of {api_version}: {}", api_message(.source))]
    Discovery {
        api_version: String,
        #[source]
        source: kube::Error,
    },

    /// A request about one object failed; the message is the API server's.
    #[error("cannot {action} {object}: {}", api_message(.source))]
    Api {
        action: &'static str,
        object: String,
        #[source]
        source: kube::Error,
    },

    /// Helm's refusal to adopt an object that belongs to someone else; `object` and
    /// `reason` are worded as Helm words them.
    #[error(
        "{object} exists and cannot be imported into the current release: {reason} ({holder}; set install/upgrade.takeOwnership to adopt it)"
    )]
    Ownership {
        object: String,
        reason: manifest::OwnershipMismatch,
        holder: String,
    },

    /// The object belongs to another release record deploying the same release name into
    /// the same namespace: its ownership metadata cannot tell the two apart.
    #[error(
        "{object} belongs to {owner}, not to this release; nothing was applied (a release is its storage namespace and name: give this one another releaseName or targetNamespace, or uninstall the other)"
    )]
    Foreign { object: String, owner: String },

    /// Fields another manager holds with another value, and the chart changed them: Helm 4
    /// refuses such an apply without `--force-conflicts`, and so does the release.
    #[error(
        "{object}: {conflicts}; nothing was applied. Stop rendering the field (or render the value they set), or set forceConflicts: true to overwrite it as `helm upgrade --force-conflicts` does"
    )]
    FieldConflict { object: String, conflicts: String },

    /// The release's manifest has an object of an API group discovery cannot serve now.
    #[error(
        "{object} is of {group_version}, which the API server cannot serve now: its APIService {apiservice} is unavailable (`kubectl get apiservice {apiservice}`); nothing was applied"
    )]
    Unavailable {
        object: String,
        group_version: String,
        apiservice: String,
    },

    /// Helm's client-side patch of an existing object could not be computed (the render
    /// helper computes it; `why` is its answer, or why nothing answered).
    #[error("cannot compute the client-side patch of {object}: {why}")]
    ClientSidePatch { object: String, why: String },

    #[error("cannot watch {object}: {message}")]
    Watch { object: String, message: String },

    #[error("CustomResourceDefinition {name} was not Established within {}s", .timeout.as_secs())]
    CrdNotEstablished { name: String, timeout: Duration },

    #[error("{object} was still there {}s after it was deleted", .timeout.as_secs())]
    DeleteTimedOut { object: String, timeout: Duration },

    /// The first hook that failed stops the run; `reason` says why (the pod or Job
    /// failed, it timed out, it could not be created, ...). Boxed, as it names objects
    /// and would make every apply error larger.
    #[error("{event} hook {name} ({path}) failed: {reason}")]
    HookFailed {
        event: String,
        name: String,
        path: String,
        reason: Box<HookFailure>,
    },
}

pub use crate::cluster::client::api_message;

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

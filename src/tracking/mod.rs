//! Config tracking (in the style of Wave, without a webhook): workloads of a release, and
//! workloads that opt in, carry `wheelhouse.dev/config-hash` in their pod template, an
//! HMAC (keyed per cluster, [`hash`]) over the ConfigMap and Secret data they consume. The hash is written into the
//! rendered manifest before the first apply ([`prepare_manifest`]), so the first pods
//! already have it; the [tracker](start) then watches the consumed objects and patches
//! the hash when their data changes, which rolls the workload once per debounced burst.
//! A workload whose required object does not exist yet is held with the scheduling gate
//! `wheelhouse.dev/config-pending`; the tracker removes it and sets the hash in one patch
//! when the object appears.
//!
//! Wiring: the engine calls [`prepare_manifest`] on every rendered manifest between render
//! and apply when the release has `configTracking.enabled` (the default), and stores the
//! prepared text as the revision's manifest; because the hash is computed from the live
//! data, re-applying it does not undo or repeat the tracker's patches. It starts one
//! tracker with [`start`] over its scope. Release workloads whose manifest was never
//! prepared carry no hash and are left alone by the tracker. [`tracked_workload`] says
//! what one live workload consumes and whether its pods are gated; the tracker's
//! [`TrackerHandle::tracked`] and the dashboard's detail view (which may run without
//! the lease, so without a tracker) both answer with it.

pub mod consumption;
pub mod debounce;
mod edit;
pub mod hash;
mod prepare;
mod tracker;
pub mod workload;

use thiserror::Error;

pub use consumption::{ConfigKind, ConsumedObject, ConsumedRef, Selection};
pub use hash::{HashKey, HashKeys};
pub use prepare::{
    ConfigKey, LiveNeeds, LiveState, PreparedManifest, live_objects_needed, prepare_manifest,
    rewrite, rewrite_manifest,
};
pub use tracker::{
    NamespaceFilter, Ownership, ReleaseId, Rolled, TrackedObject, TrackedWorkload, TrackerConfig,
    TrackerHandle, start, tracked_workload,
};
pub use workload::{WorkloadKind, WorkloadRef};

/// Pod-template annotation holding the config hash.
pub const CONFIG_HASH_ANNOTATION: &str = "wheelhouse.dev/config-hash";
/// Scheduling gate that holds pods while a required object is missing.
pub const CONFIG_PENDING_GATE: &str = "wheelhouse.dev/config-pending";
/// Workload annotation: `"true"` tracks a workload outside any release, `"false"` opts a
/// release workload out.
pub const TRACK_CONFIG_ANNOTATION: &str = "wheelhouse.dev/track-config";
/// Workload annotations naming objects the application reads through the API
/// (comma-separated names in the workload's namespace).
pub const EXTRA_CONFIGMAPS_ANNOTATION: &str = "wheelhouse.dev/extra-configmaps";
pub const EXTRA_SECRETS_ANNOTATION: &str = "wheelhouse.dev/extra-secrets";
/// Field manager of the tracker's patches (the engine's too).
pub const FIELD_MANAGER: &str = "wheelhouse";

#[derive(Debug, Error)]
pub enum Error {
    /// A manifest document is not valid YAML or its pod template is not a pod spec.
    #[error("{origin}: {message}")]
    Manifest { origin: String, message: String },

    #[error("cannot read {object}: {}", crate::helm::apply::api_message(.source))]
    Read {
        object: String,
        #[source]
        source: kube::Error,
    },
}

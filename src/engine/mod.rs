//! The reconcile engine: a library with a small surface. [`start`] takes a kube
//! `Client` and a config and returns an [`EngineHandle`] that streams per-release views
//! and accepts commands. The dashboard and `wheelhouse controller` are two front ends
//! over it; neither re-implements reconcile logic.
//!
//! Inside: one watch on HelmReleases feeds the views and, while this process holds the
//! engine lease, one worker per release (`worker`), which asks the pure planner (`plan`)
//! for the next action and runs it (`actions`); what both of those share is in `run`.

mod actions;
mod change_log;
mod claim;
mod coverage;
mod dispatcher;
mod error;
mod freeze;
mod freeze_expiry;
mod handle;
mod healing;
pub mod lease;
mod liveness;
mod mailbox;
mod namespaces;
mod object_changes;
mod options;
mod plan;
mod policy;
mod preview;
mod release_drift;
mod run;
mod startup;
mod status;
pub mod stored_actions;
mod undecodable;
mod vocabulary;
mod warmup;
mod worker;

pub use coverage::{Coverage, SHARD_LABEL, validate_shard};
pub use error::{Error, Result, Unable};
pub use freeze::{
    FREEZE_MANAGER, FROZEN_LABEL, FreezeDone, FreezeKind, FreezeOutcome, FreezeRecord,
    FreezeReport, FreezeRequest, FreezeSelection, freeze_releases, thaw_releases,
};
pub use handle::{EngineHandle, Pusher};
pub use lease::Role;
pub use options::EngineConfig;
pub use vocabulary::{
    Command, Connection, FixTimeline, LiveMap, LiveState, Phase, ReleaseKey, ReleaseMap,
    ReleaseView, Views, WaitView, changed_keys, new_token,
};

pub use startup::start;

/// How long a stopping engine waits for its workers to finish the step they are in (an
/// apply or hook is never interrupted; a wait ends at once, leaving its revision pending).
/// Below Kubernetes' default termination grace period of 30 s.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(20);

//! The reconcile engine: planning, actions, per-release workers and the handle front ends use.

pub mod lease;
pub mod plan;

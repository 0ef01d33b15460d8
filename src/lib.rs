//! wheelhouse: a terminal dashboard and reconcile engine for Helm releases declared as
//! `HelmRelease` resources (`wheelhouse.dev/v1alpha1`).

pub mod api;
pub mod apply;
pub mod chart;
pub mod cli;
pub mod client;
mod error;
pub mod release;
pub mod render;

pub use error::{Error, Result};

//! wheelhouse: a terminal dashboard and reconcile engine for Helm releases declared as
//! `HelmRelease` resources (`wheelhouse.dev/v1alpha1`).

pub mod age;
pub mod api;
pub mod apply;
pub mod cel;
pub mod chart;
pub mod cli;
pub mod client;
pub mod client_side_apply;
pub mod engine;
mod error;
pub mod events;
pub mod health;
pub mod install;
pub mod inventory;
pub mod mailbox;
pub mod migrate;
pub mod notify;
pub mod rbac;
pub mod receive;
pub mod release;
pub mod remote;
pub mod render;
pub mod safe_text;
pub mod slots;
pub mod source;
pub mod telemetry;
pub mod tenancy;
pub mod timeline;
pub mod tracking;
pub mod tui;
pub mod values;
pub mod yaml;

pub use error::{Error, Result};

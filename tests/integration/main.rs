//! The integration tests, as one binary: each module is one concern, run against the
//! local control plane that tests/test.sh starts (tests/cluster/up.sh). One binary links
//! the crate once (27 binaries each linked it before), and `cargo test NAME` filters
//! across all of them (`cargo test --test integration mttr::` runs one module).
//!
//! Four stay binaries of their own, which cargo runs one at a time, because they disturb
//! the whole cluster: `tests/outage.rs` freezes the API server, `tests/discovery.rs`
//! breaks an APIService every render sees, and the dashboards of `tests/tui_e2e.rs` and
//! `tests/kinds_e2e.rs` run engines that cover every namespace (and tui_e2e freezes the
//! API server too).

#[path = "../support/mod.rs"]
mod support;

mod actions;
mod apply;
mod cancellation;
mod cel;
mod control_plane;
mod coverage;
mod drift;
mod engine;
mod engine_recovery;
mod flux_fields;
mod freeze;
mod git;
mod health;
mod helm_parity;
mod image;
mod install;
mod isolation;
mod layering;
mod lease;
mod migrate;
mod mttr;
mod notify_e2e;
mod oci;
mod post_render;
mod rbac;
mod remote;
mod render;
mod safety;
mod source;
mod storage;
mod telemetry;
mod tenancy;
mod timeline;
mod tracking;
mod values;

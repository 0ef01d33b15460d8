//! wheelhouse: a terminal dashboard and reconcile engine for Helm releases declared as
//! `HelmRelease` resources (`wheelhouse.dev/v1alpha1`).
//!
//! The modules are layers, each using only those listed before it
//! (docs/development/layout.md; `tests/integration/layering.rs` holds them to it):
//! `text` (YAML 1.1, terminal-safe text, ages), `api` (the HelmRelease API, Flux's
//! kinds), `cluster` (the API server as an identity sees it: connections, tenancy,
//! remote clusters, outbound policy, RBAC, Events, slots), `helm` (the Helm library:
//! charts, values, sources, rendering, Helm's storage, apply), `health` (readiness and
//! waits), `tracking` (config tracking), `telemetry` (metrics), `webhooks`
//! (notifications out, receivers in), `engine` (the reconcile engine), and `frontend`
//! (the dashboard, the CLI and what they report: timeline, inventory, migrate, install).

pub mod text;

pub mod api;

pub mod cluster;

pub mod helm;

pub mod health;

pub mod tracking;

pub mod telemetry;

pub mod webhooks;

pub mod engine;

pub mod frontend;

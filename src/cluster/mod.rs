//! The API server as one identity sees it: connecting (kubeconfig, scope), whom a release
//! acts as and what it may do (tenancy, RBAC), where its sources may connect (the
//! outbound policy), remote clusters (`spec.kubeConfig`), Events, and the slots that let
//! urgent work go first.

pub mod client;
pub mod egress;
pub mod events;
pub mod fleet;
pub mod label_selector;
pub mod rbac;
pub mod remote;
pub mod slots;
pub mod tenancy;

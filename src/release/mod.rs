//! Helm releases: the record Helm stores, and its storage as Secrets.

mod model;

pub use model::*;

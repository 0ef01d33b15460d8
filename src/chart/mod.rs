//! Helm charts: the model Helm stores, and loading one from a directory or .tgz.

mod model;

pub use model::{Chart, File, Metadata};

//! Helm charts: the model Helm stores, and loading one from a directory or .tgz.

mod dependencies;
mod ignore;
pub mod load;
mod model;
mod yaml;

use std::path::PathBuf;

pub use dependencies::crds_to_install;
pub use load::{crds, load};
pub use model::{Chart, File, Metadata};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A chart file that is not valid YAML (or not the shape Helm expects).
    #[error("cannot load {file}: {message}")]
    Parse { file: String, message: String },

    /// The chart breaks one of Helm's rules (missing Chart.yaml, name or version, ...).
    #[error("invalid chart {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}

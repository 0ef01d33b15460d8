//! Helm charts: the model Helm stores, and loading one from a directory or .tgz.

mod dependencies;
mod ignore;
pub mod load;
mod model;
pub mod values_files;
mod yaml;

use std::path::PathBuf;

pub use dependencies::crds_to_install;
pub use ignore::{RuleError, RuleProblem};
pub use load::{EntryNameError, MetadataError, crds, load};
pub use model::{Chart, File, Metadata};
pub use yaml::FileError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A chart file that is not valid YAML (or not the shape Helm expects).
    #[error("cannot load {file}: {source}")]
    Parse { file: String, source: ParseError },

    /// The chart breaks one of Helm's rules (missing Chart.yaml, name or version, ...).
    #[error("invalid chart {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },

    /// Chart.yaml breaks one of Helm's metadata rules.
    #[error("invalid chart {}: {source}", path.display())]
    Metadata {
        path: PathBuf,
        source: load::MetadataError,
    },

    /// An archive entry whose name Helm refuses (absolute, or outside the chart).
    #[error("invalid chart {}: {source}", path.display())]
    ArchiveEntry {
        path: PathBuf,
        source: load::EntryNameError,
    },

    /// `chart.valuesFiles` could not be merged (a file missing, not a mapping, outside).
    #[error("chart.valuesFiles: {0}")]
    ValuesFiles(#[from] values_files::Error),
}

/// What is wrong with a chart file that does not read.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    #[error(transparent)]
    File(#[from] yaml::FileError),
    /// A lock file whose dependencies are not Helm's shape.
    #[error(transparent)]
    Lock(#[from] load::MetadataError),
    #[error(transparent)]
    Ignore(#[from] ignore::RuleError),
}

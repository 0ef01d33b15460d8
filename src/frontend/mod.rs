//! The front ends over the engine, and what they report: the dashboard (`tui`), the
//! command line (`cli`), the Timeline of changes, the inventory of every kind of release,
//! `wheelhouse migrate` and the manifests of `wheelhouse install`.

pub mod cli;
pub mod install;
pub mod inventory;
pub mod migrate;
pub mod timeline;
pub mod tui;

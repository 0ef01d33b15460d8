//! The Helm library: charts and their values, where charts come from (repositories,
//! registries, Git, paths), rendering them as `helm install` would, Helm's storage of
//! releases, and applying, pruning and hooking a release's objects as Helm does.

pub mod apply;
pub mod chart;
pub mod release;
pub mod render;
pub mod source;
pub mod values;

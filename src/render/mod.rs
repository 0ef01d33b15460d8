//! Rendering a chart into its manifest and hooks.
//!
//! [`Renderer`] is the seam: the engine hands it a chart, values and capabilities and gets
//! back Helm's two outputs, the release manifest and the hooks. [`HelmTemplate`], the
//! first implementation, runs `helm template`; apply, hooks, waits and storage stay
//! wheelhouse's own, so a wait can be cancelled without cancelling anything else.

mod helm_template;
mod split;

use std::path::Path;
use std::time::Duration;

use futures::future::BoxFuture;
use thiserror::Error;

use crate::release::Hook;

pub use helm_template::HelmTemplate;
pub use split::split_rendered;

/// What to render. No `Debug`: `values` may hold secrets.
#[derive(Clone, Copy)]
pub struct RenderRequest<'a> {
    pub release_name: &'a str,
    pub namespace: &'a str,
    /// A chart directory or `.tgz`.
    pub chart_path: &'a Path,
    /// The user values (merged `valuesFrom` and inline); the chart's defaults apply below.
    pub values: &'a serde_json::Map<String, serde_json::Value>,
    /// `.Release.Revision`. `helm template` cannot set it (it always renders revision 1);
    /// kept for renderers that can.
    pub revision: i32,
    /// `.Release.IsUpgrade` instead of `.Release.IsInstall`.
    pub is_upgrade: bool,
    /// `.Capabilities.KubeVersion`, e.g. `v1.36.3`; Helm's default when `None`.
    pub kube_version: Option<&'a str>,
    /// `.Capabilities.APIVersions`, e.g. `monitoring.coreos.com/v1` or
    /// `monitoring.coreos.com/v1/ServiceMonitor`.
    pub api_versions: &'a [String],
}

/// Helm's split of a rendered chart.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rendered {
    /// The non-hook documents in Helm's install order, in Helm's format: each
    /// `---\n# Source: <template path>\n<document>\n`, as `helm get manifest` shows it.
    pub manifest: String,
    /// Documents annotated `helm.sh/hook`, in Helm's kind order.
    pub hooks: Vec<Hook>,
}

pub trait Renderer: Send + Sync {
    fn render<'a>(&'a self, req: RenderRequest<'a>) -> BoxFuture<'a, Result<Rendered, Error>>;

    /// Whether this renderer can work at all (its program is found and runs), checked
    /// once when an engine starts; `Ok` carries a version to log. The error says how to
    /// fix it.
    fn check(&self) -> BoxFuture<'_, Result<String, Error>>;
}

#[derive(Debug, Error)]
pub enum Error {
    /// The renderer cannot work at all; the message says how to fix it.
    #[error("{0}")]
    Unavailable(String),

    #[error("cannot run {helm}: {source}")]
    Spawn {
        helm: String,
        #[source]
        source: std::io::Error,
    },

    #[error("helm template timed out after {}s", .timeout.as_secs())]
    TimedOut { timeout: Duration },

    /// helm exited with an error; `stderr` holds the end of what it said (the template
    /// error), fit for a status message.
    #[error("helm template failed: {stderr}")]
    Failed { status: String, stderr: String },

    /// The rendered output is not what Helm writes (not UTF-8, or a document that is not
    /// YAML).
    #[error("unexpected helm template output: {0}")]
    Output(String),

    #[error("cannot encode the values: {0}")]
    Values(#[source] serde_json::Error),
}

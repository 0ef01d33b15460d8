//! Rendering a chart into its manifest and hooks.
//!
//! [`Renderer`] is the seam: the engine hands it a chart, values and the release's newest
//! revision and gets back Helm's two outputs, the release manifest and the hooks, rendered
//! as `helm install`/`helm upgrade` would render them on the same cluster (Capabilities
//! from discovery, live `lookup`, Helm's Revision). Two implementations: the default,
//! [`HelperRenderer`], asks wheelhouse's render helper (a long-lived program on Helm's Go
//! SDK) and keeps discovery warm between renders; [`HelmRenderer`], the fallback, runs
//! the helm CLI for a server dry-run per render. Apply, hooks, waits and storage stay
//! wheelhouse's own, so a wait can be cancelled without cancelling anything else.

pub mod cel;
mod discovery;
mod helm;
mod helper;
mod helper_cel;
mod helper_patches;
mod helper_process;

use std::path::Path;
use std::time::Duration;

use futures::future::BoxFuture;
use thiserror::Error;

use crate::helm::release::{Hook, Status};

pub use discovery::{
    Discovery, SharedReads, apiservice_of, discover, discovery_state, unavailable_groups,
};

/// What a render's `unavailable` says when Helm's own discovery left a group out.
const PARTIAL: &str = "a group helm could not discover (an orphaned API service)";

/// Said in a render error when the chart needs an API group discovery cannot serve.
pub const NEEDS_UNAVAILABLE_GROUP: &str =
    "the chart needs an API group the API server cannot serve now";
pub use helm::HelmRenderer;
pub use helper::HelperRenderer;
pub use helper_process::{FaultLabels, HelperFault, helper_restarts};

/// Which program renders: `helper` (the default) or `helm` (the CLI, one process per
/// render).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Kind {
    #[default]
    Helper,
    Helm,
}

/// A renderer chosen by `--renderer`/`$WHEELHOUSE_RENDERER`, with where its program is
/// (none: its default place; see [`HelperRenderer::from_env`], [`HelmRenderer::from_env`]).
#[derive(Debug, Clone, Default)]
pub struct Choice {
    pub kind: Kind,
    pub helper: Option<std::path::PathBuf>,
    pub helm: Option<std::path::PathBuf>,
    /// How long one render may take (none: the renderer's default, 60 s).
    pub timeout: Option<Duration>,
}

impl Choice {
    /// The choice of `$WHEELHOUSE_RENDERER` (`helper` when unset or unknown: the CLI
    /// refuses an unknown one before this is asked).
    pub fn from_env() -> Self {
        let kind = match std::env::var("WHEELHOUSE_RENDERER").as_deref() {
            Ok("helm") => Kind::Helm,
            _ => Kind::Helper,
        };
        Self {
            kind,
            ..Self::default()
        }
    }

    /// The renderer for the cluster (and identity) the engine uses.
    pub fn renderer(
        &self,
        kubeconfig: Option<&Path>,
        context: Option<&str>,
    ) -> std::sync::Arc<dyn Renderer> {
        match self.kind {
            Kind::Helper => {
                let timeout = self.timeout.unwrap_or(HelperRenderer::DEFAULT_TIMEOUT);
                let program = self.helper.clone().unwrap_or_else(helper::default_program);
                std::sync::Arc::new(
                    HelperRenderer::new(program, timeout).with_cluster(kubeconfig, context),
                )
            }
            Kind::Helm => {
                let timeout = self.timeout.unwrap_or(HelmRenderer::DEFAULT_TIMEOUT);
                let program = self.helm.clone().unwrap_or_else(helm::default_program);
                std::sync::Arc::new(
                    HelmRenderer::new(program, timeout).with_cluster(kubeconfig, context),
                )
            }
        }
    }
}

/// What to render. No `Debug`: `values` may hold secrets.
#[derive(Clone, Copy)]
pub struct RenderRequest<'a> {
    pub release_name: &'a str,
    /// The release namespace.
    pub namespace: &'a str,
    /// A chart directory or `.tgz`.
    pub chart_path: &'a Path,
    /// The user values (merged `valuesFrom` and inline); the chart's defaults apply below.
    pub values: &'a serde_json::Map<String, serde_json::Value>,
    /// The release's newest stored revision; `None` for a first install. Helm derives
    /// `.Release.Revision` (its version + 1) and IsInstall/IsUpgrade from it.
    pub previous: Option<Previous<'a>>,
    /// A digest of the discovery the engine read just before ([`Discovery::digest`]): a
    /// renderer that keeps discovery between renders reads it again when this changes.
    /// `None`: read it afresh.
    pub discovery: Option<&'a str>,
    /// Render (and `lookup`) as this Kubernetes user, by impersonation: the release's
    /// ServiceAccount (see [`crate::cluster::tenancy`]). `None`: the renderer's own identity.
    pub as_user: Option<&'a str>,
    /// The kubeconfig of the release's remote cluster (`spec.kubeConfig`, checked), in
    /// place of the renderer's own cluster; `None`: the renderer's.
    pub kubeconfig: Option<&'a Path>,
    /// Urgent renders (a fix for a stuck or failed release, an operator's request) take
    /// the next render slot ahead of routine ones.
    pub priority: crate::cluster::slots::Priority,
    /// The HelmRelease's `spec.postRenderers`, applied to what Helm renders (hooks
    /// included) as Flux's helm-controller applies them; only the render helper can
    /// (the helm CLI renderer refuses a request that has any).
    pub post_renderers: &'a [crate::api::PostRenderer],
    /// What the post-renderers see of Helm's output (Helm 4's strategies).
    pub post_render_strategy: crate::api::PostRenderStrategy,
    /// Skip validating the values against the chart's `values.schema.json` (Helm 4's
    /// `--skip-schema-validation`).
    pub skip_schema_validation: bool,
    /// The chart's default values made of `chart.valuesFiles`, replacing its values.yaml
    /// (none: its own).
    pub chart_values: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// With `upgrade.preserveValues`, the revision whose values the upgrade keeps (Helm's
    /// `--reuse-values`, see [`crate::helm::release::values_kept_from`]); none: the values are
    /// the whole desired state (`--reset-values`, as Flux passes them otherwise).
    pub kept: Option<Kept<'a>>,
}

/// The revision an upgrade with `--reuse-values` keeps the values of: Helm merges the
/// request's values over its values and renders with its chart's values in place of the
/// new chart's.
#[derive(Clone, Copy)]
pub struct Kept<'a> {
    pub revision: Previous<'a>,
    pub config: &'a serde_json::Map<String, serde_json::Value>,
    pub chart_values: &'a serde_json::Map<String, serde_json::Value>,
}

impl<'a> Kept<'a> {
    pub fn of(release: &'a crate::helm::release::Release) -> Self {
        static NONE: std::sync::OnceLock<serde_json::Map<String, serde_json::Value>> =
            std::sync::OnceLock::new();
        Self {
            revision: Previous::of(release),
            config: &release.config,
            chart_values: release
                .chart
                .as_ref()
                .map_or_else(|| NONE.get_or_init(serde_json::Map::new), |c| &c.values),
        }
    }
}

impl RenderRequest<'_> {
    /// Whether a post-renderer would change what Helm renders (one with a `kustomize`
    /// block: an entry without one does nothing, in Flux too).
    pub fn post_renders(&self) -> bool {
        self.post_renderers.iter().any(|p| p.kustomize.is_some())
    }
}

/// The newest stored revision, as Helm's upgrade reads it.
#[derive(Debug, Clone, Copy)]
pub struct Previous<'a> {
    pub version: i32,
    pub status: Status,
    pub chart_name: &'a str,
    pub chart_version: &'a str,
}

impl<'a> Previous<'a> {
    pub fn of(release: &'a crate::helm::release::Release) -> Self {
        let meta = release.chart.as_ref().and_then(|c| c.metadata.as_ref());
        Self {
            version: release.version,
            status: release.info.as_ref().map(|i| i.status).unwrap_or_default(),
            chart_name: meta.map_or("", |m| m.name.as_str()),
            chart_version: meta.map_or("", |m| m.version.as_str()),
        }
    }
}

/// The status Helm's upgrade is shown for the newest revision. A revision still pending
/// (a wait wheelhouse is about to cancel) reads as superseded, which is what it becomes
/// before the next revision is stored.
pub(crate) fn seed_status(status: Status) -> Status {
    match status {
        s if s.is_pending() => Status::Superseded,
        Status::Uninstalling => Status::Failed,
        s => s,
    }
}

/// The part of Helm's release JSON a render needs, as the helm CLI prints it
/// (`--output json`) and the render helper answers it.
#[derive(serde::Deserialize, Default)]
struct ReleaseOutput {
    #[serde(default)]
    manifest: String,
    #[serde(default)]
    hooks: Option<Vec<Hook>>,
    #[serde(default)]
    version: i32,
    /// With `--reuse-values`: the values Helm stores (the helm CLI prints them as
    /// `config`, the render helper too).
    #[serde(default)]
    config: Option<serde_json::Map<String, serde_json::Value>>,
    /// With `--reuse-values`, the chart's values Helm stores: the helm CLI prints them in
    /// `chart`, the render helper as `chartValues`.
    #[serde(default, rename = "chartValues")]
    chart_values: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    chart: Option<ChartValuesOutput>,
}

#[derive(serde::Deserialize, Default)]
struct ChartValuesOutput {
    #[serde(default)]
    values: Option<serde_json::Map<String, serde_json::Value>>,
}

impl ReleaseOutput {
    /// What was rendered, with the `group/version`s discovery left out (see
    /// [`Rendered::unavailable`]).
    fn rendered(self, unavailable: Vec<String>, kept: bool) -> Rendered {
        let chart_values = self
            .chart_values
            .or_else(|| self.chart.and_then(|c| c.values));
        Rendered {
            manifest: self.manifest,
            hooks: self.hooks.unwrap_or_default(),
            revision: self.version,
            unavailable,
            merged: kept.then(|| MergedValues {
                config: self.config.unwrap_or_default(),
                chart_values: chart_values.unwrap_or_default(),
            }),
        }
    }
}

/// Helm's split of a rendered chart.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rendered {
    /// The non-hook documents in Helm's install order, in Helm's format: each
    /// `---\n# Source: <template path>\n<document>\n`, as `helm get manifest` shows it.
    pub manifest: String,
    /// Documents annotated `helm.sh/hook`.
    pub hooks: Vec<Hook>,
    /// The `.Release.Revision` the templates saw.
    pub revision: i32,
    /// API `group/version`s discovery left out when this was rendered (an APIService
    /// whose backend is down): the render may lack what it renders only when they are
    /// served, so nothing is pruned on its account.
    pub unavailable: Vec<String>,
    /// With [`RenderRequest::kept`]: the values Helm's upgrade stores with the revision.
    pub merged: Option<MergedValues>,
}

/// What an upgrade with `--reuse-values` stores: the request's values merged over the
/// kept revision's, and the kept revision's chart values (coalesced with its values) as
/// the chart's values. No `Debug`: values may hold secrets.
#[derive(Clone, PartialEq, Default)]
pub struct MergedValues {
    pub config: serde_json::Map<String, serde_json::Value>,
    pub chart_values: serde_json::Map<String, serde_json::Value>,
}

impl std::fmt::Debug for MergedValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MergedValues { .. }")
    }
}

pub trait Renderer: Send + Sync {
    fn render<'a>(&'a self, req: RenderRequest<'a>) -> BoxFuture<'a, Result<Rendered, Error>>;

    /// Whether this renderer can work at all (its program is found and runs), checked
    /// once when an engine starts; `Ok` carries a version to log. The error says how to
    /// fix it.
    fn check(&self) -> BoxFuture<'_, Result<String, Error>>;

    /// What evaluates Flux's CEL expressions beside this renderer (the render helper);
    /// `None`: releases with CEL expressions are refused, saying why.
    fn cel(&self) -> Option<std::sync::Arc<dyn crate::helm::render::cel::CelEvaluator>> {
        None
    }

    /// What computes client-side apply's patches beside this renderer (the render
    /// helper); `None`: releases that apply client-side are refused, saying why.
    fn client_side(
        &self,
    ) -> Option<std::sync::Arc<dyn crate::helm::apply::client_side::ClientSidePatcher>> {
        None
    }
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

    #[error("rendering timed out after {}s", .timeout.as_secs())]
    TimedOut { timeout: Duration },

    /// The render helper failed, not the chart: it exited, hung or answered garbage, and
    /// a fresh one failed the same render again. The engine's fault, never the release's.
    #[error(
        "the render helper {fault} twice rendering this release; it is started again and the release tried again"
    )]
    Helper { fault: HelperFault },

    /// helm exited with an error; `stderr` holds the end of what it said (the template
    /// error), fit for a status message.
    #[error("helm failed to render the chart: {stderr}")]
    Failed { status: String, stderr: String },

    /// Discovery itself could not be read.
    #[error("cannot read the API server's discovery: {0}")]
    Discovery(String),

    /// The rendered output is not what Helm writes.
    #[error("unexpected helm output: {0}")]
    Output(String),

    #[error("cannot encode the values: {0}")]
    Values(#[source] serde_json::Error),
}

/// A renderer with at most `slots` renders at once (each is a helm process: its memory
/// and CPU are what a burst of reconciles would otherwise multiply). Renders waiting
/// for a slot are the engine's queue, published as a gauge; urgent ones go first.
pub struct Throttled {
    inner: std::sync::Arc<dyn Renderer>,
    slots: crate::cluster::slots::Slots,
    queued: prometheus_client::metrics::gauge::Gauge,
    precedence: crate::cluster::slots::Precedence,
}

impl Throttled {
    pub fn new(
        inner: std::sync::Arc<dyn Renderer>,
        slots: usize,
        queued: prometheus_client::metrics::gauge::Gauge,
    ) -> Self {
        Self {
            inner,
            slots: crate::cluster::slots::Slots::new(slots),
            queued,
            precedence: crate::cluster::slots::Precedence::default(),
        }
    }

    /// Routine renders give way to the urgent work `precedence` counts.
    pub fn giving_way_to(mut self, precedence: crate::cluster::slots::Precedence) -> Self {
        self.precedence = precedence;
        self
    }
}

impl Renderer for Throttled {
    fn render<'a>(&'a self, req: RenderRequest<'a>) -> BoxFuture<'a, Result<Rendered, Error>> {
        Box::pin(async move {
            self.queued.inc();
            if req.priority == crate::cluster::slots::Priority::Routine {
                self.precedence.give_way().await;
            }
            let _permit = self.slots.acquire(req.priority).await;
            self.queued.dec();
            self.inner.render(req).await
        })
    }

    fn check(&self) -> BoxFuture<'_, Result<String, Error>> {
        self.inner.check()
    }

    fn cel(&self) -> Option<std::sync::Arc<dyn crate::helm::render::cel::CelEvaluator>> {
        self.inner.cel()
    }

    fn client_side(
        &self,
    ) -> Option<std::sync::Arc<dyn crate::helm::apply::client_side::ClientSidePatcher>> {
        self.inner.client_side()
    }
}

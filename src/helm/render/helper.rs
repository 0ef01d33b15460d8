//! The [`Renderer`] that asks wheelhouse's render helper, a long-lived Go program built on
//! Helm's own SDK (`src/helm/render/helper/`), to render as `helm upgrade --install
//! --dry-run=server` does, without a process per render.
//!
//! The helper is started once, on the first render (or [`Renderer::check`]), and speaks
//! newline-delimited JSON on stdin/stdout: a request carries an id, the chart, the values,
//! the release's newest revision (the seed of Helm's in-memory storage, as the helm CLI
//! renderer seeds it), the cluster and identity to render against, and a digest of the
//! API server's discovery document. Renders run concurrently in the helper and answers
//! come back by id. What stays warm between renders is discovery: the helper keeps it
//! in memory per cluster and identity, and drops it when the digest changes (a CRD
//! created, an APIService gone stale), so `.Capabilities` is what a fresh `helm` would
//! see. `lookup` is never cached.
//!
//! A helper that exits (killed, crashed) fails the renders it had and is started again
//! for the next one; after a render times out, the next render gets a fresh helper. Values travel only over the pipe: never on disk, never in a
//! process listing.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;

use super::helper_process::{
    Asked, FaultLabels, HOW, HelperFault, Process, Slot, StartError, helper_restarts, running,
};
use super::{Error, RenderRequest, Rendered, Renderer, seed_status};

/// The helper's program name, looked for beside wheelhouse's own executable, then on
/// `PATH`.
pub const PROGRAM: &str = "wheelhouse-render";

/// The cluster and identity renders run against (the engine's own).
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "camelCase")]
struct Cluster {
    kubeconfig: String,
    context: String,
    as_user: String,
    as_groups: Vec<String>,
}

pub struct HelperRenderer {
    program: PathBuf,
    timeout: Duration,
    cluster: Cluster,
    process: Slot,
}

impl HelperRenderer {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    pub fn new(program: PathBuf, timeout: Duration) -> Self {
        Self {
            program,
            timeout,
            cluster: Cluster::default(),
            process: Slot::default(),
        }
    }

    /// `$WHEELHOUSE_RENDER_HELPER`, else `wheelhouse-render` beside this executable,
    /// else on `PATH`; a 60 s timeout.
    pub fn from_env() -> Self {
        Self::new(default_program(), Self::DEFAULT_TIMEOUT)
    }

    /// Points renders at the cluster (and identity) the engine uses. None: the helper's
    /// defaults ($KUBECONFIG, ~/.kube/config, in-cluster), as helm's.
    pub fn with_cluster(mut self, kubeconfig: Option<&Path>, context: Option<&str>) -> Self {
        self.cluster.kubeconfig = kubeconfig
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        self.cluster.context = context.unwrap_or_default().to_owned();
        self
    }

    /// Renders as another identity, as the engine's client does when it impersonates.
    pub fn impersonate(mut self, user: &str, groups: &[String]) -> Self {
        self.cluster.as_user = user.to_owned();
        self.cluster.as_groups = groups.to_vec();
        self
    }

    /// The running helper, started if there is none or the last one exited.
    async fn process(&self) -> Result<Arc<Process>, StartError> {
        running(&self.program, &self.process, self.timeout).await
    }

    /// Renders on the running helper; when the helper fails (it exits, hangs, or writes
    /// what is not an answer) the render is tried once more on a new one, so a helper's
    /// death costs a release nothing. Failing twice is [`Error::Helper`]: the engine's
    /// fault, which never counts against a release's retries.
    async fn run(&self, req: RenderRequest<'_>) -> Result<Rendered, Error> {
        let mut fault = None;
        for attempt in 1..=2 {
            let process = match self.process().await {
                Ok(process) => process,
                Err(StartError::Unavailable(e)) => return Err(e),
                // Killed or hung before it said it was ready: a crash like any other.
                Err(StartError::Failed(f)) => {
                    tracing::error!(fault = %f, attempt, release = req.release_name, "the render helper failed as it started; the render is tried again on a new helper");
                    helper_restarts()
                        .get_or_create(&FaultLabels::new(f.label()))
                        .inc();
                    fault = Some(f);
                    continue;
                }
            };
            match self.render_once(&process, req).await {
                Ok(rendered) => return rendered,
                Err(f) => {
                    self.replace(&process, &f).await;
                    tracing::warn!(%f, attempt, release = req.release_name, "the render helper failed a render; it is tried again on a new helper");
                    fault = Some(f);
                }
            }
        }
        Err(Error::Helper {
            fault: fault.expect("two attempts failed"),
        })
    }

    /// Takes `process` out of use (the next render starts a new helper), counting why.
    /// A helper that hung is stopped once the renders it still has are done or have
    /// timed out too (Helm cannot interrupt a render: its `lookup` has no deadline).
    async fn replace(&self, process: &Arc<Process>, fault: &HelperFault) {
        let mut slot = self.process.lock().await;
        if slot.as_ref().is_some_and(|p| Arc::ptr_eq(p, process)) {
            *slot = None;
            // An exit is logged and counted where it is seen (`reap`).
            if !matches!(fault, HelperFault::Exited(_)) {
                tracing::error!(%fault, "the render helper is replaced; a new one takes the next renders");
                helper_restarts()
                    .get_or_create(&FaultLabels::new(fault.label()))
                    .inc();
            }
        }
    }

    /// One render on `process`: `Ok` with what Helm said (a render or a template error),
    /// `Err` when the helper itself failed.
    async fn render_once(
        &self,
        process: &Process,
        req: RenderRequest<'_>,
    ) -> Result<Result<Rendered, Error>, HelperFault> {
        // The release's identity replaces the renderer's own for this render; the helper
        // keeps discovery per identity.
        let mut cluster = match req.as_user {
            Some(user) => Cluster {
                as_user: user.to_owned(),
                as_groups: Vec::new(),
                ..self.cluster.clone()
            },
            None => self.cluster.clone(),
        };
        // A remote release's cluster replaces the renderer's, with its one context.
        if let Some(kubeconfig) = req.kubeconfig {
            cluster.kubeconfig = kubeconfig.display().to_string();
            cluster.context = String::new();
        }
        let request = Request {
            release: req.release_name,
            namespace: req.namespace,
            chart: req.chart_path,
            values: req.values,
            previous: req.previous.map(Seed::of),
            cluster: &cluster,
            discovery: req.discovery.unwrap_or_default(),
            post_renderers: req.post_renderers,
            post_render_strategy: req.post_render_strategy,
            skip_schema_validation: req.skip_schema_validation,
            chart_values: req.chart_values,
            kept: req.kept.map(|k| KeptSeed {
                revision: Seed::of(k.revision),
                config: k.config,
                chart_values: k.chart_values,
            }),
        };
        let response = match tokio::time::timeout(self.timeout, process.ask(&request)).await {
            Err(_) => return Err(HelperFault::Hung(self.timeout)),
            Ok(Err(Asked::Gone)) => return Err(process.fault()),
            Ok(Err(Asked::Error(e))) => return Ok(Err(e)),
            Ok(Ok(response)) => response,
        };
        if let Some(error) = response.error {
            // As the helm CLI says it, so a message reads the same from either renderer.
            return Ok(Err(Error::Failed {
                status: "render helper: error".into(),
                stderr: format!("Error: {error}"),
            }));
        }
        Ok(Ok(response.release.rendered(
            if response.partial {
                vec![super::PARTIAL.into()]
            } else {
                Vec::new()
            },
            req.kept.is_some(),
        )))
    }
}

impl Renderer for HelperRenderer {
    fn render<'a>(&'a self, req: RenderRequest<'a>) -> BoxFuture<'a, Result<Rendered, Error>> {
        Box::pin(self.run(req))
    }

    fn cel(&self) -> Option<Arc<dyn crate::helm::render::cel::CelEvaluator>> {
        Some(Arc::new(super::helper_cel::HelperCel::new(
            self.program.clone(),
            self.process.clone(),
        )))
    }

    fn client_side(&self) -> Option<Arc<dyn crate::helm::apply::client_side::ClientSidePatcher>> {
        Some(Arc::new(super::helper_patches::HelperPatcher::new(
            self.program.clone(),
            self.process.clone(),
        )))
    }

    /// Starts the helper: it runs and answers, and says which Helm it is built on.
    fn check(&self) -> BoxFuture<'_, Result<String, Error>> {
        Box::pin(async move {
            // A helper killed or hung while it starts is started again once: only a helper
            // that cannot start at all (missing, not the helper, never ready) makes this
            // engine unable.
            let process = match self.process().await {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(error = %e, "the render helper did not start; trying once more");
                    self.process().await.map_err(|e| match e {
                        StartError::Failed(HelperFault::Hung(within)) => {
                            Error::Unavailable(format!(
                                "{} did not say it was ready within {}s; {HOW}",
                                self.program.display(),
                                within.as_secs()
                            ))
                        }
                        e => e.into_error(),
                    })?
                }
            };
            Ok(format!("{PROGRAM} (helm {})", process.helm))
        })
    }
}

/// `$WHEELHOUSE_RENDER_HELPER`, else `wheelhouse-render` beside the running executable
/// when there is one, else the bare name (found on `PATH`).
pub(super) fn default_program() -> PathBuf {
    if let Some(path) = std::env::var_os("WHEELHOUSE_RENDER_HELPER").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join(PROGRAM)))
        .filter(|beside| beside.is_file())
        .unwrap_or_else(|| PathBuf::from(PROGRAM))
}

#[derive(Serialize)]
struct Request<'a> {
    release: &'a str,
    namespace: &'a str,
    chart: &'a Path,
    values: &'a serde_json::Map<String, serde_json::Value>,
    previous: Option<Seed<'a>>,
    cluster: &'a Cluster,
    discovery: &'a str,
    /// Flux's shape, applied by the helper with kustomize (`postrender.go`).
    #[serde(rename = "postRenderers")]
    post_renderers: &'a [crate::api::PostRenderer],
    #[serde(rename = "postRenderStrategy")]
    post_render_strategy: crate::api::PostRenderStrategy,
    #[serde(rename = "skipSchemaValidation")]
    skip_schema_validation: bool,
    /// Replaces the chart's values.yaml (`render.go`'s `replaceDefaultValues`).
    #[serde(rename = "chartValues", skip_serializing_if = "Option::is_none")]
    chart_values: Option<&'a serde_json::Map<String, serde_json::Value>>,
    /// With `--reuse-values`, the revision whose values are kept (`render.go`'s `kept`).
    #[serde(skip_serializing_if = "Option::is_none")]
    kept: Option<KeptSeed<'a>>,
}

/// The release's newest revision, as Helm's upgrade reads it from storage.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Seed<'a> {
    version: i32,
    status: &'a str,
    chart: &'a str,
    chart_version: &'a str,
}

impl<'a> Seed<'a> {
    fn of(p: super::Previous<'a>) -> Self {
        Self {
            version: p.version,
            status: seed_status(p.status).as_str(),
            chart: p.chart_name,
            chart_version: p.chart_version,
        }
    }
}

/// A seeded revision with its values and its chart's.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct KeptSeed<'a> {
    #[serde(flatten)]
    revision: Seed<'a>,
    config: &'a serde_json::Map<String, serde_json::Value>,
    chart_values: &'a serde_json::Map<String, serde_json::Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_helper_says_how_to_fix_it() {
        let renderer = HelperRenderer::new(
            PathBuf::from("/nonexistent/wheelhouse-render"),
            Duration::from_secs(5),
        );
        let err = renderer.check().await.unwrap_err().to_string();
        assert!(
            err.contains("cannot run /nonexistent/wheelhouse-render"),
            "{err}"
        );
        assert!(err.contains("src/helm/render/helper/build.sh"), "{err}");
        assert!(err.contains("--renderer helm"), "{err}");
    }

    #[tokio::test]
    async fn a_program_that_is_not_the_helper_is_refused() {
        // `cat` echoes nothing before its input: not ready. `echo` says something else.
        let renderer = HelperRenderer::new(PathBuf::from("echo"), Duration::from_secs(5));
        let err = renderer.check().await.unwrap_err().to_string();
        assert!(err.contains("is not a working render helper"), "{err}");
    }

    /// A stand-in helper: the first time it starts it runs `first` (a kill, a hang), then
    /// it is ready, answering one render with a manifest. The marker says it started once.
    fn fails_once_helper(dir: &Path, first: &str) -> (PathBuf, PathBuf) {
        let marker = dir.join("started-once");
        let program = script(
            dir,
            &format!(
                "#!/bin/sh\n\
                 if [ ! -e {marker} ]; then : > {marker}; {first}; fi\n\
                 echo '{{\"ready\":true,\"helm\":\"v4\"}}'\n\
                 read line\n\
                 echo '{{\"id\":1,\"manifest\":\"kind: ConfigMap\",\"version\":1}}'\n\
                 read line\n",
                marker = marker.display()
            ),
        );
        (program, marker)
    }

    /// A render of the chart `/charts/web` with no values.
    async fn render_web(renderer: &HelperRenderer) -> Result<Rendered, Error> {
        renderer
            .render(RenderRequest {
                release_name: "web",
                namespace: "prod",
                chart_path: Path::new("/charts/web"),
                values: &serde_json::Map::new(),
                previous: None,
                discovery: None,
                as_user: None,
                kubeconfig: None,
                priority: crate::cluster::slots::Priority::Routine,
                post_renderers: &[],
                post_render_strategy: Default::default(),
                skip_schema_validation: false,
                chart_values: None,
                kept: None,
            })
            .await
    }

    /// Written by a child process (`install`), not by this one: a file this process holds
    /// open for writing can be inherited by another test's fork and then cannot be run
    /// ("Text file busy").
    fn script(dir: &Path, text: &str) -> PathBuf {
        let source = dir.join("script.txt");
        std::fs::write(&source, text).unwrap();
        let program = dir.join("wheelhouse-render");
        let installed = std::process::Command::new("install")
            .args(["-m", "0755"])
            .arg(&source)
            .arg(&program)
            .status()
            .unwrap();
        assert!(installed.success());
        program
    }

    #[tokio::test]
    async fn a_helper_killed_as_it_starts_costs_the_render_nothing() {
        let dir = tempfile::tempdir().unwrap();
        // Killed by a signal the first time, as an OOM kill would.
        let (program, _) = fails_once_helper(dir.path(), "kill -9 $$");
        let renderer = HelperRenderer::new(program, Duration::from_secs(5));
        let rendered = render_web(&renderer).await.unwrap();
        assert_eq!(rendered.manifest, "kind: ConfigMap");
    }

    /// Every render waits while a helper starts: one frozen there (SIGSTOP, a starved
    /// node) is given up after the render's timeout, and the render goes to a new one.
    #[tokio::test]
    async fn a_helper_hung_as_it_starts_is_replaced_and_costs_the_render_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (program, marker) = fails_once_helper(dir.path(), "exec sleep 60");
        let renderer = HelperRenderer::new(program, Duration::from_secs(1));
        let started = std::time::Instant::now();
        let rendered = render_web(&renderer).await.unwrap();
        assert_eq!(rendered.manifest, "kind: ConfigMap");
        assert!(marker.exists(), "the first start hung");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }

    #[tokio::test]
    async fn a_program_never_ready_is_refused_saying_how_to_fix_it() {
        let dir = tempfile::tempdir().unwrap();
        let program = script(dir.path(), "#!/bin/sh\nexec sleep 60\n");
        let renderer = HelperRenderer::new(program, Duration::from_secs(1));
        let err = renderer.check().await.unwrap_err().to_string();
        assert!(err.contains("did not say it was ready within 1s"), "{err}");
        assert!(err.contains("--renderer helm"), "{err}");
    }

    #[tokio::test]
    async fn a_helper_killed_at_every_start_is_the_engines_fault_not_the_releases() {
        let dir = tempfile::tempdir().unwrap();
        let program = script(dir.path(), "#!/bin/sh\nkill -9 $$\n");
        let renderer = HelperRenderer::new(program, Duration::from_secs(5));
        let err = render_web(&renderer).await.unwrap_err();
        assert!(matches!(err, Error::Helper { .. }), "{err}");
    }

    #[test]
    fn the_request_is_what_the_helper_reads() {
        use super::super::helper_process::Numbered;
        let values = serde_json::Map::from_iter([("a".to_owned(), serde_json::json!(1))]);
        let chart_values =
            serde_json::Map::from_iter([("replicas".to_owned(), serde_json::json!(1))]);
        let cluster = Cluster {
            kubeconfig: "/k".into(),
            context: "c".into(),
            ..Cluster::default()
        };
        let post_renderers = [crate::api::PostRenderer {
            kustomize: Some(crate::api::Kustomize {
                patches: vec![crate::api::Patch {
                    patch: "- op: remove\n  path: /spec/replicas\n".into(),
                    target: Some(crate::api::Selector {
                        kind: "Deployment".into(),
                        label_selector: "app=web".into(),
                        ..Default::default()
                    }),
                }],
                images: vec![crate::api::Image {
                    name: "nginx".into(),
                    new_tag: "1.27".into(),
                    ..Default::default()
                }],
            }),
        }];
        let request = Request {
            release: "web",
            namespace: "prod",
            chart: Path::new("/charts/web"),
            values: &values,
            previous: Some(Seed {
                version: 3,
                status: "superseded",
                chart: "web",
                chart_version: "1.0.0",
            }),
            cluster: &cluster,
            discovery: "d1",
            post_renderers: &post_renderers,
            post_render_strategy: crate::api::PostRenderStrategy::NoHooks,
            skip_schema_validation: true,
            chart_values: None,
            kept: Some(KeptSeed {
                revision: Seed {
                    version: 2,
                    status: "deployed",
                    chart: "web",
                    chart_version: "0.9.0",
                },
                config: &values,
                chart_values: &chart_values,
            }),
        };
        assert_eq!(
            serde_json::to_value(Numbered {
                id: 7,
                body: &request
            })
            .unwrap(),
            serde_json::json!({
                "id": 7, "release": "web", "namespace": "prod", "chart": "/charts/web",
                "values": {"a": 1},
                "previous": {"version": 3, "status": "superseded", "chart": "web", "chartVersion": "1.0.0"},
                "cluster": {"kubeconfig": "/k", "context": "c", "asUser": "", "asGroups": []},
                "discovery": "d1",
                // Flux's shape, which the helper reads (postrender.go).
                "postRenderers": [{"kustomize": {
                    "patches": [{"patch": "- op: remove\n  path: /spec/replicas\n", "target": {"kind": "Deployment", "labelSelector": "app=web"}}],
                    "images": [{"name": "nginx", "newTag": "1.27"}],
                }}],
                "postRenderStrategy": "nohooks",
                "skipSchemaValidation": true,
                // upgrade.preserveValues: the revision kept, with its values (render.go).
                "kept": {"version": 2, "status": "deployed", "chart": "web", "chartVersion": "0.9.0",
                         "config": {"a": 1}, "chartValues": {"replicas": 1}},
            })
        );
    }
}

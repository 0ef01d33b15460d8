//! The [`Renderer`] that asks the helm CLI to render exactly as `helm upgrade --install`
//! would on the same cluster, without it touching anything.
//!
//! It runs `helm upgrade --install --dry-run=server` (arguments passed directly, never
//! through a shell; values on stdin; a timeout) with Helm's in-memory storage driver
//! seeded with one record: the release's newest revision as wheelhouse stores it
//! (`HELM_DRIVER=memory`, `HELM_MEMORY_DRIVER_DATA`). So the templates get what a real
//! `helm install`/`helm upgrade` gives them:
//! - `.Capabilities` from the API server's discovery, read afresh on every render (Helm
//!   invalidates its discovery cache first): every group/version and group/version/Kind
//!   served, nothing else (a group whose discovery fails is left out, as helm leaves it);
//! - `lookup` against the live cluster, as the engine's own identity (helm is given the
//!   engine's kubeconfig and context);
//! - `.Release.Revision`, `.Release.IsInstall`, `.Release.IsUpgrade` computed by Helm from
//!   the seeded history: the seed works while the real newest revision is still pending
//!   (a wait is running), where a dry-run against Helm's real storage is refused.
//!
//! With seeded memory storage helm swaps in a printing client, so nothing is sent to the
//! cluster but discovery and `lookup` reads. The chart's CRDs are installed by the engine
//! before it renders (`--skip-crds` here), as `helm install` does.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::{Error, Previous, ReleaseOutput, RenderRequest, Rendered, Renderer};
#[cfg(test)]
use crate::helm::release::Status;

/// How much of helm's stderr an error keeps: the template error is at the end.
const STDERR_LINES: usize = 20;

/// What helm prints when a group's discovery failed and it carried on without it (helm
/// v4.3.1 no longer says it: its version set swallows the error; the engine's own read
/// of discovery names what is missing either way).
const PARTIAL_DISCOVERY: &str = "orphaned API service";

/// Why a release with post-renderers is not rendered by the helm CLI: Helm 4's
/// `--post-renderer` takes a plugin, and nothing short of helm-controller's kustomize
/// build gives Flux's output byte for byte.
pub const POST_RENDERERS_REFUSED: &str = "spec.postRenderers need the render helper: the helm CLI renderer (--renderer helm, WHEELHOUSE_RENDERER=helm) cannot apply them as Flux's helm-controller does; run the engine with the render helper (the default renderer, wheelhouse-render) to render this release";

/// Why a release with `upgrade.preserveValues` is not upgraded by the helm CLI renderer.
pub const PRESERVE_VALUES_REFUSED: &str = "upgrade.preserveValues needs the render helper: the helm CLI renderer (--renderer helm, WHEELHOUSE_RENDERER=helm) reads the kept revision's values only from a file (HELM_MEMORY_DRIVER_DATA), and wheelhouse never writes values to disk; run the engine with the render helper (the default renderer, wheelhouse-render) to upgrade this release";

/// Why a release with `chart.valuesFiles` is not rendered by the helm CLI: `helm -f` puts
/// files above the chart's values, where Flux replaces the chart's values with them.
pub const VALUES_FILES_REFUSED: &str = "chart.valuesFiles need the render helper: the helm CLI renderer (--renderer helm, WHEELHOUSE_RENDERER=helm) can only add values files above the chart's values (helm -f), where Flux replaces the chart's values with them; run the engine with the render helper (the default renderer, wheelhouse-render) to render this release";

pub struct HelmRenderer {
    helm: PathBuf,
    timeout: Duration,
    /// `--kubeconfig`/`--kube-context`, so helm talks to the engine's cluster as the
    /// engine's identity. Empty: helm's own defaults ($KUBECONFIG, in-cluster).
    cluster: Vec<OsString>,
}

impl HelmRenderer {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    pub fn new(helm: PathBuf, timeout: Duration) -> Self {
        Self {
            helm,
            timeout,
            cluster: Vec::new(),
        }
    }

    /// `$WHEELHOUSE_HELM`, else `helm` from `PATH`; a 60 s timeout.
    pub fn from_env() -> Self {
        Self::new(default_program(), Self::DEFAULT_TIMEOUT)
    }

    /// Points helm at the cluster (and identity) the engine uses.
    pub fn with_cluster(mut self, kubeconfig: Option<&Path>, context: Option<&str>) -> Self {
        self.cluster.clear();
        if let Some(path) = kubeconfig {
            self.cluster.push("--kubeconfig".into());
            self.cluster.push(path.into());
        }
        if let Some(context) = context {
            self.cluster.push("--kube-context".into());
            self.cluster.push(context.into());
        }
        self
    }

    /// Renders as another identity (`--kube-as-user`/`--kube-as-group`), as the engine's
    /// client does when it impersonates.
    pub fn impersonate(mut self, user: &str, groups: &[String]) -> Self {
        self.cluster.push("--kube-as-user".into());
        self.cluster.push(user.into());
        for group in groups {
            self.cluster.push("--kube-as-group".into());
            self.cluster.push(group.into());
        }
        self
    }

    /// helm's arguments. The values come on stdin (`--values -`), so they never touch
    /// the disk or a process listing; `--` keeps a chart path from being read as a flag.
    fn args(&self, req: &RenderRequest<'_>) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "upgrade",
            "--install",
            "--namespace",
            req.namespace,
            "--values",
            "-",
            // The values are the whole desired state, as Flux passes them.
            "--reset-values",
            "--dry-run=server",
            "--skip-crds",
            // The API server validates on apply; this would only fetch schemas.
            "--disable-openapi-validation",
            "--output",
            "json",
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        if req.skip_schema_validation {
            args.push("--skip-schema-validation".into());
        }
        match req.kubeconfig {
            // A remote release's cluster replaces the renderer's, with its one context.
            Some(kubeconfig) => {
                let mut cluster = self.cluster.clone();
                strip_flag(&mut cluster, "--kubeconfig");
                strip_flag(&mut cluster, "--kube-context");
                args.extend(cluster);
                args.extend(["--kubeconfig".into(), kubeconfig.as_os_str().to_owned()]);
            }
            None => args.extend(self.cluster.iter().cloned()),
        }
        if let Some(user) = req.as_user {
            // The release's identity replaces any the renderer was given.
            strip_identity(&mut args);
            args.extend(["--kube-as-user".into(), user.into()]);
        }
        args.extend([
            "--".into(),
            req.release_name.into(),
            req.chart_path.as_os_str().to_owned(),
        ]);
        args
    }

    async fn run(&self, req: RenderRequest<'_>) -> Result<Rendered, Error> {
        if req.post_renders() {
            return Err(Error::Failed {
                status: "refused".into(),
                stderr: POST_RENDERERS_REFUSED.into(),
            });
        }
        if req.chart_values.is_some() {
            return Err(Error::Failed {
                status: "refused".into(),
                stderr: VALUES_FILES_REFUSED.into(),
            });
        }
        if req.kept.is_some() {
            return Err(Error::Failed {
                status: "refused".into(),
                stderr: PRESERVE_VALUES_REFUSED.into(),
            });
        }
        let values = serde_json::to_vec(req.values).map_err(Error::Values)?;
        let seed = SeedFile::write(&seed(&req))?;
        let spawn_error = |source| Error::Spawn {
            helm: self.helm.display().to_string(),
            source,
        };
        let mut command = Command::new(&self.helm);
        // The cluster comes only from the arguments the engine passes: helm's own
        // HELM_KUBE* settings (context, API server, token, ...) could point `lookup` and
        // `.Capabilities` at another cluster than the one applied to.
        for (name, _) in std::env::vars_os() {
            if is_cluster_setting(&name) {
                command.env_remove(name);
            }
        }
        let mut child = command
            .args(self.args(&req))
            .env("HELM_DRIVER", "memory")
            .env("HELM_MEMORY_DRIVER_DATA", &seed.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // A timed-out render is dropped, and helm with it.
            .kill_on_drop(true)
            .spawn()
            .map_err(spawn_error)?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let feed = async move {
            // helm reads all of stdin before it renders. A failed write means it exited
            // early; its status and stderr say why.
            let _ = stdin.write_all(&values).await;
        };
        let run = async {
            let ((), output) = tokio::join!(feed, child.wait_with_output());
            output
        };
        let output = match tokio::time::timeout(self.timeout, run).await {
            Err(_) => {
                return Err(Error::TimedOut {
                    timeout: self.timeout,
                });
            }
            Ok(output) => output.map_err(spawn_error)?,
        };
        drop(seed);

        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            let stderr = last_lines(&stderr, STDERR_LINES);
            let status = output.status.to_string();
            return Err(Error::Failed {
                stderr: if stderr.is_empty() {
                    status.clone()
                } else {
                    stderr
                },
                status,
            });
        }
        // helm renders on without a group whose discovery failed, as `helm upgrade` does;
        // the engine's own discovery check names the group, and nothing is pruned then.
        let partial = stderr.contains(PARTIAL_DISCOVERY);
        // Other stderr of a successful run is not logged: helm's warnings may quote values.
        let release: ReleaseOutput = serde_json::from_slice(&output.stdout)
            .map_err(|e| Error::Output(format!("helm's release JSON: {e}")))?;
        let unavailable = if partial {
            vec![super::PARTIAL.into()]
        } else {
            Vec::new()
        };
        Ok(release.rendered(unavailable, false))
    }

    /// Runs `helm version --short`: the binary is found, runs, and is helm 3 or 4.
    async fn version(&self) -> Result<String, Error> {
        let how = "install helm 3.8+ or 4 on PATH, or point WHEELHOUSE_HELM (or `wheelhouse controller --helm`) at it";
        let unavailable = |what: String| Error::Unavailable(format!("{what}; {how}"));
        let run = Command::new(&self.helm)
            .args(["version", "--short"])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let output = match tokio::time::timeout(Duration::from_secs(20), run).await {
            Err(_) => {
                return Err(unavailable(format!(
                    "`{} version` did not answer within 20s",
                    self.helm.display()
                )));
            }
            Ok(Err(e)) => {
                return Err(unavailable(format!(
                    "cannot run {}: {e}",
                    self.helm.display()
                )));
            }
            Ok(Ok(output)) => output,
        };
        let stdout = String::from_utf8_lossy(&output.stdout).trim().to_string();
        if !output.status.success() || !(stdout.starts_with("v3.") || stdout.starts_with("v4.")) {
            return Err(unavailable(format!(
                "{} is not a working helm 3 or 4 (`version --short` said {:?}, {})",
                self.helm.display(),
                last_lines(
                    &format!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr)),
                    3
                ),
                output.status
            )));
        }
        Ok(stdout)
    }
}

impl Renderer for HelmRenderer {
    fn render<'a>(&'a self, req: RenderRequest<'a>) -> BoxFuture<'a, Result<Rendered, Error>> {
        Box::pin(self.run(req))
    }

    fn check(&self) -> BoxFuture<'_, Result<String, Error>> {
        Box::pin(self.version())
    }
}

/// The history helm is given: the newest stored revision, as Helm's upgrade reads it
/// (see [`super::seed_status`]).
fn seed(req: &RenderRequest<'_>) -> serde_json::Value {
    let Some(Previous {
        version,
        status,
        chart_name,
        chart_version,
    }) = req.previous
    else {
        return serde_json::json!([]);
    };
    let status = super::seed_status(status);
    serde_json::json!([{
        "name": req.release_name,
        "namespace": req.namespace,
        "version": version,
        "info": {"status": status.as_str()},
        "chart": {"metadata": {"name": chart_name, "version": chart_version}},
    }])
}

/// `$WHEELHOUSE_HELM`, else `helm` (found on `PATH`).
pub(super) fn default_program() -> PathBuf {
    std::env::var_os("WHEELHOUSE_HELM")
        .filter(|h| !h.is_empty())
        .map_or_else(|| PathBuf::from("helm"), PathBuf::from)
}

/// Drops `--kube-as-user`/`--kube-as-group` and their values from `args`.
fn strip_identity(args: &mut Vec<OsString>) {
    let mut out = Vec::with_capacity(args.len());
    let mut skip = false;
    for arg in args.drain(..) {
        if std::mem::take(&mut skip) {
            continue;
        }
        if arg == "--kube-as-user" || arg == "--kube-as-group" {
            skip = true;
            continue;
        }
        out.push(arg);
    }
    *args = out;
}

/// Removes `flag` and its value from `args`.
fn strip_flag(args: &mut Vec<OsString>, flag: &str) {
    let mut out = Vec::with_capacity(args.len());
    let mut skip = false;
    for arg in args.drain(..) {
        if std::mem::take(&mut skip) {
            continue;
        }
        if arg == flag {
            skip = true;
            continue;
        }
        out.push(arg);
    }
    *args = out;
}

/// Environment variables by which helm picks a cluster or identity other than its
/// arguments say (`HELM_KUBECONTEXT`, `HELM_KUBEAPISERVER`, `HELM_KUBETOKEN`,
/// `HELM_KUBEASUSER`, `HELM_KUBECAFILE`, ...), and `HELM_NAMESPACE`.
fn is_cluster_setting(name: &std::ffi::OsStr) -> bool {
    name.to_str()
        .is_some_and(|n| n.starts_with("HELM_KUBE") || n == "HELM_NAMESPACE")
}

/// The seed, in a file of its own (no values in it) in a private temporary directory
/// (mode 0700, a random name: nobody else can read it or plant a file where it goes),
/// removed when dropped.
struct SeedFile {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl SeedFile {
    fn write(seed: &serde_json::Value) -> Result<Self, Error> {
        let failed =
            |e: std::io::Error| Error::Output(format!("cannot write the render's seed: {e}"));
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("wheelhouse-render-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .map_err(failed)?;
        let path = dir.path().join("seed.json");
        std::fs::write(&path, seed.to_string()).map_err(failed)?;
        Ok(Self { path, _dir: dir })
    }
}

impl Drop for SeedFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The last `n` non-empty lines, trimmed.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(
        values: &'a serde_json::Map<String, serde_json::Value>,
        previous: Option<Previous<'a>>,
    ) -> RenderRequest<'a> {
        RenderRequest {
            release_name: "web",
            namespace: "prod",
            chart_path: Path::new("-odd/chart"),
            values,
            previous,
            discovery: None,
            as_user: None,
            kubeconfig: None,
            priority: Default::default(),
            post_renderers: &[],
            post_render_strategy: Default::default(),
            skip_schema_validation: false,
            chart_values: None,
            kept: None,
        }
    }

    #[tokio::test]
    async fn post_renderers_are_refused_with_the_reason() {
        let values = serde_json::Map::new();
        // Never run: the refusal comes first.
        let helm = HelmRenderer::new("/nonexistent/helm".into(), HelmRenderer::DEFAULT_TIMEOUT);
        let prs = [crate::api::PostRenderer {
            kustomize: Some(Default::default()),
        }];
        let mut req = request(&values, None);
        req.post_renderers = &prs;
        let err = helm.run(req).await.unwrap_err();
        assert!(err.to_string().contains("need the render helper"), "{err}");
        // An entry without a kustomize block does nothing, so it is no reason to refuse.
        let empty = [crate::api::PostRenderer::default()];
        req.post_renderers = &empty;
        assert!(!matches!(
            helm.run(req).await,
            Err(Error::Failed { ref status, .. }) if status == "refused"
        ));
    }

    #[tokio::test]
    async fn kept_values_are_refused_with_the_reason() {
        let values = serde_json::Map::new();
        // Never run: the refusal comes first.
        let helm = HelmRenderer::new("/nonexistent/helm".into(), HelmRenderer::DEFAULT_TIMEOUT);
        let stored = crate::helm::release::Release::default();
        let mut req = request(&values, Some(Previous::of(&stored)));
        req.kept = Some(super::super::Kept::of(&stored));
        let err = helm.run(req).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("upgrade.preserveValues needs the render helper"),
            "{err}"
        );
    }

    #[test]
    fn a_releases_identity_replaces_the_renderers() {
        let values = serde_json::Map::new();
        let helm = HelmRenderer::new("helm".into(), HelmRenderer::DEFAULT_TIMEOUT)
            .with_cluster(None, Some("ctx"))
            .impersonate("engine", &["ops".to_owned()]);
        let mut req = request(&values, None);
        req.as_user = Some("system:serviceaccount:t:deployer");
        let args: Vec<String> = helm
            .args(&req)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let at = args.iter().position(|a| a == "--kube-as-user").unwrap();
        assert_eq!(args[at + 1], "system:serviceaccount:t:deployer");
        assert_eq!(
            args.iter().filter(|a| a.starts_with("--kube-as")).count(),
            1
        );
        assert!(
            !args.iter().any(|a| a == "engine" || a == "ops"),
            "{args:?}"
        );
        assert!(args.iter().any(|a| a == "ctx"));
    }

    #[test]
    fn helms_own_cluster_settings_are_never_inherited() {
        for name in [
            "HELM_KUBECONTEXT",
            "HELM_KUBEAPISERVER",
            "HELM_KUBETOKEN",
            "HELM_KUBEASUSER",
            "HELM_NAMESPACE",
        ] {
            assert!(is_cluster_setting(std::ffi::OsStr::new(name)), "{name}");
        }
        for name in ["HELM_DRIVER", "PATH", "HOME", "HELM_CACHE_HOME"] {
            assert!(!is_cluster_setting(std::ffi::OsStr::new(name)), "{name}");
        }
    }

    #[test]
    fn the_seed_lives_in_a_private_directory() {
        use std::os::unix::fs::PermissionsExt;
        let seed = SeedFile::write(&serde_json::json!([])).unwrap();
        let dir = seed.path.parent().unwrap().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        drop(seed);
        assert!(!dir.exists());
    }

    #[test]
    fn arguments() {
        let values = serde_json::Map::new();
        let renderer = HelmRenderer::new(PathBuf::from("helm"), HelmRenderer::DEFAULT_TIMEOUT)
            .with_cluster(Some(Path::new("/k/config")), Some("ctx"));
        let args: Vec<String> = renderer
            .args(&request(&values, None))
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "upgrade",
                "--install",
                "--namespace",
                "prod",
                "--values",
                "-",
                "--reset-values",
                "--dry-run=server",
                "--skip-crds",
                "--disable-openapi-validation",
                "--output",
                "json",
                "--kubeconfig",
                "/k/config",
                "--kube-context",
                "ctx",
                "--",
                "web",
                "-odd/chart"
            ]
        );
    }

    #[test]
    fn the_seed_is_the_newest_revision_with_pending_read_as_superseded() {
        let values = serde_json::Map::new();
        assert_eq!(seed(&request(&values, None)), serde_json::json!([]));
        let previous = Previous {
            version: 4,
            status: Status::PendingUpgrade,
            chart_name: "app",
            chart_version: "1.2.0",
        };
        let s = seed(&request(&values, Some(previous)));
        assert_eq!(s[0]["version"], 4);
        assert_eq!(s[0]["info"]["status"], "superseded");
        assert_eq!(s[0]["namespace"], "prod");
        assert_eq!(s[0]["chart"]["metadata"]["version"], "1.2.0");
    }

    #[tokio::test]
    async fn a_missing_helm_says_how_to_fix_it() {
        let renderer =
            HelmRenderer::new(PathBuf::from("/nonexistent/helm"), Duration::from_secs(5));
        let err = renderer.check().await.unwrap_err().to_string();
        assert!(err.contains("cannot run /nonexistent/helm"), "{err}");
        assert!(err.contains("WHEELHOUSE_HELM"), "{err}");
        // Something that runs but is not helm is refused too.
        let renderer = HelmRenderer::new(PathBuf::from("true"), Duration::from_secs(5));
        let err = renderer.check().await.unwrap_err().to_string();
        assert!(err.contains("not a working helm"), "{err}");
    }

    #[test]
    fn keeps_the_end_of_stderr() {
        let text: String = (1..=30).map(|i| format!("line {i}  \n\n")).collect();
        let kept = last_lines(&text, 20);
        assert!(kept.starts_with("line 11\n"), "{kept}");
        assert!(kept.ends_with("line 30"), "{kept}");
        assert_eq!(last_lines("\n  \n", 20), "");
    }
}

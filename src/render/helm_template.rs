//! The first [`Renderer`]: `helm template`, run as a program with arguments (never
//! through a shell), values on stdin, and a timeout.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::{Error, RenderRequest, Rendered, Renderer, split_rendered};

/// How much of helm's stderr an error keeps: the template error is at the end.
const STDERR_LINES: usize = 20;

pub struct HelmTemplate {
    helm: PathBuf,
    timeout: Duration,
}

impl HelmTemplate {
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

    pub fn new(helm: PathBuf, timeout: Duration) -> Self {
        Self { helm, timeout }
    }

    /// `$WHEELHOUSE_HELM`, else `helm` from `PATH`; a 60 s timeout.
    pub fn from_env() -> Self {
        let helm = std::env::var_os("WHEELHOUSE_HELM")
            .filter(|h| !h.is_empty())
            .map_or_else(|| PathBuf::from("helm"), PathBuf::from);
        Self::new(helm, Self::DEFAULT_TIMEOUT)
    }

    /// helm's arguments. The values come on stdin (`--values -`), so they never touch
    /// the disk or a process listing; `--` keeps a chart path from being read as a flag.
    fn args(req: &RenderRequest<'_>) -> Vec<OsString> {
        let mut args: Vec<OsString> = ["template", "--namespace", req.namespace]
            .into_iter()
            .chain(["--values", "-"])
            .map(OsString::from)
            .collect();
        if req.is_upgrade {
            args.push("--is-upgrade".into());
        }
        if let Some(version) = req.kube_version {
            args.extend(["--kube-version".into(), version.into()]);
        }
        for api in req.api_versions {
            args.extend(["--api-versions".into(), api.into()]);
        }
        args.extend([
            "--".into(),
            req.release_name.into(),
            req.chart_path.as_os_str().to_owned(),
        ]);
        args
    }

    async fn run(&self, req: RenderRequest<'_>) -> Result<Rendered, Error> {
        let values = serde_json::to_vec(req.values).map_err(Error::Values)?;
        let spawn_error = |source| Error::Spawn {
            helm: self.helm.display().to_string(),
            source,
        };
        let mut child = Command::new(&self.helm)
            .args(Self::args(&req))
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

        if !output.status.success() {
            let stderr = last_lines(&String::from_utf8_lossy(&output.stderr), STDERR_LINES);
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
        // stderr of a successful run is not logged: helm's warnings may quote values.
        let stdout = String::from_utf8(output.stdout)
            .map_err(|_| Error::Output("helm wrote output that is not UTF-8".to_string()))?;
        split_rendered(&stdout)
    }
}

impl HelmTemplate {
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

impl Renderer for HelmTemplate {
    fn render<'a>(&'a self, req: RenderRequest<'a>) -> BoxFuture<'a, Result<Rendered, Error>> {
        Box::pin(self.run(req))
    }

    fn check(&self) -> BoxFuture<'_, Result<String, Error>> {
        Box::pin(self.version())
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
    use std::path::Path;

    #[test]
    fn arguments() {
        let values = serde_json::Map::new();
        let apis = vec!["example.com/v1".to_string(), "batch/v1/Job".to_string()];
        let req = RenderRequest {
            release_name: "web",
            namespace: "prod",
            chart_path: Path::new("-odd/chart"),
            values: &values,
            revision: 3,
            is_upgrade: true,
            kube_version: Some("v1.36.3"),
            api_versions: &apis,
        };
        let args: Vec<String> = HelmTemplate::args(&req)
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "template",
                "--namespace",
                "prod",
                "--values",
                "-",
                "--is-upgrade",
                "--kube-version",
                "v1.36.3",
                "--api-versions",
                "example.com/v1",
                "--api-versions",
                "batch/v1/Job",
                "--",
                "web",
                "-odd/chart"
            ]
        );
        let install = RenderRequest {
            is_upgrade: false,
            kube_version: None,
            api_versions: &[],
            ..req
        };
        let args = HelmTemplate::args(&install);
        assert!(
            !args
                .iter()
                .any(|a| a == "--is-upgrade" || a == "--kube-version")
        );
    }

    #[test]
    fn is_a_renderer_object() {
        let renderer: Box<dyn Renderer> = Box::new(HelmTemplate::new(
            PathBuf::from("helm"),
            HelmTemplate::DEFAULT_TIMEOUT,
        ));
        drop(renderer);
    }

    #[tokio::test]
    async fn a_missing_helm_says_how_to_fix_it() {
        let renderer =
            HelmTemplate::new(PathBuf::from("/nonexistent/helm"), Duration::from_secs(5));
        let err = renderer.check().await.unwrap_err().to_string();
        assert!(err.contains("cannot run /nonexistent/helm"), "{err}");
        assert!(err.contains("WHEELHOUSE_HELM"), "{err}");
        // Something that runs but is not helm is refused too.
        let renderer = HelmTemplate::new(PathBuf::from("true"), Duration::from_secs(5));
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

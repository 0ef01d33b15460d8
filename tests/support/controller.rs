//! `wheelhouse controller` as a child process against the local control plane, killed
//! when dropped; its structured log is kept for assertions and failure messages.

use std::process::{Child, Command, Stdio};

use super::{kubeconfig_path, testbin};

pub struct Controller {
    child: Child,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Controller {
    /// Starts `wheelhouse controller` with `args` (and the test cluster's kubeconfig, the
    /// pinned helm and a chart cache of its own).
    pub fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    /// [`Controller::start`] with extra environment variables.
    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_in(tempfile::tempdir().unwrap(), args, env)
    }

    /// [`Controller::start_with_env`] in `dir`, which holds its log and its chart cache
    /// (`dir/charts`), and which a test may give it as its chart root.
    pub fn start_in(dir: tempfile::TempDir, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::start_build(
            std::path::Path::new(env!("CARGO_BIN_EXE_wheelhouse")),
            &super::render_helper(),
            dir,
            args,
            env,
        )
    }

    /// The controller of another build: its `wheelhouse` and render helper in `bin`
    /// (`support::previous_build()`).
    pub fn start_other_build(bin: &std::path::Path, args: &[&str]) -> Self {
        Self::start_build(
            &bin.join("wheelhouse"),
            &bin.join("wheelhouse-render"),
            tempfile::tempdir().unwrap(),
            args,
            &[],
        )
    }

    fn start_build(
        program: &std::path::Path,
        helper: &std::path::Path,
        dir: tempfile::TempDir,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let log = dir.path().join("controller.log");
        let child = Command::new(program)
            .arg("controller")
            .args(args)
            .arg("--kubeconfig")
            .arg(kubeconfig_path())
            .arg("--chart-cache")
            .arg(dir.path().join("charts"))
            .env("WHEELHOUSE_HELM", testbin().join("helm"))
            .env("WHEELHOUSE_RENDER_HELPER", helper)
            .env("WHEELHOUSE_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("wheelhouse controller starts");
        Self {
            child,
            log,
            _dir: dir,
        }
    }

    /// Sends SIGTERM, as Kubernetes does to a pod being stopped.
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    /// SIGKILL: gone at once, nothing released (a node lost, an OOM kill).
    pub fn kill(&mut self) {
        self.child.kill().expect("the controller is killed");
        let _ = self.child.wait();
    }

    /// Waits until the process has exited (false when it still runs after `limit`).
    pub async fn exited_within(&mut self, limit: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        false
    }

    /// Its directory: the log, and the chart cache under `charts`.
    pub fn dir(&self) -> &std::path::Path {
        self._dir.path()
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it logged so far (JSON lines).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

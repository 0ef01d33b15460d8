//! The real `wheelhouse controller` process under a benchmark, and what is read of it:
//! shared by `scale` and `flux_compare`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::ListParams;
use kube::{Api, Client};

use crate::support;
use support::process::{children_named, read_cpu, read_rss};
use support::{kubeconfig_path, testbin};

/// CPU ticks of the renders so far: the render helper's own (it lives as long as the
/// controller) and the helm processes the controller has reaped.
pub fn render_ticks(pid: u32) -> u64 {
    let helper: u64 = children_named(pid, "wheelhouse-render")
        .into_iter()
        .filter_map(read_cpu)
        .map(|c| c.own)
        .sum();
    read_cpu(pid).map_or(0, |c| c.children) + helper
}

/// (VmRSS, VmHWM) in KiB of the render helper, if one runs.
pub fn helper_rss(pid: u32) -> Option<(u64, u64)> {
    children_named(pid, "wheelhouse-render")
        .into_iter()
        .find_map(read_rss)
}

pub fn mb(kib: u64) -> f64 {
    kib as f64 * 1024.0 / 1e6
}

/// The controller under test: `wheelhouse controller` as a child process (no shell),
/// killed when dropped, its stderr (JSON logs) in a file.
pub struct Controller {
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Controller {
    pub fn start(lease_namespace: &str, concurrent: Option<usize>) -> Self {
        let concurrent = concurrent.map(|n| n.to_string());
        let mut args = Vec::new();
        if let Some(n) = &concurrent {
            args.extend(["--concurrent", n.as_str()]);
        }
        Self::start_with(lease_namespace, &args)
    }

    /// With more arguments (`--concurrent N`, `--shard KEY`).
    pub fn start_with(lease_namespace: &str, extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("controller.log");
        // A profiler to run the controller under (`WHEELHOUSE_BENCH_CONTROLLER_WRAPPER`,
        // e.g. "heaptrack -o /tmp/wh/heap"; split on spaces, no shell): the figures of
        // the process measured are then the profiler's, only its output counts.
        let wrapper = std::env::var("WHEELHOUSE_BENCH_CONTROLLER_WRAPPER").unwrap_or_default();
        let mut wrapper = wrapper.split_whitespace();
        let mut cmd = match wrapper.next() {
            Some(program) => {
                let mut cmd = Command::new(program);
                cmd.args(wrapper).arg(env!("CARGO_BIN_EXE_wheelhouse"));
                cmd
            }
            None => Command::new(env!("CARGO_BIN_EXE_wheelhouse")),
        };
        cmd.arg("controller")
            .arg("--kubeconfig")
            .arg(kubeconfig_path())
            .args(["--lease-namespace", lease_namespace])
            .arg("--chart-cache")
            .arg(dir.path().join("charts"));
        cmd.args(extra);
        if let Ok(renderer) = std::env::var("WHEELHOUSE_BENCH_RENDERER") {
            cmd.args(["--renderer", &renderer]);
        }
        let child = cmd
            .env("WHEELHOUSE_HELM", testbin().join("helm"))
            .env("WHEELHOUSE_RENDER_HELPER", support::render_helper())
            // The controller's default logging (JSON at info) is what is measured.
            .env_remove("WHEELHOUSE_LOG")
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
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

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// SIGTERM, as Kubernetes stops a pod in a rolling restart, then waits for the exit
    /// (at most `limit`; then SIGKILL). Returns how long the exit took.
    pub fn terminate(&mut self, limit: Duration) -> Duration {
        let asked = Instant::now();
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM {}", self.child.id());
        while asked.elapsed() < limit {
            if self.child.try_wait().ok().flatten().is_some() {
                return asked.elapsed();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        asked.elapsed()
    }

    /// Panics with the log tail if the controller has exited.
    pub fn check_running(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            panic!(
                "wheelhouse controller exited ({status}); the tail of its stderr:\n{}",
                self.log_tail(60)
            );
        }
    }

    /// Log lines per level ("INFO", "WARN", "ERROR", ...).
    pub fn levels(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for line in self.log().lines() {
            let level = serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v["level"].as_str().map(str::to_owned))
                .unwrap_or_else(|| "(not JSON)".into());
            *counts.entry(level).or_default() += 1;
        }
        counts
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the controller holds an engine Lease in `namespace` (its shard's, when it
/// has one).
pub async fn wait_for_lease(client: &Client, namespace: &str, controller: &mut Controller) {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let limit = Instant::now() + Duration::from_secs(120);
    loop {
        controller.check_running();
        let held = api
            .list(&ListParams::default())
            .await
            .ok()
            .is_some_and(|l| {
                l.items.iter().any(|l| {
                    l.spec
                        .as_ref()
                        .and_then(|s| s.holder_identity.as_ref())
                        .is_some_and(|h| !h.is_empty())
                })
            });
        if held {
            return;
        }
        assert!(
            Instant::now() < limit,
            "the controller did not take the lease in 2 minutes; the tail of its stderr:\n{}",
            controller.log_tail(60)
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn secs(ticks: u64, hz: f64) -> f64 {
    ticks as f64 / hz
}

pub fn duration(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        format!("{}m {:04.1}s", (s / 60.0).floor(), s % 60.0)
    }
}

pub fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

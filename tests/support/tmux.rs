//! The real dashboard binary driven through tmux, as an operator types: the e2e tests
//! (tests/tui_e2e.rs) and the live benchmark (benches/dashboard_live.rs) share it.

use std::ffi::OsStr;
use std::process::Command;
use std::time::{Duration, Instant};

use super::{PATIENCE, kubeconfig_path, testbin};

/// A dashboard in its own tmux server (socket) at 120x40, so nothing touches the
/// developer's tmux sessions and one kill-server cleans up everything.
pub struct Dashboard {
    socket: String,
    /// Its config directory (`XDG_CONFIG_HOME`), so the namespace favourites it writes
    /// never touch the developer's.
    config: tempfile::TempDir,
}

impl Dashboard {
    /// Starts `wheelhouse --kubeconfig <test cluster> <args>`; `socket` names the tmux
    /// server and must be unique among dashboards running at once.
    pub fn start<S: AsRef<OsStr>>(socket: &str, args: &[S]) -> Self {
        Self::start_on(socket, &kubeconfig_path(), args)
    }

    /// As [`Dashboard::start`], with another kubeconfig (a fleet's, of several clusters).
    #[allow(dead_code)]
    pub fn start_on<S: AsRef<OsStr>>(
        socket: &str,
        kubeconfig: &std::path::Path,
        args: &[S],
    ) -> Self {
        let config = tempfile::tempdir().expect("a config directory");
        let xdg = format!("XDG_CONFIG_HOME={}", config.path().display());
        let helm = format!("WHEELHOUSE_HELM={}", testbin().join("helm").display());
        let helper = format!(
            "WHEELHOUSE_RENDER_HELPER={}",
            super::render_helper().display()
        );
        // Quiet unless a run asks for the dashboard's log (~/.cache/wheelhouse/wheelhouse.log).
        let log = format!(
            "WHEELHOUSE_LOG={}",
            std::env::var("WHEELHOUSE_TEST_DASHBOARD_LOG").unwrap_or_else(|_| "off".into())
        );
        // A server of the same name that is still going away (a dashboard restarted by
        // its test) refuses the new session for a moment: it is ended, and the start
        // tried again.
        let mut tries = 0;
        let status = loop {
            let status = Self::new_session(socket, kubeconfig, args, [&xdg, &helm, &helper, &log]);
            tries += 1;
            if status.success() || tries == 5 {
                break status;
            }
            let _ = Command::new("tmux")
                .args(["-L", socket, "kill-server"])
                .status();
            std::thread::sleep(Duration::from_millis(300));
        };
        assert!(status.success(), "tmux new-session failed {tries} times");
        Self {
            socket: socket.to_owned(),
            config,
        }
    }

    fn new_session<S: AsRef<OsStr>>(
        socket: &str,
        kubeconfig: &std::path::Path,
        args: &[S],
        [xdg, helm, helper, log]: [&String; 4],
    ) -> std::process::ExitStatus {
        Command::new("tmux")
            .args([
                "-L",
                socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                "dash",
            ])
            .args(["-x", "120", "-y", "40"])
            .args(["-e", helm, "-e", helper, "-e", log])
            .args(["-e", "TERM=xterm-256color", "-e", xdg, "--"])
            // A profiler to run the dashboard under (`WHEELHOUSE_BENCH_DASHBOARD_WRAPPER`,
            // e.g. "heaptrack -o /tmp/heap"; split on spaces, no shell): the figures of
            // the process measured are then the profiler's, only its output counts.
            .args(
                std::env::var("WHEELHOUSE_BENCH_DASHBOARD_WRAPPER")
                    .unwrap_or_default()
                    .split_whitespace(),
            )
            .arg(env!("CARGO_BIN_EXE_wheelhouse"))
            .args(["--kubeconfig".as_ref(), kubeconfig.as_os_str()])
            .args(args)
            // Keep the pane after exit so a crash leaves its last screen to read.
            .args([";", "set-option", "-t", "dash", "remain-on-exit", "on"])
            .status()
            .expect("tmux runs (install it: apt-get install tmux)")
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Sends tmux key names (`Enter`, `C-s`, `y`) one by one.
    pub fn keys(&self, keys: &[&str]) {
        for k in keys {
            self.tmux(&["send-keys", "-t", "dash", k]);
            // The UI handles keys in order anyway; a pause makes failures easier to read.
            std::thread::sleep(Duration::from_millis(60));
        }
    }

    /// Types text literally (no key-name lookup).
    pub fn type_text(&self, text: &str) {
        self.tmux(&["send-keys", "-t", "dash", "-l", text]);
        std::thread::sleep(Duration::from_millis(100));
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "dash"])
    }

    /// Where the dashboard keeps its configuration (`XDG_CONFIG_HOME`).
    pub fn config_dir(&self) -> &std::path::Path {
        self.config.path()
    }

    /// The dashboard's process id, to read its CPU time and memory.
    pub fn pid(&self) -> u32 {
        self.tmux(&["display-message", "-p", "-t", "dash", "#{pane_pid}"])
            .trim()
            .parse()
            .expect("the pane's pid")
    }

    /// Waits until the screen satisfies `pred` and returns it; fails the test with the
    /// last screen after PATIENCE.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if pred(&screen) {
                return screen;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "screen never showed {what}:\n{screen}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Polls the screen every `every` until `pred` holds: the moment it first did, or
    /// None after `limit`. For measuring; tests use `wait_for`.
    pub async fn until(
        &self,
        every: Duration,
        limit: Duration,
        pred: impl Fn(&str) -> bool,
    ) -> Option<Instant> {
        let started = Instant::now();
        while started.elapsed() < limit {
            if pred(&self.screen()) {
                return Some(Instant::now());
            }
            tokio::time::sleep(every).await;
        }
        None
    }

    /// Presses `q` and waits until the dashboard has exited; returns how long that took
    /// (measured to within 5 ms).
    pub async fn quit(self) -> Duration {
        self.tmux(&["send-keys", "-t", "dash", "q"]);
        let start = Instant::now();
        while !self.exited() {
            assert!(
                start.elapsed() < PATIENCE,
                "q did not quit:\n{}",
                self.screen()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        start.elapsed()
    }

    pub fn exited(&self) -> bool {
        self.tmux(&["display-message", "-p", "-t", "dash", "#{pane_dead}"])
            .trim()
            == "1"
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.tmux(&["kill-server"]);
    }
}

//! Freezing the local control plane's API server (SIGSTOP), as a hung server or a
//! partition looks to its clients. A test that freezes it must run alone in its binary.
#![allow(dead_code)]

/// The API server's PID, as tests/cluster/up.sh recorded it beside the kubeconfig.
fn pid() -> String {
    let pids = super::kubeconfig_path().with_file_name("pids");
    let text = std::fs::read_to_string(&pids).unwrap_or_else(|e| panic!("{}: {e}", pids.display()));
    text.lines()
        .find_map(|l| l.strip_prefix("kube-apiserver "))
        .unwrap_or_else(|| panic!("no kube-apiserver in {}", pids.display()))
        .trim()
        .to_string()
}

fn signal(pid: &str, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, pid])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill {signal} {pid}");
}

/// The API server stopped until this is dropped (or [`Frozen::thaw`]ed): however the test
/// ends, no later test finds it frozen.
pub struct Frozen(String);

impl Frozen {
    pub fn freeze() -> Self {
        let pid = pid();
        signal(&pid, "-STOP");
        Self(pid)
    }

    pub fn thaw(self) {}
}

impl Drop for Frozen {
    fn drop(&mut self) {
        signal(&self.0, "-CONT");
    }
}

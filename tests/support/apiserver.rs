//! Freezing the local control plane's API server (SIGSTOP), as a hung server or a
//! partition looks to its clients. A test that freezes it must run alone in its binary.
#![allow(dead_code)]

/// The PID of the API server whose control plane lives in `dir`, as tests/cluster/up.sh
/// recorded it there (beside the kubeconfig).
fn pid_in(dir: &std::path::Path) -> String {
    let pids = dir.join("pids");
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
    /// The local control plane's API server (the tests' kubeconfig).
    pub fn freeze() -> Self {
        let kubeconfig = super::kubeconfig_path();
        Self::freeze_in(kubeconfig.parent().expect("the kubeconfig's directory"))
    }

    /// The API server of the control plane tests/cluster/up.sh started in `dir`.
    pub fn freeze_in(dir: &std::path::Path) -> Self {
        let pid = pid_in(dir);
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

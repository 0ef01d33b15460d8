//! A fleet of control planes for the fleet's e2e test and benchmark: bare API servers
//! started by the project's own script (tests/cluster/up.sh --bare), one kubeconfig with a
//! context per cluster, and an API server stopped with SIGSTOP.

use std::path::{Path, PathBuf};
use std::process::Command;

use kube::config::{KubeConfigOptions, Kubeconfig};

pub use super::apiserver::Frozen;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub struct BareCluster {
    dir: tempfile::TempDir,
}

impl BareCluster {
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("wheelhouse-fleet-")
            .tempdir()
            .expect("a directory for the third cluster");
        let status = Command::new(root().join("tests/cluster/up.sh"))
            .arg("--bare")
            .arg(dir.path())
            .status()
            .expect("tests/cluster/up.sh runs");
        assert!(status.success(), "a bare control plane did not start");
        Self { dir }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// Its API server stopped until the guard is dropped.
    pub fn freeze(&self) -> Frozen {
        Frozen::freeze_in(self.dir.path())
    }
}

impl Drop for BareCluster {
    fn drop(&mut self) {
        let _ = Command::new(root().join("tests/cluster/down.sh"))
            .arg(self.dir.path())
            .status();
    }
}

pub fn fleet_kubeconfig(sources: &[(&str, &Path)], out: &Path) {
    let mut fleet = Kubeconfig::default();
    for (name, path) in sources {
        let k = Kubeconfig::read_from(path).unwrap();
        let mut cluster = k.clusters[0].clone();
        cluster.name = (*name).to_owned();
        let mut user = k.auth_infos[0].clone();
        user.name = (*name).to_owned();
        let mut context = k.contexts[0].clone();
        context.name = (*name).to_owned();
        let c = context.context.as_mut().unwrap();
        c.cluster = (*name).to_owned();
        c.user = Some((*name).to_owned());
        fleet.clusters.push(cluster);
        fleet.auth_infos.push(user);
        fleet.contexts.push(context);
    }
    // The main server, with a token no one issued: every request is refused (401).
    let mut broken = fleet.contexts[0].clone();
    broken.name = "broken".into();
    broken.context.as_mut().unwrap().user = Some("broken".into());
    fleet.contexts.push(broken);
    fleet.auth_infos.push(
        serde_json::from_value(serde_json::json!({
            "name": "broken",
            "user": {"token": "not-a-token-this-server-issued"}
        }))
        .unwrap(),
    );
    fleet.current_context = Some(sources[0].0.to_owned());
    fleet.api_version = Some("v1".into());
    fleet.kind = Some("Config".into());
    std::fs::write(out, serde_json::to_string_pretty(&fleet).unwrap()).unwrap();
}

pub async fn client_of(path: &Path) -> kube::Client {
    let k = Kubeconfig::read_from(path).unwrap();
    let config = kube::Config::from_custom_kubeconfig(k, &KubeConfigOptions::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

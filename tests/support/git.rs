//! The Git server of the Git chart-source tests (tests/cluster/up.sh starts it): where it
//! is, and repositories on it that tests commit charts to with the real git.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What tests need to reach the Git server (DIR/git.env of the cluster).
pub struct GitServer {
    pub root: PathBuf,
    pub http: String,
    pub https: String,
    pub ca: PathBuf,
    pub user: String,
    pub password: String,
    pub token: String,
    pub ssh: String,
    pub identity: PathBuf,
    pub known_hosts: PathBuf,
    pub wrong_known_hosts: PathBuf,
}

pub fn server() -> GitServer {
    let get = super::cluster_env("git.env", "a Git server");
    GitServer {
        root: get("GIT_ROOT").into(),
        http: get("GIT_HTTP"),
        https: get("GIT_HTTPS"),
        ca: get("GIT_CA").into(),
        user: get("GIT_USER"),
        password: get("GIT_PASSWORD"),
        token: get("GIT_TOKEN"),
        ssh: get("GIT_SSH"),
        identity: get("GIT_SSH_IDENTITY").into(),
        known_hosts: get("GIT_SSH_KNOWN_HOSTS").into(),
        wrong_known_hosts: get("GIT_SSH_WRONG_KNOWN_HOSTS").into(),
    }
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "wheelhouse tests")
        .env("GIT_AUTHOR_EMAIL", "tests@wheelhouse.dev")
        .env("GIT_COMMITTER_NAME", "wheelhouse tests")
        .env("GIT_COMMITTER_EMAIL", "tests@wheelhouse.dev")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A bare repository on the server (`<root>/<name>.git`) and a working clone that
/// commits to it.
pub struct Repo {
    /// The path on the server, e.g. `charts-1a2b3c4d.git`.
    pub name: String,
    pub work: tempfile::TempDir,
}

impl Repo {
    pub fn new(s: &GitServer, prefix: &str) -> Self {
        let name = format!("{prefix}-{:08x}.git", super::rand_u32());
        let bare = s.root.join(&name);
        std::fs::create_dir_all(bare.parent().unwrap()).unwrap();
        git(
            bare.parent().unwrap(),
            &["init", "--bare", "-q", "-b", "main", bare.to_str().unwrap()],
        );
        let work = tempfile::tempdir().unwrap();
        git(work.path(), &["init", "-q", "-b", "main"]);
        git(
            work.path(),
            &["remote", "add", "origin", bare.to_str().unwrap()],
        );
        Self { name, work }
    }

    /// Writes the webapp test chart at `path` as `version`, its pods' `behavior` and
    /// `message` as given, commits it to `branch` and pushes; returns the commit.
    pub fn commit_chart(
        &self,
        branch: &str,
        path: &str,
        version: &str,
        behavior: &str,
        message: &str,
    ) -> String {
        let w = self.work.path();
        let exists = Command::new("git")
            .args([
                "rev-parse",
                "--verify",
                "-q",
                &format!("refs/heads/{branch}"),
            ])
            .current_dir(w)
            .output()
            .unwrap()
            .status
            .success();
        if exists {
            git(w, &["checkout", "-q", branch]);
        } else {
            git(w, &["checkout", "-q", "-B", branch]);
        }
        let chart = w.join(path);
        super::copy_dir(Path::new(&super::engine::chart("webapp")), &chart);
        let yaml = std::fs::read_to_string(chart.join("Chart.yaml"))
            .unwrap()
            .replace("version: 1.0.0", &format!("version: {version}"));
        std::fs::write(chart.join("Chart.yaml"), yaml).unwrap();
        let values = std::fs::read_to_string(chart.join("values.yaml"))
            .unwrap()
            .replace("behavior: \"\"", &format!("behavior: \"{behavior}\""))
            .replace("message: hello", &format!("message: {message}"));
        std::fs::write(chart.join("values.yaml"), values).unwrap();
        git(w, &["add", "-A"]);
        git(
            w,
            &["commit", "-q", "-m", &format!("{path} {version} {message}")],
        );
        git(w, &["push", "-q", "origin", branch]);
        git(w, &["rev-parse", "HEAD"])
    }

    /// Commits a chart at `path` with a symbolic link out of the repository.
    pub fn commit_symlinked_chart(&self, path: &str) -> String {
        let w = self.work.path();
        let chart = w.join(path);
        super::copy_dir(Path::new(&super::engine::chart("webapp")), &chart);
        std::os::unix::fs::symlink("/etc/passwd", chart.join("templates/passwd.yaml")).unwrap();
        git(w, &["add", "-A"]);
        git(w, &["commit", "-q", "-m", "a symlink"]);
        git(w, &["push", "-q", "origin", "HEAD"]);
        git(w, &["rev-parse", "HEAD"])
    }

    /// Commits a file that is not a chart at `path`.
    pub fn commit_file(&self, path: &str) -> String {
        let w = self.work.path();
        let file = w.join(path).join("README.md");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "not a chart\n").unwrap();
        git(w, &["add", "-A"]);
        git(w, &["commit", "-q", "-m", "not a chart"]);
        git(w, &["push", "-q", "origin", "HEAD"]);
        git(w, &["rev-parse", "HEAD"])
    }

    pub fn tag(&self, name: &str, annotated: bool) {
        let w = self.work.path();
        if annotated {
            git(w, &["tag", "-a", name, "-m", name]);
        } else {
            git(w, &["tag", name]);
        }
        git(w, &["push", "-q", "origin", name]);
    }
}

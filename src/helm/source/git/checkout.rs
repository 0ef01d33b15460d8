//! Checkouts of a chart directory at one commit: served from the cache when complete, else
//! fetched alone (depth 1) and written out of the commit's tree.

use std::num::NonZeroU32;
use std::path::Path;
use std::sync::Mutex;

use gix::bstr::ByteSlice;

use super::Job;
use crate::helm::source::{Error, cache, local};

/// Serialises writes to one checkout directory between workers of this process.
static CHECKOUTS: Mutex<()> = Mutex::new(());

/// Marks a checkout complete (written last, so a crash mid-write leaves none).
const COMPLETE: &str = ".complete";
/// The chart's own directory inside a checkout, so the marker is not a chart file.
const CHART_DIR: &str = "chart";

/// Writes `tree` to `dir`: blobs as files, subtrees as directories. A symlink is refused
/// (its target could lie outside the chart, or outside the repository), a submodule
/// skipped (Helm reads none).
fn write_tree(
    tree: &gix::Tree<'_>,
    dir: &Path,
    refuse: &dyn Fn(String) -> Error,
) -> Result<(), Error> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Cache { path, source }
    };
    let internal =
        |e: &dyn std::fmt::Display| Error::Internal(format!("reading the Git tree: {e}"));
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    for entry in tree.iter() {
        let entry = entry.map_err(|e| internal(&e))?;
        let name = entry.filename().to_str_lossy().into_owned();
        if name.contains('/') || name == ".." || name == "." {
            return Err(refuse(format!("the tree holds an invalid name {name:?}")));
        }
        let target = dir.join(&name);
        let mode = entry.mode();
        if mode.is_tree() {
            let sub = entry.object().map_err(|e| internal(&e))?.into_tree();
            write_tree(&sub, &target, refuse)?;
        } else if mode.is_link() {
            return Err(refuse(format!(
                "{name} is a symbolic link, which wheelhouse does not follow out of a Git tree"
            )));
        } else if mode.is_blob() {
            let blob = entry.object().map_err(|e| internal(&e))?;
            cache::write_atomic(&target, &blob.data).map_err(io(&target))?;
        }
    }
    Ok(())
}

impl Job {
    /// A checkout made earlier for `commit`, if complete.
    pub(super) fn cached(
        &self,
        checkout: &Path,
        commit: &str,
    ) -> Result<Option<local::LocalChart>, Error> {
        if !checkout.join(COMPLETE).is_file() {
            return Ok(None);
        }
        self.load_chart(checkout, commit).map(Some)
    }

    fn load_chart(&self, checkout: &Path, commit: &str) -> Result<local::LocalChart, Error> {
        let not_a_chart = |why: String| Error::GitPathNotChart {
            url: self.shown.clone(),
            commit: commit.to_owned(),
            path: if self.path.is_empty() {
                "/".into()
            } else {
                self.path.clone()
            },
            why,
        };
        match local::load(&checkout.join(CHART_DIR)) {
            Ok(chart) => Ok(chart),
            Err(Error::NoChartYaml { .. }) => Err(not_a_chart("it has no Chart.yaml".into())),
            Err(Error::InvalidChartYaml { reason, .. }) => Err(not_a_chart(format!(
                "its Chart.yaml does not parse: {reason}"
            ))),
            Err(e) => Err(e),
        }
    }

    /// Fetches `commit` alone (depth 1) into a scratch repository and writes the chart
    /// directory out of its tree into `checkout`.
    pub(super) fn fetch_and_check_out(
        &self,
        commit: &str,
        checkout: &Path,
    ) -> Result<local::LocalChart, Error> {
        let scratch = tempfile::Builder::new()
            .prefix(".fetch-")
            .tempdir_in(&self.git_dir)
            .map_err(|source| Error::Cache {
                path: self.git_dir.clone(),
                source,
            })?;
        let repo = gix::init_bare(scratch.path()).map_err(|e| self.internal(&e))?;
        let remote = self.remote(&repo, commit)?;
        let connection = self.connect(&remote)?;
        let depth = NonZeroU32::new(1).expect("1 is not zero");
        let outcome = connection
            .prepare_fetch(gix::progress::Discard, Default::default())
            .map_err(|e| self.classify(&e))?
            .with_shallow(gix::remote::fetch::Shallow::DepthAtRemote(depth))
            .receive(gix::progress::Discard, &self.interrupt)
            .map_err(|e| self.classify_fetch(&e, commit))?;
        if let gix::remote::fetch::Status::Change {
            write_pack_bundle, ..
        } = &outcome.status
        {
            tracing::debug!(
                url = %self.shown,
                commit,
                objects = write_pack_bundle.index.num_objects,
                shallow = repo.is_shallow().unwrap_or(false),
                "fetched a Git commit"
            );
        }

        let id = gix::ObjectId::from_hex(commit.as_bytes()).map_err(|e| self.internal(&e))?;
        let tree = repo
            .find_commit(id)
            .and_then(|c| c.tree())
            .map_err(|e| self.classify_fetch(&e, commit))?;
        let not_a_chart = |why: &str| Error::GitPathNotChart {
            url: self.shown.clone(),
            commit: commit.to_owned(),
            path: self.path.clone(),
            why: why.to_owned(),
        };
        let tree = if self.path.is_empty() {
            tree
        } else {
            let entry = tree
                .lookup_entry_by_path(&self.path)
                .map_err(|e| self.internal(&e))?
                .ok_or_else(|| not_a_chart("no such directory at this commit"))?;
            if !entry.mode().is_tree() {
                return Err(not_a_chart("it is a file, not a directory"));
            }
            entry.object().map_err(|e| self.internal(&e))?.into_tree()
        };

        let checkouts = self.git_dir.join("checkouts");
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| Error::Cache { path, source }
        };
        std::fs::create_dir_all(&checkouts).map_err(io(&checkouts))?;
        let staging = tempfile::Builder::new()
            .prefix(".checkout-")
            .tempdir_in(&checkouts)
            .map_err(io(&checkouts))?;
        write_tree(&tree, &staging.path().join(CHART_DIR), &|why| {
            not_a_chart(&why)
        })?;
        let chart = self.load_chart(staging.path(), commit)?;
        std::fs::write(staging.path().join(COMPLETE), commit).map_err(io(staging.path()))?;
        let _guard = CHECKOUTS.lock().unwrap_or_else(|e| e.into_inner());
        if checkout.join(COMPLETE).is_file() {
            // Another worker checked out the same commit meanwhile.
            return self.load_chart(checkout, commit);
        }
        let _ = std::fs::remove_dir_all(checkout);
        let staged = staging.keep();
        std::fs::rename(&staged, checkout).map_err(io(checkout))?;
        drop(chart);
        self.load_chart(checkout, commit)
    }

    /// An empty bare repository to run the protocol from (gitoxide needs one), shared by
    /// every resolve of the repository. It is made whole in a directory of its own and
    /// moved into place: two releases of one repository resolving at once saw it half
    /// made (its hooks being written), took it for broken and removed it under each other.
    pub(super) fn scratch_repo(&self, path: &Path) -> Result<gix::Repository, Error> {
        static SCRATCH: Mutex<()> = Mutex::new(());
        let _guard = SCRATCH.lock().unwrap_or_else(|e| e.into_inner());
        if let Ok(repo) = gix::open(path) {
            return Ok(repo);
        }
        // Not there yet, or left broken (by a process stopped mid-way before this).
        let _ = std::fs::remove_dir_all(path);
        let parent = path.parent().unwrap_or(Path::new("."));
        let io = |source| Error::Cache {
            path: parent.to_owned(),
            source,
        };
        std::fs::create_dir_all(parent).map_err(io)?;
        let staging = tempfile::Builder::new()
            .prefix(".scratch-")
            .tempdir_in(parent)
            .map_err(io)?;
        gix::init_bare(staging.path()).map_err(|e| self.internal(&e))?;
        let staged = staging.keep();
        // Another process may have moved its own into place meanwhile: that one serves.
        if std::fs::rename(&staged, path).is_err() {
            let _ = std::fs::remove_dir_all(&staged);
        }
        gix::open(path).map_err(|e| self.internal(&e))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    /// Releases of one repository resolve at once: each finds the shared scratch
    /// repository whole, never half made (the race the integration test `git::` met).
    #[test]
    fn concurrent_resolves_share_one_whole_scratch_repository() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let url = "http://127.0.0.1:1/charts.git".to_owned();
        let job = Arc::new(super::Job {
            git_dir: dir.path().to_owned(),
            source: String::new(),
            shown: url.clone(),
            endpoint: super::super::wanted::Endpoint::Http { url: url.clone() },
            url,
            wanted: super::super::wanted::Wanted::DefaultBranch,
            path: String::new(),
            auth: Default::default(),
            tls: None,
            timeout: std::time::Duration::from_secs(1),
            runtime: runtime.handle().clone(),
            interrupt: Default::default(),
            refused: Default::default(),
            via: None,
        });
        let path = dir.path().join("ls.git");
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (job, path) = (job.clone(), path.clone());
                std::thread::spawn(move || job.scratch_repo(&path).map(|_| ()))
            })
            .collect();
        for t in threads {
            t.join().unwrap().expect("the scratch repository opens");
        }
        // Nothing left beside it.
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("ls.git")]);
    }
}

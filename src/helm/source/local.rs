//! Charts on local disk: reading Chart.yaml from a chart directory or a packaged archive,
//! and content digests. Blocking IO; callers run it on the blocking pool.

use std::fs;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use flate2::read::GzDecoder;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::Error;

/// Symlinked directories are followed (as Helm does); this bounds a link loop.
const MAX_DEPTH: usize = 32;
/// Chart.yaml is a few hundred bytes; refuse to inflate something absurd.
const MAX_CHART_YAML: u64 = 1024 * 1024;
/// Helm's loader bounds: a chart (a directory's files, or an archive) at most 100 MiB,
/// each file at most 5 MiB (helm.sh/helm/v4 pkg/chart/loader: MaxDecompressedChartSize,
/// MaxDecompressedFileSize).
pub const MAX_CHART_SIZE: u64 = 100 * 1024 * 1024;
pub const MAX_FILE_SIZE: u64 = 5 * 1024 * 1024;
/// Files a chart directory may hold (Helm sets no bound; a hostile tree of millions of
/// empty files would otherwise hold a load slot for minutes).
const MAX_FILES: usize = 10_000;

/// Where a `chart.path` may point, and what it may be: a chart directory or a `.tgz`
/// under the chart root (or, on an engine without one, an absolute path), never the
/// engine's chart cache, never a device, pipe or socket, never a pseudo-filesystem.
#[derive(Debug, Clone)]
pub struct PathRules {
    /// `--chart-root`: relative paths resolve against it, and nothing outside it is read.
    pub root: Option<PathBuf>,
    /// The engine's chart cache (charts pulled for other releases, some with
    /// credentials): never reachable.
    pub cache: PathBuf,
}

impl PathRules {
    /// The canonical path `spec` names, checked against every rule (nothing is opened):
    /// each refusal names the path and the rule. With it, the stamp of what the path
    /// holds, taken by the same walk.
    pub fn resolve(&self, spec: &str) -> Result<(PathBuf, Stamp), Error> {
        let refused = |rule: String| Error::PathRefused {
            path: spec.to_owned(),
            rule,
        };
        let path = Path::new(spec);
        if path.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(refused(
                "it contains '..'; a chart path names a directory or .tgz under the chart root"
                    .into(),
            ));
        }
        let joined = match (&self.root, path.is_absolute()) {
            (Some(root), false) => root.join(path),
            (_, true) => path.to_owned(),
            (None, false) => {
                return Err(Error::RelativePath {
                    path: path.to_owned(),
                });
            }
        };
        // Resolves every symlink without opening anything (a pipe or device is never
        // read to find out what it is).
        let real = match fs::canonicalize(&joined) {
            Ok(real) => real,
            // A link whose target is no file at all (`/proc/self/fd/N` of a pipe).
            Err(e) if fs::symlink_metadata(&joined).is_ok() => {
                return Err(refused(format!(
                    "it cannot be resolved to a file (a link to a pipe, socket or nothing): {e}"
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::PathNotFound { path: joined });
            }
            Err(e) => return Err(refused(format!("it cannot be resolved: {e}"))),
        };
        if let Some(root) = &self.root {
            let root = fs::canonicalize(root).map_err(|e| {
                refused(format!(
                    "the chart root {} cannot be resolved: {e}",
                    root.display()
                ))
            })?;
            if !real.starts_with(&root) {
                return Err(refused(format!(
                    "it resolves to {}, outside the chart root {} (a symlink or an absolute path that leaves it)",
                    real.display(),
                    root.display()
                )));
            }
        }
        if let Ok(cache) = fs::canonicalize(&self.cache)
            && real.starts_with(&cache)
        {
            return Err(refused(format!(
                "it is inside the engine's chart cache {}, which holds the charts of other releases (some pulled with their credentials)",
                cache.display()
            )));
        }
        for system in ["/proc", "/sys", "/dev"] {
            if real.starts_with(system) {
                return Err(refused(format!(
                    "it resolves to {}, in the system's {system}, which holds no charts",
                    real.display()
                )));
            }
        }
        let meta = fs::metadata(&real).map_err(|e| refused(format!("{e}")))?;
        let mut stamp = Stamper::new();
        stamp.add(Path::new(""), &meta);
        if meta.is_dir() {
            check_tree(&real, &self.root, &refused, &mut stamp)?;
        } else if meta.is_file() {
            if meta.len() > MAX_CHART_SIZE {
                return Err(refused(format!(
                    "the archive is {} bytes, more than a chart may be ({MAX_CHART_SIZE} bytes, as Helm bounds it)",
                    meta.len()
                )));
            }
        } else {
            return Err(refused(format!(
                "it is a {}, not a chart directory or a .tgz file",
                kind_of(&meta)
            )));
        }
        Ok((real, stamp.finish()))
    }
}

/// What a chart on disk is, told from file system metadata alone: every entry's name,
/// size, inode and change times. Two equal stamps mean the same contents when the newer
/// was [`Stamp::settled`]: a write within the clock's resolution of the read could
/// otherwise leave the times as they were (git's "racily clean" entries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Order-independent sum of every entry's hash, and how many there are.
    sum: u64,
    entries: u64,
    /// Nothing under the path changed within [`SETTLED_AFTER`] before the walk began.
    settled: bool,
}

/// How long before a walk every change must be for its stamp to be trusted.
const SETTLED_AFTER: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a test waits for what it wrote to settle.
#[cfg(test)]
pub(super) const SETTLED_AFTER_FOR_TESTS: std::time::Duration =
    SETTLED_AFTER.saturating_add(std::time::Duration::from_millis(200));

impl Stamp {
    /// Whether a chart read with this stamp may be reused while the stamp holds.
    pub fn settled(&self) -> bool {
        self.settled
    }
}

/// Builds a [`Stamp`] while a walk visits each entry.
struct Stamper {
    began: std::time::SystemTime,
    sum: u64,
    entries: u64,
    newest: (i64, i64),
}

impl Stamper {
    fn new() -> Self {
        Self {
            began: std::time::SystemTime::now(),
            sum: 0,
            entries: 0,
            newest: (i64::MIN, 0),
        }
    }

    fn add(&mut self, relative: &Path, meta: &fs::Metadata) {
        use std::hash::{Hash, Hasher};
        use std::os::unix::fs::MetadataExt;
        let mut h = std::hash::DefaultHasher::new();
        relative.hash(&mut h);
        (meta.is_dir(), meta.len(), meta.ino(), meta.dev()).hash(&mut h);
        let (mtime, ctime) = (
            (meta.mtime(), meta.mtime_nsec()),
            (meta.ctime(), meta.ctime_nsec()),
        );
        (mtime, ctime).hash(&mut h);
        self.sum = self.sum.wrapping_add(h.finish());
        self.entries += 1;
        self.newest = self.newest.max(mtime).max(ctime);
    }

    fn finish(self) -> Stamp {
        let settled = self
            .began
            .checked_sub(SETTLED_AFTER)
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .is_some_and(|limit| {
                self.newest < (limit.as_secs() as i64, i64::from(limit.subsec_nanos()))
            });
        Stamp {
            sum: self.sum,
            entries: self.entries,
            settled,
        }
    }
}

/// The stamp of a chart directory or archive at `path` (canonical, checked before).
pub fn stamp(path: &Path) -> Result<Stamp, Error> {
    let refused = |rule: String| Error::PathRefused {
        path: path.display().to_string(),
        rule,
    };
    let meta = fs::metadata(path).map_err(|e| refused(format!("{e}")))?;
    let mut stamp = Stamper::new();
    stamp.add(Path::new(""), &meta);
    if meta.is_dir() {
        check_tree(path, &None, &refused, &mut stamp)?;
    }
    Ok(stamp.finish())
}

/// What a file system entry is, for a refusal.
fn kind_of(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_fifo() {
        "pipe"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Every entry of a chart directory: regular files and directories only (symlinks
/// followed, as Helm follows them, but never out of the chart root), each file within
/// Helm's size bound, all of them within the chart's, at most [`MAX_FILES`].
fn check_tree(
    dir: &Path,
    root: &Option<PathBuf>,
    refused: &dyn Fn(String) -> Error,
    stamp: &mut Stamper,
) -> Result<(), Error> {
    let root = match root {
        Some(r) => Some(fs::canonicalize(r).map_err(|e| refused(format!("the chart root: {e}")))?),
        None => None,
    };
    let mut total = 0u64;
    let mut files = 0usize;
    let mut stack = vec![(dir.to_owned(), 0usize)];
    while let Some((at, depth)) = stack.pop() {
        if depth > MAX_DEPTH {
            return Err(refused(format!(
                "directories nested deeper than {MAX_DEPTH} levels under {} (a symlink loop?)",
                at.display()
            )));
        }
        let entries = fs::read_dir(&at).map_err(|e| refused(format!("{}: {e}", at.display())))?;
        for entry in entries {
            let entry = entry.map_err(|e| refused(format!("{}: {e}", at.display())))?;
            let path = entry.path();
            let link = entry.file_type().is_ok_and(|t| t.is_symlink());
            if link {
                let target = fs::canonicalize(&path).map_err(|e| {
                    refused(format!(
                        "{} is a symlink that cannot be resolved: {e}",
                        path.display()
                    ))
                })?;
                if let Some(root) = &root
                    && !target.starts_with(root)
                {
                    return Err(refused(format!(
                        "{} is a symlink to {}, outside the chart root",
                        path.display(),
                        target.display()
                    )));
                }
            }
            let meta =
                fs::metadata(&path).map_err(|e| refused(format!("{}: {e}", path.display())))?;
            stamp.add(path.strip_prefix(dir).unwrap_or(&path), &meta);
            if meta.is_dir() {
                stack.push((path, depth + 1));
            } else if meta.is_file() {
                files += 1;
                total = total.saturating_add(meta.len());
                if meta.len() > MAX_FILE_SIZE {
                    return Err(refused(format!(
                        "{} is {} bytes, more than a chart file may be ({MAX_FILE_SIZE} bytes, as Helm bounds it)",
                        path.display(),
                        meta.len()
                    )));
                }
                if total > MAX_CHART_SIZE || files > MAX_FILES {
                    return Err(refused(format!(
                        "the directory holds more than a chart may ({MAX_CHART_SIZE} bytes, {MAX_FILES} files)"
                    )));
                }
            } else {
                return Err(refused(format!(
                    "{} is a {}, not a regular file",
                    path.display(),
                    kind_of(&meta)
                )));
            }
        }
    }
    Ok(())
}

/// The Chart.yaml fields wheelhouse needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartMeta {
    pub name: String,
    pub version: String,
    pub app_version: Option<String>,
}

/// A path chart read from disk.
pub struct LocalChart {
    pub meta: ChartMeta,
    pub digest: String,
    pub path: PathBuf,
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Reads a chart directory or archive at `path` (relative to the current directory).
pub fn load(path: &Path) -> Result<LocalChart, Error> {
    let absolute = std::path::absolute(path).map_err(|source| Error::PathIo {
        path: path.to_owned(),
        source,
    })?;
    let metadata = match fs::metadata(&absolute) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::PathNotFound { path: absolute });
        }
        Err(source) => {
            return Err(Error::PathIo {
                path: absolute,
                source,
            });
        }
    };
    if metadata.is_dir() {
        let chart_yaml = absolute.join("Chart.yaml");
        let text = match fs::read(&chart_yaml) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::NoChartYaml { path: absolute });
            }
            Err(source) => {
                return Err(Error::PathIo {
                    path: chart_yaml,
                    source,
                });
            }
        };
        let meta = parse_chart_yaml(&text).map_err(|reason| Error::InvalidChartYaml {
            path: chart_yaml,
            reason: Box::new(reason),
        })?;
        let digest = dir_digest(&absolute)?;
        Ok(LocalChart {
            meta,
            digest,
            path: absolute,
        })
    } else {
        // Bounded, whatever the file turned into since it was checked.
        let mut bytes = Vec::new();
        fs::File::open(&absolute)
            .and_then(|f| f.take(MAX_CHART_SIZE + 1).read_to_end(&mut bytes))
            .map_err(|source| Error::PathIo {
                path: absolute.clone(),
                source,
            })?;
        if bytes.len() as u64 > MAX_CHART_SIZE {
            return Err(Error::InvalidArchive {
                origin: absolute.display().to_string(),
                reason: format!("larger than a chart may be ({MAX_CHART_SIZE} bytes)"),
            });
        }
        let meta = match chart_yaml_in_archive(&bytes) {
            Ok(Some(text)) => {
                parse_chart_yaml(&text).map_err(|reason| Error::InvalidChartYaml {
                    path: absolute.join("Chart.yaml"),
                    reason: Box::new(reason),
                })?
            }
            Ok(None) => return Err(Error::NoChartYaml { path: absolute }),
            Err(reason) => {
                return Err(Error::InvalidArchive {
                    origin: absolute.display().to_string(),
                    reason,
                });
            }
        };
        Ok(LocalChart {
            meta,
            digest: format!("sha256:{}", sha256_hex(&bytes)),
            path: absolute,
        })
    }
}

/// Chart.yaml of a downloaded archive; `origin` names it in errors.
pub fn archive_meta(bytes: &[u8], origin: &str) -> Result<ChartMeta, Error> {
    let invalid = |reason: String| Error::InvalidArchive {
        origin: origin.to_owned(),
        reason,
    };
    let text = chart_yaml_in_archive(bytes)
        .map_err(invalid)?
        .ok_or_else(|| invalid("no <chart>/Chart.yaml inside".into()))?;
    parse_chart_yaml(&text).map_err(|e| invalid(format!("Chart.yaml: {e}")))
}

/// The top-level `<dir>/Chart.yaml` of a gzipped tar (subcharts' ones are deeper).
fn chart_yaml_in_archive(bytes: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut archive = tar::Archive::new(GzDecoder::new(bytes));
    let entries = archive
        .entries()
        .map_err(|e| format!("not a gzipped tar archive: {e}"))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("not a gzipped tar archive: {e}"))?;
        let path = entry.path().map_err(|e| e.to_string())?.into_owned();
        let parts: Vec<Component> = path
            .components()
            .filter(|c| !matches!(c, Component::CurDir))
            .collect();
        let is_chart_yaml = matches!(
            parts.as_slice(),
            [Component::Normal(_), Component::Normal(file)] if *file == "Chart.yaml"
        );
        if is_chart_yaml && entry.header().entry_type().is_file() {
            let mut text = Vec::new();
            entry
                .take(MAX_CHART_YAML)
                .read_to_end(&mut text)
                .map_err(|e| format!("reading Chart.yaml: {e}"))?;
            return Ok(Some(text));
        }
    }
    Ok(None)
}

/// Strings, as Helm's `Metadata` has them: a number reads as Helm reads it into a string
/// ([`crate::text::yaml::from_value`]: `version: 2` is "2", `appVersion: 1.10` is "1.1").
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawChartYaml {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    app_version: Option<String>,
}

/// Why a Chart.yaml does not give a chart's name and version.
#[derive(Debug, thiserror::Error)]
pub enum ChartYamlError {
    #[error(transparent)]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error(transparent)]
    Yaml(#[from] crate::text::yaml::Error),
    #[error("name is missing")]
    NoName,
    #[error("version is missing")]
    NoVersion,
}

pub fn parse_chart_yaml(text: &[u8]) -> Result<ChartMeta, ChartYamlError> {
    let text = std::str::from_utf8(text)?;
    let raw: RawChartYaml = crate::text::yaml::from_str(text)?;
    let name = raw
        .name
        .filter(|n| !n.trim().is_empty())
        .ok_or(ChartYamlError::NoName)?;
    let version = raw
        .version
        .filter(|v| !v.trim().is_empty())
        .ok_or(ChartYamlError::NoVersion)?;
    Ok(ChartMeta {
        name,
        version,
        app_version: raw.app_version.filter(|a| !a.is_empty()),
    })
}

/// sha256 over every file of a chart directory in a stable order (relative path with
/// `/` separators, then length, then content), so the digest changes exactly when a file
/// is added, removed, renamed or edited.
pub fn dir_digest(root: &Path) -> Result<String, Error> {
    let mut files = Vec::new();
    collect_files(root, root, 0, &mut files)?;
    files.sort();
    let mut hasher = Sha256::new();
    for relative in files {
        let path = root.join(&relative);
        let data = fs::read(&path).map_err(|source| Error::PathIo { path, source })?;
        hasher.update(relative.as_bytes());
        hasher.update([0u8]);
        hasher.update((data.len() as u64).to_le_bytes());
        hasher.update(&data);
    }
    Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
}

fn collect_files(
    root: &Path,
    dir: &Path,
    depth: usize,
    out: &mut Vec<String>,
) -> Result<(), Error> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::PathIo { path, source }
    };
    if depth > MAX_DEPTH {
        return Err(Error::PathIo {
            path: dir.to_owned(),
            source: std::io::Error::other("directories nested too deep (a symlink loop?)"),
        });
    }
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        // metadata() follows symlinks, as Helm's loader does.
        let meta = fs::metadata(&path).map_err(io(&path))?;
        if meta.is_dir() {
            collect_files(root, &path, depth + 1, out)?;
        } else if meta.is_file() {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            let name: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push(name.join("/"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_yaml_fields_tolerate_yaml_typing() {
        let meta =
            parse_chart_yaml(b"apiVersion: v2\nname: demo\nversion: 1.0.0\nappVersion: 1.10\n")
                .unwrap();
        assert_eq!(
            meta,
            ChartMeta {
                name: "demo".into(),
                version: "1.0.0".into(),
                // The float 1.1, as helm v4 reads it (Helm asks for it to be quoted).
                app_version: Some("1.1".into())
            }
        );
        assert_eq!(
            parse_chart_yaml(b"name: demo\nversion: 2\n")
                .unwrap()
                .version,
            "2"
        );
    }

    #[test]
    fn chart_yaml_needs_name_and_version() {
        let message = |text: &[u8]| parse_chart_yaml(text).unwrap_err().to_string();
        assert_eq!(message(b"version: 1.0.0\n"), "name is missing");
        assert_eq!(message(b"name: x\n"), "version is missing");
        assert!(parse_chart_yaml(b"name: [unclosed\n").is_err());
        assert_eq!(message(b"\n"), "name is missing");
    }

    /// Each hostile `chart.path` of the issue is refused with its rule, without being
    /// opened: a device, the engine's own pipe, a symlink out of the root, `..`, the
    /// chart cache, a pipe inside a chart directory, an oversized file.
    #[test]
    fn a_chart_path_is_read_only_under_the_root_and_only_as_a_chart() {
        let base = tempfile::tempdir().unwrap();
        let root = base.path().join("charts");
        let cache = base.path().join("cache");
        let outside = base.path().join("outside/webapp");
        for dir in [
            &root.join("app/templates"),
            &cache.join("private"),
            &outside,
        ] {
            fs::create_dir_all(dir).unwrap();
        }
        for dir in [root.join("app"), cache.join("private"), outside.clone()] {
            fs::write(dir.join("Chart.yaml"), "name: a\nversion: 1.0.0\n").unwrap();
        }
        std::os::unix::fs::symlink(&outside, root.join("escape")).unwrap();
        std::os::unix::fs::symlink(&cache, root.join("cached")).unwrap();
        let rules = PathRules {
            root: Some(root.clone()),
            cache: cache.clone(),
        };
        assert_eq!(
            rules.resolve("app").unwrap().0,
            fs::canonicalize(root.join("app")).unwrap()
        );
        let (reader, _writer) = pipe();
        let own_pipe = format!("/proc/self/fd/{reader}");
        let absolute_outside = outside.display().to_string();
        let cases: Vec<(&str, &str)> = vec![
            ("/dev/zero", "outside the chart root"),
            (&own_pipe, "cannot be resolved to a file"),
            ("escape", "outside the chart root"),
            ("../outside/webapp", "contains '..'"),
            ("app/../../outside/webapp", "contains '..'"),
            (&absolute_outside, "outside the chart root"),
        ];
        for (spec, rule) in &cases {
            let e = rules.resolve(spec).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{spec:?}")) && e.contains(rule),
                "{spec}: {e}"
            );
        }
        // Without a chart root: absolute paths only, and still never these.
        let open = PathRules {
            root: None,
            cache: cache.clone(),
        };
        for (spec, rule) in [
            ("/dev/zero", "in the system's /dev"),
            (own_pipe.as_str(), "cannot be resolved"),
            (&cache.join("private").display().to_string(), "chart cache"),
            (
                &root.join("cached/private").display().to_string(),
                "chart cache",
            ),
        ] {
            let e = open.resolve(spec).unwrap_err().to_string();
            assert!(e.contains(rule), "{spec}: {e}");
        }
        assert!(matches!(
            open.resolve("app"),
            Err(Error::RelativePath { .. })
        ));
        // What a chart directory holds: regular files within Helm's bounds.
        let fifo = root.join("app/templates/fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let e = rules.resolve("app").unwrap_err().to_string();
        assert!(e.contains("is a pipe, not a regular file"), "{e}");
        fs::remove_file(&fifo).unwrap();
        let big = fs::File::create(root.join("app/templates/big.yaml")).unwrap();
        big.set_len(MAX_FILE_SIZE + 1).unwrap();
        let e = rules.resolve("app").unwrap_err().to_string();
        assert!(e.contains("more than a chart file may be"), "{e}");
    }

    /// A pipe of this process: (read end, write end) descriptors.
    fn pipe() -> (i32, std::io::PipeWriter) {
        let (reader, writer) = std::io::pipe().unwrap();
        use std::os::fd::IntoRawFd;
        (reader.into_raw_fd(), writer)
    }

    #[test]
    fn dir_digest_is_stable_and_content_sensitive() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("templates")).unwrap();
        fs::write(dir.path().join("Chart.yaml"), "name: a\nversion: 1.0.0\n").unwrap();
        fs::write(dir.path().join("templates/cm.yaml"), "kind: ConfigMap\n").unwrap();
        let first = dir_digest(dir.path()).unwrap();
        assert!(first.starts_with("sha256:") && first.len() == 7 + 64);
        assert_eq!(dir_digest(dir.path()).unwrap(), first);
        fs::write(dir.path().join("templates/cm.yaml"), "kind: Secret\n").unwrap();
        let edited = dir_digest(dir.path()).unwrap();
        assert_ne!(edited, first);
        // Moving content between files changes the digest even if the bytes are the same.
        fs::write(dir.path().join("templates/cm.yaml"), "").unwrap();
        fs::write(dir.path().join("templates/c"), "m.yamlkind: Secret\n").unwrap();
        assert_ne!(dir_digest(dir.path()).unwrap(), edited);
    }
}

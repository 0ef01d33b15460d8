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
            reason,
        })?;
        let digest = dir_digest(&absolute)?;
        Ok(LocalChart {
            meta,
            digest,
            path: absolute,
        })
    } else {
        let bytes = fs::read(&absolute).map_err(|source| Error::PathIo {
            path: absolute.clone(),
            source,
        })?;
        let meta = match chart_yaml_in_archive(&bytes) {
            Ok(Some(text)) => {
                parse_chart_yaml(&text).map_err(|reason| Error::InvalidChartYaml {
                    path: absolute.join("Chart.yaml"),
                    reason,
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
/// ([`crate::yaml::from_value`]: `version: 2` is "2", `appVersion: 1.10` is "1.1").
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

pub fn parse_chart_yaml(text: &[u8]) -> Result<ChartMeta, String> {
    let text = std::str::from_utf8(text).map_err(|e| e.to_string())?;
    let raw: RawChartYaml = crate::yaml::from_str(text)?;
    let name = raw
        .name
        .filter(|n| !n.trim().is_empty())
        .ok_or("name is missing")?;
    let version = raw
        .version
        .filter(|v| !v.trim().is_empty())
        .ok_or("version is missing")?;
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
        assert_eq!(
            parse_chart_yaml(b"version: 1.0.0\n"),
            Err("name is missing".into())
        );
        assert_eq!(
            parse_chart_yaml(b"name: x\n"),
            Err("version is missing".into())
        );
        assert!(parse_chart_yaml(b"name: [unclosed\n").is_err());
        assert_eq!(parse_chart_yaml(b"\n"), Err("name is missing".into()));
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

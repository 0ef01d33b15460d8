//! `chart.valuesFiles` (Flux's `chart.spec.valuesFiles`): the chart's default values
//! replaced by values files merged in order, each over the last, as Flux's
//! source-controller builds a chart artifact. A repository or OCI chart's files are looked
//! up inside the chart (`values.yaml` being its own values); a Git chart's are read from
//! the repository's root. Listing `values.yaml` alone leaves the chart as it is.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};

use super::Chart;
use super::yaml::{mapping, merge_maps};

/// Where the listed paths are relative to.
#[derive(Debug, Clone, Copy)]
pub enum Origin<'a> {
    /// Inside the chart (a repository, OCI or path chart).
    Chart,
    /// The root of the Git checkout the chart directory is in.
    Root(&'a Path),
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Absolute, or leaving the chart (or repository) with `..`.
    #[error("values file '{0}' is not a relative path inside the chart's source")]
    Outside(String),
    #[error("no values file found at path '{0}'")]
    Missing(String),
    #[error("could not read values from file '{path}': {source}")]
    Unreadable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("unmarshaling values from '{path}' failed: {reason}")]
    Invalid { path: String, reason: String },
}

/// The chart's default values made of `files`, or `None` where they stay the chart's own
/// (no files, or `values.yaml` alone). A missing file fails unless `ignore_missing`.
pub fn default_values(
    chart: &Chart,
    origin: Origin<'_>,
    files: &[String],
    ignore_missing: bool,
) -> Result<Option<Map<String, Value>>, Error> {
    let cleaned: Vec<String> = files
        .iter()
        .map(|f| clean(f).ok_or_else(|| Error::Outside(f.clone())))
        .collect::<Result<_, _>>()?;
    if cleaned.is_empty() || cleaned == ["values.yaml"] {
        return Ok(None);
    }
    let mut merged = Map::new();
    for (file, listed) in cleaned.iter().zip(files) {
        let values = match origin {
            Origin::Chart if file == "values.yaml" => chart.values.clone(),
            Origin::Chart => match chart.files.iter().find(|f| &f.name == file) {
                Some(f) => parse(listed, &f.data)?,
                None if ignore_missing => continue,
                None => return Err(Error::Missing(listed.clone())),
            },
            Origin::Root(root) => match read_inside(root, file) {
                Ok(data) => parse(listed, &data)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && ignore_missing => continue,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::Missing(listed.clone()));
                }
                Err(source) => {
                    return Err(Error::Unreadable {
                        path: listed.clone(),
                        source,
                    });
                }
            },
        };
        merged = merge_maps(merged, values);
    }
    Ok(Some(merged))
}

fn parse(path: &str, data: &[u8]) -> Result<Map<String, Value>, Error> {
    mapping(data).map_err(|e| Error::Invalid {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// `path` without `.` parts or repeated slashes; `None` when it is absolute or has `..`.
fn clean(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// A regular file at `relative` under `root`, refused (as missing) when a symlink on the
/// way leads out of `root`.
fn read_inside(root: &Path, relative: &str) -> std::io::Result<Vec<u8>> {
    let root = root.canonicalize()?;
    let path: PathBuf = root.join(relative).canonicalize()?;
    if !path.starts_with(&root) || !path.is_file() {
        return Err(std::io::ErrorKind::NotFound.into());
    }
    std::fs::read(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helm::chart::File;
    use serde_json::json;

    fn chart() -> Chart {
        Chart {
            values: json!({"a": 1, "nested": {"x": 1, "w": 1}})
                .as_object()
                .unwrap()
                .clone(),
            files: vec![
                File {
                    name: "values-prod.yaml".into(),
                    data: b"nested: {w: 2, z: 3}\nb: prod\n".to_vec(),
                },
                File {
                    name: "ci/extra.yaml".into(),
                    data: b"b: extra\nnested: null\n".to_vec(),
                },
            ],
            ..Default::default()
        }
    }

    fn files(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn files_merge_in_order_over_each_other_and_replace_the_charts_values() {
        let got = default_values(
            &chart(),
            Origin::Chart,
            &files(&["values.yaml", "./values-prod.yaml"]),
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            Value::Object(got),
            json!({"a": 1, "b": "prod", "nested": {"x": 1, "w": 2, "z": 3}})
        );
        // values.yaml is not included unless listed; a later null replaces a map.
        let got = default_values(
            &chart(),
            Origin::Chart,
            &files(&["values-prod.yaml", "ci//extra.yaml"]),
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(Value::Object(got), json!({"b": "extra", "nested": null}));
    }

    #[test]
    fn values_yaml_alone_or_nothing_leaves_the_chart_as_it_is() {
        for list in [&[][..], &["values.yaml"], &["./values.yaml"]] {
            assert!(
                default_values(&chart(), Origin::Chart, &files(list), false)
                    .unwrap()
                    .is_none()
            );
        }
    }

    #[test]
    fn a_missing_file_fails_unless_ignored_and_a_path_may_not_leave_the_source() {
        let err = default_values(&chart(), Origin::Chart, &files(&["nope.yaml"]), false)
            .unwrap_err()
            .to_string();
        assert_eq!(err, "no values file found at path 'nope.yaml'");
        let got = default_values(
            &chart(),
            Origin::Chart,
            &files(&["nope.yaml", "values-prod.yaml"]),
            true,
        )
        .unwrap()
        .unwrap();
        assert_eq!(got["b"], "prod");
        for outside in ["../x.yaml", "/etc/passwd", "a/../../x.yaml"] {
            assert!(matches!(
                default_values(&chart(), Origin::Chart, &files(&[outside]), true),
                Err(Error::Outside(_))
            ));
        }
    }

    #[test]
    fn a_git_charts_files_come_from_the_repository_root_and_not_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join("envs")).unwrap();
        std::fs::write(root.join("envs/prod.yaml"), "replicas: 3\n").unwrap();
        std::fs::write(dir.path().join("secret.yaml"), "leaked: true\n").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.yaml"), root.join("link.yaml")).unwrap();
        let got = default_values(
            &chart(),
            Origin::Root(&root),
            &files(&["envs/prod.yaml"]),
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(Value::Object(got), json!({"replicas": 3}));
        let err = default_values(&chart(), Origin::Root(&root), &files(&["link.yaml"]), false)
            .unwrap_err();
        assert!(matches!(err, Error::Missing(_)), "{err}");
        let err = default_values(
            &chart(),
            Origin::Chart,
            &files(&["values-prod.yaml"]),
            false,
        );
        assert!(err.is_ok());
        std::fs::write(root.join("bad.yaml"), "- a list\n").unwrap();
        let err = default_values(&chart(), Origin::Root(&root), &files(&["bad.yaml"]), false)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("unmarshaling values from 'bad.yaml' failed"),
            "{err}"
        );
    }
}

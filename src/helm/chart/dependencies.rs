//! Subcharts, as far as installing CRDs needs them. `helm install` installs the CRDs of
//! the chart and of every subchart at any depth (`Chart.CRDObjects`), after dropping the
//! subcharts the values disable (`ProcessDependencies`: a dependency's `tags`, then its
//! `condition`, which wins). Subcharts are not part of the chart Helm stores in a
//! release, so they are read again from the chart's files here.

use std::path::Path;

use serde_json::{Map, Value};

use super::load::{has_manifest_extension, read_archive_from, read_files};
use super::yaml;
use super::{Error, File};
use crate::text::yaml::go_string;

/// Charts nest this deep at most before the walk gives up (a loop of archives).
const MAX_DEPTH: usize = 32;

/// The CRD files `helm install` would install for the chart at `path` with the user
/// `values`: its own `crds/` and those of every enabled subchart, named by their path in
/// the chart (`charts/db/crds/x.yaml`).
pub fn crds_to_install(path: &Path, values: &Map<String, Value>) -> Result<Vec<File>, Error> {
    let files = read_files(path)?;
    let top = Value::Object(values.clone());
    let tags = values.get("tags").cloned().unwrap_or(Value::Null);
    let mut out = Vec::new();
    collect(path, files, &top, &tags, "", 0, &mut out)?;
    Ok(out)
}

/// A dependency as Chart.yaml lists it.
struct Dependency {
    name: String,
    alias: Option<String>,
    condition: Option<String>,
    tags: Vec<String>,
}

fn collect(
    path: &Path,
    files: Vec<File>,
    user: &Value,
    tags: &Value,
    prefix: &str,
    depth: usize,
    out: &mut Vec<File>,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::Invalid {
            path: path.to_path_buf(),
            message: format!("subcharts nest deeper than {MAX_DEPTH} levels"),
        });
    }
    let parse = |file: &str, source: yaml::FileError| Error::Parse {
        file: format!("{prefix}{file}"),
        source: source.into(),
    };
    let mut defaults = Map::new();
    let mut dependencies = Vec::new();
    let mut subcharts: Vec<(String, Vec<File>)> = Vec::new();
    for f in files {
        match f.name.as_str() {
            "values.yaml" => {
                defaults = yaml::values(&f.data).map_err(|e| parse("values.yaml", e))?
            }
            // apiVersion v2 lists them in Chart.yaml, v1 in requirements.yaml.
            "Chart.yaml" | "requirements.yaml" => {
                let md = yaml::mapping(&f.data).map_err(|e| parse(&f.name, e))?;
                if let Some(list) = md.get("dependencies") {
                    dependencies.extend(list.as_array().into_iter().flatten().map(dependency));
                }
            }
            n if n.starts_with("crds/") && has_manifest_extension(n) => out.push(File {
                name: format!("{prefix}{n}"),
                data: f.data,
            }),
            n => {
                let Some(rest) = n.strip_prefix("charts/") else {
                    continue;
                };
                match rest.split_once('/') {
                    // An unpacked subchart directory.
                    Some((dir, inner)) => {
                        let key = format!("charts/{dir}/");
                        let inner = File {
                            name: inner.to_string(),
                            data: f.data,
                        };
                        match subcharts.iter_mut().find(|(k, _)| *k == key) {
                            Some((_, files)) => files.push(inner),
                            None => subcharts.push((key, vec![inner])),
                        }
                    }
                    // A packaged subchart.
                    None if rest.ends_with(".tgz") => {
                        let inner = read_archive_from(&f.data[..], &path.join(n))?;
                        subcharts.push((format!("charts/{rest}/"), inner));
                    }
                    None => {}
                }
            }
        }
    }
    // The values this chart sees: the user's over its own defaults.
    let user_map = user.as_object().cloned().unwrap_or_default();
    let scope = yaml::merge_maps(defaults, user_map);

    for (key, sub_files) in subcharts {
        let name = chart_name(&sub_files).unwrap_or_default();
        let listed: Vec<&Dependency> = dependencies.iter().filter(|d| d.name == name).collect();
        // A subchart in charts/ that no dependency lists is used as it is, by its name.
        let instances: Vec<(String, bool)> = if listed.is_empty() {
            vec![(name.clone(), true)]
        } else {
            listed
                .iter()
                .map(|d| {
                    let as_name = d.alias.clone().unwrap_or_else(|| d.name.clone());
                    (as_name, enabled(d, &scope, tags))
                })
                .collect()
        };
        for (as_name, on) in instances {
            if !on {
                continue;
            }
            let sub_user = scope.get(&as_name).cloned().unwrap_or(Value::Null);
            collect(
                path,
                sub_files.clone(),
                &sub_user,
                tags,
                &format!("{prefix}{key}"),
                depth + 1,
                out,
            )?;
        }
    }
    Ok(())
}

fn dependency(value: &Value) -> Dependency {
    let text = |k: &str| value.get(k).and_then(go_string);
    Dependency {
        name: text("name").unwrap_or_default(),
        alias: text("alias").filter(|a| !a.is_empty()),
        condition: text("condition").filter(|c| !c.is_empty()),
        tags: value
            .get("tags")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(go_string)
            .collect(),
    }
}

fn chart_name(files: &[File]) -> Option<String> {
    let chart = files.iter().find(|f| f.name == "Chart.yaml")?;
    let md = yaml::mapping(&chart.data).ok()?;
    go_string(md.get("name")?)
}

/// Helm's rule: any of the dependency's tags true enables it, else any false disables it;
/// then the first path of its `condition` that holds a boolean decides, overriding tags.
fn enabled(d: &Dependency, scope: &Map<String, Value>, tags: &Value) -> bool {
    let mut on = true;
    let tag_values: Vec<bool> = d
        .tags
        .iter()
        .filter_map(|t| tags.get(t).and_then(Value::as_bool))
        .collect();
    if tag_values.contains(&true) {
        on = true;
    } else if tag_values.contains(&false) {
        on = false;
    }
    if let Some(condition) = &d.condition {
        for path in condition.split(',').map(str::trim) {
            let mut parts = path.split('.');
            let first = parts.next().and_then(|p| scope.get(p));
            let value = parts.fold(first, |v, part| v.and_then(|v| v.get(part)));
            if let Some(b) = value.and_then(Value::as_bool) {
                return b;
            }
        }
    }
    on
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dep(condition: Option<&str>, tags: &[&str]) -> Dependency {
        Dependency {
            name: "db".into(),
            alias: None,
            condition: condition.map(str::to_string),
            tags: tags.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn conditions_win_over_tags_as_in_helm() {
        let scope: Map<String, Value> =
            serde_json::from_value(serde_json::json!({"db": {"enabled": false}, "x": "yes"}))
                .unwrap();
        let tags = serde_json::json!({"backend": true, "off": false});
        assert!(enabled(&dep(None, &[]), &scope, &tags));
        assert!(!enabled(
            &dep(Some("db.enabled"), &["backend"]),
            &scope,
            &tags
        ));
        assert!(!enabled(&dep(None, &["off"]), &scope, &tags));
        assert!(enabled(&dep(None, &["off", "backend"]), &scope, &tags));
        // A path that is not a boolean is skipped; the next one decides.
        assert!(!enabled(&dep(Some("x, db.enabled"), &[]), &scope, &tags));
        assert!(enabled(&dep(Some("missing.path"), &[]), &scope, &tags));
    }

    fn write(root: &Path, name: &str, text: &str) {
        let p = root.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn crds_of_enabled_subcharts_at_any_depth() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "Chart.yaml",
            "apiVersion: v2\nname: top\nversion: 1.0.0\ndependencies:\n- {name: mid, version: 1.0.0, condition: mid.enabled}\n- {name: extra, version: 1.0.0, condition: extra.enabled}\n",
        );
        write(
            root,
            "values.yaml",
            // Not `off:` or `on:` as keys: YAML 1.1 (and so Helm) reads them as booleans.
            "mid: {enabled: true}\nextra: {enabled: false}\n",
        );
        write(root, "crds/top.yaml", "kind: CustomResourceDefinition\n");
        write(
            root,
            "charts/mid/Chart.yaml",
            "apiVersion: v2\nname: mid\nversion: 1.0.0\ndependencies:\n- {name: leaf, version: 1.0.0, condition: leaf.enabled}\n",
        );
        write(root, "charts/mid/values.yaml", "leaf: {enabled: false}\n");
        write(
            root,
            "charts/mid/charts/leaf/Chart.yaml",
            "apiVersion: v2\nname: leaf\nversion: 1.0.0\n",
        );
        write(
            root,
            "charts/mid/charts/leaf/crds/leaf.yaml",
            "kind: CustomResourceDefinition\n",
        );
        write(
            root,
            "charts/mid/crds/mid.yml",
            "kind: CustomResourceDefinition\n",
        );
        write(
            root,
            "charts/extra/Chart.yaml",
            "apiVersion: v2\nname: extra\nversion: 1.0.0\n",
        );
        write(
            root,
            "charts/extra/crds/extra.yaml",
            "kind: CustomResourceDefinition\n",
        );
        let names = |values: serde_json::Value| -> Vec<String> {
            let values = values.as_object().cloned().unwrap();
            crds_to_install(root, &values)
                .unwrap()
                .into_iter()
                .map(|f| f.name)
                .collect()
        };
        assert_eq!(
            names(serde_json::json!({})),
            ["crds/top.yaml", "charts/mid/crds/mid.yml"]
        );
        // The user's values reach nested conditions through the parent's scope.
        assert_eq!(
            names(
                serde_json::json!({"mid": {"leaf": {"enabled": true}}, "extra": {"enabled": true}})
            ),
            // Subcharts in the order Helm's loader reads charts/ (by path).
            [
                "crds/top.yaml",
                "charts/extra/crds/extra.yaml",
                "charts/mid/crds/mid.yml",
                "charts/mid/charts/leaf/crds/leaf.yaml"
            ]
        );
    }
}

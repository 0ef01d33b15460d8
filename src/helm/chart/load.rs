//! Loading a chart directory or packaged `.tgz` into the [`Chart`] Helm stores in a
//! release, following Helm's loader (`pkg/chart/v2/loader`): which file goes where, the
//! metadata rules, `.helmignore` for directories (not archives, as in Helm), and the same
//! guards against hostile archives.

use std::io::Read;
use std::path::{Component, Path};

use serde_json::{Map, Value};

use super::ignore::{HELMIGNORE, Rules};
use super::{Chart, Error, File, Metadata, ParseError, yaml};
use crate::text::yaml::go_string;

/// Helm refuses charts that decompress to more than this (archive.MaxDecompressedChartSize).
const MAX_CHART_SIZE: u64 = 100 * 1024 * 1024;

/// Symlinked directories are followed, as Helm does; this bounds a symlink loop.
const MAX_DEPTH: usize = 64;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Loads a chart directory, or a packaged chart (`.tgz` whose entries sit under one
/// top-level folder, `<name>/`).
pub fn load(path: &Path) -> Result<Chart, Error> {
    from_files(path, read_files(path)?)
}

/// Every file of a chart directory or `.tgz`, named relative to the chart's root.
pub(super) fn read_files(path: &Path) -> Result<Vec<File>, Error> {
    let meta = std::fs::metadata(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_dir() {
        read_dir(path)
    } else {
        read_archive(path)
    }
}

/// The chart's CRD manifests: files under `crds/` ending in .yaml, .yml or .json (any
/// case), as Helm's `Chart.CRDs` selects them.
pub fn crds(chart: &Chart) -> Vec<&File> {
    chart
        .files
        .iter()
        .filter(|f| f.name.starts_with("crds/") && has_manifest_extension(&f.name))
        .collect()
}

pub(super) fn has_manifest_extension(name: &str) -> bool {
    let base = name.rsplit('/').next().unwrap_or(name);
    match base.rfind('.') {
        Some(dot) => {
            let ext = &base[dot..];
            [".yaml", ".yml", ".json"]
                .iter()
                .any(|e| ext.eq_ignore_ascii_case(e))
        }
        None => false,
    }
}

/// Sorts by path components, the order Go's `filepath.Walk` visits a directory in, so
/// `a/x` comes before `a-b/x`.
fn sort_files(files: &mut [File]) {
    files.sort_by(|a, b| a.name.split('/').cmp(b.name.split('/')));
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn invalid(path: &Path, message: impl Into<String>) -> Error {
    Error::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn read_dir(root: &Path) -> Result<Vec<File>, Error> {
    let mut rules = match std::fs::read(root.join(HELMIGNORE)) {
        Ok(text) => Rules::parse(&String::from_utf8_lossy(&text)).map_err(|e| Error::Parse {
            file: root.join(HELMIGNORE).display().to_string(),
            source: e.into(),
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Rules::default(),
        Err(e) => return Err(io_err(&root.join(HELMIGNORE))(e)),
    };
    rules.add_defaults();

    let mut files = Vec::new();
    let mut budget = MAX_CHART_SIZE;
    walk(root, root, "", &rules, &mut files, &mut budget, 0)?;
    Ok(files)
}

fn walk(
    root: &Path,
    dir: &Path,
    prefix: &str,
    rules: &Rules,
    files: &mut Vec<File>,
    budget: &mut u64,
    depth: usize,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(invalid(
            root,
            format!("directories nested deeper than {MAX_DEPTH} levels (a symlink loop?)"),
        ));
    }
    let mut entries = std::fs::read_dir(dir)
        .map_err(io_err(dir))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io_err(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let rel = format!("{prefix}{name}");
        // Follows symlinks, as Helm's loader does.
        let meta = std::fs::metadata(&path).map_err(io_err(&path))?;
        if rules.ignore(&rel, meta.is_dir()) {
            continue;
        }
        if meta.is_dir() {
            walk(
                root,
                &path,
                &format!("{rel}/"),
                rules,
                files,
                budget,
                depth + 1,
            )?;
            continue;
        }
        if !meta.is_file() {
            return Err(invalid(
                root,
                format!("cannot load irregular file {rel} (device, socket or pipe)"),
            ));
        }
        if meta.len() > *budget {
            return Err(invalid(
                root,
                format!("chart is larger than the maximum size {MAX_CHART_SIZE} bytes"),
            ));
        }
        let data = std::fs::read(&path).map_err(io_err(&path))?;
        *budget = budget.saturating_sub(data.len() as u64);
        files.push(File {
            name: rel,
            data: strip_bom(data),
        });
    }
    Ok(())
}

fn strip_bom(mut data: Vec<u8>) -> Vec<u8> {
    if data.starts_with(UTF8_BOM) {
        data.drain(..UTF8_BOM.len());
    }
    data
}

fn read_archive(path: &Path) -> Result<Vec<File>, Error> {
    let raw = std::fs::File::open(path).map_err(io_err(path))?;
    let mut magic = [0u8; 3];
    let n = (&raw).take(3).read(&mut magic).map_err(io_err(path))?;
    if magic[..n] != [0x1f, 0x8b, 0x08] {
        let name = path.display();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        return Err(invalid(
            path,
            if ext == "yaml" || ext == "yml" {
                format!(
                    "{name} seems to be a YAML file, but a chart directory or .tgz was expected"
                )
            } else {
                format!("{name} is neither a directory nor a gzipped chart archive")
            },
        ));
    }
    let raw = std::fs::File::open(path).map_err(io_err(path))?;
    read_archive_from(raw, path)
}

/// The files of a gzipped chart archive read from `raw` (`path` names it in errors): a
/// packaged subchart inside a chart is read from memory this way.
pub(super) fn read_archive_from(raw: impl Read, path: &Path) -> Result<Vec<File>, Error> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(raw));
    let mut files = Vec::new();
    let mut remaining = MAX_CHART_SIZE;
    let entries = archive.entries().map_err(io_err(path))?;
    for entry in entries {
        let mut entry = entry.map_err(io_err(path))?;
        // Directories, PAX/GNU headers and links carry no chart content.
        if !matches!(
            entry.header().entry_type(),
            tar::EntryType::Regular | tar::EntryType::Continuous
        ) {
            continue;
        }
        let raw_name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let name = archive_name(&raw_name).map_err(|source| Error::ArchiveEntry {
            path: path.to_path_buf(),
            source,
        })?;
        let size = entry.header().size().map_err(io_err(path))?;
        if size > remaining {
            return Err(invalid(
                path,
                format!("decompressed chart is larger than the maximum size {MAX_CHART_SIZE}"),
            ));
        }
        let mut data = Vec::with_capacity(size as usize);
        (&mut entry)
            .take(remaining)
            .read_to_end(&mut data)
            .map_err(io_err(path))?;
        remaining -= data.len() as u64;
        if (data.len() as u64) < size || remaining == 0 {
            return Err(invalid(
                path,
                format!("decompressed chart is larger than the maximum size {MAX_CHART_SIZE}"),
            ));
        }
        files.push(File {
            name,
            data: strip_bom(data),
        });
    }
    if files.is_empty() {
        return Err(invalid(path, "no files in chart archive"));
    }
    Ok(files)
}

/// Why Helm refuses an archive entry's name.
#[derive(Debug, thiserror::Error)]
pub enum EntryNameError {
    #[error("Chart.yaml is not inside the archive's top-level folder")]
    ChartYamlAtTop,
    #[error("chart illegally contains absolute paths")]
    Absolute,
    #[error("chart illegally references parent directory")]
    ParentDirectory,
    #[error("chart illegally contains content outside the base directory: {0:?}")]
    OutsideBase(String),
    /// A Windows drive letter (`c:/`).
    #[error("chart contains illegally named files")]
    IllegalName,
}

/// The chart-relative name of an archive entry (its top-level folder removed), with
/// Helm's checks against absolute paths and escapes from the chart directory.
fn archive_name(raw: &str) -> Result<String, EntryNameError> {
    let delimiter = if raw.contains('\\') { '\\' } else { '/' };
    let mut parts = raw.split(delimiter);
    let top = parts.next().unwrap_or("");
    if top == "Chart.yaml" {
        return Err(EntryNameError::ChartYamlAtTop);
    }
    let rest: Vec<&str> = parts.collect();
    let joined = rest.join("/");
    if joined.starts_with('/') {
        return Err(EntryNameError::Absolute);
    }
    // path.Clean, then the same refusals as Helm.
    let mut clean: Vec<&str> = Vec::new();
    for c in Path::new(&joined).components() {
        match c {
            Component::Normal(s) => clean.push(s.to_str().unwrap_or_default()),
            Component::ParentDir => {
                if clean.pop().is_none() {
                    return Err(EntryNameError::ParentDirectory);
                }
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => {
                return Err(EntryNameError::Absolute);
            }
        }
    }
    if clean.is_empty() {
        return Err(EntryNameError::OutsideBase(raw.to_owned()));
    }
    let name = clean.join("/");
    let b = name.as_bytes();
    if b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'/' {
        return Err(EntryNameError::IllegalName);
    }
    Ok(name)
}

/// Helm's `LoadFiles`: sorts the files into the chart's parts.
fn from_files(path: &Path, files: Vec<File>) -> Result<Chart, Error> {
    let parse_err = |file: &str, source: ParseError| Error::Parse {
        file: format!("{}: {file}", path.display()),
        source,
    };
    let mut chart = Chart::default();
    let mut metadata: Option<Map<String, Value>> = None;
    let mut requirements: Option<(Map<String, Value>, File)> = None;

    if let Some(f) = files.iter().find(|f| f.name == "Chart.yaml") {
        metadata = Some(yaml::mapping(&f.data).map_err(|e| parse_err("Chart.yaml", e.into()))?);
    }
    for f in files {
        match f.name.as_str() {
            "Chart.yaml" => {}
            "Chart.lock" => {
                chart.lock = Some(lock(&f.data).map_err(|e| parse_err("Chart.lock", e))?);
            }
            "values.yaml" => {
                chart.values =
                    yaml::values(&f.data).map_err(|e| parse_err("values.yaml", e.into()))?;
            }
            "values.schema.json" => chart.schema = Some(f.data),
            // Deprecated apiVersion v1 dependency files: folded into the metadata and
            // lock; v1 charts also keep them as files, as Helm does.
            "requirements.yaml" => {
                let m =
                    yaml::mapping(&f.data).map_err(|e| parse_err("requirements.yaml", e.into()))?;
                requirements = Some((m, f));
            }
            "requirements.lock" => {
                chart.lock = Some(lock(&f.data).map_err(|e| parse_err("requirements.lock", e))?);
                if is_v1(metadata.as_ref()) {
                    chart.files.push(f);
                }
            }
            n if n.starts_with("templates/") => chart.templates.push(f),
            // Subcharts are dependencies of the chart in Helm, which are never serialized
            // into the release JSON, so they are left out here. Provenance files next to
            // packaged subcharts stay, as in Helm.
            n if n.starts_with("charts/") => {
                if n.ends_with(".prov") {
                    chart.files.push(f);
                }
            }
            _ => chart.files.push(f),
        }
    }

    let Some(mut md) = metadata else {
        return Err(invalid(path, "Chart.yaml file is missing"));
    };
    if let Some((req, file)) = requirements {
        let v1 = is_v1(Some(&md));
        for (k, v) in req {
            md.insert(k, v);
        }
        if v1 {
            chart.files.push(file);
        }
    }
    chart.metadata = Some(metadata_from(md).map_err(|source| Error::Metadata {
        path: path.to_path_buf(),
        source,
    })?);
    sort_files(&mut chart.templates);
    sort_files(&mut chart.files);
    Ok(chart)
}

fn is_v1(md: Option<&Map<String, Value>>) -> bool {
    let api = md
        .and_then(|m| m.get("apiVersion"))
        .and_then(go_string)
        .unwrap_or_default();
    api.is_empty() || api == "v1"
}

/// Go's zero time as Helm writes it for a lock file without `generated`.
const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// Chart.lock as Helm's `Lock` serializes it: `generated`, `digest`, `dependencies`.
fn lock(data: &[u8]) -> Result<Value, ParseError> {
    let m = yaml::mapping(data)?;
    let mut out = Map::new();
    let generated = m
        .get("generated")
        .and_then(go_string)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| GO_ZERO_TIME.to_string());
    out.insert("generated".into(), generated.into());
    let digest = m.get("digest").and_then(go_string).unwrap_or_default();
    out.insert("digest".into(), digest.into());
    let deps = match m.get("dependencies") {
        Some(d) => dependencies(d)?,
        None => Value::Null,
    };
    out.insert("dependencies".into(), deps);
    Ok(Value::Object(out))
}

/// Chart.yaml fields Helm's `Metadata` knows, and whether Helm types them as strings (a
/// scalar of another type is read as its text, as sigs.k8s.io/yaml does). Others are
/// dropped, as Helm's decoder drops them.
const METADATA_FIELDS: &[(&str, bool)] = &[
    ("name", true),
    ("home", true),
    ("sources", false),
    ("version", true),
    ("description", true),
    ("keywords", false),
    ("maintainers", false),
    ("icon", true),
    ("apiVersion", true),
    ("condition", true),
    ("tags", true),
    ("appVersion", true),
    ("deprecated", false),
    ("annotations", false),
    ("kubeVersion", true),
    ("dependencies", false),
    ("type", true),
];

/// Fields Helm passes through `sanitizeString` (whitespace to spaces, unprintables gone).
const SANITIZED: &[&str] = &[
    "name",
    "description",
    "home",
    "icon",
    "condition",
    "tags",
    "appVersion",
    "kubeVersion",
];

/// Why Chart.yaml's metadata (or a lock file's dependencies) breaks Helm's rules.
#[derive(Debug, thiserror::Error)]
pub enum MetadataError {
    #[error("Chart.yaml: {0} must be a string")]
    NotString(&'static str),
    #[error("Chart.yaml: {0} must be a list of strings")]
    NotStringList(&'static str),
    #[error("Chart.yaml: annotations must be a mapping of strings")]
    AnnotationsNotStrings,
    #[error("dependencies must be a list")]
    DependenciesNotList,
    #[error("each dependency must be a mapping")]
    DependencyNotMapping,
    #[error("chart.metadata.name is required (Chart.yaml has no name)")]
    NoName,
    #[error("chart.metadata.name {0:?} is invalid")]
    InvalidName(String),
    #[error("chart.metadata.version is required (Chart.yaml has no version)")]
    NoVersion,
    #[error("chart.metadata.version {0:?} is invalid")]
    InvalidVersion(String),
    #[error("chart.metadata.type must be application or library")]
    InvalidType,
    #[error("more than one dependency with name or alias {0:?}")]
    DuplicateDependency(String),
    /// The fields checked above do not decode into Helm's `Metadata`.
    #[error("Chart.yaml: {0}")]
    Decode(serde_json::Error),
}

fn metadata_from(md: Map<String, Value>) -> Result<Metadata, MetadataError> {
    let mut out = Map::new();
    for (key, value) in md {
        let Some((field, is_string)) = METADATA_FIELDS.iter().find(|(f, _)| *f == key) else {
            continue;
        };
        if value.is_null() {
            continue;
        }
        let json = if *is_string {
            let s = go_string(&value).ok_or(MetadataError::NotString(field))?;
            if SANITIZED.contains(field) {
                sanitize(&s).into()
            } else {
                s.into()
            }
        } else {
            match *field {
                "sources" | "keywords" => string_list(field, &value)?,
                "annotations" => string_map(&value)?,
                "dependencies" => dependencies(&value)?,
                _ => value,
            }
        };
        out.insert((*field).to_string(), json);
    }
    // Helm 2 accepted charts without an apiVersion; Helm reads them as v1.
    let api = out.entry("apiVersion").or_insert_with(|| "v1".into());
    if api.as_str() == Some("") {
        *api = "v1".into();
    }
    validate(&out)?;
    serde_json::from_value(Value::Object(out)).map_err(MetadataError::Decode)
}

/// Helm's `Metadata.Validate`, for the rules that decide whether Helm loads the chart.
fn validate(md: &Map<String, Value>) -> Result<(), MetadataError> {
    let get = |k: &str| md.get(k).and_then(Value::as_str).unwrap_or("");
    let name = get("name");
    if name.is_empty() {
        return Err(MetadataError::NoName);
    }
    if name == "." || name == ".." || name.contains('/') || name.contains('\\') {
        return Err(MetadataError::InvalidName(name.to_owned()));
    }
    let version = get("version");
    if version.is_empty() {
        return Err(MetadataError::NoVersion);
    }
    if !is_valid_semver(version) {
        return Err(MetadataError::InvalidVersion(version.to_owned()));
    }
    if !matches!(get("type"), "" | "application" | "library") {
        return Err(MetadataError::InvalidType);
    }
    let mut seen = std::collections::BTreeSet::new();
    if let Some(deps) = md.get("dependencies").and_then(Value::as_array) {
        for d in deps {
            let alias = d.get("alias").and_then(Value::as_str).unwrap_or("");
            let dname = d.get("name").and_then(Value::as_str).unwrap_or("");
            let key = if alias.is_empty() { dname } else { alias };
            if !seen.insert(key.to_string()) {
                return Err(MetadataError::DuplicateDependency(key.to_owned()));
            }
        }
    }
    Ok(())
}

/// Masterminds/semver's lenient `NewVersion`: an optional `v`, one to three numeric
/// parts, optional `-prerelease` and `+build` of dot-separated `[0-9A-Za-z-]` identifiers.
fn is_valid_semver(v: &str) -> bool {
    let v = v.strip_prefix('v').unwrap_or(v);
    let (v, build) = match v.split_once('+') {
        Some((v, b)) => (v, Some(b)),
        None => (v, None),
    };
    let (core, pre) = match v.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (v, None),
    };
    let idents_ok = |s: &str| {
        s.split('.')
            .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    let parts: Vec<&str> = core.split('.').collect();
    (1..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && pre.is_none_or(idents_ok)
        && build.is_none_or(idents_ok)
}

fn sanitize(s: &str) -> String {
    s.chars()
        .filter_map(|c| {
            if c.is_whitespace() {
                Some(' ')
            } else if c.is_control() {
                None
            } else {
                Some(c)
            }
        })
        .collect()
}

fn string_list(field: &'static str, value: &Value) -> Result<Value, MetadataError> {
    let Value::Array(items) = value else {
        return Err(MetadataError::NotStringList(field));
    };
    items
        .iter()
        .map(|i| {
            go_string(i)
                .map(|s| Value::String(sanitize(&s)))
                .ok_or(MetadataError::NotStringList(field))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Value::Array)
}

fn string_map(value: &Value) -> Result<Value, MetadataError> {
    let Value::Object(m) = value else {
        return Err(MetadataError::AnnotationsNotStrings);
    };
    let mut out = Map::new();
    for (k, v) in m {
        out.insert(
            k.clone(),
            go_string(v)
                .ok_or(MetadataError::AnnotationsNotStrings)?
                .into(),
        );
    }
    Ok(Value::Object(out))
}

/// Dependencies as Helm's `Dependency` serializes them (`name` and `repository` always
/// present, the rest when set).
fn dependencies(value: &Value) -> Result<Value, MetadataError> {
    let Value::Array(items) = value else {
        return Err(MetadataError::DependenciesNotList);
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Value::Object(m) = item else {
            return Err(MetadataError::DependencyNotMapping);
        };
        let text = |k: &str| m.get(k).and_then(go_string);
        let mut d = Map::new();
        d.insert("name".into(), text("name").unwrap_or_default().into());
        if let Some(v) = text("version").filter(|s| !s.is_empty()) {
            d.insert("version".into(), v.into());
        }
        d.insert(
            "repository".into(),
            text("repository").unwrap_or_default().into(),
        );
        if let Some(v) = text("condition").filter(|s| !s.is_empty()) {
            d.insert("condition".into(), v.into());
        }
        if let Some(tags) = m.get("tags").filter(|t| !t.is_null()) {
            d.insert("tags".into(), string_list("dependencies.tags", tags)?);
        }
        if let Some(true) = m.get("enabled").and_then(Value::as_bool) {
            d.insert("enabled".into(), true.into());
        }
        if let Some(iv) = m.get("import-values").filter(|v| !v.is_null()) {
            d.insert("import-values".into(), iv.clone());
        }
        if let Some(v) = text("alias").filter(|s| !s.is_empty()) {
            d.insert("alias".into(), v.into());
        }
        out.push(Value::Object(d));
    }
    Ok(Value::Array(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn write(root: &Path, files: &[(&str, &str)]) {
        for (name, data) in files {
            let p = root.join(name);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, data).unwrap();
        }
    }

    const CHART_YAML: &str = "apiVersion: v2\nname: web\nversion: 1.2.3\nappVersion: 1.10\n\
                              description: \"a\\tweb\\napp\"\nunknownField: dropped\n\
                              annotations:\n  category: demo\n  n: 1\n";

    fn sample(root: &Path) {
        write(
            root,
            &[
                ("Chart.yaml", CHART_YAML),
                ("values.yaml", "\u{feff}replicas: 2\nimage: {tag: v1}\n"),
                ("values.schema.json", "{\"type\":\"object\"}"),
                (
                    "Chart.lock",
                    "dependencies:\n- name: db\n  repository: https://example.com\n  version: 1.0.0\n\
                     digest: sha256:abc\ngenerated: \"2024-01-02T03:04:05.123Z\"\n",
                ),
                ("templates/deployment.yaml", "kind: Deployment\n"),
                ("templates/_helpers.tpl", "{{/* helpers */}}\n"),
                ("templates/sub/cm.yaml", "kind: ConfigMap\n"),
                ("templates/.swp", "editor junk\n"),
                ("templates/NOTES.txt", "notes\n"),
                ("README.md", "# web\n"),
                ("LICENSE", "Apache-2.0\n"),
                ("files/a.conf", "a=1\n"),
                ("files/b.secret", "do not ship\n"),
                ("crds/crd.yaml", "kind: CustomResourceDefinition\n"),
                ("crds/notes.txt", "not a manifest\n"),
                ("crds/other.JSON", "{}\n"),
                (
                    "charts/db/Chart.yaml",
                    "apiVersion: v2\nname: db\nversion: 1.0.0\n",
                ),
                ("charts/db/templates/x.yaml", "kind: Service\n"),
                ("charts/cache-1.0.0.tgz", "not really"),
                ("charts/cache-1.0.0.tgz.prov", "signature"),
                ("ci/test-values.yaml", "x: 1\n"),
                (".helmignore", "# comment\n*.secret\nci/\n"),
            ],
        );
    }

    fn names(files: &[File]) -> Vec<&str> {
        files.iter().map(|f| f.name.as_str()).collect()
    }

    fn assert_sample(chart: &Chart, helmignore: bool) {
        let md = chart.metadata.as_ref().unwrap();
        assert_eq!(md.name, "web");
        assert_eq!(md.version, "1.2.3");
        // YAML float 1.10 reads as "1.1", exactly as Helm reads it.
        assert_eq!(md.app_version.as_deref(), Some("1.1"));
        assert_eq!(md.api_version.as_deref(), Some("v2"));
        assert_eq!(md.description.as_deref(), Some("a web app"));
        assert!(!md.other.contains_key("unknownField"));
        // As helm v4 reads it: YAML 1.1, where the key `n` is the boolean false.
        assert_eq!(
            md.other["annotations"],
            json!({"category": "demo", "false": "1"})
        );

        assert_eq!(
            Value::Object(chart.values.clone()),
            json!({"replicas": 2, "image": {"tag": "v1"}})
        );
        assert_eq!(chart.schema.as_deref(), Some(&b"{\"type\":\"object\"}"[..]));
        let lock = chart.lock.as_ref().unwrap();
        assert_eq!(lock["digest"], "sha256:abc");
        assert_eq!(lock["generated"], "2024-01-02T03:04:05.123Z");
        assert_eq!(lock["dependencies"][0]["name"], "db");
        assert_eq!(lock["dependencies"][0]["repository"], "https://example.com");

        assert_eq!(
            names(&chart.templates),
            [
                "templates/NOTES.txt",
                "templates/_helpers.tpl",
                "templates/deployment.yaml",
                "templates/sub/cm.yaml"
            ]
        );
        let mut want = vec![
            ".helmignore",
            "LICENSE",
            "README.md",
            "charts/cache-1.0.0.tgz.prov",
        ];
        if !helmignore {
            want.push("ci/test-values.yaml");
        }
        want.extend([
            "crds/crd.yaml",
            "crds/notes.txt",
            "crds/other.JSON",
            "files/a.conf",
        ]);
        if !helmignore {
            want.push("files/b.secret");
        }
        assert_eq!(names(&chart.files), want);
        assert_eq!(
            names(&crds(chart).into_iter().cloned().collect::<Vec<_>>()),
            ["crds/crd.yaml", "crds/other.JSON"]
        );
    }

    #[test]
    fn loads_a_directory_like_helm() {
        let dir = tempfile::tempdir().unwrap();
        sample(dir.path());
        let chart = load(dir.path()).unwrap();
        assert_sample(&chart, true);
        let readme = chart.files.iter().find(|f| f.name == "README.md").unwrap();
        assert_eq!(readme.data, b"# web\n");
    }

    fn package(src: &Path, top: &str, out: &Path) {
        let gz = flate2::write::GzEncoder::new(
            std::fs::File::create(out).unwrap(),
            flate2::Compression::default(),
        );
        let mut tar = tar::Builder::new(gz);
        tar.append_dir_all(top, src).unwrap();
        tar.into_inner().unwrap().finish().unwrap();
    }

    #[test]
    fn loads_a_packaged_chart_without_applying_helmignore() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        sample(&src);
        // Helm's packager leaves ignored and template dot files out; the archive loader
        // itself does not filter, so drop the editor junk the packager would not add.
        std::fs::remove_file(src.join("templates/.swp")).unwrap();
        let tgz = dir.path().join("web-1.2.3.tgz");
        package(&src, "web", &tgz);
        let chart = load(&tgz).unwrap();
        assert_sample(&chart, false);
        // The same chart from a directory and from its package differs only by what
        // .helmignore removed.
        let from_dir = load(&src).unwrap();
        assert_eq!(chart.templates, from_dir.templates);
        assert_eq!(chart.values, from_dir.values);
        assert_eq!(chart.metadata, from_dir.metadata);
    }

    #[test]
    fn missing_values_is_an_empty_map_and_api_version_defaults_to_v1() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &[("Chart.yaml", "name: old\nversion: v1.0\n")]);
        let chart = load(dir.path()).unwrap();
        assert!(chart.values.is_empty());
        assert!(chart.templates.is_empty() && chart.files.is_empty());
        assert_eq!(chart.metadata.unwrap().api_version.as_deref(), Some("v1"));
    }

    #[test]
    fn metadata_errors() {
        let cases = [
            ("version: 1.0.0\n", "name is required"),
            ("name: x\n", "version is required"),
            ("name: x\nversion: one\n", "version \"one\" is invalid"),
            ("name: ../x\nversion: 1.0.0\n", "is invalid"),
            (
                "name: x\nversion: 1.0.0\ntype: plugin\n",
                "application or library",
            ),
        ];
        for (chart_yaml, want) in cases {
            let dir = tempfile::tempdir().unwrap();
            write(dir.path(), &[("Chart.yaml", chart_yaml)]);
            let err = load(dir.path()).unwrap_err().to_string();
            assert!(err.contains(want), "{chart_yaml:?}: {err}");
        }
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &[("values.yaml", "a: 1\n")]);
        let err = load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("Chart.yaml file is missing"), "{err}");
    }

    #[test]
    fn yaml_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            &[
                ("Chart.yaml", "name: x\nversion: 1.0.0\n"),
                ("values.yaml", "a: [1,\n"),
            ],
        );
        let err = load(dir.path()).unwrap_err();
        assert!(matches!(err, Error::Parse { .. }));
        let msg = err.to_string();
        assert!(msg.contains("values.yaml"), "{msg}");
        assert!(msg.contains(&dir.path().display().to_string()), "{msg}");

        write(
            dir.path(),
            &[("values.yaml", "a: 1\n"), ("Chart.yaml", "name: [\n")],
        );
        let msg = load(dir.path()).unwrap_err().to_string();
        assert!(msg.contains("Chart.yaml"), "{msg}");
    }

    #[test]
    fn requirements_yaml_of_a_v1_chart() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            &[
                ("Chart.yaml", "apiVersion: v1\nname: old\nversion: 1.0.0\n"),
                (
                    "requirements.yaml",
                    "dependencies:\n- name: db\n  repository: https://x\n",
                ),
            ],
        );
        let chart = load(dir.path()).unwrap();
        let md = chart.metadata.unwrap();
        assert_eq!(
            md.other["dependencies"],
            json!([{"name": "db", "repository": "https://x"}])
        );
        assert_eq!(names(&chart.files), ["requirements.yaml"]);
    }

    #[test]
    fn archive_guards() {
        assert_eq!(
            archive_name("web/templates/a.yaml").unwrap(),
            "templates/a.yaml"
        );
        assert_eq!(
            archive_name("web\\templates\\a.yaml").unwrap(),
            "templates/a.yaml"
        );
        assert_eq!(archive_name("web/./x/../Chart.yaml").unwrap(), "Chart.yaml");
        assert!(archive_name("web/../../etc/passwd").is_err());
        assert!(archive_name("web//etc/passwd").is_err());
        assert!(archive_name("Chart.yaml").is_err());
        assert!(archive_name("web/c:/x").is_err());
        assert!(archive_name("web").is_err());
    }

    #[test]
    fn not_an_archive() {
        let dir = tempfile::tempdir().unwrap();
        let values = dir.path().join("values.yaml");
        std::fs::write(&values, "a: 1\n").unwrap();
        let err = load(&values).unwrap_err().to_string();
        assert!(err.contains("seems to be a YAML file"), "{err}");
        let err = load(&dir.path().join("missing")).unwrap_err();
        assert!(matches!(err, Error::Io { .. }));
    }

    #[test]
    fn semver_rules() {
        for ok in [
            "1",
            "1.2",
            "1.2.3",
            "v1.2.3",
            "1.2.3-rc.1+build.5",
            "0.0.0-0",
        ] {
            assert!(is_valid_semver(ok), "{ok}");
        }
        for bad in ["", "x", "1.2.3.4", "1..2", "1.2.3-", "1.2.3-a_b"] {
            assert!(!is_valid_semver(bad), "{bad}");
        }
    }
}

//! Where the chart comes from, as Flux resolves it: `spec.chart.spec.sourceRef` to a
//! HelmRepository (HTTP or `type: oci`) or a GitRepository, or `spec.chartRef` to an
//! OCIRepository or a HelmChart (itself on one of those), each read whole; or a chart
//! repository URL given instead. Turned into wheelhouse's chart block: `repository` +
//! `name` + `version` (HTTP or `oci://`), or `git`.

use serde_json::{Map, Value, json};

use super::Error;
use super::mapping::{Mapping, is_set, text};

/// Where the chart comes from, as the caller read the Flux source.
#[derive(Debug, Clone, PartialEq)]
pub enum Repository {
    /// The `source.toolkit.fluxcd.io` HelmRepository that `spec.chart.spec.sourceRef`
    /// names, whole (as read from the cluster).
    HelmRepository(Value),
    /// The OCIRepository `spec.chartRef` names, whole.
    OciRepository(Value),
    /// The GitRepository `spec.chart.spec.sourceRef` names, whole.
    GitRepository(Value),
    /// The HelmChart `spec.chartRef` names, whole, with the source its own
    /// `spec.sourceRef` names (`None` when it could not be read).
    HelmChart {
        chart: Value,
        source: Option<Box<Repository>>,
    },
    /// A chart repository URL given instead of the Flux source (`--chart-repository`):
    /// for sources wheelhouse cannot read (a Bucket).
    Url(String),
}

/// A Flux source reference, with its namespace defaulted as Flux does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRef {
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

impl SourceRef {
    fn read(r: &Value, namespace: &str) -> Option<Self> {
        Some(Self {
            kind: text(r, "kind")?.to_owned(),
            name: text(r, "name")?.to_owned(),
            namespace: text(r, "namespace").unwrap_or(namespace).to_owned(),
        })
    }

    fn describe(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }
}

fn namespace_of(object: &Value) -> &str {
    text(&object["metadata"], "namespace").unwrap_or("default")
}

/// What `spec.chart.spec.sourceRef` names. `None` when the chart comes from
/// `spec.chartRef` or no source is named.
pub fn source_ref(flux: &Value) -> Option<SourceRef> {
    SourceRef::read(
        flux.pointer("/spec/chart/spec/sourceRef")?,
        namespace_of(flux),
    )
}

/// What `spec.chartRef` names (an OCIRepository or a HelmChart).
pub fn chart_ref(flux: &Value) -> Option<SourceRef> {
    SourceRef::read(flux.pointer("/spec/chartRef")?, namespace_of(flux))
}

/// What a HelmChart's own `spec.sourceRef` names (in the HelmChart's namespace).
pub fn helm_chart_source(helm_chart: &Value) -> Option<SourceRef> {
    let r = helm_chart.pointer("/spec/sourceRef")?;
    let mut source = SourceRef::read(r, namespace_of(helm_chart))?;
    source.namespace = namespace_of(helm_chart).to_owned();
    Some(source)
}

/// The Helm chart layer's media type: what helm-controller reads from an OCIRepository.
const HELM_CHART_LAYER: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

/// A chart name as wheelhouse's CRD accepts it.
fn valid_chart_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes
            .iter()
            .all(|b| edge(b) || matches!(b, b'-' | b'_' | b'.'))
}

/// The chart template's fields other than its source (`chart.spec.*` for a HelmRelease,
/// `spec.*` for a HelmChart): name, version, interval and values files read; the rest not
/// carried.
struct Template {
    chart: Option<String>,
    version: Option<String>,
    /// `reconcileStrategy` with where it was set: it matters for a chart in Git only.
    strategy: Option<(String, String)>,
}

fn template(
    mut fields: Map<String, Value>,
    path: &str,
    carried: &mut Map<String, Value>,
    m: &mut Mapping,
) -> Template {
    let chart = fields
        .remove("chart")
        .and_then(|v| v.as_str().map(str::to_owned))
        .filter(|c| !c.is_empty());
    let version = fields
        .remove("version")
        .and_then(|v| v.as_str().map(str::to_owned))
        .filter(|v| !v.is_empty() && v != "*");
    // How often the chart's source is checked: wheelhouse's chart.interval is Flux's.
    if let Some(interval) = fields.remove("interval").filter(is_set) {
        carried.insert("interval".into(), interval);
    }
    fields.remove("sourceRef");
    // The chart's values replaced by files in its source: wheelhouse's are Flux's.
    for key in ["valuesFiles", "ignoreMissingValuesFiles"] {
        if let Some(value) = fields.remove(key).filter(is_set) {
            carried.insert(key.into(), value);
        }
    }
    let strategy = fields
        .remove("reconcileStrategy")
        .and_then(|v| v.as_str().map(str::to_owned))
        .map(|s| (format!("{path}.reconcileStrategy"), s));
    for (key, value) in fields {
        let why = match key.as_str() {
            "verify" => Some(
                "cosign and notation chart signatures: Helm 4 verifies PGP provenance files only, and wheelhouse neither",
            ),
            // A HelmChart's own.
            "suspend" => Some(
                "Flux stopped building this chart, so the release kept the chart last built; wheelhouse resolves the chart from its first reconcile (pin chart.version to keep that chart)",
            ),
            _ => None,
        };
        match why {
            Some(why) if is_set(&value) => m.drop_because(&format!("{path}.{key}"), why),
            Some(_) => {}
            None => m.drop_field(&format!("{path}.{key}"), &value),
        }
    }
    Template {
        chart,
        version,
        strategy,
    }
}

/// The chart block: from the source Flux reads the chart from, or the URL given instead.
pub(super) fn chart(
    spec: &mut Map<String, Value>,
    flux: &Value,
    namespace: &str,
    repository: Option<&Repository>,
    out: &mut Map<String, Value>,
    m: &mut Mapping,
) -> Result<(), Error> {
    let chart_ref_value = spec.remove("chartRef").filter(is_set);
    let chart = spec.remove("chart").filter(is_set);
    let deployed = flux.pointer("/status/history/0");
    let deployed_chart = deployed.and_then(|d| text(d, "chartName"));
    let deployed_version = deployed.and_then(|d| text(d, "chartVersion"));
    let mut carried = Map::new();

    let mut chart_spec = Map::new();
    if let Some(Value::Object(mut chart)) = chart.clone() {
        if let Some(Value::Object(s)) = chart.remove("spec") {
            chart_spec = s;
        }
        for (key, value) in chart {
            m.drop_field(&format!("spec.chart.{key}"), &value);
        }
    }
    let Template {
        chart: chart_name,
        version,
        strategy,
    } = template(chart_spec, "spec.chart.spec", &mut carried, m);
    let override_url = match repository {
        Some(Repository::Url(url)) => Some(url.clone()),
        _ => None,
    };

    let result = if chart_ref_value.is_some() {
        let Some(reference) = chart_ref(flux) else {
            return Err(Error::NotFlux(
                "spec.chartRef names no kind and name".into(),
            ));
        };
        let what = reference.describe();
        match (override_url, repository) {
            (Some(url), _) => {
                let Some(deployed_chart) = deployed_chart else {
                    m.no_chart = Some(format!(
                        "the chart comes from spec.chartRef ({what}) and Flux recorded no deployed chart to take its name from"
                    ));
                    return Ok(());
                };
                carried.insert("repository".into(), Value::String(url.clone()));
                carried.insert("name".into(), Value::String(deployed_chart.to_owned()));
                if let Some(v) = deployed_version {
                    carried.insert("version".into(), Value::String(v.to_owned()));
                }
                m.note(format!(
                    "spec.chartRef ({what}) replaced by --chart-repository {url}: chart {deployed_chart}{}, as last deployed",
                    deployed_version
                        .map(|v| format!(" pinned to version {v}"))
                        .unwrap_or_default()
                ));
                Ok(())
            }
            (None, Some(Repository::OciRepository(oci))) if reference.kind == "OCIRepository" => {
                oci_repository(oci, &reference, namespace, &mut carried, m)
            }
            (None, Some(Repository::HelmChart { chart, source }))
                if reference.kind == "HelmChart" =>
            {
                helm_chart(
                    chart,
                    source.as_deref(),
                    &reference,
                    namespace,
                    deployed,
                    &mut carried,
                    m,
                )
            }
            (None, None) => Err(format!(
                "the chart's {what} (spec.chartRef) was not given, so where the chart comes from is unknown"
            )),
            (None, Some(_)) => Err(format!(
                "spec.chartRef names a {}, which Flux reads charts from only as an OCIRepository or a HelmChart",
                reference.kind
            )),
        }
    } else {
        let Some(source) = source_ref(flux) else {
            return Err(Error::NotFlux(
                "spec has neither chart.spec.sourceRef nor chartRef".into(),
            ));
        };
        let Some(chart_name) = chart_name else {
            return Err(Error::NotFlux("spec.chart.spec.chart is empty".into()));
        };
        from_source(
            &source,
            repository,
            Template {
                chart: Some(chart_name),
                version,
                strategy,
            },
            deployed,
            namespace,
            &mut carried,
            m,
        )
    };
    match result {
        Ok(()) => {
            out.insert("chart".into(), Value::Object(carried));
            Ok(())
        }
        Err(reason) => {
            m.no_chart = Some(reason);
            Ok(())
        }
    }
}

/// The chart from a source a chart template names: a HelmRepository or a GitRepository
/// (or a URL given for it). `Err`: why there is no chart.
#[allow(clippy::too_many_arguments)]
fn from_source(
    source: &SourceRef,
    repository: Option<&Repository>,
    template: Template,
    deployed: Option<&Value>,
    namespace: &str,
    carried: &mut Map<String, Value>,
    m: &mut Mapping,
) -> Result<(), String> {
    let what = source.describe();
    let Template {
        chart,
        version,
        strategy,
    } = template;
    let chart_name = chart.as_deref().unwrap_or_default();
    // A chart version is its revision in a Helm repository or registry; in Git, Flux's
    // default upgrades only when the chart's version changes, wheelhouse at each commit.
    if source.kind == "GitRepository"
        && let Some((path, strategy)) = strategy.filter(|(_, s)| s != "Revision")
    {
        m.drop_because(
            &path,
            format!("{strategy}: wheelhouse upgrades at each new commit of the chart's directory, as Flux's Revision does"),
        );
    }
    let deployed_chart = deployed.and_then(|d| text(d, "chartName"));
    let deployed_version = deployed.and_then(|d| text(d, "chartVersion"));
    match (source.kind.as_str(), repository) {
        ("HelmRepository", Some(Repository::Url(url))) => {
            carried.insert("repository".into(), Value::String(url.clone()));
            carried.insert("name".into(), Value::String(http_chart_name(chart_name)?));
            if let Some(v) = version {
                carried.insert("version".into(), Value::String(v));
            }
            m.note(format!(
                "spec.chart.spec.sourceRef ({what}) replaced by --chart-repository {url}"
            ));
        }
        ("HelmRepository", Some(Repository::HelmRepository(repo))) => {
            let oci = helm_repository(repo, source, namespace, carried, m)?;
            let name = if oci {
                // An OCI chart's name may carry path segments: they belong to the
                // repository's path, as Helm joins them.
                let (path, name) = chart_name.rsplit_once('/').unwrap_or(("", chart_name));
                if !path.is_empty()
                    && let Some(Value::String(url)) = carried.get_mut("repository")
                {
                    *url = format!("{}/{}", url.trim_end_matches('/'), path.trim_matches('/'));
                }
                checked_name(name, &format!("spec.chart.spec.chart {chart_name:?}"))?
            } else {
                http_chart_name(chart_name)?
            };
            carried.insert("name".into(), Value::String(name));
            if let Some(v) = version {
                carried.insert("version".into(), Value::String(v));
            }
        }
        ("GitRepository", Some(Repository::GitRepository(git))) => {
            git_repository(git, source, chart_name, namespace, carried, m)?;
            if let Some(v) = version {
                m.drop_because(
                    "spec.chart.spec.version",
                    format!("a chart from Git is the commit's chart, whatever its version; Flux checks {v} against it"),
                );
            }
        }
        ("OCIRepository", _) => {
            return Err(format!(
                "{what} is named in spec.chart.spec.sourceRef, which Flux does not accept: an OCIRepository is named in spec.chartRef"
            ));
        }
        (_, Some(Repository::Url(url))) => {
            // A chart in a Bucket is a path; its name and version are the chart's own,
            // which Flux recorded when it deployed it.
            let name = deployed_chart.map(str::to_owned).unwrap_or_else(|| {
                chart_name
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or_default()
                    .to_owned()
            });
            carried.insert("repository".into(), Value::String(url.clone()));
            carried.insert("name".into(), Value::String(name.clone()));
            if let Some(v) = deployed_version {
                carried.insert("version".into(), Value::String(v.to_owned()));
            }
            m.note(format!(
                "spec.chart.spec.sourceRef ({what}, chart {chart_name}) replaced by --chart-repository {url}: chart {name}{}",
                deployed_version
                    .map(|v| format!(" pinned to version {v}, as last deployed"))
                    .unwrap_or_default()
            ));
        }
        ("HelmRepository" | "GitRepository", None) => {
            return Err(format!(
                "the chart's {what} was not given, so where the chart comes from is unknown"
            ));
        }
        ("HelmRepository" | "GitRepository", Some(_)) => {
            return Err(format!("the source given for {what} is not one"));
        }
        (_, _) => {
            return Err(format!(
                "the chart comes from {what}, which wheelhouse cannot read (it reads Helm repositories, OCI registries and Git); give the chart's repository with --chart-repository URL"
            ));
        }
    }
    Ok(())
}

/// A chart name of an HTTP Helm repository: the bare name (Helm's `repo/chart` form names
/// a repository the helm CLI knows locally, which Flux's sourceRef replaces).
fn http_chart_name(chart: &str) -> Result<String, String> {
    if let Some((repo, name)) = chart.split_once('/') {
        return Err(format!(
            "spec.chart.spec.chart is {chart:?}: a chart of a Helm repository is named without the repository ({name:?}, not \"{repo}/{name}\"); the sourceRef names the repository. Fix the Flux HelmRelease (Flux cannot find that chart either) and migrate again"
        ));
    }
    checked_name(chart, &format!("spec.chart.spec.chart {chart:?}"))
}

fn checked_name(name: &str, what: &str) -> Result<String, String> {
    if valid_chart_name(name) {
        Ok(name.to_owned())
    } else {
        Err(format!(
            "{what} is not a chart name wheelhouse accepts (lower-case letters, digits, '-', '_' and '.', starting and ending with a letter or digit)"
        ))
    }
}

/// A source object's `spec` as fields of its own (none if it has no `spec`).
fn spec_fields(source: &Value) -> Map<String, Value> {
    match source.get("spec") {
        Some(Value::Object(s)) => s.clone(),
        _ => Map::new(),
    }
}

/// A source object's `spec` with its `url` taken out ("" if it has none): the fields left
/// are those still to carry over or name as dropped.
fn spec_taking_url(source: &Value) -> (Map<String, Value>, String) {
    let mut spec = spec_fields(source);
    let url = spec
        .remove("url")
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    (spec, url)
}

/// The chart of an OCIRepository (`spec.chartRef`): its URL split into repository and
/// chart name, its ref as the version, its credentials and interval.
fn oci_repository(
    oci: &Value,
    reference: &SourceRef,
    namespace: &str,
    carried: &mut Map<String, Value>,
    m: &mut Mapping,
) -> Result<(), String> {
    let what = reference.describe();
    let (mut spec, url) = spec_taking_url(oci);
    let Some(rest) = url.strip_prefix("oci://") else {
        return Err(format!("{what} spec.url {url:?} is not an oci:// URL"));
    };
    let Some((path, name)) = rest.trim_end_matches('/').rsplit_once('/') else {
        return Err(format!(
            "{what} spec.url {url:?} names a registry but no chart (oci://host/path/chart)"
        ));
    };
    let name = checked_name(
        name,
        &format!("the chart name {name:?} at the end of {what} spec.url"),
    )?;
    carried.insert("repository".into(), Value::String(format!("oci://{path}")));
    carried.insert("name".into(), Value::String(name));

    // Flux's order: a digest over a semver range over a tag; no ref is the tag `latest`.
    let reference_spec = spec.remove("ref").unwrap_or(Value::Null);
    let version = if let Some(digest) = text(&reference_spec, "digest") {
        format!("@{digest}")
    } else if let Some(range) = text(&reference_spec, "semver") {
        if let Some(filter) = text(&reference_spec, "semverFilter") {
            m.drop_because(
                &format!("{what} spec.ref.semverFilter"),
                format!("wheelhouse picks the highest version in the range whatever its text; {filter:?} is not applied"),
            );
        }
        range.to_owned()
    } else {
        let tag = text(&reference_spec, "tag").unwrap_or("latest");
        // helm push writes a version's `+` as `_` in the tag.
        let version = tag.replace('_', "+");
        if crate::helm::source::version::parse_version(&version).is_some() {
            version
        } else {
            // A tag that is not a version (`latest`, `stable`): the content Flux fetched.
            let digest = oci
                .pointer("/status/artifact/digest")
                .and_then(Value::as_str)
                .filter(|d| d.starts_with("sha256:"));
            let Some(digest) = digest else {
                return Err(format!(
                    "{what} follows the tag {tag:?}, which is not a chart version, and has fetched no artifact to pin its digest from; wheelhouse selects OCI charts by version: set spec.ref.tag to the chart's version or spec.ref.semver to a range"
                ));
            };
            m.note(format!(
                "{what} follows the tag {tag:?}, which is not a chart version: chart.version pins the digest Flux last fetched ({digest}); set a version or range to follow new charts"
            ));
            format!("@{digest}")
        }
    };
    carried.insert("version".into(), Value::String(version));

    if spec.remove("insecure").and_then(|v| v.as_bool()) == Some(true) {
        carried.insert("insecure".into(), Value::Bool(true));
    }
    shared_fields(
        &mut spec,
        reference,
        namespace,
        "username/password or .dockerconfigjson, and ca.crt",
        |p| {
            format!(
                "logs in to its registry as the {p} cloud identity (spec.provider), which wheelhouse cannot do: give the registry's credentials in a Secret (spec.secretRef) and migrate again"
            )
        },
        carried,
        m,
    )?;
    if let Some(selector) = spec.remove("layerSelector") {
        let media_type = text(&selector, "mediaType").unwrap_or(HELM_CHART_LAYER);
        if media_type != HELM_CHART_LAYER {
            return Err(format!(
                "{what} spec.layerSelector takes the layer {media_type:?}; wheelhouse reads the Helm chart layer ({HELM_CHART_LAYER}) of an OCI artifact only"
            ));
        }
    }
    name_the_rest(spec, &what, "OCIRepository", m);
    Ok(())
}

/// The chart of a HelmChart (`spec.chartRef`): its template, from its own source.
fn helm_chart(
    helm_chart: &Value,
    source: Option<&Repository>,
    reference: &SourceRef,
    namespace: &str,
    deployed: Option<&Value>,
    carried: &mut Map<String, Value>,
    m: &mut Mapping,
) -> Result<(), String> {
    let what = reference.describe();
    let fields = spec_fields(helm_chart);
    let Some(source_ref) = helm_chart_source(helm_chart) else {
        return Err(format!("{what} names no spec.sourceRef"));
    };
    let template = template(fields, &format!("{what} spec"), carried, m);
    if template.chart.is_none() {
        return Err(format!("{what} spec.chart is empty"));
    }
    from_source(
        &source_ref,
        source,
        template,
        deployed,
        namespace,
        carried,
        m,
    )
}

/// The chart directory of a GitRepository: `chart.git` with its URL, the ref Flux checks
/// out and the chart's path.
fn git_repository(
    git: &Value,
    source: &SourceRef,
    chart_path: &str,
    namespace: &str,
    carried: &mut Map<String, Value>,
    m: &mut Mapping,
) -> Result<(), String> {
    let what = source.describe();
    let (mut spec, url) = spec_taking_url(git);
    if !["https://", "http://", "ssh://"]
        .iter()
        .any(|p| url.starts_with(p))
    {
        return Err(format!(
            "{what} spec.url {url:?} is not an https://, http:// or ssh:// URL"
        ));
    }
    let mut block = Map::new();
    block.insert("url".into(), Value::String(url));
    // Flux's order: a commit over a name over a semver range over a tag over a branch.
    let r = spec.remove("ref").unwrap_or(Value::Null);
    let reference = if let Some(commit) = text(&r, "commit") {
        if commit.len() != 40 || !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!(
                "{what} spec.ref.commit {commit:?} is not a full 40-character commit SHA, which wheelhouse needs"
            ));
        }
        Some(json!({ "commit": commit.to_ascii_lowercase() }))
    } else if let Some(name) = text(&r, "name") {
        if let Some(branch) = name.strip_prefix("refs/heads/") {
            Some(json!({ "branch": branch }))
        } else if let Some(tag) = name.strip_prefix("refs/tags/") {
            Some(json!({ "tag": tag }))
        } else {
            return Err(format!(
                "{what} spec.ref.name {name:?} is neither a branch (refs/heads/...) nor a tag (refs/tags/...): wheelhouse checks out branches, tags, semver ranges of tags and commits"
            ));
        }
    } else if let Some(range) = text(&r, "semver") {
        Some(json!({ "semver": range }))
    } else if let Some(tag) = text(&r, "tag") {
        Some(json!({ "tag": tag }))
    } else {
        text(&r, "branch").map(|b| json!({ "branch": b }))
    };
    if let Some(reference) = reference {
        block.insert("ref".into(), reference);
    }
    let path = chart_path.trim_start_matches("./").trim_matches('/');
    if !path.is_empty() && path != "." {
        block.insert("path".into(), Value::String(path.to_owned()));
    }
    carried.insert("git".into(), Value::Object(block));
    shared_fields(
        &mut spec,
        source,
        namespace,
        "username/password, bearerToken, or identity and known_hosts",
        |p| {
            format!(
                "logs in to Git as the {p} identity (spec.provider), which wheelhouse cannot do: give credentials in a Secret (spec.secretRef) and migrate again"
            )
        },
        carried,
        m,
    )?;
    if let Some(rules) = spec.remove("ignore").filter(is_set)
        && !keeps_whole(rules.as_str().unwrap_or_default(), path)
    {
        m.drop_because(
            &format!("{what} spec.ignore"),
            "wheelhouse reads the chart's directory whole; these rules may leave files of it out of Flux's chart",
        );
    }
    name_the_rest(spec, &what, "GitRepository", m);
    Ok(())
}

/// Whether a GitRepository's `ignore` rules leave the chart directory `path` whole: the
/// common form (leave out everything at the root, then take back directories) with the
/// chart under a directory taken back and nothing after that leaving anything out.
/// Anything else is not evaluated here (it is said instead).
fn keeps_whole(rules: &str, path: &str) -> bool {
    let mut kept = false;
    for rule in rules
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        match rule.strip_prefix('!') {
            Some(back) => {
                let dir = back.trim_matches('/');
                if !dir.is_empty()
                    && !dir.contains(['*', '?', '['])
                    && (path == dir || path.starts_with(&format!("{dir}/")))
                {
                    kept = true;
                }
            }
            None if rule == "/*" && !kept => {}
            None => return false,
        }
    }
    kept
}

/// Names the fields of a source's `spec` that are set and were not carried, with why.
fn name_the_rest(spec: Map<String, Value>, what: &str, kind: &str, m: &mut Mapping) {
    for (key, value) in spec {
        let path = format!("{what} spec.{key}");
        // The same bound wheelhouse keeps (source-controller's default, which the API
        // server writes into every source it stores): nothing differs, nothing to say.
        if key == "timeout" && is_default_timeout(&value) {
            continue;
        }
        match source_field_why(kind, &key) {
            Some(why) if is_set(&value) => m.drop_because(&path, why),
            Some(_) => {}
            None => m.drop_field(&path, &value),
        }
    }
}

/// Whether `value` is a duration of exactly wheelhouse's per-request bound.
fn is_default_timeout(value: &Value) -> bool {
    value
        .as_str()
        .and_then(|t| t.parse::<crate::api::Duration>().ok())
        .is_some_and(|d| d.as_std() == crate::helm::source::DEFAULT_REQUEST_TIMEOUT)
}

/// Why a field of a source (source-controller's api/v1 types) has no counterpart in the
/// chart block; `None` for a field this does not know.
fn source_field_why(kind: &str, key: &str) -> Option<String> {
    let why = match (kind, key) {
        (_, "timeout") => {
            return Some(format!(
                "Flux's bound on fetching from this source; wheelhouse bounds each request to a chart's source by its own {}s, the same for every release",
                crate::helm::source::DEFAULT_REQUEST_TIMEOUT.as_secs()
            ));
        }
        (_, "suspend") => {
            "Flux stopped fetching this source, so the release kept the chart last fetched; wheelhouse follows the source from its first reconcile (pin chart.version, or chart.git.ref.commit, to keep that chart)"
        }
        ("GitRepository", "include" | "sparseCheckout") => {
            "wheelhouse reads the chart directory only, whatever else the repository holds"
        }
        ("GitRepository", "recurseSubmodules") => "wheelhouse does not check out submodules",
        ("GitRepository", "verify") => "wheelhouse does not verify commit signatures",
        ("GitRepository", "proxySecretRef") => "wheelhouse reaches Git without a proxy of its own",
        ("GitRepository", "serviceAccountName") => {
            "Flux uses it only to log in as a cloud provider's identity (spec.provider)"
        }
        ("OCIRepository" | "HelmRepository", "certSecretRef") => {
            "wheelhouse reads a CA only as ca.crt in chart.secretRef, and no client certificate"
        }
        ("OCIRepository", "verify") => "wheelhouse does not verify signatures (cosign, notation)",
        ("OCIRepository", "proxySecretRef") => {
            "wheelhouse reaches registries without a proxy of its own"
        }
        ("OCIRepository", "serviceAccountName") => {
            "wheelhouse reads registry credentials from chart.secretRef, not a ServiceAccount's image pull secrets"
        }
        ("OCIRepository", "ignore") => {
            "wheelhouse reads the chart layer whole; these rules may leave files of the chart out of Flux's artifact"
        }
        ("HelmRepository", "passCredentials") => {
            "wheelhouse sends credentials to the repository's own host only"
        }
        ("HelmRepository", "accessFrom") => {
            "a cross-namespace access list source-controller does not implement"
        }
        _ => return None,
    };
    Some(why.to_owned())
}

/// What an OCIRepository and a GitRepository share: `secretRef` (read for `keys`),
/// `interval`, and a cloud `provider`, which is refused.
fn shared_fields(
    spec: &mut Map<String, Value>,
    source: &SourceRef,
    namespace: &str,
    keys: &str,
    refusal: impl Fn(&str) -> String,
    carried: &mut Map<String, Value>,
    m: &mut Mapping,
) -> Result<(), String> {
    let what = source.describe();
    if let Some(secret) = spec.remove("secretRef").filter(is_set) {
        secret_ref(&secret, &what, source, namespace, keys, carried, m);
    }
    if let Some(interval) = spec.remove("interval").filter(is_set) {
        carried.insert("interval".into(), interval);
    }
    match spec.remove("provider") {
        Some(Value::String(p)) if !p.is_empty() && p != "generic" => {
            Err(format!("{what} {}", refusal(&p)))
        }
        _ => Ok(()),
    }
}

/// `chart.secretRef` from a source's `spec.secretRef`, with what to check.
fn secret_ref(
    secret: &Value,
    what: &str,
    source: &SourceRef,
    namespace: &str,
    keys: &str,
    carried: &mut Map<String, Value>,
    m: &mut Mapping,
) {
    let Some(name) = text(secret, "name") else {
        return;
    };
    carried.insert("secretRef".into(), json!({ "name": name }));
    let mut note = format!(
        "chart.secretRef {name} (from {what}): wheelhouse reads {keys} from it; check that the Secret suits wheelhouse"
    );
    if source.namespace != namespace {
        note.push_str(&format!(
            "; wheelhouse reads it from the HelmRelease's namespace {namespace}, not from {}: copy it there",
            source.namespace
        ));
    }
    m.note(note);
}

/// `chart.repository` and `chart.secretRef` from a Flux HelmRepository.
fn helm_repository(
    repo: &Value,
    source: &SourceRef,
    namespace: &str,
    carried: &mut Map<String, Value>,
    m: &mut Mapping,
) -> Result<bool, String> {
    let what = format!("HelmRepository {}/{}", source.namespace, source.name);
    let (mut spec, written_url) = spec_taking_url(repo);
    let oci = spec.remove("type").as_ref().and_then(Value::as_str) == Some("oci")
        || written_url.starts_with("oci://");
    let url = if oci && !written_url.starts_with("oci://") {
        format!(
            "oci://{}",
            written_url
                .split_once("://")
                .map_or(written_url.as_str(), |(_, r)| r)
        )
    } else {
        written_url.clone()
    };
    carried.insert("repository".into(), Value::String(url));
    // Flux's plain-HTTP switch for an OCI registry means the same as wheelhouse's; an
    // HTTP repository's URL says http:// itself.
    match spec.remove("insecure").and_then(|v| v.as_bool()) {
        Some(true) if oci => {
            carried.insert("insecure".into(), Value::Bool(true));
        }
        Some(true) => m.drop_because(
            &format!("{what} spec.insecure"),
            "Flux reads it for type: oci only; an HTTP repository is reached as its URL says",
        ),
        _ => {}
    }
    if let Some(secret) = spec.remove("secretRef")
        && let Some(secret) = text(&secret, "name")
    {
        carried.insert("secretRef".into(), json!({ "name": secret }));
        let mut note = format!(
            "chart.secretRef {secret}: wheelhouse reads username/password and ca.crt from it (not certFile/keyFile, tls.crt/tls.key{}); check that the Secret suits wheelhouse",
            if oci { " or .dockerconfigjson" } else { "" }
        );
        if source.namespace != namespace {
            note.push_str(&format!(
                "; wheelhouse reads it from the HelmRelease's namespace {namespace}, not from {}: copy it there",
                source.namespace
            ));
        }
        m.note(note);
    }
    if let Some(Value::String(p)) = spec.remove("provider")
        && !p.is_empty()
        && p != "generic"
    {
        return Err(format!(
            "{what} logs in to its registry as the {p} cloud identity (spec.provider), which wheelhouse cannot do: give the registry's credentials in a Secret (spec.secretRef) and migrate again"
        ));
    }
    if !["https://", "http://", "oci://"].iter().any(|p| {
        carried["repository"]
            .as_str()
            .is_some_and(|u| u.starts_with(p))
    }) {
        return Err(format!(
            "{what} spec.url {written_url:?} is not an http://, https:// or oci:// URL"
        ));
    }
    if oci {
        // A static object in Flux: nothing polls or suspends it.
        for key in ["interval", "suspend"] {
            if spec.remove(key).is_some_and(|v| is_set(&v)) {
                m.drop_because(
                    &format!("{what} spec.{key}"),
                    "Flux does not use it for a HelmRepository of type oci",
                );
            }
        }
    } else if spec.remove("interval").is_some_and(|v| is_set(&v)) {
        m.drop_because(
            &format!("{what} spec.interval"),
            "how often Flux refreshes the repository's index; wheelhouse reads the index each time it checks the chart (chart.interval)",
        );
    }
    name_the_rest(spec, &what, "HelmRepository", m);
    Ok(oci)
}

#[cfg(test)]
mod tests {
    use super::keeps_whole;

    #[test]
    fn ignore_rules_that_take_back_the_charts_directory_keep_it_whole() {
        let fleet = "# outside the cluster\n/*\n!/kubernetes\n";
        assert!(keeps_whole(fleet, "kubernetes/apps/web"));
        assert!(keeps_whole("/*\n!/charts/", "charts/web"));
        assert!(!keeps_whole(fleet, "charts/web"));
        // Rules after the chart was taken back, patterns, or no rule taking it back: said.
        assert!(!keeps_whole("/*\n!/charts\n*.md", "charts/web"));
        assert!(!keeps_whole("/*\n!/chart*", "charts/web"));
        assert!(!keeps_whole("*.md", "charts/web"));
    }
}

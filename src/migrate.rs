//! `wheelhouse migrate`: a Flux `helm.toolkit.fluxcd.io/v2` HelmRelease as a wheelhouse
//! `wheelhouse.dev/v1alpha1` HelmRelease that continues the same Helm release.
//!
//! [`convert`] is pure: it takes the Flux object as read from the cluster (all of it, as
//! JSON) and the `source.toolkit.fluxcd.io/v1` HelmRepository its chart comes from, and
//! returns the wheelhouse object with a list of what it could not carry over. A field is
//! copied only where wheelhouse's schema has it with the same meaning; every other field
//! that is set is named, with the reason, in [`Migrated::not_carried`]. The Helm release
//! (name, namespace, storage namespace) is always the one Flux recorded, so wheelhouse
//! continues its history (the next change is an upgrade to the next revision) instead of
//! installing a second release. The result is checked by reading it back as
//! [`HelmRelease`]: a field the mapping writes that wheelhouse does not know fails loudly.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::api::HelmRelease;
use crate::api::flux::FluxHelmRelease;

/// Prefixes of the label and annotation keys that are Flux's own and stay behind.
const FLUX_METADATA: &[&str] = &[
    "reconcile.fluxcd.io/",
    "kustomize.toolkit.fluxcd.io/",
    "helm.toolkit.fluxcd.io/",
];

/// kubectl's record of the last object it applied: the Flux one, not ours.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Helm's longest release name; Flux shortens longer names ([`shorten_name`]).
const MAX_RELEASE_NAME: usize = 53;

/// Where the chart comes from, as the caller resolved the Flux source.
#[derive(Debug, Clone, PartialEq)]
pub enum Repository {
    /// The `source.toolkit.fluxcd.io/v1` HelmRepository that `spec.chart.spec.sourceRef`
    /// names, whole (as read from the cluster).
    HelmRepository(Value),
    /// A chart repository URL given instead of the Flux source (`--chart-repository`):
    /// for sources wheelhouse cannot read (GitRepository, Bucket, `spec.chartRef`).
    Url(String),
}

/// The wheelhouse HelmRelease made from a Flux one.
#[derive(Debug, Clone)]
pub struct Migrated {
    /// The object to print or apply: only the fields the mapping set.
    pub object: Value,
    /// The same, read back as wheelhouse reads it (defaults filled in).
    pub release: HelmRelease,
    /// `<path> (<why>)` for every field set on the Flux objects that wheelhouse does not
    /// carry with the same meaning.
    pub not_carried: Vec<String>,
    /// What the operator should know besides: behaviour that differs, things to check.
    pub notes: Vec<String>,
    /// The Helm release both objects manage.
    pub helm: HelmIdentity,
}

/// A Helm release as Flux recorded it: the one the migrated object must resolve to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelmIdentity {
    pub release_name: String,
    pub target_namespace: String,
    pub storage_namespace: String,
    /// The newest revision Flux recorded, if it installed one.
    pub revision: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("not a Flux HelmRelease (helm.toolkit.fluxcd.io/v2): {0}")]
    NotFlux(String),
    /// The chart's source cannot be expressed in wheelhouse; `not_carried` lists it with
    /// everything else that would not have been carried.
    #[error("{reason}")]
    NoChart {
        reason: String,
        not_carried: Vec<String>,
    },
    #[error(
        "the migrated HelmRelease does not read back as wheelhouse's (a bug in wheelhouse migrate): {0}"
    )]
    Invalid(String),
}

/// What `spec.chart.spec.sourceRef` names, with its namespace defaulted to the
/// HelmRelease's (as Flux does). `None` when the chart comes from `spec.chartRef` or no
/// source is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceRef {
    pub kind: String,
    pub name: String,
    pub namespace: String,
}

pub fn source_ref(flux: &Value) -> Option<SourceRef> {
    let r = flux.pointer("/spec/chart/spec/sourceRef")?;
    let kind = text(r, "kind")?;
    let name = text(r, "name")?;
    let namespace = text(r, "namespace")
        .or_else(|| text(&flux["metadata"], "namespace"))
        .unwrap_or("default");
    Some(SourceRef {
        kind: kind.to_owned(),
        name: name.to_owned(),
        namespace: namespace.to_owned(),
    })
}

/// Helm release name shortening as helm-controller's `release.ShortenName` does it: a
/// name over 53 characters becomes its first 40, `-`, and 12 hex digits of its SHA-256.
pub fn shorten_name(name: &str) -> String {
    if name.len() <= MAX_RELEASE_NAME {
        return name.to_owned();
    }
    let sum = hex::encode(Sha256::digest(name.as_bytes()));
    let keep = MAX_RELEASE_NAME - 13;
    // Kubernetes names are ASCII; a cut inside a character (never expected) keeps less.
    let head = name.get(..keep).unwrap_or_else(|| {
        let end = (0..=keep)
            .rev()
            .find(|i| name.is_char_boundary(*i))
            .unwrap_or(0);
        &name[..end]
    });
    format!("{head}-{}", &sum[..12])
}

/// The wheelhouse HelmRelease for `flux` (a whole `helm.toolkit.fluxcd.io/v2` HelmRelease
/// as JSON), with its chart from `repository`. The result is active (`suspend: false`)
/// whatever Flux's `spec.suspend` says: migrating means suspending the Flux object so that
/// wheelhouse takes over (the caller writes it suspended on request).
pub fn convert(flux: &Value, repository: Option<&Repository>) -> Result<Migrated, Error> {
    let api_version = text(flux, "apiVersion").unwrap_or_default();
    let kind = text(flux, "kind").unwrap_or_default();
    if !api_version.starts_with("helm.toolkit.fluxcd.io/") || kind != "HelmRelease" {
        return Err(Error::NotFlux(format!(
            "apiVersion {api_version:?}, kind {kind:?}"
        )));
    }
    let typed: FluxHelmRelease = serde_json::from_value(flux.clone())
        .map_err(|e| Error::NotFlux(format!("it does not read as one: {e}")))?;
    let name = typed
        .metadata
        .name
        .clone()
        .ok_or_else(|| Error::NotFlux("it has no name".into()))?;
    let namespace = typed
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let mut spec = match flux.get("spec") {
        Some(Value::Object(spec)) => spec.clone(),
        _ => return Err(Error::NotFlux("it has no spec".into())),
    };
    let mut m = Mapping::default();
    let mut out = Map::new();

    // Suspension hands the release over; it is not the wheelhouse release's state.
    if spec.remove("suspend").and_then(|v| v.as_bool()) == Some(true) {
        m.note(
            "spec.suspend: the Flux HelmRelease is suspended (as migrating needs); the wheelhouse HelmRelease is written active so that wheelhouse takes over (`--suspended` writes it suspended)",
        );
    }
    out.insert("suspend".into(), Value::Bool(false));

    let helm = helm_identity(&typed, &spec, &namespace, &mut m);
    chart(&mut spec, flux, &namespace, repository, &mut out, &mut m)?;
    // Without a chart (m.no_chart) the rest is still mapped, so that the refusal lists
    // everything that would not be carried in one go.
    names(&mut spec, &name, &namespace, &helm, &mut out);
    plain(&mut spec, &mut out, &mut m);
    for section in ["install", "upgrade", "test", "rollback", "uninstall"] {
        let v = spec.remove(section).unwrap_or(Value::Null);
        if let Some(carried) = action(section, v, &mut m) {
            out.insert(section.into(), carried);
        }
    }
    m.note(
        "install/upgrade.takeOwnership is written as Flux's helm-controller behaves: it takes over existing objects unless disableTakeOwnership. Conflicts are not forced: fields helm-controller holds with the values it deployed are the release's own and move to wheelhouse on the next upgrade; a field another manager changed stays theirs (Flux would have forced it)",
    );
    if let Some(v) = spec.remove("driftDetection")
        && let Some(carried) = drift_detection(v, &mut m)
    {
        out.insert("driftDetection".into(), carried);
    }
    for (key, value) in spec {
        m.drop_field(&format!("spec.{key}"), &value);
    }

    if let Some(reason) = m.no_chart.take() {
        return Err(Error::NoChart {
            reason,
            not_carried: m.not_carried,
        });
    }

    let object = json!({
        "apiVersion": format!("{}/{}", crate::api::GROUP, crate::api::VERSION),
        "kind": crate::api::KIND,
        "metadata": metadata(flux, &name, &namespace, &mut m),
        "spec": Value::Object(out),
    });
    let release = read_back(&object, &helm)?;
    Ok(Migrated {
        object,
        release,
        not_carried: m.not_carried,
        notes: m.notes,
        helm,
    })
}

/// The result as YAML, with what was not carried and the notes as comments on top.
pub fn to_yaml(migrated: &Migrated, from: &str) -> String {
    let mut text = format!("# Migrated from Flux HelmRelease {from} by `wheelhouse migrate`.\n");
    let h = &migrated.helm;
    text.push_str(&format!(
        "# Helm release {} in namespace {} (stored in {}){}.\n",
        h.release_name,
        h.target_namespace,
        h.storage_namespace,
        h.revision
            .map(|r| format!(", continued from revision {r}"))
            .unwrap_or_default()
    ));
    for line in &migrated.not_carried {
        text.push_str(&comment(&format!("not carried: {line}")));
    }
    for line in &migrated.notes {
        text.push_str(&comment(&format!("note: {line}")));
    }
    text.push_str(&crate::yaml::to_string(&migrated.object));
    text
}

fn comment(line: &str) -> String {
    format!("# {}\n", line.replace(['\n', '\r'], " "))
}

#[derive(Default)]
struct Mapping {
    not_carried: Vec<String>,
    notes: Vec<String>,
    /// Why there is no chart, when there is none.
    no_chart: Option<String>,
}

impl Mapping {
    /// Records `path` as not carried when `value` says anything (Flux's zero values, such
    /// as `false` or an empty list, mean the same as leaving the field out).
    fn drop_field(&mut self, path: &str, value: &Value) {
        if is_set(value) {
            self.not_carried.push(format!("{path} ({})", why_not(path)));
        }
    }

    fn drop_because(&mut self, path: &str, why: impl std::fmt::Display) {
        self.not_carried.push(format!("{path} ({why})"));
    }

    fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }
}

/// Whether a Flux field holds anything but its zero value.
fn is_set(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => o.values().any(is_set),
        Value::Number(_) => true,
    }
}

fn text<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key)?.as_str().filter(|s| !s.is_empty())
}

/// Why a Flux field has no counterpart: the path without list indexes names it.
fn why_not(path: &str) -> String {
    let general: String = path
        .split('.')
        .map(|part| part.split('[').next().unwrap_or(part))
        .collect::<Vec<_>>()
        .join(".");
    let last = general.rsplit('.').next().unwrap_or_default();
    let why = match general.as_str() {
        "spec.kubeConfig" => "wheelhouse deploys to the cluster it runs in only",
        "spec.persistentClient" => "a helm-controller client setting; wheelhouse has none",
        "spec.commonMetadata" => {
            "wheelhouse adds no common labels or annotations: the next upgrade removes them from the release's objects"
        }
        "spec.postRenderers" | "spec.postRenderStrategy" => {
            "wheelhouse has no post-renderers: the next upgrade applies the chart as rendered, without these patches"
        }
        "spec.waitStrategy" => "wheelhouse waits with its own health checks, see spec.healthCheck",
        "spec.healthCheckExprs" => "wheelhouse has no custom CEL health checks",
        "spec.chart.metadata" => {
            "labels and annotations of the HelmChart object Flux creates; wheelhouse creates none"
        }
        "spec.chart.spec.interval" | "spec.chart.spec.reconcileStrategy" => {
            "settings of the HelmChart object Flux creates; wheelhouse resolves the chart itself on each reconcile"
        }
        "spec.chart.spec.valuesFiles" | "spec.chart.spec.ignoreMissingValuesFiles" => {
            "wheelhouse uses the chart's values.yaml only: move these files' values into spec.values or spec.valuesFrom"
        }
        "spec.chart.spec.verify" => "wheelhouse does not verify chart signatures",
        "spec.install.timeout" | "spec.upgrade.timeout" => {
            "wheelhouse has one timeout for install and upgrade, spec.timeout"
        }
        "spec.install.strategy" | "spec.upgrade.strategy" => {
            "wheelhouse retries and remediates as install/upgrade.remediation say"
        }
        "spec.install.remediation.ignoreTestFailures"
        | "spec.upgrade.remediation.ignoreTestFailures" => {
            "wheelhouse has test.ignoreFailures only"
        }
        "spec.install.remediation.remediateLastFailure" => {
            "wheelhouse's install remediation has no such setting"
        }
        "spec.install.serverSideApply"
        | "spec.upgrade.serverSideApply"
        | "spec.rollback.serverSideApply" => {
            "wheelhouse always applies server-side, as Helm 4 does by default"
        }
        "spec.upgrade.force" | "spec.rollback.force" | "spec.install.replace" => {
            "wheelhouse never deletes and recreates objects"
        }
        "spec.upgrade.preserveValues" => "wheelhouse always renders from the spec's values",
        "spec.test.filters" => "wheelhouse runs all of the chart's tests",
        "spec.dependsOn.readyExpr" => "wheelhouse waits for the dependency's Ready condition only",
        _ if last.starts_with("disable") => "wheelhouse has no such setting",
        _ => "wheelhouse has no such field",
    };
    why.to_owned()
}

/// The Helm release Flux manages: what it recorded in status (the name after shortening,
/// the namespace it deployed to, where it stored the records), else what its spec says.
fn helm_identity(
    typed: &FluxHelmRelease,
    spec: &Map<String, Value>,
    namespace: &str,
    m: &mut Mapping,
) -> HelmIdentity {
    let name = typed.metadata.name.clone().unwrap_or_default();
    let status = typed.status.as_ref();
    let latest = status.and_then(|s| s.history.first());
    let spec_text = |key: &str| {
        spec.get(key)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let by_spec_target = spec_text("targetNamespace").unwrap_or_else(|| namespace.to_owned());
    let by_spec_name = shorten_name(
        &match (spec_text("releaseName"), spec_text("targetNamespace")) {
            (Some(r), _) => r,
            (None, Some(t)) => format!("{t}-{name}"),
            (None, None) => name.clone(),
        },
    );
    // FluxHelmRelease::release_name() prefers the recorded name; the rule it falls back
    // to is Flux's, with the shortening helm-controller applies on top.
    let release_name = shorten_name(&typed.release_name());
    let target_namespace = latest
        .map(|s| s.namespace.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| typed.target_namespace());
    let storage_namespace = typed.storage_namespace();
    if let Some(latest) = latest
        && (latest.name != by_spec_name || target_namespace != by_spec_target)
    {
        m.note(format!(
            "Flux recorded Helm release {} in namespace {}, but its spec now names {by_spec_name} in {by_spec_target} (a change helm-controller had not made yet): kept the recorded release; change releaseName/targetNamespace afterwards to move it",
            latest.name, target_namespace
        ));
    }
    HelmIdentity {
        release_name,
        target_namespace,
        storage_namespace,
        revision: latest.map(|s| i64::from(s.version)).filter(|v| *v > 0),
    }
}

/// `releaseName`, `targetNamespace` and `storageNamespace`: set whenever Flux's release
/// differs from what wheelhouse would default to, or Flux's spec set them.
fn names(
    spec: &mut Map<String, Value>,
    name: &str,
    namespace: &str,
    helm: &HelmIdentity,
    out: &mut Map<String, Value>,
) {
    let given = |v: Option<Value>| v.is_some_and(|v| is_set(&v));
    let release_given = given(spec.remove("releaseName"));
    let target_given = given(spec.remove("targetNamespace"));
    let storage_given = given(spec.remove("storageNamespace"));
    let target = target_given || helm.target_namespace != namespace;
    if target {
        out.insert(
            "targetNamespace".into(),
            Value::String(helm.target_namespace.clone()),
        );
    }
    let default_name = if target {
        format!("{}-{name}", helm.target_namespace)
    } else {
        name.to_owned()
    };
    if release_given || helm.release_name != default_name {
        out.insert(
            "releaseName".into(),
            Value::String(helm.release_name.clone()),
        );
    }
    if storage_given || helm.storage_namespace != namespace {
        out.insert(
            "storageNamespace".into(),
            Value::String(helm.storage_namespace.clone()),
        );
    }
}

/// The chart block: from the HelmRepository the source names, or the URL given instead.
fn chart(
    spec: &mut Map<String, Value>,
    flux: &Value,
    namespace: &str,
    repository: Option<&Repository>,
    out: &mut Map<String, Value>,
    m: &mut Mapping,
) -> Result<(), Error> {
    let chart_ref = spec.remove("chartRef").filter(is_set);
    let chart = spec.remove("chart").filter(is_set);
    let deployed = flux.pointer("/status/history/0");
    let deployed_chart = deployed.and_then(|d| text(d, "chartName"));
    let deployed_version = deployed.and_then(|d| text(d, "chartVersion"));
    let mut carried = Map::new();

    // Everything of the chart template except its source, chart and version.
    let mut chart_spec = Map::new();
    if let Some(mut chart) = chart.clone().and_then(|c| match c {
        Value::Object(o) => Some(o),
        _ => None,
    }) {
        if let Some(Value::Object(s)) = chart.remove("spec") {
            chart_spec = s;
        }
        for (key, value) in chart {
            m.drop_field(&format!("spec.chart.{key}"), &value);
        }
    }
    let chart_name = chart_spec
        .remove("chart")
        .and_then(|v| v.as_str().map(str::to_owned));
    let version = chart_spec
        .remove("version")
        .and_then(|v| v.as_str().map(str::to_owned))
        .filter(|v| !v.is_empty() && v != "*");
    chart_spec.remove("sourceRef");
    for (key, value) in chart_spec {
        m.drop_field(&format!("spec.chart.spec.{key}"), &value);
    }
    let source = source_ref(flux);
    let override_url = match repository {
        Some(Repository::Url(url)) => Some(url.clone()),
        _ => None,
    };

    if let Some(chart_ref) = chart_ref {
        let kind = text(&chart_ref, "kind").unwrap_or("source");
        let what = format!(
            "{kind} {}/{}",
            text(&chart_ref, "namespace").unwrap_or(namespace),
            text(&chart_ref, "name").unwrap_or_default()
        );
        match override_url {
            Some(url) => {
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
            }
            None => {
                m.drop_because(
                    "spec.chartRef",
                    format!(
                        "{what}: wheelhouse reads charts from Helm repositories only; give the chart's repository with --chart-repository URL"
                    ),
                );
                m.no_chart = Some(format!(
                    "the chart comes from spec.chartRef ({what}), which wheelhouse cannot read; give the chart's repository with --chart-repository URL"
                ));
                return Ok(());
            }
        }
    } else {
        let Some(source) = source else {
            return Err(Error::NotFlux(
                "spec has neither chart.spec.sourceRef nor chartRef".into(),
            ));
        };
        let Some(chart_name) = chart_name.filter(|c| !c.is_empty()) else {
            return Err(Error::NotFlux("spec.chart.spec.chart is empty".into()));
        };
        let what = format!("{} {}/{}", source.kind, source.namespace, source.name);
        match (source.kind.as_str(), repository) {
            (_, Some(Repository::Url(url))) if source.kind == "HelmRepository" => {
                carried.insert("repository".into(), Value::String(url.clone()));
                carried.insert("name".into(), Value::String(chart_name));
                if let Some(v) = version {
                    carried.insert("version".into(), Value::String(v));
                }
                m.note(format!(
                    "spec.chart.spec.sourceRef ({what}) replaced by --chart-repository {url}"
                ));
            }
            ("HelmRepository", Some(Repository::HelmRepository(repo))) => {
                helm_repository(repo, &source, namespace, &mut carried, m);
                carried.insert("name".into(), Value::String(chart_name));
                if let Some(v) = version {
                    carried.insert("version".into(), Value::String(v));
                }
            }
            ("HelmRepository", None) => {
                m.no_chart = Some(format!(
                    "the chart's {what} was not given, so the chart's repository is unknown"
                ));
                return Ok(());
            }
            (_, Some(Repository::Url(url))) => {
                // A chart in Git or a Bucket is a path; its name and version are the
                // chart's own, which Flux recorded when it deployed it.
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
            (_, _) => {
                m.drop_because(
                    "spec.chart.spec.sourceRef",
                    format!(
                        "{what}: wheelhouse reads charts from Helm repositories only; give the chart's repository with --chart-repository URL"
                    ),
                );
                m.no_chart = Some(format!(
                    "the chart comes from {what}, which wheelhouse cannot read; give the chart's repository with --chart-repository URL"
                ));
                return Ok(());
            }
        }
    }
    out.insert("chart".into(), Value::Object(carried));
    Ok(())
}

/// `chart.repository` and `chart.secretRef` from a Flux HelmRepository.
fn helm_repository(
    repo: &Value,
    source: &SourceRef,
    namespace: &str,
    carried: &mut Map<String, Value>,
    m: &mut Mapping,
) {
    let what = format!("HelmRepository {}/{}", source.namespace, source.name);
    let spec = repo.get("spec").cloned().unwrap_or(Value::Null);
    let url = text(&spec, "url").unwrap_or_default().to_owned();
    let oci = text(&spec, "type") == Some("oci") || url.starts_with("oci://");
    let url = if oci && !url.starts_with("oci://") {
        format!(
            "oci://{}",
            url.split_once("://").map_or(url.as_str(), |(_, r)| r)
        )
    } else {
        url
    };
    carried.insert("repository".into(), Value::String(url));
    // Flux's plain-HTTP switch for an OCI registry means the same as wheelhouse's.
    if oci && spec.get("insecure").and_then(Value::as_bool) == Some(true) {
        carried.insert("insecure".into(), Value::Bool(true));
    }
    if let Some(secret) = spec.pointer("/secretRef/name").and_then(Value::as_str) {
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
    for (key, why) in [
        (
            "certSecretRef",
            "wheelhouse reads a CA only as ca.crt in chart.secretRef, and no client certificate",
        ),
        (
            "passCredentials",
            "wheelhouse sends credentials to the repository's own host only",
        ),
        ("insecure", "wheelhouse has no such setting"),
        ("provider", "wheelhouse has no cloud provider login"),
    ] {
        match spec.get(key) {
            Some(Value::String(p)) if key == "provider" && p == "generic" => {}
            Some(v) if is_set(v) => m.drop_because(&format!("{what} spec.{key}"), why),
            _ => {}
        }
    }
}

/// interval, timeout, maxHistory, values, valuesFrom, dependsOn: the same in both.
fn plain(spec: &mut Map<String, Value>, out: &mut Map<String, Value>, m: &mut Mapping) {
    // serviceAccountName means the same: everything done for the release is done as that
    // ServiceAccount of the HelmRelease's namespace, by impersonation.
    for key in ["interval", "timeout", "maxHistory", "serviceAccountName"] {
        if let Some(v) = spec.remove(key).filter(|v| !v.is_null()) {
            out.insert(key.into(), v);
        }
    }
    match spec.remove("values") {
        Some(v @ Value::Object(_)) => {
            out.insert("values".into(), v);
        }
        Some(v) => m.drop_field("spec.values", &v),
        None => {}
    }
    if let Some(Value::Array(refs)) = spec.remove("valuesFrom") {
        let carried: Vec<Value> = refs
            .into_iter()
            .enumerate()
            .map(|(i, r)| {
                keep(
                    r,
                    &format!("spec.valuesFrom[{i}]"),
                    &["kind", "name", "valuesKey", "targetPath", "optional"],
                    m,
                )
            })
            .collect();
        if !carried.is_empty() {
            out.insert("valuesFrom".into(), Value::Array(carried));
        }
    }
    if let Some(Value::Array(deps)) = spec.remove("dependsOn") {
        let carried: Vec<Value> = deps
            .into_iter()
            .enumerate()
            .map(|(i, d)| {
                keep(
                    d,
                    &format!("spec.dependsOn[{i}]"),
                    &["name", "namespace"],
                    m,
                )
            })
            .collect();
        if !carried.is_empty() {
            let names: Vec<String> = carried
                .iter()
                .map(|d| match text(d, "namespace") {
                    Some(ns) => format!("{ns}/{}", text(d, "name").unwrap_or_default()),
                    None => text(d, "name").unwrap_or_default().to_owned(),
                })
                .collect();
            m.note(format!(
                "spec.dependsOn now names wheelhouse HelmReleases ({}): migrate those too, or this release waits for them (DependencyNotReady)",
                names.join(", ")
            ));
            out.insert("dependsOn".into(), Value::Array(carried));
        }
    }
}

/// The keys of `value` (an object) named in `keys`; the others are not carried.
fn keep(value: Value, path: &str, keys: &[&str], m: &mut Mapping) -> Value {
    let Value::Object(fields) = value else {
        m.drop_field(path, &value);
        return Value::Object(Map::new());
    };
    let mut kept = Map::new();
    for (key, v) in fields {
        if keys.contains(&key.as_str()) {
            kept.insert(key, v);
        } else {
            m.drop_field(&format!("{path}.{key}"), &v);
        }
    }
    Value::Object(kept)
}

/// One of install, upgrade, test, rollback, uninstall: the fields wheelhouse has with the
/// same meaning, and the same defaults where it defaults them.
fn action(section: &str, value: Value, m: &mut Mapping) -> Option<Value> {
    let path = format!("spec.{section}");
    let mut fields = match value {
        Value::Object(fields) => fields,
        Value::Null => Map::new(),
        value => {
            m.drop_field(&path, &value);
            Map::new()
        }
    };
    let same: &[&str] = match section {
        "install" => &["createNamespace", "crds", "disableWait", "disableHooks"],
        "upgrade" => &["crds", "disableWait", "disableHooks", "cleanupOnFail"],
        "test" => &["enable", "timeout", "ignoreFailures"],
        "rollback" => &["timeout", "disableHooks", "disableWait"],
        _ => &["timeout", "disableHooks", "disableWait", "keepHistory"],
    };
    let mut out = Map::new();
    for key in same {
        if let Some(v) = fields.remove(*key).filter(|v| !v.is_null()) {
            out.insert((*key).into(), v);
        }
    }
    // Deprecated: Flux skips CRDs when it is set and `crds` is not.
    if section == "install"
        && fields.remove("skipCRDs").and_then(|v| v.as_bool()) == Some(true)
        && !out.contains_key("crds")
    {
        out.insert("crds".into(), Value::String("Skip".into()));
    }
    // What helm-controller does without being asked, where wheelhouse must be asked:
    // take over existing objects (Helm's --take-ownership) unless disableTakeOwnership,
    // and force server-side apply conflicts (it always does; under client-side apply, its
    // other mode, it overwrites whatever another manager set).
    if matches!(section, "install" | "upgrade") {
        let disabled = fields
            .remove("disableTakeOwnership")
            .and_then(|v| v.as_bool());
        if disabled != Some(true) {
            out.insert("takeOwnership".into(), Value::Bool(true));
        }
    }
    // Server-side apply on (or Helm's choice, which is server-side for these releases) is
    // what wheelhouse does; only turning it off is lost.
    match fields.get("serverSideApply") {
        Some(Value::Bool(true)) => {
            fields.remove("serverSideApply");
        }
        Some(Value::String(s)) if s == "enabled" || s == "auto" => {
            fields.remove("serverSideApply");
        }
        _ => {}
    }
    if section == "uninstall"
        && fields.get("deletionPropagation").and_then(Value::as_str) == Some("background")
    {
        fields.remove("deletionPropagation");
    }
    if matches!(section, "install" | "upgrade")
        && let Some(remediation) = fields.remove("remediation")
    {
        let keys: &[&str] = if section == "install" {
            &["retries"]
        } else {
            &["retries", "strategy", "remediateLastFailure"]
        };
        let kept = keep(remediation, &format!("{path}.remediation"), keys, m);
        if kept.as_object().is_some_and(|o| !o.is_empty()) {
            out.insert("remediation".into(), kept);
        }
    }
    for (key, v) in fields {
        m.drop_field(&format!("{path}.{key}"), &v);
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// `driftDetection`: the mode, and the ignore rules (a target by kind, name and namespace;
/// Flux's group, version and label or annotation selectors are not carried).
fn drift_detection(value: Value, m: &mut Mapping) -> Option<Value> {
    let Value::Object(mut fields) = value else {
        m.drop_field("spec.driftDetection", &value);
        return None;
    };
    let mut out = Map::new();
    if let Some(mode) = fields.remove("mode").filter(is_set) {
        out.insert("mode".into(), mode);
    }
    if let Some(Value::Array(rules)) = fields.remove("ignore") {
        let mut carried = Vec::new();
        for (i, rule) in rules.into_iter().enumerate() {
            let at = format!("spec.driftDetection.ignore[{i}]");
            let Value::Object(mut kept) = keep(rule, &at, &["paths", "target"], m) else {
                continue;
            };
            if let Some(target) = kept.remove("target").filter(is_set)
                && let Value::Object(target) = keep(
                    target,
                    &format!("{at}.target"),
                    &["kind", "name", "namespace"],
                    m,
                )
                && !target.is_empty()
            {
                kept.insert("target".into(), Value::Object(target));
            }
            if kept.get("paths").is_some_and(is_set) {
                carried.push(Value::Object(kept));
            }
        }
        if !carried.is_empty() {
            out.insert("ignore".into(), Value::Array(carried));
        }
    }
    for (key, v) in fields {
        m.drop_field(&format!("spec.driftDetection.{key}"), &v);
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// Same name and namespace; labels and annotations without Flux's own.
fn metadata(flux: &Value, name: &str, namespace: &str, m: &mut Mapping) -> Value {
    let mut meta = json!({ "name": name, "namespace": namespace });
    for field in ["labels", "annotations"] {
        let Some(Value::Object(entries)) = flux.pointer(&format!("/metadata/{field}")) else {
            continue;
        };
        let kept: Map<String, Value> = entries
            .iter()
            .filter(|(k, _)| {
                !FLUX_METADATA.iter().any(|p| k.starts_with(p)) && k.as_str() != LAST_APPLIED
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            meta[field] = Value::Object(kept);
        }
    }
    if let Some(kustomization) = flux
        .pointer("/metadata/labels/kustomize.toolkit.fluxcd.io~1name")
        .and_then(Value::as_str)
    {
        let from = flux
            .pointer("/metadata/labels/kustomize.toolkit.fluxcd.io~1namespace")
            .and_then(Value::as_str)
            .unwrap_or(namespace);
        m.note(format!(
            "Flux Kustomization {from}/{kustomization} manages this Flux HelmRelease: take it out of that Kustomization's source (and commit the wheelhouse one instead), or Flux may resume or recreate it"
        ));
    }
    if flux
        .pointer("/metadata/labels/sharding.fluxcd.io~1key")
        .is_some()
    {
        m.note(
            "label sharding.fluxcd.io/key is kept as is; wheelhouse shards by sharding.wheelhouse.dev/key",
        );
    }
    meta
}

/// `object` read as wheelhouse reads it. Fails when a key the mapping wrote is not a field
/// of wheelhouse's (serde would drop it silently), or when the release it names is not
/// Flux's.
fn read_back(object: &Value, helm: &HelmIdentity) -> Result<HelmRelease, Error> {
    let release: HelmRelease =
        serde_json::from_value(object.clone()).map_err(|e| Error::Invalid(e.to_string()))?;
    let again = serde_json::to_value(&release).map_err(|e| Error::Invalid(e.to_string()))?;
    let mut unknown = Vec::new();
    unknown_keys(object, &again, "", &mut unknown);
    if !unknown.is_empty() {
        return Err(Error::Invalid(format!(
            "wheelhouse has no field {}",
            unknown.join(", ")
        )));
    }
    let resolved = (
        release.release_name(),
        release.target_namespace(),
        release.storage_namespace(),
    );
    let flux = (
        helm.release_name.clone(),
        helm.target_namespace.clone(),
        helm.storage_namespace.clone(),
    );
    if resolved != flux {
        return Err(Error::Invalid(format!(
            "it resolves to Helm release {:?} where Flux's is {flux:?}",
            resolved
        )));
    }
    Ok(release)
}

/// Paths of keys in `written` that `read` (its round trip through the typed object) lacks.
fn unknown_keys(written: &Value, read: &Value, path: &str, found: &mut Vec<String>) {
    match (written, read) {
        (Value::Object(w), Value::Object(r)) => {
            for (key, value) in w {
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match r.get(key) {
                    Some(again) => unknown_keys(value, again, &at, found),
                    None => found.push(at),
                }
            }
        }
        (Value::Array(w), Value::Array(r)) => {
            for (i, (value, again)) in w.iter().zip(r).enumerate() {
                unknown_keys(value, again, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Value {
        crate::yaml::from_str(text).unwrap()
    }

    fn http_repo(namespace: &str) -> Repository {
        Repository::HelmRepository(yaml(&format!(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {{name: charts, namespace: {namespace}}}\nspec: {{url: 'https://charts.example.com/stable', interval: 10m}}\n"
        )))
    }

    const FULL: &str = r#"
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: podinfo
  namespace: apps
  uid: 2b0d6d5e-0000-4000-8000-000000000001
  resourceVersion: "4711"
  generation: 3
  finalizers: [finalizers.fluxcd.io]
  managedFields: [{manager: kustomize-controller, operation: Apply}]
  labels:
    app: podinfo
    kustomize.toolkit.fluxcd.io/name: apps
    kustomize.toolkit.fluxcd.io/namespace: flux-system
    helm.toolkit.fluxcd.io/name: podinfo
  annotations:
    team: web
    reconcile.fluxcd.io/requestedAt: "2026-01-01T00:00:00Z"
    kubectl.kubernetes.io/last-applied-configuration: "{}"
spec:
  interval: 10m
  timeout: 2m30s
  suspend: true
  maxHistory: 3
  serviceAccountName: deployer
  persistentClient: false
  kubeConfig: {secretRef: {name: remote}}
  commonMetadata: {labels: {team: web}}
  postRenderers: [{kustomize: {patches: [{patch: "x"}]}}]
  waitStrategy: {name: poller}
  healthCheckExprs: [{apiVersion: v1, kind: ConfigMap, current: "true"}]
  chart:
    metadata: {labels: {x: y}}
    spec:
      chart: podinfo
      version: ">=6.0.0 <7.0.0"
      interval: 5m
      reconcileStrategy: ChartVersion
      valuesFiles: [values.yaml, values-prod.yaml]
      verify: {provider: cosign}
      sourceRef: {kind: HelmRepository, name: charts}
  values:
    replicaCount: 2
    ingress: {enabled: true}
  valuesFrom:
    - {kind: ConfigMap, name: base}
    - {kind: Secret, name: creds, valuesKey: token, targetPath: auth.token, optional: true}
  dependsOn:
    - {name: redis}
    - {name: db, namespace: data, readyExpr: "true"}
  install:
    createNamespace: true
    crds: CreateReplace
    timeout: 10m
    disableTakeOwnership: true
    disableWaitForJobs: true
    remediation: {retries: 3, ignoreTestFailures: true}
    someFutureField: 1
  upgrade:
    cleanupOnFail: true
    force: true
    preserveValues: false
    serverSideApply: enabled
    remediation: {retries: -1, strategy: uninstall, remediateLastFailure: false}
  test: {enable: true, timeout: 1m, ignoreFailures: true, filters: [{name: smoke}]}
  rollback: {timeout: 1m, disableHooks: true, recreate: true}
  uninstall: {keepHistory: true, deletionPropagation: background}
  driftDetection:
    mode: warn
    ignore:
      - paths: [/spec/replicas]
      - paths: [/data]
        target: {kind: ConfigMap}
status:
  observedGeneration: 3
  storageNamespace: apps
  history:
    - {name: podinfo, namespace: apps, version: 4, status: deployed, chartName: podinfo, chartVersion: 6.5.0}
"#;

    #[test]
    fn a_full_flux_release_keeps_every_field_of_the_same_meaning_and_names_the_rest() {
        let m = convert(&yaml(FULL), Some(&http_repo("apps"))).unwrap();
        let expected = yaml(
            r#"
apiVersion: wheelhouse.dev/v1alpha1
kind: HelmRelease
metadata:
  name: podinfo
  namespace: apps
  labels: {app: podinfo}
  annotations: {team: web}
spec:
  chart: {repository: "https://charts.example.com/stable", name: podinfo, version: ">=6.0.0 <7.0.0"}
  interval: 10m
  timeout: 2m30s
  suspend: false
  maxHistory: 3
  serviceAccountName: deployer
  values:
    replicaCount: 2
    ingress: {enabled: true}
  valuesFrom:
    - {kind: ConfigMap, name: base}
    - {kind: Secret, name: creds, valuesKey: token, targetPath: auth.token, optional: true}
  dependsOn:
    - {name: redis}
    - {name: db, namespace: data}
  install: {createNamespace: true, crds: CreateReplace, remediation: {retries: 3}}
  upgrade: {cleanupOnFail: true, takeOwnership: true, remediation: {retries: -1, strategy: uninstall, remediateLastFailure: false}}
  test: {enable: true, timeout: 1m, ignoreFailures: true}
  rollback: {timeout: 1m, disableHooks: true}
  uninstall: {keepHistory: true}
  driftDetection: {mode: warn, ignore: [{paths: [/spec/replicas]}, {paths: [/data], target: {kind: ConfigMap}}]}
"#,
        );
        assert_eq!(m.object, expected, "{}", crate::yaml::to_string(&m.object));
        let paths: Vec<&str> = m
            .not_carried
            .iter()
            .map(|l| l.split(' ').next().unwrap())
            .collect();
        let mut expected_paths = vec![
            "spec.chart.metadata",
            "spec.chart.spec.interval",
            "spec.chart.spec.reconcileStrategy",
            "spec.chart.spec.valuesFiles",
            "spec.chart.spec.verify",
            "spec.dependsOn[1].readyExpr",
            "spec.install.timeout",
            "spec.install.disableWaitForJobs",
            "spec.install.remediation.ignoreTestFailures",
            "spec.install.someFutureField",
            "spec.upgrade.force",
            "spec.test.filters",
            "spec.rollback.recreate",
            "spec.kubeConfig",
            "spec.commonMetadata",
            "spec.postRenderers",
            "spec.waitStrategy",
            "spec.healthCheckExprs",
        ];
        let mut got = paths.clone();
        got.sort_unstable();
        expected_paths.sort_unstable();
        assert_eq!(got, expected_paths, "{:#?}", m.not_carried);
        // Each comes with its reason.
        assert!(m.not_carried.iter().any(|l| l
            == "spec.postRenderers (wheelhouse has no post-renderers: the next upgrade applies the chart as rendered, without these patches)"));
        assert!(
            m.not_carried
                .contains(&"spec.install.someFutureField (wheelhouse has no such field)".into())
        );
        assert!(
            m.notes
                .iter()
                .any(|n| n.contains("Kustomization flux-system/apps")),
            "{:#?}",
            m.notes
        );
        assert!(m.notes.iter().any(|n| n.starts_with("spec.suspend")));
        assert!(m.notes.iter().any(|n| n.contains("redis, data/db")));
        assert_eq!(
            m.helm,
            HelmIdentity {
                release_name: "podinfo".into(),
                target_namespace: "apps".into(),
                storage_namespace: "apps".into(),
                revision: Some(4),
            }
        );
        assert_eq!(m.release.spec.max_history, 3);
        assert!(!m.release.spec.suspend);
        assert!(m.release.status.is_none());

        // The YAML printed reads back as the same object, comments and all.
        let printed = to_yaml(&m, "apps/podinfo");
        assert!(printed.starts_with("# Migrated from Flux HelmRelease apps/podinfo"));
        assert!(
            printed.contains("# not carried: spec.kubeConfig ("),
            "{printed}"
        );
        let read: Value = crate::yaml::from_str(&printed).unwrap();
        assert_eq!(read, m.object);
    }

    #[test]
    fn the_release_name_and_namespaces_resolve_to_fluxs_release() {
        // targetNamespace: the release name is `<target>-<name>` in both; nothing else set.
        let flux = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: flux-system}\nspec: {interval: 5m, targetNamespace: apps, chart: {spec: {chart: web, sourceRef: {kind: HelmRepository, name: charts}}}}\n",
        );
        let m = convert(&flux, Some(&http_repo("flux-system"))).unwrap();
        let spec = &m.object["spec"];
        assert_eq!(spec["targetNamespace"], "apps");
        assert!(spec.get("releaseName").is_none(), "{spec}");
        assert!(spec.get("storageNamespace").is_none(), "{spec}");
        assert_eq!(m.release.release_name(), "apps-web");
        assert_eq!(m.release.storage_namespace(), "flux-system");
        assert_eq!(m.helm.revision, None);
        // helm-controller's own behaviour, which wheelhouse does only when asked.
        let behaves = json!({"takeOwnership": true});
        assert_eq!(spec["install"], behaves);
        assert_eq!(spec["upgrade"], behaves);
        // No forced conflicts: the fields helm-controller holds with the values it
        // deployed are the release's own, and an upgrade takes them over without force.
        assert!(spec.get("rollback").is_none(), "{spec}");
        assert!(spec.get("test").is_none() && spec.get("uninstall").is_none());
        assert!(!m.release.spec.upgrade.as_ref().unwrap().force_conflicts);
        assert!(m.not_carried.is_empty(), "{:#?}", m.not_carried);

        // What Flux recorded wins: a shortened name, another storage namespace.
        let long = "a-very-long-helmrelease-name-that-goes-on-and-on";
        let recorded = shorten_name(&format!("production-{long}"));
        assert_eq!(recorded.len(), 53);
        assert!(recorded.starts_with("production-a-very-long-helmrelease-name--"));
        let flux = yaml(&format!(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: {long}, namespace: flux-system}}\nspec: {{interval: 5m, targetNamespace: production, storageNamespace: production, chart: {{spec: {{chart: web, version: '*', sourceRef: {{kind: HelmRepository, name: charts}}}}}}}}\nstatus: {{storageNamespace: production, history: [{{name: {recorded}, namespace: production, version: 7}}]}}\n"
        ));
        let m = convert(&flux, Some(&http_repo("flux-system"))).unwrap();
        let spec = &m.object["spec"];
        assert_eq!(spec["releaseName"], recorded.as_str());
        assert_eq!(spec["targetNamespace"], "production");
        assert_eq!(spec["storageNamespace"], "production");
        assert!(spec["chart"].get("version").is_none(), "`*` is the latest");
        assert_eq!(m.helm.revision, Some(7));
        // No history yet: Flux's rule, shortened as helm-controller shortens it.
        let mut fresh = flux.clone();
        fresh.as_object_mut().unwrap().remove("status");
        let m = convert(&fresh, Some(&http_repo("flux-system"))).unwrap();
        assert_eq!(m.object["spec"]["releaseName"], recorded.as_str());

        // Recorded elsewhere than the spec now says: the recorded release is kept.
        let moved = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {interval: 5m, releaseName: front, chart: {spec: {chart: web, sourceRef: {kind: HelmRepository, name: charts}}}}\nstatus: {history: [{name: web, namespace: apps, version: 2}]}\n",
        );
        let m = convert(&moved, Some(&http_repo("apps"))).unwrap();
        assert_eq!(m.object["spec"]["releaseName"], "web");
        assert!(
            m.notes
                .iter()
                .any(|n| n.contains("now names front in apps")),
            "{:#?}",
            m.notes
        );
    }

    const CHART_REF: &str = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec:\n  interval: 5m\n  chartRef: {kind: OCIRepository, name: web-chart}\n  postRenderers: [{kustomize: {images: [{name: x}]}}]\nstatus: {history: [{name: web, namespace: apps, version: 2, chartName: web, chartVersion: 1.2.3}]}\n";

    #[test]
    fn a_chart_ref_is_refused_unless_a_repository_is_given() {
        let flux = yaml(CHART_REF);
        let Err(Error::NoChart {
            reason,
            not_carried,
        }) = convert(&flux, None)
        else {
            panic!("chartRef was carried");
        };
        assert!(
            reason.contains("spec.chartRef (OCIRepository apps/web-chart)"),
            "{reason}"
        );
        assert!(reason.contains("--chart-repository URL"), "{reason}");
        // The whole list, so one run says everything.
        assert_eq!(not_carried.len(), 2, "{not_carried:#?}");
        assert!(not_carried[0].starts_with("spec.chartRef (OCIRepository apps/web-chart: "));
        assert!(not_carried[1].starts_with("spec.postRenderers ("));

        let m = convert(
            &flux,
            Some(&Repository::Url("https://charts.example.com".into())),
        )
        .unwrap();
        assert_eq!(
            m.object["spec"]["chart"],
            json!({"repository": "https://charts.example.com", "name": "web", "version": "1.2.3"})
        );
        assert!(
            m.notes
                .iter()
                .any(|n| n.contains("pinned to version 1.2.3"))
        );

        // A chart in Git: the same refusal, naming the source.
        let git = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {interval: 5m, chart: {spec: {chart: ./charts/web, sourceRef: {kind: GitRepository, name: repo, namespace: flux-system}}}}\n",
        );
        let Err(Error::NoChart { reason, .. }) = convert(&git, None) else {
            panic!("a GitRepository source was carried");
        };
        assert!(
            reason.contains("GitRepository flux-system/repo"),
            "{reason}"
        );
        let m = convert(&git, Some(&Repository::Url("https://c.example".into()))).unwrap();
        assert_eq!(m.object["spec"]["chart"]["name"], "web");
    }

    #[test]
    fn an_oci_helm_repository_gives_an_oci_reference_and_its_secret() {
        let flux = yaml(
            "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {interval: 5m, chart: {spec: {chart: web, version: 1.x, sourceRef: {kind: HelmRepository, name: ghcr, namespace: flux-system}}}}\n",
        );
        let repo = Repository::HelmRepository(yaml(
            "apiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata: {name: ghcr, namespace: flux-system}\nspec: {type: oci, url: 'oci://ghcr.io/acme/charts', secretRef: {name: ghcr-auth}, certSecretRef: {name: tls}, provider: generic}\n",
        ));
        let m = convert(&flux, Some(&repo)).unwrap();
        assert_eq!(
            m.object["spec"]["chart"],
            json!({"repository": "oci://ghcr.io/acme/charts", "name": "web", "version": "1.x", "secretRef": {"name": "ghcr-auth"}})
        );
        // Read as wheelhouse reads OCI registries: nothing to say about the URL.
        assert!(!m.notes.iter().any(|n| n.contains("OCI registry")));
        let secret = m
            .notes
            .iter()
            .find(|n| n.starts_with("chart.secretRef ghcr-auth"))
            .unwrap();
        assert!(
            secret.contains("check that the Secret suits wheelhouse"),
            "{secret}"
        );
        assert!(secret.contains("copy it there"), "{secret}");
        assert_eq!(
            m.not_carried,
            [
                "HelmRepository flux-system/ghcr spec.certSecretRef (wheelhouse reads a CA only as ca.crt in chart.secretRef, and no client certificate)"
            ]
        );
    }

    #[test]
    fn a_key_wheelhouse_does_not_know_fails_the_read_back() {
        let m = convert(&yaml(FULL), Some(&http_repo("apps"))).unwrap();
        let mut wrong = m.object.clone();
        wrong["spec"]["install"]["timeout"] = json!("5m");
        let Err(Error::Invalid(message)) = read_back(&wrong, &m.helm) else {
            panic!("an unknown key passed");
        };
        assert_eq!(message, "wheelhouse has no field spec.install.timeout");
        let mut elsewhere = m.object.clone();
        elsewhere["spec"]["releaseName"] = json!("other");
        assert!(matches!(
            read_back(&elsewhere, &m.helm),
            Err(Error::Invalid(_))
        ));
    }

    #[test]
    fn long_names_are_shortened_as_helm_controller_does() {
        // helm-controller's own cases (internal/release/name_test.go).
        for (name, short) in [
            ("release-name", "release-name"),
            (
                "release-name-with-very-long-name-which-is-longer-than-53-characters",
                "release-name-with-very-long-name-which-i-788ca0d0d7b0",
            ),
            (
                "another-release-name-with-very-long-name-which-is-longer-than-53-characters",
                "another-release-name-with-very-long-name-7e72150d5a36",
            ),
            ("", ""),
        ] {
            assert_eq!(shorten_name(name), short);
        }
    }

    #[test]
    fn a_flux_object_is_required() {
        let not_flux = yaml(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: web}\nspec: {}\n",
        );
        assert!(matches!(convert(&not_flux, None), Err(Error::NotFlux(_))));
    }
}

//! Where the chart comes from: the Flux source (a HelmRepository, read whole) or a chart
//! repository URL given instead, turned into wheelhouse's chart block.

use serde_json::{Map, Value, json};

use super::Error;
use super::mapping::{Mapping, is_set, text};

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

/// The chart block: from the HelmRepository the source names, or the URL given instead.
pub(super) fn chart(
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

//! The chart Flux's sources say a `chartRef` HelmRelease gets: an OCIRepository's chart
//! (its URL's last segment) at the version of the artifact it last fetched, or a
//! HelmChart's chart at its artifact's version. The dashboard shows these for a Flux
//! release on a chartRef before Flux has recorded a revision of it.

use std::sync::Arc;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher::Event;
use kube::{Api, Client, ResourceExt};

use crate::cluster::client::Scope;

/// A source object, as a `chartRef` names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceKey {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// What a source says of its chart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceChart {
    pub chart: Option<String>,
    /// The version of the artifact it last fetched (none fetched yet: `None`).
    pub version: Option<String>,
}

/// The source kinds a `chartRef` may name, as served by source-controller.
pub const KINDS: [&str; 2] = ["OCIRepository", "HelmChart"];

/// The watch of one source kind over `scope`.
pub fn api(client: &Client, scope: &Scope, kind: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "source.toolkit.fluxcd.io",
        "v1",
        kind,
    ));
    match scope {
        Scope::All => Api::all_with(client.clone(), &resource),
        Scope::Namespace(ns) => Api::namespaced_with(client.clone(), ns, &resource),
    }
}

/// What `obj`, a source of `kind`, says of its chart.
pub fn chart_of(kind: &str, obj: &DynamicObject) -> SourceChart {
    let revision = obj.data["status"]["artifact"]["revision"]
        .as_str()
        .filter(|r| !r.is_empty());
    match kind {
        "OCIRepository" => SourceChart {
            chart: obj.data["spec"]["url"]
                .as_str()
                .and_then(|url| url.trim_end_matches('/').rsplit('/').next())
                .filter(|c| !c.is_empty() && !c.contains(':'))
                .map(str::to_owned),
            // `<tag>@sha256:<digest>`; a digest alone when the tag is not known.
            version: revision
                .and_then(|r| r.split_once('@').map_or(Some(r), |(tag, _)| Some(tag)))
                .filter(|v| !v.starts_with("sha256:"))
                .map(str::to_owned),
        },
        // A chart's name, or its path in a Git repository (its last segment names it).
        _ => SourceChart {
            chart: obj.data["spec"]["chart"]
                .as_str()
                .and_then(|c| c.trim_end_matches('/').rsplit('/').next())
                .filter(|c| !c.is_empty() && *c != ".")
                .map(str::to_owned),
            version: revision.map(str::to_owned),
        },
    }
}

/// The sources seen, per kind, folded from their watch events.
#[derive(Default)]
pub(super) struct Sources {
    relisting: std::collections::HashMap<String, Vec<(SourceKey, SourceChart)>>,
}

impl Sources {
    /// Takes one event of the watch of `kind`; returns whether `map` changed.
    pub(super) fn event(
        &mut self,
        kind: &str,
        event: Event<DynamicObject>,
        map: &mut imbl::OrdMap<SourceKey, Arc<SourceChart>>,
    ) -> bool {
        let key = |o: &DynamicObject| SourceKey {
            kind: kind.to_owned(),
            namespace: o.namespace().unwrap_or_default(),
            name: o.name_any(),
        };
        match event {
            Event::Init => {
                self.relisting.insert(kind.to_owned(), Vec::new());
                false
            }
            Event::InitApply(o) => {
                self.relisting
                    .entry(kind.to_owned())
                    .or_default()
                    .push((key(&o), chart_of(kind, &o)));
                false
            }
            Event::InitDone => {
                let fresh = self.relisting.remove(kind).unwrap_or_default();
                let mut fresh: imbl::OrdMap<_, _> = fresh
                    .into_iter()
                    .map(|(k, chart)| (k, Arc::new(chart)))
                    .collect();
                for (k, chart) in map.iter().filter(|(k, _)| k.kind != kind) {
                    fresh.insert(k.clone(), chart.clone());
                }
                *map = fresh;
                true
            }
            Event::Apply(o) => {
                let chart = Arc::new(chart_of(kind, &o));
                map.insert(key(&o), chart.clone()) != Some(chart)
            }
            Event::Delete(o) => map.remove(&key(&o)).is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: serde_json::Value) -> DynamicObject {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn an_oci_repository_names_its_chart_by_url_and_its_version_by_tag() {
        let repo = |url: &str, revision: Option<&str>| {
            chart_of(
                "OCIRepository",
                &object(serde_json::json!({
                    "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "OCIRepository",
                    "metadata": {"name": "web", "namespace": "apps"},
                    "spec": {"url": url},
                    "status": revision.map(|r| serde_json::json!({"artifact": {"revision": r}})),
                })),
            )
        };
        assert_eq!(
            repo(
                "oci://ghcr.io/org/charts/webapp",
                Some("1.2.3@sha256:4c9e5dddd402aa")
            ),
            SourceChart {
                chart: Some("webapp".into()),
                version: Some("1.2.3".into())
            }
        );
        // Not fetched yet: the chart only; a digest-only revision is no version.
        assert_eq!(repo("oci://ghcr.io/org/charts/webapp", None).version, None);
        assert_eq!(
            repo("oci://ghcr.io/webapp", Some("sha256:4c9e5dddd402aa")).version,
            None
        );
    }

    #[test]
    fn a_helm_chart_names_its_chart_and_artifact_version() {
        let chart = chart_of(
            "HelmChart",
            &object(serde_json::json!({
                "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "HelmChart",
                "metadata": {"name": "apps-web", "namespace": "flux-system"},
                "spec": {"chart": "./charts/webapp/", "version": ">=1.0.0"},
                "status": {"artifact": {"revision": "1.4.0"}},
            })),
        );
        assert_eq!(
            chart,
            SourceChart {
                chart: Some("webapp".into()),
                version: Some("1.4.0".into())
            }
        );
    }
}

//! Helm release records as the helm CLI leaves them, small (one Deployment, a chart
//! without templates): for benchmarks that need thousands of stored revisions.

use k8s_openapi::jiff::Timestamp;
use wheelhouse::helm::release::{Info, Release, Status};

/// Revision `version` of `name` in `ns`: chart webapp 1.`version`.0, one Deployment.
pub fn release(ns: &str, name: &str, version: i32, status: Status) -> Release {
    let manifest = format!(
        "---\n# Source: webapp/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\n\
         metadata:\n  name: {name}\nspec:\n  replicas: 2\n  template:\n    spec:\n      containers:\n\
               - name: app\n        image: registry.example/app:1.{version}.0\n"
    );
    let chart: wheelhouse::helm::chart::Chart = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "webapp", "version": format!("1.{version}.0"), "appVersion": "1.0", "apiVersion": "v2"},
        "templates": [], "values": {"replicas": 2}, "schema": null, "lock": null, "files": [],
    }))
    .expect("a chart");
    revision(ns, name, version, status, chart, manifest)
}

/// Revision `version` of `name` in `ns` of `chart`, deploying `manifest`, as the helm CLI
/// describes an install (version 1) or an upgrade, deployed now.
pub fn revision(
    ns: &str,
    name: &str,
    version: i32,
    status: Status,
    chart: wheelhouse::helm::chart::Chart,
    manifest: String,
) -> Release {
    Release {
        name: name.into(),
        namespace: ns.into(),
        version,
        info: Some(Info {
            status,
            description: if version == 1 {
                "Install complete"
            } else {
                "Upgrade complete"
            }
            .into(),
            last_deployed: Some(Timestamp::now()),
            ..Info::default()
        }),
        chart: Some(chart),
        manifest,
        ..Release::default()
    }
}

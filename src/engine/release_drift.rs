//! How a release's live objects differ from its newest revision, as the engine applies
//! that revision: shared by the worker (which reports or corrects it) and the dashboard
//! (which shows it as a diff).

use super::run::{Acting, Context};
use crate::api::{HelmRelease, IgnoreRule};
use crate::helm::apply::Owner;
use crate::helm::apply::drift_detection::{Ignore, ObjectDrift};
use crate::helm::release::{Elsewhere, Release, Storage};
use crate::helm::values::Masker;

/// Who last changed `object` when that was not wheelhouse (its apply as `helm`, its
/// config tracking) nor the controllers' bookkeeping (status, the Deployment
/// controller's revision annotation); none when it was.
///
/// managedFields times have one-second resolution: a change by someone else in the same
/// second as our last apply still counts. A write through the scale subresource
/// (`kubectl scale`) is recorded without a time, so it cannot be ordered against ours:
/// while such an entry stands, a change counts as someone else's (at worst a drift check
/// that finds nothing).
pub(crate) fn writer_not_ours(
    object: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<&str> {
    let ours = |m: &str| {
        m == crate::helm::apply::RELEASE_FIELD_MANAGER
            || m == crate::tracking::FIELD_MANAGER
            || m == "kube-controller-manager"
    };
    let entries = object
        .managed_fields
        .iter()
        .flatten()
        .filter(|m| m.subresource.as_deref() != Some("status"));
    let (mut latest_ours, mut theirs) = (None, None);
    for entry in entries {
        let Some(manager) = entry.manager.as_deref() else {
            continue;
        };
        if ours(manager) {
            latest_ours = latest_ours.max(entry.time.as_ref());
        } else if theirs.is_none_or(|(_, t): (&str, Option<_>)| {
            t.is_some() && (entry.time.is_none() || entry.time.as_ref() > t)
        }) {
            theirs = Some((manager, entry.time.as_ref()));
        }
    }
    let (writer, time) = theirs?;
    match (time, latest_ours) {
        (Some(t), Some(ours)) if ours > t => None,
        _ => Some(writer),
    }
}

/// The stored manifest with config tracking's hashes, as the engine applied it, so a
/// hash the engine added is not taken for drift.
pub(crate) async fn applied_manifest(
    acting: &Acting,
    key: &crate::tracking::HashKey,
    hr: &HelmRelease,
    latest: &Release,
) -> crate::engine::Result<String> {
    if !hr.spec.config_tracking.clone().unwrap_or_default().enabled {
        return Ok(latest.manifest.clone());
    }
    let prepared = crate::tracking::prepare_manifest(
        &acting.client,
        &latest.manifest,
        &hr.target_namespace(),
        key,
        None,
    )
    .await
    .map_err(|e| crate::engine::Error::Tracking(Box::new(e)))?;
    Ok(prepared.applied)
}

/// With config tracking on, the pod template's config hash is the tracker's to change
/// (it rolls the pods and records the rollout): a drift check that reads a ConfigMap
/// the tracker has not yet acted on must not take the hash for drift and roll the pods
/// in its place.
fn tracking_fields(hr: &HelmRelease) -> Vec<Ignore> {
    if !hr.spec.config_tracking.clone().unwrap_or_default().enabled {
        return Vec::new();
    }
    let annotation = crate::tracking::CONFIG_HASH_ANNOTATION.replace('/', "~1");
    crate::tracking::WorkloadKind::ALL
        .iter()
        .map(|kind| Ignore {
            paths: vec![format!(
                "{}/metadata/annotations/{annotation}",
                kind.template_pointer()
            )],
            kind: Some(kind.to_string()),
            name: None,
            namespace: None,
        })
        .collect()
}

/// The objects of `latest` that differ from what is live, `rules` aside.
pub(crate) async fn compare(
    ctx: &Context,
    acting: &Acting,
    hr: &HelmRelease,
    latest: &Release,
    rules: &[IgnoreRule],
    elsewhere: &[Elsewhere],
) -> crate::engine::Result<Vec<ObjectDrift>> {
    let manifest = applied_manifest(acting, &ctx.hash_keys.get().await, hr, latest).await?;
    let unavailable = ctx.discover_for(acting).await?.unavailable;
    let (release_name, namespace) = (hr.release_name(), hr.target_namespace());
    let owner = Owner::new(&release_name, &namespace)
        .previous(Some(&latest.manifest))
        .others(elsewhere)
        .unavailable(&unavailable);
    let ignore: Vec<Ignore> = rules
        .iter()
        .map(|r| Ignore {
            paths: r.paths.clone(),
            kind: r.target.as_ref().and_then(|t| t.kind.clone()),
            name: r.target.as_ref().and_then(|t| t.name.clone()),
            namespace: r.target.as_ref().and_then(|t| t.namespace.clone()),
        })
        .chain(tracking_fields(hr))
        .collect();
    // Compared by dry-run apply as the release's identity (nothing is written).
    Ok(acting.applier.drift(&manifest, &owner, &ignore).await?)
}

/// What drifted, for the dashboard: each drifted object live and as the revision would
/// make it. No `Debug`: objects may be Secrets, which `masker` knows.
pub struct DriftView {
    pub revision: i32,
    pub objects: Vec<ObjectDrift>,
    pub masker: Masker,
}

/// Compares `hr`'s release with its newest revision now.
pub async fn view(ctx: &Context, hr: &HelmRelease) -> Result<DriftView, String> {
    let acting = ctx.acting_for(hr).await.map_err(|e| e.to_string())?;
    let storage = Storage::new(acting.client.clone(), &hr.storage_namespace());
    let history = storage
        .history(&hr.release_name())
        .await
        .map_err(|e| format!("cannot read Helm's storage: {e}"))?;
    let latest = history
        .last()
        .ok_or_else(|| "the release has no revision yet".to_owned())?;
    let rules = hr
        .spec
        .drift_detection
        .as_ref()
        .map(|d| d.ignore.clone())
        .unwrap_or_default();
    // Objects another record of this (name, namespace) deploys are never ours to show.
    let (records_client, records) = ctx.records_of(&acting);
    let elsewhere = crate::helm::release::stored_elsewhere(
        records_client,
        records,
        &hr.storage_namespace(),
        &hr.release_name(),
        &hr.target_namespace(),
        hr.metadata.uid.as_deref(),
        &crate::helm::release::ReadFloor::default(),
    )
    .await
    .map_err(|e| format!("cannot read Helm's storage: {e}"))?
    .map(|scan| scan.found)
    .unwrap_or_default();
    let objects = compare(ctx, &acting, hr, latest, &rules, &elsewhere)
        .await
        .map_err(|e| e.to_string())?;
    let mut masker = Masker::default();
    masker.add_manifest_secrets(&latest.manifest);
    Ok(DriftView {
        revision: latest.version,
        objects,
        masker,
    })
}

#[cfg(test)]
mod tests {
    use super::writer_not_ours;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta, Time};

    fn entry(manager: &str, subresource: Option<&str>, second: Option<u32>) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Update".into()),
            subresource: subresource.map(Into::into),
            time: second.map(|s| {
                Time(
                    format!("2026-11-24T10:00:{s:02}Z")
                        .parse::<k8s_openapi::jiff::Timestamp>()
                        .unwrap(),
                )
            }),
            ..Default::default()
        }
    }

    fn meta(entries: Vec<ManagedFieldsEntry>) -> ObjectMeta {
        ObjectMeta {
            managed_fields: Some(entries),
            ..Default::default()
        }
    }

    #[test]
    fn the_last_writer_decides_and_a_tie_is_theirs() {
        let applied = entry("helm", None, Some(10));
        let status = entry("kube-controller-manager", Some("status"), Some(30));
        assert_eq!(
            writer_not_ours(&meta(vec![applied.clone(), status.clone()])),
            None
        );
        let edited = entry("kubectl-edit", None, Some(20));
        assert_eq!(
            writer_not_ours(&meta(vec![applied.clone(), edited.clone(), status])),
            Some("kubectl-edit")
        );
        // Our apply after their edit: ours is the last word.
        let reapplied = entry("helm", None, Some(25));
        assert_eq!(
            writer_not_ours(&meta(vec![reapplied, edited.clone()])),
            None
        );
        // The same second: theirs may have come after.
        let same = entry("helm", None, Some(20));
        assert_eq!(
            writer_not_ours(&meta(vec![same, edited])),
            Some("kubectl-edit")
        );
    }

    /// `kubectl scale` writes through the scale subresource, which the API server records
    /// without a time (seen on Kubernetes 1.36).
    #[test]
    fn a_scale_without_a_time_is_theirs() {
        let scaled = entry("kubectl", Some("scale"), None);
        let applied = entry("helm", None, Some(10));
        let tracked = entry("wheelhouse", None, Some(11));
        assert_eq!(
            writer_not_ours(&meta(vec![applied, tracked, scaled.clone()])),
            Some("kubectl")
        );
        // It is named even beside an older timed edit.
        let edited = entry("kubectl-edit", None, Some(5));
        assert_eq!(
            writer_not_ours(&meta(vec![edited, scaled])),
            Some("kubectl")
        );
    }

    #[test]
    fn with_tracking_on_the_config_hash_is_not_drift_and_nothing_else_is_hidden() {
        let hr = |tracking: &str| -> crate::api::HelmRelease {
            crate::text::yaml::from_str(&format!(
                "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: web, namespace: apps}}\nspec: {{chart: {{path: ./c}}{tracking}}}"
            ))
            .unwrap()
        };
        assert!(super::tracking_fields(&hr(", configTracking: {enabled: false}")).is_empty());
        let rules = super::tracking_fields(&hr(""));
        let paths = |kind: &str| -> Vec<&str> {
            rules
                .iter()
                .filter(|r| r.kind.as_deref() == Some(kind))
                .flat_map(|r| r.paths.iter().map(String::as_str))
                .collect()
        };
        let annotations =
            serde_json::json!({"wheelhouse.dev/config-hash": "sha256:1", "team": "a"});
        let deployment =
            serde_json::json!({"spec": {"template": {"metadata": {"annotations": annotations}}}});
        let cron = serde_json::json!({"spec": {"jobTemplate": {"spec": {"template": {"metadata": {"annotations": annotations}}}}}});
        let left = serde_json::json!({"team": "a"});
        let seen =
            crate::helm::apply::drift_detection::comparable(&deployment, &paths("Deployment"));
        assert_eq!(seen["spec"]["template"]["metadata"]["annotations"], left);
        let seen = crate::helm::apply::drift_detection::comparable(&cron, &paths("CronJob"));
        assert_eq!(
            seen["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["annotations"],
            left
        );
    }
}

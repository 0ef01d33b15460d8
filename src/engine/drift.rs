//! How a release's live objects differ from its newest revision, as the engine applies
//! that revision: shared by the worker (which reports or corrects it) and the dashboard
//! (which shows it as a diff).

use super::run::Context;
use crate::api::{HelmRelease, IgnoreRule};
use crate::apply::Owner;
use crate::apply::drift::{Ignore, ObjectDrift};
use crate::release::{Elsewhere, Release, Storage};
use crate::values::Masker;

/// The stored manifest with config tracking's hashes, as the engine applied it, so a
/// hash the engine added is not taken for drift.
pub(crate) async fn applied_manifest(
    ctx: &Context,
    hr: &HelmRelease,
    latest: &Release,
) -> crate::Result<String> {
    if !hr.spec.config_tracking.clone().unwrap_or_default().enabled {
        return Ok(latest.manifest.clone());
    }
    let prepared =
        crate::tracking::prepare_manifest(&ctx.client, &latest.manifest, &hr.target_namespace())
            .await
            .map_err(|e| crate::Error::Tracking(Box::new(e)))?;
    Ok(prepared.applied)
}

/// The objects of `latest` that differ from what is live, `rules` aside.
pub(crate) async fn compare(
    ctx: &Context,
    hr: &HelmRelease,
    latest: &Release,
    rules: &[IgnoreRule],
    elsewhere: &[Elsewhere],
) -> crate::Result<Vec<ObjectDrift>> {
    let manifest = applied_manifest(ctx, hr, latest).await?;
    let unavailable = ctx.unavailable_groups().await?;
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
        .collect();
    Ok(ctx.applier.drift(&manifest, &owner, &ignore).await?)
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
    let storage = Storage::new(ctx.client.clone(), &hr.storage_namespace());
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
    let elsewhere = crate::release::stored_elsewhere(
        &ctx.client,
        &hr.storage_namespace(),
        &hr.release_name(),
        &hr.target_namespace(),
        hr.metadata.uid.as_deref(),
    )
    .await
    .map_err(|e| format!("cannot read Helm's storage: {e}"))?
    .map(|scan| scan.found)
    .unwrap_or_default();
    let objects = compare(ctx, hr, latest, &rules, &elsewhere)
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

//! What applying a HelmRelease's spec would write, without writing anything: its chart
//! resolved and its values composed as a reconcile does, rendered by the engine's own
//! renderer against the release's newest stored revision. The dashboard shows it as a
//! diff before a write that changes the desired state (a values edit, the resume of a
//! pinned release).

use super::run::{Context, prepare, render};
use crate::api::HelmRelease;
use crate::helm::release::{Release, Storage};
use crate::helm::values::Masker;

/// The release as stored now and as the spec would make it. No `Debug`: values and
/// manifest may hold secrets, which `masker` knows.
pub struct Preview {
    /// The newest stored revision (none before the first install).
    pub current: Option<Release>,
    /// The values the render used (valuesFrom merged with inline values).
    pub values: serde_json::Map<String, serde_json::Value>,
    pub manifest: String,
    /// Every secret string of the values' sources and of the rendered Secrets, to mask
    /// wherever it shows up (a ConfigMap that repeats a password, say).
    pub masker: Masker,
}

/// Prepares and renders `hr` as its next reconcile would; an error says why it cannot be.
pub async fn preview(ctx: &Context, hr: &HelmRelease) -> Result<Preview, String> {
    // As the release's identity, as its reconcile would: a preview opened by an
    // administrator must not render `lookup` with the administrator's rights.
    let acting = ctx.acting_for(hr).await.map_err(|e| e.to_string())?;
    let storage = Storage::new(acting.client.clone(), &hr.storage_namespace());
    let release_name = hr.release_name();
    let history = storage
        .history(&release_name)
        .await
        .map_err(|e| format!("cannot read Helm's storage: {e}"))?;
    // An operator waits on it.
    let urgent = crate::cluster::slots::Priority::Urgent;
    let prepared = prepare(ctx, &acting, hr, urgent)
        .await
        .map_err(|e| e.to_string())?;
    let current = history.last().cloned();
    let rendered = render(
        ctx,
        &acting,
        urgent,
        &release_name,
        &hr.target_namespace(),
        &prepared,
        current.as_ref(),
        crate::helm::release::values_kept_from(&history).filter(|_| hr.preserves_values()),
    )
    .await
    .map_err(|e| e.to_string())?;
    // As the revision would store it: with config tracking's hashes in the pod templates.
    let manifest = if hr.spec.config_tracking.clone().unwrap_or_default().enabled {
        crate::tracking::prepare_manifest(
            &acting.client,
            &rendered.manifest,
            &hr.target_namespace(),
            &ctx.hash_keys.get().await,
            current.as_ref().map(|c| c.manifest.as_str()),
        )
        .await
        .map_err(|e| e.to_string())?
        .stored
    } else {
        rendered.manifest
    };
    let mut masker = prepared.values.secrets.clone();
    masker.add_manifest_secrets(&manifest);
    if let Some(c) = &current {
        masker.add_manifest_secrets(&c.manifest);
    }
    Ok(Preview {
        current,
        values: prepared.values.values,
        manifest,
        masker,
    })
}

//! The changes view's lines: a revision against the one before, a pending spec against
//! the deployed revision (rendered by the engine), masked.

use std::time::Duration;

use kube::{Api, Client};

use crate::api::HelmRelease;
use crate::engine::{EngineHandle, ReleaseKey};
use crate::helm::release::Storage;

use super::limited;

/// How long a render for a preview may take: a chart may first be fetched from its
/// repository.
const RENDER_LIMIT: Duration = Duration::from_secs(60);

/// The lines a changes view shows, and their summary.
pub async fn load_changes(
    client: Client,
    handle: EngineHandle,
    of: crate::frontend::tui::effect::ChangesOf,
) -> Result<(Vec<crate::frontend::tui::diff::DiffLine>, String), String> {
    use crate::frontend::tui::diff::{release_diff, shown_whole};
    use crate::frontend::tui::effect::ChangesOf;
    let stored = |release: &ReleaseKey| Storage::new(client.clone(), &release.namespace);
    let record = |history: &[crate::helm::release::Release], revision: i32| {
        history
            .iter()
            .find(|r| r.version == revision)
            .cloned()
            .ok_or_else(|| format!("revision {revision} is no longer in Helm's storage"))
    };
    match of {
        ChangesOf::Revisions {
            release,
            from,
            to,
            values,
        } => {
            let storage = stored(&release);
            let (history, origins) = futures::join!(
                limited(storage.history(&release.name)),
                super::detail_loader::origins_of(&client, values.as_ref())
            );
            let history = history?;
            let (a, b) = (record(&history, from)?, record(&history, to)?);
            let (a_values, b_values) = (
                serde_json::Value::Object(a.config),
                serde_json::Value::Object(b.config),
            );
            let (lines, summary) = release_diff(
                &origins.mask(&a_values),
                &a.manifest,
                &origins.mask_beside(&b_values, Some(&a_values)),
                &b.manifest,
            );
            Ok((lines, format!("revision {from} → {to}: {summary}")))
        }
        ChangesOf::Revision {
            release,
            revision,
            values,
        } => {
            let storage = stored(&release);
            let (history, origins) = futures::join!(
                limited(storage.history(&release.name)),
                super::detail_loader::origins_of(&client, values.as_ref())
            );
            let r = record(&history?, revision)?;
            let chart = super::detail_loader::chart_text(&r);
            let values = origins.mask(&serde_json::Value::Object(r.config));
            let lines = shown_whole(&values, &r.manifest);
            Ok((lines, format!("revision {revision}: {chart}")))
        }
        ChangesOf::Render { key, values } => {
            let api: Api<HelmRelease> = Api::namespaced(client.clone(), &key.namespace);
            let mut hr = limited(api.get(&key.name)).await?;
            if let Some(values) = values {
                hr.spec.values = Some(values);
            }
            let preview = tokio::time::timeout(RENDER_LIMIT, handle.preview(&hr))
                .await
                .map_err(|_| format!("rendering took over {}s", RENDER_LIMIT.as_secs()))??;
            let (old_values, old_manifest, from) = match &preview.current {
                Some(r) => (
                    serde_json::Value::Object(r.config.clone()),
                    r.manifest.as_str(),
                    format!("revision {}", r.version),
                ),
                None => (serde_json::json!({}), "", "nothing installed".to_owned()),
            };
            let (lines, summary) = release_diff(
                &old_values,
                old_manifest,
                &serde_json::Value::Object(preview.values.clone()),
                &preview.manifest,
            );
            // Secret strings can show up outside Secrets (a ConfigMap repeating a
            // password from valuesFrom): masked wherever they are.
            let lines = lines
                .into_iter()
                .map(|l| l.map_text(|t| preview.masker.mask(t)))
                .collect();
            Ok((
                lines,
                format!("{from} → the spec, as the engine renders it: {summary}"),
            ))
        }
        ChangesOf::Drift { key } => {
            let api: Api<HelmRelease> = Api::namespaced(client.clone(), &key.namespace);
            let hr = limited(api.get(&key.name)).await?;
            let view = tokio::time::timeout(RENDER_LIMIT, handle.drift(&hr))
                .await
                .map_err(|_| format!("comparing took over {}s", RENDER_LIMIT.as_secs()))??;
            if view.objects.is_empty() {
                return Ok((
                    Vec::new(),
                    format!(
                        "no drift: the live objects are as revision {} makes them",
                        view.revision
                    ),
                ));
            }
            // Live on the left, the revision's on the right: the diff reads as what a
            // correction would change.
            let document =
                |v: &serde_json::Value| format!("---\n{}", crate::text::yaml::to_string(v));
            let live: String = view
                .objects
                .iter()
                .filter_map(|d| d.live.as_ref().map(document))
                .collect();
            let desired: String = view.objects.iter().map(|d| document(&d.desired)).collect();
            let (lines, counts) = crate::frontend::tui::diff::manifest_diff(&live, &desired);
            let lines = lines
                .into_iter()
                .map(|l| l.map_text(|t| view.masker.mask(t)))
                .collect();
            Ok((
                lines,
                format!(
                    "live → revision {}: {} object(s) drifted ({counts})",
                    view.revision,
                    view.objects.len()
                ),
            ))
        }
    }
}

//! The desired state of a release: its chart resolved and loaded, its values composed, and
//! a digest of both, so a trigger that leaves the digest unchanged never cancels a wait.

use std::sync::Arc;

use super::{Acting, Context};
use crate::api::HelmRelease;
use crate::engine::plan::Desired;
use crate::engine::status::reason;
use crate::helm::chart::Chart;
use crate::helm::release::Release;
use crate::helm::render::{Kept, Previous, RenderRequest, Rendered};
use crate::helm::source::{RepoAuth, ResolvedChart};
use crate::helm::values::ComposedValues;

/// Everything an install or upgrade needs, resolved before the action starts.
pub struct Prepared {
    pub resolved: ResolvedChart,
    pub chart: Arc<Chart>,
    pub values: ComposedValues,
    /// The spec's post-renderers, applied to the render (none: the chart as rendered),
    /// and what they see of it.
    pub post_renderers: Vec<crate::api::PostRenderer>,
    pub post_render_strategy: crate::api::PostRenderStrategy,
    /// `spec.commonMetadata`, put on every rendered object.
    pub common_metadata: Option<crate::api::CommonMetadata>,
    /// `disableSchemaValidation` of the install and of the upgrade: which applies is
    /// the action the render turns out to be.
    pub skip_schema_validation: SkipSchemaValidation,
    /// The chart's default values made of `chart.valuesFiles` (none: its own).
    pub chart_values: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `install.disableSchemaValidation` and `upgrade.disableSchemaValidation`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SkipSchemaValidation {
    pub install: bool,
    pub upgrade: bool,
}

impl SkipSchemaValidation {
    fn of(hr: &HelmRelease) -> Self {
        Self {
            install: hr
                .spec
                .install
                .as_ref()
                .is_some_and(|i| i.disable_schema_validation),
            upgrade: hr
                .spec
                .upgrade
                .as_ref()
                .is_some_and(|u| u.disable_schema_validation),
        }
    }

    /// For the render after `previous`: an upgrade when there is a revision that is not
    /// uninstalled (as `helm upgrade --install` decides).
    fn after(self, previous: Option<&Release>) -> bool {
        let upgrade = previous.is_some_and(|p| {
            p.info.as_ref().map(|i| i.status) != Some(crate::helm::release::Status::Uninstalled)
        });
        if upgrade { self.upgrade } else { self.install }
    }
}

impl Prepared {
    /// The desired state this stands for: chart (name, version, content digest) and
    /// merged values. Two preparations with the same digest would apply the same thing,
    /// so a trigger that leaves it unchanged never cancels a wait.
    pub fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for part in [
            self.resolved.name.as_str(),
            self.resolved.version.as_str(),
            self.resolved.digest.as_str(),
            self.values.digest.as_str(),
        ]
        .into_iter()
        // Only where there is one, so the digests of other charts stay as they were.
        .chain(self.resolved.commit())
        .chain(self.resolved.manifest_digest())
        .chain(self.post_renderers_digest().as_deref())
        .chain(self.common_metadata_digest().as_deref())
        .chain(self.values_files_digest().as_deref())
        {
            h.update(part.as_bytes());
            h.update([0]);
        }
        format!("sha256:{}", hex::encode(h.finalize()))
    }

    /// What the planner compares the newest revision with.
    pub fn desired(&self) -> Desired {
        Desired {
            chart_name: self.resolved.name.clone(),
            chart_version: self.resolved.version.clone(),
            config_digest: self.values.digest.clone(),
            source_revision: self.resolved.revision.clone(),
            post_renderers: self.post_renderers_digest(),
            common_metadata: self.common_metadata_digest(),
            values_files: self.values_files_digest(),
        }
    }

    /// The digest of the chart values `chart.valuesFiles` made, when they replace the
    /// chart's own ([`crate::helm::release::VALUES_FILES_LABEL`]'s value).
    pub fn values_files_digest(&self) -> Option<String> {
        let digest = crate::helm::values::digest(self.chart_values.as_ref()?);
        let hex = digest.trim_start_matches("sha256:");
        Some(hex[..crate::helm::release::SOURCE_DIGEST_KEPT].to_owned())
    }

    /// The start of the spec's values digest, as a revision made with
    /// `upgrade.preserveValues` keeps it ([`crate::helm::release::SPEC_VALUES_LABEL`]).
    pub fn spec_values_label(&self) -> String {
        spec_values_label(&self.values.digest)
    }

    /// The post-renderers' digest, where one would change the render.
    pub fn post_renderers_digest(&self) -> Option<String> {
        crate::api::post_renderers_digest(&self.post_renderers, self.post_render_strategy)
    }

    /// The digest of the commonMetadata, when there is one that says anything.
    pub fn common_metadata_digest(&self) -> Option<String> {
        crate::engine::actions::common_metadata::digest(self.common_metadata.as_ref())
    }
}

/// A newer desired state, prepared (resolved and rendered) while a wait was running.
pub struct Candidate {
    pub prepared: Prepared,
    pub rendered: Rendered,
    pub generation: Option<i64>,
    /// When the event that led to it arrived.
    pub triggered_at: Option<tokio::time::Instant>,
    /// When it was prepared, and rendered.
    pub prepared_at: std::time::Instant,
    pub rendered_at: std::time::Instant,
}

impl Candidate {
    /// Its steps so far, once it supersedes a wait (it has a trigger then).
    pub fn timeline(&self) -> Option<crate::engine::vocabulary::FixTimeline> {
        Some(crate::engine::vocabulary::FixTimeline {
            triggered: self.triggered_at?.into_std(),
            prepared: self.prepared_at,
            rendered: self.rendered_at,
            apply_started: None,
            first_written: None,
        })
    }
}

/// Why a release's desired state could not be prepared, by kind: the caller decides on
/// the kind (the Ready reason Flux gives it, a values source to watch for), and the text
/// is the source error's own.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// The chart could not be resolved, fetched or read (or may not be, as a path under
    /// the lockdown).
    #[error(transparent)]
    Source(#[from] crate::helm::source::Error),
    #[error(transparent)]
    Chart(#[from] crate::helm::chart::Error),
    /// The task loading the chart ended without an answer.
    #[error(transparent)]
    Load(#[from] tokio::task::JoinError),
    /// The values could not be composed (a valuesFrom source missing, say).
    #[error(transparent)]
    Values(#[from] crate::helm::values::Error),
}

impl PrepareError {
    /// The Ready reason, as Flux's: the artifact failed, or the values did.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Values(_) => reason::INIT_FAILED,
            Self::Source(_) | Self::Chart(_) | Self::Load(_) => reason::ARTIFACT_FAILED,
        }
    }
}

/// Why a newer desired state could not be made ready to apply during a wait.
#[derive(Debug, thiserror::Error)]
pub enum CandidateError {
    #[error(transparent)]
    Prepare(#[from] PrepareError),
    /// The render failed: the chart's error, or the cluster's (`Error::cluster_cause`).
    #[error(transparent)]
    Render(#[from] crate::engine::Error),
}

/// The first 40 hex digits of a values digest (a label value holds at most 63).
pub fn spec_values_label(digest: &str) -> String {
    let hex = digest.trim_start_matches("sha256:");
    hex[..crate::helm::release::SOURCE_DIGEST_KEPT.min(hex.len())].to_owned()
}

/// Resolves the chart and composes the values.
pub(in crate::engine) async fn prepare(
    ctx: &Context,
    acting: &Acting,
    hr: &HelmRelease,
    priority: crate::cluster::slots::Priority,
) -> Result<Prepared, PrepareError> {
    // Loading charts is bounded like rendering: a thousand releases starting together
    // would otherwise each hold a chart in memory at once.
    let _slot = ctx.work.loads.acquire(priority).await;
    let namespace = hr.object_namespace();
    // The engine's filesystem is not a tenant's: under the lockdown no chart.path is read.
    if let Some(path) = &hr.spec.chart.path
        && ctx.policy().locked_down()
    {
        let refused = crate::helm::source::Error::PathRefused {
            path: path.clone(),
            rule: "the cluster is locked down for tenants (--default-service-account), and a chart.path reads the engine's filesystem; use chart.repository (https:// or oci://) or chart.git".into(),
        };
        return Err(refused.into());
    }
    let auth = match &hr.spec.chart.secret_ref {
        Some(secret) => RepoAuth::from_secret(&acting.client, &namespace, &secret.name).await?,
        None => RepoAuth::default(),
    };
    // The cluster's outbound policy decides where this release's sources may connect.
    let policy = ctx.policy();
    let policed = policy.polices_egress().then(|| policy.egress_class());
    let resolved = ctx
        .source
        .resolve_for(&hr.spec.chart, &auth, policed)
        .await?;
    let path = resolved.path.clone();
    let spec = hr.spec.chart.clone();
    let known = ctx.work.charts.get(&resolved.digest);
    // A chart.path's files may change between the digest and the load: the load is kept
    // only if they did not (a downloaded or checked out chart never changes in place).
    let stamp = spec.path.is_some().then_some(resolved.stamp);
    // A kept chart without valuesFiles reads nothing: no trip to the blocking pool.
    let (chart, chart_values, loaded) =
        if let Some(chart) = known.clone().filter(|_| spec.values_files.is_empty()) {
            (chart, None, None)
        } else {
            tokio::task::spawn_blocking(move || {
                let (chart, loaded) = match known {
                    Some(chart) => (chart, None),
                    None => {
                        let chart = Arc::new(crate::helm::chart::load(&path)?);
                        let keep = match stamp {
                            None => true,
                            Some(Some(before)) => {
                                before.settled()
                                    && crate::helm::source::local_stamp(&path)
                                        .is_ok_and(|now| now == before)
                            }
                            Some(None) => false,
                        };
                        (chart.clone(), keep.then_some(chart))
                    }
                };
                let chart_values = chart_values(&chart, &path, &spec)?;
                // The chart as Flux's artifact carries it: what is stored with the revision.
                let chart = match &chart_values {
                    Some(values) => {
                        let mut chart = (*chart).clone();
                        chart.values = values.clone();
                        Arc::new(chart)
                    }
                    None => chart,
                };
                Ok::<_, crate::helm::chart::Error>((chart, chart_values, loaded))
            })
            .await??
        };
    if let Some(loaded) = loaded {
        ctx.work.charts.keep(&resolved.digest, loaded);
    }
    let values = crate::helm::values::compose(&acting.client, hr).await?;
    Ok(Prepared {
        resolved,
        chart,
        values,
        post_renderers: hr.spec.post_renderers.clone(),
        post_render_strategy: hr.spec.post_render_strategy,
        common_metadata: hr.spec.common_metadata.clone(),
        skip_schema_validation: SkipSchemaValidation::of(hr),
        chart_values,
    })
}

/// The chart's default values made of `chart.valuesFiles`: files inside the chart at
/// `path`, or for a Git chart, from the root of its checkout (`path` less `git.path`).
fn chart_values(
    chart: &crate::helm::chart::Chart,
    path: &std::path::Path,
    spec: &crate::api::ChartSpec,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>, crate::helm::chart::Error> {
    use crate::helm::chart::values_files::{Origin, default_values};
    if spec.values_files.is_empty() {
        return Ok(None);
    }
    let root = spec.git.as_ref().map(|git| {
        let depth = git
            .path
            .as_deref()
            .map(|p| {
                std::path::Path::new(p)
                    .components()
                    .filter(|c| matches!(c, std::path::Component::Normal(_)))
                    .count()
            })
            .unwrap_or(0);
        path.ancestors().nth(depth).unwrap_or(path).to_path_buf()
    });
    let origin = match &root {
        Some(root) => Origin::Root(root),
        None => Origin::Chart,
    };
    Ok(default_values(
        chart,
        origin,
        &spec.values_files,
        spec.ignore_missing_values_files,
    )?)
}

/// Prepares `hr`'s desired state and renders it as the upgrade after `waiting` (the
/// revision whose wait runs), as the next action would; used while a wait runs, so the
/// wait is only cancelled for something ready to apply.
pub(super) async fn prepare_candidate(
    ctx: &Context,
    hr: Arc<HelmRelease>,
    waiting: &Release,
) -> Result<Candidate, CandidateError> {
    // The newest spec's identity: a changed serviceAccountName applies to the candidate.
    // A newer desired state superseding a wait is a fix someone waits for: urgent.
    let urgent = crate::cluster::slots::Priority::Urgent;
    let acting = ctx
        .acting_for(&hr)
        .await
        .map_err(|e| CandidateError::Render(e.into()))?;
    // With upgrade.preserveValues the values kept come from the history (the revision
    // before the waiting one, usually), read as the upgrade would read it.
    let history = if hr.preserves_values() {
        let storage =
            crate::helm::release::Storage::new(acting.client.clone(), &hr.storage_namespace());
        storage
            .history(&hr.release_name())
            .await
            .map_err(|e| CandidateError::Render(e.into()))?
    } else {
        Vec::new()
    };
    let prepared = prepare(ctx, &acting, &hr, urgent).await?;
    let prepared_at = std::time::Instant::now();
    let rendered = render(
        ctx,
        &acting,
        urgent,
        &hr.release_name(),
        &hr.target_namespace(),
        &prepared,
        Some(waiting),
        crate::helm::release::values_kept_from(&history),
    )
    .await?;
    Ok(Candidate {
        prepared,
        rendered,
        generation: hr.metadata.generation,
        triggered_at: None,
        prepared_at,
        rendered_at: std::time::Instant::now(),
    })
}

/// Renders the chart as `helm install`/`helm upgrade` would after `previous`, the
/// release's newest stored revision (none: a first install); with `kept` (an upgrade
/// with `upgrade.preserveValues`), keeping that revision's values as `--reuse-values`.
#[allow(clippy::too_many_arguments)]
pub async fn render(
    ctx: &Context,
    acting: &Acting,
    priority: crate::cluster::slots::Priority,
    release_name: &str,
    namespace: &str,
    prepared: &Prepared,
    previous: Option<&Release>,
    kept: Option<&Release>,
) -> crate::engine::Result<Rendered> {
    // Rendered as helm renders on an incomplete discovery (without the missing groups);
    // what is missing travels with the render, so nothing is pruned on its account.
    let discovery = ctx.discover_for(acting).await?;
    let unavailable = discovery.unavailable;
    let rendered = ctx
        .renderer
        .render(RenderRequest {
            release_name,
            namespace,
            chart_path: &prepared.resolved.path,
            values: &prepared.values.values,
            previous: previous.map(Previous::of),
            discovery: Some(&discovery.digest),
            as_user: acting.username().as_deref(),
            kubeconfig: acting.remote.as_ref().map(|r| r.kubeconfig.as_path()),
            priority,
            post_renderers: &prepared.post_renderers,
            post_render_strategy: prepared.post_render_strategy,
            skip_schema_validation: prepared.skip_schema_validation.after(previous),
            chart_values: prepared.chart_values.as_ref(),
            kept: kept.filter(|_| previous.is_some()).map(Kept::of),
        })
        .await;
    let mut rendered = match rendered {
        Ok(rendered) => rendered,
        // helm cannot map a kind of a group that is not discovered: say which APIService.
        Err(crate::helm::render::Error::Failed { status, stderr })
            if unavailable
                .iter()
                .any(|g| stderr.contains(g.split('/').next().unwrap_or(g))) =>
        {
            let services: Vec<String> = unavailable
                .iter()
                .map(|g| format!("{g} (APIService {})", crate::helm::render::apiservice_of(g)))
                .collect();
            return Err(crate::helm::render::Error::Failed {
                status,
                stderr: format!(
                    "{stderr}; {}: {} is unavailable",
                    crate::helm::render::NEEDS_UNAVAILABLE_GROUP,
                    services.join(", ")
                ),
            }
            .into());
        }
        Err(e) => return Err(e.into()),
    };
    if !unavailable.is_empty() {
        rendered.unavailable = unavailable;
    }
    Ok(rendered)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chart name, version and content digest, and values digest.
    fn prepared([name, version, chart, values]: [&str; 4]) -> Prepared {
        Prepared {
            resolved: ResolvedChart {
                name: name.into(),
                version: version.into(),
                app_version: None,
                digest: chart.into(),
                path: "/charts/app".into(),
                revision: None,
                stamp: None,
            },
            chart: Arc::default(),
            values: ComposedValues {
                values: serde_json::Map::new(),
                digest: values.into(),
                sources: Vec::new(),
                secrets: Default::default(),
            },
            post_renderers: Vec::new(),
            post_render_strategy: Default::default(),
            common_metadata: None,
            skip_schema_validation: SkipSchemaValidation::default(),
            chart_values: None,
        }
    }

    #[test]
    fn the_digest_changes_with_chart_or_values_only() {
        let parts = ["app", "1.0.0", "sha256:c", "sha256:v"];
        let base = prepared(parts).digest();
        assert!(base.starts_with("sha256:"));
        // Where the chart was cached, or its appVersion, is not the desired state.
        let mut elsewhere = prepared(parts);
        elsewhere.resolved.path = "/other/cache/app".into();
        elsewhere.resolved.app_version = Some("2".into());
        assert_eq!(elsewhere.digest(), base);
        // (what changes, which part, to what)
        let cases = [
            ("chart name", 0, "web"),
            ("chart version", 1, "1.0.1"),
            ("chart content", 2, "sha256:d"),
            ("values", 3, "sha256:w"),
        ];
        for (what, part, value) in cases {
            let mut changed = parts;
            changed[part] = value;
            assert_ne!(prepared(changed).digest(), base, "{what}");
        }
        // Post-renderers that change the render change it; an entry without a
        // kustomize block does not.
        let mut post_rendered = prepared(parts);
        post_rendered.post_renderers = vec![crate::api::PostRenderer::default()];
        assert_eq!(post_rendered.digest(), base);
        post_rendered.post_renderers[0].kustomize = Some(Default::default());
        assert_ne!(post_rendered.digest(), base);
        assert!(post_rendered.desired().post_renderers.is_some());
        // commonMetadata: a change when it says anything, nothing when empty.
        let mut empty = prepared(parts);
        empty.common_metadata = Some(Default::default());
        assert_eq!(empty.digest(), base);
        let mut labelled = prepared(parts);
        labelled.common_metadata = Some(crate::api::CommonMetadata {
            labels: [("team".to_owned(), "web".to_owned())].into(),
            ..Default::default()
        });
        assert_ne!(labelled.digest(), base, "commonMetadata");
        // Chart values made of valuesFiles: a change, even an empty mapping.
        let mut replaced = prepared(parts);
        replaced.chart_values = Some(serde_json::Map::new());
        assert_ne!(replaced.digest(), base, "valuesFiles");
        assert_eq!(
            replaced.desired().values_files.map(|d| d.len()),
            Some(crate::helm::release::SOURCE_DIGEST_KEPT)
        );
        // Parts are separated: moving a character across a boundary is a change.
        let moved = prepared(["ap", "p1.0.0", "sha256:c", "sha256:v"]);
        assert_ne!(moved.digest(), base);
    }
}

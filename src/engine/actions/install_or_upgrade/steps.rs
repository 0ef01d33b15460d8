//! Install and upgrade, the steps before the wait: how this action runs ([`How`]), the
//! chart's CRDs, the render, the pending revision stored after the adoption check, pre
//! hooks, apply and prune. A step that fails before anything is stored ends the action
//! with its outcome; one that fails after records the revision failed.

use super::super::{
    ApplyMethod, CLUSTER_FAILURE_PREFIX, Outcome, common_metadata, new_release, record_failure,
    set_status,
};
use crate::api::{CrdPolicy, ReleaseAction, ServerSideApplyMode};
use crate::engine::run::{Prepared, Run, render};
use crate::engine::status::reason;
use crate::helm::apply::Owner;
use crate::helm::chart;
use crate::helm::release::{Release, Status, hook_event};
use crate::helm::render::Rendered;

/// How recent the adoption check's reads must be for the apply to use them.
const SEEN_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// How this install or upgrade runs, from the spec's `install` or `upgrade` settings.
pub(super) struct How {
    pub(super) action: ReleaseAction,
    pub(super) is_upgrade: bool,
    pub(super) install: crate::api::Install,
    pub(super) upgrade: crate::api::Upgrade,
    pub(super) disable_hooks: bool,
    pub(super) disable_wait: bool,
    pub(super) crds: CrdPolicy,
    pub(super) take_ownership: bool,
    pub(super) force_conflicts: bool,
    pub(super) timeout: std::time::Duration,
    /// The pending status, description and failure reason of the revision.
    pub(super) pending: Status,
    pub(super) underway: &'static str,
    pub(super) failed_reason: &'static str,
    /// How messages name the action.
    pub(super) verb: &'static str,
}

impl How {
    pub(super) fn of(hr: &crate::api::HelmRelease, previous: Option<&Release>) -> Self {
        let is_upgrade = previous.is_some_and(|p| {
            p.info
                .as_ref()
                .is_some_and(|i| i.status != Status::Uninstalled)
        });
        let install = hr.spec.install.clone().unwrap_or_default();
        let upgrade = hr.spec.upgrade.clone().unwrap_or_default();
        let timeout = action_timeout(hr, is_upgrade);
        if is_upgrade {
            Self {
                action: ReleaseAction::Upgrade,
                is_upgrade,
                disable_hooks: upgrade.disable_hooks,
                disable_wait: upgrade.disable_wait,
                crds: upgrade.crds,
                take_ownership: upgrade.take_ownership,
                // `force` is Flux's replacement strategy: under server-side apply, forced
                // conflicts (lifecycle.rs, `Upgrade::force`).
                force_conflicts: upgrade.force_conflicts || upgrade.force,
                timeout,
                pending: Status::PendingUpgrade,
                underway: "Preparing upgrade",
                failed_reason: reason::UPGRADE_FAILED,
                verb: "Helm upgrade",
                install,
                upgrade,
            }
        } else {
            Self {
                action: ReleaseAction::Install,
                is_upgrade,
                disable_hooks: install.disable_hooks,
                disable_wait: install.disable_wait,
                crds: install.crds,
                take_ownership: install.take_ownership,
                force_conflicts: install.force_conflicts,
                timeout,
                pending: Status::PendingInstall,
                underway: "Initial install underway",
                failed_reason: reason::INSTALL_FAILED,
                verb: "Helm install",
                install,
                upgrade,
            }
        }
    }

    /// A failure of this action before anything was stored.
    pub(super) fn failed(&self, message: impl std::fmt::Display) -> Outcome {
        Outcome::Failed {
            reason: self.failed_reason,
            message: format!("{} failed: {message}", self.verb),
        }
    }

    /// As Helm 4: the install as `install.serverSideApply` says, the upgrade as the newest
    /// revision was applied unless `upgrade.serverSideApply` says otherwise.
    pub(super) fn apply_method(
        &self,
        run: &Run<'_>,
        history: &[Release],
    ) -> Result<ApplyMethod, Outcome> {
        let (server_side, asked) = if self.is_upgrade {
            let newest = history.iter().max_by_key(|r| r.version);
            let mode = self.upgrade.server_side_apply;
            (
                mode.server_side(newest.and_then(ApplyMethod::followed)),
                mode == ServerSideApplyMode::Disabled,
            )
        } else {
            let on = self.install.server_side_apply.unwrap_or(true);
            (on, !on)
        };
        ApplyMethod::choose(run, server_side, asked).map_err(|why| self.failed(why))
    }

    /// Whose objects the apply may write, and how.
    pub(super) fn owner<'o>(
        &self,
        (release_name, ns): (&'o str, &'o str),
        previous: Option<&'o Release>,
        method: &'o ApplyMethod,
        elsewhere: &'o [crate::helm::release::Elsewhere],
        rendered: &'o Rendered,
    ) -> Owner<'o> {
        let mut owner = Owner::new(release_name, ns)
            .previous(
                previous
                    .filter(|_| self.is_upgrade)
                    .map(|p| p.manifest.as_str()),
            )
            .take_ownership(self.take_ownership)
            .force_conflicts(self.force_conflicts)
            .others(elsewhere)
            .unavailable(&rendered.unavailable);
        if let ApplyMethod::ClientSide(patcher) = method {
            // Flux's `force` is Helm's `--force` there: objects replaced.
            owner = owner.client_side(patcher.as_ref(), self.is_upgrade && self.upgrade.force);
        }
        owner
    }
}

/// As Helm: the chart's CRDs (its subcharts' too) go in before the templates are
/// rendered, so `.Capabilities` sees their kinds and objects of them can be applied.
/// Says whether the chart has any (the status is written first when it does).
pub(super) async fn install_crds(
    run: &mut Run<'_>,
    prepared: &Prepared,
    how: &How,
    written: &mut bool,
) -> crate::engine::Result<Result<bool, Outcome>> {
    let (path, values) = (
        prepared.resolved.path.clone(),
        prepared.values.values.clone(),
    );
    let files = tokio::task::spawn_blocking(move || chart::crds_to_install(&path, &values))
        .await
        .map_err(std::io::Error::other)?;
    let docs: Vec<String> = match files {
        Ok(files) => files
            .iter()
            .map(|f| String::from_utf8_lossy(&f.data).into_owned())
            .collect(),
        Err(e) => {
            return Ok(Err(
                how.failed(format_args!("reading the chart's CRDs: {e}"))
            ));
        }
    };
    if how.crds == CrdPolicy::Skip || docs.is_empty() {
        return Ok(Ok(!docs.is_empty()));
    }
    run.write_status().await;
    *written = true;
    if !how.is_upgrade && how.install.create_namespace {
        // CRDs are cluster-scoped, but a refusal below should not leave half a setup.
        run.acting
            .applier
            .ensure_namespace(&run.target.namespace)
            .await?;
    }
    if let Err(e) = run.acting.applier.apply_crds(&docs, how.crds).await {
        return Ok(Err(
            how.failed(format_args!("installing the chart's CRDs: {e}"))
        ));
    }
    Ok(Ok(true))
}

/// The chart rendered for this revision, with the status written meanwhile (unless it
/// was already). A template error, `required` or `fail` fails the action, as in Flux;
/// discovery or the API server failing is the cluster's failure instead.
pub(super) async fn render_release(
    run: &Run<'_>,
    prepared: &Prepared,
    previous: Option<&Release>,
    kept: Option<&Release>,
    how: &How,
    written: bool,
) -> Result<Rendered, Outcome> {
    let rendering = render(
        run.ctx,
        &run.acting,
        run.precedence.priority,
        &run.target.release_name,
        &run.target.namespace,
        prepared,
        previous,
        kept,
    );
    match tokio::join!(write_status_unless(run, written), rendering).1 {
        Ok(rendered) => Ok(rendered),
        Err(e) => Err(Outcome::failed_by(
            how.failed_reason,
            format!("{} failed: {}", how.verb, e.describe()),
            &e,
        )),
    }
}

/// `spec.commonMetadata` on the rendered objects, and the manifest's Secrets masked in
/// every message (an error of the apply may quote one of their values).
pub(super) fn finish_render(
    run: &mut Run<'_>,
    prepared: &Prepared,
    mut rendered: Rendered,
    how: &How,
) -> Result<Rendered, Outcome> {
    if let Some(common) = &prepared.common_metadata
        && let Err(e) = common_metadata::apply(&mut rendered, common)
    {
        return Err(how.failed(format_args!(
            "putting spec.commonMetadata on the rendered objects: {e}"
        )));
    }
    run.intent.masker.add_manifest_secrets(&rendered.manifest);
    for hook in &rendered.hooks {
        run.intent.masker.add_manifest_secrets(&hook.manifest);
    }
    Ok(rendered)
}

/// The pending revision as Helm stores it, with the labels that say what it was made
/// from (kept values, source commit or digest, post-renderers, values files, common
/// metadata).
pub(super) fn pending_revision(
    run: &Run<'_>,
    prepared: &Prepared,
    rendered: &mut Rendered,
    version: i32,
    history: &[Release],
    kept: Option<&Release>,
    how: &How,
) -> Release {
    // Kept values: stored as Helm's upgrade stores them (the spec's merged over the kept
    // revision's, and its chart values), with the spec's digest beside them.
    let (chart, config) = match rendered.merged.take() {
        Some(merged) => {
            let mut chart = (*prepared.chart).clone();
            chart.values = merged.chart_values;
            (chart, merged.config)
        }
        None => ((*prepared.chart).clone(), prepared.values.values.clone()),
    };
    let mut rel = new_release(run, version, chart, config, how.pending, how.underway);
    let mut label = |key: &str, value: String| rel.labels.insert(key.into(), value);
    if kept.is_some() {
        label(
            crate::helm::release::SPEC_VALUES_LABEL,
            prepared.spec_values_label(),
        );
    }
    if let Some(commit) = prepared.resolved.commit() {
        label(super::super::SOURCE_COMMIT_LABEL, commit.to_owned());
    }
    if let Some(digest) = prepared.resolved.manifest_digest() {
        label(
            super::super::SOURCE_DIGEST_LABEL,
            digest[..super::super::SOURCE_DIGEST_KEPT].to_owned(),
        );
    }
    if let Some(digest) = prepared.post_renderers_digest() {
        label(super::super::POST_RENDERERS_LABEL, digest);
    }
    if let Some(digest) = prepared.values_files_digest() {
        label(super::super::VALUES_FILES_LABEL, digest);
    }
    if let Some(digest) = prepared.common_metadata_digest() {
        label(
            common_metadata::COMMON_METADATA_LABEL,
            common_metadata::label_value(&digest),
        );
    }
    rel.hooks = rendered.hooks.clone();
    if let Some(first) = history
        .iter()
        .find_map(|r| r.info.as_ref()?.first_deployed)
        .filter(|_| how.is_upgrade)
    {
        rel.info.as_mut().unwrap().first_deployed = Some(first);
    }
    rel
}

/// What the adoption check read, and when: applied on without a second read while fresh.
pub(super) type Seen = (crate::helm::apply::Seen, std::time::Instant);

/// Stores the pending revision, after the checks that must pass before anything is
/// stored, hooked or applied: the objects are no one else's, the record is not too large.
/// Returns the manifest to apply (with config tracking's hashes) and what the adoption
/// check read.
pub(super) async fn store_revision(
    run: &Run<'_>,
    rel: &mut Release,
    rendered: &Rendered,
    owner: &Owner<'_>,
    previous: Option<&Release>,
    how: &How,
) -> crate::engine::Result<Result<(String, Seen), Outcome>> {
    // Config tracking: hash the ConfigMaps/Secrets each workload consumes into its pod
    // template (and gate pods whose config does not exist yet) before the first apply, so
    // pods start once with it instead of restarting to receive it. The revision stores
    // the manifest without the config-pending gate: only a running wheelhouse lifts it,
    // and `helm rollback` by hand must end with schedulable pods.
    let tracked = run
        .hr
        .spec
        .config_tracking
        .clone()
        .unwrap_or_default()
        .enabled;
    let applied = if tracked {
        let key = run.ctx.hash_keys.get().await;
        let prepared = crate::tracking::prepare_manifest(
            &run.acting.client,
            &rendered.manifest,
            &run.target.namespace,
            &key,
            previous.map(|p| p.manifest.as_str()),
        )
        .await
        .map_err(|e| crate::engine::Error::Tracking(Box::new(e)))?;
        rel.manifest = prepared.stored;
        prepared.applied
    } else {
        rel.manifest = rendered.manifest.clone();
        rendered.manifest.clone()
    };
    // As Helm: objects that belong to someone else stop the action before anything is
    // stored, hooked or applied.
    let seen = match run.acting.applier.check_adoption(&applied, owner).await {
        Ok(seen) => (seen, std::time::Instant::now()),
        Err(e) => {
            let e = crate::engine::Error::from(e);
            return Ok(Err(Outcome::failed_by(
                how.failed_reason,
                format!("{} failed: {}", how.verb, e.describe()),
                &e,
            )));
        }
    };
    if let Err(e @ crate::helm::release::Error::TooLarge { .. }) =
        crate::helm::release::check_size(rel)
    {
        return Ok(Err(how.failed(e)));
    }
    // As `helm install --replace`: the uninstalled revision whose name is reused is
    // superseded by the new one.
    if let Some(last) =
        previous.filter(|p| !how.is_upgrade && how.install.replace && is_uninstalled(p))
    {
        let mut last = last.clone();
        if let Some(info) = last.info.as_mut() {
            info.status = Status::Superseded;
            info.description = REPLACED.into();
        }
        run.storage.update(&last).await?;
    }
    run.storage.create(rel).await?;
    Ok(Ok((applied, seen)))
}

/// Pre hooks, the apply and the prune of what the previous revision had and this one
/// has not.
pub(super) async fn apply_steps(
    run: &mut Run<'_>,
    rel: &mut Release,
    applied: &str,
    (seen, seen_at): Seen,
    owner: &Owner<'_>,
    previous: Option<&Release>,
    how: &How,
) -> crate::engine::Result<crate::helm::apply::Removed> {
    let ns = run.target.namespace.clone();
    if !how.is_upgrade && how.install.create_namespace {
        run.acting.applier.ensure_namespace(&ns).await?;
    }
    let pre = if how.is_upgrade {
        hook_event::PRE_UPGRADE
    } else {
        hook_event::PRE_INSTALL
    };
    let hooked =
        !how.disable_hooks && !crate::helm::apply::execution_order(&rel.hooks, pre).is_empty();
    if !how.disable_hooks {
        run.run_hooks(&mut rel.hooks, rel.version, pre, &ns, how.timeout)
            .await?;
    }
    // What the adoption check read is applied on without a second read, unless a hook
    // ran since or it is no longer recent (another manager may have taken a field).
    let seen = (!hooked && seen_at.elapsed() < SEEN_FRESH).then_some(&seen);
    let written = run
        .acting
        .applier
        .apply_release_seen(applied, owner, seen)
        .await?;
    run.fix_step(|fix| fix.first_written = written.first_written);
    run.trail.applied_generations = Some((rel.version, written.generations));
    run.trail.fix = None;
    run.precedence.urgent = None;
    match previous.filter(|_| how.is_upgrade) {
        Some(prev) => Ok(run
            .acting
            .applier
            .prune(&prev.manifest, &rel.manifest, owner)
            .await?),
        None => Ok(crate::helm::apply::Removed::default()),
    }
}

/// A hook, the apply or the prune failed with the revision stored: it is recorded
/// failed. Stopped by the cluster, it is retried as an interrupted revision, never
/// remediated; otherwise (`cleanupOnFail`) what the failed upgrade created goes.
pub(super) async fn failed_after_storing(
    run: &mut Run<'_>,
    rel: &mut Release,
    e: crate::engine::Error,
    owner: &Owner<'_>,
    previous: Option<&Release>,
    how: &How,
) -> crate::engine::Result<Outcome> {
    if e.cluster_cause().is_some() {
        let message = format!("{} failed: {}", how.verb, e.describe());
        set_status(
            rel,
            Status::Failed,
            run.intent
                .masker
                .mask(&format!("{CLUSTER_FAILURE_PREFIX}: {message}")),
        );
        run.storage.update(rel).await?;
        return Ok(Outcome::failed_by(how.failed_reason, message, &e));
    }
    let message = format!("{} failed: {e}", how.verb);
    if how.is_upgrade
        && how.upgrade.cleanup_on_fail
        && let Some(prev) = previous
    {
        // Objects the failed upgrade created go; the previous revision's stay.
        let _ = run
            .acting
            .applier
            .prune(&rel.manifest, &prev.manifest, owner)
            .await;
    }
    let description = format!("Release {:?} failed: {e}", run.target.release_name);
    record_failure(run, rel, description, how.failed_reason, message).await
}

/// What an incomplete discovery kept from being pruned is said where people look, and
/// stays in the revision's manifest, so the first upgrade after discovery is whole prunes
/// it (and an uninstall deletes it). Returns the note, for the status.
pub(super) async fn kept_for_discovery(
    run: &Run<'_>,
    rel: &mut Release,
    removed: &crate::helm::apply::Removed,
    previous: Option<&Release>,
) -> Option<String> {
    if let Some(prev) = previous.filter(|_| !removed.kept_for_discovery.is_empty()) {
        let kept = crate::helm::apply::manifest::documents_of(
            &prev.manifest,
            &removed.kept_for_discovery,
            &run.target.namespace,
        );
        if !rel.manifest.ends_with('\n') {
            rel.manifest.push('\n');
        }
        rel.manifest.push_str(&kept);
    }
    let note = removed.discovery_note()?;
    tracing::warn!(release = %run.key, "{note}");
    run.event(
        kube::runtime::events::EventType::Warning,
        reason::DISCOVERY_INCOMPLETE,
        "Prune",
        note.clone(),
    )
    .await;
    Some(note)
}

/// What `helm install --replace` writes on the uninstalled revision it supersedes.
const REPLACED: &str = "superseded by new release";

pub(super) fn is_uninstalled(rel: &Release) -> bool {
    rel.info
        .as_ref()
        .is_some_and(|i| i.status == Status::Uninstalled)
}

/// How long an install's (or an upgrade's) hooks and health check may take: its own
/// timeout, else spec.timeout, as Flux.
pub fn action_timeout(hr: &crate::api::HelmRelease, is_upgrade: bool) -> std::time::Duration {
    let own = if is_upgrade {
        hr.spec.upgrade.as_ref().and_then(|u| u.timeout)
    } else {
        hr.spec.install.as_ref().and_then(|i| i.timeout)
    };
    own.unwrap_or(hr.spec.timeout).as_std()
}

/// Writes the status unless it was written already: beside another step's round trip.
pub(super) async fn write_status_unless(run: &Run<'_>, written: bool) {
    if !written {
        run.write_status().await;
    }
}

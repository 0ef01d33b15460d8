//! Install and upgrade: one body, as Helm's install and upgrade share their steps (CRDs,
//! render, store the pending revision, pre hooks, apply and prune, wait, post hooks,
//! supersede the previous revision). Which of the two it is follows from the newest
//! stored revision, and decides whose retries a failure uses up.

use super::{
    ApplyMethod, CLUSTER_FAILURE_PREFIX, Note, Outcome, Owns, common_metadata, is_deployed,
    new_release, record_as, record_failure, set_status, supersede,
};
use crate::api::{CrdPolicy, HelmReleaseStatus, ReleaseAction, ServerSideApplyMode};
use crate::engine::plan::Desired;
use crate::engine::run::{Prepared, Run, WaitEnd, Window, render};
use crate::engine::status::{self, Truth, condition, reason};
use crate::engine::vocabulary::Phase;
use crate::helm::apply::Owner;
use crate::helm::chart;
use crate::helm::release::{Release, Status, hook_event};
use crate::helm::render::Rendered;

/// How recent the adoption check's reads must be for the apply to use them.
const SEEN_FRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// Install (`previous` = None) or upgrade (`previous` = the newest revision).
/// `rendered`: the chart already rendered for an upgrade while a wait was superseded.
///
/// Helm's steps, each its own function: the chart's CRDs, the render, the pending
/// revision stored (after the adoption check), pre hooks, apply and prune, then
/// [`finish`] (wait, post hooks, supersede). A step that fails before anything is stored
/// ends the action with its [`Outcome`]; one that fails after records the revision failed.
pub async fn install_or_upgrade(
    run: &mut Run<'_>,
    prepared: &Prepared,
    rendered: Option<Rendered>,
    previous: Option<&Release>,
    history: &[Release],
) -> crate::engine::Result<Outcome> {
    let hr = run.hr.clone();
    let how = How::of(&hr, previous);
    // Recorded first, as Flux does, so a failure before anything is stored still counts
    // against this desired state's retries. Written while the next step's own round trips
    // run (the render, or the ownership reads and storing the revision of one rendered
    // already), so it costs a fix no time of its own.
    attempt(
        &mut run.status,
        how.action,
        &prepared.desired(),
        hr.metadata.generation,
    );
    let mut written = false;
    let crds = match install_crds(run, prepared, &how, &mut written).await? {
        Ok(crds) => crds,
        Err(failed) => return Ok(failed),
    };
    // Helm's --reuse-values: the values of the revision Helm's upgrade calls current.
    let kept = if how.is_upgrade && how.upgrade.preserve_values {
        crate::helm::release::values_kept_from(history)
    } else {
        None
    };
    run.set_phase(Phase::Rendering);
    let rendered = match rendered {
        // A candidate rendered during the wait, unless its CRDs were only installed now.
        Some(r) if how.is_upgrade && !crds => r,
        _ => match render_release(run, prepared, previous, kept, &how, written).await {
            Ok(rendered) => {
                written = true;
                run.fix_step(|fix| fix.rendered = std::time::Instant::now());
                rendered
            }
            Err(failed) => return Ok(failed),
        },
    };
    let mut rendered = match finish_render(run, prepared, rendered, &how) {
        Ok(rendered) => rendered,
        Err(failed) => return Ok(failed),
    };
    let version = history.iter().map(|r| r.version).max().unwrap_or(0) + 1;
    let mut rel = pending_revision(run, prepared, &mut rendered, version, history, kept, &how);
    let method = match how.apply_method(run, history) {
        Ok(method) => method,
        Err(failed) => return Ok(failed),
    };
    rel.apply_method = Some(method.recorded().into());
    let (release_name, ns, elsewhere) = (
        run.release_name.clone(),
        run.target_namespace.clone(),
        run.elsewhere.clone(),
    );
    let owner = how.owner(
        (&release_name, &ns),
        previous,
        &method,
        &elsewhere,
        &rendered,
    );
    let stored = tokio::join!(
        write_status_unless(run, written),
        store_revision(run, &mut rel, &rendered, &owner, previous, &how)
    )
    .1?;
    let (applied, seen) = match stored {
        Ok(stored) => stored,
        Err(refused) => return Ok(refused),
    };
    run.set_phase(if how.is_upgrade {
        Phase::Upgrading
    } else {
        Phase::Installing
    });
    run.fix_step(|fix| fix.apply_started = Some(std::time::Instant::now()));
    if let Some(fix) = &run.fix {
        run.ctx.metrics.fix_applied(fix.triggered.elapsed());
    }
    if run.priority == crate::cluster::slots::Priority::Routine {
        run.ctx.work.precedence.give_way().await;
    }
    let removed = match apply_steps(run, &mut rel, &applied, seen, &owner, previous, &how).await {
        Ok(removed) => removed,
        Err(e) => return failed_after_storing(run, &mut rel, e, &owner, previous, &how).await,
    };
    let kept = kept_for_discovery(run, &mut rel, &removed, previous).await;
    let steps = Steps {
        is_upgrade: how.is_upgrade,
        disable_hooks: how.disable_hooks,
        wait: (!how.disable_wait).then_some(Window::from_now(how.timeout)),
        timeout: how.timeout,
    };
    finish(run, prepared, &mut rel, history, steps, kept).await
}

/// How this install or upgrade runs, from the spec's `install` or `upgrade` settings.
struct How {
    action: ReleaseAction,
    is_upgrade: bool,
    install: crate::api::Install,
    upgrade: crate::api::Upgrade,
    disable_hooks: bool,
    disable_wait: bool,
    crds: CrdPolicy,
    take_ownership: bool,
    force_conflicts: bool,
    timeout: std::time::Duration,
    /// The pending status, description and failure reason of the revision.
    pending: Status,
    underway: &'static str,
    failed_reason: &'static str,
    /// How messages name the action.
    verb: &'static str,
}

impl How {
    fn of(hr: &crate::api::HelmRelease, previous: Option<&Release>) -> Self {
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
    fn failed(&self, message: impl std::fmt::Display) -> Outcome {
        Outcome::Failed {
            reason: self.failed_reason,
            message: format!("{} failed: {message}", self.verb),
        }
    }

    /// As Helm 4: the install as `install.serverSideApply` says, the upgrade as the newest
    /// revision was applied unless `upgrade.serverSideApply` says otherwise.
    fn apply_method(&self, run: &Run<'_>, history: &[Release]) -> Result<ApplyMethod, Outcome> {
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
    fn owner<'o>(
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
async fn install_crds(
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
            .ensure_namespace(&run.target_namespace)
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
async fn render_release(
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
        run.priority,
        &run.release_name,
        &run.target_namespace,
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
fn finish_render(
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
    run.masker.add_manifest_secrets(&rendered.manifest);
    for hook in &rendered.hooks {
        run.masker.add_manifest_secrets(&hook.manifest);
    }
    Ok(rendered)
}

/// The pending revision as Helm stores it, with the labels that say what it was made
/// from (kept values, source commit or digest, post-renderers, values files, common
/// metadata).
fn pending_revision(
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
        label(super::SOURCE_COMMIT_LABEL, commit.to_owned());
    }
    if let Some(digest) = prepared.resolved.manifest_digest() {
        label(
            super::SOURCE_DIGEST_LABEL,
            digest[..super::SOURCE_DIGEST_KEPT].to_owned(),
        );
    }
    if let Some(digest) = prepared.post_renderers_digest() {
        label(super::POST_RENDERERS_LABEL, digest);
    }
    if let Some(digest) = prepared.values_files_digest() {
        label(super::VALUES_FILES_LABEL, digest);
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
type Seen = (crate::helm::apply::Seen, std::time::Instant);

/// Stores the pending revision, after the checks that must pass before anything is
/// stored, hooked or applied: the objects are no one else's, the record is not too large.
/// Returns the manifest to apply (with config tracking's hashes) and what the adoption
/// check read.
async fn store_revision(
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
            &run.target_namespace,
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
async fn apply_steps(
    run: &mut Run<'_>,
    rel: &mut Release,
    applied: &str,
    (seen, seen_at): Seen,
    owner: &Owner<'_>,
    previous: Option<&Release>,
    how: &How,
) -> crate::engine::Result<crate::helm::apply::Removed> {
    let ns = run.target_namespace.clone();
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
    run.applied_generations = Some((rel.version, written.generations));
    run.fix = None;
    run.urgent = None;
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
async fn failed_after_storing(
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
            run.masker
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
    let description = format!("Release {:?} failed: {e}", run.release_name);
    record_failure(run, rel, description, how.failed_reason, message).await
}

/// What an incomplete discovery kept from being pruned is said where people look, and
/// stays in the revision's manifest, so the first upgrade after discovery is whole prunes
/// it (and an uninstall deletes it). Returns the note, for the status.
async fn kept_for_discovery(
    run: &Run<'_>,
    rel: &mut Release,
    removed: &crate::helm::apply::Removed,
    previous: Option<&Release>,
) -> Option<String> {
    if let Some(prev) = previous.filter(|_| !removed.kept_for_discovery.is_empty()) {
        let kept = crate::helm::apply::manifest::documents_of(
            &prev.manifest,
            &removed.kept_for_discovery,
            &run.target_namespace,
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
pub const REPLACED: &str = "superseded by new release";

fn is_uninstalled(rel: &Release) -> bool {
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
async fn write_status_unless(run: &Run<'_>, written: bool) {
    if !written {
        run.write_status().await;
    }
}

/// What is left of an install or upgrade once its objects are applied.
struct Steps {
    is_upgrade: bool,
    disable_hooks: bool,
    /// The health check's window; none when the wait is disabled.
    wait: Option<Window>,
    /// For the post hooks.
    timeout: std::time::Duration,
}

/// A resumed wait whose deadline passed while no engine watched (an outage longer than
/// the timeout) still looks this long: the outage was the cluster's, not the release's,
/// and the watches need a moment to list what is there now.
const RESUMED_WAIT_AT_LEAST: std::time::Duration = std::time::Duration::from_secs(10);

/// Resumes an install or upgrade whose engine stopped during its health check (a lost
/// Lease, an API server outage, SIGTERM), the desired state unchanged: the wait goes on
/// until the deadline it began with, then post hooks run and the revision is deployed as
/// if the engine had never stopped. No revision is marked failed, none is added.
pub async fn resume(
    run: &mut Run<'_>,
    prepared: &Prepared,
    mut rel: Release,
    history: &[Release],
) -> crate::engine::Result<Outcome> {
    let is_upgrade = rel.info.as_ref().map(|i| i.status) == Some(Status::PendingUpgrade);
    let action = if is_upgrade {
        ReleaseAction::Upgrade
    } else {
        ReleaseAction::Install
    };
    let window = run
        .status
        .wait
        .as_ref()
        .map(|w| Window {
            started: w.started_at.0,
            deadline: w.deadline.0,
        })
        .unwrap_or_else(|| Window::from_now(action_timeout(&run.hr, is_upgrade)))
        .at_least(RESUMED_WAIT_AT_LEAST);
    attempt(
        &mut run.status,
        action,
        &prepared.desired(),
        run.hr.metadata.generation,
    );
    run.write_status().await;
    let message = format!(
        "resuming the health check of revision {} that an engine left when it stopped (the desired state is unchanged); deadline {}",
        rel.version, window.deadline
    );
    tracing::info!(release = %run.key, revision = rel.version, "{message}");
    run.event(
        kube::runtime::events::EventType::Normal,
        reason::WAIT_RESUMED,
        "Wait",
        message,
    )
    .await;
    let disable_hooks = if is_upgrade {
        run.hr
            .spec
            .upgrade
            .clone()
            .unwrap_or_default()
            .disable_hooks
    } else {
        run.hr
            .spec
            .install
            .clone()
            .unwrap_or_default()
            .disable_hooks
    };
    let steps = Steps {
        is_upgrade,
        disable_hooks,
        wait: Some(window),
        timeout: action_timeout(&run.hr, is_upgrade),
    };
    finish(run, prepared, &mut rel, history, steps, None).await
}

/// The health check, the post hooks, and the revision deployed (the previous ones
/// superseded). `kept`: what an incomplete discovery kept from being pruned.
async fn finish(
    run: &mut Run<'_>,
    prepared: &Prepared,
    rel: &mut Release,
    history: &[Release],
    steps: Steps,
    kept: Option<String>,
) -> crate::engine::Result<Outcome> {
    let Steps {
        is_upgrade,
        disable_hooks,
        wait,
        timeout,
    } = steps;
    let (failed_reason, ok_reason, done) = if is_upgrade {
        (
            reason::UPGRADE_FAILED,
            reason::UPGRADE_SUCCEEDED,
            "Upgrade complete",
        )
    } else {
        (
            reason::INSTALL_FAILED,
            reason::INSTALL_SUCCEEDED,
            "Install complete",
        )
    };
    let version = rel.version;
    let ns = run.target_namespace.clone();
    if let Some(window) = wait {
        match run.wait_for(rel, window).await? {
            WaitEnd::Ready => {}
            WaitEnd::Failed(why) => {
                return record_failure(
                    run,
                    rel,
                    format!("Release {:?} failed: {why}", run.release_name),
                    failed_reason,
                    why,
                )
                .await;
            }
            WaitEnd::Stopped => return Err(crate::engine::Error::Stopped),
            WaitEnd::Canceled { by_operator, why } => {
                let status = if by_operator {
                    Status::Failed
                } else {
                    Status::Superseded
                };
                set_status(rel, status, why.clone());
                if !by_operator && run.memory.handoff.candidate.is_some() {
                    // The newer desired state is applied next: its guards read the
                    // history while this record is written (see `worker::reconcile`).
                    let (storage, record) = (run.storage.clone(), rel.clone());
                    let write = tokio::spawn(crate::cluster::slots::carrying_mark(async move {
                        storage.update(&record).await
                    }));
                    run.memory.handoff.superseding =
                        Some(Box::new(crate::engine::run::Superseding {
                            record: rel.clone(),
                            write,
                        }));
                } else {
                    run.storage.update(rel).await?;
                }
                run.last_record = Some(rel.clone());
                return Ok(Outcome::Canceled {
                    by_operator,
                    message: why,
                });
            }
            WaitEnd::Abandoned(why) => {
                set_status(rel, Status::Failed, why.clone());
                run.storage.update(rel).await?;
                return Ok(Outcome::Canceled {
                    by_operator: false,
                    message: why,
                });
            }
        }
    }

    if !disable_hooks {
        let event = if is_upgrade {
            hook_event::POST_UPGRADE
        } else {
            hook_event::POST_INSTALL
        };
        run.set_phase(Phase::RunningHooks);
        if let Err(e) = run
            .run_hooks(&mut rel.hooks, version, event, &ns, timeout)
            .await
        {
            return record_failure(
                run,
                rel,
                format!("Release {:?} failed: {e}", run.release_name),
                failed_reason,
                e.to_string(),
            )
            .await;
        }
    }

    // The new revision is live: the previous deployed ones are superseded.
    supersede(run, history, is_deployed).await?;
    set_status(rel, Status::Deployed, done);
    run.storage.update(rel).await?;
    run.prune_history(history, rel).await;
    let mut message = format!(
        "Helm {} succeeded for release {}/{}.v{} with chart {}@{}",
        if is_upgrade { "upgrade" } else { "install" },
        ns,
        run.release_name,
        version,
        prepared.resolved.name,
        prepared.resolved.version
    );
    if let Some(note) = kept {
        message.push_str("; ");
        message.push_str(&note);
    }
    Ok(Outcome::Succeeded {
        reason: ok_reason,
        message,
    })
}

/// Records what is being attempted before the action starts: the desired state, and
/// Reconciling/Ready saying it runs.
fn attempt(
    s: &mut HelmReleaseStatus,
    action: ReleaseAction,
    desired: &Desired,
    generation: Option<i64>,
) {
    s.last_attempted_generation = generation;
    s.last_attempted_revision = Some(desired.chart_version.clone());
    s.last_attempted_config_digest = Some(desired.config_digest.clone());
    s.last_attempted_source_revision = desired.source_revision.clone();
    s.last_attempted_release_action = Some(action);
    let verb = match action {
        ReleaseAction::Install => "install",
        ReleaseAction::Upgrade => "upgrade",
    };
    status::set(
        s,
        condition::RECONCILING,
        Truth::True,
        reason::PROGRESSING,
        format!(
            "Running {verb} with chart {}@{}",
            desired.chart_name, desired.chart_version
        ),
        generation,
    );
    status::set(
        s,
        condition::READY,
        Truth::Unknown,
        reason::PROGRESSING,
        format!("Running {verb}"),
        generation,
    );
}

/// Install and upgrade own Released. Success makes the release Ready and lifts Stalled
/// and Remediated: it reached its desired state. A failure, or an operator's cancel of
/// its wait, uses up a retry of the action `attempt` recorded.
pub fn record(s: &mut HelmReleaseStatus, outcome: &Outcome, generation: Option<i64>) -> Note {
    let owns = Owns {
        condition: Some(condition::RELEASED),
        ready: true,
        counts_against: s.last_attempted_release_action,
    };
    let note = record_as(&owns, s, outcome, generation);
    if matches!(outcome, Outcome::Succeeded { .. }) {
        status::remove(s, condition::STALLED);
        status::remove(s, condition::REMEDIATED);
    }
    note
}

#[cfg(test)]
mod tests {
    use kube::runtime::events::EventType::{Normal, Warning};

    use super::*;
    use crate::engine::actions::testing::{Case, before, canceled, check, failed, succeeded};
    use crate::engine::status::reason::*;
    use Truth::{False, True, Unknown};

    /// What [`attempt`] leaves while the action runs.
    fn running(action: ReleaseAction, counters: (i64, i64, i64)) -> HelmReleaseStatus {
        before(
            &[
                (condition::RECONCILING, True, PROGRESSING),
                (condition::READY, Unknown, PROGRESSING),
            ],
            counters,
            Some(action),
        )
    }

    #[test]
    fn install_and_upgrade_outcomes_are_recorded() {
        use ReleaseAction::{Install, Upgrade};
        check(
            record,
            vec![
                Case {
                    name: "install succeeds: Released and Ready",
                    before: running(Install, (0, 0, 0)),
                    outcome: succeeded(INSTALL_SUCCEEDED),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "True", INSTALL_SUCCEEDED),
                        ("Released", "True", INSTALL_SUCCEEDED),
                    ],
                    counters: (0, 0, 0),
                    event: (Normal, INSTALL_SUCCEEDED, None),
                },
                Case {
                    // Only a new desired state or resetAt gives fresh retries.
                    name: "success keeps the failure counters",
                    before: running(Install, (2, 2, 0)),
                    outcome: succeeded(INSTALL_SUCCEEDED),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "True", INSTALL_SUCCEEDED),
                        ("Released", "True", INSTALL_SUCCEEDED),
                    ],
                    counters: (2, 2, 0),
                    event: (Normal, INSTALL_SUCCEEDED, None),
                },
                Case {
                    name: "upgrade succeeds after a remediation: Stalled and Remediated go",
                    before: before(
                        &[
                            (condition::READY, False, UPGRADE_FAILED),
                            (condition::STALLED, True, RETRIES_EXCEEDED),
                            (condition::REMEDIATED, True, ROLLBACK_SUCCEEDED),
                            (condition::RELEASED, False, UPGRADE_FAILED),
                        ],
                        (2, 0, 2),
                        Some(Upgrade),
                    ),
                    outcome: succeeded(UPGRADE_SUCCEEDED),
                    conditions: &[
                        ("Ready", "True", UPGRADE_SUCCEEDED),
                        ("Released", "True", UPGRADE_SUCCEEDED),
                    ],
                    counters: (2, 0, 2),
                    event: (Normal, UPGRADE_SUCCEEDED, None),
                },
                Case {
                    name: "install fails: InstallFailed, an install retry used",
                    before: running(Install, (0, 0, 0)),
                    outcome: failed(INSTALL_FAILED),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "False", INSTALL_FAILED),
                        ("Released", "False", INSTALL_FAILED),
                    ],
                    counters: (1, 1, 0),
                    event: (Warning, INSTALL_FAILED, None),
                },
                Case {
                    name: "upgrade fails: UpgradeFailed, an upgrade retry used",
                    before: running(Upgrade, (1, 0, 1)),
                    outcome: failed(UPGRADE_FAILED),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "False", UPGRADE_FAILED),
                        ("Released", "False", UPGRADE_FAILED),
                    ],
                    counters: (2, 0, 2),
                    event: (Warning, UPGRADE_FAILED, None),
                },
                Case {
                    name: "wait superseded by a newer desired state: no failure",
                    before: running(Upgrade, (0, 0, 0)),
                    outcome: canceled(false),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "False", HEALTH_CHECK_CANCELED),
                    ],
                    counters: (0, 0, 0),
                    event: (Warning, HEALTH_CHECK_CANCELED, Some("Wait")),
                },
                Case {
                    name: "upgrade wait canceled by the operator: an upgrade retry used",
                    before: running(Upgrade, (0, 0, 0)),
                    outcome: canceled(true),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "False", HEALTH_CHECK_CANCELED),
                    ],
                    counters: (1, 0, 1),
                    event: (Warning, HEALTH_CHECK_CANCELED, Some("Wait")),
                },
                Case {
                    name: "install wait canceled by the operator: an install retry used",
                    before: running(Install, (0, 0, 0)),
                    outcome: canceled(true),
                    conditions: &[
                        ("Reconciling", "True", PROGRESSING),
                        ("Ready", "False", HEALTH_CHECK_CANCELED),
                    ],
                    counters: (1, 1, 0),
                    event: (Warning, HEALTH_CHECK_CANCELED, Some("Wait")),
                },
            ],
        );
    }

    #[test]
    fn an_attempt_is_recorded_before_it_runs() {
        let desired = Desired {
            chart_name: "app".into(),
            chart_version: "1.2.0".into(),
            config_digest: "sha256:v".into(),
            source_revision: Some(format!("main@sha1:{}", "c".repeat(40))),
            post_renderers: None,
            common_metadata: None,
            values_files: None,
        };
        let cases = [
            (ReleaseAction::Install, "install"),
            (ReleaseAction::Upgrade, "upgrade"),
        ];
        for (action, verb) in cases {
            // A Ready left by the previous success is replaced while the action runs.
            let mut s = before(
                &[(condition::READY, True, UPGRADE_SUCCEEDED)],
                (1, 0, 1),
                None,
            );
            attempt(&mut s, action, &desired, Some(4));
            assert_eq!(s.last_attempted_generation, Some(4));
            assert_eq!(s.last_attempted_revision.as_deref(), Some("1.2.0"));
            assert_eq!(s.last_attempted_config_digest.as_deref(), Some("sha256:v"));
            assert_eq!(s.last_attempted_release_action, Some(action));
            assert_eq!(
                (s.failures, s.upgrade_failures),
                (1, 1),
                "{verb}: counters kept"
            );
            let got: Vec<_> = s
                .conditions
                .iter()
                .map(|c| (c.type_.as_str(), c.status.as_str(), c.message.clone()))
                .collect();
            assert_eq!(
                got,
                [
                    ("Ready", "Unknown", format!("Running {verb}")),
                    (
                        "Reconciling",
                        "True",
                        format!("Running {verb} with chart app@1.2.0")
                    ),
                ],
                "{verb}"
            );
        }
    }
}

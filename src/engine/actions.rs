//! The release actions, one unit each, in the order Helm runs their steps: record the
//! pending revision, hooks, apply (and prune), wait, post hooks, record the result. Only
//! the wait can be cancelled; apply and hooks always run to completion (DESIGN §4.6).

use k8s_openapi::jiff::Timestamp;

use super::worker::{Run, WaitEnd};
use crate::api::{CrdPolicy, ReleaseAction};
use crate::apply::Owner;
use crate::chart::{self, Chart};
use crate::release::{Info, Release, Status, hook_event};
use crate::render::{Previous, RenderRequest, Rendered};
use crate::source::ResolvedChart;
use crate::values::ComposedValues;

/// How an action ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Succeeded {
        reason: &'static str,
        message: String,
    },
    Failed {
        reason: &'static str,
        message: String,
    },
    /// The wait was cancelled by the operator (counts as a failure) or superseded by a
    /// newer desired state (does not).
    Canceled { by_operator: bool, message: String },
}

/// Everything an install or upgrade needs, resolved before the action starts.
pub struct Prepared {
    pub resolved: ResolvedChart,
    pub chart: Chart,
    pub values: ComposedValues,
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
        ] {
            h.update(part.as_bytes());
            h.update([0]);
        }
        format!("sha256:{}", hex::encode(h.finalize()))
    }
}

/// A newer desired state, prepared (resolved and rendered) while a wait was running.
pub struct Candidate {
    pub prepared: Prepared,
    pub rendered: Rendered,
    pub generation: Option<i64>,
}

/// Renders the chart as `helm install`/`helm upgrade` would after `previous`, the
/// release's newest stored revision (none: a first install).
pub async fn render(
    ctx: &super::worker::Context,
    release_name: &str,
    namespace: &str,
    prepared: &Prepared,
    previous: Option<&Release>,
) -> crate::Result<Rendered> {
    // Never render (and so never prune) from partial capabilities.
    crate::render::check_discovery(&ctx.client).await?;
    Ok(ctx
        .renderer
        .render(RenderRequest {
            release_name,
            namespace,
            chart_path: &prepared.resolved.path,
            values: &prepared.values.values,
            previous: previous.map(Previous::of),
        })
        .await?)
}

pub const OWNER_LABEL: &str = "wheelhouse.dev/owner";

fn new_release(
    run: &Run<'_>,
    version: i32,
    chart: Chart,
    config: serde_json::Map<String, serde_json::Value>,
    status: Status,
    description: &str,
) -> Release {
    let now = Timestamp::now();
    let mut rel = Release {
        name: run.release_name.clone(),
        namespace: run.target_namespace.clone(),
        version,
        info: Some(Info {
            first_deployed: Some(now),
            last_deployed: Some(now),
            deleted: None,
            description: description.into(),
            status,
            ..Info::default()
        }),
        chart: Some(chart),
        config,
        apply_method: Some("ssa".into()),
        ..Release::default()
    };
    rel.labels
        .insert(OWNER_LABEL.into(), run.ctx.identity_label.clone());
    rel.labels.extend(super::claim::labels(&run.hr));
    rel
}

/// Marks the revision failed in Helm storage and reports the failure.
async fn record_failure(
    run: &Run<'_>,
    rel: &mut Release,
    description: String,
    reason: &'static str,
    message: String,
) -> crate::Result<Outcome> {
    set_status(rel, Status::Failed, description);
    run.storage.update(rel).await?;
    Ok(Outcome::Failed { reason, message })
}

fn set_status(rel: &mut Release, status: Status, description: impl Into<String>) {
    // Ownership only matters while the revision is pending (see `unlock`).
    if !status.is_pending() {
        rel.labels.remove(OWNER_LABEL);
    }
    let info = rel.info.get_or_insert_with(Info::default);
    info.status = status;
    info.description = description.into();
    info.last_deployed = Some(Timestamp::now());
}

/// Install (`previous` = None) or upgrade (`previous` = the newest revision).
/// `rendered`: the chart already rendered for an upgrade while a wait was superseded.
pub async fn install_or_upgrade(
    run: &mut Run<'_>,
    prepared: &Prepared,
    rendered: Option<Rendered>,
    previous: Option<&Release>,
    history: &[Release],
) -> crate::Result<Outcome> {
    let action = if previous.is_some_and(|p| {
        p.info
            .as_ref()
            .is_some_and(|i| i.status != Status::Uninstalled)
    }) {
        ReleaseAction::Upgrade
    } else {
        ReleaseAction::Install
    };
    let is_upgrade = action == ReleaseAction::Upgrade;
    let version = history.iter().map(|r| r.version).max().unwrap_or(0) + 1;
    let hr = run.hr.clone();
    let spec = &hr.spec;
    let install = spec.install.clone().unwrap_or_default();
    let upgrade = spec.upgrade.clone().unwrap_or_default();
    let (disable_hooks, disable_wait, crds, take_ownership) = if is_upgrade {
        (
            upgrade.disable_hooks,
            upgrade.disable_wait,
            upgrade.crds,
            upgrade.take_ownership,
        )
    } else {
        (
            install.disable_hooks,
            install.disable_wait,
            install.crds,
            install.take_ownership,
        )
    };
    let (pending, underway, failed_reason, ok_reason, done) = if is_upgrade {
        (
            Status::PendingUpgrade,
            "Preparing upgrade",
            super::status::reason::UPGRADE_FAILED,
            super::status::reason::UPGRADE_SUCCEEDED,
            "Upgrade complete",
        )
    } else {
        (
            Status::PendingInstall,
            "Initial install underway",
            super::status::reason::INSTALL_FAILED,
            super::status::reason::INSTALL_SUCCEEDED,
            "Install complete",
        )
    };
    let verb = if is_upgrade {
        "Helm upgrade"
    } else {
        "Helm install"
    };
    // Recorded first, as Flux does, so a failure before anything is stored still counts
    // against this desired state's retries.
    run.note_attempt(action, prepared).await;
    // As Helm: the chart's CRDs (its subcharts' too) go in before the templates are
    // rendered, so `.Capabilities` sees their kinds and objects of them can be applied.
    let crd_files = {
        let (path, values) = (
            prepared.resolved.path.clone(),
            prepared.values.values.clone(),
        );
        tokio::task::spawn_blocking(move || chart::crds_to_install(&path, &values)).await
    };
    let crd_docs: Vec<String> = match crd_files {
        Ok(Ok(files)) => files
            .iter()
            .map(|f| String::from_utf8_lossy(&f.data).into_owned())
            .collect(),
        Ok(Err(e)) => {
            return Ok(Outcome::Failed {
                reason: failed_reason,
                message: format!("{verb} failed: reading the chart's CRDs: {e}"),
            });
        }
        Err(e) => return Err(std::io::Error::other(e).into()),
    };
    if crds != CrdPolicy::Skip && !crd_docs.is_empty() {
        if !is_upgrade && install.create_namespace {
            // CRDs are cluster-scoped, but a refusal below should not leave half a setup.
            run.ctx
                .applier
                .ensure_namespace(&run.target_namespace)
                .await?;
        }
        if let Err(e) = run.ctx.applier.apply_crds(&crd_docs, crds).await {
            return Ok(Outcome::Failed {
                reason: failed_reason,
                message: format!("{verb} failed: installing the chart's CRDs: {e}"),
            });
        }
    }
    run.set_phase(super::Phase::Rendering);
    let rendered = match rendered {
        // A candidate rendered during the wait, unless its CRDs were only installed now.
        Some(r) if is_upgrade && crd_docs.is_empty() => r,
        _ => match render(
            run.ctx,
            &run.release_name,
            &run.target_namespace,
            prepared,
            previous,
        )
        .await
        {
            Ok(rendered) => rendered,
            // A template error, `required` or `fail`: the action failed, as in Flux.
            Err(e) => {
                return Ok(Outcome::Failed {
                    reason: failed_reason,
                    message: format!("{verb} failed: {e}"),
                });
            }
        },
    };

    let mut rel = new_release(
        run,
        version,
        prepared.chart.clone(),
        prepared.values.values.clone(),
        pending,
        underway,
    );
    // Config tracking: hash the ConfigMaps/Secrets each workload consumes into its pod
    // template (and gate pods whose config does not exist yet) before the first apply, so
    // pods start once with it instead of restarting to receive it.
    rel.manifest = if hr.spec.config_tracking.clone().unwrap_or_default().enabled {
        crate::tracking::prepare_manifest(
            &run.ctx.client,
            &rendered.manifest,
            &run.target_namespace,
        )
        .await
        .map_err(|e| crate::Error::Tracking(Box::new(e)))?
    } else {
        rendered.manifest.clone()
    };
    rel.hooks = rendered.hooks.clone();
    if let Some(first) = history
        .iter()
        .find_map(|r| r.info.as_ref()?.first_deployed)
        .filter(|_| is_upgrade)
    {
        rel.info.as_mut().unwrap().first_deployed = Some(first);
    }
    let release_name = run.release_name.clone();
    let ns = run.target_namespace.clone();
    let owner = Owner::new(&release_name, &ns)
        .previous(previous.filter(|_| is_upgrade).map(|p| p.manifest.as_str()))
        .take_ownership(take_ownership);
    // As Helm: objects that belong to someone else stop the action before anything is
    // stored, hooked or applied.
    if let Err(e) = run.ctx.applier.check_adoption(&rel.manifest, &owner).await {
        return Ok(Outcome::Failed {
            reason: failed_reason,
            message: format!("{verb} failed: {e}"),
        });
    }
    if let Err(e @ crate::release::Error::TooLarge { .. }) = crate::release::check_size(&rel) {
        return Ok(Outcome::Failed {
            reason: failed_reason,
            message: format!("{verb} failed: {e}"),
        });
    }
    run.storage.create(&rel).await?;
    run.set_phase(if is_upgrade {
        super::Phase::Upgrading
    } else {
        super::Phase::Installing
    });

    let timeout = spec.timeout.as_std();
    let steps = async {
        if !is_upgrade && install.create_namespace {
            run.ctx.applier.ensure_namespace(&ns).await?;
        }
        if !disable_hooks {
            let event = if is_upgrade {
                hook_event::PRE_UPGRADE
            } else {
                hook_event::PRE_INSTALL
            };
            run.ctx
                .applier
                .run_hooks(&mut rel.hooks, event, &ns, timeout)
                .await?;
        }
        run.ctx.applier.apply_release(&rel.manifest, &owner).await?;
        if let Some(prev) = previous.filter(|_| is_upgrade) {
            run.ctx
                .applier
                .prune(&prev.manifest, &rel.manifest, &owner)
                .await?;
        }
        Ok::<_, crate::Error>(())
    }
    .await;
    if let Err(e) = steps {
        let message = format!("{verb} failed: {e}");
        if is_upgrade
            && upgrade.cleanup_on_fail
            && let Some(prev) = previous
        {
            // Objects the failed upgrade created go; the previous revision's stay.
            let _ = run
                .ctx
                .applier
                .prune(&rel.manifest, &prev.manifest, &owner)
                .await;
        }
        return record_failure(
            run,
            &mut rel,
            format!("Release {:?} failed: {e}", run.release_name),
            failed_reason,
            message,
        )
        .await;
    }

    if !disable_wait {
        match run.wait_for(&rel, timeout).await? {
            WaitEnd::Ready => {}
            WaitEnd::Failed(why) => {
                return record_failure(
                    run,
                    &mut rel,
                    format!("Release {:?} failed: {why}", run.release_name),
                    failed_reason,
                    why,
                )
                .await;
            }
            WaitEnd::Stopped => return Err(crate::Error::Stopped),
            WaitEnd::Canceled { by_operator, why } => {
                let status = if by_operator {
                    Status::Failed
                } else {
                    Status::Superseded
                };
                set_status(&mut rel, status, why.clone());
                run.storage.update(&rel).await?;
                return Ok(Outcome::Canceled {
                    by_operator,
                    message: why,
                });
            }
            WaitEnd::Abandoned(why) => {
                set_status(&mut rel, Status::Failed, why.clone());
                run.storage.update(&rel).await?;
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
        run.set_phase(super::Phase::RunningHooks);
        if let Err(e) = run
            .ctx
            .applier
            .run_hooks(&mut rel.hooks, event, &ns, timeout)
            .await
        {
            return record_failure(
                run,
                &mut rel,
                format!("Release {:?} failed: {e}", run.release_name),
                failed_reason,
                e.to_string(),
            )
            .await;
        }
    }

    // The new revision is live: the previous deployed ones are superseded.
    for old in history.iter().filter(|r| {
        r.info
            .as_ref()
            .is_some_and(|i| i.status == Status::Deployed)
    }) {
        let mut old = old.clone();
        set_status_keep_time(&mut old, Status::Superseded);
        run.storage.update(&old).await?;
    }
    set_status(&mut rel, Status::Deployed, done);
    run.storage.update(&rel).await?;
    run.prune_history().await;
    Ok(Outcome::Succeeded {
        reason: ok_reason,
        message: format!(
            "Helm {} succeeded for release {}/{}.v{} with chart {}@{}",
            if is_upgrade { "upgrade" } else { "install" },
            ns,
            run.release_name,
            version,
            prepared.resolved.name,
            prepared.resolved.version
        ),
    })
}

fn set_status_keep_time(rel: &mut Release, status: Status) {
    if let Some(info) = rel.info.as_mut() {
        info.status = status;
    }
}

/// Runs the chart's tests (hooks with `helm.sh/hook: test`) against the newest revision
/// and records their results in it.
pub async fn test(run: &mut Run<'_>, mut latest: Release) -> crate::Result<Outcome> {
    run.set_phase(super::Phase::Testing);
    let timeout = run
        .hr
        .spec
        .test
        .as_ref()
        .and_then(|t| t.timeout)
        .unwrap_or(run.hr.spec.timeout)
        .as_std();
    let ns = run.target_namespace.clone();
    let result = run
        .ctx
        .applier
        .run_hooks(&mut latest.hooks, hook_event::TEST, &ns, timeout)
        .await;
    run.storage.update(&latest).await?;
    Ok(match result {
        Ok(()) => Outcome::Succeeded {
            reason: super::status::reason::TEST_SUCCEEDED,
            message: format!(
                "Helm test succeeded for release {ns}/{}.v{}",
                run.release_name, latest.version
            ),
        },
        Err(e) => Outcome::Failed {
            reason: super::status::reason::TEST_FAILED,
            message: format!(
                "Helm test failed for release {ns}/{}.v{}: {e}",
                run.release_name, latest.version
            ),
        },
    })
}

/// Rolls back to revision `to` as Helm does: a new revision with `to`'s chart, values
/// and manifest.
pub async fn rollback(run: &mut Run<'_>, history: &[Release], to: i32) -> crate::Result<Outcome> {
    run.set_phase(super::Phase::RollingBack);
    let failed = |message: String| Outcome::Failed {
        reason: super::status::reason::ROLLBACK_FAILED,
        message,
    };
    let Some(target) = history.iter().find(|r| r.version == to) else {
        return Ok(failed(format!("revision {to} is not in Helm storage")));
    };
    let Some(current) = history.last() else {
        return Ok(failed("no revision to roll back from".into()));
    };
    let version = current.version + 1;
    let spec = run.hr.spec.rollback.clone().unwrap_or_default();
    let timeout = spec.timeout.unwrap_or(run.hr.spec.timeout).as_std();
    let mut rel = new_release(
        run,
        version,
        target.chart.clone().unwrap_or_default(),
        target.config.clone(),
        Status::PendingRollback,
        &format!("Rollback to {to}"),
    );
    rel.manifest = target.manifest.clone();
    rel.hooks = target.hooks.clone();
    rel.info.as_mut().unwrap().rollback_revision = to;
    if let Some(first) = history.iter().find_map(|r| r.info.as_ref()?.first_deployed) {
        rel.info.as_mut().unwrap().first_deployed = Some(first);
    }
    let ns = run.target_namespace.clone();
    let release_name = run.release_name.clone();
    let take_ownership = run
        .hr
        .spec
        .upgrade
        .as_ref()
        .is_some_and(|u| u.take_ownership);
    let owner = Owner::new(&release_name, &ns)
        .previous(Some(&current.manifest))
        .take_ownership(take_ownership);
    if let Err(e) = run.ctx.applier.check_adoption(&rel.manifest, &owner).await {
        return Ok(failed(format!("Helm rollback failed: {e}")));
    }
    run.storage.create(&rel).await?;
    let steps = async {
        if !spec.disable_hooks {
            run.ctx
                .applier
                .run_hooks(&mut rel.hooks, hook_event::PRE_ROLLBACK, &ns, timeout)
                .await?;
        }
        run.ctx.applier.apply_release(&rel.manifest, &owner).await?;
        run.ctx
            .applier
            .prune(&current.manifest, &rel.manifest, &owner)
            .await?;
        Ok::<_, crate::Error>(())
    }
    .await;
    if let Err(e) = steps {
        set_status(
            &mut rel,
            Status::Failed,
            format!("Rollback \"{}\" failed: {e}", run.release_name),
        );
        run.storage.update(&rel).await?;
        return Ok(failed(e.to_string()));
    }
    if !spec.disable_wait {
        match run.wait_for(&rel, timeout).await? {
            WaitEnd::Ready => {}
            WaitEnd::Stopped => return Err(crate::Error::Stopped),
            WaitEnd::Failed(why) | WaitEnd::Canceled { why, .. } | WaitEnd::Abandoned(why) => {
                set_status(
                    &mut rel,
                    Status::Failed,
                    format!("Rollback \"{}\" failed: {why}", run.release_name),
                );
                run.storage.update(&rel).await?;
                return Ok(failed(why));
            }
        }
    }
    if !spec.disable_hooks
        && let Err(e) = run
            .ctx
            .applier
            .run_hooks(&mut rel.hooks, hook_event::POST_ROLLBACK, &ns, timeout)
            .await
    {
        set_status(
            &mut rel,
            Status::Failed,
            format!("Rollback \"{}\" failed: {e}", run.release_name),
        );
        run.storage.update(&rel).await?;
        return Ok(failed(e.to_string()));
    }
    // As Helm: the revision rolled back from and any deployed one become superseded.
    for old in history.iter().filter(|r| {
        r.version == current.version
            || r.info
                .as_ref()
                .is_some_and(|i| i.status == Status::Deployed)
    }) {
        let mut old = old.clone();
        set_status_keep_time(&mut old, Status::Superseded);
        run.storage.update(&old).await?;
    }
    set_status(&mut rel, Status::Deployed, format!("Rollback to {to}"));
    run.storage.update(&rel).await?;
    run.prune_history().await;
    Ok(Outcome::Succeeded {
        reason: super::status::reason::ROLLBACK_SUCCEEDED,
        message: format!(
            "Helm rollback to revision {to} succeeded for release {ns}/{}.v{version}",
            run.release_name
        ),
    })
}

/// Uninstalls the release: hooks, delete its objects, then keep the history as
/// `uninstalled` or delete it.
pub async fn uninstall(run: &mut Run<'_>, history: &[Release]) -> crate::Result<Outcome> {
    run.set_phase(super::Phase::Uninstalling);
    let Some(latest) = history.last() else {
        return Ok(Outcome::Succeeded {
            reason: super::status::reason::UNINSTALL_SUCCEEDED,
            message: "nothing to uninstall".into(),
        });
    };
    let spec = run.hr.spec.uninstall.clone().unwrap_or_default();
    let timeout = spec.timeout.unwrap_or(run.hr.spec.timeout).as_std();
    let ns = run.target_namespace.clone();
    let mut rel = latest.clone();
    set_status(
        &mut rel,
        Status::Uninstalling,
        "Deletion in progress (or silently failed)",
    );
    run.storage.update(&rel).await?;
    let release_name = run.release_name.clone();
    let owner = Owner::new(&release_name, &ns);
    let steps = async {
        if !spec.disable_hooks {
            run.ctx
                .applier
                .run_hooks(&mut rel.hooks, hook_event::PRE_DELETE, &ns, timeout)
                .await?;
        }
        let removed = run.ctx.applier.delete(&rel.manifest, &owner).await?;
        if !spec.disable_hooks {
            run.ctx
                .applier
                .run_hooks(&mut rel.hooks, hook_event::POST_DELETE, &ns, timeout)
                .await?;
        }
        Ok::<_, crate::Error>(removed)
    }
    .await;
    let removed = match steps {
        Ok(removed) => removed,
        Err(e) => {
            return record_failure(
                run,
                &mut rel,
                format!("uninstallation failed: {e}"),
                super::status::reason::UNINSTALL_FAILED,
                e.to_string(),
            )
            .await;
        }
    };
    if spec.keep_history {
        set_status(&mut rel, Status::Uninstalled, "Uninstallation complete");
        if let Some(info) = rel.info.as_mut() {
            info.deleted = Some(Timestamp::now());
        }
        run.storage.update(&rel).await?;
    } else {
        for r in history {
            run.storage.delete(&r.name, r.version).await?;
        }
    }
    let mut message = format!(
        "Helm uninstall succeeded for release {ns}/{}.v{}",
        run.release_name, latest.version
    );
    if let Some(note) = removed.foreign_note() {
        message.push_str("; ");
        message.push_str(&note);
    }
    Ok(Outcome::Succeeded {
        reason: super::status::reason::UNINSTALL_SUCCEEDED,
        message,
    })
}

/// A revision left `pending-*` (or `uninstalling`) by an engine that stopped mid-action:
/// Helm would refuse every further operation, so mark it failed and go on.
pub async fn unlock(run: &mut Run<'_>, mut latest: Release) -> crate::Result<Outcome> {
    run.set_phase(super::Phase::Unlocking);
    let was = latest.info.as_ref().map(|i| i.status).unwrap_or_default();
    set_status(
        &mut latest,
        Status::Failed,
        format!(
            "Release was left {was} by an engine that stopped before finishing; marked failed by wheelhouse to unlock it"
        ),
    );
    run.storage.update(&latest).await?;
    Ok(Outcome::Succeeded {
        reason: super::status::reason::UNLOCKED,
        message: format!("unlocked revision {} (was {was})", latest.version),
    })
}

//! Rollback, the remediation of a failed upgrade (strategy `rollback`): as Helm does, a
//! new revision with an earlier revision's chart, values and manifest.

use super::{
    ApplyMethod, Note, Outcome, REMEDIATION, is_deployed, new_release, record_as, record_failure,
    set_status, supersede,
};
use crate::api::{HelmReleaseStatus, ServerSideApplyMode};
use crate::engine::run::{Run, WaitEnd, Window};
use crate::engine::status::reason;
use crate::engine::vocabulary::Phase;
use crate::helm::apply::Owner;
use crate::helm::release::{Release, Status, hook_event};

/// Rolls back to revision `to` as Helm does: a new revision with `to`'s chart, values
/// and manifest.
pub async fn rollback(
    run: &mut Run<'_>,
    history: &[Release],
    to: i32,
) -> crate::engine::Result<Outcome> {
    run.set_phase(Phase::RollingBack);
    let failed = |message: String| Outcome::Failed {
        reason: reason::ROLLBACK_FAILED,
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
    if spec.recreate {
        // As helm-controller on Helm 4: kept for compatibility, without effect.
        tracing::warn!(release = %run.key, "rollback.recreate has no effect: Helm 4 removed recreating pods on rollback (helm-controller ignores it too)");
    }
    let mut rel = restored(run, history, target, version);
    let ns = run.target.namespace.clone();
    let release_name = run.target.release_name.clone();
    let take_ownership = run
        .hr
        .spec
        .upgrade
        .as_ref()
        .is_some_and(|u| u.take_ownership);
    let elsewhere = run.target.elsewhere.clone();
    let unavailable = run.ctx.discover_for(&run.acting).await?.unavailable;
    // As Helm 4: as the revision rolled back to was applied, unless the spec says.
    let mode = spec.server_side_apply;
    let server_side = mode.server_side(ApplyMethod::followed(target));
    let method = match ApplyMethod::choose(run, server_side, mode == ServerSideApplyMode::Disabled)
    {
        Ok(method) => method,
        Err(why) => return Ok(failed(format!("Helm rollback failed: {why}"))),
    };
    rel.apply_method = Some(method.recorded().into());
    let mut owner = Owner::new(&release_name, &ns)
        .previous(Some(&current.manifest))
        .take_ownership(take_ownership)
        // `force` is Flux's replacement strategy: under server-side apply, forced
        // conflicts (lifecycle.rs, `Rollback::force`).
        .force_conflicts(spec.force_conflicts || spec.force)
        .others(&elsewhere)
        .unavailable(&unavailable);
    if let ApplyMethod::ClientSide(patcher) = &method {
        // Flux's `force` is Helm's `--force` there: objects replaced.
        owner = owner.client_side(patcher.as_ref(), spec.force);
    }
    if let Err(e) = run
        .acting
        .applier
        .check_adoption(&rel.manifest, &owner)
        .await
    {
        return Ok(failed(format!("Helm rollback failed: {e}")));
    }
    run.storage.create(&rel).await?;
    let steps = apply_restored(run, &mut rel, current, &owner, &spec, timeout).await;
    if let Err(e) = steps {
        return failed_because(run, &mut rel, e.to_string()).await;
    }
    if !spec.disable_wait {
        match run.wait_for(&rel, Window::from_now(timeout)).await? {
            WaitEnd::Ready => {}
            WaitEnd::Stopped => return Err(crate::engine::Error::Stopped),
            WaitEnd::Failed(why) | WaitEnd::Canceled { why, .. } | WaitEnd::Abandoned(why) => {
                return failed_because(run, &mut rel, why).await;
            }
        }
    }
    if !spec.disable_hooks
        && let Err(e) = run
            .run_hooks(
                &mut rel.hooks,
                version,
                hook_event::POST_ROLLBACK,
                &ns,
                timeout,
            )
            .await
    {
        return failed_because(run, &mut rel, e.to_string()).await;
    }
    // As Helm: the revision rolled back from and any deployed one become superseded.
    supersede(run, history, |r| {
        r.version == current.version || is_deployed(r)
    })
    .await?;
    set_status(&mut rel, Status::Deployed, format!("Rollback to {to}"));
    run.storage.update(&rel).await?;
    run.prune_history(history, &rel).await;
    Ok(Outcome::Succeeded {
        reason: reason::ROLLBACK_SUCCEEDED,
        message: format!(
            "Helm rollback to revision {to} succeeded for release {ns}/{}.v{version}",
            run.target.release_name
        ),
    })
}

/// The new revision a rollback to `target` writes: `target`'s chart, values, manifest and
/// hooks, and the labels saying what it was made from, so the planner compares the
/// desired state with the restored one.
fn restored(run: &mut Run<'_>, history: &[Release], target: &Release, version: i32) -> Release {
    let to = target.version;
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
    for label in [
        super::SOURCE_COMMIT_LABEL,
        super::SOURCE_DIGEST_LABEL,
        super::common_metadata::COMMON_METADATA_LABEL,
        super::POST_RENDERERS_LABEL,
        super::VALUES_FILES_LABEL,
        crate::helm::release::SPEC_VALUES_LABEL,
    ] {
        if let Some(value) = target.labels.get(label) {
            rel.labels.insert(label.into(), value.clone());
        }
    }
    run.intent.masker.add_manifest_secrets(&rel.manifest);
    for hook in &rel.hooks {
        run.intent.masker.add_manifest_secrets(&hook.manifest);
    }
    let info = rel.info.get_or_insert_default();
    info.rollback_revision = to;
    if let Some(first) = history.iter().find_map(|r| r.info.as_ref()?.first_deployed) {
        info.first_deployed = Some(first);
    }
    rel
}

/// The pre-rollback hooks, the apply and the prune of what the restored manifest drops.
async fn apply_restored(
    run: &mut Run<'_>,
    rel: &mut Release,
    current: &Release,
    owner: &Owner<'_>,
    spec: &crate::api::Rollback,
    timeout: std::time::Duration,
) -> crate::engine::Result<()> {
    let (version, ns) = (rel.version, run.target.namespace.clone());
    if !spec.disable_hooks {
        run.run_hooks(
            &mut rel.hooks,
            version,
            hook_event::PRE_ROLLBACK,
            &ns,
            timeout,
        )
        .await?;
    }
    // As `helm rollback --cleanup-on-fail`: what this rollback's apply created (objects
    // that did not exist before it) is deleted when the apply fails; the rest stays.
    let absent = match spec.cleanup_on_fail {
        true => absent_objects(run, &rel.manifest, &ns).await?,
        false => Vec::new(),
    };
    if let Err(e) = run.acting.applier.apply_release(&rel.manifest, owner).await {
        if !absent.is_empty() {
            let created = crate::helm::apply::manifest::documents_of(&rel.manifest, &absent, &ns);
            if let Err(cleanup) = run.acting.applier.prune(&created, "", owner).await {
                tracing::warn!(release = %run.key, "rollback.cleanupOnFail could not delete what the failed rollback created: {cleanup}");
            }
        }
        return Err(e.into());
    }
    run.acting
        .applier
        .prune(&current.manifest, &rel.manifest, owner)
        .await?;
    Ok(())
}

/// The objects of `manifest` that do not exist now (kinds not served yet included).
async fn absent_objects(
    run: &Run<'_>,
    manifest: &str,
    namespace: &str,
) -> crate::engine::Result<Vec<crate::helm::apply::ObjectRef>> {
    use kube::api::{Api, DynamicObject};
    let applier = &run.acting.applier;
    let mut absent = Vec::new();
    for obj in crate::helm::apply::manifest::parse_manifest(manifest)? {
        let mut reference = crate::helm::apply::ObjectRef::from_object(&obj);
        let Some((resource, namespaced)) = applier
            .find_resource(&reference.api_version, &reference.kind)
            .await?
        else {
            absent.push(reference);
            continue;
        };
        let api: Api<DynamicObject> = if namespaced {
            let ns = reference
                .namespace
                .get_or_insert_with(|| namespace.to_owned());
            Api::namespaced_with(applier.client().clone(), ns, &resource)
        } else {
            reference.namespace = None;
            Api::all_with(applier.client().clone(), &resource)
        };
        if api.get_metadata_opt(&reference.name).await?.is_none() {
            absent.push(reference);
        }
    }
    Ok(absent)
}

/// Marks the rollback's revision failed because of `why`.
async fn failed_because(
    run: &Run<'_>,
    rel: &mut Release,
    why: String,
) -> crate::engine::Result<Outcome> {
    let description = format!("Rollback \"{}\" failed: {why}", run.target.release_name);
    record_failure(run, rel, description, reason::ROLLBACK_FAILED, why).await
}

/// A rollback is a `REMEDIATION`: Remediated, and Ready left to the step after it.
pub fn record(s: &mut HelmReleaseStatus, outcome: &Outcome, generation: Option<i64>) -> Note {
    record_as(&REMEDIATION, s, outcome, generation)
}

#[cfg(test)]
mod tests {
    use kube::runtime::events::EventType::{Normal, Warning};

    use super::*;
    use crate::api::ReleaseAction;
    use crate::engine::actions::testing::{Case, before, check, failed, succeeded};
    use crate::engine::status::Truth::False;
    use crate::engine::status::condition;
    use crate::engine::status::reason::*;

    #[test]
    fn rollback_outcomes_are_recorded() {
        // As a failed upgrade leaves a release the planner rolls back.
        let upgrade_failed = || {
            before(
                &[
                    (condition::READY, False, UPGRADE_FAILED),
                    (condition::RELEASED, False, UPGRADE_FAILED),
                ],
                (1, 0, 1),
                Some(ReleaseAction::Upgrade),
            )
        };
        check(
            record,
            vec![
                Case {
                    name: "rollback succeeds: Remediated, Ready still says why",
                    before: upgrade_failed(),
                    outcome: succeeded(ROLLBACK_SUCCEEDED),
                    conditions: &[
                        ("Ready", "False", UPGRADE_FAILED),
                        ("Released", "False", UPGRADE_FAILED),
                        ("Remediated", "True", ROLLBACK_SUCCEEDED),
                    ],
                    counters: (1, 0, 1),
                    event: (Normal, ROLLBACK_SUCCEEDED, None),
                },
                Case {
                    name: "rollback fails: a failure, but no upgrade retry used",
                    before: upgrade_failed(),
                    outcome: failed(ROLLBACK_FAILED),
                    conditions: &[
                        ("Ready", "False", ROLLBACK_FAILED),
                        ("Released", "False", UPGRADE_FAILED),
                        ("Remediated", "False", ROLLBACK_FAILED),
                    ],
                    counters: (2, 0, 1),
                    event: (Warning, ROLLBACK_FAILED, None),
                },
            ],
        );
    }
}

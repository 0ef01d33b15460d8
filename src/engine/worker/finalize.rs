//! Deleting a HelmRelease: its finalizer holds the object until the Helm release it
//! manages is uninstalled (unless it is suspended, or another HelmRelease manages that
//! release), then lets it go.

use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};

use super::{NEVER, RETRY};
use crate::api::FINALIZER;
use crate::engine::actions::{self, Outcome};
use crate::engine::claim;
use crate::engine::run::Run;
use crate::engine::status::reason;
use crate::helm::release::{Release, Status};

/// Sets the finalizer list, guarded by the object's current resourceVersion so a
/// concurrent change to the list is never overwritten.
async fn set_finalizers(run: &Run<'_>, change: impl Fn(&mut Vec<String>)) -> kube::Result<()> {
    let current = run.api.get(&run.key.name).await?;
    let mut finalizers = current.finalizers().to_vec();
    change(&mut finalizers);
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": current.metadata.resource_version,
    }});
    run.api
        .patch(&run.key.name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    Ok(())
}

pub(super) async fn add_finalizer(run: &Run<'_>) -> kube::Result<()> {
    set_finalizers(run, |f| {
        if !f.iter().any(|x| x == FINALIZER) {
            f.push(FINALIZER.into());
        }
    })
    .await
}

/// Deleting a HelmRelease uninstalls its release (unless suspended), then lets the
/// object go.
pub(super) async fn finalize(run: &mut Run<'_>) -> Duration {
    match finalize_inner(run).await {
        Ok(d) | Err(d) => d,
    }
}

/// Whether the release can be uninstalled as the identity it acts as. A ServiceAccount
/// that is gone (its namespace being deleted with everything in it, say) leaves the
/// release in place, as Flux does: no one else may uninstall it, and holding the
/// HelmRelease forever would hold the namespace's deletion too.
async fn uninstall_possible(run: &Run<'_>) -> Result<bool, Duration> {
    let crate::cluster::tenancy::Identity::ServiceAccount { namespace, name } =
        &run.acting.identity
    else {
        return Ok(true);
    };
    // Impersonated on a remote cluster, where the account is not the engine's to look
    // for (as in Flux, which looks only without a kubeConfig).
    if run.acting.remote.is_some() {
        return Ok(true);
    }
    match crate::cluster::tenancy::service_account_exists(&run.ctx.client, namespace, name).await {
        Ok(true) => Ok(true),
        Ok(false) => {
            let message = format!(
                "Helm release {}/{} left in place: ServiceAccount {namespace}/{name}, which the release acts as, no longer exists, so nothing may uninstall it for this HelmRelease",
                run.storage.namespace(),
                run.target.release_name
            );
            tracing::warn!(release = %run.key, "{message}");
            run.event(
                kube::runtime::events::EventType::Warning,
                reason::UNINSTALL_FAILED,
                "Uninstall",
                message,
            )
            .await;
            Ok(false)
        }
        Err(e) => {
            tracing::warn!(release = %run.key, error = %e, "cannot look up the ServiceAccount to uninstall as");
            Err(RETRY)
        }
    }
}

async fn finalize_inner(run: &mut Run<'_>) -> Result<Duration, Duration> {
    if !run.hr.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(NEVER);
    }
    if !run.hr.spec.suspend && uninstall_possible(run).await? {
        let history = match run.storage.history(&run.target.release_name).await {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(release = %run.key, error = %e, "cannot read Helm storage to uninstall");
                return Ok(RETRY);
            }
        };
        let live = is_live(&history);
        let uid = run.hr.metadata.uid.clone().unwrap_or_default();
        let claim = claim::Claim::of(history.last(), &uid);
        // Only a release this HelmRelease manages is uninstalled with it.
        let outcome = match (live, &claim) {
            (false, _) => None,
            (true, claim::Claim::Ours) => {
                run.record_acting().await;
                let uninstalled = actions::uninstall(run, &history).await;
                if let Ok(Outcome::Succeeded { .. }) = &uninstalled {
                    run.ctx.notifier.uninstalled(&run.hr, &run.status);
                }
                Some(uninstalled)
            }
            (true, other) => Some(Ok(Outcome::Succeeded {
                reason: reason::UNINSTALL_SUCCEEDED,
                message: format!(
                    "Helm release {}/{} left in place: it is managed by {}, not by this HelmRelease",
                    run.storage.namespace(),
                    run.target.release_name,
                    other.describe_owner()
                ),
            })),
        };
        if let Some(outcome) = outcome {
            let (note, done) = actions::uninstall::on_delete(&outcome);
            run.publish_note(note, "Uninstall").await;
            if !done {
                return Ok(RETRY);
            }
        }
    }
    if let Err(e) = set_finalizers(run, |f| f.retain(|x| x != FINALIZER)).await {
        tracing::warn!(release = %run.key, error = %e, "cannot remove finalizer");
        return Ok(RETRY);
    }
    run.memory.inbox.deleted = true;
    Ok(NEVER)
}

/// Whether the newest revision still stands for objects in the cluster (an uninstall
/// that kept its history leaves an `uninstalled` one).
fn is_live(history: &[Release]) -> bool {
    history.last().is_some_and(|r| {
        r.info
            .as_ref()
            .is_some_and(|i| i.status != Status::Uninstalled)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helm::release::Info;

    #[test]
    fn only_a_live_newest_revision_is_uninstalled() {
        let rel = |status: Option<Status>| Release {
            info: status.map(|status| Info {
                status,
                ..Info::default()
            }),
            ..Release::default()
        };
        let cases = [
            ("no history", vec![], false),
            ("deployed", vec![rel(Some(Status::Deployed))], true),
            ("failed", vec![rel(Some(Status::Failed))], true),
            (
                "uninstalled, history kept",
                vec![rel(Some(Status::Deployed)), rel(Some(Status::Uninstalled))],
                false,
            ),
            (
                "newest counts",
                vec![rel(Some(Status::Uninstalled)), rel(Some(Status::Deployed))],
                true,
            ),
            ("no info", vec![rel(None)], false),
        ];
        for (what, history, live) in cases {
            assert_eq!(is_live(&history), live, "{what}");
        }
    }
}

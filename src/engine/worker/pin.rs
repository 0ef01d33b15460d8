//! Roll back and pin: an operator's request (the `rollbackTo` annotation, written with
//! `spec.suspend: true` in one patch) to put back an earlier revision and keep it there.
//! The engine runs its own rollback action (a new revision, as `helm rollback`), records
//! the pin in status, and starts nothing else while the release stays suspended; on
//! resume the pin is dropped and the release returns to its spec like any change.

use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;

use super::guards::{Tenancy, claimed_elsewhere, identity_taken_elsewhere, tenancy};
use crate::api::{Pin, RollbackRequest, annotations};
use crate::engine::actions::{self, Outcome};
use crate::engine::run::Run;
use crate::engine::status::{self, Verdict, reason};

/// Whether the HelmRelease carries a rollback request at all (most never do: the
/// reconcile then skips [`pin_if_asked`]'s large future).
pub(super) fn asked(hr: &crate::api::HelmRelease) -> bool {
    RollbackRequest::of(hr).is_some()
}

/// Handles a rollbackTo request not handled yet. Suspended releases only: a rollback
/// that the next reconcile would undo pins nothing, so without suspend it is refused.
pub(super) async fn pin_if_asked(run: &mut Run<'_>) -> crate::engine::Result<()> {
    let Some(request) = RollbackRequest::of(&run.hr) else {
        return Ok(());
    };
    let token = run
        .hr
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::ROLLBACK_TO))
        .cloned()
        .unwrap_or_default();
    if run.status.last_handled_rollback_to.as_deref() == Some(token.as_str()) {
        return Ok(());
    }
    run.status.last_handled_rollback_to = Some(token);
    let request = match request {
        Ok(r) => r,
        Err(why) => return refuse(run, why).await,
    };
    let history = match refusal(run, &request).await? {
        Ok(history) => history,
        Err(why) => return refuse(run, why).await,
    };
    run.record_acting().await;
    let outcome = actions::rollback(run, &history, request.revision).await?;
    let after = run.storage.history(&run.target.release_name).await?;
    run.record_history(&after);
    record(run, &request, outcome, &after).await;
    Ok(())
}

/// Why the rollback may not run now (not suspended, refused by tenancy or a claim, another
/// operation in progress, no such revision), else the release's history.
async fn refusal(
    run: &mut Run<'_>,
    request: &RollbackRequest,
) -> crate::engine::Result<Result<Vec<crate::helm::release::Release>, String>> {
    if !run.hr.spec.suspend {
        let why = format!(
            "rollback to revision {} refused: a rollback pins the release and is honoured only \
             with spec.suspend: true in the same change (the next reconcile would undo it)",
            request.revision
        );
        return Ok(Err(why));
    }
    match tenancy(run).await? {
        Some(Tenancy::Refused(why) | Tenancy::MissingAccount(why)) => {
            return Ok(Err(why));
        }
        None => {}
    }
    if let Some(why) = claimed_elsewhere(run).await? {
        return Ok(Err(why));
    }
    if let Some(why) = identity_taken_elsewhere(run).await? {
        return Ok(Err(why));
    }
    let history = run.storage.history(&run.target.release_name).await?;
    if let Some(latest) = history.last()
        && let Some(info) = latest.info.as_ref()
        && info.status.is_pending()
    {
        let why = format!(
            "rollback to revision {} refused: revision {} is {}, another operation is in progress",
            request.revision,
            latest.version,
            info.status.as_str()
        );
        return Ok(Err(why));
    }
    if !history.iter().any(|r| r.version == request.revision) {
        let why = format!(
            "rollback refused: revision {} is not in Helm storage",
            request.revision
        );
        return Ok(Err(why));
    }
    Ok(Ok(history))
}

/// Records the rollback's outcome: the pin (Ready `Pinned`), or why it failed, the release
/// staying suspended either way.
async fn record(
    run: &mut Run<'_>,
    request: &RollbackRequest,
    outcome: Outcome,
    after: &[crate::helm::release::Release],
) {
    let generation = run.hr.metadata.generation;
    match outcome {
        Outcome::Succeeded { .. } => {
            let pin = Pin {
                revision: request.revision,
                recorded_as: after.last().map_or(0, |r| r.version),
                by: request.requested_by.clone(),
                at: Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            };
            let message = pin.message();
            let verdict = Verdict::Ready {
                reason: reason::PINNED,
                message: &message,
            };
            status::summarise(&mut run.status, verdict, generation);
            run.status.pinned = Some(pin);
            run.write_status().await;
            run.event(EventType::Normal, reason::PINNED, "Rollback", message)
                .await;
        }
        Outcome::Failed { message, .. }
        | Outcome::Blocked { message, .. }
        | Outcome::Canceled { message, .. } => {
            let message = format!(
                "rollback to revision {} (asked by {}) failed: {message}; the release stays \
                 suspended",
                request.revision,
                if request.requested_by.is_empty() {
                    "an operator"
                } else {
                    &request.requested_by
                }
            );
            let verdict = Verdict::Failing {
                reason: reason::ROLLBACK_FAILED,
                message: &message,
            };
            status::summarise(&mut run.status, verdict, generation);
            run.status.pinned = None;
            run.write_status().await;
            run.event(
                EventType::Warning,
                reason::ROLLBACK_FAILED,
                "Rollback",
                message,
            )
            .await;
        }
    }
}

/// A resumed release leaves its pin: the reconcile that follows returns it to the spec.
pub(super) async fn unpin_if_resumed(run: &mut Run<'_>) {
    if run.hr.spec.suspend {
        return;
    }
    if let Some(pin) = run.status.pinned.take() {
        let message = format!(
            "resumed: leaving revision {} (pinned by {}) for the spec",
            pin.revision,
            if pin.by.is_empty() {
                "an operator"
            } else {
                &pin.by
            }
        );
        run.event(EventType::Normal, reason::RESUMED, "Reconcile", message)
            .await;
    }
}

async fn refuse(run: &mut Run<'_>, why: String) -> crate::engine::Result<()> {
    tracing::warn!(release = %run.key, "{why}");
    run.write_status().await;
    run.event(
        EventType::Warning,
        reason::ROLLBACK_REFUSED,
        "Rollback",
        why,
    )
    .await;
    Ok(())
}

//! Uninstall: the remediation of a failed install (and of a failed upgrade with strategy
//! `uninstall`), and what deleting a HelmRelease runs. Hooks, delete the release's
//! objects, then keep the history as `uninstalled` or delete it.

use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;

use super::{Note, Outcome, REMEDIATION, record_as, record_failure, set_status};
use crate::api::HelmReleaseStatus;
use crate::engine::run::Run;
use crate::engine::status::reason;
use crate::engine::vocabulary::Phase;
use crate::helm::apply::Owner;
use crate::helm::release::{Release, Status, hook_event};

/// Uninstalls the release: hooks, delete its objects, then keep the history as
/// `uninstalled` or delete it.
pub async fn uninstall(run: &mut Run<'_>, history: &[Release]) -> crate::engine::Result<Outcome> {
    run.set_phase(Phase::Uninstalling);
    let Some(latest) = history.last() else {
        return Ok(Outcome::Succeeded {
            reason: reason::UNINSTALL_SUCCEEDED,
            message: "nothing to uninstall".into(),
        });
    };
    let spec = run.hr.spec.uninstall.clone().unwrap_or_default();
    let timeout = spec.timeout.unwrap_or(run.hr.spec.timeout).as_std();
    let ns = run.target.namespace.clone();
    let release_name = run.target.release_name.clone();
    // Objects another record of this (name, namespace) owns are never deleted, even when
    // this release's records list them too (written before identities were checked).
    let (client, records) = run.ctx.records_of(&run.acting);
    let elsewhere = crate::helm::release::stored_elsewhere(
        client,
        records,
        run.storage.namespace(),
        &release_name,
        &ns,
        run.hr.metadata.uid.as_deref(),
        run.storage.floor(),
    )
    .await?
    .map(|scan| scan.found)
    .unwrap_or_default();
    // Objects of an API group discovery cannot serve now can be neither read nor deleted.
    let unavailable = run.ctx.discover_for(&run.acting).await?.unavailable;
    let mut rel = latest.clone();
    set_status(
        &mut rel,
        Status::Uninstalling,
        "Deletion in progress (or silently failed)",
    );
    run.storage.update(&rel).await?;
    let owner = Owner::new(&release_name, &ns)
        .others(&elsewhere)
        .unavailable(&unavailable);
    let steps = async {
        if !spec.disable_hooks {
            run.run_hooks(
                &mut rel.hooks,
                rel.version,
                hook_event::PRE_DELETE,
                &ns,
                timeout,
            )
            .await?;
        }
        let removed = run
            .acting
            .applier
            .delete(&rel.manifest, &owner, spec.deletion_propagation)
            .await?;
        if !spec.disable_hooks {
            run.run_hooks(
                &mut rel.hooks,
                rel.version,
                hook_event::POST_DELETE,
                &ns,
                timeout,
            )
            .await?;
        }
        Ok::<_, crate::engine::Error>(removed)
    }
    .await;
    let removed = match steps {
        Ok(removed) => removed,
        Err(e) => {
            return record_failure(
                run,
                &mut rel,
                format!("uninstallation failed: {e}"),
                reason::UNINSTALL_FAILED,
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
        run.target.release_name, latest.version
    );
    if let Some(note) = removed.foreign_note() {
        message.push_str("; ");
        message.push_str(&note);
    }
    Ok(Outcome::Succeeded {
        reason: reason::UNINSTALL_SUCCEEDED,
        message,
    })
}

/// An uninstall is a `REMEDIATION`: Remediated, and Ready left to the install after it.
pub fn record(s: &mut HelmReleaseStatus, outcome: &Outcome, generation: Option<i64>) -> Note {
    record_as(&REMEDIATION, s, outcome, generation)
}

/// The uninstall run by deleting a HelmRelease is told by an Event only (the object and
/// its status go); true when the finalizer may go, false when it is tried again.
pub fn on_delete(result: &crate::engine::Result<Outcome>) -> (Note, bool) {
    let (type_, reason, message) = match result {
        Ok(Outcome::Succeeded { message, .. }) => (
            EventType::Normal,
            reason::UNINSTALL_SUCCEEDED,
            message.clone(),
        ),
        Ok(
            Outcome::Failed { message, .. }
            | Outcome::Canceled { message, .. }
            | Outcome::Blocked { message, .. },
        ) => (
            EventType::Warning,
            reason::UNINSTALL_FAILED,
            message.clone(),
        ),
        Err(e) => (EventType::Warning, reason::UNINSTALL_FAILED, e.to_string()),
    };
    let note = Note {
        type_,
        reason,
        action: Some("Uninstall"),
        message,
    };
    (note, type_ == EventType::Normal)
}

#[cfg(test)]
mod tests {
    use kube::runtime::events::EventType::{Normal, Warning};

    use super::*;
    use crate::api::ReleaseAction;
    use crate::engine::actions::testing::{Case, before, canceled, check, failed, succeeded};
    use crate::engine::status::Truth::{False, True};
    use crate::engine::status::condition;
    use crate::engine::status::reason::*;

    #[test]
    fn uninstall_outcomes_are_recorded() {
        // As a failed install leaves a release the planner uninstalls.
        let install_failed = || {
            before(
                &[
                    (condition::READY, False, INSTALL_FAILED),
                    (condition::RELEASED, False, INSTALL_FAILED),
                    (condition::REMEDIATED, True, UNINSTALL_SUCCEEDED),
                ],
                (2, 2, 0),
                Some(ReleaseAction::Install),
            )
        };
        check(
            record,
            vec![
                Case {
                    name: "uninstall succeeds: Remediated, Ready still says why",
                    before: install_failed(),
                    outcome: succeeded(UNINSTALL_SUCCEEDED),
                    conditions: &[
                        ("Ready", "False", INSTALL_FAILED),
                        ("Released", "False", INSTALL_FAILED),
                        ("Remediated", "True", UNINSTALL_SUCCEEDED),
                    ],
                    counters: (2, 2, 0),
                    event: (Normal, UNINSTALL_SUCCEEDED, None),
                },
                Case {
                    name: "uninstall fails: a failure, but no install retry used",
                    before: install_failed(),
                    outcome: failed(UNINSTALL_FAILED),
                    conditions: &[
                        ("Ready", "False", UNINSTALL_FAILED),
                        ("Released", "False", INSTALL_FAILED),
                        ("Remediated", "False", UNINSTALL_FAILED),
                    ],
                    counters: (3, 2, 0),
                    event: (Warning, UNINSTALL_FAILED, None),
                },
            ],
        );
    }

    #[test]
    fn deleting_a_helmrelease_lets_it_go_only_after_an_uninstall() {
        let cases: Vec<(crate::engine::Result<Outcome>, Note, bool)> = vec![
            (
                Ok(succeeded(UNINSTALL_SUCCEEDED)),
                note(Normal, UNINSTALL_SUCCEEDED, "it worked"),
                true,
            ),
            (
                Ok(failed(UNINSTALL_FAILED)),
                note(Warning, UNINSTALL_FAILED, "it broke"),
                false,
            ),
            (
                Ok(canceled(true)),
                note(Warning, UNINSTALL_FAILED, "health check canceled"),
                false,
            ),
            (
                Err(crate::engine::Error::Stopped),
                note(
                    Warning,
                    UNINSTALL_FAILED,
                    &crate::engine::Error::Stopped.to_string(),
                ),
                false,
            ),
        ];
        for (result, expected, done) in cases {
            assert_eq!(on_delete(&result), (expected, done), "{result:?}");
        }
    }

    fn note(type_: EventType, reason: &'static str, message: &str) -> Note {
        Note {
            type_,
            reason,
            action: Some("Uninstall"),
            message: message.into(),
        }
    }
}

//! Unlock: a revision left `pending-*` (or `uninstalling`) by an engine that stopped
//! mid-action would make Helm refuse every further operation, so it is marked failed,
//! with a description the planner recognises, and work goes on.

use super::{Note, Outcome, Owns, record_as, set_status};
use crate::api::HelmReleaseStatus;
use crate::engine::Phase;
use crate::engine::status::reason;
use crate::engine::worker::Run;
use crate::release::{Release, Status};

/// Begins the description of a revision this action unlocked, so the planner retries
/// it instead of remediating it: its failure was the engine's, not the release's.
pub const INTERRUPTED_PREFIX: &str = "Release was left";

/// A revision left `pending-*` (or `uninstalling`) by an engine that stopped mid-action:
/// Helm would refuse every further operation, so mark it failed and go on.
pub async fn unlock(run: &mut Run<'_>, mut latest: Release) -> crate::Result<Outcome> {
    run.set_phase(Phase::Unlocking);
    let was = latest.info.as_ref().map(|i| i.status).unwrap_or_default();
    set_status(&mut latest, Status::Failed, description(was));
    run.storage.update(&latest).await?;
    Ok(Outcome::Succeeded {
        reason: reason::UNLOCKED,
        message: format!("unlocked revision {} (was {was})", latest.version),
    })
}

/// What the unlocked revision says in Helm's history (`helm history` shows it).
pub(crate) fn description(was: Status) -> String {
    format!(
        "{INTERRUPTED_PREFIX} {was} by an engine that stopped before finishing; marked failed by wheelhouse to unlock it"
    )
}

/// Unlocking only clears the way: it owns no condition, leaves Ready to the action
/// after it, and counts no failure. Only the Event tells of it.
pub fn record(s: &mut HelmReleaseStatus, outcome: &Outcome, generation: Option<i64>) -> Note {
    let owns = Owns {
        condition: None,
        ready: false,
        counts_against: None,
    };
    record_as(&owns, s, outcome, generation)
}

#[cfg(test)]
mod tests {
    use kube::runtime::events::EventType::Normal;

    use super::*;
    use crate::api::ReleaseAction;
    use crate::engine::actions::testing::{Case, before, check, succeeded};
    use crate::engine::status::Truth::True;
    use crate::engine::status::condition;
    use crate::engine::status::reason::*;

    #[test]
    fn an_unlock_is_told_by_its_event_only() {
        let running = || {
            before(
                &[
                    (condition::RECONCILING, True, PROGRESSING),
                    (condition::READY, True, UPGRADE_SUCCEEDED),
                ],
                (1, 0, 1),
                Some(ReleaseAction::Upgrade),
            )
        };
        check(
            record,
            vec![Case {
                name: "unlocked: nothing in status changes",
                before: running(),
                outcome: succeeded(UNLOCKED),
                conditions: &[
                    ("Reconciling", "True", PROGRESSING),
                    ("Ready", "True", UPGRADE_SUCCEEDED),
                ],
                counters: (1, 0, 1),
                event: (Normal, UNLOCKED, None),
            }],
        );
    }

    #[test]
    fn the_unlocked_revision_says_what_it_was_left_in() {
        let cases = [
            (Status::PendingInstall, "pending-install"),
            (Status::PendingUpgrade, "pending-upgrade"),
            (Status::PendingRollback, "pending-rollback"),
            (Status::Uninstalling, "uninstalling"),
        ];
        for (was, shown) in cases {
            assert_eq!(
                description(was),
                format!(
                    "Release was left {shown} by an engine that stopped before finishing; marked failed by wheelhouse to unlock it"
                )
            );
        }
    }
}

//! Unlock: a revision left `pending-*` (or `uninstalling`) by an engine that stopped
//! mid-action would make Helm refuse every further operation, so it is marked failed,
//! with a description the planner recognises, and work goes on.

use super::{Note, Outcome, Owns, record_as, set_status};
use crate::api::HelmReleaseStatus;
use crate::engine::run::{Requeue, Run};
use crate::engine::status::{self, Verdict, reason};
use crate::engine::vocabulary::Phase;
use crate::helm::release::{Release, Status};

/// Begins the description of a revision this action unlocked, so the planner retries
/// it instead of remediating it: its failure was the engine's, not the release's.
pub const INTERRUPTED_PREFIX: &str = "Release was left";

/// A revision left `pending-*` (or `uninstalling`) by an engine that stopped mid-action:
/// Helm would refuse every further operation, so mark it failed and go on.
pub async fn unlock(run: &mut Run<'_>, mut latest: Release) -> crate::engine::Result<Outcome> {
    run.set_phase(Phase::Unlocking);
    let was = latest.info.as_ref().map(|i| i.status).unwrap_or_default();
    set_status(&mut latest, Status::Failed, description(was));
    run.storage.update(&latest).await?;
    Ok(Outcome::Succeeded {
        reason: reason::UNLOCKED,
        message: format!("unlocked revision {} (was {was})", latest.version),
    })
}

/// A pending revision the helm CLI (or Flux) wrote, whose operation may still run: a
/// second writer now would leave helm reporting values that are not running. Said in
/// Reconciling; returns when to look again (soon: the other tool's operation usually
/// ends first), or None when it is an engine's to unlock now.
pub(super) async fn left_to_another_tool(
    run: &mut Run<'_>,
    revision: i32,
    latest: &Release,
) -> Option<Requeue> {
    let left = other_tool_still_running(
        latest,
        OTHER_TOOL_BOUND.max(run.hr.spec.timeout.as_std()),
        k8s_openapi::jiff::Timestamp::now(),
    )?;
    let status = latest.info.as_ref().map(|i| i.status).unwrap_or_default();
    let message = format!(
        "revision {revision} is {status}, written by another tool (the helm CLI or Flux), whose operation may still be running; wheelhouse leaves it alone for up to {}s more (Helm's default wait is 5m), then marks it failed and goes on",
        left.as_secs()
    );
    let generation = run.hr.metadata.generation;
    let verdict = Verdict::Reconciling {
        reason: reason::PROGRESSING,
        message: &message,
    };
    status::summarise(&mut run.status, verdict, generation);
    run.write_status().await;
    tracing::info!(release = %run.key, revision, "pending revision of another tool left alone");
    Some(Requeue::After(left.min(std::time::Duration::from_secs(2))))
}

/// How long a `pending-*` revision that no wheelhouse engine wrote (the helm CLI, Flux) is
/// left alone: its operation may still be running, and Helm's default wait is 5 minutes.
/// A HelmRelease whose `timeout` is longer waits that long instead.
pub const OTHER_TOOL_BOUND: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// For a revision another tool left pending: how long it is still left alone, counted from
/// when that tool wrote it (`info.last_deployed`). `None` once the bound has passed, for a
/// revision a wheelhouse engine wrote (it carries the engine's owner label while pending),
/// or for one that is not pending.
pub fn other_tool_still_running(
    latest: &Release,
    bound: std::time::Duration,
    now: crate::helm::release::Timestamp,
) -> Option<std::time::Duration> {
    let info = latest.info.as_ref()?;
    if !info.status.is_pending() || latest.labels.contains_key(super::OWNER_LABEL) {
        return None;
    }
    let written = info.last_deployed?;
    let age = now.duration_since(written).as_secs().max(0) as u64;
    bound
        .as_secs()
        .checked_sub(age)
        .filter(|left| *left > 0)
        .map(std::time::Duration::from_secs)
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
    fn a_revision_another_tool_left_pending_is_left_alone_for_the_bound() {
        use crate::helm::release::{Info, Timestamp};
        use std::time::Duration;
        let now: Timestamp = "2026-11-23T12:00:00Z".parse().unwrap();
        let rel = |status: Status, ago: u64, ours: bool| Release {
            info: Some(Info {
                status,
                last_deployed: Some(now - Duration::from_secs(ago)),
                ..Info::default()
            }),
            labels: if ours {
                [(
                    crate::engine::actions::OWNER_LABEL.to_string(),
                    "engine-a".to_string(),
                )]
                .into()
            } else {
                Default::default()
            },
            ..Release::default()
        };
        let bound = OTHER_TOOL_BOUND;
        let cases = [
            (
                "helm CLI, written 10 s ago",
                rel(Status::PendingUpgrade, 10, false),
                Some(290),
            ),
            (
                "helm CLI, past the bound",
                rel(Status::PendingInstall, 301, false),
                None,
            ),
            (
                "written by a wheelhouse engine",
                rel(Status::PendingUpgrade, 10, true),
                None,
            ),
            ("not pending", rel(Status::Deployed, 10, false), None),
        ];
        for (what, release, left) in cases {
            assert_eq!(
                other_tool_still_running(&release, bound, now).map(|d| d.as_secs()),
                left,
                "{what}"
            );
        }
    }

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

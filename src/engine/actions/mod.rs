//! The release actions, one file each, in the style of Flux helm-controller's
//! reconcilers: the action's steps, in the order Helm runs them (record the pending
//! revision, hooks, apply and prune, wait, post hooks, record the result), and beside
//! them the bookkeeping of its outcome in status (`record`: conditions, failure counters,
//! the Event). Only the wait can be cancelled; apply and hooks always run to completion
//! (docs/design.md, "Cancellation: a wait, never an apply").
//!
//! - `install_or_upgrade`: one body for both, as Helm's install and upgrade share their
//!   steps; failures count against the install or the upgrade retries.
//! - `test`: the chart's test hooks against the newest revision.
//! - `rollback`, `uninstall`: the remediations of a failed release.
//! - `unlock`: frees a revision an engine left pending when it stopped (and leaves one
//!   another tool's operation may still be writing alone for a while).
//!
//! [`run`] is the one place the planner's [`Next`] becomes an action.

pub mod common_metadata;
pub mod install_or_upgrade;
pub mod rollback;
pub mod test;
pub mod uninstall;
pub mod unlock;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;

pub use install_or_upgrade::install_or_upgrade;
pub use rollback::rollback;
pub use test::test;
pub use uninstall::uninstall;
pub use unlock::unlock;

use super::plan::Next;
use super::run::{Prepared, Requeue, Run};
use super::status::{self, Truth, condition, reason};
use crate::api::{HelmReleaseStatus, ReleaseAction};
use crate::helm::chart::Chart;
use crate::helm::release::{Info, Release, Status};
use crate::helm::render::Rendered;

/// What the planner's next action needs beside the run: the desired state, and the
/// history the planner read.
pub struct Step<'s> {
    pub prepared: &'s Prepared,
    /// The desired state rendered already (a wait superseded by it did), else rendered by
    /// the install or upgrade.
    pub rendered: Option<Rendered>,
    pub latest: Option<&'s Release>,
    pub history: &'s [Release],
}

/// How running the planner's action ended: its outcome with the bookkeeping that records
/// it, or held before it began, with when to look again.
pub enum Ran {
    Done(Outcome, Record),
    Held(Requeue),
}

/// Runs the action the planner chose. `InSync` and `Stalled` are not actions: the
/// reconcile records those itself, and never passes them here.
pub async fn run(run: &mut Run<'_>, next: &Next, step: Step<'_>) -> crate::engine::Result<Ran> {
    let existing = |what: &str| {
        step.latest
            .cloned()
            .unwrap_or_else(|| panic!("the planner {what} an existing revision"))
    };
    // Each action boxed: the reconcile's own future (allocated at every interval check)
    // stays small.
    Ok(match next {
        Next::Install | Next::Upgrade => Ran::Done(
            Box::pin(install_or_upgrade(
                run,
                step.prepared,
                step.rendered,
                step.latest,
                step.history,
            ))
            .await?,
            install_or_upgrade::record,
        ),
        Next::Resume { .. } => Ran::Done(
            Box::pin(install_or_upgrade::resume(
                run,
                step.prepared,
                existing("resumes"),
                step.history,
            ))
            .await?,
            install_or_upgrade::record,
        ),
        Next::Test => Ran::Done(Box::pin(test(run, existing("tests"))).await?, test::record),
        Next::Rollback { to } => Ran::Done(
            Box::pin(rollback(run, step.history, *to)).await?,
            rollback::record,
        ),
        Next::Uninstall => Ran::Done(
            Box::pin(uninstall(run, step.history)).await?,
            uninstall::record,
        ),
        Next::Unlock { revision } => {
            let latest = existing("unlocks");
            match unlock::left_to_another_tool(run, *revision, &latest).await {
                Some(requeue) => Ran::Held(requeue),
                None => Ran::Done(Box::pin(unlock(run, latest)).await?, unlock::record),
            }
        }
        Next::InSync | Next::Stalled { .. } => {
            unreachable!("{next:?} is no action: the reconcile records it")
        }
    })
}

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
    /// The action could not go on because of the cluster (the API server refused, did not
    /// answer, or cannot discover a group the release needs): the cluster's failure, not
    /// the release's. It costs no retry, never stalls the release, and is tried again with
    /// backoff.
    Blocked {
        reason: &'static str,
        message: String,
    },
}

impl Outcome {
    /// A failure of the action, or a block when `error` is the cluster's.
    pub fn failed_by(reason: &'static str, message: String, error: &crate::engine::Error) -> Self {
        // The engine's own render helper failed: nothing about the release failed at all.
        if let crate::engine::Error::Render(crate::helm::render::Error::Helper { fault }) = error {
            return Self::Blocked {
                reason: reason::PROGRESSING,
                message: format!(
                    "held up by the engine: its render helper {fault} rendering this release, twice; a new helper is started and the release is tried again (no retry is counted)"
                ),
            };
        }
        match error.cluster_cause() {
            Some(cause) => Self::Blocked {
                reason,
                message: format!(
                    "{message} ({cause}: the cluster's failure, not the release's; it costs no retry and is tried again)"
                ),
            },
            None => Self::Failed { reason, message },
        }
    }
}

/// Begins the description of a revision that failed because of the cluster: like an
/// interrupted one, it is tried again instead of remediated.
pub const CLUSTER_FAILURE_PREFIX: &str = "Release failed on the cluster's account";

/// The Event that tells of an outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub type_: EventType,
    pub reason: &'static str,
    /// The Event's action when it is not the action that ran (a cancelled wait is told
    /// as `Wait`); None leaves it to the caller, who knows the action and its revision.
    pub action: Option<&'static str>,
    pub message: String,
}

/// An action's bookkeeping: records its outcome in the status as it was before, and
/// says which Event tells of it. Pure, so each is table-tested beside its action.
pub type Record = fn(&mut HelmReleaseStatus, &Outcome, Option<i64>) -> Note;

/// What an action's outcome touches in status; each action's `record` says its own.
struct Owns {
    /// Its condition, True on success and False on failure (None: it has none).
    condition: Option<&'static str>,
    /// Its success makes the release Ready (a remediation leaves that to the next step).
    ready: bool,
    /// Whose retries a failure (or an operator's cancel) uses up, besides `failures`.
    counts_against: Option<ReleaseAction>,
}

/// A remediation (rollback, uninstall) owns Remediated and leaves Ready to the step after
/// it: the planner looks again (tests, or an attempt at the desired state). It is not an
/// attempt at the desired state, so a failure uses up no install or upgrade retry.
const REMEDIATION: Owns = Owns {
    condition: Some(condition::REMEDIATED),
    ready: false,
    counts_against: None,
};

/// The bookkeeping all actions share, shaped by what the action owns.
fn record_as(
    owns: &Owns,
    s: &mut HelmReleaseStatus,
    outcome: &Outcome,
    generation: Option<i64>,
) -> Note {
    match outcome {
        Outcome::Succeeded { reason: r, message } => {
            let ready = owns.ready.then_some(condition::READY);
            for type_ in owns.condition.into_iter().chain(ready) {
                status::set(s, type_, Truth::True, r, message.clone(), generation);
            }
            note(EventType::Normal, r, None, message)
        }
        Outcome::Failed { reason: r, message } => {
            count_failure(s, owns.counts_against);
            for type_ in owns.condition.into_iter().chain([condition::READY]) {
                status::set(s, type_, Truth::False, r, message.clone(), generation);
            }
            note(EventType::Warning, r, None, message)
        }
        Outcome::Blocked { reason: r, message } => {
            // Held up by the engine itself (Progressing) is no failure: Ready is Unknown.
            let truth = if *r == reason::PROGRESSING {
                Truth::Unknown
            } else {
                Truth::False
            };
            for type_ in owns.condition.into_iter().chain([condition::READY]) {
                status::set(s, type_, truth, r, message.clone(), generation);
            }
            note(EventType::Warning, r, None, message)
        }
        Outcome::Canceled {
            by_operator,
            message,
        } => {
            // Superseded by a newer desired state is no failure (docs/design.md, "A superseded wait is no failure").
            if *by_operator {
                count_failure(s, owns.counts_against);
            }
            let r = reason::HEALTH_CHECK_CANCELED;
            status::set(
                s,
                condition::READY,
                Truth::False,
                r,
                message.clone(),
                generation,
            );
            note(EventType::Warning, r, Some("Wait"), message)
        }
    }
}

fn count_failure(s: &mut HelmReleaseStatus, against: Option<ReleaseAction>) {
    s.failures += 1;
    match against {
        Some(ReleaseAction::Install) => s.install_failures += 1,
        Some(ReleaseAction::Upgrade) => s.upgrade_failures += 1,
        None => {}
    }
}

fn note(
    type_: EventType,
    reason: &'static str,
    action: Option<&'static str>,
    message: &str,
) -> Note {
    Note {
        type_,
        reason,
        action,
        message: message.to_owned(),
    }
}

pub const OWNER_LABEL: &str = "wheelhouse.dev/owner";
pub use crate::helm::release::{
    POST_RENDERERS_LABEL, SOURCE_COMMIT_LABEL, SOURCE_DIGEST_KEPT, SOURCE_DIGEST_LABEL,
    VALUES_FILES_LABEL,
};

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
        name: run.target.release_name.clone(),
        namespace: run.target.namespace.clone(),
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
    rel.labels.insert(
        crate::helm::release::MADE_BY_LABEL.into(),
        "wheelhouse".into(),
    );
    // Said now, so its updates need not read the stored record to keep it.
    crate::helm::release::storage::created_now(&mut rel);
    if run.target.claim {
        rel.labels.extend(super::claim::labels(&run.hr));
    }
    rel
}

/// How an action applies: server-side, or Helm's client-side apply with what computes its
/// patches. `Err`: why it cannot apply as asked.
pub(crate) enum ApplyMethod {
    ServerSide,
    ClientSide(std::sync::Arc<dyn crate::helm::apply::client_side::ClientSidePatcher>),
}

impl ApplyMethod {
    /// `server_side` as the spec decided it; `asked`: the spec said `disabled` (else it
    /// followed an earlier client-side revision with `auto`).
    pub(crate) fn choose(run: &Run<'_>, server_side: bool, asked: bool) -> Result<Self, String> {
        if server_side {
            return Ok(Self::ServerSide);
        }
        match run.ctx.renderer.client_side() {
            Some(patcher) => Ok(Self::ClientSide(patcher)),
            None if asked => Err(NO_CLIENT_SIDE.into()),
            None => {
                // The helm CLI renderer cannot compute Helm's patches: as `--server-side=true`
                // would, the release moves to server-side apply (its fields handed over).
                tracing::info!(release = %run.key, "the newest revision was applied client-side; the helm CLI renderer applies server-side");
                Ok(Self::ServerSide)
            }
        }
    }

    /// The apply method `auto` follows after `revision`: its own when wheelhouse wrote it
    /// (a client-side apply the spec asked for stays client-side); server-side after
    /// another tool's revision, client-side or Helm 3's, where Helm would go on
    /// client-side: its three-way patch sets back every rendered field another manager
    /// changed, which wheelhouse does only when asked (`disabled`, `forceConflicts`), so the
    /// release moves to server-side apply with the `helm` fields handed over, as
    /// `--server-side=true` does.
    pub(crate) fn followed(revision: &crate::helm::release::Release) -> Option<&str> {
        let ours = revision
            .labels
            .get(crate::helm::release::MADE_BY_LABEL)
            .is_some_and(|v| v == "wheelhouse");
        if ours {
            revision.apply_method.as_deref()
        } else {
            Some("ssa")
        }
    }

    /// Helm's `applyMethod` of the revision this makes.
    pub(crate) fn recorded(&self) -> &'static str {
        match self {
            Self::ServerSide => "ssa",
            Self::ClientSide(_) => "csa",
        }
    }
}

/// Why a release that asks for client-side apply cannot be reconciled here.
const NO_CLIENT_SIDE: &str = "serverSideApply disabled needs the render helper, which computes Helm's client-side patches: the helm CLI renderer (--renderer helm, WHEELHOUSE_RENDERER=helm) cannot; run the engine with the render helper (the default renderer, wheelhouse-render)";

/// Marks the revision failed in Helm storage and reports the failure.
async fn record_failure(
    run: &Run<'_>,
    rel: &mut Release,
    description: String,
    reason: &'static str,
    message: String,
) -> crate::engine::Result<Outcome> {
    set_status(rel, Status::Failed, run.intent.masker.mask(&description));
    run.storage.update(rel).await?;
    Ok(Outcome::Failed {
        reason,
        message: run.intent.masker.mask(&message),
    })
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

/// Marks `superseded` the revisions in `history` that `replaced` says the new, deployed
/// revision replaces; their times stay as they were.
async fn supersede(
    run: &Run<'_>,
    history: &[Release],
    replaced: impl Fn(&Release) -> bool,
) -> crate::engine::Result<()> {
    for old in history.iter().filter(|r| replaced(r)) {
        let mut old = old.clone();
        if let Some(info) = old.info.as_mut() {
            info.status = Status::Superseded;
        }
        run.storage.update(&old).await?;
    }
    Ok(())
}

fn is_deployed(rel: &Release) -> bool {
    rel.info
        .as_ref()
        .is_some_and(|i| i.status == Status::Deployed)
}

/// The table the actions' bookkeeping is tested with.
#[cfg(test)]
mod testing {
    use super::*;

    /// One row: a status before, an outcome, and what the bookkeeping makes of them.
    pub struct Case {
        pub name: &'static str,
        pub before: HelmReleaseStatus,
        pub outcome: Outcome,
        /// (type, status, reason) of every condition after, in order.
        pub conditions: &'static [(&'static str, &'static str, &'static str)],
        /// (failures, installFailures, upgradeFailures) after.
        pub counters: (i64, i64, i64),
        /// The Event: type, reason, and its action when not the action that ran.
        pub event: (EventType, &'static str, Option<&'static str>),
    }

    /// A status with `conditions` (type, status, reason), the counters
    /// (failures, installFailures, upgradeFailures), and `action` last attempted.
    pub fn before(
        conditions: &[(&str, Truth, &str)],
        counters: (i64, i64, i64),
        action: Option<ReleaseAction>,
    ) -> HelmReleaseStatus {
        let mut s = HelmReleaseStatus {
            failures: counters.0,
            install_failures: counters.1,
            upgrade_failures: counters.2,
            last_attempted_release_action: action,
            ..HelmReleaseStatus::default()
        };
        for (type_, truth, reason) in conditions {
            status::set(&mut s, type_, *truth, reason, "before", Some(1));
        }
        s
    }

    pub fn succeeded(reason: &'static str) -> Outcome {
        Outcome::Succeeded {
            reason,
            message: "it worked".into(),
        }
    }

    pub fn failed(reason: &'static str) -> Outcome {
        Outcome::Failed {
            reason,
            message: "it broke".into(),
        }
    }

    pub fn canceled(by_operator: bool) -> Outcome {
        Outcome::Canceled {
            by_operator,
            message: "health check canceled".into(),
        }
    }

    /// Runs `record` over `cases`. Conditions it sets carry the outcome's message and
    /// the generation it is given; nothing but conditions and counters changes.
    pub fn check(record: Record, cases: Vec<Case>) {
        for c in cases {
            let mut s = c.before.clone();
            let note = record(&mut s, &c.outcome, Some(2));
            let name = c.name;
            let got: Vec<_> = s
                .conditions
                .iter()
                .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
                .collect();
            assert_eq!(got, c.conditions, "{name}: conditions");
            let counters = (s.failures, s.install_failures, s.upgrade_failures);
            assert_eq!(counters, c.counters, "{name}: counters");
            assert_eq!(
                (note.type_, note.reason, note.action),
                c.event,
                "{name}: event"
            );
            let (Outcome::Succeeded { message, .. }
            | Outcome::Failed { message, .. }
            | Outcome::Canceled { message, .. }
            | Outcome::Blocked { message, .. }) = &c.outcome;
            assert_eq!(&note.message, message, "{name}: event message");
            for cond in s.conditions.iter().filter(|c| c.message != "before") {
                assert_eq!(&cond.message, message, "{name}: {} message", cond.type_);
                assert_eq!(cond.observed_generation, Some(2), "{name}: {}", cond.type_);
            }
            s.conditions.clone_from(&c.before.conditions);
            (s.failures, s.install_failures, s.upgrade_failures) = (
                c.before.failures,
                c.before.install_failures,
                c.before.upgrade_failures,
            );
            assert_eq!(s, c.before, "{name}: nothing else changes");
        }
    }
}

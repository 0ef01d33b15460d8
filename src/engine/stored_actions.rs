//! Actions on a Helm release that no HelmRelease manages (the helm CLI's): rollback and
//! uninstall, run by the engine's own action code exactly as `helm rollback` and
//! `helm uninstall` do with their defaults (hooks run, no wait for resources, history
//! kept to 10 revisions by rollback, deleted by uninstall).
//!
//! The actions take a [`Run`], which reconciles stand for a HelmRelease; here it stands
//! for a HelmRelease that exists only in memory, naming the release, its namespaces and
//! Helm's defaults. Nothing is written to any HelmRelease, and the records written carry
//! no claim of one (the release stays the helm CLI's).

use std::sync::Arc;

use kube::Api;
use tokio_util::sync::CancellationToken;

use super::actions::{Outcome, rollback, uninstall};
use super::run::{Context, Intent, Memory, Precedence, Run, Target, Trail};
use super::vocabulary::ReleaseKey;
use crate::api::{HelmRelease, HelmReleaseSpec, Rollback, Uninstall};
use crate::helm::release::{Release, Storage};

/// What an operator can do to a stored release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredAction {
    /// `helm rollback NAME REVISION`.
    Rollback { to: i32 },
    /// `helm uninstall NAME`.
    Uninstall,
}

impl StoredAction {
    pub fn describe(self, key: &ReleaseKey) -> String {
        match self {
            Self::Rollback { to } => format!("roll back {key} to revision {to}"),
            Self::Uninstall => format!("uninstall {key}"),
        }
    }
}

/// Why a stored action did not happen, or did not end well: said to the operator.
pub type Refusal = String;

/// Runs `action` on the release stored as `key` (storage namespace, release name) and
/// returns what Helm would print.
pub async fn act(
    ctx: &Context,
    key: &ReleaseKey,
    action: StoredAction,
    stop: &CancellationToken,
) -> Result<String, Refusal> {
    // As whom the helm CLI's release is acted on: the namespace's default service account
    // under lockdown, as for any release there.
    let acting = ctx.acting(&ctx.policy().identity_in(&key.namespace, None));
    let storage = Storage::new(acting.client.clone(), &key.namespace);
    let history = storage
        .history(&key.name)
        .await
        .map_err(|e| format!("cannot read Helm's storage: {e}"))?;
    let Some(latest) = history.last() else {
        return Err(format!(
            "release: not found ({key} has no record in Helm's storage)"
        ));
    };
    // As Helm: one operation at a time.
    if latest.info.as_ref().is_some_and(|i| i.status.is_pending()) {
        return Err(format!(
            "another operation (install/upgrade/rollback) is in progress on {key} (revision {} is {})",
            latest.version,
            latest
                .info
                .as_ref()
                .map(|i| i.status.as_str())
                .unwrap_or("pending")
        ));
    }
    if let StoredAction::Rollback { to } = action
        && !history.iter().any(|r| r.version == to)
    {
        return Err(format!("release has no {to} version"));
    }
    let hr = Arc::new(stand_in(key, latest));
    let elsewhere = crate::helm::release::stored_elsewhere(
        &ctx.client,
        &ctx.known.records,
        &key.namespace,
        &key.name,
        &latest.namespace,
        None,
        &crate::helm::release::ReadFloor::default(),
    )
    .await
    .map_err(|e| e.to_string())?
    .map(|scan| scan.found)
    .unwrap_or_default();
    // Nothing sends to this mailbox: the stand-in never changes while the action runs.
    let (_keep, rx) = crate::engine::mailbox::mailbox();
    let mut memory = Memory::new(rx, hr.clone());
    let mut run = Run {
        ctx,
        acting,
        key: key.clone(),
        target: Target {
            release_name: key.name.clone(),
            namespace: latest.namespace.clone(),
            elsewhere,
            claim: false,
        },
        storage,
        status: Default::default(),
        hr: hr.clone(),
        api: Api::namespaced(ctx.client.clone(), &key.namespace),
        memory: &mut memory,
        stop,
        intent: Intent::default(),
        // An operator's action.
        precedence: Precedence {
            priority: crate::cluster::slots::Priority::Urgent,
            ..Precedence::routine(None)
        },
        trail: Trail::default(),
    };
    let outcome = match action {
        StoredAction::Rollback { to } => rollback::rollback(&mut run, &history, to).await,
        StoredAction::Uninstall => uninstall::uninstall(&mut run, &history).await,
    };
    match outcome.map_err(|e| e.to_string())? {
        Outcome::Succeeded { message, .. } => Ok(message),
        Outcome::Failed { message, .. }
        | Outcome::Blocked { message, .. }
        | Outcome::Canceled { message, .. } => Err(message),
    }
}

/// A HelmRelease standing for the helm CLI's release: its name and namespaces, and the
/// helm CLI's defaults (5 m timeout, 10 revisions kept by rollback, no wait).
fn stand_in(key: &ReleaseKey, latest: &Release) -> HelmRelease {
    let spec = HelmReleaseSpec {
        release_name: Some(key.name.clone()),
        target_namespace: Some(latest.namespace.clone()),
        storage_namespace: Some(key.namespace.clone()),
        max_history: 10,
        rollback: Some(Rollback {
            disable_wait: true,
            ..Rollback::default()
        }),
        uninstall: Some(Uninstall {
            disable_wait: true,
            ..Uninstall::default()
        }),
        ..crate::text::yaml::from_str("chart: {path: helm-cli}").expect("a minimal spec")
    };
    let mut hr = HelmRelease::new(&key.name, spec);
    hr.metadata.namespace = Some(key.namespace.clone());
    hr
}

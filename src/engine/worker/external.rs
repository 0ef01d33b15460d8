//! A revision another tool wrote into the release's Helm storage: `helm rollback` or
//! `helm upgrade` by hand on a wheelhouse release. The storage watch wakes the worker
//! within moments of the write; the reconcile then says so in status (which revision, by
//! whom) and, per `driftDetection.mode`, restores the spec (`enabled`) or leaves the
//! release as the other tool left it (`warn`, `disabled`) until the spec changes or a
//! `forceAt` asks for it.

use crate::api::{DriftDetectionMode, ExternalRevision, HelmRelease, HelmReleaseStatus};
use crate::helm::release::{FIELD_MANAGER, Release};

/// The newest revision, when another tool wrote it after a revision wheelhouse wrote (a
/// release wheelhouse never wrote a revision of is adopted, not this). Told by the
/// storage Secrets' field managers: what the helm CLI writes is `Helm`'s, Flux's
/// `helm-controller`'s.
pub fn detect(status: &HelmReleaseStatus, history: &[Release]) -> Option<ExternalRevision> {
    let newest = history.last()?;
    let info = newest.info.as_ref()?;
    // A pending revision is another tool's operation still running: the unlock rules
    // decide about it. No managedFields at all: nothing to tell by.
    if info.status.is_pending()
        || newest.managers.is_empty()
        || newest.managers.iter().any(|m| m == FIELD_MANAGER)
    {
        return None;
    }
    if let Some(known) = &status.external_revision
        && known.revision == newest.version
    {
        return Some(known.clone());
    }
    let ours = history
        .iter()
        .rev()
        .find(|r| r.managers.iter().any(|m| m == FIELD_MANAGER))?;
    (newest.version > ours.version).then(|| {
        let mut by: Vec<&str> = newest.managers.iter().map(String::as_str).collect();
        by.dedup();
        ExternalRevision {
            revision: newest.version,
            by: by.join(", "),
            description: info.description.clone(),
            at: info.last_deployed.map(|t| t.to_string()),
            seen_at_generation: None,
        }
    })
}

/// What the reconcile does about an external revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Response {
    /// Apply the spec again, as a new revision.
    Restore,
    /// Leave it; say so.
    Hold,
}

/// `enabled` restores; `warn` and `disabled` hold until the spec changes (a generation
/// newer than the one the revision was seen at) or `forceAt` asks.
pub fn respond(hr: &HelmRelease, external: &ExternalRevision, forced: bool) -> Response {
    let mode = hr
        .spec
        .drift_detection
        .as_ref()
        .map(|d| d.mode)
        .unwrap_or_default();
    let spec_changed = external
        .seen_at_generation
        .is_some_and(|g| hr.metadata.generation.is_some_and(|now| now > g));
    if mode == DriftDetectionMode::Enabled || forced || spec_changed {
        Response::Restore
    } else {
        Response::Hold
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helm::release::{Info, Status};

    fn record(version: i32, status: Status, managers: &[&str], description: &str) -> Release {
        Release {
            name: "web".into(),
            version,
            info: Some(Info {
                status,
                description: description.into(),
                ..Info::default()
            }),
            managers: managers.iter().map(|m| (*m).to_owned()).collect(),
            ..Release::default()
        }
    }

    #[test]
    fn only_a_newer_revision_of_another_tool_is_external() {
        let ours = record(2, Status::Deployed, &[FIELD_MANAGER], "Upgrade complete");
        let helm = record(3, Status::Deployed, &["Helm"], "Rollback to 1");
        let status = HelmReleaseStatus::default();
        assert_eq!(detect(&status, std::slice::from_ref(&ours)), None);
        let found = detect(&status, &[ours.clone(), helm.clone()]).unwrap();
        assert_eq!((found.revision, found.by.as_str()), (3, "Helm"));
        assert!(
            found
                .message()
                .contains("revision 3 (Rollback to 1) was written by Helm")
        );
        // A revision wheelhouse created is never external, whoever wrote it since.
        let ours_after = record(
            4,
            Status::Deployed,
            &[FIELD_MANAGER, "Helm"],
            "Upgrade complete",
        );
        assert_eq!(detect(&status, &[helm.clone(), ours_after]), None);
        // A release wheelhouse never wrote a revision of (adoption), a pending operation
        // of another tool, and a record with no managedFields are not external.
        assert_eq!(detect(&status, std::slice::from_ref(&helm)), None);
        let pending = record(3, Status::PendingUpgrade, &["Helm"], "Preparing upgrade");
        assert_eq!(detect(&status, &[ours.clone(), pending]), None);
        let unknown = record(3, Status::Deployed, &[], "");
        assert_eq!(detect(&status, &[ours.clone(), unknown]), None);
        // Once recorded, it stays external while it is the newest revision.
        let seen = HelmReleaseStatus {
            external_revision: Some(found.clone()),
            ..Default::default()
        };
        assert_eq!(detect(&seen, &[ours, helm]), Some(found));
    }

    #[test]
    fn enabled_restores_and_warn_holds_until_the_spec_changes_or_force() {
        let mut hr: HelmRelease = serde_json::from_value(serde_json::json!({
            "apiVersion": "wheelhouse.dev/v1alpha1", "kind": "HelmRelease",
            "metadata": {"name": "web", "generation": 4},
            "spec": {"chart": {"path": "/c"}}
        }))
        .unwrap();
        let external = ExternalRevision {
            revision: 3,
            seen_at_generation: Some(4),
            ..Default::default()
        };
        assert_eq!(respond(&hr, &external, false), Response::Hold);
        assert_eq!(respond(&hr, &external, true), Response::Restore);
        hr.metadata.generation = Some(5);
        assert_eq!(respond(&hr, &external, false), Response::Restore);
        hr.metadata.generation = Some(4);
        hr.spec.drift_detection = Some(crate::api::DriftDetection {
            mode: DriftDetectionMode::Enabled,
            ignore: Vec::new(),
        });
        assert_eq!(respond(&hr, &external, false), Response::Restore);
    }
}

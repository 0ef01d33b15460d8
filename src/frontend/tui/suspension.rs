//! When a release was suspended and by whom, as far as the cluster says: a wheelhouse
//! HelmRelease by its change log (`status.changes`, newest first: the engine records each
//! suspend with the field manager that set `spec.suspend`), a Flux HelmRelease by the
//! managedFields entry that owns `spec.suspend` (its time is when that manager last wrote,
//! so the suspend is at least that old) and Flux Operator's `suspendedBy` annotation.
//! A suspend older than [`FORGOTTEN_AFTER`] with no freeze is counted and listed
//! (`/is:forgotten`), so a suspend nobody owns any more is seen.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;

use crate::api::HelmRelease;
use crate::api::flux::FluxHelmRelease;

/// A suspend this old without a freeze is reported as forgotten.
pub const FORGOTTEN_AFTER: Duration = Duration::from_secs(24 * 3600);

/// What `/` takes to list the forgotten suspends.
pub const FILTER: &str = "is:forgotten";

/// Flux Operator's record of who suspended a Flux object.
const SUSPENDED_BY: &str = "fluxcd.controlplane.io/suspendedBy";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suspension {
    /// When it was suspended (at the latest), when the cluster says.
    pub since: Option<Timestamp>,
    pub by: Option<String>,
}

impl Suspension {
    /// Suspended for longer than [`FORGOTTEN_AFTER`] at `now`.
    pub fn forgotten(&self, now: Timestamp) -> bool {
        self.since.is_some_and(|since| {
            now.duration_since(since).as_secs() > FORGOTTEN_AFTER.as_secs() as i64
        })
    }

    /// For a row's message: `suspended 3d ago by kubectl-patch`.
    pub fn describe(&self, now: Timestamp) -> String {
        let mut text = "suspended".to_owned();
        if let Some(since) = self.since {
            text.push_str(&format!(" {} ago", crate::text::age::since(since, now)));
        }
        if let Some(by) = &self.by {
            text.push_str(&format!(" by {by}"));
        }
        text
    }
}

/// A suspended wheelhouse HelmRelease's suspend, from its change log.
pub fn of_wheelhouse(hr: &HelmRelease) -> Option<Suspension> {
    if !hr.spec.suspend {
        return None;
    }
    let suspend = hr
        .status
        .as_ref()
        .and_then(|s| {
            s.changes
                .iter()
                .find(|c| c.kind == "suspend" || c.kind == "resume")
        })
        .filter(|c| c.kind == "suspend");
    Some(Suspension {
        since: suspend.map(|c| c.at.0),
        by: suspend.and_then(|c| c.by.clone()),
    })
}

/// A suspended Flux HelmRelease's suspend, from the owner of `spec.suspend`.
pub fn of_flux(hr: &FluxHelmRelease) -> Option<Suspension> {
    if !hr.spec.suspend {
        return None;
    }
    let owner = suspend_owner(&hr.metadata);
    let annotated = hr
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SUSPENDED_BY))
        .cloned();
    Some(Suspension {
        since: owner.and_then(|(_, time)| time),
        by: annotated.or_else(|| owner.map(|(manager, _)| manager.to_owned())),
    })
}

fn suspend_owner(meta: &ObjectMeta) -> Option<(&str, Option<Timestamp>)> {
    crate::api::suspend_owner::suspend_owners(meta)
        .next()
        .map(|f| {
            (
                f.manager.as_deref().unwrap_or("?"),
                f.time.as_ref().map(|t| t.0),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ChangeRecord;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
        FieldsV1, ManagedFieldsEntry, MicroTime, Time,
    };

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_wheelhouse_suspend_is_dated_by_its_change_log() {
        let mut hr: HelmRelease = crate::text::yaml::from_str(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: a, namespace: n}\nspec: {suspend: true, chart: {repository: 'https://c.example', name: c}}\n",
        )
        .unwrap();
        // Suspended, with no record yet: suspended, but since when is not known.
        assert_eq!(
            of_wheelhouse(&hr),
            Some(Suspension {
                since: None,
                by: None
            })
        );
        let record = |kind: &str, when: &str| ChangeRecord {
            at: MicroTime(at(when)),
            kind: kind.into(),
            message: String::new(),
            by: Some("kubectl-patch".into()),
            revision: None,
        };
        hr.status.get_or_insert_default().changes = vec![
            record("suspend", "2026-03-01T10:00:00Z"),
            record("resume", "2026-02-27T10:00:00Z"),
        ];
        let s = of_wheelhouse(&hr).unwrap();
        assert_eq!(s.by.as_deref(), Some("kubectl-patch"));
        assert!(!s.forgotten(at("2026-03-02T09:59:00Z")));
        assert!(s.forgotten(at("2026-03-02T10:01:00Z")));
        assert_eq!(
            s.describe(at("2026-03-04T10:00:00Z")),
            "suspended 3d ago by kubectl-patch"
        );
        hr.spec.suspend = false;
        assert_eq!(of_wheelhouse(&hr), None);
    }

    #[test]
    fn a_flux_suspend_names_its_owner_or_flux_operators_annotation() {
        let mut hr: FluxHelmRelease = serde_json::from_value(serde_json::json!({
            "apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease",
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {"suspend": true, "interval": "1m"},
        }))
        .unwrap();
        hr.metadata.managed_fields = Some(vec![
            ManagedFieldsEntry {
                manager: Some("flux".into()),
                time: Some(Time(at("2026-03-01T00:00:00Z"))),
                fields_v1: Some(FieldsV1(serde_json::json!({"f:spec": {"f:interval": {}}}))),
                ..Default::default()
            },
            ManagedFieldsEntry {
                manager: Some("kubectl-patch".into()),
                time: Some(Time(at("2026-02-20T00:00:00Z"))),
                fields_v1: Some(FieldsV1(serde_json::json!({"f:spec": {"f:suspend": {}}}))),
                ..Default::default()
            },
        ]);
        let s = of_flux(&hr).unwrap();
        assert_eq!(s.by.as_deref(), Some("kubectl-patch"));
        assert_eq!(s.since, Some(at("2026-02-20T00:00:00Z")));
        hr.metadata
            .annotations
            .get_or_insert_default()
            .insert(SUSPENDED_BY.into(), "jane".into());
        assert_eq!(of_flux(&hr).unwrap().by.as_deref(), Some("jane"));
    }
}

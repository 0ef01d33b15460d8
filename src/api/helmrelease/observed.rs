//! The observed state a HelmRelease's status holds, written only by the engine.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Objects of the release that differ from its manifest, as the last check found them.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DriftStatus {
    pub objects: Vec<DriftedObject>,
    /// The Helm revision whose manifest they were compared with.
    pub revision: i32,
    pub detected_at: String,
}

/// The last drift check that found every object as the revision makes it: what it saw of
/// them, so that an engine started later (a restart, a new leader) knows whether anything
/// changed since without reading each object again.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DriftChecked {
    /// The Helm revision compared.
    pub revision: i32,
    /// The HelmRelease generation then (its drift mode and ignore rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// `sha256:` of the objects as the engine's watches saw them at the check's start
    /// (each one's generation, labels and annotations, or its resourceVersion for a kind
    /// without a generation).
    pub objects: String,
}

/// A field of a release's object that another field manager keeps changing back.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ContestedField {
    /// `Deployment/web`, as Helm names objects.
    pub object: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The JSON pointer of the field.
    pub field: String,
    /// The field manager that changed it back.
    pub manager: String,
    /// Corrections of it in a row that this manager undid.
    pub corrections: i32,
    /// When wheelhouse last corrected it (RFC 3339).
    pub last_corrected: String,
    /// The revision and generation it was counted against: a new one starts afresh.
    pub revision: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Corrections stopped: the field is left to `manager` and never taken by force.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub yielded: bool,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DriftedObject {
    /// `Deployment/web`, as Helm names objects.
    pub object: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// JSON pointers of the fields that differ; empty when the object is missing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub missing: bool,
}

/// The observed state, written only by the engine (status subresource).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HelmReleaseStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Chart version of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_revision: Option<String>,
    /// Digest of the merged values of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_config_digest: Option<String>,
    /// Git charts: `<ref>@sha1:<commit>` of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_source_revision: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempted_release_action: Option<ReleaseAction>,
    /// Helm revisions, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Snapshot>,
    /// Failures since the last success, of any kind.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub install_failures: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub upgrade_failures: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reconcile_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_force_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_reset_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_cancel_wait_at: Option<String>,
    /// The rollbackTo annotation last handled (its whole value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_handled_rollback_to: Option<String>,
    /// Set while the release is suspended at a revision an operator rolled back to;
    /// resuming returns it to the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<Pin>,
    /// Set while the newest revision in Helm's storage was written by another tool (the
    /// helm CLI's `rollback` or `upgrade`) rather than from this HelmRelease's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_revision: Option<ExternalRevision>,
    /// Set while live objects differ from the newest revision's manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftStatus>,
    /// The last drift check that found the release clean (see [`DriftChecked`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_checked: Option<DriftChecked>,
    /// Fields another field manager changed back after drift corrections (an autoscaler):
    /// counted per field, and once it undid a few in a row, left to that manager.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contested: Vec<ContestedField>,
    /// Present while a health check runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<WaitStatus>,
    /// The changes the engine saw that no other record keeps (a suspend, a pin, a
    /// cancelled wait, a failure, a remediation, drift found or corrected, another tool's
    /// revision), newest first, the last [`CHANGES_KEPT`]: what `wheelhouse timeline` and
    /// the dashboard's Timeline show beside Helm's own records, past Event expiry and
    /// restarts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ChangeRecord>,
    /// The engine that last began a step (an action) on this release, recorded before
    /// the step: an engine that takes the release over (a shard relabel, a namespace
    /// changing hands) waits until that one let go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acting: Option<EngineRef>,
    /// Written by an engine once its last step on a release that left it has ended:
    /// the positive sign its successor waits for. Kept by its own field manager, so the
    /// status writes of the engine acting next leave it alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub let_go: Option<EngineRef>,
}

/// A revision another tool wrote into the release's Helm storage.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ExternalRevision {
    pub revision: i32,
    /// The field manager(s) of its storage Secret, e.g. `helm`.
    pub by: String,
    /// Helm's description of it, e.g. `Rollback to 1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// When it was deployed, as its record says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The generation of the HelmRelease when it was seen: a newer spec is applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seen_at_generation: Option<i64>,
}

impl ExternalRevision {
    pub fn message(&self) -> String {
        let what = if self.description.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.description)
        };
        format!(
            "revision {}{what} was written by {}{}, not from this HelmRelease's spec",
            self.revision,
            self.by,
            self.at
                .as_deref()
                .map(|a| format!(" at {a}"))
                .unwrap_or_default()
        )
    }
}

/// A release held at a revision an operator rolled back to.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Pin {
    /// The revision rolled back to.
    pub revision: i32,
    /// The revision the rollback recorded (Helm's new revision holding it).
    pub recorded_as: i32,
    pub by: String,
    pub at: String,
}

impl Pin {
    /// What the Ready condition and the dashboard say.
    pub fn message(&self) -> String {
        format!(
            "pinned to revision {} by {} at {}; resume to return to the spec",
            self.revision,
            if self.by.is_empty() {
                "an operator"
            } else {
                &self.by
            },
            self.at
        )
    }
}

/// An engine, as one engine names another in a release's status.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EngineRef {
    /// Its identity (the holderIdentity of its Lease).
    pub identity: String,
    /// Its Lease, as `namespace/name`: whether it is alive.
    pub lease: String,
}

#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReleaseAction {
    Install,
    Upgrade,
}

/// How many [`ChangeRecord`]s a status keeps.
pub const CHANGES_KEPT: usize = 10;

/// One change the engine saw happen to a release (see [`HelmReleaseStatus::changes`]).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChangeRecord {
    /// To the microsecond: changes a moment apart keep their order.
    pub at: MicroTime,
    /// `suspend`, `resume`, `pin`, `unpin`, `cancel`, `fail-fast`, `failure`,
    /// `remediation`, `drift`, `drift-corrected`, `external`, `config-rollout`.
    pub kind: String,
    /// What happened (a status message, Secret values masked; at most 300 characters).
    pub message: String,
    /// Who made it, when someone other than the engine did (the operator who pinned, the
    /// field manager that set `spec.suspend`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The Helm revision it concerns, if one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<i32>,
}

/// One Helm revision as recorded in status.history.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Helm revision number.
    pub version: i32,
    pub name: String,
    pub namespace: String,
    pub chart_name: String,
    pub chart_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_version: Option<String>,
    pub config_digest: String,
    /// Helm status: deployed, superseded, failed, pending-install, ...
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_deployed: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_deployed: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<Time>,
    /// passed, failed, or absent when no tests ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_result: Option<String>,
    /// The Git commit a Git chart's revision was made from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The start of the OCI manifest digest the revision was made from (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// Progress of the running health check.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WaitStatus {
    pub revision: i32,
    pub started_at: Time,
    pub deadline: Time,
    pub ready: i32,
    pub total: i32,
    /// While a hook runs instead of a health check: which one, as
    /// `Job/web-migrate (post-upgrade hook)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook: Option<String>,
    /// What the engine will do if this wait fails (the planner's answer for the state the
    /// failure leaves): `upgrade fails -> rollback to revision 6 (webapp 1.2.3); 0 retries
    /// left`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_it_fails: Option<String>,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

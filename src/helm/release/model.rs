//! Helm's release record (`helm.sh/helm/v4/pkg/release/v1`), field for field, so the JSON
//! wheelhouse stores is the JSON Helm reads. Go's zero `time.Time` is written as
//! `0001-01-01T00:00:00Z` and read back as `None`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::helm::chart::Chart;

pub type Timestamp = k8s_openapi::jiff::Timestamp;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Release {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<Info>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chart: Option<Chart>,
    /// The user-supplied values (not merged with the chart's defaults).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub config: serde_json::Map<String, serde_json::Value>,
    /// Rendered non-hook manifests, `---` separated, each with a `# Source:` line.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manifest: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Hook>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub version: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Helm 4: "ssa" for server-side apply. wheelhouse always writes "ssa".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apply_method: Option<String>,
    /// Storage labels (not part of the JSON; kept on the Secret).
    #[serde(skip)]
    pub labels: BTreeMap<String, String>,
    /// The field managers that wrote the storage Secret (its managedFields): `wheelhouse`
    /// for ours, `helm` for the helm CLI's. Read, never written.
    #[serde(skip)]
    pub managers: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Info {
    #[serde(default, with = "go_time")]
    pub first_deployed: Option<Timestamp>,
    #[serde(default, with = "go_time")]
    pub last_deployed: Option<Timestamp>,
    #[serde(default, with = "go_time")]
    pub deleted: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default)]
    pub status: Status,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub notes: String,
    /// Helm 4: the revision a rollback revision restored.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rollback_revision: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Status {
    #[default]
    Unknown,
    Deployed,
    Uninstalled,
    Superseded,
    Failed,
    Uninstalling,
    PendingInstall,
    PendingUpgrade,
    PendingRollback,
}

impl Status {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Deployed => "deployed",
            Self::Uninstalled => "uninstalled",
            Self::Superseded => "superseded",
            Self::Failed => "failed",
            Self::Uninstalling => "uninstalling",
            Self::PendingInstall => "pending-install",
            Self::PendingUpgrade => "pending-upgrade",
            Self::PendingRollback => "pending-rollback",
        }
    }

    /// An operation is in progress (Helm refuses to start another).
    pub const fn is_pending(self) -> bool {
        matches!(
            self,
            Self::PendingInstall | Self::PendingUpgrade | Self::PendingRollback
        )
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Status {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "unknown" | "" => Self::Unknown,
            "deployed" => Self::Deployed,
            "uninstalled" => Self::Uninstalled,
            "superseded" => Self::Superseded,
            "failed" => Self::Failed,
            "uninstalling" => Self::Uninstalling,
            "pending-install" => Self::PendingInstall,
            "pending-upgrade" => Self::PendingUpgrade,
            "pending-rollback" => Self::PendingRollback,
            other => return Err(format!("unknown Helm release status {other:?}")),
        })
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A hook: a manifest annotated `helm.sh/hook`, run at the listed events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Hook {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Template path, e.g. `mychart/templates/test-connection.yaml`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manifest: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    #[serde(default)]
    pub last_run: HookExecution,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weight: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete_policies: Vec<String>,
}

/// Hook events as Helm spells them in `helm.sh/hook`.
pub mod hook_event {
    pub const PRE_INSTALL: &str = "pre-install";
    pub const POST_INSTALL: &str = "post-install";
    pub const PRE_DELETE: &str = "pre-delete";
    pub const POST_DELETE: &str = "post-delete";
    pub const PRE_UPGRADE: &str = "pre-upgrade";
    pub const POST_UPGRADE: &str = "post-upgrade";
    pub const PRE_ROLLBACK: &str = "pre-rollback";
    pub const POST_ROLLBACK: &str = "post-rollback";
    pub const TEST: &str = "test";
}

/// Delete policies as Helm spells them in `helm.sh/hook-delete-policy`.
pub mod hook_delete_policy {
    pub const BEFORE_HOOK_CREATION: &str = "before-hook-creation";
    pub const HOOK_SUCCEEDED: &str = "hook-succeeded";
    pub const HOOK_FAILED: &str = "hook-failed";
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct HookExecution {
    #[serde(default, with = "go_time")]
    pub started_at: Option<Timestamp>,
    #[serde(default, with = "go_time")]
    pub completed_at: Option<Timestamp>,
    #[serde(default)]
    pub phase: HookPhase,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum HookPhase {
    /// A hook that never ran: Helm writes `""` (its HookPhase's zero value).
    #[default]
    #[serde(rename = "")]
    NotRun,
    /// Helm's `HookPhaseUnknown`, read as written.
    Unknown,
    Running,
    Succeeded,
    Failed,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// Go's `time.Time` in JSON: RFC 3339, with the zero time standing for "never".
pub mod go_time {
    use super::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub const ZERO: &str = "0001-01-01T00:00:00Z";

    pub fn serialize<S: Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match t {
            Some(t) => s.collect_str(t),
            None => s.serialize_str(ZERO),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        let raw = Option::<String>::deserialize(d)?;
        match raw.as_deref() {
            None | Some("") => Ok(None),
            Some(s) if s.starts_with("0001-01-01") => Ok(None),
            Some(s) => s.parse().map(Some).map_err(serde::de::Error::custom),
        }
    }
}

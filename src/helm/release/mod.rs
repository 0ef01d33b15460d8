//! Helm releases: the record Helm stores, and its storage as Secrets.

pub mod identity;
mod model;
mod record_index;
pub mod storage;

pub use identity::{Elsewhere, Looked, Scan, stored_elsewhere};
pub use model::*;
pub use record_index::{Deploys, RecordIndex};
pub use storage::{
    FIELD_MANAGER, MAX_RECORD_BYTES, ReadFloor, Storage, check_size, decode, encode,
};

/// Labels by which a HelmRelease claims the revisions it writes (`engine::claim`); the
/// helm CLI carries them over to the revisions it writes by hand.
pub const CLAIM_UID_LABEL: &str = "wheelhouse.dev/helmrelease-uid";
pub const CLAIM_NAMESPACE_LABEL: &str = "wheelhouse.dev/helmrelease-namespace";
pub const CLAIM_NAME_LABEL: &str = "wheelhouse.dev/helmrelease-name";

/// On a revision made from a Git chart: the commit (40 hex digits, a valid label value).
/// A rollback copies it from the revision it restores.
pub const SOURCE_COMMIT_LABEL: &str = "wheelhouse.dev/source-commit";
/// On a revision made from an OCI chart: the first 40 hex digits of its manifest digest
/// (a label value holds at most 63), so two contents of one tag are told apart. A
/// rollback copies it from the revision it restores.
pub const SOURCE_DIGEST_LABEL: &str = "wheelhouse.dev/source-digest";

/// On a revision rendered with post-renderers (`spec.postRenderers`): their digest
/// (`api::post_renderers_digest`), so a change to them alone is a new desired state. A
/// rollback copies it from the revision it restores.
pub const POST_RENDERERS_LABEL: &str = "wheelhouse.dev/post-renderers";

/// On every revision a wheelhouse engine made (value `wheelhouse`), kept once it is no
/// longer pending: the labels below say what it was made with only on such a revision
/// (their absence on another tool's revision, Flux's or the helm CLI's, says nothing).
pub const MADE_BY_LABEL: &str = "wheelhouse.dev/made-by";

/// Who wrote a storage record, from its labels and its first field manager: wheelhouse,
/// Flux's helm-controller, the helm CLI, or the manager's own name. The API server names
/// a manager after the client's user agent: the helm CLI's is `Helm/<version>`, so its
/// records say `Helm`.
pub fn written_by(
    labels: &std::collections::BTreeMap<String, String>,
    first_manager: Option<&str>,
) -> String {
    if labels.get(MADE_BY_LABEL).is_some_and(|v| v == "wheelhouse") {
        return "wheelhouse".into();
    }
    match first_manager {
        Some("helm-controller") => "Flux helm-controller".into(),
        Some(m) if m.eq_ignore_ascii_case("helm") => "helm CLI".into(),
        Some("wheelhouse") => "wheelhouse".into(),
        Some(other) => other.to_owned(),
        None => "unknown".into(),
    }
}

/// On a revision made with `chart.valuesFiles`: the first 40 hex digits of the digest of
/// the chart values they made, so a change to the list (or to a file) is a new desired
/// state. A rollback copies it from the revision it restores.
pub const VALUES_FILES_LABEL: &str = "wheelhouse.dev/values-files";

/// On a revision made with `spec.commonMetadata`: the first 40 hex digits of its digest,
/// so a changed (or removed) commonMetadata is a new desired state. A rollback copies it
/// from the revision it restores.
pub const COMMON_METADATA_LABEL: &str = "wheelhouse.dev/common-metadata";

/// On a revision made with `upgrade.preserveValues`: the digest of the spec's values it
/// was made from. Its stored values are those merged over the values it kept, so they
/// cannot say whether the spec changed; this does.
pub const SPEC_VALUES_LABEL: &str = "wheelhouse.dev/spec-values";

/// The revision whose values Helm's upgrade keeps with `--reuse-values` (its "current"
/// release): the newest when it is deployed, else the newest deployed one, else the
/// newest when it failed or was superseded. `history` is oldest first.
pub fn values_kept_from(history: &[Release]) -> Option<&Release> {
    let status = |r: &Release| r.info.as_ref().map(|i| i.status).unwrap_or_default();
    let newest = history.last()?;
    if status(newest) == Status::Deployed {
        return Some(newest);
    }
    history
        .iter()
        .rev()
        .find(|r| status(r) == Status::Deployed)
        .or_else(|| {
            // A pending newest is a wait the engine supersedes: it is failed first.
            let s = status(newest);
            (matches!(s, Status::Failed | Status::Superseded) || s.is_pending()).then_some(newest)
        })
}

/// How much of a manifest digest [`SOURCE_DIGEST_LABEL`] keeps (and of a commonMetadata
/// digest, [`COMMON_METADATA_LABEL`]).
pub const SOURCE_DIGEST_KEPT: usize = 40;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),

    /// The revision's Secret already exists (another writer got there first).
    #[error("release {name} revision {version} already exists")]
    Exists { name: String, version: i32 },

    #[error("release {name} revision {version} not found")]
    NotFound { name: String, version: i32 },

    /// The release cannot be stored as Helm would (no name, no info, version < 1).
    #[error("invalid release {name:?}: {message}")]
    Invalid { name: String, message: String },

    /// The encoded record would not fit in one Secret, so the API server would refuse it.
    #[error(
        "release {name} revision {version} is {size} bytes once encoded as Helm stores it, over the {limit} bytes one Secret holds; make the chart or values smaller"
    )]
    TooLarge {
        name: String,
        version: i32,
        size: usize,
        limit: usize,
    },

    #[error("cannot encode release {name}: {message}")]
    Encode { name: String, message: String },

    /// The stored record is not a Helm release (bad base64, gzip or JSON).
    #[error("cannot decode Helm release record{}: {message}", secret_suffix(.secret))]
    Decode {
        secret: Option<String>,
        message: String,
    },
}

fn secret_suffix(secret: &Option<String>) -> String {
    secret
        .as_deref()
        .map(|s| format!(" {s}"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn revision(version: i32, status: Status) -> Release {
        Release {
            version,
            info: Some(Info {
                status,
                ..Info::default()
            }),
            ..Release::default()
        }
    }

    /// Helm's upgrade: the newest if deployed, else the newest deployed, else the newest
    /// if failed or superseded (a pending one is failed before the upgrade).
    #[test]
    fn the_values_kept_are_the_revision_helms_upgrade_calls_current() {
        use Status::*;
        let kept = |statuses: &[Status]| {
            let history: Vec<Release> = statuses
                .iter()
                .enumerate()
                .map(|(i, s)| revision(i as i32 + 1, *s))
                .collect();
            values_kept_from(&history).map(|r| r.version)
        };
        assert_eq!(kept(&[]), None);
        assert_eq!(kept(&[Superseded, Deployed]), Some(2));
        assert_eq!(kept(&[Superseded, Deployed, Failed]), Some(2));
        assert_eq!(kept(&[Deployed, PendingUpgrade]), Some(1));
        assert_eq!(kept(&[Failed]), Some(1));
        assert_eq!(kept(&[Superseded, Failed]), Some(2));
        assert_eq!(kept(&[PendingInstall]), Some(1));
        assert_eq!(kept(&[Deployed, Uninstalled]), Some(1));
        assert_eq!(kept(&[Uninstalled]), None);
    }
}

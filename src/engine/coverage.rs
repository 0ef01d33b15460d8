//! Who reconciles what. An engine's *coverage* is chosen when it starts: the namespaces
//! (all that its identity can see, or one) and the shard (releases labelled
//! `sharding.wheelhouse.dev/key: KEY`, or the unsharded ones without the label). Each
//! coverage has its own Lease, and engines of overlapping coverage defer to each other so
//! that at most one acts on any HelmRelease:
//!
//! - engines with the same coverage elect one leader through their shared Lease;
//! - shards are disjoint (a release has one label value or none), so their Leases never
//!   need to agree;
//! - a cluster-wide engine and a namespace engine of the same shard overlap in that
//!   namespace. The cluster-wide one has precedence: a namespace engine acts only while no
//!   cluster-wide engine holds its Lease, and it re-checks after taking its own; the
//!   cluster-wide engine, after taking its Lease, leaves alone every namespace whose
//!   namespace Lease is held, until that engine has finished its step and let go. Each
//!   side writes its own Lease before reading the other's, so two of them can never both
//!   conclude that the other is absent.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::cluster::client::Scope;

/// The label that assigns a HelmRelease to a shard, as Flux's `sharding.fluxcd.io/key`.
pub const SHARD_LABEL: &str = "sharding.wheelhouse.dev/key";

const LEASE_PREFIX: &str = "wheelhouse-engine";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    pub scope: Scope,
    /// `None`: the releases without a shard label.
    pub shard: Option<String>,
}

impl Coverage {
    pub fn new(scope: Scope, shard: Option<String>) -> Self {
        Self { scope, shard }
    }

    /// Whether a HelmRelease in `namespace` with these labels is this engine's.
    pub fn covers(&self, namespace: &str, labels: Option<&BTreeMap<String, String>>) -> bool {
        let in_scope = match &self.scope {
            Scope::All => true,
            Scope::Namespace(ns) => ns == namespace,
        };
        in_scope && self.shard.as_deref() == shard_of(labels)
    }

    /// The label selector that lists exactly this shard's releases.
    pub fn label_selector(&self) -> String {
        match &self.shard {
            Some(key) => format!("{SHARD_LABEL}={key}"),
            None => format!("!{SHARD_LABEL}"),
        }
    }

    /// The Lease this engine competes for: `(namespace, name)`. A cluster-wide engine's
    /// Lease lives in the agreed lease namespace; a namespace engine's in its namespace,
    /// where a namespace-scoped identity may write.
    pub fn lease(&self, lease_namespace: &str) -> (String, String) {
        match &self.scope {
            Scope::All => (lease_namespace.to_owned(), cluster_lease_name(&self.shard)),
            Scope::Namespace(ns) => (ns.clone(), namespace_lease_name(&self.shard)),
        }
    }

    /// For a namespace engine: the cluster-wide Lease of the same shard, which has
    /// precedence over it.
    pub fn superior(&self, lease_namespace: &str) -> Option<(String, String)> {
        match &self.scope {
            Scope::All => None,
            Scope::Namespace(_) => {
                Some((lease_namespace.to_owned(), cluster_lease_name(&self.shard)))
            }
        }
    }

    /// For a cluster-wide engine: the name of the namespace Leases it defers to.
    pub fn subordinate_lease_name(&self) -> Option<String> {
        matches!(self.scope, Scope::All).then(|| namespace_lease_name(&self.shard))
    }
}

impl Coverage {
    /// The compact form a header has room for: `all ns`, `ns apps`, `all ns, shard a`.
    pub fn short(&self) -> String {
        let scope = match &self.scope {
            Scope::All => "all ns".to_owned(),
            Scope::Namespace(ns) => format!("ns {ns}"),
        };
        match &self.shard {
            Some(key) => format!("{scope}, shard {key}"),
            None => scope,
        }
    }
}

impl fmt::Display for Coverage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.scope {
            Scope::All => f.write_str("all namespaces")?,
            Scope::Namespace(ns) => write!(f, "namespace {ns}")?,
        }
        match &self.shard {
            Some(key) => write!(f, ", shard {key}"),
            None => f.write_str(", unsharded"),
        }
    }
}

/// The shard a release's labels put it in (`None`: unsharded).
pub fn shard_of(labels: Option<&BTreeMap<String, String>>) -> Option<&str> {
    labels.and_then(|l| l.get(SHARD_LABEL)).map(String::as_str)
}

/// Whether a release the watch reports deleted only left it (relabelled to another
/// shard) rather than being gone. The API server sends such an object as it was, still
/// with our label, so the labels cannot tell; but one we manage is gone only after it was
/// marked for deletion, since our finalizer holds it until then.
pub fn left_watch(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_none()
        && meta
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == crate::api::FINALIZER)
}

fn cluster_lease_name(shard: &Option<String>) -> String {
    match shard {
        Some(key) => format!("{LEASE_PREFIX}-shard-{key}"),
        None => LEASE_PREFIX.to_owned(),
    }
}

fn namespace_lease_name(shard: &Option<String>) -> String {
    match shard {
        Some(key) => format!("{LEASE_PREFIX}-ns-shard-{key}"),
        None => format!("{LEASE_PREFIX}-ns"),
    }
}

/// A shard key must be a label value that also fits in a Lease name: lowercase letters,
/// digits and `-`, starting and ending alphanumeric, at most 40 characters.
pub fn validate_shard(key: &str) -> Result<(), String> {
    let ok = !key.is_empty()
        && key.len() <= 40
        && key
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !key.starts_with('-')
        && !key.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "shard key {key:?}: use 1-40 lowercase letters, digits and '-', starting and ending with a letter or digit"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(shard: Option<&str>) -> BTreeMap<String, String> {
        shard
            .map(|k| [(SHARD_LABEL.to_owned(), k.to_owned())].into())
            .unwrap_or_default()
    }

    #[test]
    fn a_deleted_event_means_left_only_for_a_managed_release_not_marked_for_deletion() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        let meta = |finalizer: bool, deleting: bool| ObjectMeta {
            finalizers: finalizer.then(|| vec![crate::api::FINALIZER.to_owned()]),
            deletion_timestamp: deleting.then(|| Time(Default::default())),
            ..ObjectMeta::default()
        };
        // (our finalizer, marked for deletion) → left
        for (finalizer, deleting, left) in [
            (true, false, true),   // relabelled away: the old object, still managed
            (true, true, false),   // marked for deletion: gone, or going
            (false, true, false),  // deleted after we finalized it
            (false, false, false), // never managed (deleted before the finalizer was added)
        ] {
            assert_eq!(
                left_watch(&meta(finalizer, deleting)),
                left,
                "finalizer {finalizer}, deleting {deleting}"
            );
        }
    }

    #[test]
    fn each_release_is_covered_by_exactly_one_shard_of_a_scope() {
        let engines = [
            Coverage::new(Scope::All, None),
            Coverage::new(Scope::All, Some("a".into())),
            Coverage::new(Scope::All, Some("b".into())),
        ];
        for shard in [None, Some("a"), Some("b")] {
            let l = labels(shard);
            let covering: Vec<_> = engines
                .iter()
                .filter(|e| e.covers("ns", Some(&l)))
                .collect();
            assert_eq!(covering.len(), 1, "{shard:?}");
            assert_eq!(covering[0].shard.as_deref(), shard);
        }
        // A shard nobody runs is nobody's.
        assert!(
            !engines
                .iter()
                .any(|e| e.covers("ns", Some(&labels(Some("c")))))
        );
    }

    #[test]
    fn namespace_engines_cover_their_namespace_and_defer_to_the_cluster_lease() {
        let ns = Coverage::new(Scope::Namespace("team-a".into()), Some("a".into()));
        assert!(ns.covers("team-a", Some(&labels(Some("a")))));
        assert!(!ns.covers("team-b", Some(&labels(Some("a")))));
        assert_eq!(
            ns.lease("default"),
            ("team-a".into(), "wheelhouse-engine-ns-shard-a".into())
        );
        assert_eq!(
            ns.superior("default"),
            Some(("default".into(), "wheelhouse-engine-shard-a".into()))
        );
        assert_eq!(ns.subordinate_lease_name(), None);

        let all = Coverage::new(Scope::All, None);
        assert_eq!(
            all.lease("default"),
            ("default".into(), "wheelhouse-engine".into())
        );
        assert_eq!(all.superior("default"), None);
        assert_eq!(
            all.subordinate_lease_name().as_deref(),
            Some("wheelhouse-engine-ns")
        );
        assert_eq!(all.label_selector(), "!sharding.wheelhouse.dev/key");
        assert_eq!(all.to_string(), "all namespaces, unsharded");
    }

    #[test]
    fn shard_keys_fit_a_label_and_a_lease_name() {
        for good in ["a", "shard-1", "0x"] {
            assert!(validate_shard(good).is_ok(), "{good}");
        }
        for bad in ["", "-a", "a-", "A", "a.b", &"x".repeat(41)] {
            assert!(validate_shard(bad).is_err(), "{bad}");
        }
    }
}

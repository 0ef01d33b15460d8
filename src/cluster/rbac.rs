//! Least-privilege RBAC for the engine (`wheelhouse rbac`), generated from code like the
//! CRD so it cannot drift from what the engine calls.
//!
//! Two grants, kept apart on purpose:
//! - the engine's own needs ([`engine_rules`]): HelmReleases and their status, Helm's
//!   release Secrets, valuesFrom and tracked ConfigMaps/Secrets, the notifications
//!   setting and its webhook Secrets, workloads and pods to wait on and roll, Events, and
//!   its Lease (in the lease namespace only);
//! - the release contents: whatever the charts create. wheelhouse cannot know that in
//!   advance, so it binds an existing ClusterRole the operator chooses (`admin` by
//!   default: every namespaced kind, no cluster-scoped ones). Charts that ship CRDs or
//!   cluster-scoped objects need a wider role, named explicitly.
//!
//! Scoped to one namespace, every grant is a RoleBinding there; only `--all-namespaces`
//! produces ClusterRoleBindings.

mod access;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::ObjectMeta;
use serde::Serialize;

use crate::cluster::client::Scope;

pub use access::Access;

/// Name of the ClusterRole with the engine's own permissions.
pub const ENGINE_ROLE: &str = "wheelhouse-engine";
/// Name of the Role for the engine's own Lease.
pub const LEASE_ROLE: &str = "wheelhouse-engine-lease";
/// Name of the Role that lets a namespace engine read the cluster-wide engine's Lease.
pub const LEASE_READ_ROLE: &str = "wheelhouse-engine-lease-read";

/// What `wheelhouse rbac` generates.
#[derive(Debug, Clone)]
pub struct RbacOptions {
    /// Namespaces the engine reconciles: one, or all.
    pub scope: Scope,
    /// The engine's ServiceAccount.
    pub service_account_namespace: String,
    pub service_account: String,
    /// Namespace of the engine Lease (`--lease-namespace` of the controller).
    pub lease_namespace: String,
    /// Existing ClusterRole bound for what the charts create. `None` (multi-tenant):
    /// no grant for release contents at all; each release acts as a ServiceAccount of
    /// its namespace, which the engine may impersonate.
    pub release_role: Option<String>,
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let strings = |s: &[&str]| Some(s.iter().map(|v| (*v).to_owned()).collect());
    PolicyRule {
        api_groups: strings(groups),
        resources: strings(resources),
        verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
        ..PolicyRule::default()
    }
}

const READ: &[&str] = &["get", "list", "watch"];

/// The engine's own permissions, each with the code that needs it. Multi-tenant
/// (`impersonating`): Helm's storage is written as each release's ServiceAccount, so the
/// engine only reads Secrets, and it may impersonate ServiceAccounts.
pub fn engine_rules_for(impersonating: bool) -> Vec<PolicyRule> {
    let mut rules = engine_rules();
    if impersonating {
        for r in &mut rules {
            if r.resources.as_deref() == Some(&["secrets".to_owned()]) {
                r.verbs = READ.iter().map(|v| (*v).to_owned()).collect();
            }
        }
        // Releases act as a ServiceAccount of their own namespace (src/cluster/tenancy.rs).
        rules.push(rule(&[""], &["serviceaccounts"], &["impersonate"]));
    }
    rules
}

/// The engine's own permissions when it also writes Helm's storage for releases that act
/// as the engine (no tenancy), each with the code that needs it.
pub fn engine_rules() -> Vec<PolicyRule> {
    vec![
        // Whether the ServiceAccount a release acts as exists (src/cluster/tenancy.rs).
        rule(&[""], &["serviceaccounts"], &["get"]),
        // Watches releases; finalizer and annotations go through patch, the spec never.
        rule(
            &["wheelhouse.dev"],
            &["helmreleases"],
            &["get", "list", "watch", "patch", "update"],
        ),
        // Server-side-applied status.
        rule(
            &["wheelhouse.dev"],
            &["helmreleases/status"],
            &["get", "patch", "update"],
        ),
        rule(
            &["wheelhouse.dev"],
            &["helmreleases/finalizers"],
            &["update"],
        ),
        // Helm's release storage (sh.helm.release.v1.* Secrets), valuesFrom and repository
        // credentials, the Secrets config tracking hashes, and the notification providers'
        // webhook Secrets (beside the engine's Lease, each watched by name).
        rule(
            &[""],
            &["secrets"],
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        // valuesFrom and tracked ConfigMaps, and the notifications setting (the ConfigMap
        // `wheelhouse-notifications` beside the engine's Lease, watched by name).
        rule(&[""], &["configmaps"], READ),
        // Drift: a Service of a release changed by someone else wakes its check (metadata
        // watch); the release's own role applies and dry-runs it.
        rule(&[""], &["services"], READ),
        // Health waits and fail-fast read pods; config tracking replaces gated StatefulSet
        // pods, and hooks delete their test pods.
        rule(&[""], &["pods"], &["get", "list", "watch", "delete"]),
        // Health waits and config tracking (which patches the pod template's hash).
        rule(
            &["apps"],
            &["deployments", "statefulsets", "daemonsets"],
            &["get", "list", "watch", "patch"],
        ),
        rule(&["apps"], &["replicasets"], READ),
        rule(
            &["batch"],
            &["jobs", "cronjobs"],
            &["get", "list", "watch", "patch"],
        ),
        // Events on releases, workloads and the notifications ConfigMap (both APIs: kube's
        // recorder uses events.k8s.io).
        rule(&["", "events.k8s.io"], &["events"], &["create", "patch"]),
        // A cluster-wide engine watches the namespace engines' Leases to leave their
        // namespaces alone (engine::coverage); read only.
        rule(&["coordination.k8s.io"], &["leases"], &["list", "watch"]),
        // The cluster's own Service and Pod ranges, which the outbound policy refuses to
        // tenants' sources under the lockdown (engine/policy.rs); read only.
        rule(&["networking.k8s.io"], &["servicecidrs"], &["list"]),
        rule(&[""], &["nodes"], &["list"]),
    ]
}

/// The engine's own Lease: taken, renewed and released by update; and beside it the
/// cluster's config-hash key, made by the first engine that needs it
/// (`tracking::hash::KEY_SECRET`; create cannot be limited to one name).
fn lease_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "create", "update"],
        ),
        rule(&[""], &["secrets"], &["create"]),
    ]
}

/// A namespace engine reads the cluster-wide engine's Lease to defer to it.
fn lease_read_rules() -> Vec<PolicyRule> {
    vec![rule(&["coordination.k8s.io"], &["leases"], &["get"])]
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(BTreeMap::from([(
            "app.kubernetes.io/name".to_owned(),
            "wheelhouse".to_owned(),
        )])),
        ..ObjectMeta::default()
    }
}

/// Every object of the grant, in apply order.
pub fn manifests(opts: &RbacOptions) -> Vec<serde_json::Value> {
    let subject = vec![Subject {
        kind: "ServiceAccount".into(),
        name: opts.service_account.clone(),
        namespace: Some(opts.service_account_namespace.clone()),
        ..Subject::default()
    }];
    let cluster_role = |name: &str| RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "ClusterRole".into(),
        name: name.to_owned(),
    };
    let mut out = vec![
        value(&ServiceAccount {
            metadata: meta(&opts.service_account, Some(&opts.service_account_namespace)),
            ..ServiceAccount::default()
        }),
        value(&ClusterRole {
            metadata: meta(ENGINE_ROLE, None),
            rules: Some(engine_rules_for(opts.release_role.is_none())),
            ..ClusterRole::default()
        }),
    ];
    let role = |name: &str, ns: &str, rules: Vec<PolicyRule>| {
        [
            value(&Role {
                metadata: meta(name, Some(ns)),
                rules: Some(rules),
            }),
            value(&RoleBinding {
                metadata: meta(name, Some(ns)),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: name.to_owned(),
                },
                subjects: Some(subject.clone()),
            }),
        ]
    };
    // Where the engine's own Lease lives (engine::coverage): the lease namespace for a
    // cluster-wide engine, its namespace for a namespace engine, which also reads the
    // cluster-wide Lease.
    match &opts.scope {
        Scope::All => out.extend(role(LEASE_ROLE, &opts.lease_namespace, lease_rules())),
        Scope::Namespace(ns) => {
            out.extend(role(LEASE_ROLE, ns, lease_rules()));
            out.extend(role(
                LEASE_READ_ROLE,
                &opts.lease_namespace,
                lease_read_rules(),
            ));
        }
    }
    let mut grants = vec![(ENGINE_ROLE.to_owned(), ENGINE_ROLE)];
    if let Some(role) = &opts.release_role {
        grants.push((format!("wheelhouse-release-{role}"), role.as_str()));
    }
    for (name, role) in grants {
        out.push(match &opts.scope {
            Scope::All => value(&ClusterRoleBinding {
                metadata: meta(&name, None),
                role_ref: cluster_role(role),
                subjects: Some(subject.clone()),
            }),
            Scope::Namespace(ns) => value(&RoleBinding {
                metadata: meta(&name, Some(ns)),
                role_ref: cluster_role(role),
                subjects: Some(subject.clone()),
            }),
        });
    }
    out
}

/// k8s-openapi's types serialize with their apiVersion and kind.
fn value<K: Serialize>(obj: &K) -> serde_json::Value {
    serde_json::to_value(obj).expect("RBAC objects serialize")
}

/// The grant as multi-document YAML for `kubectl apply -f -`.
pub fn yaml(opts: &RbacOptions) -> String {
    crate::text::yaml::to_documents(&manifests(opts))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn opts(scope: Scope) -> RbacOptions {
        RbacOptions {
            scope,
            service_account_namespace: "wheelhouse-system".into(),
            service_account: "wheelhouse".into(),
            lease_namespace: "wheelhouse-system".into(),
            release_role: Some("admin".into()),
        }
    }

    /// `Kind/name` of each object, in order (shared with the install tests).
    pub(crate) fn kinds(objects: &[serde_json::Value]) -> Vec<String> {
        objects
            .iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn multi_tenant_grants_impersonation_and_no_release_contents() {
        let mut o = opts(Scope::All);
        o.release_role = None;
        let objects = manifests(&o);
        let names = kinds(&objects);
        assert!(
            !names.iter().any(|n| n.contains("wheelhouse-release-")),
            "{names:?}"
        );
        let rules: Vec<PolicyRule> = serde_json::from_value(objects[1]["rules"].clone()).unwrap();
        let verbs_on = |resource: &str| -> Vec<String> {
            rules
                .iter()
                .filter(|r| r.resources.iter().flatten().any(|x| x == resource))
                .flat_map(|r| r.verbs.clone())
                .collect()
        };
        assert_eq!(verbs_on("secrets"), ["get", "list", "watch"]);
        assert!(verbs_on("serviceaccounts").contains(&"impersonate".to_owned()));
        // The single-tenant grant never impersonates.
        assert!(
            !engine_rules()
                .iter()
                .any(|r| r.verbs.iter().any(|v| v == "impersonate"))
        );
    }

    #[test]
    fn one_namespace_grants_only_role_bindings() {
        let objects = manifests(&opts(Scope::Namespace("apps".into())));
        assert_eq!(
            kinds(&objects),
            [
                "ServiceAccount/wheelhouse",
                "ClusterRole/wheelhouse-engine",
                "Role/wheelhouse-engine-lease",
                "RoleBinding/wheelhouse-engine-lease",
                "Role/wheelhouse-engine-lease-read",
                "RoleBinding/wheelhouse-engine-lease-read",
                "RoleBinding/wheelhouse-engine",
                "RoleBinding/wheelhouse-release-admin",
            ]
        );
        assert_eq!(objects[2]["metadata"]["namespace"], "apps");
        assert_eq!(objects[4]["metadata"]["namespace"], "wheelhouse-system");
        assert!(
            objects[6..]
                .iter()
                .all(|o| o["metadata"]["namespace"] == "apps")
        );
    }

    #[test]
    fn all_namespaces_binds_cluster_wide() {
        let objects = manifests(&opts(Scope::All));
        assert_eq!(
            kinds(&objects[4..]),
            [
                "ClusterRoleBinding/wheelhouse-engine",
                "ClusterRoleBinding/wheelhouse-release-admin"
            ]
        );
    }

    #[test]
    fn the_engine_role_has_no_wildcards_and_never_escalates() {
        for r in engine_rules() {
            let all = r
                .api_groups
                .iter()
                .flatten()
                .chain(r.resources.iter().flatten())
                .chain(&r.verbs);
            for s in all {
                assert_ne!(s, "*", "{r:?}");
                assert!(!["escalate", "bind", "impersonate"].contains(&s.as_str()));
            }
        }
    }

    /// The notifier reads its ConfigMap and Secrets where the engine holds its Lease,
    /// which the engine role's binding always covers: the lease namespace under a
    /// ClusterRoleBinding, a namespace engine's own namespace under its RoleBinding.
    #[test]
    fn the_notifications_setting_is_readable_without_a_grant_of_its_own() {
        let allows = |resource: &str, verbs: &[&str]| {
            engine_rules().iter().any(|r| {
                r.api_groups.iter().flatten().any(|g| g.is_empty())
                    && r.resources.iter().flatten().any(|x| x == resource)
                    && verbs.iter().all(|v| r.verbs.iter().any(|x| x == v))
            })
        };
        assert!(allows("configmaps", READ));
        assert!(allows("secrets", READ));
        assert!(allows("events", &["create", "patch"]));
        let (ns, _) = crate::engine::Coverage::new(Scope::Namespace("apps".into()), None)
            .lease("wheelhouse-system");
        assert_eq!(
            ns, "apps",
            "a namespace engine's setting is in its own namespace"
        );
        let objects = manifests(&opts(Scope::Namespace("apps".into())));
        let engine_binding = objects
            .iter()
            .find(|o| o["kind"] == "RoleBinding" && o["roleRef"]["name"] == ENGINE_ROLE)
            .unwrap();
        assert_eq!(engine_binding["metadata"]["namespace"], "apps");
    }

    #[test]
    fn yaml_is_a_stream_of_documents() {
        let text = yaml(&opts(Scope::All));
        let docs = crate::text::yaml::parse_documents(&text).unwrap();
        assert_eq!(docs, manifests(&opts(Scope::All)));
    }
}

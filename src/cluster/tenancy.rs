//! Tenancy: a HelmRelease acts with the rights of its namespace, never the engine's.
//!
//! A release with `spec.serviceAccountName` (Flux's field), or any release once the
//! cluster is locked down with a default service account, is rendered, applied, pruned,
//! hooked, tested, rolled back, uninstalled and stored as
//! `system:serviceaccount:<HelmRelease namespace>:<name>`: every such call carries an
//! `Impersonate-User` header, as Flux's helm-controller impersonates (the API server adds
//! the service account's groups itself). The engine's own work (watches, Lease, status,
//! Events, health and drift reads) keeps the engine's identity.
//!
//! The lockdown is one policy for the whole cluster, whichever engine holds a lease: it
//! is published in the ConfigMap [`SETTINGS_NAME`] in `kube-public` (readable by every
//! authenticated identity through a RoleBinding `wheelhouse install` creates, as
//! `cluster-info` is), so a dashboard opened by a cluster administrator finds it without
//! being told, and enforces it. `docs/operations/multi-tenancy.md` has the threat model.

use std::collections::BTreeMap;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::Client;
use kube::api::{Api, PostParams};

use crate::api::HelmRelease;

/// Where the cluster's tenancy policy is published: a namespace every identity may read
/// from (Kubernetes' own place for public cluster information).
pub const SETTINGS_NAMESPACE: &str = "kube-public";
/// The ConfigMap holding it.
pub const SETTINGS_NAME: &str = "wheelhouse-tenancy";
/// Its keys, with Flux's flag names in camel case.
pub const DEFAULT_SERVICE_ACCOUNT_KEY: &str = "defaultServiceAccount";
pub const NO_CROSS_NAMESPACE_REFS_KEY: &str = "noCrossNamespaceRefs";
/// The outbound policy of releases' sources (src/cluster/egress.rs): networks tenants'
/// sources may reach despite the lockdown's defaults, and networks no source may reach.
pub const ALLOWED_NETWORKS_KEY: &str = "allowedNetworks";
pub const DENIED_NETWORKS_KEY: &str = "deniedNetworks";

/// The Role and RoleBinding that let every authenticated identity read the policy.
pub const READER_ROLE: &str = "wheelhouse-tenancy-reader";

/// What a release may do, and as whom.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// `--default-service-account`: a release without `serviceAccountName` acts as this
    /// ServiceAccount of its own namespace.
    pub default_service_account: Option<String>,
    /// `--no-cross-namespace-refs`: targetNamespace, storageNamespace and dependsOn must
    /// stay in the HelmRelease's namespace.
    pub no_cross_namespace_refs: bool,
    /// `--allow-network`: exceptions to what tenants' sources may not reach under the
    /// lockdown (loopback, link-local, the cluster's own ranges).
    pub allowed_networks: Vec<ipnet::IpNet>,
    /// `--deny-network`: what no release's source may reach.
    pub denied_networks: Vec<ipnet::IpNet>,
}

/// Why a policy cannot be used (a conflict, an unreadable setting).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error(
        "the cluster's tenancy policy ({SETTINGS_NAMESPACE}/{SETTINGS_NAME}) has {key}: {value:?}, which is not {expected}"
    )]
    Invalid {
        key: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error(
        "this engine's --default-service-account {flag:?} differs from the cluster's ({published:?} in {SETTINGS_NAMESPACE}/{SETTINGS_NAME}); one policy holds for every engine of a cluster"
    )]
    Conflict { flag: String, published: String },
    #[error(
        "cannot read the cluster's tenancy policy ({SETTINGS_NAMESPACE}/{SETTINGS_NAME}): {0}; an engine that cannot tell whether the cluster is locked down does not act"
    )]
    Unreadable(String),
}

impl Policy {
    /// Whether releases act as a ServiceAccount unless they name one.
    pub fn locked_down(&self) -> bool {
        self.default_service_account.is_some()
    }

    /// The policy a published ConfigMap's data says.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Self, PolicyError> {
        let default_service_account = match data.get(DEFAULT_SERVICE_ACCOUNT_KEY) {
            None => None,
            Some(v) if v.is_empty() => None,
            Some(v) if is_dns_subdomain(v) => Some(v.clone()),
            Some(v) => {
                return Err(PolicyError::Invalid {
                    key: DEFAULT_SERVICE_ACCOUNT_KEY,
                    value: v.clone(),
                    expected: "a ServiceAccount name",
                });
            }
        };
        let no_cross_namespace_refs =
            match data.get(NO_CROSS_NAMESPACE_REFS_KEY).map(String::as_str) {
                None | Some("" | "false") => false,
                Some("true") => true,
                Some(v) => {
                    return Err(PolicyError::Invalid {
                        key: NO_CROSS_NAMESPACE_REFS_KEY,
                        value: v.to_owned(),
                        expected: "\"true\" or \"false\"",
                    });
                }
            };
        let networks = |key: &'static str| match data.get(key) {
            None => Ok(Vec::new()),
            Some(v) => {
                crate::cluster::egress::parse_networks(v).map_err(|_| PolicyError::Invalid {
                    key,
                    value: v.clone(),
                    expected: "a comma-separated list of networks (CIDRs)",
                })
            }
        };
        Ok(Self {
            default_service_account,
            no_cross_namespace_refs,
            allowed_networks: networks(ALLOWED_NETWORKS_KEY)?,
            denied_networks: networks(DENIED_NETWORKS_KEY)?,
        })
    }

    /// The ConfigMap data that publishes this policy.
    pub fn to_data(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                DEFAULT_SERVICE_ACCOUNT_KEY.to_owned(),
                self.default_service_account.clone().unwrap_or_default(),
            ),
            (
                NO_CROSS_NAMESPACE_REFS_KEY.to_owned(),
                self.no_cross_namespace_refs.to_string(),
            ),
            (
                ALLOWED_NETWORKS_KEY.to_owned(),
                join_networks(&self.allowed_networks),
            ),
            (
                DENIED_NETWORKS_KEY.to_owned(),
                join_networks(&self.denied_networks),
            ),
        ])
    }

    /// The outbound rules of releases' sources, with the cluster's own ranges as found.
    pub fn egress_rules(&self, cluster: Vec<ipnet::IpNet>) -> crate::cluster::egress::Rules {
        crate::cluster::egress::Rules {
            denied: self.denied_networks.clone(),
            allowed: self.allowed_networks.clone(),
            cluster,
        }
    }

    /// Which outbound rules a release's sources answer to: a tenant's under the lockdown.
    pub fn egress_class(&self) -> crate::cluster::egress::Class {
        if self.locked_down() {
            crate::cluster::egress::Class::Tenant
        } else {
            crate::cluster::egress::Class::Engine
        }
    }

    /// Whether any outbound rule applies to a release's sources (else they connect
    /// directly, as before any policy).
    pub fn polices_egress(&self) -> bool {
        self.locked_down() || !self.denied_networks.is_empty()
    }

    /// The policy an engine enforces: the cluster's published one, tightened by the
    /// engine's own flags. Each rule is on when either side turns it on; two different
    /// default service accounts are a conflict, never a choice.
    pub fn combine(published: Option<&Self>, flags: &Self) -> Result<Self, PolicyError> {
        let Some(published) = published else {
            return Ok(flags.clone());
        };
        let default_service_account = match (
            &published.default_service_account,
            &flags.default_service_account,
        ) {
            (Some(p), Some(f)) if p != f => {
                return Err(PolicyError::Conflict {
                    flag: f.clone(),
                    published: p.clone(),
                });
            }
            (p, f) => p.clone().or_else(|| f.clone()),
        };
        // Networks: a flag can only refuse more. A published lockdown's exceptions stand;
        // where the lockdown is the engine's own (the published policy is open), so are
        // its exceptions to its own refusals.
        let mut denied_networks = published.denied_networks.clone();
        for net in &flags.denied_networks {
            if !denied_networks.contains(net) {
                denied_networks.push(*net);
            }
        }
        let mut allowed_networks = published.allowed_networks.clone();
        if !published.locked_down() {
            for net in &flags.allowed_networks {
                if !allowed_networks.contains(net) {
                    allowed_networks.push(*net);
                }
            }
        }
        Ok(Self {
            default_service_account,
            no_cross_namespace_refs: published.no_cross_namespace_refs
                || flags.no_cross_namespace_refs,
            allowed_networks,
            denied_networks,
        })
    }

    /// Whom `hr` acts as.
    pub fn identity(&self, hr: &HelmRelease) -> Identity {
        self.identity_in(
            &hr.object_namespace(),
            hr.spec.service_account_name.as_deref(),
        )
    }

    /// Whom a release in `namespace` naming `service_account` (or none) acts as.
    pub fn identity_in(&self, namespace: &str, service_account: Option<&str>) -> Identity {
        match service_account.or(self.default_service_account.as_deref()) {
            Some(name) => Identity::ServiceAccount {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            },
            None => Identity::Engine,
        }
    }

    /// The first reference of `hr` that leaves its namespace, when the policy refuses
    /// them: the message names the field. valuesFrom and the chart's secretRef name no
    /// namespace (always the HelmRelease's own, as in Flux), so they cannot leave it.
    pub fn refused_reference(&self, hr: &HelmRelease) -> Option<String> {
        if !self.no_cross_namespace_refs {
            return None;
        }
        let own = hr.object_namespace();
        let refused = |field: &str, ns: &str| {
            format!(
                "cross-namespace references are not allowed on this cluster (--no-cross-namespace-refs): {field} is {ns:?}, not the HelmRelease's namespace {own:?}"
            )
        };
        if let Some(ns) = hr.spec.target_namespace.as_deref().filter(|ns| *ns != own) {
            return Some(refused("spec.targetNamespace", ns));
        }
        if let Some(ns) = hr.spec.storage_namespace.as_deref().filter(|ns| *ns != own) {
            return Some(refused("spec.storageNamespace", ns));
        }
        for (i, dep) in hr.spec.depends_on.iter().enumerate() {
            if let Some(ns) = dep.namespace.as_deref().filter(|ns| *ns != own) {
                return Some(refused(&format!("spec.dependsOn[{i}].namespace"), ns));
            }
        }
        None
    }

    /// The header's words for it.
    pub fn describe(&self) -> String {
        match (&self.default_service_account, self.no_cross_namespace_refs) {
            (None, false) => "open".to_owned(),
            (None, true) => "no cross-namespace refs".to_owned(),
            (Some(sa), false) => format!("locked down (default SA {sa})"),
            (Some(sa), true) => format!("locked down (default SA {sa}, no cross-namespace refs)"),
        }
    }
}

fn join_networks(networks: &[ipnet::IpNet]) -> String {
    networks
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Whom a release acts as.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Identity {
    /// The engine's own identity (no tenancy asked for).
    Engine,
    /// A ServiceAccount of the HelmRelease's namespace, by impersonation.
    ServiceAccount { namespace: String, name: String },
}

impl Identity {
    /// The Kubernetes username impersonated, if any.
    pub fn username(&self) -> Option<String> {
        match self {
            Self::Engine => None,
            Self::ServiceAccount { namespace, name } => {
                Some(format!("system:serviceaccount:{namespace}:{name}"))
            }
        }
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Engine => f.write_str("the engine's own identity"),
            Self::ServiceAccount { namespace, name } => {
                write!(f, "ServiceAccount {namespace}/{name}")
            }
        }
    }
}

/// A client that sends every request as `username` (an `Impersonate-User` header) over
/// `base`'s connections. kube's own errors come back as they are (its `send` returns
/// them boxed and the outer client unboxes them), so failures classify the same.
pub fn impersonating(base: &Client, username: &str) -> Client {
    let user = hyper::header::HeaderValue::from_str(username)
        .expect("a Kubernetes username is a valid header value");
    let inner = base.clone();
    let service = tower::service_fn(move |mut request: hyper::Request<kube::client::Body>| {
        let inner = inner.clone();
        let user = user.clone();
        async move {
            let headers = request.headers_mut();
            // Never a second identity beside this one.
            headers.remove("Impersonate-Group");
            headers.remove("Impersonate-Uid");
            headers.insert("Impersonate-User", user);
            inner
                .send(request)
                .await
                .map_err(|e| -> tower::BoxError { Box::new(e) })
        }
    });
    Client::new(service, base.default_namespace().to_owned())
}

/// Reads the published policy. `None` when nothing is published: the ConfigMap does not
/// exist, or no reader grant exists for this identity (the cluster was not set up with
/// `wheelhouse install`). Any other failure is an error: the engine cannot tell.
pub async fn read_published(client: &Client) -> Result<Option<Policy>, PolicyError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), SETTINGS_NAMESPACE);
    match api.get_opt(SETTINGS_NAME).await {
        Ok(Some(cm)) => Policy::from_data(&cm.data.unwrap_or_default()).map(Some),
        Ok(None) => Ok(None),
        Err(kube::Error::Api(s)) if s.code == 403 => Ok(None),
        Err(e) => Err(PolicyError::Unreadable(
            crate::cluster::client::api_message(&e),
        )),
    }
}

/// Whether `client`'s identity may impersonate ServiceAccounts in `namespace` (`None`:
/// in every namespace).
pub async fn can_impersonate(client: &Client, namespace: Option<&str>) -> bool {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some("impersonate".into()),
                group: Some(String::new()),
                resource: Some("serviceaccounts".into()),
                namespace: namespace.map(str::to_owned),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<SelfSubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .is_ok_and(|r| r.status.is_some_and(|s| s.allowed))
}

/// Whether the ServiceAccount exists (read with the engine's identity).
pub async fn service_account_exists(
    client: &Client,
    namespace: &str,
    name: &str,
) -> kube::Result<bool> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    Ok(api.get_metadata_opt(name).await?.is_some())
}

/// What `wheelhouse install` publishes: the policy ConfigMap, and the Role and
/// RoleBinding that let every authenticated identity read it (and nothing else).
pub fn manifests(policy: &Policy) -> Vec<serde_json::Value> {
    let config_map = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": SETTINGS_NAME, "namespace": SETTINGS_NAMESPACE,
                     "labels": {"app.kubernetes.io/name": "wheelhouse"}},
        "data": policy.to_data(),
    });
    let role = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": READER_ROLE, "namespace": SETTINGS_NAMESPACE},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"],
                   "resourceNames": [SETTINGS_NAME], "verbs": ["get"]}],
    });
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": READER_ROLE, "namespace": SETTINGS_NAMESPACE},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": READER_ROLE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                      "name": "system:authenticated"}],
    });
    vec![config_map, role, binding]
}

/// A DNS-1123 subdomain, as ServiceAccount names are.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hr(spec: &str) -> HelmRelease {
        let sep = if spec.is_empty() { "" } else { ", " };
        crate::text::yaml::from_str(&format!(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {{name: web, namespace: tenant-a}}\nspec: {{chart: {{path: ./c}}{sep}{spec}}}"
        ))
        .unwrap()
    }

    fn locked(sa: &str) -> Policy {
        Policy {
            default_service_account: Some(sa.into()),
            no_cross_namespace_refs: true,
            ..Policy::default()
        }
    }

    #[test]
    fn a_release_acts_as_its_service_account_then_the_default_then_the_engine() {
        let open = Policy::default();
        assert_eq!(open.identity(&hr("")), Identity::Engine);
        let own = hr("serviceAccountName: deployer");
        let expected = Identity::ServiceAccount {
            namespace: "tenant-a".into(),
            name: "deployer".into(),
        };
        assert_eq!(open.identity(&own), expected);
        assert_eq!(locked("default").identity(&own), expected);
        assert_eq!(
            locked("default").identity(&hr("")).username().as_deref(),
            Some("system:serviceaccount:tenant-a:default")
        );
    }

    #[test]
    fn each_cross_namespace_reference_is_refused_by_name() {
        let policy = locked("default");
        assert_eq!(policy.refused_reference(&hr("")), None);
        // The HelmRelease's own namespace, written out, is not a cross-namespace ref.
        assert_eq!(
            policy.refused_reference(&hr(
                "targetNamespace: tenant-a, storageNamespace: tenant-a, dependsOn: [{name: db, namespace: tenant-a}]"
            )),
            None
        );
        for (spec, field) in [
            ("targetNamespace: victim", "spec.targetNamespace"),
            ("storageNamespace: victim", "spec.storageNamespace"),
            (
                "dependsOn: [{name: a}, {name: db, namespace: victim}]",
                "spec.dependsOn[1].namespace",
            ),
        ] {
            let refused = policy.refused_reference(&hr(spec)).unwrap();
            assert!(
                refused.contains(field) && refused.contains("\"victim\""),
                "{refused}"
            );
            assert_eq!(Policy::default().refused_reference(&hr(spec)), None);
        }
    }

    #[test]
    fn the_published_policy_tightens_with_the_flags_and_never_loosens() {
        let published = Policy::from_data(&BTreeMap::from([
            (DEFAULT_SERVICE_ACCOUNT_KEY.into(), "tenant".into()),
            (NO_CROSS_NAMESPACE_REFS_KEY.into(), "false".into()),
        ]))
        .unwrap();
        let flags = Policy {
            default_service_account: None,
            no_cross_namespace_refs: true,
            ..Policy::default()
        };
        assert_eq!(
            Policy::combine(Some(&published), &flags).unwrap(),
            Policy {
                default_service_account: Some("tenant".into()),
                no_cross_namespace_refs: true,
                ..Policy::default()
            }
        );
        assert_eq!(Policy::combine(None, &flags).unwrap(), flags);
        assert!(matches!(
            Policy::combine(Some(&published), &locked("other")),
            Err(PolicyError::Conflict { .. })
        ));
        assert_eq!(
            Policy::from_data(&published.to_data()).unwrap(),
            published,
            "what install publishes reads back"
        );
        for (key, bad) in [
            (DEFAULT_SERVICE_ACCOUNT_KEY, "Not_A_Name"),
            (NO_CROSS_NAMESPACE_REFS_KEY, "yes"),
        ] {
            let err = Policy::from_data(&BTreeMap::from([(key.into(), bad.into())])).unwrap_err();
            assert!(err.to_string().contains(bad), "{err}");
        }
    }

    /// Denied networks add up; a published lockdown's exceptions stand alone (an engine's
    /// own flags never open more); a lockdown that is only the engine's keeps its own
    /// exceptions to its own refusals. What install publishes reads back.
    #[test]
    fn networks_combine_so_that_flags_only_refuse_more() {
        let nets = |s: &str| crate::cluster::egress::parse_networks(s).unwrap();
        let flags = Policy {
            default_service_account: Some("tenant".into()),
            allowed_networks: nets("127.0.0.0/8"),
            denied_networks: nets("203.0.113.0/24"),
            ..Policy::default()
        };
        let open = Policy {
            allowed_networks: nets("10.1.0.0/16"),
            denied_networks: nets("198.51.100.0/24"),
            ..Policy::default()
        };
        let by_flags = Policy::combine(Some(&open), &flags).unwrap();
        assert_eq!(by_flags.allowed_networks, nets("10.1.0.0/16, 127.0.0.0/8"));
        assert_eq!(
            by_flags.denied_networks,
            nets("198.51.100.0/24, 203.0.113.0/24")
        );
        let published = Policy {
            default_service_account: Some("tenant".into()),
            ..open.clone()
        };
        let by_cluster = Policy::combine(Some(&published), &flags).unwrap();
        assert_eq!(by_cluster.allowed_networks, nets("10.1.0.0/16"));
        assert_eq!(
            Policy::from_data(&flags.to_data()).unwrap(),
            flags,
            "networks read back"
        );
        assert!(
            Policy::from_data(&BTreeMap::from([(
                ALLOWED_NETWORKS_KEY.into(),
                "10.0.0.0/33".into()
            )]))
            .is_err()
        );
    }

    #[test]
    fn the_published_objects_grant_only_reading_the_policy() {
        let docs = manifests(&locked("default"));
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[0]["data"][DEFAULT_SERVICE_ACCOUNT_KEY], "default");
        assert_eq!(docs[1]["rules"][0]["verbs"], serde_json::json!(["get"]));
        assert_eq!(
            docs[1]["rules"][0]["resourceNames"],
            serde_json::json!([SETTINGS_NAME])
        );
        assert_eq!(docs[2]["subjects"][0]["name"], "system:authenticated");
    }
}

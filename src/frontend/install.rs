//! Everything to run the controller in a cluster (`wheelhouse install`), generated from
//! code like the CRD and the RBAC, as `flux install --export` prints Flux: the HelmRelease
//! CRD, the namespace, the ServiceAccount with the grant of `wheelhouse rbac` (every
//! namespace), one controller Deployment (plus one per shard, as Flux deploys one
//! controller per shard) and a Service for the controllers' metrics.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, HTTPGetAction, Namespace,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile,
    SecurityContext, Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::ObjectMeta;
use serde::Serialize;

use crate::cluster::client::Scope;
use crate::cluster::rbac::{self, RbacOptions};

/// Where the controller runs unless `--namespace` says otherwise.
pub const DEFAULT_NAMESPACE: &str = "wheelhouse-system";
/// The controller's ServiceAccount, which the RBAC of `wheelhouse rbac` is granted to.
pub const SERVICE_ACCOUNT: &str = "wheelhouse";
/// The unsharded controller's Deployment; shard `KEY` runs as `<this>-shard-KEY`.
pub const CONTROLLER: &str = "wheelhouse-controller";
/// The Service in front of every controller's metrics port.
pub const METRICS_SERVICE: &str = "wheelhouse-controller-metrics";
/// The label that assigns a HelmRelease to a shard; controller pods of a shard carry it too.
pub const SHARD_LABEL: &str = "sharding.wheelhouse.dev/key";
/// The release contents' ClusterRole: `wheelhouse rbac`'s default `--release-role`.
pub const RELEASE_ROLE: &str = "admin";

/// Prometheus metrics (`--metrics-addr`), named as Flux names its controllers' port.
pub const METRICS_PORT: (&str, i32) = ("http-prom", 8080);
/// `/healthz` (liveness) and `/readyz` (readiness) (`--health-addr`).
pub const HEALTH_PORT: (&str, i32) = ("healthz", 8081);
/// The webhook receivers (`--receiver-addr`), as Flux's notification-controller names
/// its receiver port.
pub const RECEIVER_PORT: (&str, i32) = ("http-webhook", 9292);
/// The label naming which controller Deployment a pod belongs to.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// The Service in front of a controller's receivers; a shard's is `<this>-shard-KEY`.
pub const RECEIVER_SERVICE: &str = "wheelhouse-webhook-receiver";

/// The writable home of the controller (an emptyDir; the root filesystem is read-only):
/// the chart cache (and with `--renderer helm`, helm's configuration and cache).
const HOME: &str = "/home/wheelhouse";
/// The user the controller runs as (distroless' `nonroot`), so `runAsNonRoot` holds
/// whatever user the image names.
const USER: i64 = 65532;

/// What `wheelhouse install` generates.
#[derive(Debug, Clone)]
pub struct InstallOptions {
    /// The namespace of the controllers, their ServiceAccount and their Lease.
    pub namespace: String,
    /// The controller image; it runs `wheelhouse` and has the render helper
    /// `wheelhouse-render` beside it or on its PATH.
    pub image: String,
    /// One more controller Deployment for each shard key.
    pub shards: Vec<String>,
    /// The cluster's tenancy policy: published for every engine (dashboards included),
    /// and, when locked down, the controllers' flags and a grant that only impersonates.
    pub tenancy: crate::cluster::tenancy::Policy,
    /// Where `/metrics` listens in the pod (`--metrics-addr`): every address by default,
    /// for Prometheus, behind the NetworkPolicy [`METRICS_SCRAPER_LABEL`] opens;
    /// `127.0.0.1:8080` keeps the series (which name every release) inside the pod.
    pub metrics_addr: std::net::SocketAddr,
}

/// The namespace label that lets pods of a namespace (Prometheus') scrape the
/// controllers' metrics; no other pod may (the NetworkPolicy `wheelhouse-controller`).
pub const METRICS_SCRAPER_LABEL: &str = "wheelhouse.dev/metrics-scraper";

/// Every address, port 8080: what Prometheus scrapes through the metrics Service.
pub fn default_metrics_addr() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([0, 0, 0, 0], METRICS_PORT.1 as u16))
}

/// `ghcr.io/wheelhouse-dev/wheelhouse:v<this version>`.
pub fn default_image() -> String {
    format!(
        "ghcr.io/wheelhouse-dev/wheelhouse:v{}",
        env!("CARGO_PKG_VERSION")
    )
}

/// A shard key becomes a label value and part of a Deployment name, so it must suit both:
/// lower-case letters, digits, `-` and `.`, starting and ending with a letter or digit, at
/// most 63 characters.
pub fn parse_shard_key(key: &str) -> Result<String, String> {
    let ok = (1..=63).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && key.starts_with(|c: char| c.is_ascii_alphanumeric())
        && key.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(key.to_owned())
    } else {
        Err(format!(
            "{key:?} is not a usable shard key: it names a Deployment and labels pods, so use \
             lower-case letters, digits, '-' and '.', starting and ending with a letter or \
             digit, at most 63 characters"
        ))
    }
}

/// Whether `name` is a valid namespace name (a DNS-1123 label).
pub fn is_namespace_name(name: &str) -> bool {
    (1..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Every object, in apply order: the CRD and the namespace first, then the RBAC, the
/// Service and the Deployments.
pub fn manifests(opts: &InstallOptions) -> Vec<serde_json::Value> {
    let mut out = vec![
        value(&crate::api::crd()),
        value(&Namespace {
            metadata: ObjectMeta {
                name: Some(opts.namespace.clone()),
                labels: Some(labels(&[
                    ("app.kubernetes.io/name", "wheelhouse"),
                    // As Flux's namespace: the controllers meet the restricted profile,
                    // and anything else deployed here is warned about when it does not.
                    ("pod-security.kubernetes.io/warn", "restricted"),
                    ("pod-security.kubernetes.io/warn-version", "latest"),
                ])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        }),
    ];
    // The controllers watch every namespace, so the grant is cluster-wide; their Lease
    // lives in their own namespace.
    out.extend(rbac::manifests(&RbacOptions {
        scope: Scope::All,
        service_account_namespace: opts.namespace.clone(),
        service_account: SERVICE_ACCOUNT.to_owned(),
        lease_namespace: opts.namespace.clone(),
        // Locked down, release contents get their rights from each namespace's
        // ServiceAccount, never from a grant of the engine's.
        release_role: (!opts.tenancy.locked_down()).then(|| RELEASE_ROLE.to_owned()),
    }));
    out.extend(aggregated_roles().iter().map(value));
    out.push(value(&metrics_service(&opts.namespace)));
    out.push(value(&network_policy(&opts.namespace)));
    out.push(value(&deployment(opts, None)));
    out.push(value(&receiver_service(&opts.namespace, None)));
    let mut seen = Vec::new();
    for key in &opts.shards {
        if !seen.contains(&key) {
            seen.push(key);
            out.push(value(&deployment(opts, Some(key))));
            // Each controller wakes only its own shard's releases: a Service of its own.
            out.push(value(&receiver_service(&opts.namespace, Some(key))));
        }
    }
    // The policy every engine of the cluster reads (src/cluster/tenancy.rs), published even when
    // open, so that a dashboard can tell an open cluster from one it cannot read.
    out.extend(crate::cluster::tenancy::manifests(&opts.tenancy));
    out
}

/// Everything as a YAML document stream for `kubectl apply -f -`.
pub fn yaml(opts: &InstallOptions) -> String {
    format!(
        "{IMAGE_NOTE}{}",
        crate::text::yaml::to_documents(&manifests(opts))
    )
}

/// What the stream says first: what the controller image must hold.
pub const IMAGE_NOTE: &str = "\
# wheelhouse controller. The image runs `wheelhouse` as its entrypoint and must contain
# the render helper `wheelhouse-render` beside it (same directory) or on its PATH, runnable
# as any user: build it with src/helm/render/helper/build.sh (a static Go binary on Helm's SDK).
# No helm binary is needed unless the controller runs with `--renderer helm`.
";

/// The name of a controller's Deployment.
pub fn deployment_name(shard: Option<&str>) -> String {
    match shard {
        None => CONTROLLER.to_owned(),
        Some(key) => format!("{CONTROLLER}-shard-{key}"),
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn controller_labels() -> BTreeMap<String, String> {
    labels(&[
        ("app.kubernetes.io/name", "wheelhouse"),
        ("app.kubernetes.io/component", "controller"),
    ])
}

/// HelmReleases in Kubernetes' own user-facing roles, as Flux adds its kinds to them: who
/// holds `view` in a namespace reads its HelmReleases, `edit` and `admin` write them. A
/// tenant's ServiceAccount bound to `admin` in its namespace can then read the
/// dependencies its releases name there, and only there (a dependsOn is read as the
/// release, src/engine/worker/guards.rs).
fn aggregated_roles() -> Vec<k8s_openapi::api::rbac::v1::ClusterRole> {
    use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
    let role = |name: &str, to: &[&str], verbs: &[&str]| {
        let mut pairs = vec![("app.kubernetes.io/name", "wheelhouse")];
        let keys: Vec<String> = to
            .iter()
            .map(|r| format!("rbac.authorization.k8s.io/aggregate-to-{r}"))
            .collect();
        pairs.extend(keys.iter().map(|k| (k.as_str(), "true")));
        ClusterRole {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(labels(&pairs)),
                ..ObjectMeta::default()
            },
            rules: Some(vec![PolicyRule {
                api_groups: Some(vec!["wheelhouse.dev".to_owned()]),
                resources: Some(vec!["helmreleases".to_owned()]),
                verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
                ..PolicyRule::default()
            }]),
            ..ClusterRole::default()
        }
    };
    vec![
        role(
            "wheelhouse-view",
            &["view", "edit", "admin"],
            &["get", "list", "watch"],
        ),
        role(
            "wheelhouse-edit",
            &["edit", "admin"],
            &["create", "update", "patch", "delete", "deletecollection"],
        ),
    ]
}

/// Who may reach the controllers' pods: the receivers and probes from anywhere (senders
/// are outside the cluster; the kubelet probes), `/metrics` only from namespaces labelled
/// [`METRICS_SCRAPER_LABEL`]: its series name every release of every tenant.
fn network_policy(namespace: &str) -> k8s_openapi::api::networking::v1::NetworkPolicy {
    use k8s_openapi::api::networking::v1::{
        NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
        NetworkPolicySpec,
    };
    let port = |p: (&str, i32)| NetworkPolicyPort {
        port: Some(IntOrString::Int(p.1)),
        protocol: Some("TCP".to_owned()),
        ..NetworkPolicyPort::default()
    };
    NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(CONTROLLER.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels(&[("app.kubernetes.io/name", "wheelhouse")])),
            ..ObjectMeta::default()
        },
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(controller_labels()),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".to_owned()]),
            ingress: Some(vec![
                NetworkPolicyIngressRule {
                    from: None,
                    ports: Some(vec![port(RECEIVER_PORT), port(HEALTH_PORT)]),
                },
                NetworkPolicyIngressRule {
                    from: Some(vec![NetworkPolicyPeer {
                        namespace_selector: Some(LabelSelector {
                            match_labels: Some(labels(&[(METRICS_SCRAPER_LABEL, "true")])),
                            ..LabelSelector::default()
                        }),
                        ..NetworkPolicyPeer::default()
                    }]),
                    ports: Some(vec![port(METRICS_PORT)]),
                },
            ]),
            ..NetworkPolicySpec::default()
        }),
    }
}

fn metrics_service(namespace: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(METRICS_SERVICE.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(controller_labels()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            // Every controller, sharded or not.
            selector: Some(controller_labels()),
            ports: Some(vec![ServicePort {
                name: Some(METRICS_PORT.0.to_owned()),
                port: METRICS_PORT.1,
                target_port: Some(IntOrString::String(METRICS_PORT.0.to_owned())),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The Service in front of one controller's webhook receivers (port 80).
fn receiver_service(namespace: &str, shard: Option<&str>) -> Service {
    let mut selector = controller_labels();
    selector.insert(INSTANCE_LABEL.to_owned(), deployment_name(shard));
    let name = match shard {
        Some(key) => format!("{RECEIVER_SERVICE}-shard-{key}"),
        None => RECEIVER_SERVICE.to_owned(),
    };
    Service {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_owned()),
            labels: Some(controller_labels()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(selector),
            ports: Some(vec![ServicePort {
                name: Some(RECEIVER_PORT.0.to_owned()),
                port: 80,
                target_port: Some(IntOrString::String(RECEIVER_PORT.0.to_owned())),
                protocol: Some("TCP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn deployment(opts: &InstallOptions, shard: Option<&str>) -> Deployment {
    let name = deployment_name(shard);
    // Selectors of the controllers never overlap: the unsharded one selects pods without
    // a shard label, each shard's its own key.
    let mut pod_labels = controller_labels();
    // Which controller a pod is, for the Service of its own receivers.
    pod_labels.insert(INSTANCE_LABEL.to_owned(), name.clone());
    let mut selector = LabelSelector {
        match_labels: Some(controller_labels()),
        ..LabelSelector::default()
    };
    match shard {
        Some(key) => {
            pod_labels.insert(SHARD_LABEL.to_owned(), key.to_owned());
            selector = LabelSelector {
                match_labels: Some(pod_labels.clone()),
                ..LabelSelector::default()
            };
        }
        None => {
            selector.match_expressions = Some(vec![LabelSelectorRequirement {
                key: SHARD_LABEL.to_owned(),
                operator: "DoesNotExist".to_owned(),
                values: None,
            }]);
        }
    }
    let mut args: Vec<String> = [
        "controller",
        "--metrics-addr",
        &opts.metrics_addr.to_string(),
        "--health-addr",
        &format!("0.0.0.0:{}", HEALTH_PORT.1),
        "--receiver-addr",
        &format!("0.0.0.0:{}", RECEIVER_PORT.1),
        "--lease-namespace",
        &opts.namespace,
        "--chart-cache",
        &format!("{HOME}/.cache/wheelhouse/charts"),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    if let Some(key) = shard {
        args.extend(["--shard".to_owned(), key.to_owned()]);
    }
    if let Some(sa) = &opts.tenancy.default_service_account {
        args.extend(["--default-service-account".to_owned(), sa.clone()]);
    }
    if opts.tenancy.no_cross_namespace_refs {
        args.push("--no-cross-namespace-refs".to_owned());
    }
    for net in &opts.tenancy.allowed_networks {
        args.extend(["--allow-network".to_owned(), net.to_string()]);
    }
    for net in &opts.tenancy.denied_networks {
        args.extend(["--deny-network".to_owned(), net.to_string()]);
    }
    let probe = |path: &str| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_owned()),
            port: IntOrString::String(HEALTH_PORT.0.to_owned()),
            ..HTTPGetAction::default()
        }),
        ..Probe::default()
    };
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_owned(), Quantity(cpu.to_owned())),
            ("memory".to_owned(), Quantity(memory.to_owned())),
        ])
    };
    let env = |name: &str, value: String| EnvVar {
        name: name.to_owned(),
        value: Some(value),
        ..EnvVar::default()
    };
    let port = |(name, number): (&str, i32)| ContainerPort {
        name: Some(name.to_owned()),
        container_port: number,
        protocol: Some("TCP".to_owned()),
        ..ContainerPort::default()
    };
    let runtime_default = || {
        Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            ..SeccompProfile::default()
        })
    };
    let container = Container {
        name: "controller".to_owned(),
        image: Some(opts.image.clone()),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        args: Some(args),
        env: Some(vec![
            // The chart cache is under HOME (and, with `--renderer helm`, helm's
            // configuration and cache; helm's render seeds go to /tmp).
            env("HOME", HOME.to_owned()),
            env("XDG_CACHE_HOME", format!("{HOME}/.cache")),
        ]),
        ports: Some(vec![
            port(METRICS_PORT),
            port(HEALTH_PORT),
            port(RECEIVER_PORT),
        ]),
        liveness_probe: Some(probe("/healthz")),
        readiness_probe: Some(probe("/readyz")),
        // The render helper runs in the same container (about 50 MB resident) and counts
        // against the limit.
        resources: Some(ResourceRequirements {
            requests: Some(quantities("100m", "64Mi")),
            limits: Some(quantities("1", "256Mi")),
            ..ResourceRequirements::default()
        }),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".to_owned()]),
                ..Capabilities::default()
            }),
            seccomp_profile: runtime_default(),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(vec![
            VolumeMount {
                name: "home".to_owned(),
                mount_path: HOME.to_owned(),
                ..VolumeMount::default()
            },
            VolumeMount {
                name: "tmp".to_owned(),
                mount_path: "/tmp".to_owned(),
                ..VolumeMount::default()
            },
        ]),
        ..Container::default()
    };
    let empty_dir = |name: &str| Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource::default()),
        ..Volume::default()
    };
    Deployment {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(opts.namespace.clone()),
            labels: Some(pod_labels.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            // One active engine per shard holds the Lease; a second replica would only
            // stand by.
            replicas: Some(1),
            selector,
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations: Some(labels(&[
                        ("prometheus.io/scrape", "true"),
                        ("prometheus.io/port", &METRICS_PORT.1.to_string()),
                    ])),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(SERVICE_ACCOUNT.to_owned()),
                    // The engine lets running steps finish and hands back the Lease within
                    // 25 s of SIGTERM.
                    termination_grace_period_seconds: Some(30),
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        run_as_user: Some(USER),
                        run_as_group: Some(USER),
                        fs_group: Some(USER),
                        seccomp_profile: runtime_default(),
                        ..PodSecurityContext::default()
                    }),
                    node_selector: Some(labels(&[("kubernetes.io/os", "linux")])),
                    containers: vec![container],
                    volumes: Some(vec![empty_dir("home"), empty_dir("tmp")]),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// k8s-openapi's types serialize with their apiVersion and kind.
fn value<K: Serialize>(obj: &K) -> serde_json::Value {
    serde_json::to_value(obj).expect("Kubernetes objects serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::rbac::tests::kinds;

    fn opts(shards: &[&str]) -> InstallOptions {
        InstallOptions {
            namespace: "ops".into(),
            image: "registry.example/wheelhouse:dev".into(),
            shards: shards.iter().map(|s| (*s).to_owned()).collect(),
            tenancy: Default::default(),
            metrics_addr: default_metrics_addr(),
        }
    }

    fn find<'a>(objects: &'a [serde_json::Value], kind_name: &str) -> &'a serde_json::Value {
        let i = kinds(objects)
            .iter()
            .position(|k| k == kind_name)
            .unwrap_or_else(|| panic!("no {kind_name} in {:?}", kinds(objects)));
        &objects[i]
    }

    fn strings(v: &serde_json::Value) -> Vec<&str> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap())
            .collect()
    }

    #[test]
    fn everything_to_run_the_controller_in_apply_order() {
        let objects = manifests(&opts(&[]));
        assert_eq!(
            kinds(&objects),
            [
                "CustomResourceDefinition/helmreleases.wheelhouse.dev",
                "Namespace/ops",
                "ServiceAccount/wheelhouse",
                "ClusterRole/wheelhouse-engine",
                "Role/wheelhouse-engine-lease",
                "RoleBinding/wheelhouse-engine-lease",
                "ClusterRoleBinding/wheelhouse-engine",
                "ClusterRoleBinding/wheelhouse-release-admin",
                "ClusterRole/wheelhouse-view",
                "ClusterRole/wheelhouse-edit",
                "Service/wheelhouse-controller-metrics",
                "NetworkPolicy/wheelhouse-controller",
                "Deployment/wheelhouse-controller",
                "Service/wheelhouse-webhook-receiver",
                "ConfigMap/wheelhouse-tenancy",
                "Role/wheelhouse-tenancy-reader",
                "RoleBinding/wheelhouse-tenancy-reader",
            ]
        );
        assert_eq!(objects[0], value(&crate::api::crd()));
        // /metrics only for namespaces labelled as scrapers; receivers and probes for all.
        let policy = &objects[11]["spec"]["ingress"];
        assert_eq!(policy[0]["from"], serde_json::Value::Null);
        assert_eq!(
            policy[1]["from"][0]["namespaceSelector"]["matchLabels"][METRICS_SCRAPER_LABEL],
            "true"
        );
        assert_eq!(policy[1]["ports"][0]["port"], METRICS_PORT.1);
        // The grant is exactly `wheelhouse rbac` for every namespace, lease here.
        assert_eq!(
            objects[2..8],
            rbac::manifests(&RbacOptions {
                scope: Scope::All,
                service_account_namespace: "ops".into(),
                service_account: "wheelhouse".into(),
                lease_namespace: "ops".into(),
                release_role: Some("admin".into()),
            })[..]
        );
        for o in &objects[2..14] {
            if o["kind"] != "ClusterRole" && o["kind"] != "ClusterRoleBinding" {
                assert_eq!(o["metadata"]["namespace"], "ops", "{o}");
            }
        }
        // The open policy, published where every engine reads it.
        assert_eq!(
            objects[14..],
            crate::cluster::tenancy::manifests(&Default::default())[..]
        );
        // The receivers' Service selects the unsharded controller's pods only.
        assert_eq!(
            objects[13]["spec"]["selector"]["app.kubernetes.io/instance"],
            "wheelhouse-controller"
        );
        for binding in [&objects[5], &objects[6], &objects[7]] {
            assert_eq!(
                binding["subjects"],
                serde_json::json!([{"kind": "ServiceAccount", "name": "wheelhouse", "namespace": "ops"}])
            );
        }
    }

    #[test]
    fn a_locked_down_install_impersonates_and_publishes_its_policy() {
        let mut o = opts(&["s1"]);
        o.tenancy = crate::cluster::tenancy::Policy {
            default_service_account: Some("tenant".into()),
            no_cross_namespace_refs: true,
            ..Default::default()
        };
        let objects = manifests(&o);
        assert!(
            !kinds(&objects)
                .iter()
                .any(|k| k.contains("wheelhouse-release-")),
            "{:?}",
            kinds(&objects)
        );
        for name in [
            "Deployment/wheelhouse-controller",
            "Deployment/wheelhouse-controller-shard-s1",
        ] {
            let args =
                strings(&find(&objects, name)["spec"]["template"]["spec"]["containers"][0]["args"]);
            let at = args
                .iter()
                .position(|a| *a == "--default-service-account")
                .unwrap();
            assert_eq!(args[at + 1], "tenant");
            assert!(args.contains(&"--no-cross-namespace-refs"), "{args:?}");
        }
        let published = find(&objects, "ConfigMap/wheelhouse-tenancy");
        assert_eq!(published["metadata"]["namespace"], "kube-public");
        assert_eq!(published["data"]["defaultServiceAccount"], "tenant");
        assert_eq!(published["data"]["noCrossNamespaceRefs"], "true");
    }

    #[test]
    fn the_stream_first_says_what_the_image_holds() {
        let text = yaml(&opts(&[]));
        assert!(text.starts_with("# wheelhouse controller."), "{text}");
        assert!(text.contains("wheelhouse-render"));
        // The note is YAML comments only: the objects follow (read back below).
        assert!(
            text.strip_prefix(IMAGE_NOTE)
                .is_some_and(|rest| rest.starts_with("apiVersion: apiextensions.k8s.io/v1\n"))
        );
    }

    #[test]
    fn the_controller_runs_with_probes_metrics_and_its_lease_here() {
        let objects = manifests(&opts(&[]));
        let deployment = find(&objects, "Deployment/wheelhouse-controller");
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], "wheelhouse");
        assert_eq!(pod["terminationGracePeriodSeconds"], 30);
        assert!(pod.get("automountServiceAccountToken").is_none());
        let c = &pod["containers"][0];
        assert_eq!(c["image"], "registry.example/wheelhouse:dev");
        assert_eq!(
            strings(&c["args"]),
            [
                "controller",
                "--metrics-addr",
                "0.0.0.0:8080",
                "--health-addr",
                "0.0.0.0:8081",
                "--receiver-addr",
                "0.0.0.0:9292",
                "--lease-namespace",
                "ops",
                "--chart-cache",
                "/home/wheelhouse/.cache/wheelhouse/charts",
            ]
        );
        assert_eq!(
            c["ports"],
            serde_json::json!([
                {"name": "http-prom", "containerPort": 8080, "protocol": "TCP"},
                {"name": "healthz", "containerPort": 8081, "protocol": "TCP"},
                {"name": "http-webhook", "containerPort": 9292, "protocol": "TCP"},
            ])
        );
        assert_eq!(
            c["livenessProbe"]["httpGet"],
            serde_json::json!({"path": "/healthz", "port": "healthz"})
        );
        assert_eq!(
            c["readinessProbe"]["httpGet"],
            serde_json::json!({"path": "/readyz", "port": "healthz"})
        );
        assert_eq!(c["resources"]["limits"]["memory"], "256Mi");
        // The chart cache and helm's HOME/cache are on the writable emptyDir.
        let env: BTreeMap<&str, &str> = c["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["name"].as_str().unwrap(), e["value"].as_str().unwrap()))
            .collect();
        assert_eq!(env["HOME"], "/home/wheelhouse");
        assert!(env["XDG_CACHE_HOME"].starts_with("/home/wheelhouse/"));
        let mounts: Vec<(&str, &str)> = c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap(),
                    m["mountPath"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(mounts, [("home", "/home/wheelhouse"), ("tmp", "/tmp")]);
        assert!(
            pod["volumes"]
                .as_array()
                .unwrap()
                .iter()
                .all(|v| v["emptyDir"].is_object())
        );
        // Flux's security context: the restricted Pod Security profile.
        let sc = &c["securityContext"];
        assert_eq!(sc["readOnlyRootFilesystem"], true);
        assert_eq!(sc["allowPrivilegeEscalation"], false);
        assert_eq!(sc["runAsNonRoot"], true);
        assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
        assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    }

    #[test]
    fn one_deployment_per_shard_and_one_service_for_all() {
        let objects = manifests(&opts(&["s1", "eu.west-2", "s1"]));
        let names: Vec<String> = kinds(&objects)
            .into_iter()
            .filter(|n| n.starts_with("Deployment/"))
            .collect();
        assert_eq!(
            names,
            [
                "Deployment/wheelhouse-controller",
                "Deployment/wheelhouse-controller-shard-s1",
                "Deployment/wheelhouse-controller-shard-eu.west-2",
            ]
        );
        let unsharded = find(&objects, "Deployment/wheelhouse-controller");
        let shard = find(&objects, "Deployment/wheelhouse-controller-shard-eu.west-2");
        assert!(
            !strings(&unsharded["spec"]["template"]["spec"]["containers"][0]["args"])
                .contains(&"--shard")
        );
        assert!(
            unsharded["spec"]["template"]["metadata"]["labels"]
                .get(SHARD_LABEL)
                .is_none()
        );
        let args = strings(&shard["spec"]["template"]["spec"]["containers"][0]["args"]);
        assert_eq!(args[args.len() - 2..], ["--shard", "eu.west-2"]);
        assert!(args.contains(&"--lease-namespace"));
        let pod_labels = &shard["spec"]["template"]["metadata"]["labels"];
        assert_eq!(pod_labels[SHARD_LABEL], "eu.west-2");
        assert_eq!(pod_labels["app.kubernetes.io/name"], "wheelhouse");
        assert_eq!(pod_labels["app.kubernetes.io/component"], "controller");

        // Each Deployment selects its own pods only; the Service selects them all.
        let deployments: Vec<&serde_json::Value> = objects
            .iter()
            .filter(|o| o["kind"] == "Deployment")
            .collect();
        let selects = |selector: &serde_json::Value, labels: &serde_json::Value| {
            let by_labels = selector["matchLabels"]
                .as_object()
                .unwrap()
                .iter()
                .all(|(k, v)| &labels[k] == v);
            let by_expressions = selector["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|e| {
                    assert_eq!(e["operator"], "DoesNotExist");
                    labels.get(e["key"].as_str().unwrap()).is_none()
                });
            by_labels && by_expressions
        };
        let service = find(&objects, "Service/wheelhouse-controller-metrics");
        assert_eq!(
            service["spec"]["ports"],
            serde_json::json!([{"name": "http-prom", "port": 8080, "targetPort": "http-prom", "protocol": "TCP"}])
        );
        for (i, d) in deployments.iter().enumerate() {
            let labels = &d["spec"]["template"]["metadata"]["labels"];
            for (j, other) in deployments.iter().enumerate() {
                assert_eq!(selects(&other["spec"]["selector"], labels), i == j);
            }
            let service_selector = serde_json::json!({"matchLabels": service["spec"]["selector"]});
            assert!(selects(&service_selector, labels));
        }
    }

    #[test]
    fn no_wildcard_and_no_escalating_rbac() {
        for o in manifests(&opts(&["s1"])) {
            for rule in o["rules"].as_array().into_iter().flatten() {
                for field in ["apiGroups", "resources", "verbs", "resourceNames"] {
                    for s in rule[field].as_array().into_iter().flatten() {
                        assert_ne!(s, "*", "{rule}");
                        assert!(
                            !["escalate", "bind", "impersonate"].contains(&s.as_str().unwrap()),
                            "{rule}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_output_reads_back_as_kubectl_reads_it() {
        // Keys YAML 1.1 would read as booleans or numbers stay strings.
        let tricky = InstallOptions {
            namespace: "on".into(),
            image: "y".into(),
            shards: vec!["0644".into(), "no".into()],
            tenancy: Default::default(),
            metrics_addr: default_metrics_addr(),
        };
        for o in [opts(&["s1"]), tricky] {
            let text = yaml(&o);
            let read = crate::text::yaml::parse_documents(&text).unwrap();
            let objects = manifests(&o);
            assert_eq!(read.len(), objects.len());
            for (read, object) in read.iter().zip(&objects) {
                if let Some(path) = difference(read, object) {
                    panic!(
                        "{} reads back different at {path}",
                        kinds(std::slice::from_ref(object))[0]
                    );
                }
            }
            assert!(text.starts_with(IMAGE_NOTE));
        }
    }

    /// Where two values first differ, as a path.
    fn difference(a: &serde_json::Value, b: &serde_json::Value) -> Option<String> {
        use serde_json::Value::{Array, Number, Object};
        match (a, b) {
            (Object(x), Object(y)) if x.len() == y.len() => x.iter().find_map(|(k, v)| {
                let Some(w) = y.get(k) else {
                    return Some(format!(".{k} (key)"));
                };
                difference(v, w).map(|p| format!(".{k}{p}"))
            }),
            (Array(x), Array(y)) if x.len() == y.len() => x
                .iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (v, w))| difference(v, w).map(|p| format!("[{i}]{p}"))),
            // `-1.0` reads back as `-1`, as Go's encoding/json writes it: the same number.
            (Number(x), Number(y)) => (x.as_f64() != y.as_f64()).then(|| format!(": {a} vs {b}")),
            _ => (a != b).then(|| format!(": {a} vs {b}")),
        }
    }

    #[test]
    fn shard_keys_must_suit_names_and_labels() {
        for good in ["s1", "eu.west-2", "0", &"a".repeat(63)] {
            assert_eq!(parse_shard_key(good).as_deref(), Ok(good));
        }
        for bad in ["", "S1", "a_b", "-a", "a.", "a b", "a/b", &"a".repeat(64)] {
            let err = parse_shard_key(bad).unwrap_err();
            assert!(err.contains("lower-case letters"), "{err}");
        }
        assert!(is_namespace_name(DEFAULT_NAMESPACE));
        assert!(!is_namespace_name("a.b") && !is_namespace_name("Ops") && !is_namespace_name(""));
    }

    #[test]
    fn the_default_image_is_this_version() {
        assert_eq!(
            default_image(),
            format!(
                "ghcr.io/wheelhouse-dev/wheelhouse:v{}",
                env!("CARGO_PKG_VERSION")
            )
        );
    }
}

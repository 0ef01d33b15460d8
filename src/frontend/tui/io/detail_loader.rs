//! What the detail view shows of a release: its Helm data, Events, workloads and their
//! pods, and what config tracking looks after, each loaded on its own, within LIMIT.

use k8s_openapi::api::core::v1::{ConfigMap, Event, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{DynamicObject, ListParams};
use kube::{Api, Client};
use serde::Deserialize;

use crate::api::HelmRelease;
use crate::engine::ReleaseKey;
use crate::frontend::inventory::Kind;
use crate::frontend::tui::view_model::{
    DetailData, EventLine, Fetch, HelmData, ReadIn, RevisionLine, Workload, mask_manifest,
};
use crate::helm::release::Storage;
use crate::tracking::{self, ConfigKind, TrackedWorkload, WorkloadKind};

use super::limited;

/// What the detail view of a release loads: which object it is, and where its Helm
/// release is stored and deployed.
#[derive(Debug, Clone, PartialEq)]
pub struct DetailTarget {
    pub kind: Kind,
    /// The object (a HelmRelease's namespace and name; a stored release's storage
    /// namespace and name).
    pub key: ReleaseKey,
    pub storage_namespace: String,
    pub release_name: String,
    pub target_namespace: String,
    /// A release on a remote cluster (`spec.kubeConfig`): where its kubeconfig comes
    /// from, as said to the operator ("kubeConfig Secret apps/prod"). Its records and
    /// workloads are on that cluster, read there when it is one of the dashboard's
    /// contexts (see [`Reachable`]), never here.
    pub remote: Option<String>,
    /// The Secret holding that kubeconfig, which says which server the cluster is.
    pub kube_config: Option<crate::api::KubeConfigReference>,
    /// The HelmRelease's uid: a record it did not write (another claim) is not shown as
    /// its own.
    pub uid: Option<String>,
    /// Where a HelmRelease's values come from, so those from Secrets are masked by
    /// origin (none for a helm CLI release).
    pub values: Option<crate::helm::values::ValuesSources>,
}

impl DetailTarget {
    /// A wheelhouse HelmRelease's.
    pub fn of_wheelhouse(hr: &HelmRelease) -> Self {
        let namespace = hr.object_namespace();
        Self {
            kind: Kind::Wheelhouse,
            key: ReleaseKey::of(hr),
            storage_namespace: hr.storage_namespace(),
            release_name: hr.release_name(),
            target_namespace: hr.target_namespace(),
            remote: hr
                .spec
                .kube_config
                .as_ref()
                .map(|k| format!("kubeConfig Secret {namespace}/{}", k.secret_ref.name)),
            kube_config: hr.spec.kube_config.clone(),
            uid: hr.metadata.uid.clone(),
            values: Some(crate::helm::values::ValuesSources::of(hr)),
        }
    }

    /// A Flux HelmRelease's: its `spec.kubeConfig` is a Secret, or a ConfigMap naming a
    /// cloud provider's workload identity.
    pub fn of_flux(hr: &crate::api::flux::FluxHelmRelease) -> Self {
        let namespace = hr.metadata.namespace.clone().unwrap_or_default();
        let named = |kind: &str| {
            hr.spec
                .kube_config
                .as_ref()
                .and_then(|k| k.pointer(&format!("/{kind}/name")))
                .and_then(|n| n.as_str())
                .map(str::to_owned)
        };
        let remote = hr.spec.kube_config.as_ref().map(|_| {
            match (named("secretRef"), named("configMapRef")) {
                (Some(secret), _) => format!("kubeConfig Secret {namespace}/{secret}"),
                (None, Some(config)) => format!(
                    "kubeConfig ConfigMap {namespace}/{config} (a cloud provider's workload identity)"
                ),
                (None, None) => "spec.kubeConfig".to_owned(),
            }
        });
        // Flux's secretRef has wheelhouse's shape (name, optional key).
        let kube_config = named("secretRef").map(|name| crate::api::KubeConfigReference {
            secret_ref: crate::api::KubeConfigSecretRef {
                name,
                key: hr
                    .spec
                    .kube_config
                    .as_ref()
                    .and_then(|k| k.pointer("/secretRef/key"))
                    .and_then(|k| k.as_str())
                    .map(str::to_owned),
            },
        });
        Self {
            kind: Kind::Flux,
            key: ReleaseKey {
                namespace,
                name: hr.metadata.name.clone().unwrap_or_default(),
            },
            storage_namespace: hr.storage_namespace(),
            release_name: hr.release_name(),
            target_namespace: hr.target_namespace(),
            remote,
            kube_config,
            uid: None,
            values: Some(crate::helm::values::ValuesSources::of_flux(hr)),
        }
    }
}

/// A cluster the dashboard is connected to, as a remote release's kubeconfig is matched
/// against it: the operator's own client there and the server its context names.
#[derive(Clone)]
pub struct Reachable {
    /// `None`: the dashboard's own cluster.
    pub cluster: Option<crate::frontend::tui::view_model::Cluster>,
    pub context: String,
    pub server: String,
    pub client: Client,
}

/// Everything the detail view fetches: the Helm release's records (the newest whole, the
/// others as history lines), events, workloads. A remote release's records and workloads
/// are read in the cluster its kubeconfig names when `fleet` has it, as the operator.
pub async fn load_detail(
    client: Client,
    target: DetailTarget,
    fleet: Vec<Reachable>,
) -> DetailData {
    let Some(remote) = target.remote.clone() else {
        let origins = origins_of(&client, target.values.as_ref()).await;
        let (events, mut data) = futures::join!(
            load_events(client.clone(), &target),
            load_release(client.clone(), &target, origins)
        );
        data.events = Fetch::from(events);
        return data;
    };
    // The HelmRelease, its Events and its valuesFrom are here; the records are there.
    let (events, there, origins) = futures::join!(
        load_events(client.clone(), &target),
        find_remote(&client, &target, &fleet),
        origins_of(&client, target.values.as_ref())
    );
    let mut data = match there {
        Ok(there) => {
            let mut data = load_release(there.client.clone(), &target, origins).await;
            data.read_in = Some(ReadIn {
                cluster: there.cluster,
                context: there.context,
                via: remote,
            });
            data
        }
        Err(why) => DetailData {
            revisions: Fetch::Failed(why.clone()),
            helm: Fetch::Failed(why.clone()),
            workloads: Fetch::Failed(why),
            ..DetailData::default()
        },
    };
    data.events = Fetch::from(events);
    data
}

/// Which of `fleet` a remote release's kubeconfig names, read from its Secret with the
/// operator's client of the release's own cluster; else why its records are not read.
/// Only the server is taken from the kubeconfig: nothing is done with its credentials.
async fn find_remote(
    client: &Client,
    target: &DetailTarget,
    fleet: &[Reachable],
) -> Result<Reachable, String> {
    let remote = target.remote.as_deref().unwrap_or("spec.kubeConfig");
    let not_here = |why: String| {
        format!(
            "on the remote cluster of {remote}: its Helm records and workloads are there ({why}; the revisions are in the HelmRelease's status)"
        )
    };
    let Some(reference) = &target.kube_config else {
        return Err(not_here("no Secret names its server".into()));
    };
    let secret = limited(async {
        Ok::<_, kube::Error>(
            crate::cluster::remote::secret_bytes(client, &target.key.namespace, reference).await,
        )
    })
    .await
    .map_err(&not_here)?;
    let server = secret
        .and_then(|(name, bytes)| crate::cluster::remote::server_of(&name, &bytes))
        .map_err(|e| not_here(format!("which cluster is not known here: {e}")))?;
    fleet
        .iter()
        .find(|r| crate::text::url::same_server(&r.server, &server))
        .cloned()
        .ok_or_else(|| {
            not_here(format!(
                "its server {} is none of this dashboard's contexts; add it with --contexts",
                crate::text::url::redact(&server)
            ))
        })
}

/// A release's records and workloads as `client` reads them.
async fn load_release(
    client: Client,
    target: &DetailTarget,
    origins: crate::helm::values::SecretOrigins,
) -> DetailData {
    let storage = Storage::new(client.clone(), &target.storage_namespace);
    let name = target.release_name.clone();
    let helm = limited(storage.history(&name)).await.and_then(|h| {
        // A remote cluster's record another HelmRelease claims is that one's.
        match (target.remote.is_some(), &target.uid, h.last()) {
            (true, Some(uid), Some(newest)) => {
                match newest.labels.get(crate::helm::release::CLAIM_UID_LABEL) {
                    Some(other) if other != uid => Err(format!(
                        "the release {name} stored in {} there belongs to another HelmRelease (uid {other})",
                        target.storage_namespace
                    )),
                    _ => Ok(h),
                }
            }
            _ => Ok(h),
        }
    });
    let revisions = helm
        .as_ref()
        .map(|h| {
            h.iter()
                .rev()
                .map(|r| {
                    let info = r.info.clone().unwrap_or_default();
                    RevisionLine {
                        revision: r.version,
                        updated: info.last_deployed,
                        status: info.status.as_str().to_owned(),
                        chart: chart_text(r),
                        app_version: r
                            .chart
                            .as_ref()
                            .and_then(|c| c.metadata.as_ref())
                            .and_then(|m| m.app_version.clone())
                            .unwrap_or_default(),
                        description: info.description,
                    }
                })
                .collect::<Vec<_>>()
        })
        .map_err(Clone::clone);
    let release = match helm {
        Ok(mut h) => h
            .pop()
            .ok_or_else(|| "no Helm release stored yet".to_owned()),
        Err(e) => Err(e),
    };
    let workloads = match &release {
        Ok(r) => Fetch::from(load_workloads(client, &r.manifest, &target.target_namespace).await),
        Err(e) => Fetch::Failed(e.clone()),
    };
    DetailData {
        revisions: Fetch::from(revisions),
        helm: Fetch::from(release.map(|r| {
            let info = r.info.clone().unwrap_or_default();
            HelmData {
                revision: r.version,
                status: info.status.to_string(),
                description: info.description,
                chart: chart_text(&r),
                values: crate::text::yaml::to_string(
                    &origins.mask(&serde_json::Value::Object(r.config)),
                ),
                manifest: mask_manifest(&r.manifest),
            }
        })),
        workloads,
        ..DetailData::default()
    }
}

/// Which values came from Secrets, read as the operator (nothing for a release without
/// a HelmRelease: its values are masked by key name only).
pub(super) async fn origins_of(
    client: &Client,
    sources: Option<&crate::helm::values::ValuesSources>,
) -> crate::helm::values::SecretOrigins {
    match sources {
        Some(sources) => limited(async { Ok::<_, kube::Error>(sources.origins(client).await) })
            .await
            .unwrap_or_else(|_| crate::helm::values::SecretOrigins::unknown()),
        None => crate::helm::values::SecretOrigins::default(),
    }
}

/// `name-version`, as `helm history` shows a revision's chart.
pub(super) fn chart_text(r: &crate::helm::release::Release) -> String {
    r.chart
        .as_ref()
        .and_then(|c| c.metadata.as_ref())
        .map(|m| format!("{}-{}", m.name, m.version))
        .unwrap_or_default()
}

impl<T> From<Result<T, String>> for Fetch<T> {
    fn from(r: Result<T, String>) -> Self {
        match r {
            Ok(v) => Self::Loaded(v),
            Err(e) => Self::Failed(e),
        }
    }
}

/// The Events of the HelmRelease (wheelhouse's and Flux's both report as kind
/// HelmRelease); for a stored release, which no object reports for, the Events of the
/// objects named like the release in its namespace (Helm charts name their objects after
/// the release).
async fn load_events(client: Client, target: &DetailTarget) -> Result<Vec<EventLine>, String> {
    let (namespace, fields) = match target.kind {
        Kind::Wheelhouse | Kind::Flux => (
            &target.key.namespace,
            format!(
                "involvedObject.kind=HelmRelease,involvedObject.name={}",
                target.key.name
            ),
        ),
        Kind::Helm => (&target.target_namespace, String::new()),
    };
    let api: Api<Event> = Api::namespaced(client, namespace);
    let list = limited(api.list(&ListParams::default().fields(&fields))).await?;
    let release = target.release_name.as_str();
    let mut events: Vec<EventLine> = list
        .items
        .into_iter()
        .filter(|e| {
            target.kind != Kind::Helm
                || e.involved_object
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(release))
        })
        .map(|e| EventLine {
            age: e
                .last_timestamp
                .map(|t| t.0)
                .or(e.event_time.map(|t| t.0))
                .or(e.first_timestamp.map(|t| t.0))
                .or(e.metadata.creation_timestamp.map(|t| t.0)),
            kind: e.type_.unwrap_or_default(),
            reason: e.reason.unwrap_or_default(),
            message: e.message.unwrap_or_default(),
            count: e.count.unwrap_or(1),
        })
        .collect();
    events.sort_by_key(|e| std::cmp::Reverse(e.age));
    Ok(events)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Doc {
    api_version: Option<String>,
    kind: Option<String>,
    metadata: Option<DocMeta>,
}

#[derive(Deserialize)]
struct DocMeta {
    name: Option<String>,
    namespace: Option<String>,
}

/// The Deployments, StatefulSets and DaemonSets of a manifest as (kind, name, namespace),
/// each once: a manifest may hold the same object twice (two templates rendering it, or
/// a namespace written out in one and left to the default in the other), and the
/// rollout section lists every workload once, in manifest order.
fn workload_refs(manifest: &str, default_ns: &str) -> Vec<(WorkloadKind, String, String)> {
    let mut seen = std::collections::HashSet::new();
    // Document by document, as Helm splits them, so one that does not parse hides no other.
    crate::helm::apply::manifest::split_documents(manifest)
        .into_iter()
        .flat_map(|doc| crate::text::yaml::parse_documents(doc.body).unwrap_or_default())
        .filter_map(|value| match crate::text::yaml::from_value::<Doc>(value) {
            Ok(Doc {
                api_version: Some(api_version),
                kind: Some(kind),
                metadata:
                    Some(DocMeta {
                        name: Some(name),
                        namespace,
                    }),
            }) => Some((
                WorkloadKind::from_type(&api_version, &kind)
                    .filter(|k| SHOWN_WORKLOADS.contains(k))?,
                name,
                namespace
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or_else(|| default_ns.to_owned()),
            )),
            _ => None,
        })
        .filter(|object| seen.insert(object.clone()))
        .collect()
}

/// Rollout progress of the release's Deployments, StatefulSets and DaemonSets, with the
/// reason each of their pods is not ready and what config tracking looks after.
async fn load_workloads(
    client: Client,
    manifest: &str,
    default_ns: &str,
) -> Result<Vec<Workload>, String> {
    // Parsed up front: the YAML parser must not live across an await (it is not Send).
    let objects = workload_refs(manifest, default_ns);
    let mut out = Vec::new();
    for (kind, name, ns) in objects {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &kind.api_resource());
        let Some(obj) = limited(api.get_opt(&name)).await? else {
            out.push(Workload {
                object: format!("{kind}/{name}"),
                desired: 0,
                updated: 0,
                ready: 0,
                available: 0,
                failing: vec![("-".into(), "not found in the cluster".into())],
                held: 0,
                tracking: None,
            });
            continue;
        };
        let obj = serde_json::to_value(obj).map_err(|e| e.to_string())?;
        let count = |field: &str| {
            obj.pointer(field)
                .and_then(serde_json::Value::as_i64)
                .map(|n| n as i32)
        };
        let (desired, updated, ready, available) = if kind == WorkloadKind::DaemonSet {
            (
                count("/status/desiredNumberScheduled").unwrap_or(0),
                count("/status/updatedNumberScheduled").unwrap_or(0),
                count("/status/numberReady").unwrap_or(0),
                count("/status/numberAvailable").unwrap_or(0),
            )
        } else {
            (
                count("/spec/replicas").unwrap_or(1),
                count("/status/updatedReplicas").unwrap_or(0),
                count("/status/readyReplicas").unwrap_or(0),
                count("/status/availableReplicas").unwrap_or(0),
            )
        };
        let selector: LabelSelector = obj
            .pointer("/spec/selector")
            .cloned()
            .and_then(|s| serde_json::from_value(s).ok())
            .unwrap_or_default();
        let pods = list_pods(client.clone(), &ns, &selector).await?;
        out.push(Workload {
            object: format!("{kind}/{name}"),
            desired,
            updated,
            ready,
            available,
            failing: pods
                .iter()
                .filter_map(|p| {
                    Some((
                        p.metadata.name.clone()?,
                        crate::health::diagnosis::pod_problem(p)?,
                    ))
                })
                .collect(),
            held: pods.iter().filter(|p| is_held(p)).count(),
            tracking: load_tracking(client.clone(), &ns, kind, &obj).await?,
        });
    }
    Ok(out)
}

/// The kinds the rollout section lists (Jobs and CronJobs are hooks or schedules, not
/// rollouts).
const SHOWN_WORKLOADS: [WorkloadKind; 3] = [
    WorkloadKind::Deployment,
    WorkloadKind::StatefulSet,
    WorkloadKind::DaemonSet,
];

/// What config tracking looks after in a workload, with each consumed object checked for
/// existence by a metadata-only read (the dashboard never fetches Secret data).
async fn load_tracking(
    client: Client,
    ns: &str,
    kind: WorkloadKind,
    obj: &serde_json::Value,
) -> Result<Option<TrackedWorkload>, String> {
    let Some(mut tracked) = tracking::tracked_workload(kind, obj, |_| false) else {
        return Ok(None);
    };
    for t in &mut tracked.objects {
        let name = &t.object.name;
        t.exists = match t.object.kind {
            ConfigKind::ConfigMap => {
                limited(Api::<ConfigMap>::namespaced(client.clone(), ns).get_metadata_opt(name))
                    .await?
                    .is_some()
            }
            ConfigKind::Secret => {
                limited(Api::<Secret>::namespaced(client.clone(), ns).get_metadata_opt(name))
                    .await?
                    .is_some()
            }
        };
    }
    Ok(Some(tracked))
}

fn selector_string(selector: &LabelSelector) -> Option<String> {
    let labels = selector.match_labels.as_ref()?;
    if labels.is_empty() {
        return None;
    }
    Some(
        labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

async fn list_pods(client: Client, ns: &str, selector: &LabelSelector) -> Result<Vec<Pod>, String> {
    let Some(selector) = selector_string(selector) else {
        return Ok(Vec::new());
    };
    let pods =
        limited(Api::<Pod>::namespaced(client, ns).list(&ListParams::default().labels(&selector)))
            .await?;
    Ok(pods.items)
}

/// The pod waits for config: it still carries wheelhouse's scheduling gate.
fn is_held(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.scheduling_gates.as_ref())
        .is_some_and(|gates| {
            gates
                .iter()
                .any(|g| g.name == tracking::CONFIG_PENDING_GATE)
        })
}

#[cfg(test)]
mod tests {
    use crate::tracking::WorkloadKind;

    /// A remote release's detail view names where its kubeconfig comes from, as the
    /// operator would look for it: a Secret, or a Flux ConfigMap's cloud identity.
    #[test]
    fn a_remote_release_names_its_kubeconfig() {
        let wheelhouse: crate::api::HelmRelease = crate::text::yaml::from_str(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: web, namespace: apps}\nspec: {chart: {path: /c}, kubeConfig: {secretRef: {name: prod}}}\n",
        )
        .unwrap();
        let target = super::DetailTarget::of_wheelhouse(&wheelhouse);
        assert_eq!(
            target.remote.as_deref(),
            Some("kubeConfig Secret apps/prod")
        );
        let flux = |kube_config: &str| -> crate::api::flux::FluxHelmRelease {
            crate::text::yaml::from_str(&format!(
                "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {{name: web, namespace: apps}}\nspec: {{kubeConfig: {kube_config}}}\n"
            ))
            .unwrap()
        };
        let secret = super::DetailTarget::of_flux(&flux("{secretRef: {name: prod}}"));
        assert_eq!(
            secret.remote.as_deref(),
            Some("kubeConfig Secret apps/prod")
        );
        let cloud = super::DetailTarget::of_flux(&flux("{configMapRef: {name: gke}}"));
        assert_eq!(
            cloud.remote.as_deref(),
            Some("kubeConfig ConfigMap apps/gke (a cloud provider's workload identity)")
        );
        assert_eq!(cloud.release_name, "web");
        let local = super::DetailTarget::of_flux(&flux("null"));
        assert_eq!(local.remote, None);
    }

    #[test]
    fn each_workload_is_listed_once() {
        let manifest = "---\n# Source: c/templates/a.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n---\n# Source: c/templates/b.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: apps\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: web\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: other\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata:\n  name: web\n";
        let refs = super::workload_refs(manifest, "apps");
        let refs: Vec<(WorkloadKind, &str, &str)> = refs
            .iter()
            .map(|(k, n, ns)| (*k, n.as_str(), ns.as_str()))
            .collect();
        assert_eq!(
            refs,
            [
                (WorkloadKind::Deployment, "web", "apps"),
                (WorkloadKind::StatefulSet, "web", "apps"),
                (WorkloadKind::Deployment, "web", "other"),
            ]
        );
        // A document that does not parse hides no other.
        let broken = "apiVersion: v1\nkind: ConfigMap\ndata: [unclosed\n---\n\
                      apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\n";
        assert_eq!(
            super::workload_refs(broken, "apps"),
            [(WorkloadKind::DaemonSet, "agent".into(), "apps".into())]
        );
    }
}

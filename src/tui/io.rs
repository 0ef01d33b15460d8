//! The dashboard's IO, each piece on its own task with a time limit, so a slow or
//! unreachable API server never blocks drawing or input. Results go back to the UI loop
//! over a channel.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Event, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde::Deserialize;

use super::model::{
    DetailData, EventLine, Fetch, HelmData, Workload, mask_manifest, mask_values, merge_patch,
};
use crate::api::{FIELD_MANAGER, HelmRelease};
use crate::engine::{Command, EngineHandle, ReleaseKey, ReleaseView};
use crate::release::Storage;

/// How long one request may take before the dashboard reports it as failed.
pub const LIMIT: Duration = Duration::from_secs(15);

async fn limited<T, E: std::fmt::Display>(
    f: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(LIMIT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "no answer from the API server within {}s",
            LIMIT.as_secs()
        )),
    }
}

pub async fn send(handle: EngineHandle, command: Command) -> Result<(), String> {
    limited(handle.send(command)).await
}

/// Applies an edited `spec.values`. Only a concurrent change to the values themselves
/// refuses the edit: status writes by the engine change the resourceVersion every few
/// seconds during a rollout, and must not make the operator's edit fail.
pub async fn patch_values(
    client: Client,
    key: ReleaseKey,
    original: serde_json::Value,
    values: serde_json::Value,
) -> Result<(), String> {
    let api: Api<HelmRelease> = Api::namespaced(client, &key.namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    for _ in 0..3 {
        let current = limited(api.get(&key.name)).await?;
        if current.spec.values.unwrap_or_else(|| serde_json::json!({})) != original {
            return Err(
                "spec.values changed since the editor opened; your draft is kept, reopen the \
                 editor to see the new values"
                    .to_owned(),
            );
        }
        // The resourceVersion read above makes a change between the read and this
        // patch a conflict, which is then checked again.
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": current.metadata.resource_version},
            "spec": {"values": merge_patch(&original, &values)},
        });
        let result = limited(async {
            match api.patch(&key.name, &params, &Patch::Merge(patch)).await {
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                other => other.map(|_| true),
            }
        });
        if result.await? {
            return Ok(());
        }
    }
    Err("the release kept changing while the values were applied; try again".to_owned())
}

/// Everything the detail view fetches: the last Helm release, events, workloads.
pub async fn load_detail(client: Client, view: ReleaseView) -> DetailData {
    let hr = view.release.clone();
    let storage = Storage::new(client.clone(), &hr.storage_namespace());
    let name = hr.release_name();
    let (helm, events) = futures::join!(
        limited(storage.last(&name)),
        load_events(client.clone(), &view.key)
    );
    let release = match helm {
        Ok(Some(r)) => Ok(r),
        Ok(None) => Err("no Helm release stored yet".to_owned()),
        Err(e) => Err(e),
    };
    let workloads = match &release {
        Ok(r) => Fetch::from(load_workloads(client, &r.manifest, &hr.target_namespace()).await),
        Err(e) => Fetch::Failed(e.clone()),
    };
    DetailData {
        helm: Fetch::from(release.map(|r| {
            HelmData {
                revision: r.version,
                values: serde_yaml::to_string(&mask_values(&serde_json::Value::Object(r.config)))
                    .unwrap_or_default(),
                manifest: mask_manifest(&r.manifest),
            }
        })),
        events: Fetch::from(events),
        workloads,
    }
}

impl<T> From<Result<T, String>> for Fetch<T> {
    fn from(r: Result<T, String>) -> Self {
        match r {
            Ok(v) => Self::Loaded(v),
            Err(e) => Self::Failed(e),
        }
    }
}

async fn load_events(client: Client, key: &ReleaseKey) -> Result<Vec<EventLine>, String> {
    let api: Api<Event> = Api::namespaced(client, &key.namespace);
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind=HelmRelease,involvedObject.name={}",
        key.name
    ));
    let list = limited(api.list(&params)).await?;
    let mut events: Vec<EventLine> = list
        .items
        .into_iter()
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
struct Doc {
    kind: Option<String>,
    metadata: Option<DocMeta>,
}

#[derive(Deserialize)]
struct DocMeta {
    name: Option<String>,
    namespace: Option<String>,
}

/// Rollout progress of the release's Deployments, StatefulSets and DaemonSets, with the
/// reason each of their pods is not ready.
async fn load_workloads(
    client: Client,
    manifest: &str,
    default_ns: &str,
) -> Result<Vec<Workload>, String> {
    // Parsed up front: the YAML parser must not live across an await (it is not Send).
    let objects: Vec<(String, String, String)> = serde_yaml::Deserializer::from_str(manifest)
        .filter_map(|doc| match Doc::deserialize(doc) {
            Ok(Doc {
                kind: Some(kind),
                metadata:
                    Some(DocMeta {
                        name: Some(name),
                        namespace,
                    }),
            }) => Some((
                kind,
                name,
                namespace.unwrap_or_else(|| default_ns.to_owned()),
            )),
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for (kind, name, ns) in objects {
        let found = match kind.as_str() {
            "Deployment" => {
                let d = limited(Api::<Deployment>::namespaced(client.clone(), &ns).get_opt(&name))
                    .await?;
                d.map(|d| {
                    let s = d.status.unwrap_or_default();
                    let spec = d.spec.unwrap_or_default();
                    (
                        spec.replicas.unwrap_or(1),
                        s.updated_replicas.unwrap_or(0),
                        s.ready_replicas.unwrap_or(0),
                        s.available_replicas.unwrap_or(0),
                        spec.selector,
                    )
                })
            }
            "StatefulSet" => {
                let d = limited(Api::<StatefulSet>::namespaced(client.clone(), &ns).get_opt(&name))
                    .await?;
                d.map(|d| {
                    let s = d.status.unwrap_or_default();
                    let spec = d.spec.unwrap_or_default();
                    (
                        spec.replicas.unwrap_or(1),
                        s.updated_replicas.unwrap_or(0),
                        s.ready_replicas.unwrap_or(0),
                        s.available_replicas.unwrap_or(0),
                        spec.selector,
                    )
                })
            }
            "DaemonSet" => {
                let d = limited(Api::<DaemonSet>::namespaced(client.clone(), &ns).get_opt(&name))
                    .await?;
                d.map(|d| {
                    let s = d.status.unwrap_or_default();
                    let spec = d.spec.unwrap_or_default();
                    (
                        s.desired_number_scheduled,
                        s.updated_number_scheduled.unwrap_or(0),
                        s.number_ready,
                        s.number_available.unwrap_or(0),
                        spec.selector,
                    )
                })
            }
            _ => continue,
        };
        let Some((desired, updated, ready, available, selector)) = found else {
            out.push(Workload {
                object: format!("{kind}/{name}"),
                desired: 0,
                updated: 0,
                ready: 0,
                available: 0,
                failing: vec![("-".into(), "not found in the cluster".into())],
            });
            continue;
        };
        let failing = failing_pods(client.clone(), &ns, &selector).await?;
        out.push(Workload {
            object: format!("{kind}/{name}"),
            desired,
            updated,
            ready,
            available,
            failing,
        });
    }
    Ok(out)
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

async fn failing_pods(
    client: Client,
    ns: &str,
    selector: &LabelSelector,
) -> Result<Vec<(String, String)>, String> {
    let Some(selector) = selector_string(selector) else {
        return Ok(Vec::new());
    };
    let pods =
        limited(Api::<Pod>::namespaced(client, ns).list(&ListParams::default().labels(&selector)))
            .await?;
    Ok(pods
        .items
        .into_iter()
        .filter_map(|p| Some((p.metadata.name.clone()?, pod_problem(&p)?)))
        .collect())
}

/// Why a pod is not ready, or None when it is.
pub fn pod_problem(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let ready = status
        .conditions
        .as_ref()
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if ready || status.phase.as_deref() == Some("Succeeded") {
        return None;
    }
    for cs in status.container_statuses.iter().flatten() {
        if let Some(state) = &cs.state {
            if let Some(w) = &state.waiting {
                let reason = w.reason.clone().unwrap_or_else(|| "Waiting".into());
                return Some(match &w.message {
                    Some(m) => format!("{} ({reason}): {m}", cs.name),
                    None => format!("{} ({reason})", cs.name),
                });
            }
            if let Some(t) = &state.terminated {
                return Some(format!(
                    "{} terminated ({})",
                    cs.name,
                    t.reason.clone().unwrap_or_default()
                ));
            }
        }
        if !cs.ready {
            return Some(format!(
                "{} not ready (restarts {})",
                cs.name, cs.restart_count
            ));
        }
    }
    let cond = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.status != "True" && c.reason.is_some());
    Some(match cond {
        Some(c) => format!(
            "{}: {}",
            c.reason.clone().unwrap_or_default(),
            c.message.clone().unwrap_or_default()
        ),
        None => format!(
            "phase {}",
            status.phase.clone().unwrap_or_else(|| "Unknown".into())
        ),
    })
}

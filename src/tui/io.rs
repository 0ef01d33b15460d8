//! The dashboard's IO, each piece on its own task with a time limit, so a slow or
//! unreachable API server never blocks drawing or input. Results go back to the UI loop
//! over a channel.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde::Deserialize;

use super::model::{
    DetailData, EventLine, Fetch, HelmData, RevisionLine, Workload, mask_manifest, mask_values,
};
use crate::api::{FIELD_MANAGER, HelmRelease};
use crate::engine::stored::StoredAction;
use crate::engine::{Command, EngineHandle, ReleaseKey, Views};
use crate::inventory::flux::Request;
use crate::inventory::{Kind, Others};
use crate::release::Storage;
use crate::tracking::{self, ConfigKind, TrackedWorkload, WorkloadKind};

/// How long one request may take before the dashboard reports it as failed.
pub const LIMIT: Duration = Duration::from_secs(15);

async fn limited<T, E: std::fmt::Display>(
    f: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(LIMIT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(human(&e.to_string())),
        Err(_) => Err(format!(
            "no answer from the API server within {}s",
            LIMIT.as_secs()
        )),
    }
}

/// How a write ended when it did not succeed.
#[derive(Debug)]
pub enum WriteError {
    /// The API server refused it, or it never left: nothing was changed.
    Refused(String),
    /// No answer came (a time-out, a connection lost mid-request): it may still be
    /// applied. `expect` tells the dashboard what to look for on the object; `late`, when
    /// the request is still in flight, tells how it ends.
    Unknown {
        why: String,
        expect: Expect,
        late: Option<Late>,
    },
}

/// A write still in flight after the dashboard stopped waiting for it: it is not cut off
/// (cutting it off would make its outcome unknown for good), and its answer is reported
/// when it comes.
#[derive(Debug)]
pub struct Late(tokio::task::JoinHandle<LateOutcome>);

/// How a write in flight ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LateOutcome {
    Applied,
    Refused(String),
    /// The connection failed after all: still unknown, the release is still watched.
    Unknown,
}

impl Late {
    pub async fn outcome(self) -> LateOutcome {
        self.0.await.unwrap_or(LateOutcome::Unknown)
    }
}

impl WriteError {
    /// The write still in flight, if any (taken out, to be awaited on its own).
    pub fn take_late(&mut self) -> Option<Late> {
        match self {
            Self::Unknown { late, .. } => late.take(),
            Self::Refused(_) => None,
        }
    }
}

/// What an object shows once a write whose answer never came has landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    Command {
        command: Command,
        token: String,
    },
    Values {
        key: ReleaseKey,
        values: serde_json::Value,
    },
    /// A request on a Flux HelmRelease.
    Flux {
        key: ReleaseKey,
        request: Request,
        token: String,
    },
}

impl Expect {
    pub fn key(&self) -> &ReleaseKey {
        match self {
            Self::Command { command, .. } => command.key(),
            Self::Values { key, .. } | Self::Flux { key, .. } => key,
        }
    }

    /// Whether the objects show the write.
    pub fn landed(&self, views: &Views, others: &Others) -> bool {
        match self {
            Self::Command { command, token } => views
                .get(command.key())
                .is_some_and(|v| command.landed(token, &v.release)),
            Self::Values { key, values } => views
                .get(key)
                .is_some_and(|v| v.release.spec.values.as_ref() == Some(values)),
            Self::Flux {
                key,
                request,
                token,
            } => others
                .flux
                .get(key)
                .is_some_and(|hr| request.landed(token, hr)),
        }
    }
}

/// A write under the time limit: an API answer or a connection never made is a refusal;
/// no answer, or a connection lost after the request may have gone out, is unknown. The
/// request runs on a task of its own and is not cut off at the limit; `applied` says
/// whether its answer means the write took effect.
async fn limited_write<T: Send + 'static>(
    f: impl Future<Output = Result<T, kube::Error>> + Send + 'static,
    expect: Expect,
    applied: fn(&T) -> bool,
) -> Result<T, WriteError> {
    let mut task = tokio::spawn(f);
    let joined = match tokio::time::timeout(LIMIT, &mut task).await {
        Ok(joined) => joined,
        Err(_) => {
            let late = tokio::spawn(async move {
                match task.await {
                    Ok(Ok(v)) if applied(&v) => LateOutcome::Applied,
                    Ok(Ok(_)) => LateOutcome::Refused("the release changed meanwhile".into()),
                    Ok(Err(kube::Error::Api(e))) => LateOutcome::Refused(e.message),
                    _ => LateOutcome::Unknown,
                }
            });
            return Err(WriteError::Unknown {
                why: format!(
                    "no answer from the API server within {}s; it may still be applied",
                    LIMIT.as_secs()
                ),
                expect,
                late: Some(Late(late)),
            });
        }
    };
    match joined {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(kube::Error::Api(e))) => Err(WriteError::Refused(e.message)),
        Ok(Err(e)) if never_sent(&e.to_string()) => Err(WriteError::Refused(human(&e.to_string()))),
        Ok(Err(e)) => Err(WriteError::Unknown {
            why: format!("the connection failed mid-request ({e}); it may still be applied"),
            expect,
            late: None,
        }),
        Err(e) => Err(WriteError::Unknown {
            why: format!("the write's task ended: {e}"),
            expect,
            late: None,
        }),
    }
}

/// A transport error that means the request never reached the API server.
fn never_sent(error: &str) -> bool {
    [
        "Connect",
        "connection refused",
        "error trying to connect",
        "tcp connect",
    ]
    .iter()
    .any(|needle| error.contains(needle))
}

/// A transport failure said the way an operator needs it; API answers stay as they are.
fn human(error: &str) -> String {
    if never_sent(error) {
        "the API server cannot be reached; nothing was changed (the dashboard keeps retrying)"
            .into()
    } else {
        error.to_string()
    }
}

pub async fn send(handle: EngineHandle, command: Command) -> Result<(), WriteError> {
    let token = crate::engine::new_token();
    let expect = Expect::Command {
        command: command.clone(),
        token: token.clone(),
    };
    limited_write(
        async move { handle.send_as(command, token).await },
        expect,
        |_| true,
    )
    .await
}

/// Writes a request on a Flux HelmRelease (a merge patch in Flux's API).
pub async fn send_flux(
    client: Client,
    key: ReleaseKey,
    request: Request,
) -> Result<(), WriteError> {
    let token = crate::engine::new_token();
    let expect = Expect::Flux {
        key: key.clone(),
        request,
        token: token.clone(),
    };
    limited_write(
        async move {
            crate::inventory::flux::send(client, &key, request, &token)
                .await
                .map(|_| ())
        },
        expect,
        |_| true,
    )
    .await
}

/// Rolls back or uninstalls a release no HelmRelease manages, by the engine's action
/// code. Not under the time limit: hooks may take minutes, and the operator sees it
/// pending meanwhile; it ends with what Helm would print.
pub async fn act_on_stored(
    handle: EngineHandle,
    key: ReleaseKey,
    action: StoredAction,
) -> Result<(), WriteError> {
    match handle.act_on_stored(&key, action).await {
        Ok(message) => {
            tracing::info!(release = %key, "{message}");
            Ok(())
        }
        Err(e) => Err(WriteError::Refused(e)),
    }
}

/// Streams a pod's logs to the UI loop in batches (at most every 100 ms, so a chatty pod
/// costs a redraw a tenth of a second, not one per line), until the stream ends; its
/// end, or why it failed, goes last. Cancelled by aborting the task.
pub async fn stream_logs(
    client: Client,
    source: crate::tui::components::logs::LogSource,
    tx: tokio::sync::mpsc::UnboundedSender<super::effect::IoResult>,
) {
    use super::effect::IoResult;
    use futures::{AsyncBufReadExt, StreamExt};
    let api: Api<Pod> = Api::namespaced(client, &source.namespace);
    let params = kube::api::LogParams {
        tail_lines: Some(crate::tui::components::logs::TAIL),
        previous: source.previous,
        follow: source.follow,
        ..kube::api::LogParams::default()
    };
    let stream = source.stream;
    let reader = match tokio::time::timeout(LIMIT, api.log_stream(&source.pod, &params)).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => {
            let _ = tx.send(IoResult::LogEnd {
                stream,
                failed: Some(human(&e.to_string())),
            });
            return;
        }
        Err(_) => {
            let _ = tx.send(IoResult::LogEnd {
                stream,
                failed: Some(format!(
                    "no answer from the API server within {}s",
                    LIMIT.as_secs()
                )),
            });
            return;
        }
    };
    let mut lines = reader.lines().ready_chunks(500);
    let mut batch: Vec<String> = Vec::new();
    let mut flush = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            next = lines.next() => match next {
                Some(chunk) => {
                    for line in chunk {
                        match line {
                            Ok(l) => batch.push(l),
                            Err(e) => {
                                let _ = tx.send(IoResult::LogLines { stream, lines: std::mem::take(&mut batch) });
                                let _ = tx.send(IoResult::LogEnd { stream, failed: Some(e.to_string()) });
                                return;
                            }
                        }
                    }
                }
                None => break,
            },
            _ = flush.tick() => {
                if !batch.is_empty() {
                    let _ = tx.send(IoResult::LogLines { stream, lines: std::mem::take(&mut batch) });
                }
            }
        }
    }
    let _ = tx.send(IoResult::LogLines {
        stream,
        lines: batch,
    });
    let _ = tx.send(IoResult::LogEnd {
        stream,
        failed: None,
    });
}

/// The cluster's namespace names, for `:ns` completion (metadata only). An identity that
/// may not list namespaces gets the API's refusal, which the dashboard does not show.
pub async fn list_namespaces(client: Client) -> Result<Vec<String>, String> {
    let api: Api<Namespace> = Api::all(client);
    let list = limited(api.list_metadata(&ListParams::default())).await?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect())
}

/// The kubeconfig's context names, for `:ctx` completion (the file given with
/// `--kubeconfig`, else `$KUBECONFIG` or `~/.kube/config` as kubectl reads them); none
/// when it cannot be read.
pub fn kubeconfig_contexts(path: Option<&std::path::Path>) -> Vec<String> {
    let kubeconfig = match path {
        Some(path) => kube::config::Kubeconfig::read_from(path),
        None => kube::config::Kubeconfig::read(),
    };
    kubeconfig
        .map(|k| k.contexts.into_iter().map(|c| c.name).collect())
        .unwrap_or_default()
}

/// Applies an edited `spec.values`. Only a concurrent change to the values themselves
/// refuses the edit: status writes by the engine change the resourceVersion every few
/// seconds during a rollout, and must not make the operator's edit fail.
pub async fn patch_values(
    client: Client,
    key: ReleaseKey,
    original: serde_json::Value,
    values: serde_json::Value,
) -> Result<(), WriteError> {
    let api: Api<HelmRelease> = Api::namespaced(client, &key.namespace);
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    let expect = Expect::Values {
        key: key.clone(),
        values: values.clone(),
    };
    for _ in 0..3 {
        // A read that fails changed nothing.
        let current = limited(api.get(&key.name))
            .await
            .map_err(WriteError::Refused)?;
        if current.spec.values.unwrap_or_else(|| serde_json::json!({})) != original {
            return Err(WriteError::Refused(
                "spec.values changed since the editor opened; your draft is kept, reopen the \
                 editor to see the new values"
                    .to_owned(),
            ));
        }
        // The values are written whole by a JSON patch: a merge patch cannot write
        // `key: null` (Helm's way to remove a chart default), it deletes the key. The
        // resourceVersion read above, written back, makes a change between the read and
        // this patch a conflict, which is then checked again.
        let ops = serde_json::json!([
            {"op": "replace", "path": "/metadata/resourceVersion",
             "value": current.metadata.resource_version},
            {"op": "add", "path": "/spec/values", "value": values},
        ]);
        let patch = Patch::<()>::Json(serde_json::from_value(ops).expect("a JSON patch"));
        let (api, params, name) = (api.clone(), params.clone(), key.name.clone());
        let result = limited_write(
            async move {
                match api.patch(&name, &params, &patch).await {
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    other => other.map(|_| true),
                }
            },
            expect.clone(),
            |written| *written,
        );
        if result.await? {
            return Ok(());
        }
    }
    Err(WriteError::Refused(
        "the release kept changing while the values were applied; try again".to_owned(),
    ))
}

/// What the detail view of a release loads: which object it is, and where its Helm
/// release is stored and deployed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetailTarget {
    pub kind: Kind,
    /// The object (a HelmRelease's namespace and name; a stored release's storage
    /// namespace and name).
    pub key: ReleaseKey,
    pub storage_namespace: String,
    pub release_name: String,
    pub target_namespace: String,
}

impl DetailTarget {
    /// A wheelhouse HelmRelease's.
    pub fn of_wheelhouse(hr: &HelmRelease) -> Self {
        Self {
            kind: Kind::Wheelhouse,
            key: ReleaseKey::of(hr),
            storage_namespace: hr.storage_namespace(),
            release_name: hr.release_name(),
            target_namespace: hr.target_namespace(),
        }
    }
}

/// Everything the detail view fetches: the Helm release's records (the newest whole, the
/// others as history lines), events, workloads.
pub async fn load_detail(client: Client, target: DetailTarget) -> DetailData {
    let storage = Storage::new(client.clone(), &target.storage_namespace);
    let name = target.release_name.clone();
    let (helm, events) = futures::join!(
        limited(storage.history(&name)),
        load_events(client.clone(), &target)
    );
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
                values: crate::yaml::to_string(&mask_values(&serde_json::Value::Object(r.config))),
                manifest: mask_manifest(&r.manifest),
            }
        })),
        events: Fetch::from(events),
        workloads,
    }
}

/// `name-version`, as `helm history` shows a revision's chart.
fn chart_text(r: &crate::release::Release) -> String {
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
    crate::apply::manifest::split_documents(manifest)
        .into_iter()
        .flat_map(|doc| crate::yaml::parse_documents(doc.body).unwrap_or_default())
        .filter_map(|value| match crate::yaml::from_value::<Doc>(value) {
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
                .filter_map(|p| Some((p.metadata.name.clone()?, pod_problem(p)?)))
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

/// How long a render for a preview may take: a chart may first be fetched from its
/// repository.
const RENDER_LIMIT: Duration = Duration::from_secs(60);

/// The lines a changes view shows, and their summary.
pub async fn load_changes(
    client: Client,
    handle: EngineHandle,
    of: crate::tui::effect::ChangesOf,
) -> Result<(Vec<crate::tui::diff::DiffLine>, String), String> {
    use crate::tui::diff::{release_diff, shown_whole};
    use crate::tui::effect::ChangesOf;
    let stored = |release: &ReleaseKey| Storage::new(client.clone(), &release.namespace);
    let record = |history: &[crate::release::Release], revision: i32| {
        history
            .iter()
            .find(|r| r.version == revision)
            .cloned()
            .ok_or_else(|| format!("revision {revision} is no longer in Helm's storage"))
    };
    match of {
        ChangesOf::Revisions { release, from, to } => {
            let history = limited(stored(&release).history(&release.name)).await?;
            let (a, b) = (record(&history, from)?, record(&history, to)?);
            let (lines, summary) = release_diff(
                &serde_json::Value::Object(a.config),
                &a.manifest,
                &serde_json::Value::Object(b.config),
                &b.manifest,
            );
            Ok((lines, format!("revision {from} → {to}: {summary}")))
        }
        ChangesOf::Revision { release, revision } => {
            let history = limited(stored(&release).history(&release.name)).await?;
            let r = record(&history, revision)?;
            let chart = chart_text(&r);
            let lines = shown_whole(&serde_json::Value::Object(r.config), &r.manifest);
            Ok((lines, format!("revision {revision}: {chart}")))
        }
        ChangesOf::Render { key, values } => {
            let api: Api<HelmRelease> = Api::namespaced(client.clone(), &key.namespace);
            let mut hr = limited(api.get(&key.name)).await?;
            if let Some(values) = values {
                hr.spec.values = Some(values);
            }
            let preview = tokio::time::timeout(RENDER_LIMIT, handle.preview(&hr))
                .await
                .map_err(|_| format!("rendering took over {}s", RENDER_LIMIT.as_secs()))??;
            let (old_values, old_manifest, from) = match &preview.current {
                Some(r) => (
                    serde_json::Value::Object(r.config.clone()),
                    r.manifest.as_str(),
                    format!("revision {}", r.version),
                ),
                None => (serde_json::json!({}), "", "nothing installed".to_owned()),
            };
            let (lines, summary) = release_diff(
                &old_values,
                old_manifest,
                &serde_json::Value::Object(preview.values.clone()),
                &preview.manifest,
            );
            // Secret strings can show up outside Secrets (a ConfigMap repeating a
            // password from valuesFrom): masked wherever they are.
            let lines = lines
                .into_iter()
                .map(|l| l.map_text(|t| preview.masker.mask(t)))
                .collect();
            Ok((
                lines,
                format!("{from} → the spec, as the engine renders it: {summary}"),
            ))
        }
        ChangesOf::Drift { key } => {
            let api: Api<HelmRelease> = Api::namespaced(client.clone(), &key.namespace);
            let hr = limited(api.get(&key.name)).await?;
            let view = tokio::time::timeout(RENDER_LIMIT, handle.drift(&hr))
                .await
                .map_err(|_| format!("comparing took over {}s", RENDER_LIMIT.as_secs()))??;
            if view.objects.is_empty() {
                return Ok((
                    Vec::new(),
                    format!(
                        "no drift: the live objects are as revision {} makes them",
                        view.revision
                    ),
                ));
            }
            // Live on the left, the revision's on the right: the diff reads as what a
            // correction would change.
            let document = |v: &serde_json::Value| format!("---\n{}", crate::yaml::to_string(v));
            let live: String = view
                .objects
                .iter()
                .filter_map(|d| d.live.as_ref().map(document))
                .collect();
            let desired: String = view.objects.iter().map(|d| document(&d.desired)).collect();
            let (lines, counts) = crate::tui::diff::manifest_diff(&live, &desired);
            let lines = lines
                .into_iter()
                .map(|l| l.map_text(|t| view.masker.mask(t)))
                .collect();
            Ok((
                lines,
                format!(
                    "live → revision {}: {} object(s) drifted ({counts})",
                    view.revision,
                    view.objects.len()
                ),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::tracking::WorkloadKind;

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

    #[test]
    fn transport_failures_read_as_a_sentence() {
        assert_eq!(
            super::human("HyperError: client error (Connect)"),
            "the API server cannot be reached; nothing was changed (the dashboard keeps retrying)"
        );
        assert_eq!(super::human("forbidden: nope"), "forbidden: nope");
    }
}

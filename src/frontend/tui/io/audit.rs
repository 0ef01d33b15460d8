//! The audit of the dashboard's writes: after a write succeeds, an Event on the release
//! (reason `Audited`, reporting controller `wheelhouse-dashboard`, reporting instance the
//! operator as the API server knows them) saying what was done, so "who did this at
//! 03:12?" has an answer in `kubectl describe`, the Events tab and the Timeline. Best
//! effort, as every Event: a write that was done stays done when its Event cannot be
//! written (the log says so).

use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use kube::api::ListParams;
use kube::{Api, Client, Resource};

use crate::api::HelmRelease;
use crate::api::conditions::reason::AUDITED;
use crate::api::flux::FluxHelmRelease;
use crate::cluster::events::{Event, EventType, Recorder, Reporter};
use crate::engine::ReleaseKey;
use crate::frontend::inventory::Kind;
use crate::frontend::timeline::AUDIT_CONTROLLER;

/// What was written, to which release.
#[derive(Debug, Clone)]
pub struct Audit {
    pub kind: Kind,
    pub key: ReleaseKey,
    /// What the status line called the write (`suspend apps/web`).
    pub what: String,
    /// The Event's action: the verb (`suspend`, `rollback`).
    pub action: String,
}

/// The longest note written (events.k8s.io refuses notes over 1 kB).
const NOTE_KEPT: usize = 900;

pub async fn record(client: Client, audit: Audit) {
    let by = crate::cluster::client::username(&client)
        .await
        .unwrap_or_else(|| "an operator the API server did not name".to_owned());
    let Some(regarding) = regarding(&client, &audit).await else {
        tracing::debug!(release = %audit.key, "no object to audit the write on");
        return;
    };
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: AUDIT_CONTROLLER.into(),
            instance: Some(by.chars().take(128).collect()),
        },
    );
    let note: String = format!("{} by {by} from a dashboard", audit.what)
        .chars()
        .take(NOTE_KEPT)
        .collect();
    let event = Event {
        type_: EventType::Normal,
        reason: AUDITED.into(),
        note: Some(note),
        action: audit.action.clone(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &regarding).await {
        tracing::warn!(release = %audit.key, error = %e, "the audit Event of a dashboard write was not written");
    }
}

/// The object the Event is about: the HelmRelease, or a helm CLI release's newest
/// storage record (Helm keeps no other object per release).
async fn regarding(client: &Client, audit: &Audit) -> Option<ObjectReference> {
    let key = &audit.key;
    let of = |api_version: String, kind: String, name: String| ObjectReference {
        api_version: Some(api_version),
        kind: Some(kind),
        name: Some(name),
        namespace: Some(key.namespace.clone()),
        ..ObjectReference::default()
    };
    match audit.kind {
        Kind::Wheelhouse => Some(of(
            HelmRelease::api_version(&()).into(),
            HelmRelease::kind(&()).into(),
            key.name.clone(),
        )),
        Kind::Flux => Some(of(
            FluxHelmRelease::api_version(&()).into(),
            FluxHelmRelease::kind(&()).into(),
            key.name.clone(),
        )),
        Kind::Helm => {
            let secrets: Api<Secret> = Api::namespaced(client.clone(), &key.namespace);
            let selector = format!(
                "{},name={}",
                crate::frontend::inventory::stored::SELECTOR,
                key.name
            );
            let records = secrets
                .list_metadata(&ListParams::default().labels(&selector))
                .await
                .ok()?;
            let newest = records.items.into_iter().max_by_key(|m| {
                m.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("version"))
                    .and_then(|v| v.parse::<i64>().ok())
                    .unwrap_or_default()
            })?;
            Some(of("v1".into(), "Secret".into(), newest.metadata.name?))
        }
    }
}

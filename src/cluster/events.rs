//! Kubernetes Events that say what happened last.
//!
//! kube's `Recorder` folds repeated Events of one reason into one object whose `series`
//! counts them, and keeps the first `note`: after twenty upgrades the `UpgradeSucceeded`
//! Event still named revision 3 (the events.k8s.io API forbids changing a note). This
//! recorder folds only repeats of the same note; a new message is a new Event, so
//! `kubectl describe` and the dashboard's Events tab show the newest one last.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use tokio::sync::RwLock;

pub use kube::runtime::events::{Event, EventType, Reporter};

/// How long a published Event is remembered for folding its repeats (as kube's recorder).
const REMEMBERED: Duration = Duration::from_secs(6 * 60);
/// The most Events remembered at once: a fleet of thousands of releases never holds more.
const MAX_REMEMBERED: usize = 4096;

/// What makes two Events one: the same object, reporter, type, reason, action and note.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    type_: EventType,
    reason: String,
    action: String,
    note: Option<String>,
    regarding: (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
}

/// What a repeat needs of a published Event: its name, how many it counts, and when it
/// was last seen (the Event as the API returned it was 1 KB inline and as much again on
/// the heap, for up to [`MAX_REMEMBERED`] of them).
#[derive(Clone, Debug)]
struct Published {
    name: String,
    count: i32,
    first: Timestamp,
    last: Timestamp,
}

#[derive(Clone)]
pub struct Recorder {
    client: Client,
    reporter: Reporter,
    published: Arc<RwLock<HashMap<Key, Published>>>,
}

impl Recorder {
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            published: Arc::default(),
        }
    }

    /// Publishes `ev` about `regarding`: a repeat of the same note within a few minutes
    /// counts in the existing Event's series; any other note is a new Event.
    pub async fn publish(
        &self,
        ev: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = Key {
            type_: ev.type_,
            reason: ev.reason.clone(),
            action: ev.action.clone(),
            note: ev.note.clone(),
            regarding: (
                regarding.namespace.clone(),
                regarding.name.clone(),
                regarding.uid.clone(),
                regarding.kind.clone(),
            ),
        };
        {
            let mut published = self.published.write().await;
            published.retain(|_, e| e.last + REMEMBERED > now);
            if published.len() >= MAX_REMEMBERED && !published.contains_key(&key) {
                // The oldest half goes: repeats of them become new Events, nothing worse.
                let mut times: Vec<_> = published
                    .iter()
                    .map(|(k, e)| (e.first, k.clone()))
                    .collect();
                times.sort_by_key(|(t, _)| *t);
                for (_, k) in times.into_iter().take(MAX_REMEMBERED / 2) {
                    published.remove(&k);
                }
            }
        }
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let api: Api<K8sEvent> = Api::namespaced(self.client.clone(), &namespace);
        let repeat = self.published.read().await.get(&key).cloned();
        let published = match repeat {
            Some(mut published) => {
                published.count += 1;
                published.last = now;
                let series = EventSeries {
                    count: published.count,
                    last_observed_time: MicroTime(now),
                };
                api.patch(
                    &published.name,
                    &PatchParams::default(),
                    &Patch::Merge(&serde_json::json!({ "series": series })),
                )
                .await?;
                published
            }
            None => {
                let event = self.new_event(ev, regarding, now);
                let created = api.create(&PostParams::default(), &event).await?;
                Published {
                    name: created.name_any(),
                    // A first repeat makes a series of two, as kube's recorder counts.
                    count: 1,
                    first: now,
                    last: now,
                }
            }
        };
        self.published.write().await.insert(key, published);
        Ok(())
    }

    fn new_event(&self, ev: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        K8sEvent {
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            note: ev.note.clone(),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: ev.secondary.clone(),
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(
                match ev.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(format!(
                    "{}.{:x}",
                    regarding
                        .name
                        .as_deref()
                        .unwrap_or(&self.reporter.controller),
                    now.as_nanosecond()
                )),
                ..ObjectMeta::default()
            },
            ..K8sEvent::default()
        }
    }
}

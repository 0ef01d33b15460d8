//! The health-check wait after an action: watches every object of the release until all
//! are ready, one fails, the deadline passes, or the wait is cancelled. Only waits are
//! cancellable (DESIGN §4.6); the token is checked here and nowhere in apply or hooks.

use std::collections::BTreeMap;
use std::fmt;

use futures::StreamExt;
use futures::stream::select_all;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::readiness::{self, Readiness};

/// One object the wait watches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub resource: ApiResource,
    pub namespace: Option<String>,
    pub name: String,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{}/{}/{}", self.resource.kind, ns, self.name),
            None => write!(f, "{}/{}", self.resource.kind, self.name),
        }
    }
}

/// Where the wait stands: how many objects are ready, and what each other one waits for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    pub ready: usize,
    pub total: usize,
    /// (object, what it waits for), for the objects not ready yet.
    pub pending: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ready,
    /// The deadline passed; the progress at that moment says what was missing.
    TimedOut(Progress),
    /// An object reached a state it cannot recover from by waiting.
    Failed {
        object: String,
        reason: String,
    },
    /// The token was cancelled (by a newer revision or an operator).
    Canceled,
}

/// Waits for every target to be ready. `on_progress` is called whenever the picture
/// changes, so front ends can show it live.
pub async fn wait(
    client: &Client,
    targets: &[Target],
    deadline: Instant,
    cancel: &CancellationToken,
    mut on_progress: impl FnMut(&Progress),
) -> Outcome {
    if targets.is_empty() {
        return Outcome::Ready;
    }
    // One watch per object, selected by name, so a change reaches us at once.
    let streams = targets.iter().enumerate().map(|(i, t)| {
        let api: Api<DynamicObject> = match &t.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &t.resource),
            None => Api::all_with(client.clone(), &t.resource),
        };
        let config = watcher::Config::default().fields(&format!("metadata.name={}", t.name));
        watcher(api, config).map(move |event| (i, event)).boxed()
    });
    let mut events = select_all(streams);
    let mut states: BTreeMap<usize, Readiness> = (0..targets.len())
        .map(|i| {
            (
                i,
                Readiness::InProgress("waiting for the object to exist".into()),
            )
        })
        .collect();
    let mut last = None;

    loop {
        let progress = progress_of(targets, &states);
        if last.as_ref() != Some(&progress) {
            on_progress(&progress);
            last = Some(progress.clone());
        }
        if let Some((i, Readiness::Failed(reason))) = states
            .iter()
            .find(|(_, r)| matches!(r, Readiness::Failed(_)))
        {
            return Outcome::Failed {
                object: targets[*i].to_string(),
                reason: reason.clone(),
            };
        }
        if progress.ready == progress.total {
            return Outcome::Ready;
        }
        tokio::select! {
            biased;
            () = cancel.cancelled() => return Outcome::Canceled,
            () = tokio::time::sleep_until(deadline) => return Outcome::TimedOut(progress),
            event = events.next() => match event {
                Some((i, Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)))) => {
                    states.insert(i, readiness_of(&targets[i], &obj));
                }
                Some((i, Ok(watcher::Event::Delete(_)))) => {
                    states.insert(i, Readiness::InProgress("the object was deleted".into()));
                }
                Some((_, Ok(watcher::Event::Init | watcher::Event::InitDone))) => {}
                // The watcher retries by itself; a transient API error only delays us.
                Some((i, Err(e))) => {
                    tracing::debug!(object = %targets[i], error = %e, "watch error during wait");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                None => return Outcome::TimedOut(progress),
            },
        }
    }
}

fn readiness_of(target: &Target, obj: &DynamicObject) -> Readiness {
    let mut value = serde_json::to_value(obj).unwrap_or_default();
    // Dynamic objects may come back without type meta; the rules dispatch on it.
    value["apiVersion"] = target.resource.api_version.clone().into();
    value["kind"] = target.resource.kind.clone().into();
    readiness::of(&value)
}

fn progress_of(targets: &[Target], states: &BTreeMap<usize, Readiness>) -> Progress {
    let mut p = Progress {
        total: targets.len(),
        ..Progress::default()
    };
    for (i, state) in states {
        match state {
            Readiness::Ready => p.ready += 1,
            Readiness::InProgress(why) | Readiness::Failed(why) => {
                p.pending.push((targets[*i].to_string(), why.clone()));
            }
        }
    }
    p
}

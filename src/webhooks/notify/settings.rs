//! The setting as the cluster holds it: the ConfigMap `wheelhouse-notifications` and the
//! Secrets its providers name, watched (each by name, so a namespace full of Helm's
//! storage Secrets is never listed) and turned into [`Settings`] whenever one changes.
//!
//! An invalid `config.yaml` is logged once per change and told in a Warning Event on the
//! ConfigMap; the last valid setting stays in force (a typo must not silence the on-call
//! channel). Deleting the ConfigMap turns notifications off. A provider whose Secret is
//! missing, lacks `address` or holds no http(s) URL is told the same way (never quoting
//! the address), and its messages are retried until their attempts run out.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::cluster::events::{Event, EventType, Recorder, Reporter};
use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::address::Address;
use super::config::{ADDRESS_KEY, CONFIGMAP, Config, KEY, ProviderType};

/// The setting in force.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Settings {
    /// None: notifications are off (no ConfigMap, or none valid yet).
    pub config: Option<Arc<Config>>,
    /// Each provider's endpoint, or why it has none.
    pub endpoints: BTreeMap<String, Result<Endpoint, NoEndpoint>>,
}

/// Why a provider has no endpoint now. Its address may be a credential, so no message
/// quotes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum NoEndpoint {
    #[error("its address is not an http(s) URL")]
    BadAddress,
    #[error("Secret {0} is not read yet")]
    SecretNotRead(String),
    #[error("Secret {name} does not exist in namespace {namespace}")]
    SecretMissing { name: String, namespace: String },
    #[error("Secret {0} has no key `{key}`", key = ADDRESS_KEY)]
    NoAddressKey(String),
    #[error("the `{key}` of Secret {0} is not an http(s) URL", key = ADDRESS_KEY)]
    BadSecretAddress(String),
    /// `Config::parse` refuses a provider with neither an address nor a Secret.
    #[error("it has no address")]
    NoAddress,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Endpoint {
    pub type_: ProviderType,
    pub address: Address,
}

/// A provider's Secret as last seen.
#[derive(Debug, Clone, PartialEq)]
enum SecretSeen {
    /// Its watch has not listed yet.
    Unknown,
    Missing,
    /// Present; its `address` key, if it has one.
    Present(Option<String>),
}

type SecretEvents = BoxStream<'static, (String, Result<watcher::Event<Secret>, watcher::Error>)>;

/// Watches the setting in `namespace` until `stop`, publishing it on `tx`.
pub(super) async fn watch(
    client: Client,
    namespace: String,
    identity: String,
    tx: watch::Sender<Arc<Settings>>,
    stop: CancellationToken,
) {
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: super::format::CONTROLLER.into(),
            instance: Some(identity),
        },
    );
    let by_name = |name: &str| watcher::Config::default().fields(&format!("metadata.name={name}"));
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let secrets: Api<Secret> = Api::namespaced(client, &namespace);
    let mut configmap_events = watcher(configmaps, by_name(CONFIGMAP))
        .default_backoff()
        .boxed();
    let mut secret_events: SelectAll<SecretEvents> = SelectAll::new();
    let mut state = State::new(namespace);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            Some(event) = configmap_events.next() => state.configmap_event(event, &recorder).await,
            Some((name, event)) = secret_events.next(), if !secret_events.is_empty() => {
                state.secret_event(&name, event);
            }
        }
        let wanted = state
            .config
            .as_ref()
            .map(|c| c.secret_names())
            .unwrap_or_default();
        if wanted != state.watched {
            secret_events = SelectAll::new();
            for name in &wanted {
                let name = name.clone();
                let stream = watcher(secrets.clone(), by_name(&name))
                    .default_backoff()
                    .map(move |e| (name.clone(), e))
                    .boxed();
                secret_events.push(stream);
            }
            state.secrets.retain(|name, _| wanted.contains(name));
            for name in &wanted {
                state
                    .secrets
                    .entry(name.clone())
                    .or_insert(SecretSeen::Unknown);
            }
            state.watched = wanted;
        }
        state.publish(&tx, &recorder).await;
    }
}

/// What the watches have seen.
struct State {
    namespace: String,
    /// The ConfigMap, to publish Events on.
    configmap: Option<ObjectReference>,
    /// Whether the ConfigMap turned up in the list under way.
    listed_configmap: bool,
    /// The `config.yaml` last read (None: the key was missing), so a resync or an
    /// unrelated edit does not read or report it again.
    read: Option<Option<String>>,
    /// The valid setting in force.
    config: Option<Arc<Config>>,
    watched: BTreeSet<String>,
    secrets: BTreeMap<String, SecretSeen>,
    /// Secrets that turned up in their list under way.
    listed_secrets: BTreeSet<String>,
    /// The last watch error of each watch, logged once until it works again.
    watch_errors: BTreeMap<String, String>,
    /// What was last said about the setting in force, said again only when it changes.
    reported: Option<String>,
}

impl State {
    fn new(namespace: String) -> Self {
        Self {
            namespace,
            configmap: None,
            listed_configmap: false,
            read: None,
            config: None,
            watched: BTreeSet::new(),
            secrets: BTreeMap::new(),
            listed_secrets: BTreeSet::new(),
            watch_errors: BTreeMap::new(),
            reported: None,
        }
    }

    fn watch_failed(&mut self, what: &str, error: &watcher::Error) {
        let text = error.to_string();
        if self.watch_errors.get(what) != Some(&text) {
            tracing::warn!(
                namespace = %self.namespace,
                "notifications: cannot watch {what} (retrying; the setting in force stays): {text}"
            );
            self.watch_errors.insert(what.to_owned(), text);
        }
    }

    async fn configmap_event(
        &mut self,
        event: Result<watcher::Event<ConfigMap>, watcher::Error>,
        recorder: &Recorder,
    ) {
        let what = format!("ConfigMap {CONFIGMAP}");
        let event = match event {
            Ok(e) => {
                self.watch_errors.remove(&what);
                e
            }
            Err(e) => return self.watch_failed(&what, &e),
        };
        match event {
            watcher::Event::Init => self.listed_configmap = false,
            watcher::Event::InitApply(cm) | watcher::Event::Apply(cm) => {
                self.listed_configmap = true;
                self.configmap_seen(cm, recorder).await;
            }
            watcher::Event::InitDone => {
                if !self.listed_configmap {
                    self.configmap_gone();
                }
            }
            watcher::Event::Delete(_) => self.configmap_gone(),
        }
    }

    async fn configmap_seen(&mut self, cm: ConfigMap, recorder: &Recorder) {
        let reference = cm.object_ref(&());
        self.configmap = Some(reference.clone());
        let text = cm.data.as_ref().and_then(|d| d.get(KEY)).cloned();
        if self.read.as_ref() == Some(&text) {
            return;
        }
        self.read = Some(text.clone());
        let parsed = match &text {
            Some(text) => Config::parse(text).map_err(|e| e.to_string()),
            None => Err(format!("ConfigMap {CONFIGMAP} has no key {KEY}")),
        };
        match parsed {
            Ok(config) => {
                // Said (and evented) by `publish` once its Secrets are read.
                self.config = Some(Arc::new(config));
                self.reported = None;
            }
            Err(error) => {
                let kept = if self.config.is_some() {
                    "the last valid setting stays in force"
                } else {
                    "notifications stay off"
                };
                let note = format!("{error}; {kept}");
                tracing::warn!(namespace = %self.namespace, "notifications: {note}");
                publish_event(
                    recorder,
                    &reference,
                    EventType::Warning,
                    "InvalidConfig",
                    note,
                )
                .await;
            }
        }
    }

    fn configmap_gone(&mut self) {
        self.configmap = None;
        self.read = None;
        if self.config.take().is_some() {
            tracing::info!(namespace = %self.namespace, "notifications off: ConfigMap {CONFIGMAP} was deleted");
        }
        self.reported = None;
    }

    fn secret_event(&mut self, name: &str, event: Result<watcher::Event<Secret>, watcher::Error>) {
        let what = format!("Secret {name}");
        let event = match event {
            Ok(e) => {
                self.watch_errors.remove(&what);
                e
            }
            Err(e) => return self.watch_failed(&what, &e),
        };
        let seen = match event {
            watcher::Event::Init => {
                self.listed_secrets.remove(name);
                return;
            }
            watcher::Event::InitApply(secret) | watcher::Event::Apply(secret) => {
                self.listed_secrets.insert(name.to_owned());
                // Only the address is kept, never the rest of the Secret.
                let address = secret
                    .data
                    .as_ref()
                    .and_then(|d| d.get(ADDRESS_KEY))
                    .map(|b| String::from_utf8_lossy(&b.0).trim().to_owned());
                SecretSeen::Present(address)
            }
            watcher::Event::InitDone if self.listed_secrets.contains(name) => return,
            watcher::Event::InitDone | watcher::Event::Delete(_) => SecretSeen::Missing,
        };
        if let Some(entry) = self.secrets.get_mut(name) {
            *entry = seen;
        }
    }

    /// Each provider's endpoint, or why it has none (None while a Secret is not read).
    fn endpoints(&self, config: &Config) -> BTreeMap<String, Result<Endpoint, NoEndpoint>> {
        config
            .providers
            .iter()
            .map(|p| {
                let endpoint = match (&p.address, &p.secret_ref) {
                    (Some(address), _) => Address::parse(address).ok_or(NoEndpoint::BadAddress),
                    (None, Some(secret)) => {
                        let name = &secret.name;
                        match self.secrets.get(name).unwrap_or(&SecretSeen::Unknown) {
                            SecretSeen::Unknown => Err(NoEndpoint::SecretNotRead(name.clone())),
                            SecretSeen::Missing => Err(NoEndpoint::SecretMissing {
                                name: name.clone(),
                                namespace: self.namespace.clone(),
                            }),
                            SecretSeen::Present(None) => {
                                Err(NoEndpoint::NoAddressKey(name.clone()))
                            }
                            SecretSeen::Present(Some(address)) => Address::parse(address)
                                .ok_or_else(|| NoEndpoint::BadSecretAddress(name.clone())),
                        }
                    }
                    // `Config::parse` refuses a provider with neither.
                    (None, None) => Err(NoEndpoint::NoAddress),
                };
                let endpoint = endpoint.map(|address| Endpoint {
                    type_: p.type_,
                    address,
                });
                (p.name.clone(), endpoint)
            })
            .collect()
    }

    /// Publishes the setting if it changed; once every Secret is read, says what is in
    /// force when that changed (a log line and an Event on the ConfigMap).
    async fn publish(&mut self, tx: &watch::Sender<Arc<Settings>>, recorder: &Recorder) {
        let settings = Settings {
            endpoints: self
                .config
                .as_ref()
                .map(|c| self.endpoints(c))
                .unwrap_or_default(),
            config: self.config.clone(),
        };
        let pending = self.secrets.values().any(|s| *s == SecretSeen::Unknown);
        let summary = settings.config.as_ref().map(|c| {
            let problems: Vec<String> = settings
                .endpoints
                .iter()
                .filter_map(|(name, e)| {
                    e.as_ref()
                        .err()
                        .map(|why| format!("provider {name}: {why}"))
                })
                .collect();
            (
                format!(
                    "notifications on: {} providers, {} routes",
                    c.providers.len(),
                    c.routes.len()
                ),
                problems,
            )
        });
        tx.send_if_modified(|current| {
            let changed = **current != settings;
            if changed {
                *current = Arc::new(settings);
            }
            changed
        });
        if pending {
            return;
        }
        let Some((on, problems)) = summary else {
            return;
        };
        let said = format!("{on}; {}", problems.join("; "));
        if self.reported.as_ref() == Some(&said) {
            return;
        }
        self.reported = Some(said);
        let Some(reference) = self.configmap.clone() else {
            return;
        };
        if problems.is_empty() {
            tracing::info!(namespace = %self.namespace, "{on}");
            publish_event(
                recorder,
                &reference,
                EventType::Normal,
                "NotificationsReady",
                on,
            )
            .await;
        } else {
            let note = format!("{on}, but {}", problems.join("; "));
            tracing::warn!(namespace = %self.namespace, "{note}");
            publish_event(
                recorder,
                &reference,
                EventType::Warning,
                "ProviderUnavailable",
                note,
            )
            .await;
        }
    }
}

async fn publish_event(
    recorder: &Recorder,
    reference: &ObjectReference,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "LoadNotifications".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, reference).await {
        tracing::debug!(error = %e, "cannot publish an Event on the notifications ConfigMap");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(address: Option<&str>) -> Secret {
        let mut s = Secret::default();
        s.metadata.name = Some("hook".into());
        if let Some(a) = address {
            s.data = Some(BTreeMap::from([(
                ADDRESS_KEY.to_owned(),
                k8s_openapi::ByteString(a.as_bytes().to_vec()),
            )]));
        }
        s
    }

    #[test]
    fn a_provider_s_endpoint_follows_its_secret() {
        let config = Config::parse(
            "providers:\n- {name: a, type: slack, secretRef: {name: hook}}\n- {name: b, type: flux, address: http://nc.flux-system/}",
        )
        .unwrap();
        let mut state = State::new("ns".into());
        state.secrets.insert("hook".into(), SecretSeen::Unknown);
        let endpoint_a = |state: &State| {
            state.endpoints(&config)["a"]
                .clone()
                .map_err(|e| e.to_string())
        };
        assert_eq!(
            endpoint_a(&state),
            Err("Secret hook is not read yet".into())
        );
        assert_eq!(
            state.endpoints(&config)["b"].as_ref().unwrap().type_,
            ProviderType::Flux
        );

        // Listed and not found.
        state.secret_event("hook", Ok(watcher::Event::Init));
        state.secret_event("hook", Ok(watcher::Event::InitDone));
        assert_eq!(
            endpoint_a(&state),
            Err("Secret hook does not exist in namespace ns".into())
        );
        state.secret_event("hook", Ok(watcher::Event::Apply(secret(None))));
        assert_eq!(
            endpoint_a(&state),
            Err("Secret hook has no key `address`".into())
        );
        state.secret_event(
            "hook",
            Ok(watcher::Event::Apply(secret(Some("not a url s3cr3t")))),
        );
        let bad = endpoint_a(&state).unwrap_err();
        assert!(
            bad.contains("not an http(s) URL") && !bad.contains("s3cr3t"),
            "{bad}"
        );
        state.secret_event(
            "hook",
            Ok(watcher::Event::Apply(secret(Some(
                " https://hooks.example/s3cr3t\n",
            )))),
        );
        let good = endpoint_a(&state).unwrap();
        assert_eq!(
            good.address,
            Address::parse("https://hooks.example/s3cr3t").unwrap()
        );
        // A relist that finds it keeps it; its deletion removes it.
        state.secret_event("hook", Ok(watcher::Event::Init));
        state.secret_event(
            "hook",
            Ok(watcher::Event::InitApply(secret(Some(
                "https://hooks.example/s3cr3t",
            )))),
        );
        state.secret_event("hook", Ok(watcher::Event::InitDone));
        assert!(endpoint_a(&state).is_ok());
        state.secret_event("hook", Ok(watcher::Event::Delete(secret(None))));
        assert!(endpoint_a(&state).is_err());
    }
}

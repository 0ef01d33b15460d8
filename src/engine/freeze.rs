//! Incident freeze: every matching release of every kind suspended at once, with a record
//! on each object of who froze it, why, when, until when and whether it was suspended
//! before; and the thaw, which resumes exactly what the freeze suspended.
//!
//! The record lives in the cluster only (annotations under `freeze.wheelhouse.dev/`, and a
//! label so an engine lists frozen objects cheaply), so any engine can thaw a freeze at
//! expiry (`freeze_expiry.rs`) and a thaw needs nothing from the process that froze.
//!
//! Every write is one merge patch per object carrying `metadata.resourceVersion`: the API
//! server refuses it (409) when the object changed since it was read, and the decision is
//! then taken again from a fresh read. Two operators freezing and thawing at once never
//! leave an object in a state neither asked for; the last write wins as a whole.
//!
//! The thaw rule ([`suspended_by_freeze`]): a thaw resumes an object only when its record
//! says it was not suspended before, it is suspended now, and every field manager that owns
//! `spec.suspend` is the freeze's own ([`FREEZE_MANAGER`]). Whoever resumes and suspends it
//! again during the freeze (kubectl, the dashboard, `flux suspend`) takes `spec.suspend`
//! over, and the thaw leaves their suspend alone.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ApiResource, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams};
use kube::{Api, Client};
use serde::Serialize;
use serde_json::{Value, json};

use crate::api::HelmRelease;
use crate::api::conditions::reason;
use crate::api::flux::FluxHelmRelease;
use crate::cluster::client::{Scope, api_message};
use crate::cluster::events::{Event, EventType, Recorder, Reporter};
use k8s_openapi::api::core::v1::ObjectReference;

use super::vocabulary::ReleaseKey;

/// Who froze it: the caller's username as the API server reported it (SelfSubjectReview).
pub const FROZEN_BY: &str = "freeze.wheelhouse.dev/by";
/// Why, as the operator wrote it.
pub const FROZEN_REASON: &str = "freeze.wheelhouse.dev/reason";
/// When the freeze began (RFC 3339).
pub const FROZEN_AT: &str = "freeze.wheelhouse.dev/at";
/// When it ends (RFC 3339): thawed then by the engine that holds the lease, unless
/// [`UNTIL_THAWED`] is set, when it is reported overdue instead.
pub const FROZEN_UNTIL: &str = "freeze.wheelhouse.dev/until";
/// `"true"`: the freeze stays past `until` until someone thaws it.
pub const UNTIL_THAWED: &str = "freeze.wheelhouse.dev/untilThawed";
/// `"true"` or `"false"`: whether the object was suspended before the freeze.
pub const SUSPENDED_BEFORE: &str = "freeze.wheelhouse.dev/suspendedBefore";
/// A label on every frozen object, so an engine lists them without listing every release.
pub const FROZEN_LABEL: &str = "freeze.wheelhouse.dev/frozen";
/// The field manager of every freeze and thaw write: how a thaw tells the freeze's
/// `spec.suspend` from someone else's.
pub const FREEZE_MANAGER: &str = "wheelhouse-freeze";
/// Flux Operator's record of who suspended a Flux object (its web UI shows it).
pub const FLUX_SUSPENDED_BY: &str = "fluxcd.controlplane.io/suspendedBy";

const RECORD_KEYS: [&str; 6] = [
    FROZEN_BY,
    FROZEN_REASON,
    FROZEN_AT,
    FROZEN_UNTIL,
    UNTIL_THAWED,
    SUSPENDED_BEFORE,
];

/// The longest reason kept: enough for a ticket link and a sentence.
pub const REASON_KEPT: usize = 1024;

/// How long one call to the API server may take before its release is reported as not
/// answered (the write may still land: the result says so).
const CALL_LIMIT: Duration = Duration::from_secs(10);

/// How many releases are written at once.
const CONCURRENT: usize = 8;

/// Which kinds of object a freeze suspends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FreezeKind {
    /// A `wheelhouse.dev/v1alpha1` HelmRelease.
    Wheelhouse,
    /// A Flux `helm.toolkit.fluxcd.io/v2` HelmRelease.
    Flux,
}

impl FreezeKind {
    pub const ALL: [FreezeKind; 2] = [FreezeKind::Wheelhouse, FreezeKind::Flux];

    pub fn word(self) -> &'static str {
        match self {
            Self::Wheelhouse => "wheelhouse",
            Self::Flux => "flux",
        }
    }

    fn resource(self) -> ApiResource {
        match self {
            Self::Wheelhouse => ApiResource::erase::<HelmRelease>(&()),
            Self::Flux => ApiResource::erase::<FluxHelmRelease>(&()),
        }
    }

    pub(crate) fn api(self, client: &Client, scope: &Scope) -> Api<DynamicObject> {
        match scope {
            Scope::All => Api::all_with(client.clone(), &self.resource()),
            Scope::Namespace(ns) => Api::namespaced_with(client.clone(), ns, &self.resource()),
        }
    }

    fn api_in(self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), namespace, &self.resource())
    }
}

/// A freeze as recorded on one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FreezeRecord {
    pub by: String,
    pub reason: String,
    pub at: Timestamp,
    /// `None` when the annotation does not read as a time: such a freeze never ends by
    /// itself (it is reported overdue).
    pub until: Option<Timestamp>,
    pub until_thawed: bool,
    /// Whether the object was suspended before the freeze. A record that does not say is
    /// read as `true`: a thaw never resumes what it cannot show the freeze suspended.
    pub suspended_before: bool,
}

impl FreezeRecord {
    /// The record on an object, if it carries one (its `at` annotation is the sign).
    pub fn of(meta: &ObjectMeta) -> Option<Self> {
        let a = meta.annotations.as_ref()?;
        let at = a.get(FROZEN_AT)?.parse().ok()?;
        Some(Self {
            by: a.get(FROZEN_BY).cloned().unwrap_or_default(),
            reason: a.get(FROZEN_REASON).cloned().unwrap_or_default(),
            at,
            until: a.get(FROZEN_UNTIL).and_then(|t| t.parse().ok()),
            until_thawed: a.get(UNTIL_THAWED).is_some_and(|v| v == "true"),
            suspended_before: a.get(SUSPENDED_BEFORE).is_none_or(|v| v != "false"),
        })
    }

    /// Past its end and meant to end by itself.
    pub fn expired(&self, now: Timestamp) -> bool {
        !self.until_thawed && self.until.is_some_and(|u| u <= now)
    }

    /// Past its end (or with an unreadable end) and kept until someone thaws it.
    pub fn overdue(&self, now: Timestamp) -> bool {
        self.until.is_none_or(|u| u <= now) && !self.expired(now)
    }

    fn annotations(&self) -> serde_json::Map<String, Value> {
        let mut a = serde_json::Map::new();
        a.insert(FROZEN_BY.into(), self.by.clone().into());
        a.insert(FROZEN_REASON.into(), self.reason.clone().into());
        a.insert(FROZEN_AT.into(), self.at.to_string().into());
        a.insert(
            FROZEN_UNTIL.into(),
            self.until.map(|u| u.to_string()).into(),
        );
        a.insert(
            UNTIL_THAWED.into(),
            if self.until_thawed {
                "true".into()
            } else {
                Value::Null
            },
        );
        a.insert(
            SUSPENDED_BEFORE.into(),
            self.suspended_before.to_string().into(),
        );
        a
    }
}

/// `spec.suspend` of an object of either kind.
fn suspended(obj: &DynamicObject) -> bool {
    obj.data["spec"]["suspend"].as_bool() == Some(true)
}

/// The field managers that own `spec.suspend`.
pub fn suspend_managers(meta: &ObjectMeta) -> Vec<String> {
    crate::api::suspend_owner::suspend_owners(meta)
        .map(|f| f.manager.clone().unwrap_or_default())
        .collect()
}

/// The thaw rule: whether the object is suspended because of its freeze and nothing else
/// (see the module's comment).
pub fn suspended_by_freeze(suspend: bool, meta: &ObjectMeta) -> bool {
    let Some(record) = FreezeRecord::of(meta) else {
        return false;
    };
    let managers = suspend_managers(meta);
    !record.suspended_before
        && suspend
        && !managers.is_empty()
        && managers.iter().all(|m| m == FREEZE_MANAGER)
}

/// What a thaw does to one object, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThawDecision {
    /// Resume it: the freeze suspended it and no one has since.
    Resume,
    /// Only take the record off: the reason says why it stays as it is.
    Leave(String),
}

pub fn thaw_decision(suspend: bool, meta: &ObjectMeta) -> ThawDecision {
    if suspended_by_freeze(suspend, meta) {
        return ThawDecision::Resume;
    }
    let record = FreezeRecord::of(meta);
    let others: Vec<String> = suspend_managers(meta)
        .into_iter()
        .filter(|m| m != FREEZE_MANAGER)
        .collect();
    ThawDecision::Leave(if !suspend {
        "already resumed during the freeze".into()
    } else if record.is_none_or(|r| r.suspended_before) {
        "left suspended: it was suspended before the freeze".into()
    } else if others.is_empty() {
        "left suspended: the freeze cannot show it suspended it".into()
    } else {
        format!(
            "left suspended: suspended again during the freeze by {}",
            others.join(", ")
        )
    })
}

/// Which releases a freeze or thaw is about.
#[derive(Debug, Clone)]
pub struct FreezeSelection {
    pub scope: Scope,
    /// A label selector (kubectl's syntax), for releases of every kind.
    pub labels: Option<String>,
    /// Named releases; empty means every release in scope (that the selector matches).
    pub names: Vec<ReleaseKey>,
}

/// A freeze as asked for.
#[derive(Debug, Clone)]
pub struct FreezeRequest {
    pub by: String,
    pub reason: String,
    pub duration: Duration,
    pub until_thawed: bool,
}

/// What happened to one release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    tag = "result"
)]
pub enum FreezeDone {
    /// Frozen: suspended by this freeze, or kept suspended and recorded as suspended
    /// before. `renewed`: it was frozen already and the record is this freeze's now.
    Frozen {
        suspended_before: bool,
        renewed: bool,
    },
    /// Thawed: resumed, or only its record taken off (`note` says why).
    Thawed { resumed: bool, note: String },
    /// Named, but it carries no freeze.
    NotFrozen,
    /// A release no HelmRelease manages (the helm CLI's): nothing automates it.
    NotAutomated,
    /// Nothing written, or the outcome is not known: the API server's words.
    Failed { error: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FreezeOutcome {
    /// `wheelhouse`, `flux`, or `helm` for a release only Helm's storage holds.
    pub kind: String,
    pub namespace: String,
    pub name: String,
    #[serde(flatten)]
    pub done: FreezeDone,
}

/// The result of a freeze or thaw over every release it selected.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FreezeReport {
    /// `freeze` or `thaw`.
    pub action: String,
    /// The freeze's record as written (a thaw has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record: Option<FreezeRecord>,
    pub releases: Vec<FreezeOutcome>,
    /// Some release could not be frozen or thawed.
    pub partial: bool,
}

impl FreezeReport {
    fn new(action: &str, record: Option<FreezeRecord>, mut releases: Vec<FreezeOutcome>) -> Self {
        releases.sort_by(|a, b| {
            (&a.namespace, &a.name, &a.kind).cmp(&(&b.namespace, &b.name, &b.kind))
        });
        let partial = releases
            .iter()
            .any(|r| matches!(r.done, FreezeDone::Failed { .. }));
        Self {
            action: action.into(),
            record,
            releases,
            partial,
        }
    }

    /// Adds releases that nothing automates (the caller lists them: Helm's storage is
    /// the front end's to read).
    pub fn with_not_automated(mut self, keys: impl IntoIterator<Item = ReleaseKey>) -> Self {
        let keys: Vec<ReleaseKey> = keys.into_iter().collect();
        // A name only Helm's storage holds is not a missing HelmRelease.
        self.releases
            .retain(|r| r.kind != "-" || !keys.contains(&ReleaseKey::new(&r.namespace, &r.name)));
        self.releases
            .extend(keys.into_iter().map(|k| FreezeOutcome {
                kind: "helm".into(),
                namespace: k.namespace,
                name: k.name,
                done: FreezeDone::NotAutomated,
            }));
        Self::new(&self.action, self.record, self.releases)
    }
}

/// One object found by the selection, or a failure to find them.
enum Found {
    Object(FreezeKind, Box<DynamicObject>),
    Failed(FreezeKind, ReleaseKey, String),
    Missing(ReleaseKey),
}

fn key_of(obj: &DynamicObject) -> ReleaseKey {
    ReleaseKey::of_meta(&obj.metadata)
}

fn describe(e: &kube::Error) -> String {
    api_message(e)
}

async fn within<T>(
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(CALL_LIMIT, call).await {
        Ok(r) => r.map_err(|e| describe(&e)),
        Err(_) => Err(format!(
            "the API server did not answer within {}s (the outcome is unknown)",
            CALL_LIMIT.as_secs()
        )),
    }
}

/// The objects of every kind the selection names or matches. A kind whose CRD the
/// cluster does not serve is no error (no such releases).
async fn find(
    client: &Client,
    selection: &FreezeSelection,
    extra_labels: Option<&str>,
) -> Vec<Found> {
    let mut found = Vec::new();
    if selection.names.is_empty() {
        let labels: Vec<&str> = selection
            .labels
            .as_deref()
            .into_iter()
            .chain(extra_labels)
            .collect();
        let params = ListParams {
            label_selector: (!labels.is_empty()).then(|| labels.join(",")),
            ..ListParams::default()
        };
        for kind in FreezeKind::ALL {
            let api = kind.api(client, &selection.scope);
            match tokio::time::timeout(CALL_LIMIT, api.list(&params)).await {
                Ok(Ok(list)) => found.extend(
                    list.items
                        .into_iter()
                        .map(|o| Found::Object(kind, Box::new(o))),
                ),
                // The cluster does not serve the kind (Flux is not installed).
                Ok(Err(kube::Error::Api(s))) if s.code == 404 => {}
                Ok(Err(e)) => found.push(Found::Failed(
                    kind,
                    ReleaseKey::new(scope_word(&selection.scope), "*"),
                    format!("cannot list {} HelmReleases: {}", kind.word(), describe(&e)),
                )),
                Err(_) => found.push(Found::Failed(
                    kind,
                    ReleaseKey::new(scope_word(&selection.scope), "*"),
                    format!(
                        "cannot list {} HelmReleases: no answer within {}s",
                        kind.word(),
                        CALL_LIMIT.as_secs()
                    ),
                )),
            }
        }
        return found;
    }
    for key in &selection.names {
        let mut any = false;
        for kind in FreezeKind::ALL {
            match within(kind.api_in(client, &key.namespace).get_opt(&key.name)).await {
                Ok(Some(o)) => {
                    any = true;
                    found.push(Found::Object(kind, Box::new(o)));
                }
                // Also the answer when the cluster does not serve the kind.
                Ok(None) => {}
                Err(e) => {
                    any = true;
                    found.push(Found::Failed(kind, key.clone(), e));
                }
            }
        }
        if !any {
            found.push(Found::Missing(key.clone()));
        }
    }
    found
}

fn scope_word(scope: &Scope) -> String {
    match scope {
        Scope::All => "*".into(),
        Scope::Namespace(ns) => ns.clone(),
    }
}

fn failed(kind: &str, key: ReleaseKey, error: String) -> FreezeOutcome {
    FreezeOutcome {
        kind: kind.into(),
        namespace: key.namespace,
        name: key.name,
        done: FreezeDone::Failed { error },
    }
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FREEZE_MANAGER.into()),
        ..PatchParams::default()
    }
}

/// The audit of a freeze or thaw: an Event on the release (who, why, what was done), as
/// `kubectl describe` and the dashboard's Events tab show. Best effort: the record on
/// the object is what counts, so an Event that cannot be written costs nothing else.
async fn audit(
    recorder: &Recorder,
    kind: FreezeKind,
    obj: &DynamicObject,
    reason: &str,
    note: String,
) {
    let resource = kind.resource();
    let regarding = ObjectReference {
        api_version: Some(resource.api_version),
        kind: Some(resource.kind),
        name: obj.metadata.name.clone(),
        namespace: obj.metadata.namespace.clone(),
        uid: obj.metadata.uid.clone(),
        ..ObjectReference::default()
    };
    // events.k8s.io keeps notes to 1 kB.
    let note: String = note.chars().take(EVENT_NOTE_KEPT).collect();
    let event = Event {
        type_: EventType::Normal,
        reason: reason.into(),
        note: Some(note),
        action: reason.into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &regarding).await {
        tracing::debug!(release = %key_of(obj), error = %e, "freeze audit Event not written");
    }
}

/// The longest Event note written (events.k8s.io refuses notes over 1 kB).
const EVENT_NOTE_KEPT: usize = 900;

/// The audit Events' recorder: the reporting instance is who froze or thawed (the
/// Timeline reads it as the change's author), cut to the 128 characters the API allows.
fn recorder(client: &Client, by: &str) -> Recorder {
    Recorder::new(
        client.clone(),
        Reporter {
            controller: FREEZE_MANAGER.into(),
            instance: Some(by.chars().take(128).collect()),
        },
    )
}

fn until_text(record: &FreezeRecord) -> String {
    let until = record.until.map_or_else(|| "-".into(), |u| u.to_string());
    if record.until_thawed {
        format!("{until}, then until thawed")
    } else {
        until
    }
}

/// The merge patch that freezes `obj` with `record` (its `suspended_before` decided
/// here from the object as read), preconditioned on the resourceVersion read.
fn freeze_patch(
    kind: FreezeKind,
    obj: &DynamicObject,
    record: &FreezeRecord,
) -> (Value, bool, bool) {
    let suspend = suspended(obj);
    let renewed = FreezeRecord::of(&obj.metadata).is_some();
    // Suspended by someone (or by a freeze over an object that was suspended before) is
    // suspended before; suspended only by an earlier freeze is not: its thaw resumes it.
    let suspended_before = suspend && !suspended_by_freeze(suspend, &obj.metadata);
    let record = FreezeRecord {
        suspended_before,
        ..record.clone()
    };
    let mut annotations = record.annotations();
    let mut patch = json!({
        "metadata": {
            "resourceVersion": obj.metadata.resource_version,
            "labels": {FROZEN_LABEL: "true"},
        },
    });
    if !suspend {
        patch["spec"] = json!({"suspend": true});
        if kind == FreezeKind::Flux {
            annotations.insert(FLUX_SUSPENDED_BY.into(), record.by.clone().into());
        }
    }
    patch["metadata"]["annotations"] = Value::Object(annotations);
    (patch, suspended_before, renewed)
}

/// The merge patch that thaws `obj`, and what it does.
fn thaw_patch(kind: FreezeKind, obj: &DynamicObject, token: &str) -> (Value, ThawDecision) {
    let decision = thaw_decision(suspended(obj), &obj.metadata);
    let mut annotations: serde_json::Map<String, Value> = RECORD_KEYS
        .iter()
        .map(|k| ((*k).into(), Value::Null))
        .collect();
    let mut patch = json!({
        "metadata": {
            "resourceVersion": obj.metadata.resource_version,
            "labels": {FROZEN_LABEL: null},
        },
    });
    if decision == ThawDecision::Resume {
        patch["spec"] = json!({"suspend": false});
        if kind == FreezeKind::Flux {
            // As `flux resume`: a reconcile request beside the resume.
            annotations.insert(
                crate::api::flux::annotations::RECONCILE_REQUESTED_AT.into(),
                token.into(),
            );
            annotations.insert(FLUX_SUSPENDED_BY.into(), Value::Null);
        }
    }
    patch["metadata"]["annotations"] = Value::Object(annotations);
    (patch, decision)
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// How many times a write is tried, each decided again from a fresh read after a
/// conflict. More than two: an engine writing a release's status (a subresource write,
/// which moves the resourceVersion too) refused both attempts of a freeze in the e2e
/// test of expiry, on releases the engine had just seen.
const ATTEMPTS: u32 = 4;

/// Writes `make`'s patch on `obj`; on a conflict, reads it again, decides again and
/// writes again, [`ATTEMPTS`] times in all. `make` returns `None` when, as read, there
/// is nothing to do.
async fn write_one<T>(
    kind: FreezeKind,
    client: &Client,
    obj: DynamicObject,
    make: impl Fn(&DynamicObject) -> Option<(Value, T)>,
) -> Result<Option<(T, DynamicObject)>, String> {
    let key = key_of(&obj);
    let api = kind.api_in(client, &key.namespace);
    let mut obj = obj;
    for attempt in 1..=ATTEMPTS {
        let Some((patch, what)) = make(&obj) else {
            return Ok(None);
        };
        match tokio::time::timeout(
            CALL_LIMIT,
            api.patch(&key.name, &params(), &Patch::Merge(patch)),
        )
        .await
        {
            Ok(Ok(written)) => return Ok(Some((what, written))),
            Ok(Err(e)) if is_conflict(&e) && attempt < ATTEMPTS => {
                // A little apart, so writers racing on one object do not meet again.
                tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt))).await;
                obj = match within(api.get_opt(&key.name)).await? {
                    Some(o) => o,
                    None => return Err("deleted while being written".into()),
                };
            }
            Ok(Err(e)) if is_conflict(&e) => {
                return Err(format!(
                    "changed by someone else {ATTEMPTS} times while being written: {}",
                    describe(&e)
                ));
            }
            Ok(Err(e)) => return Err(describe(&e)),
            Err(_) => {
                return Err(format!(
                    "the API server did not answer within {}s (the outcome is unknown)",
                    CALL_LIMIT.as_secs()
                ));
            }
        }
    }
    unreachable!("the loop returns on its last attempt")
}

/// Freezes every release of every kind the selection matches.
pub async fn freeze_releases(
    client: &Client,
    selection: &FreezeSelection,
    request: &FreezeRequest,
) -> FreezeReport {
    // Whole seconds: the record is read by people.
    let at =
        Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now());
    let until = at
        .checked_add(request.duration)
        .ok()
        .or_else(|| at.checked_add(Duration::from_secs(365 * 24 * 3600)).ok());
    let record = FreezeRecord {
        by: request.by.clone(),
        reason: request.reason.chars().take(REASON_KEPT).collect(),
        at,
        until,
        until_thawed: request.until_thawed,
        suspended_before: false,
    };
    let found = find(client, selection, None).await;
    let recorder = &recorder(client, &request.by);
    let outcomes = futures::stream::iter(found)
        .map(|f| {
            let record = &record;
            async move {
                match f {
                    Found::Object(kind, obj) => {
                        let key = key_of(&obj);
                        let done = match write_one(kind, client, *obj, |o| {
                            let (p, before, renewed) = freeze_patch(kind, o, record);
                            Some((p, (before, renewed)))
                        })
                        .await
                        {
                            Ok(Some(((suspended_before, renewed), written))) => {
                                let what = if suspended_before {
                                    "kept suspended (it was suspended before)"
                                } else {
                                    "suspended"
                                };
                                let note = format!(
                                    "frozen by {} until {}: {what}; reason: {}",
                                    record.by,
                                    until_text(record),
                                    record.reason
                                );
                                audit(recorder, kind, &written, reason::FROZEN, note).await;
                                FreezeDone::Frozen {
                                    suspended_before,
                                    renewed,
                                }
                            }
                            Ok(None) => unreachable!("a freeze always writes"),
                            Err(error) => FreezeDone::Failed { error },
                        };
                        FreezeOutcome {
                            kind: kind.word().into(),
                            namespace: key.namespace,
                            name: key.name,
                            done,
                        }
                    }
                    Found::Failed(kind, key, e) => failed(kind.word(), key, e),
                    Found::Missing(key) => failed("-", key, "no HelmRelease of this name".into()),
                }
            }
        })
        .buffer_unordered(CONCURRENT)
        .collect()
        .await;
    FreezeReport::new("freeze", Some(record), outcomes)
}

/// Thaws every frozen release the selection matches (named ones that are not frozen are
/// reported so).
/// `by`: who thaws, for the audit Event.
pub async fn thaw_releases(client: &Client, selection: &FreezeSelection, by: &str) -> FreezeReport {
    let frozen = format!("{FROZEN_LABEL}=true");
    let found = find(client, selection, Some(&frozen)).await;
    let token = Timestamp::now().to_string();
    let recorder = &recorder(client, by);
    let outcomes = futures::stream::iter(found)
        .map(|f| {
            let token = &token;
            async move {
                match f {
                    Found::Object(kind, obj) => {
                        let key = key_of(&obj);
                        let thawing = Thawing {
                            client,
                            recorder,
                            by,
                            token,
                        };
                        let done = match thaw_object(kind, &thawing, *obj, |_| true).await {
                            Ok(Some(done)) => done,
                            Ok(None) => FreezeDone::NotFrozen,
                            Err(error) => FreezeDone::Failed { error },
                        };
                        FreezeOutcome {
                            kind: kind.word().into(),
                            namespace: key.namespace,
                            name: key.name,
                            done,
                        }
                    }
                    Found::Failed(kind, key, e) => failed(kind.word(), key, e),
                    Found::Missing(key) => failed("-", key, "no HelmRelease of this name".into()),
                }
            }
        })
        .buffer_unordered(CONCURRENT)
        .collect()
        .await;
    FreezeReport::new("thaw", None, outcomes)
}

/// Who thaws, and with what.
pub(crate) struct Thawing<'a> {
    pub client: &'a Client,
    pub recorder: &'a Recorder,
    /// Who thaws (a username, or an engine's identity at expiry), for the audit Event.
    pub by: &'a str,
    /// The reconcile request a resumed Flux release gets.
    pub token: &'a str,
}

impl<'a> Thawing<'a> {
    /// A thaw by the engine `identity`, at expiry.
    pub fn by_engine(
        client: &'a Client,
        recorder: &'a Recorder,
        identity: &'a str,
        token: &'a str,
    ) -> Self {
        Self {
            client,
            recorder,
            by: identity,
            token,
        }
    }
}

pub(crate) fn engine_recorder(client: &Client, identity: &str) -> Recorder {
    recorder(client, identity)
}

/// Thaws one object if it carries a record `still` accepts as read (at each attempt: a
/// freeze renewed meanwhile is judged again). `Ok(None)`: nothing to thaw.
pub(crate) async fn thaw_object(
    kind: FreezeKind,
    thawing: &Thawing<'_>,
    obj: DynamicObject,
    still: impl Fn(&FreezeRecord) -> bool,
) -> Result<Option<FreezeDone>, String> {
    let written = write_one(kind, thawing.client, obj, |o| {
        let record = FreezeRecord::of(&o.metadata)?;
        if !still(&record) {
            return None;
        }
        let (patch, decision) = thaw_patch(kind, o, thawing.token);
        Some((
            patch,
            (
                record,
                match decision {
                    ThawDecision::Resume => FreezeDone::Thawed {
                        resumed: true,
                        note: "resumed".into(),
                    },
                    ThawDecision::Leave(note) => FreezeDone::Thawed {
                        resumed: false,
                        note,
                    },
                },
            ),
        ))
    })
    .await?;
    let Some(((record, done), obj)) = written else {
        return Ok(None);
    };
    if let FreezeDone::Thawed { note, .. } = &done {
        let note = format!(
            "thawed by {}: {note}; the freeze was {}'s until {}: {}",
            thawing.by,
            record.by,
            until_text(&record),
            record.reason
        );
        audit(thawing.recorder, kind, &obj, reason::THAWED, note).await;
    }
    Ok(Some(done))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};

    fn meta(annotations: &[(&str, &str)], suspend_managers: &[&str]) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            managed_fields: Some(
                suspend_managers
                    .iter()
                    .map(|m| ManagedFieldsEntry {
                        manager: Some((*m).into()),
                        operation: Some("Update".into()),
                        fields_type: Some("FieldsV1".into()),
                        fields_v1: Some(FieldsV1(json!({"f:spec": {"f:suspend": {}}}))),
                        ..Default::default()
                    })
                    .chain([ManagedFieldsEntry {
                        manager: Some("creator".into()),
                        fields_v1: Some(FieldsV1(json!({"f:spec": {"f:chart": {}}}))),
                        ..Default::default()
                    }])
                    .collect(),
            ),
            ..Default::default()
        }
    }

    const AT: (&str, &str) = (FROZEN_AT, "2026-12-02T01:00:00Z");
    const UNTIL: (&str, &str) = (FROZEN_UNTIL, "2026-12-02T03:00:00Z");

    #[test]
    fn a_thaw_resumes_only_what_the_freeze_suspended() {
        let not_before = (SUSPENDED_BEFORE, "false");
        let before = (SUSPENDED_BEFORE, "true");
        // Suspended by the freeze alone.
        assert_eq!(
            thaw_decision(true, &meta(&[AT, UNTIL, not_before], &[FREEZE_MANAGER])),
            ThawDecision::Resume
        );
        // Suspended before the freeze.
        assert!(matches!(
            thaw_decision(true, &meta(&[AT, UNTIL, before], &["kubectl-patch"])),
            ThawDecision::Leave(why) if why.contains("before")
        ));
        // Resumed and suspended again during the freeze, by someone else.
        assert!(matches!(
            thaw_decision(true, &meta(&[AT, UNTIL, not_before], &["kubectl-patch"])),
            ThawDecision::Leave(why) if why.contains("kubectl-patch")
        ));
        // Suspended by the freeze and by someone's apply of the same value.
        assert!(matches!(
            thaw_decision(
                true,
                &meta(&[AT, not_before], &[FREEZE_MANAGER, "kustomize-controller"])
            ),
            ThawDecision::Leave(_)
        ));
        // Resumed during the freeze.
        assert!(matches!(
            thaw_decision(false, &meta(&[AT, not_before], &[])),
            ThawDecision::Leave(why) if why.contains("resumed")
        ));
        // A record that does not say whether it was suspended before: left suspended.
        assert!(matches!(
            thaw_decision(true, &meta(&[AT], &[FREEZE_MANAGER])),
            ThawDecision::Leave(_)
        ));
    }

    #[test]
    fn expiry_and_overdue() {
        let now: Timestamp = "2026-12-02T04:00:00Z".parse().unwrap();
        let early: Timestamp = "2026-12-02T02:00:00Z".parse().unwrap();
        let record = FreezeRecord::of(&meta(&[AT, UNTIL], &[])).unwrap();
        assert!(record.expired(now) && !record.overdue(now));
        assert!(!record.expired(early) && !record.overdue(early));
        let kept = FreezeRecord::of(&meta(&[AT, UNTIL, (UNTIL_THAWED, "true")], &[])).unwrap();
        assert!(!kept.expired(now) && kept.overdue(now));
        let unreadable = FreezeRecord::of(&meta(&[AT, (FROZEN_UNTIL, "soon")], &[])).unwrap();
        assert!(!unreadable.expired(now) && unreadable.overdue(early));
    }

    fn object(suspend: bool, m: ObjectMeta) -> DynamicObject {
        let mut o = DynamicObject::new("web", &FreezeKind::Flux.resource()).within("apps");
        o.metadata.annotations = m.annotations;
        o.metadata.managed_fields = m.managed_fields;
        o.metadata.resource_version = Some("7".into());
        o.data = json!({"spec": {"suspend": suspend}});
        o
    }

    #[test]
    fn a_freeze_is_one_preconditioned_patch_that_keeps_the_first_freezes_knowledge() {
        let record = FreezeRecord {
            by: "jane".into(),
            reason: "INC-1".into(),
            at: "2026-12-02T01:00:00Z".parse().unwrap(),
            until: "2026-12-02T03:00:00Z".parse().ok(),
            until_thawed: false,
            suspended_before: false,
        };
        // A running release: suspended, recorded as not suspended before.
        let (p, before, renewed) =
            freeze_patch(FreezeKind::Flux, &object(false, meta(&[], &[])), &record);
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        assert_eq!(p["spec"]["suspend"], true);
        assert_eq!(p["metadata"]["annotations"][SUSPENDED_BEFORE], "false");
        assert_eq!(p["metadata"]["annotations"][FLUX_SUSPENDED_BY], "jane");
        assert_eq!(p["metadata"]["labels"][FROZEN_LABEL], "true");
        assert!(!before && !renewed);
        // Suspended by someone: spec untouched, recorded as suspended before.
        let (p, before, _) = freeze_patch(
            FreezeKind::Flux,
            &object(true, meta(&[], &["kubectl-patch"])),
            &record,
        );
        assert!(p.get("spec").is_none() && before);
        assert_eq!(p["metadata"]["annotations"][SUSPENDED_BEFORE], "true");
        // Frozen already by an earlier freeze that suspended it: still its thaw's to resume.
        let earlier = meta(&[AT, UNTIL, (SUSPENDED_BEFORE, "false")], &[FREEZE_MANAGER]);
        let (p, before, renewed) = freeze_patch(FreezeKind::Flux, &object(true, earlier), &record);
        assert!(!before && renewed);
        assert_eq!(p["metadata"]["annotations"][SUSPENDED_BEFORE], "false");
    }

    #[test]
    fn a_thaw_takes_the_whole_record_off() {
        let m = meta(&[AT, UNTIL, (SUSPENDED_BEFORE, "false")], &[FREEZE_MANAGER]);
        let (p, decision) = thaw_patch(FreezeKind::Flux, &object(true, m), "t");
        assert_eq!(decision, ThawDecision::Resume);
        assert_eq!(p["spec"]["suspend"], false);
        assert_eq!(p["metadata"]["resourceVersion"], "7");
        assert_eq!(p["metadata"]["labels"][FROZEN_LABEL], Value::Null);
        for key in RECORD_KEYS {
            assert_eq!(p["metadata"]["annotations"][key], Value::Null, "{key}");
        }
        assert_eq!(
            p["metadata"]["annotations"][crate::api::flux::annotations::RECONCILE_REQUESTED_AT],
            "t"
        );
    }
}

//! Helm's ownership check of existing objects new to a release, objects other records of
//! the same release own, and fields another field manager holds: kept, refused, or handed
//! to the release manager.

use std::collections::HashMap;

use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::Value;

use super::{Applier, Identity, Owner, Target, identity, is_unavailable, refuse_unavailable};
use crate::helm::apply::fields::{self, RELEASE_FIELD_MANAGER};
use crate::helm::apply::manifest::{
    check_ownership, helm_resource_string, owner_of, parse_manifest,
};
use crate::helm::apply::{Error, ObjectRef, is_status};

impl Applier {
    /// Helm's check before it touches anything: every object of `manifest` that already
    /// exists and is new to the release must carry the release's ownership metadata
    /// (unless `take_ownership`). Fails with Helm's message for the first one that does
    /// not. Reads only; run it before hooks and CRDs so a refusal changes nothing.
    pub async fn check_adoption(&self, manifest: &str, owner: &Owner<'_>) -> Result<Seen, Error> {
        let previous = self.previous_objects(owner).await?;
        let foreign = self.foreign_objects(owner).await?;
        let mut targets = Vec::new();
        for obj in parse_manifest(manifest)? {
            refuse_unavailable(&obj, owner)?;
            // A kind not served yet has no objects to conflict with.
            if let Some(resource) = self.resolve(&obj).await? {
                targets.push(Target::new(obj, resource, owner.namespace));
            }
        }
        // Read at once (a round trip each, on the way to a fix), judged in manifest order.
        let lives = futures::future::join_all(
            targets
                .iter()
                .map(|t| self.existing(t, owner, &previous, &foreign)),
        )
        .await;
        let mut seen = Seen::default();
        for (mut target, live) in targets.into_iter().zip(lives) {
            let live = live?;
            // Client-side apply has no conflicts: Helm's patch overwrites what it changes.
            if let Some(live) = live.as_ref().filter(|_| owner.client_side.is_none()) {
                let rendered = previous.get(&identity(&target.reference));
                settle_conflicts(&mut target, live, rendered, owner)?;
            }
            seen.0.insert(target.reference.clone(), live);
        }
        Ok(seen)
    }

    /// `target`'s live object: as `seen` has it when it has it, else read now.
    pub(super) async fn live(
        &self,
        target: &Target,
        owner: &Owner<'_>,
        previous: &HashMap<Identity, Value>,
        foreign: &HashMap<Identity, String>,
        seen: Option<&Seen>,
    ) -> Result<Option<DynamicObject>, Error> {
        match seen.and_then(|s| s.0.get(&target.reference)) {
            // Judged again as read: the checks are the same, only the read is saved.
            Some(live) => {
                if let Some(live) = live.as_ref() {
                    self.judge(target, live, owner, previous, foreign)?;
                }
                Ok(live.as_ref().cloned())
            }
            None => self.existing(target, owner, previous, foreign).await,
        }
    }

    /// The previous revision's objects by identity, as JSON, namespaces settled.
    pub(super) async fn previous_objects(
        &self,
        owner: &Owner<'_>,
    ) -> Result<HashMap<Identity, Value>, Error> {
        let mut objects = HashMap::new();
        let Some(manifest) = owner.previous_manifest else {
            return Ok(objects);
        };
        // A revision that no longer parses (written by another tool) claims nothing.
        let Ok(parsed) = parse_manifest(manifest) else {
            return Ok(objects);
        };
        for obj in parsed {
            if is_unavailable(&obj, owner) {
                continue;
            }
            if let Some(resource) = self.resolve(&obj).await? {
                let target = Target::new(obj, resource, owner.namespace);
                let value = serde_json::to_value(&target.obj).unwrap_or(Value::Null);
                objects.insert(identity(&target.reference), value);
            }
        }
        Ok(objects)
    }

    /// The objects of the other records deploying this (release name, namespace), each
    /// with who owns it.
    pub(in crate::helm::apply) async fn foreign_objects(
        &self,
        owner: &Owner<'_>,
    ) -> Result<HashMap<Identity, String>, Error> {
        let mut objects = HashMap::new();
        for other in owner.others {
            let Ok(parsed) = parse_manifest(&other.manifest) else {
                continue;
            };
            for obj in parsed {
                if is_unavailable(&obj, owner) {
                    continue;
                }
                if let Some(resource) = self.resolve(&obj).await? {
                    let target = Target::new(obj, resource, owner.namespace);
                    objects.insert(identity(&target.reference), other.describe());
                }
            }
        }
        Ok(objects)
    }

    /// The live object, if it exists, after Helm's ownership check for objects new to
    /// the release. An object another record of the same identity owns is refused
    /// whatever its metadata says (`take_ownership` included).
    pub(super) async fn existing(
        &self,
        target: &Target,
        owner: &Owner<'_>,
        previous: &HashMap<Identity, Value>,
        foreign: &HashMap<Identity, String>,
    ) -> Result<Option<DynamicObject>, Error> {
        let Some(live) = target
            .api(&self.client)
            .get_opt(target.name())
            .await
            .map_err(target.api_error("get"))?
        else {
            return Ok(None);
        };
        self.judge(target, &live, owner, previous, foreign)?;
        Ok(Some(live))
    }

    /// Helm's ownership check of an existing object (see [`Self::existing`]).
    fn judge(
        &self,
        target: &Target,
        live: &DynamicObject,
        owner: &Owner<'_>,
        previous: &HashMap<Identity, Value>,
        foreign: &HashMap<Identity, String>,
    ) -> Result<(), Error> {
        if let Some(other) = foreign.get(&identity(&target.reference)) {
            return Err(Error::Foreign {
                object: helm_resource_string(&target.reference),
                owner: other.clone(),
            });
        }
        let ours = previous.contains_key(&identity(&target.reference));
        if !ours
            && !owner.take_ownership
            && let Err(reason) = check_ownership(live, owner.release_name, owner.namespace)
        {
            return Err(Error::Ownership {
                object: helm_resource_string(&target.reference),
                reason,
                holder: holder(live),
            });
        }
        Ok(())
    }

    /// Hands the release's fields on `live` to the release manager ([`fields::migrate`]):
    /// rewrites the object's managedFields (only them), guarded by the resourceVersion
    /// they were computed from, as `csaupgrade` patches them; on a conflict (a controller
    /// wrote the object meanwhile) it reads the object again and recomputes.
    pub(super) async fn hand_over_fields(
        &self,
        target: &Target,
        mut live: DynamicObject,
        rendered: Option<&Value>,
    ) -> Result<(), Error> {
        let api = target.api(&self.client);
        let params = PatchParams {
            field_manager: Some(RELEASE_FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        for attempt in 1..=5 {
            let value = serde_json::to_value(&live).unwrap_or(Value::Null);
            let Some(managed) = fields::migrate(&value, rendered, &now()) else {
                return Ok(());
            };
            let ops = serde_json::json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": live.metadata.resource_version},
                {"op": "replace", "path": "/metadata/managedFields", "value": managed},
            ]);
            let patch = Patch::<()>::Json(serde_json::from_value(ops).expect("a JSON patch"));
            match api.patch(target.name(), &params, &patch).await {
                Ok(_) => return Ok(()),
                // A failed `test` is 422 (Invalid); a stale resourceVersion 409.
                Err(e) if attempt < 5 && (is_status(&e, 409) || is_status(&e, 422)) => {
                    match api.get_opt(target.name()).await {
                        Ok(Some(fresh)) => live = fresh,
                        Ok(None) => return Ok(()),
                        Err(e) => return Err(target.api_error("get")(e)),
                    }
                }
                Err(e) => return Err(target.api_error("hand over the fields of")(e)),
            }
        }
        Ok(())
    }
}

/// Fields of `live` another manager holds with a value other than the one rendered now
/// ([`fields::conflicts`]): where the chart renders what it rendered before, the other
/// manager keeps its value (the field leaves the object to apply; returns true when one
/// did); where the chart changed it, the apply fails naming manager and field. With
/// `force_conflicts` the release takes them all, as `helm upgrade --force-conflicts`.
pub(super) fn settle_conflicts(
    target: &mut Target,
    live: &DynamicObject,
    previous: Option<&Value>,
    owner: &Owner<'_>,
) -> Result<bool, Error> {
    if owner.force_conflicts {
        return Ok(false);
    }
    let live = serde_json::to_value(live).unwrap_or(Value::Null);
    let mut rendered = serde_json::to_value(&target.obj).unwrap_or(Value::Null);
    let found = fields::conflicts(&live, &rendered, previous);
    let changed: Vec<String> = found
        .iter()
        .filter(|c| !c.unchanged)
        .map(ToString::to_string)
        .collect();
    if !changed.is_empty() {
        return Err(Error::FieldConflict {
            object: helm_resource_string(&target.reference),
            conflicts: format!(
                "Apply failed with {} conflict(s): {} (the chart changed a field another manager holds)",
                changed.len(),
                changed.join("; ")
            ),
        });
    }
    if found.is_empty() {
        return Ok(false);
    }
    for conflict in &found {
        tracing::info!(object = %target.reference, manager = %conflict.manager, field = %conflict.path,
            "keeping another manager's value: the chart renders what it rendered before");
        fields::leave_to_them(&mut rendered, conflict);
    }
    target.obj = serde_json::from_value(rendered).map_err(|e| Error::Parse {
        origin: target.reference.to_string(),
        message: e.to_string(),
    })?;
    Ok(true)
}

/// Who an object belongs to, for messages: the Helm release its annotations name, or
/// else the field managers that wrote it.
pub(super) fn holder(obj: &DynamicObject) -> String {
    if let Some(release) = owner_of(obj) {
        return format!("owned by Helm release {release}");
    }
    let mut managers: Vec<&str> = obj
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.as_deref())
        .collect();
    managers.dedup();
    if managers.is_empty() {
        "not managed by Helm".to_string()
    } else {
        format!("not managed by Helm; written by {}", managers.join(", "))
    }
}

/// Now, as Kubernetes writes times in managedFields.
fn now() -> String {
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    serde_json::to_value(now)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The live objects an adoption check read, by reference (none: it did not exist), so
/// an apply right after it need not read them again.
#[derive(Default)]
pub struct Seen(HashMap<ObjectRef, Option<DynamicObject>>);

/// The references only: a live Secret's data must not reach a log.
impl std::fmt::Debug for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.keys()).finish()
    }
}

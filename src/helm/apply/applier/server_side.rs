//! Server-side apply of a release's objects in Helm's install order, after every kind is
//! looked up and every existing object passed the ownership check.

use std::collections::HashSet;

use kube::api::{Patch, PatchParams};

use super::crds::crd_defines;
use super::ownership::settle_conflicts;
use super::{
    Applier, Owner, Target, group_kind, identity, kind_of, refuse_unavailable, unknown_kind,
};
use crate::helm::apply::fields::RELEASE_FIELD_MANAGER;
use crate::helm::apply::manifest::{
    ObjectRef, helm_resource_string, parse_manifest, set_ownership,
};
use crate::helm::apply::order::{INSTALL_ORDER, sort_by_kind};
use crate::helm::apply::{Error, api_message, is_status};

impl Applier {
    /// Server-side applies a release object; without `force`, a field another manager
    /// holds fails the apply with the server's account of it, as in Helm 4.
    /// Applies one object; returns its generation as the API server wrote it.
    async fn apply_object(&self, target: &Target, force: bool) -> Result<Option<i64>, Error> {
        let mut params = PatchParams::apply(RELEASE_FIELD_MANAGER);
        if force {
            params = params.force();
        }
        match target
            .api(&self.client)
            .patch(target.name(), &params, &Patch::Apply(&target.obj))
            .await
        {
            Ok(applied) => Ok(applied.metadata.generation),
            Err(e) if !force && is_status(&e, 409) => Err(Error::FieldConflict {
                object: helm_resource_string(&target.reference),
                conflicts: api_message(&e),
            }),
            Err(e) => Err(target.api_error("apply")(e)),
        }
    }

    /// Helm's client-side update of one object (`--server-side=false`): created when it
    /// does not exist; else replaced (with `--force`), or patched with Helm's three-way
    /// patch from the object as the current revision rendered it (`rendered`; else as it
    /// is live, as Helm does), and nothing is sent when that patch is empty. Returns its
    /// generation as written.
    async fn apply_client_side(
        &self,
        target: &Target,
        client_side: super::ClientSide<'_>,
        live: Option<kube::api::DynamicObject>,
        rendered: Option<&serde_json::Value>,
        owner: &Owner<'_>,
    ) -> Result<Option<i64>, Error> {
        let api = target.api(&self.client);
        let post = kube::api::PostParams {
            field_manager: Some(RELEASE_FIELD_MANAGER.to_string()),
            ..kube::api::PostParams::default()
        };
        let Some(live) = live else {
            let created = api
                .create(&post, &target.obj)
                .await
                .map_err(target.api_error("create"))?;
            return Ok(created.metadata.generation);
        };
        if owner.replace {
            let mut obj = target.obj.clone();
            obj.metadata.resource_version = live.metadata.resource_version.clone();
            let replaced = api
                .replace(target.name(), &post, &obj)
                .await
                .map_err(target.api_error("replace"))?;
            return Ok(replaced.metadata.generation);
        }
        let current = serde_json::to_value(&live).unwrap_or_default();
        let modified = serde_json::to_value(&target.obj).unwrap_or_default();
        let original = rendered.cloned().unwrap_or_else(|| current.clone());
        // Helm's install that takes objects over merges custom resources three-way too.
        let three_way = owner.take_ownership && owner.previous_manifest.is_none();
        let patch = client_side
            .0
            .patch(&original, &modified, &current, three_way)
            .await
            .map_err(|why| Error::ClientSidePatch {
                object: helm_resource_string(&target.reference),
                why,
            })?;
        if patch.is_empty() {
            return Ok(live.metadata.generation);
        }
        let params = PatchParams {
            field_manager: Some(RELEASE_FIELD_MANAGER.to_string()),
            ..PatchParams::default()
        };
        let sent = match patch.kind {
            crate::helm::apply::client_side::PatchKind::Strategic => {
                api.patch(target.name(), &params, &Patch::Strategic(&patch.body))
                    .await
            }
            crate::helm::apply::client_side::PatchKind::Merge => {
                api.patch(target.name(), &params, &Patch::Merge(&patch.body))
                    .await
            }
        };
        Ok(sent.map_err(target.api_error("patch"))?.metadata.generation)
    }

    /// Returns the UID of the applied object.
    pub(in crate::helm::apply) async fn server_side_apply(
        &self,
        target: &Target,
    ) -> Result<Option<String>, Error> {
        let params = PatchParams::apply(RELEASE_FIELD_MANAGER).force();
        let applied = target
            .api(&self.client)
            .patch(target.name(), &params, &Patch::Apply(&target.obj))
            .await
            .map_err(target.api_error("apply"))?;
        Ok(applied.metadata.uid)
    }

    /// Server-side applies every object of `manifest` for a new release that takes
    /// nothing over; see [`Applier::apply_release`].
    pub async fn apply(
        &self,
        manifest: &str,
        namespace: &str,
        release_name: &str,
    ) -> Result<Vec<ObjectRef>, Error> {
        self.apply_release(manifest, &Owner::new(release_name, namespace))
            .await
    }

    /// Server-side applies every object of `manifest` (field manager `helm`, conflicts
    /// forced: the release owns the fields it renders) in Helm's install order, with the
    /// label and annotations by which Helm recognises the release's objects.
    ///
    /// Before anything is sent: every kind is looked up, so an unknown kind fails the
    /// whole apply up front as in Helm (kinds defined by a CRD in the same manifest are
    /// looked up once that CRD is served); every existing object new to the release must
    /// pass Helm's ownership check; and fields the release rendered before but that
    /// another field manager holds are handed to the release manager, so that a field the
    /// new manifest drops is removed, as `helm upgrade` removes it
    /// ([`fields::migrate`](crate::helm::apply::fields::migrate)).
    pub async fn apply_release(
        &self,
        manifest: &str,
        owner: &Owner<'_>,
    ) -> Result<Vec<ObjectRef>, Error> {
        Ok(self.apply_release_timed(manifest, owner).await?.objects)
    }

    /// [`Applier::apply_release`], also saying when the API server wrote the first object
    /// and each object's generation as written.
    pub async fn apply_release_timed(
        &self,
        manifest: &str,
        owner: &Owner<'_>,
    ) -> Result<Applied, Error> {
        self.apply_release_seen(manifest, owner, None).await
    }

    /// [`Applier::apply_release_timed`], with the live objects an adoption check of the
    /// same manifest read just before (nothing ran on the cluster in between but storing
    /// the revision): they are judged again without being read again.
    pub async fn apply_release_seen(
        &self,
        manifest: &str,
        owner: &Owner<'_>,
        seen: Option<&super::ownership::Seen>,
    ) -> Result<Applied, Error> {
        let namespace = owner.namespace;
        let mut objects = parse_manifest(manifest)?;
        sort_by_kind(&mut objects, kind_of, INSTALL_ORDER);
        let defined_here: HashSet<(String, String)> =
            objects.iter().filter_map(crd_defines).collect();

        let mut planned = Vec::with_capacity(objects.len());
        let mut awaited_kinds = HashSet::new();
        for obj in objects {
            refuse_unavailable(&obj, owner)?;
            let resource = self.resolve(&obj).await?;
            if resource.is_none() {
                let defined = group_kind(&obj);
                if !defined_here.contains(&defined) {
                    return Err(unknown_kind(&obj));
                }
                awaited_kinds.insert(defined);
            }
            planned.push((obj, resource));
        }

        let previous = self.previous_objects(owner).await?;
        let foreign = self.foreign_objects(owner).await?;
        // The live objects read at once, then judged in install order.
        let targets: Vec<Option<Target>> = planned
            .iter()
            .map(|(obj, resource)| {
                let resource = resource.as_ref()?;
                Some(Target::new(obj.clone(), resource.clone(), namespace))
            })
            .collect();
        let lives = futures::future::join_all(targets.iter().map(|t| async {
            match t {
                Some(t) => self.live(t, owner, &previous, &foreign, seen).await,
                None => Ok(None),
            }
        }))
        .await;
        // Client-side: the live objects the patches are computed from.
        let mut live_objects = std::collections::HashMap::new();
        for (((obj, _), target), live) in planned.iter_mut().zip(targets).zip(lives) {
            let (Some(mut target), Some(live)) = (target, live?) else {
                continue;
            };
            if owner.client_side.is_some() {
                // Helm's client-side update hands no field over: its patch changes only
                // what the two renders (and the live object) differ in.
                live_objects.insert(identity(&target.reference), live);
                continue;
            }
            let rendered = previous.get(&identity(&target.reference));
            if settle_conflicts(&mut target, &live, rendered, owner)? {
                *obj = target.obj.clone();
            }
            self.hand_over_fields(&target, live, rendered).await?;
        }

        let mut applied = Vec::with_capacity(planned.len());
        let mut first_written = None;
        let mut generations = std::collections::HashMap::new();
        for (mut obj, resource) in planned {
            let resource = match resource {
                Some(resource) => resource,
                // Its CRD sorts earlier and was waited for below.
                None => self
                    .resolve(&obj)
                    .await?
                    .ok_or_else(|| unknown_kind(&obj))?,
            };
            set_ownership(&mut obj, owner.release_name, namespace);
            let target = Target::new(obj, resource, namespace);
            let generation = match owner.client_side {
                Some(client_side) => {
                    let key = identity(&target.reference);
                    let live = match live_objects.remove(&key) {
                        Some(live) => Some(live),
                        // Not read above: its kind was served only once its CRD was.
                        None => target
                            .api(&self.client)
                            .get_opt(target.name())
                            .await
                            .map_err(target.api_error("read"))?,
                    };
                    self.apply_client_side(&target, client_side, live, previous.get(&key), owner)
                        .await?
                }
                None => self.apply_object(&target, owner.force_conflicts).await?,
            };
            first_written.get_or_insert_with(std::time::Instant::now);
            generations.insert(target.reference.clone(), generation);
            if crd_defines(&target.obj).is_some_and(|gk| awaited_kinds.contains(&gk)) {
                self.wait_crd_served(&target.obj).await?;
            }
            applied.push(target.reference);
        }
        Ok(Applied {
            objects: applied,
            first_written,
            generations,
        })
    }
}

/// What [`Applier::apply_release_timed`] wrote.
pub struct Applied {
    pub objects: Vec<ObjectRef>,
    /// When the API server wrote the first object (none: nothing to write).
    pub first_written: Option<std::time::Instant>,
    /// Each object's generation as the apply left it (none: its kind keeps none), so a
    /// wait that follows needs no read.
    pub generations: std::collections::HashMap<ObjectRef, Option<i64>>,
}

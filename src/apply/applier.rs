//! [`Applier`]: discovery, server-side apply, prune, delete and the chart's CRDs.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ObjectMeta, Patch, PatchParams, PostParams};
use kube::core::GroupVersion;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::Value;

use super::fields::{self, RELEASE_FIELD_MANAGER};
use super::manifest::{
    ObjectRef, check_ownership, has_keep_policy, helm_resource_string, owner_of, parse_manifest,
    set_ownership,
};
use super::order::{INSTALL_ORDER, UNINSTALL_ORDER, sort_by_kind};
use super::{Error, is_status};
use crate::api::CrdPolicy;
use crate::release::Elsewhere;

/// Whose objects an apply, prune or uninstall works on, and what it may take over.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    pub release_name: &'a str,
    /// The release namespace: where namespaced objects without one go, and the value of
    /// `meta.helm.sh/release-namespace`.
    pub namespace: &'a str,
    /// The manifest of the release's newest stored revision. Its objects belong to the
    /// release already; only objects new to the release face Helm's ownership check.
    pub previous_manifest: Option<&'a str>,
    /// Helm 4's `--take-ownership`: adopt existing objects whatever their ownership
    /// metadata says.
    pub take_ownership: bool,
    /// Other records deploying the same (release name, namespace) from another storage
    /// namespace: their objects carry the same ownership metadata but are never ours.
    pub others: &'a [Elsewhere],
    /// Helm 4's `--force-conflicts`: overwrite fields other managers hold.
    pub force_conflicts: bool,
    /// API `group/version`s discovery cannot serve now: while any is missing, the render
    /// may lack what it renders only when they are served, so prune deletes nothing.
    pub unavailable: &'a [String],
}

impl<'a> Owner<'a> {
    /// A release with no previous revision that takes over nothing.
    pub fn new(release_name: &'a str, namespace: &'a str) -> Self {
        Self {
            release_name,
            namespace,
            previous_manifest: None,
            take_ownership: false,
            others: &[],
            force_conflicts: false,
            unavailable: &[],
        }
    }

    pub fn unavailable(mut self, unavailable: &'a [String]) -> Self {
        self.unavailable = unavailable;
        self
    }

    pub fn force_conflicts(mut self, force: bool) -> Self {
        self.force_conflicts = force;
        self
    }

    pub fn others(mut self, others: &'a [Elsewhere]) -> Self {
        self.others = others;
        self
    }

    pub fn previous(mut self, manifest: Option<&'a str>) -> Self {
        self.previous_manifest = manifest;
        self
    }

    pub fn take_ownership(mut self, take: bool) -> Self {
        self.take_ownership = take;
        self
    }
}

/// What a prune or uninstall did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Removed {
    /// Objects deleted (deletion propagates in the background).
    pub deleted: Vec<ObjectRef>,
    /// Objects left in place because their ownership metadata no longer names this
    /// release, with who they belong to now.
    pub foreign: Vec<(ObjectRef, String)>,
    /// Objects the new render dropped, left in place because discovery was incomplete,
    /// with the groups it was missing.
    pub kept_for_discovery: Vec<ObjectRef>,
    pub missing_groups: Vec<String>,
}

impl Removed {
    /// A sentence about the objects kept because discovery was incomplete.
    pub fn discovery_note(&self) -> Option<String> {
        (!self.kept_for_discovery.is_empty()).then(|| {
            let list: Vec<String> = self.kept_for_discovery.iter().map(ToString::to_string).collect();
            let services: Vec<String> = self
                .missing_groups
                .iter()
                .map(|g| crate::render::apiservice_of(g))
                .collect();
            format!(
                "left in place, not pruned, while the API server's discovery is incomplete ({} unavailable: APIService {}): {}; they go on the first upgrade after it is whole",
                self.missing_groups.join(", "),
                services.join(", "),
                list.join(", ")
            )
        })
    }

    /// A sentence about the objects left alone, for descriptions and Events.
    pub fn foreign_note(&self) -> Option<String> {
        (!self.foreign.is_empty()).then(|| {
            let list: Vec<String> = self
                .foreign
                .iter()
                .map(|(o, owner)| format!("{o} ({owner})"))
                .collect();
            format!(
                "left in place because they belong to someone else: {}",
                list.join(", ")
            )
        })
    }
}

/// How long a CustomResourceDefinition may take to become Established (and served), as
/// Helm waits for the CRDs of a chart's `crds/` directory.
pub const CRD_ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);

const CRD_KIND: &str = "CustomResourceDefinition";
const CRD_GROUP: &str = "apiextensions.k8s.io";

/// Applies, prunes and deletes the objects of rendered manifests, and runs hooks.
///
/// Holds a kube client and a cache of API discovery. The cache is filled per group
/// version on first use and refreshed when a kind is missing from it, so objects of a CRD
/// installed a moment ago are found.
pub struct Applier {
    pub(super) client: Client,
    /// apiVersion → the resources it serves.
    discovery: Mutex<HashMap<String, Vec<(ApiResource, ApiCapabilities)>>>,
}

/// An object ready for the API: its resource known and its namespace settled.
pub(super) struct Target {
    pub obj: DynamicObject,
    pub resource: ApiResource,
    pub namespaced: bool,
    pub reference: ObjectRef,
}

impl Target {
    /// Namespaced kinds without a namespace get `default_namespace`; cluster-scoped kinds
    /// lose any namespace they were given (the API server would ignore it anyway).
    pub(super) fn new(
        mut obj: DynamicObject,
        (resource, namespaced): (ApiResource, bool),
        default_namespace: &str,
    ) -> Self {
        if !namespaced {
            obj.metadata.namespace = None;
        } else if obj.metadata.namespace.as_deref().is_none_or(str::is_empty) {
            obj.metadata.namespace = Some(default_namespace.to_string());
        }
        let reference = ObjectRef::from_object(&obj);
        Self {
            obj,
            resource,
            namespaced,
            reference,
        }
    }

    pub fn api(&self, client: &Client) -> Api<DynamicObject> {
        match (&self.reference.namespace, self.namespaced) {
            (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &self.resource),
            _ => Api::all_with(client.clone(), &self.resource),
        }
    }

    fn name(&self) -> &str {
        &self.reference.name
    }

    fn api_error(&self, action: &'static str) -> impl FnOnce(kube::Error) -> Error + '_ {
        move |source| Error::Api {
            action,
            object: self.reference.to_string(),
            source,
        }
    }
}

fn kind_of(obj: &DynamicObject) -> &str {
    obj.types.as_ref().map_or("", |t| t.kind.as_str())
}

fn unknown_kind(obj: &DynamicObject) -> Error {
    let reference = ObjectRef::from_object(obj);
    Error::UnknownKind {
        object: reference.to_string(),
        api_version: reference.api_version,
        kind: reference.kind,
    }
}

/// For a CustomResourceDefinition: the group and kind it defines.
fn crd_defines(obj: &DynamicObject) -> Option<(String, String)> {
    let reference = ObjectRef::from_object(obj);
    if reference.kind != CRD_KIND || reference.group() != CRD_GROUP {
        return None;
    }
    let spec = obj.data.get("spec")?;
    let group = spec.get("group")?.as_str()?;
    let kind = spec.pointer("/names/kind")?.as_str()?;
    Some((group.to_string(), kind.to_string()))
}

fn group_kind(obj: &DynamicObject) -> (String, String) {
    let reference = ObjectRef::from_object(obj);
    (reference.group().to_string(), reference.kind)
}

pub(super) type Identity = (String, String, Option<String>, String);

pub(super) fn identity(reference: &ObjectRef) -> Identity {
    let (group, kind, namespace, name) = reference.identity();
    (
        group.to_string(),
        kind.to_string(),
        namespace.map(str::to_string),
        name.to_string(),
    )
}

impl Applier {
    pub fn new(client: Client) -> Self {
        Self {
            client,
            discovery: Mutex::new(HashMap::new()),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The API resource serving `kind` in `api_version` and whether it is namespaced;
    /// `None` when no API serves it (after asking the server again).
    pub async fn find_resource(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<(ApiResource, bool)>, Error> {
        let pick = |resources: &[(ApiResource, ApiCapabilities)]| {
            resources
                .iter()
                .find(|(resource, _)| resource.kind == kind)
                .map(|(resource, caps)| (resource.clone(), caps.scope == Scope::Namespaced))
        };
        if let Some(found) = self
            .discovery
            .lock()
            .unwrap()
            .get(api_version)
            .and_then(|resources| pick(resources))
        {
            return Ok(Some(found));
        }

        // A miss (or a group version not seen yet): ask the server.
        let Ok(gv) = api_version.parse::<GroupVersion>() else {
            return Ok(None);
        };
        let resources = match discovery::pinned_group(&self.client, &gv).await {
            Ok(group) => group.versioned_resources(&gv.version),
            Err(e) if is_status(&e, 404) => Vec::new(),
            Err(source) => {
                return Err(Error::Discovery {
                    api_version: api_version.to_string(),
                    source,
                });
            }
        };
        let found = pick(&resources);
        self.discovery
            .lock()
            .unwrap()
            .insert(api_version.to_string(), resources);
        Ok(found)
    }

    /// The API resource of `obj`'s kind, None when discovery does not serve it.
    pub(super) async fn resolve_kind(
        &self,
        obj: &DynamicObject,
    ) -> Result<Option<(ApiResource, bool)>, Error> {
        self.resolve(obj).await
    }

    async fn resolve(&self, obj: &DynamicObject) -> Result<Option<(ApiResource, bool)>, Error> {
        let reference = ObjectRef::from_object(obj);
        self.find_resource(&reference.api_version, &reference.kind)
            .await
    }

    pub(super) async fn target(
        &self,
        obj: DynamicObject,
        namespace: &str,
    ) -> Result<Target, Error> {
        match self.resolve(&obj).await? {
            Some(resource) => Ok(Target::new(obj, resource, namespace)),
            None => Err(unknown_kind(&obj)),
        }
    }

    /// The objects of a manifest as the API sees them: namespaced kinds without a
    /// namespace in `namespace`, cluster-scoped ones without any. For callers that watch
    /// or inspect a release's objects.
    pub async fn objects(&self, manifest: &str, namespace: &str) -> Result<Vec<ObjectRef>, Error> {
        let mut refs = Vec::new();
        for obj in parse_manifest(manifest)? {
            refs.push(self.target(obj, namespace).await?.reference);
        }
        Ok(refs)
    }

    /// Creates the release namespace if it does not exist (`install.createNamespace`),
    /// labelled `name: <namespace>` as Helm does.
    pub async fn ensure_namespace(&self, namespace: &str) -> Result<(), Error> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let api_error = |action| {
            move |source| Error::Api {
                action,
                object: format!("Namespace/{namespace}"),
                source,
            }
        };
        if api
            .get_opt(namespace)
            .await
            .map_err(api_error("get"))?
            .is_some()
        {
            return Ok(());
        }
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(namespace.to_string()),
                labels: Some([("name".to_string(), namespace.to_string())].into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        match api.create(&post_params(), &ns).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 409) => Ok(()),
            Err(e) => Err(api_error("create")(e)),
        }
    }

    /// Installs the CustomResourceDefinitions of a chart's `crds/` directory (one string
    /// per file, each may hold several documents) and waits until they are Established
    /// and served. `Skip` does nothing; `Create` creates the missing ones and leaves
    /// existing ones alone; `CreateReplace` server-side applies all of them. Returns the
    /// CRDs created or applied. Anything but a CRD in `crds/` is an error.
    pub async fn apply_crds(
        &self,
        crd_docs: &[String],
        policy: CrdPolicy,
    ) -> Result<Vec<ObjectRef>, Error> {
        if policy == CrdPolicy::Skip {
            return Ok(Vec::new());
        }
        let mut objects = Vec::new();
        for doc in crd_docs {
            objects.extend(parse_manifest(doc)?);
        }
        let mut installed = Vec::new();
        for obj in objects {
            if crd_defines(&obj).is_none() {
                return Err(Error::Parse {
                    origin: "crds/".to_string(),
                    message: format!(
                        "{} is not a CustomResourceDefinition (with spec.group and spec.names.kind)",
                        ObjectRef::from_object(&obj)
                    ),
                });
            }
            let target = self.target(obj, "").await?;
            let api = target.api(&self.client);
            match policy {
                CrdPolicy::Skip => unreachable!("returned above"),
                CrdPolicy::Create => match api.create(&post_params(), &target.obj).await {
                    Ok(_) => {}
                    Err(e) if is_status(&e, 409) => continue,
                    Err(e) => return Err(target.api_error("create")(e)),
                },
                CrdPolicy::CreateReplace => {
                    self.server_side_apply(&target).await?;
                }
            }
            installed.push(target);
        }
        for target in &installed {
            self.wait_crd_served(&target.obj).await?;
        }
        Ok(installed.into_iter().map(|t| t.reference).collect())
    }

    /// Waits until a CRD is Established and discovery serves its kind, so objects of it
    /// can be applied next.
    async fn wait_crd_served(&self, crd: &DynamicObject) -> Result<(), Error> {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let timed_out = || Error::CrdNotEstablished {
            name: name.clone(),
            timeout: CRD_ESTABLISH_TIMEOUT,
        };
        let deadline = tokio::time::Instant::now() + CRD_ESTABLISH_TIMEOUT;
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        match tokio::time::timeout_at(
            deadline,
            await_condition(api, &name, conditions::is_crd_established()),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(Error::Watch {
                    object: format!("CustomResourceDefinition/{name}"),
                    message: e.to_string(),
                });
            }
            Err(_) => return Err(timed_out()),
        }

        // Discovery catches up with an Established CRD a moment later.
        let Some((group, kind)) = crd_defines(crd) else {
            return Ok(());
        };
        let version = crd
            .data
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .and_then(|versions| {
                versions
                    .iter()
                    .find(|v| v.get("served").and_then(Value::as_bool) != Some(false))
            })
            .and_then(|v| v.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let api_version = format!("{group}/{version}");
        while self.find_resource(&api_version, &kind).await?.is_none() {
            if tokio::time::Instant::now() >= deadline {
                return Err(timed_out());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Server-side applies a release object; without `force`, a field another manager
    /// holds fails the apply with the server's account of it, as in Helm 4.
    async fn apply_object(&self, target: &Target, force: bool) -> Result<(), Error> {
        if force {
            return self.server_side_apply(target).await.map(drop);
        }
        let params = PatchParams::apply(RELEASE_FIELD_MANAGER);
        match target
            .api(&self.client)
            .patch(target.name(), &params, &Patch::Apply(&target.obj))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 409) => Err(Error::FieldConflict {
                object: helm_resource_string(&target.reference),
                conflicts: super::api_message(&e),
            }),
            Err(e) => Err(target.api_error("apply")(e)),
        }
    }

    /// Returns the UID of the applied object.
    pub(super) async fn server_side_apply(&self, target: &Target) -> Result<Option<String>, Error> {
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

    /// Helm's check before it touches anything: every object of `manifest` that already
    /// exists and is new to the release must carry the release's ownership metadata
    /// (unless `take_ownership`). Fails with Helm's message for the first one that does
    /// not. Reads only; run it before hooks and CRDs so a refusal changes nothing.
    pub async fn check_adoption(&self, manifest: &str, owner: &Owner<'_>) -> Result<(), Error> {
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
        for (mut target, live) in targets.into_iter().zip(lives) {
            if let Some(live) = live? {
                let rendered = previous.get(&identity(&target.reference));
                settle_conflicts(&mut target, &live, rendered, owner)?;
            }
        }
        Ok(())
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
    /// new manifest drops is removed, as `helm upgrade` removes it ([`fields::migrate`]).
    pub async fn apply_release(
        &self,
        manifest: &str,
        owner: &Owner<'_>,
    ) -> Result<Vec<ObjectRef>, Error> {
        Ok(self.apply_release_timed(manifest, owner).await?.0)
    }

    /// [`Applier::apply_release`], also saying when the API server wrote the first object
    /// (none when there was nothing to write).
    pub async fn apply_release_timed(
        &self,
        manifest: &str,
        owner: &Owner<'_>,
    ) -> Result<(Vec<ObjectRef>, Option<std::time::Instant>), Error> {
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
                Some(t) => self.existing(t, owner, &previous, &foreign).await,
                None => Ok(None),
            }
        }))
        .await;
        for (((obj, _), target), live) in planned.iter_mut().zip(targets).zip(lives) {
            let (Some(mut target), Some(live)) = (target, live?) else {
                continue;
            };
            let rendered = previous.get(&identity(&target.reference));
            if settle_conflicts(&mut target, &live, rendered, owner)? {
                *obj = target.obj.clone();
            }
            self.hand_over_fields(&target, live, rendered).await?;
        }

        let mut applied = Vec::with_capacity(planned.len());
        let mut first_written = None;
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
            self.apply_object(&target, owner.force_conflicts).await?;
            first_written.get_or_insert_with(std::time::Instant::now);
            if crd_defines(&target.obj).is_some_and(|gk| awaited_kinds.contains(&gk)) {
                self.wait_crd_served(&target.obj).await?;
            }
            applied.push(target.reference);
        }
        Ok((applied, first_written))
    }

    /// The previous revision's objects by identity, as JSON, namespaces settled.
    async fn previous_objects(&self, owner: &Owner<'_>) -> Result<HashMap<Identity, Value>, Error> {
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
    pub(super) async fn foreign_objects(
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
    async fn existing(
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
        if let Some(other) = foreign.get(&identity(&target.reference)) {
            return Err(Error::Foreign {
                object: helm_resource_string(&target.reference),
                owner: other.clone(),
            });
        }
        let ours = previous.contains_key(&identity(&target.reference));
        if !ours
            && !owner.take_ownership
            && let Err(reason) = check_ownership(&live, owner.release_name, owner.namespace)
        {
            return Err(Error::Ownership {
                object: helm_resource_string(&target.reference),
                reason,
                holder: holder(&live),
            });
        }
        Ok(Some(live))
    }

    /// Hands the release's fields on `live` to the release manager ([`fields::migrate`]):
    /// rewrites the object's managedFields (only them), guarded by the resourceVersion
    /// they were computed from, as `csaupgrade` patches them; on a conflict (a controller
    /// wrote the object meanwhile) it reads the object again and recomputes.
    async fn hand_over_fields(
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

    /// Deletes the objects of `old_manifest` that `new_manifest` no longer has (same
    /// group, kind, namespace and name), in Helm's uninstall order, except those annotated
    /// `helm.sh/resource-policy: keep` in the old manifest or in the cluster, and those
    /// whose ownership metadata no longer names this release (someone else has them now).
    /// Deletion propagates in the background and is not waited for.
    pub async fn prune(
        &self,
        old_manifest: &str,
        new_manifest: &str,
        owner: &Owner<'_>,
    ) -> Result<Removed, Error> {
        let namespace = owner.namespace;
        let mut wanted = HashSet::new();
        for obj in parse_manifest(new_manifest)? {
            if is_unavailable(&obj, owner) {
                continue;
            }
            let reference = match self.resolve(&obj).await? {
                Some(resource) => Target::new(obj, resource, namespace).reference,
                // Not served (yet): the namespace as written or defaulted is the best guess,
                // and such an object cannot match a served one anyway.
                None => {
                    let mut reference = ObjectRef::from_object(&obj);
                    reference
                        .namespace
                        .get_or_insert_with(|| namespace.to_string());
                    reference
                }
            };
            wanted.insert(identity(&reference));
        }

        let mut stale = Vec::new();
        for obj in parse_manifest(old_manifest)? {
            // Nothing of a group discovery cannot serve now is touched.
            if is_unavailable(&obj, owner) {
                continue;
            }
            // A kind no longer served has no objects left to delete.
            if let Some(resource) = self.resolve(&obj).await? {
                let target = Target::new(obj, resource, namespace);
                if !wanted.contains(&identity(&target.reference)) {
                    stale.push(target);
                }
            }
        }
        if owner.unavailable.is_empty() {
            return self.delete_targets(stale, owner).await;
        }
        // The render may have dropped them only because a group was not discovered: they
        // stay. Except the broken APIService itself, whose removal is the fix.
        let (fix, kept): (Vec<Target>, Vec<Target>) = stale
            .into_iter()
            .partition(|t| serves_unavailable(&t.obj, owner));
        let mut removed = self.delete_targets(fix, owner).await?;
        removed.kept_for_discovery = kept.into_iter().map(|t| t.reference).collect();
        removed.missing_groups = owner.unavailable.to_vec();
        Ok(removed)
    }

    /// Uninstalls the objects of `manifest` in Helm's uninstall order, except those
    /// annotated `helm.sh/resource-policy: keep` (in the manifest or in the cluster) and
    /// those whose ownership metadata names another release (as Helm's
    /// `verifyOwnershipBeforeDelete`). Objects already gone, or of kinds no longer served,
    /// are skipped. Deletion propagates in the background and is not waited for.
    pub async fn delete(&self, manifest: &str, owner: &Owner<'_>) -> Result<Removed, Error> {
        let mut targets = Vec::new();
        for obj in parse_manifest(manifest)? {
            if is_unavailable(&obj, owner) {
                continue;
            }
            if let Some(resource) = self.resolve(&obj).await? {
                targets.push(Target::new(obj, resource, owner.namespace));
            }
        }
        self.delete_targets(targets, owner).await
    }

    async fn delete_targets(
        &self,
        mut targets: Vec<Target>,
        owner: &Owner<'_>,
    ) -> Result<Removed, Error> {
        sort_by_kind(&mut targets, |t| t.reference.kind.as_str(), UNINSTALL_ORDER);
        let foreign = self.foreign_objects(owner).await?;
        let mut removed = Removed::default();
        for target in targets {
            let deletion = match foreign.get(&identity(&target.reference)) {
                Some(other) => Deletion::Foreign(format!("belongs to {other}")),
                None => self.delete_if_ours(&target, owner).await?,
            };
            match deletion {
                Deletion::Deleted => removed.deleted.push(target.reference),
                Deletion::Foreign(holder) => {
                    tracing::warn!(object = %target.reference, %holder, release = owner.release_name,
                        "not deleting an object that no longer belongs to this release");
                    removed.foreign.push((target.reference, holder));
                }
                Deletion::Skipped => {}
            }
        }
        Ok(removed)
    }

    /// Deletes one object unless it is kept, gone, or no longer this release's.
    async fn delete_if_ours(&self, target: &Target, owner: &Owner<'_>) -> Result<Deletion, Error> {
        if has_keep_policy(&target.obj) {
            return Ok(Deletion::Skipped);
        }
        let api = target.api(&self.client);
        match api.get_opt(target.name()).await {
            Ok(Some(live)) if has_keep_policy(&live) => return Ok(Deletion::Skipped),
            Ok(Some(live)) => {
                if check_ownership(&live, owner.release_name, owner.namespace).is_err() {
                    return Ok(Deletion::Foreign(holder(&live)));
                }
            }
            Ok(None) => return Ok(Deletion::Skipped),
            Err(e) => return Err(target.api_error("get")(e)),
        }
        match api.delete(target.name(), &DeleteParams::background()).await {
            Ok(_) => Ok(Deletion::Deleted),
            Err(e) if is_status(&e, 404) => Ok(Deletion::Skipped),
            Err(e) => Err(target.api_error("delete")(e)),
        }
    }

    /// Deletes an object and waits until it is gone (or replaced by a new one of the
    /// same name), within `timeout`.
    pub(super) async fn delete_and_wait(
        &self,
        target: &Target,
        timeout: Duration,
    ) -> Result<(), Error> {
        let api = target.api(&self.client);
        let uid = match api.delete(target.name(), &DeleteParams::background()).await {
            Ok(deleted) => deleted.left().and_then(|obj| obj.metadata.uid),
            Err(e) if is_status(&e, 404) => return Ok(()),
            Err(e) => return Err(target.api_error("delete")(e)),
        };
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match api.get_opt(target.name()).await {
                Ok(None) => return Ok(()),
                Ok(Some(live)) if uid.is_some() && live.metadata.uid != uid => return Ok(()),
                Ok(Some(_)) => {}
                Err(e) => return Err(target.api_error("get")(e)),
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::DeleteTimedOut {
                    object: target.reference.to_string(),
                    timeout,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Fields of `live` another manager holds with a value other than the one rendered now
/// ([`fields::conflicts`]): where the chart renders what it rendered before, the other
/// manager keeps its value (the field leaves the object to apply; returns true when one
/// did); where the chart changed it, the apply fails naming manager and field. With
/// `force_conflicts` the release takes them all, as `helm upgrade --force-conflicts`.
fn settle_conflicts(
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

/// Whether `obj` is of an API group discovery cannot serve now: it can be neither read
/// nor deleted, and is left alone.
impl Owner<'_> {
    /// Whether `obj`'s group/version is one discovery cannot serve now.
    pub(super) fn is_unavailable(&self, obj: &DynamicObject) -> bool {
        is_unavailable(obj, self)
    }
}

fn is_unavailable(obj: &DynamicObject, owner: &Owner<'_>) -> bool {
    let api_version = obj.types.as_ref().map_or("", |t| t.api_version.as_str());
    owner.unavailable.iter().any(|g| g == api_version)
}

/// Whether `obj` is the APIService of a group discovery cannot serve now.
fn serves_unavailable(obj: &DynamicObject, owner: &Owner<'_>) -> bool {
    let reference = ObjectRef::from_object(obj);
    if reference.kind != "APIService" || reference.group() != "apiregistration.k8s.io" {
        return false;
    }
    let spec = obj.data.get("spec");
    let field = |k: &str| {
        spec.and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let served = format!("{}/{}", field("group"), field("version"));
    owner.unavailable.contains(&served)
}

/// An object of the release's own manifest that discovery cannot serve fails the action,
/// naming the group and its APIService, before anything is applied.
fn refuse_unavailable(obj: &DynamicObject, owner: &Owner<'_>) -> Result<(), Error> {
    if !is_unavailable(obj, owner) {
        return Ok(());
    }
    let reference = ObjectRef::from_object(obj);
    Err(Error::Unavailable {
        object: reference.to_string(),
        apiservice: crate::render::apiservice_of(&reference.api_version),
        group_version: reference.api_version,
    })
}

enum Deletion {
    Deleted,
    /// Kept, or already gone.
    Skipped,
    Foreign(String),
}

/// Who an object belongs to, for messages: the Helm release its annotations name, or
/// else the field managers that wrote it.
fn holder(obj: &DynamicObject) -> String {
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

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(RELEASE_FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The engine spawns these on a multi-threaded runtime: they must be `Send`.
    #[allow(dead_code)] // compiled, never run
    fn futures_are_send(applier: &Applier, hooks: &mut [crate::release::Hook]) {
        fn send<T: Send>(_: T) {}
        let owner = Owner::new("", "");
        send(applier.apply("", "", ""));
        send(applier.apply_release("", &owner));
        send(applier.check_adoption("", &owner));
        send(applier.prune("", "", &owner));
        send(applier.delete("", &owner));
        send(applier.objects("", ""));
        send(applier.apply_crds(&[], CrdPolicy::Create));
        send(applier.ensure_namespace(""));
        send(applier.run_hooks(hooks, "", "", Duration::ZERO));
    }

    #[test]
    fn crd_defines_reads_group_and_kind() {
        let crd: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "names": {"kind": "Widget", "plural": "widgets"}}
        }))
        .unwrap();
        assert_eq!(
            crd_defines(&crd),
            Some(("example.com".to_string(), "Widget".to_string()))
        );
        let other: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "example.com/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "x"}, "spec": {"group": "g", "names": {"kind": "K"}}
        }))
        .unwrap();
        assert_eq!(crd_defines(&other), None);
    }
}

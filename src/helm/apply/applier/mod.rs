//! [`Applier`]: discovery, server-side apply, prune, delete and the chart's CRDs.
//!
//! By job: what every part shares (`mod.rs`: whose objects, discovery, targets, groups
//! discovery cannot serve), the chart's CRDs (`crds.rs`), the apply of a release's
//! objects (`server_side.rs`), Helm's ownership check and the hand-over of fields between
//! managers (`ownership.rs`), and prune and delete (`removal.rs`).

mod crds;
mod ownership;
mod removal;
mod server_side;

pub use ownership::Seen;
pub use server_side::Applied;

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DynamicObject, ObjectMeta, PostParams};
use kube::core::GroupVersion;
use kube::discovery::{self, ApiCapabilities, ApiResource, Scope};
use serde_json::Value;

use super::fields::RELEASE_FIELD_MANAGER;
use super::manifest::{ObjectRef, parse_manifest};
use super::{Error, is_status};
use crate::helm::release::Elsewhere;

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
    /// Helm's client-side apply (`--server-side=false`): new objects are created, existing
    /// ones get Helm's three-way patch, computed by this. `None`: server-side apply.
    pub client_side: Option<ClientSide<'a>>,
    /// With client-side apply, Helm's `--force`: existing objects are replaced (a PUT of
    /// the rendered object) instead of patched.
    pub replace: bool,
}

/// What computes client-side apply's patches (see [`Owner::client_side`]).
#[derive(Clone, Copy)]
pub struct ClientSide<'a>(pub &'a dyn crate::helm::apply::client_side::ClientSidePatcher);

impl std::fmt::Debug for ClientSide<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientSide")
    }
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
            client_side: None,
            replace: false,
        }
    }

    /// Applies client-side, as `helm upgrade --server-side=false` does; `replace`: as
    /// with `--force`.
    pub fn client_side(
        mut self,
        patcher: &'a dyn crate::helm::apply::client_side::ClientSidePatcher,
        replace: bool,
    ) -> Self {
        self.client_side = Some(ClientSide(patcher));
        self.replace = replace;
        self
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
                .map(|g| crate::helm::render::apiservice_of(g))
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
pub(in crate::helm::apply) struct Target {
    pub obj: DynamicObject,
    pub resource: ApiResource,
    pub namespaced: bool,
    pub reference: ObjectRef,
}

impl Target {
    /// Namespaced kinds without a namespace get `default_namespace`; cluster-scoped kinds
    /// lose any namespace they were given (the API server would ignore it anyway).
    pub(in crate::helm::apply) fn new(
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

fn group_kind(obj: &DynamicObject) -> (String, String) {
    let reference = ObjectRef::from_object(obj);
    (reference.group().to_string(), reference.kind)
}

pub(in crate::helm::apply) type Identity = (String, String, Option<String>, String);

pub(in crate::helm::apply) fn identity(reference: &ObjectRef) -> Identity {
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
    pub(in crate::helm::apply) async fn resolve_kind(
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

    pub(in crate::helm::apply) async fn target(
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
}

/// Whether `obj` is of an API group discovery cannot serve now: it can be neither read
/// nor deleted, and is left alone.
impl Owner<'_> {
    /// Whether `obj`'s group/version is one discovery cannot serve now.
    pub(in crate::helm::apply) fn is_unavailable(&self, obj: &DynamicObject) -> bool {
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
        apiservice: crate::helm::render::apiservice_of(&reference.api_version),
        group_version: reference.api_version,
    })
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(RELEASE_FIELD_MANAGER.to_string()),
        ..PostParams::default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::api::CrdPolicy;

    /// The engine spawns these on a multi-threaded runtime: they must be `Send`.
    #[allow(dead_code)] // compiled, never run
    fn futures_are_send(applier: &Applier, hooks: &mut [crate::helm::release::Hook]) {
        fn send<T: Send>(_: T) {}
        let owner = Owner::new("", "");
        send(applier.apply("", "", ""));
        send(applier.apply_release("", &owner));
        send(applier.check_adoption("", &owner));
        send(applier.prune("", "", &owner));
        send(applier.delete("", &owner, crate::api::DeletionPropagation::Background));
        send(applier.objects("", ""));
        send(applier.apply_crds(&[], CrdPolicy::Create));
        send(applier.ensure_namespace(""));
        send(applier.run_hooks(hooks, "", "", Duration::ZERO));
    }
}

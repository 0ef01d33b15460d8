//! Prune and delete: a release's objects removed in Helm's uninstall order, except those
//! kept by policy, gone already, or no longer the release's.

use std::collections::HashSet;
use std::time::Duration;

use kube::api::DeleteParams;

use super::ownership::holder;
use super::{Applier, Owner, Removed, Target, identity, is_unavailable, serves_unavailable};
use crate::api::DeletionPropagation;
use crate::helm::apply::manifest::{ObjectRef, check_ownership, has_keep_policy, parse_manifest};
use crate::helm::apply::order::{UNINSTALL_ORDER, sort_by_kind};
use crate::helm::apply::{Error, is_status};

impl Applier {
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
            return self
                .delete_targets(stale, owner, DeletionPropagation::Background)
                .await;
        }
        // The render may have dropped them only because a group was not discovered: they
        // stay. Except the broken APIService itself, whose removal is the fix.
        let (fix, kept): (Vec<Target>, Vec<Target>) = stale
            .into_iter()
            .partition(|t| serves_unavailable(&t.obj, owner));
        let mut removed = self
            .delete_targets(fix, owner, DeletionPropagation::Background)
            .await?;
        removed.kept_for_discovery = kept.into_iter().map(|t| t.reference).collect();
        removed.missing_groups = owner.unavailable.to_vec();
        Ok(removed)
    }

    /// Uninstalls the objects of `manifest` in Helm's uninstall order, except those
    /// annotated `helm.sh/resource-policy: keep` (in the manifest or in the cluster) and
    /// those whose ownership metadata names another release (as Helm's
    /// `verifyOwnershipBeforeDelete`). Objects already gone, or of kinds no longer served,
    /// are skipped. Deletion propagates as `propagation` says (Helm's `--cascade`) and is
    /// not waited for.
    pub async fn delete(
        &self,
        manifest: &str,
        owner: &Owner<'_>,
        propagation: DeletionPropagation,
    ) -> Result<Removed, Error> {
        let mut targets = Vec::new();
        for obj in parse_manifest(manifest)? {
            if is_unavailable(&obj, owner) {
                continue;
            }
            if let Some(resource) = self.resolve(&obj).await? {
                targets.push(Target::new(obj, resource, owner.namespace));
            }
        }
        self.delete_targets(targets, owner, propagation).await
    }

    async fn delete_targets(
        &self,
        mut targets: Vec<Target>,
        owner: &Owner<'_>,
        propagation: DeletionPropagation,
    ) -> Result<Removed, Error> {
        sort_by_kind(&mut targets, |t| t.reference.kind.as_str(), UNINSTALL_ORDER);
        let foreign = self.foreign_objects(owner).await?;
        let mut removed = Removed::default();
        for target in targets {
            let deletion = match foreign.get(&identity(&target.reference)) {
                Some(other) => Deletion::Foreign(format!("belongs to {other}")),
                None => self.delete_if_ours(&target, owner, propagation).await?,
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
    async fn delete_if_ours(
        &self,
        target: &Target,
        owner: &Owner<'_>,
        propagation: DeletionPropagation,
    ) -> Result<Deletion, Error> {
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
        let params = match propagation {
            DeletionPropagation::Background => DeleteParams::background(),
            DeletionPropagation::Foreground => DeleteParams::foreground(),
            DeletionPropagation::Orphan => DeleteParams::orphan(),
        };
        match api.delete(target.name(), &params).await {
            Ok(_) => Ok(Deletion::Deleted),
            Err(e) if is_status(&e, 404) => Ok(Deletion::Skipped),
            Err(e) => Err(target.api_error("delete")(e)),
        }
    }

    /// Deletes an object and waits until it is gone (or replaced by a new one of the
    /// same name), within `timeout`.
    pub(in crate::helm::apply) async fn delete_and_wait(
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

enum Deletion {
    Deleted,
    /// Kept, or already gone.
    Skipped,
    Foreign(String),
}

//! Client-side apply, as Helm 4 does it without server-side apply (`helm upgrade
//! --server-side=false`, Flux's `serverSideApply: disabled`, or `auto` after a client-side
//! revision): an existing object gets the patch Helm's kube client computes from the
//! object as the current revision rendered it, as this one renders it, and as it is live.
//! Here only the question: the render helper answers it with the Kubernetes libraries
//! Helm calls (`src/helm/render/helper/patch.go`), so the patch is Helm's by construction.

use futures::future::BoxFuture;
use serde_json::Value;

/// How a patch is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/strategic-merge-patch+json`: Kubernetes' own kinds.
    Strategic,
    /// `application/merge-patch+json`: custom resources.
    Merge,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Patch {
    pub kind: PatchKind,
    pub body: Value,
}

impl Patch {
    /// Nothing to send: Helm sends no request then.
    pub fn is_empty(&self) -> bool {
        self.body.is_null() || self.body.as_object().is_some_and(|o| o.is_empty())
    }
}

/// Computes client-side apply's patches.
pub trait ClientSidePatcher: Send + Sync {
    /// The patch taking `current` (live) from `original` to `modified`. With
    /// `three_way_unstructured`, custom resources get a three-way merge patch too (Helm's
    /// install with `--take-ownership`), else a two-way one of `original` and `modified`.
    fn patch<'a>(
        &'a self,
        original: &'a Value,
        modified: &'a Value,
        current: &'a Value,
        three_way_unstructured: bool,
    ) -> BoxFuture<'a, Result<Patch, String>>;
}

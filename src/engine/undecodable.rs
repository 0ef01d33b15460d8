//! A HelmRelease whose spec does not decode: one bad object affects only itself.

use std::sync::Arc;

use kube::Api;

use super::run::Context;
use super::status;
use super::vocabulary::ReleaseKey;
use crate::api::{FINALIZER, RawHelmRelease, Undecodable};

/// Tells an object that cannot be read why the engine leaves it alone: its status when it
/// can be written (else an Event), and one log line that does not dump the object. When
/// it is being deleted, its finalizer is removed without uninstalling: what to uninstall
/// cannot be read, and leaving a release in place is never destructive.
pub(super) async fn report_undecodable(ctx: Arc<Context>, key: ReleaseKey, u: Box<Undecodable>) {
    use kube::Resource;
    use kube::runtime::events::{Event, EventType};
    use status::{Verdict, reason};

    let api: Api<RawHelmRelease> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let hr = &u.placeholder;
    tracing::warn!(release = %key, reason = %u.reason, "HelmRelease skipped");
    let deleting = hr.metadata.deletion_timestamp.is_some()
        && hr
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER);
    let mut note = u.reason.clone();
    if deleting {
        let finalizers: Vec<&String> = hr
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != FINALIZER)
            .collect();
        let patch = serde_json::json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": hr.metadata.resource_version,
        }});
        match api
            .patch(
                &key.name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => {
                note.push_str("; deleted without uninstalling: its Helm release is left in place")
            }
            Err(e) => {
                tracing::warn!(release = %key, error = %crate::helm::apply::api_message(&e), "cannot remove the finalizer")
            }
        }
    } else {
        let mut s = hr.status.clone().unwrap_or_default();
        let generation = hr.metadata.generation;
        let verdict = Verdict::Stalled {
            reason: reason::INVALID_SPEC,
            message: &u.reason,
        };
        status::summarise(&mut s, verdict, generation);
        ctx.metrics.status_written();
        if let Err(e) = status::write(&api, &key.name, &s).await {
            tracing::warn!(release = %key, error = %crate::helm::apply::api_message(&e), "cannot write the status of an unreadable HelmRelease");
        }
    }
    let event = Event {
        type_: EventType::Warning,
        reason: reason::INVALID_SPEC.into(),
        note: Some(note),
        action: "Reconcile".into(),
        secondary: None,
    };
    let _ = ctx.recorder.publish(&event, &hr.object_ref(&())).await;
}

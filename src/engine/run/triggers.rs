//! What wakes a worker (docs/design.md, "What triggers a new desired state"): a HelmRelease update that changes its generation,
//! deletion or one of the request annotations; and, while a wait runs, a change to a
//! `valuesFrom` ConfigMap/Secret. Whether a trigger really changes the desired state is
//! decided later, by the digest, so these may fire spuriously but never miss a change.

use kube::runtime::watcher;
use kube::{Api, Resource};

use super::Context;
use crate::api::{HelmRelease, annotations};

/// What, in a HelmRelease update, calls for a reconcile: status-only updates and our own
/// finalizer write never do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::engine) struct Trigger {
    generation: Option<i64>,
    deleting: bool,
    tokens: [Option<String>; 5],
}

impl Trigger {
    pub(in crate::engine) fn of(hr: &HelmRelease) -> Self {
        let a = |k: &str| {
            hr.metadata
                .annotations
                .as_ref()
                .and_then(|m| m.get(k).cloned())
        };
        Self {
            generation: hr.metadata.generation,
            deleting: hr.metadata.deletion_timestamp.is_some(),
            tokens: [
                a(annotations::RECONCILE_REQUESTED_AT),
                a(annotations::FORCE_AT),
                a(annotations::RESET_AT),
                a(annotations::CANCEL_WAIT_AT),
                a(annotations::ROLLBACK_TO),
            ],
        }
    }
}

/// The annotation's value when it differs from the last one handled.
pub(in crate::engine) fn new_token(
    hr: &HelmRelease,
    annotation: &str,
    handled: Option<&str>,
) -> Option<String> {
    let value = hr.metadata.annotations.as_ref()?.get(annotation)?;
    (Some(value.as_str()) != handled).then(|| value.clone())
}

/// Changes to the ConfigMaps/Secrets the values came from, as trigger descriptions. Only
/// a new resourceVersion counts; whether the data really changed is for the digest.
pub(in crate::engine) fn values_source_events(
    ctx: &Context,
    hr: &HelmRelease,
    known: &[crate::helm::values::ValuesSourceRef],
) -> futures::stream::SelectAll<futures::stream::BoxStream<'static, String>> {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::{ConfigMap, Secret};
    use kube::api::PartialObjectMeta;

    let ns = hr.object_namespace();
    let streams = known.iter().map(|src| {
        let seen = src.resource_version.clone();
        let label = format!("{:?} {ns}/{} changed", src.kind, src.name);
        let fields = format!("metadata.name={}", src.name);
        let config = watcher::Config::default().fields(&fields);
        let versions: futures::stream::BoxStream<'static, Option<String>> = match src.kind {
            // Metadata only: the resourceVersion is all a trigger needs.
            crate::api::ValuesKind::ConfigMap => watcher(
                Api::<PartialObjectMeta<ConfigMap>>::namespaced(ctx.client.clone(), &ns),
                config,
            )
            .filter_map(|e| async move { version_of(e.ok()?) })
            .boxed(),
            crate::api::ValuesKind::Secret => watcher(
                Api::<PartialObjectMeta<Secret>>::namespaced(ctx.client.clone(), &ns),
                config,
            )
            .filter_map(|e| async move { version_of(e.ok()?) })
            .boxed(),
        };
        versions
            .filter_map(move |v| {
                let changed = v != seen;
                let label = label.clone();
                async move { changed.then_some(label) }
            })
            .boxed()
    });
    futures::stream::select_all(streams)
}

/// The resourceVersion an event carries (None for a deletion).
fn version_of<K: Resource>(event: watcher::Event<K>) -> Option<Option<String>> {
    use watcher::Event;
    match event {
        Event::Apply(o) | Event::InitApply(o) => Some(o.meta().resource_version.clone()),
        Event::Delete(_) => Some(None),
        Event::Init | Event::InitDone => None,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn hr(generation: i64, tokens: &[(&str, &str)]) -> HelmRelease {
        let mut hr: HelmRelease = crate::text::yaml::from_str(
            "apiVersion: wheelhouse.dev/v1alpha1\nkind: HelmRelease\nmetadata: {name: a, namespace: apps}\nspec: {chart: {path: ./c}}",
        )
        .unwrap();
        hr.metadata.generation = Some(generation);
        hr.metadata.annotations = Some(
            tokens
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        hr
    }

    #[test]
    fn only_spec_deletion_and_request_tokens_trigger() {
        let base = hr(3, &[(annotations::RECONCILE_REQUESTED_AT, "t1")]);
        let with = |change: &dyn Fn(&mut HelmRelease)| {
            let mut hr = base.clone();
            change(&mut hr);
            hr
        };
        let cases: &[(&str, HelmRelease, bool)] = &[
            (
                "status only",
                with(&|h| h.status = Some(Default::default())),
                false,
            ),
            (
                "our finalizer",
                with(&|h| h.metadata.finalizers = Some(vec![crate::api::FINALIZER.into()])),
                false,
            ),
            (
                "unrelated annotation",
                with(&|h| {
                    h.metadata
                        .annotations
                        .as_mut()
                        .unwrap()
                        .insert("team".into(), "x".into());
                }),
                false,
            ),
            (
                "new generation",
                with(&|h| h.metadata.generation = Some(4)),
                true,
            ),
            (
                "deletion",
                with(&|h| h.metadata.deletion_timestamp = Some(Time(Default::default()))),
                true,
            ),
            (
                "new reconcile token",
                hr(3, &[(annotations::RECONCILE_REQUESTED_AT, "t2")]),
                true,
            ),
            ("forceAt", with(&|h| set(h, annotations::FORCE_AT)), true),
            ("resetAt", with(&|h| set(h, annotations::RESET_AT)), true),
            (
                "cancelWaitAt",
                with(&|h| set(h, annotations::CANCEL_WAIT_AT)),
                true,
            ),
        ];
        for (what, updated, triggers) in cases {
            assert_eq!(
                Trigger::of(updated) != Trigger::of(&base),
                *triggers,
                "{what}"
            );
        }
    }

    fn set(hr: &mut HelmRelease, annotation: &str) {
        hr.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(annotation.into(), "t".into());
    }

    #[test]
    fn a_token_is_new_until_handled() {
        const A: &str = annotations::RESET_AT;
        // (annotations, token handled before, new token)
        type Annotations = &'static [(&'static str, &'static str)];
        let cases: &[(Annotations, Option<&str>, Option<&str>)] = &[
            (&[], None, None),
            (&[], Some("t1"), None),
            (&[(A, "t1")], None, Some("t1")),
            (&[(A, "t1")], Some("t1"), None),
            (&[(A, "t2")], Some("t1"), Some("t2")),
            (&[(annotations::FORCE_AT, "t1")], None, None),
        ];
        for (tokens, handled, new) in cases {
            assert_eq!(
                new_token(&hr(1, tokens), A, *handled).as_deref(),
                *new,
                "{tokens:?} handled {handled:?}"
            );
        }
    }

    #[test]
    fn source_events_carry_the_resource_version() {
        use watcher::Event;
        let cm = |rv: &str| {
            let mut cm = ConfigMap::default();
            cm.metadata.resource_version = Some(rv.into());
            cm
        };
        let cases: Vec<(Event<ConfigMap>, Option<Option<String>>)> = vec![
            (Event::Apply(cm("7")), Some(Some("7".into()))),
            (Event::InitApply(cm("8")), Some(Some("8".into()))),
            (Event::Delete(cm("9")), Some(None)),
            (Event::Init, None),
            (Event::InitDone, None),
        ];
        for (event, version) in cases {
            let what = format!("{event:?}");
            assert_eq!(version_of(event), version, "{what}");
        }
    }
}

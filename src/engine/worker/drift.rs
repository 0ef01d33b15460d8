//! Drift of a release's live objects from its newest revision, checked on every
//! reconcile that finds the release in sync (and so promptly after one of its workloads
//! changes: the engine wakes the worker). `warn` reports it (status.drift, a `Drifted`
//! condition, an Event); `enabled` applies the drifted objects again, and only them;
//! `disabled` does neither.

use kube::runtime::events::EventType;

use crate::api::{DriftDetectionMode, DriftStatus, DriftedObject};
use crate::apply::Owner;
use crate::apply::drift::ObjectDrift;
use crate::engine::run::Run;
use crate::engine::status::{self, Truth, condition, reason};
use crate::release::{Release, Status};

/// Objects listed in the condition's message; status.drift has them all.
const SHOWN: usize = 5;

pub(super) async fn check(run: &mut Run<'_>, latest: Option<&Release>) {
    let spec = run.hr.spec.drift_detection.clone().unwrap_or_default();
    let deployed = latest.filter(|r| {
        r.info
            .as_ref()
            .is_some_and(|i| i.status == Status::Deployed)
    });
    let (Some(latest), false) = (deployed, spec.mode == DriftDetectionMode::Disabled) else {
        clear(run, None);
        return;
    };
    // A dry run's or a correction's error may quote the revision's Secrets.
    run.masker.add_manifest_secrets(&latest.manifest);
    let found = match drifted(run, latest, &spec.ignore).await {
        Ok(found) => found,
        Err(e) => {
            let error = run.masker.mask(&e.to_string());
            tracing::warn!(release = %run.key, %error, "drift check failed; tried again at the next reconcile");
            return;
        }
    };
    if found.is_empty() {
        clear(run, None);
        return;
    }
    let objects: Vec<DriftedObject> = found
        .iter()
        .map(|d| DriftedObject {
            object: d.object.clone(),
            namespace: d.reference.namespace.clone(),
            fields: d.fields.clone(),
            missing: d.missing,
        })
        .collect();
    let message = describe(&objects);
    let changed = run
        .status
        .drift
        .as_ref()
        .is_none_or(|d| d.objects != objects);
    if spec.mode == DriftDetectionMode::Enabled {
        match correct(run, latest, &found).await {
            Ok(()) => {
                let note = format!("corrected: {message}");
                run.event(
                    EventType::Warning,
                    reason::DRIFT_CORRECTED,
                    "Correct",
                    note.clone(),
                )
                .await;
                clear(run, Some(note));
            }
            Err(e) => {
                let note = format!("{message}; correcting it failed: {e}");
                mark(run, latest.version, objects, &note);
                run.event(EventType::Warning, reason::DRIFTED, "Correct", note)
                    .await;
            }
        }
        return;
    }
    if changed {
        run.event(
            EventType::Warning,
            reason::DRIFTED,
            "Reconcile",
            message.clone(),
        )
        .await;
    }
    mark(run, latest.version, objects, &message);
}

/// `Deployment/web: /spec/replicas; ConfigMap/web-config missing; and 3 more`.
fn describe(objects: &[DriftedObject]) -> String {
    let mut parts: Vec<String> = objects
        .iter()
        .take(SHOWN)
        .map(|o| {
            if o.missing {
                format!("{} missing", o.object)
            } else {
                format!("{}: {}", o.object, o.fields.join(", "))
            }
        })
        .collect();
    if objects.len() > SHOWN {
        parts.push(format!("and {} more", objects.len() - SHOWN));
    }
    format!(
        "live objects differ from revision's manifest: {}",
        parts.join("; ")
    )
}

fn mark(run: &mut Run<'_>, revision: i32, objects: Vec<DriftedObject>, message: &str) {
    let generation = run.hr.metadata.generation;
    let detected_at = run
        .status
        .drift
        .as_ref()
        .filter(|d| d.objects == objects)
        .map(|d| d.detected_at.clone())
        .unwrap_or_else(|| k8s_openapi::jiff::Timestamp::now().to_string());
    run.status.drift = Some(DriftStatus {
        objects,
        revision,
        detected_at,
    });
    status::set(
        &mut run.status,
        condition::DRIFTED,
        Truth::True,
        reason::DRIFTED,
        message,
        generation,
    );
}

fn clear(run: &mut Run<'_>, corrected: Option<String>) {
    run.status.drift = None;
    match corrected {
        Some(note) => {
            let generation = run.hr.metadata.generation;
            status::set(
                &mut run.status,
                condition::DRIFTED,
                Truth::False,
                reason::DRIFT_CORRECTED,
                &note,
                generation,
            );
        }
        None => status::remove(&mut run.status, condition::DRIFTED),
    }
}

async fn drifted(
    run: &Run<'_>,
    latest: &Release,
    rules: &[crate::api::IgnoreRule],
) -> crate::Result<Vec<ObjectDrift>> {
    crate::engine::drift::compare(run.ctx, &run.hr, latest, rules, &run.elsewhere).await
}

/// Applies the drifted objects again (forced, as an upgrade applies), nothing else.
async fn correct(run: &Run<'_>, latest: &Release, found: &[ObjectDrift]) -> crate::Result<()> {
    let manifest = crate::engine::drift::applied_manifest(run.ctx, &run.hr, latest).await?;
    let wanted: Vec<crate::apply::ObjectRef> = found.iter().map(|d| d.reference.clone()).collect();
    let subset = crate::apply::manifest::documents_of(&manifest, &wanted, &run.target_namespace);
    let unavailable = run.ctx.unavailable_groups().await?;
    let elsewhere = run.elsewhere.clone();
    let owner = Owner::new(&run.release_name, &run.target_namespace)
        .previous(Some(&latest.manifest))
        .force_conflicts(true)
        .others(&elsewhere)
        .unavailable(&unavailable);
    run.acting.applier.apply_release(&subset, &owner).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_objects_and_fields_and_bounds_the_list() {
        let object = |i: usize, missing: bool| DriftedObject {
            object: format!("Deployment/web-{i}"),
            namespace: None,
            fields: if missing {
                vec![]
            } else {
                vec!["/spec/replicas".into()]
            },
            missing,
        };
        let one = describe(&[object(0, false), object(1, true)]);
        assert!(
            one.ends_with("Deployment/web-0: /spec/replicas; Deployment/web-1 missing"),
            "{one}"
        );
        let many: Vec<_> = (0..8).map(|i| object(i, false)).collect();
        assert!(describe(&many).ends_with("and 3 more"));
    }
}

//! Drift of a release's live objects from its newest revision, checked on every
//! reconcile that finds the release in sync (and so promptly after one of its workloads
//! changes: the engine wakes the worker). `warn` reports it (status.drift, a `Drifted`
//! condition, an Event); `enabled` applies the drifted objects again, and only them;
//! `disabled` does neither.

use kube::runtime::events::EventType;

use crate::api::{ContestedField, DriftChecked, DriftDetectionMode, DriftStatus, DriftedObject};
use crate::engine::run::Run;
use crate::engine::status::{self, Truth, condition, reason};
use crate::helm::apply::Owner;
use crate::helm::apply::drift_detection::ObjectDrift;
use crate::helm::release::{Release, Status};

/// How long a check that could rely on `status.driftChecked` waits for the engine's
/// watches to list (an engine just started) before it compares instead.
const WATCHES_LISTED_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Objects listed in the condition's message; status.drift has them all.
const SHOWN: usize = 5;

pub(super) async fn check(run: &mut Run<'_>, latest: Option<&Release>) {
    let spec = run.hr.spec.drift_detection.clone().unwrap_or_default();
    if spec.mode != DriftDetectionMode::Enabled {
        // Only corrections are contested.
        run.status.contested.clear();
    }
    let deployed = latest.filter(|r| {
        r.info
            .as_ref()
            .is_some_and(|i| i.status == Status::Deployed)
    });
    let (Some(latest), false) = (deployed, spec.mode == DriftDetectionMode::Disabled) else {
        run.status.drift_checked = None;
        clear(run, None);
        return;
    };
    if unchanged_since_clean(run, latest).await {
        run.ctx.metrics.drift_checked("unchanged");
        clear(run, None);
        return;
    }
    // What the watches see of the objects as the check starts: recorded if it finds
    // them clean.
    let generation = run.hr.metadata.generation;
    let objects =
        crate::engine::object_changes::watched_objects(&latest.manifest, &run.target.namespace)
            .filter(|_| run.acting.remote.is_none());
    let seen = objects
        .as_ref()
        .and_then(|o| run.ctx.known.objects.digest(o));
    // A dry run's or a correction's error may quote the revision's Secrets.
    run.intent.masker.add_manifest_secrets(&latest.manifest);
    run.ctx.metrics.drift_checked("compared");
    let found = match drifted(run, latest, &spec.ignore).await {
        Ok(found) => found,
        Err(e) => {
            let error = run.intent.masker.mask(&e.to_string());
            tracing::warn!(release = %run.key, %error, "drift check failed; tried again at the next reconcile");
            run.status.drift_checked = None;
            return;
        }
    };
    if found.is_empty() {
        record_clean(run, latest.version, generation, seen, objects);
        return;
    }
    run.status.drift_checked = None;
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
        correct_what_may_be(run, latest, &found, objects, &message).await;
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

/// Records a clean check: at the interval, `status.driftChecked` (so the next interval
/// check may skip the comparison), and always the engine's own note of it.
fn record_clean(
    run: &mut Run<'_>,
    version: i32,
    generation: Option<i64>,
    seen: Option<(u64, String)>,
    objects: Option<Vec<crate::engine::object_changes::ObjectKey>>,
) {
    // Recorded by a check at the interval only: the check right after an install or an
    // upgrade would cost a status write of its own in the middle of a rollout (the action
    // wrote its outcome just before); the first interval check records it instead (see
    // `unchanged_since_clean`).
    if run.memory.retry.by_interval {
        run.status.drift_checked = seen.as_ref().map(|(_, digest)| DriftChecked {
            revision: version,
            generation,
            objects: digest.clone(),
        });
    }
    run.memory.cache.clean_drift = objects.map(|objects| crate::engine::run::CleanDrift {
        since: seen.map_or(0, |(at, _)| at),
        version,
        generation,
        elsewhere: run.target.elsewhere.len(),
        objects,
    });
    clear(run, None);
}

/// `mode: enabled`: applies the drifted objects again, except fields another manager keeps
/// changing back (counted by [`contest`], then left to it and said so).
async fn correct_what_may_be(
    run: &mut Run<'_>,
    latest: &Release,
    found: &[ObjectDrift],
    objects: Vec<DriftedObject>,
    message: &str,
) {
    let generation = run.hr.metadata.generation;
    let contest = contest(
        &run.status.contested,
        found,
        latest.version,
        run.hr.metadata.generation,
        k8s_openapi::jiff::Timestamp::now(),
    );
    for field in &contest.yielded_now {
        let note = yielded_note(field);
        tracing::warn!(release = %run.key, "{note}");
        run.event(EventType::Warning, reason::DRIFT_CONTESTED, "Correct", note)
            .await;
    }
    run.status.contested = contest.fields.clone();
    let yielded: Vec<&ContestedField> = contest.fields.iter().filter(|f| f.yielded).collect();
    let correctable = without(found, &yielded);
    let outcome = if correctable.is_empty() {
        Ok(None)
    } else {
        correct(run, latest, &correctable, &yielded)
            .await
            .map(|()| Some(describe(&objects_of(&correctable))))
    };
    match outcome {
        Ok(corrected) => {
            if let Some(message) = &corrected {
                let note = format!("corrected: {message}");
                run.event(
                    EventType::Warning,
                    reason::DRIFT_CORRECTED,
                    "Correct",
                    note.clone(),
                )
                .await;
            }
            if yielded.is_empty() {
                clear(run, corrected.map(|m| format!("corrected: {m}")));
            } else {
                // Left to another manager: still not what the chart says, and said so.
                let left: Vec<String> = yielded.iter().map(|f| left_to(f)).collect();
                run.status.drift = None;
                status::set(
                    &mut run.status,
                    condition::DRIFTED,
                    Truth::True,
                    reason::DRIFT_CONTESTED,
                    format!(
                        "left to the managers that keep changing them back (not corrected, never taken by force): {}",
                        left.join("; ")
                    ),
                    generation,
                );
            }
        }
        Err(e) => {
            let note = format!("{message}; correcting it failed: {e}");
            mark(run, latest.version, objects, &note);
            run.event(EventType::Warning, reason::DRIFTED, "Correct", note)
                .await;
        }
    }
}

/// Corrections of one field another manager may undo in a row before wheelhouse leaves
/// the field to it.
const CONTEST_LIMIT: i32 = 3;
/// Undone corrections further apart than this start the count afresh (an operator's
/// occasional `kubectl edit` is corrected every time).
const CONTEST_WINDOW: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// The contested fields after a drift check that found `found`, and those left to their
/// manager by this check. Pure: the state is the previous `status.contested`.
///
/// A drifted field held by another manager is counted: found drifted again by the same
/// manager within [`CONTEST_WINDOW`] of our last correction means that manager undid it.
/// After [`CONTEST_LIMIT`] undone corrections the field is yielded: no longer corrected,
/// never taken by force. Counts belong to one revision and generation: an upgrade or a
/// spec change (an ignore rule added, say) starts afresh. A field no longer drifted is
/// forgotten unless yielded.
pub(super) fn contest(
    previous: &[ContestedField],
    found: &[ObjectDrift],
    revision: i32,
    generation: Option<i64>,
    now: k8s_openapi::jiff::Timestamp,
) -> Contest {
    let current: Vec<&ContestedField> = previous
        .iter()
        .filter(|f| f.revision == revision && f.generation == generation)
        .collect();
    let mut fields = Vec::new();
    let mut yielded_now = Vec::new();
    for drift in found {
        for (field, manager) in &drift.managers {
            if manager == crate::tracking::FIELD_MANAGER {
                continue;
            }
            let namespace = drift.reference.namespace.clone();
            let before = current.iter().find(|f| {
                f.object == drift.object && f.namespace == namespace && &f.field == field
            });
            let recent = |f: &&&ContestedField| {
                f.last_corrected
                    .parse::<k8s_openapi::jiff::Timestamp>()
                    .is_ok_and(|t| now.duration_since(t).unsigned_abs() < CONTEST_WINDOW)
            };
            let entry = match before.filter(|f| &f.manager == manager) {
                Some(f) if f.yielded => (*f).clone(),
                Some(f) if recent(&f) => {
                    let mut f = (*f).clone();
                    f.corrections += 1;
                    f.last_corrected = now.to_string();
                    if f.corrections >= CONTEST_LIMIT {
                        f.yielded = true;
                        yielded_now.push(f.clone());
                    }
                    f
                }
                _ => ContestedField {
                    object: drift.object.clone(),
                    namespace,
                    field: field.clone(),
                    manager: manager.clone(),
                    corrections: 0,
                    last_corrected: now.to_string(),
                    revision,
                    generation,
                    yielded: false,
                },
            };
            fields.push(entry);
        }
    }
    // Yielded fields no longer drifted (their manager set the chart's value) stay left.
    for f in current.into_iter().filter(|f| f.yielded) {
        if !fields
            .iter()
            .any(|g| g.object == f.object && g.namespace == f.namespace && g.field == f.field)
        {
            fields.push(f.clone());
        }
    }
    Contest {
        fields,
        yielded_now,
    }
}

pub(super) struct Contest {
    pub fields: Vec<ContestedField>,
    pub yielded_now: Vec<ContestedField>,
}

/// `found` without the yielded fields (an object left with none is dropped).
fn without(found: &[ObjectDrift], yielded: &[&ContestedField]) -> Vec<ObjectDrift> {
    found
        .iter()
        .filter_map(|d| {
            let mut d = d.clone();
            d.fields.retain(|field| {
                !yielded.iter().any(|y| {
                    y.object == d.object
                        && y.namespace == d.reference.namespace
                        && &y.field == field
                })
            });
            (d.missing || !d.fields.is_empty()).then_some(d)
        })
        .collect()
}

fn objects_of(found: &[ObjectDrift]) -> Vec<DriftedObject> {
    found
        .iter()
        .map(|d| DriftedObject {
            object: d.object.clone(),
            namespace: d.reference.namespace.clone(),
            fields: d.fields.clone(),
            missing: d.missing,
        })
        .collect()
}

/// `Deployment/web /spec/replicas to fake-hpa`.
fn left_to(f: &ContestedField) -> String {
    format!("{} {} to {}", f.object, f.field, f.manager)
}

/// Said once, when a field is left to another manager: who, and the rule that says so.
fn yielded_note(f: &ContestedField) -> String {
    let (kind, name) = f.object.split_once('/').unwrap_or((&f.object, ""));
    format!(
        "{object} {field}: {manager} changed it back after each of {n} corrections; wheelhouse leaves it to {manager} and no longer corrects it (never taking it by force). To say so in the spec: driftDetection: {{ignore: [{{paths: [\"{field}\"], target: {{kind: {kind}, name: {name}}}}}]}}",
        object = f.object,
        field = f.field,
        manager = f.manager,
        n = f.corrections,
    )
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

/// The drift check of an interval check that found the release as it last planned it
/// (see `worker::unchanged`), revision `version` deployed: `true` when it needs no
/// comparison (drift detection is off, or nothing the last clean check compared changed
/// since), with what [`check`] records then; `false`: [`check`] must be made.
pub(super) fn unchanged_at_interval(run: &mut Run<'_>, version: i32) -> bool {
    let spec = run.hr.spec.drift_detection.clone().unwrap_or_default();
    if spec.mode == DriftDetectionMode::Disabled {
        run.status.contested.clear();
        run.status.drift_checked = None;
        clear(run, None);
        return true;
    }
    if !run.memory.retry.by_interval || run.acting.remote.is_some() {
        return false;
    }
    if clean_since(run, version) != Some(true) {
        return false;
    }
    if spec.mode != DriftDetectionMode::Enabled {
        run.status.contested.clear();
    }
    run.ctx.metrics.drift_checked("unchanged");
    clear(run, None);
    true
}

/// With the last clean check in memory: whether nothing it compared changed since (what it
/// recorded is then recorded again); `None`: no clean check in memory.
fn clean_since(run: &mut Run<'_>, version: i32) -> Option<bool> {
    let clean = run.memory.cache.clean_drift.take()?;
    let generation = run.hr.metadata.generation;
    let unchanged = clean.version == version
        && clean.generation == generation
        && clean.elsewhere == run.target.elsewhere.len()
        && run
            .ctx
            .known
            .objects
            .unchanged_since(clean.since, &clean.objects);
    if unchanged {
        // Unchanged since, so the digest now is the one of that clean check.
        if let Some((_, digest)) = run.ctx.known.objects.digest(&clean.objects) {
            run.status.drift_checked = Some(DriftChecked {
                revision: version,
                generation,
                objects: digest,
            });
        }
        run.memory.cache.clean_drift = Some(clean);
    }
    Some(unchanged)
}

/// Whether a check at the release's interval may rely on the last one that found it
/// clean: this engine's (nothing its watches saw changed since), or, after a restart or
/// a change of leader, the one recorded in `status.driftChecked` (its objects' digest is
/// still the same). Never for a request or a wake-up: a watch may not yet show a change
/// made a moment before them.
async fn unchanged_since_clean(run: &mut Run<'_>, latest: &Release) -> bool {
    let generation = run.hr.metadata.generation;
    // The engine's watches are of its own cluster: a remote release's objects are read.
    if !run.memory.retry.by_interval || run.acting.remote.is_some() {
        run.memory.cache.clean_drift = None;
        return false;
    }
    if let Some(unchanged) = clean_since(run, latest.version) {
        return unchanged;
    }
    let Some(recorded) = run.status.drift_checked.clone().filter(|r| {
        r.revision == latest.version
            && r.generation == generation
            && run.target.elsewhere.is_empty()
    }) else {
        return false;
    };
    let Some(objects) =
        crate::engine::object_changes::watched_objects(&latest.manifest, &run.target.namespace)
    else {
        return false;
    };
    // An engine just started (most releases' first check) lists its watches first.
    if !run.ctx.known.objects.whole(WATCHES_LISTED_WITHIN).await {
        return false;
    }
    match run.ctx.known.objects.digest(&objects) {
        Some((at, digest)) if digest == recorded.objects => {
            run.memory.cache.clean_drift = Some(crate::engine::run::CleanDrift {
                since: at,
                version: latest.version,
                generation,
                elsewhere: 0,
                objects,
            });
            true
        }
        _ => false,
    }
}

async fn drifted(
    run: &Run<'_>,
    latest: &Release,
    rules: &[crate::api::IgnoreRule],
) -> crate::engine::Result<Vec<ObjectDrift>> {
    crate::engine::release_drift::compare(
        run.ctx,
        &run.acting,
        &run.hr,
        latest,
        rules,
        &run.target.elsewhere,
    )
    .await
}

/// Applies the drifted objects again (forced, as an upgrade applies), nothing else; the
/// fields left to another manager (`yielded`) are left out of what is applied, so the
/// release's manager claims them no more and the other manager keeps them.
async fn correct(
    run: &Run<'_>,
    latest: &Release,
    found: &[ObjectDrift],
    yielded: &[&ContestedField],
) -> crate::engine::Result<()> {
    let manifest = crate::engine::release_drift::applied_manifest(
        &run.acting,
        &run.ctx.hash_keys.get().await,
        &run.hr,
        latest,
    )
    .await?;
    let wanted: Vec<crate::helm::apply::ObjectRef> =
        found.iter().map(|d| d.reference.clone()).collect();
    let subset =
        crate::helm::apply::manifest::documents_of(&manifest, &wanted, &run.target.namespace);
    let subset = if yielded.is_empty() {
        subset
    } else {
        let mut documents = crate::text::yaml::parse_documents(&subset)
            .map_err(|e| std::io::Error::other(format!("the revision's manifest: {e}")))?;
        for doc in &mut documents {
            let kind = doc
                .get("kind")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            let name = doc
                .pointer("/metadata/name")
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default();
            let object = format!("{kind}/{name}");
            for field in yielded.iter().filter(|f| f.object == object) {
                crate::helm::apply::drift_detection::remove_pointer(doc, &field.field);
            }
        }
        crate::text::yaml::to_documents(&documents)
    };
    let unavailable = run.ctx.discover_for(&run.acting).await?.unavailable;
    let elsewhere = run.target.elsewhere.clone();
    let owner = Owner::new(&run.target.release_name, &run.target.namespace)
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

    /// An autoscaler (`fake-hpa`) changes /spec/replicas back after each correction: three
    /// corrections, then the field is left to it (said once); an upgrade starts afresh,
    /// and a field drifted by someone only now and then is corrected every time.
    #[test]
    fn a_field_changed_back_after_each_correction_is_left_to_its_manager() {
        let drift = |manager: &str| ObjectDrift {
            object: "Deployment/web".into(),
            reference: crate::helm::apply::ObjectRef {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some("apps".into()),
                name: "web".into(),
            },
            fields: vec!["/spec/replicas".into()],
            missing: false,
            live: None,
            desired: serde_json::Value::Null,
            managers: [("/spec/replicas".to_owned(), manager.to_owned())].into(),
        };
        let t0: k8s_openapi::jiff::Timestamp = "2026-11-26T10:00:00Z".parse().unwrap();
        let at = |s: i64| t0 + std::time::Duration::from_secs(s as u64);
        let mut state: Vec<ContestedField> = Vec::new();
        let mut corrected = 0;
        for i in 0..6 {
            let c = contest(&state, &[drift("fake-hpa")], 2, Some(1), at(i));
            state = c.fields;
            if state.iter().all(|f| !f.yielded) {
                corrected += 1;
            }
            assert_eq!(c.yielded_now.len(), usize::from(i == 3), "check {i}");
        }
        assert_eq!(corrected, 3, "three corrections, then left");
        assert!(state[0].yielded && state[0].manager == "fake-hpa");
        assert!(
            yielded_note(&state[0])
                .contains("paths: [\"/spec/replicas\"], target: {kind: Deployment, name: web}")
        );
        // Left while its manager holds the chart's value too.
        let calm = contest(&state, &[], 2, Some(1), at(100));
        assert!(calm.fields[0].yielded);
        // A new revision starts afresh.
        let fresh = contest(&state, &[drift("fake-hpa")], 3, Some(1), at(200));
        assert!(!fresh.fields[0].yielded && fresh.fields[0].corrections == 0);
        // An operator's edit now and then is corrected every time.
        let mut state = Vec::new();
        for i in 0..5 {
            let c = contest(&state, &[drift("kubectl-edit")], 2, Some(1), at(i * 3600));
            assert!(c.yielded_now.is_empty());
            state = c.fields;
        }
        // Config tracking's hash is wheelhouse's own.
        assert!(
            contest(&[], &[drift(crate::tracking::FIELD_MANAGER)], 2, None, t0)
                .fields
                .is_empty()
        );
    }

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

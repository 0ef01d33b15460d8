//! Fail-fast: pod states that waiting will not fix. A wait that sees one ends at once as
//! failed, naming the pod and the reason, instead of running into its timeout.

use serde_json::Value;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// Container waiting reasons that do not heal by themselves.
pub const TERMINAL_WAITING_REASONS: [&str; 5] = [
    "CrashLoopBackOff",
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
];

/// Why `pod` can no longer become ready, if it cannot. A pod the scheduler cannot place is
/// given `unschedulable_grace` first (capacity may be on its way).
pub fn pod_failure(pod: &Value, now: Timestamp, unschedulable_grace: Duration) -> Option<String> {
    let status = &pod["status"];
    for key in ["initContainerStatuses", "containerStatuses"] {
        for c in status[key].as_array().into_iter().flatten() {
            let waiting = &c["state"]["waiting"];
            if let Some(reason) = waiting["reason"].as_str()
                && TERMINAL_WAITING_REASONS.contains(&reason)
            {
                let mut why = format!("{reason} (container {})", c["name"].as_str().unwrap_or("?"));
                if let Some(message) = waiting["message"].as_str().filter(|m| !m.is_empty()) {
                    why.push_str(": ");
                    why.push_str(message);
                }
                return Some(why);
            }
        }
    }
    let scheduled = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PodScheduled")?;
    if scheduled["status"] == "False" && scheduled["reason"] == "Unschedulable" {
        let since: Timestamp = scheduled["lastTransitionTime"].as_str()?.parse().ok()?;
        let waited = now.duration_since(since);
        if waited.as_secs_f64() >= unschedulable_grace.as_secs_f64() {
            return Some(format!(
                "Unschedulable for {}s: {}",
                waited.as_secs(),
                scheduled["message"].as_str().unwrap_or("no node fits")
            ));
        }
    }
    None
}

/// Which of a workload's pods belong to its current template: the pods of an earlier
/// rollout (a broken revision the one now waited on replaces) are still there for a while
/// and must never fail the wait of the revision that fixes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revision {
    /// Pods carrying this label value (a Deployment's new ReplicaSet's
    /// `pod-template-hash`, a StatefulSet's `controller-revision-hash`).
    Label { key: &'static str, value: String },
    /// The workload's controller has not seen its current spec yet: every pod there is an
    /// earlier template's.
    NotObserved,
    /// No way to tell (a DaemonSet): pods are told apart by creation time only.
    Unknown,
}

impl Revision {
    /// Of a workload as the API shows it (`kind` one of Deployment, StatefulSet,
    /// DaemonSet). `replica_sets` are a Deployment's own ReplicaSets (any others are
    /// ignored).
    pub fn of(kind: &str, workload: &Value, replica_sets: &[Value]) -> Self {
        let generation = workload["metadata"]["generation"].as_i64();
        let observed = workload["status"]["observedGeneration"].as_i64();
        if generation.is_some() && observed.is_none_or(|o| Some(o) < generation) {
            return Self::NotObserved;
        }
        match kind {
            // The new ReplicaSet is the one whose template is the Deployment's (less the
            // hash label), as the deployment controller itself finds it. Not the
            // Progressing condition: a Deployment returned to an earlier template keeps
            // naming the broken ReplicaSet there until the old one makes progress.
            "Deployment" => {
                let uid = &workload["metadata"]["uid"];
                replica_sets
                    .iter()
                    .filter(|rs| {
                        rs["metadata"]["ownerReferences"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|o| o["uid"] == *uid && o["controller"] == true)
                    })
                    .find(|rs| {
                        same_template(&workload["spec"]["template"], &rs["spec"]["template"])
                    })
                    .and_then(|rs| rs["metadata"]["labels"][POD_TEMPLATE_HASH].as_str())
                    // Not created yet: no pod there is the current template's.
                    .map_or(Self::NotObserved, |hash| Self::Label {
                        key: POD_TEMPLATE_HASH,
                        value: hash.to_owned(),
                    })
            }
            "StatefulSet" => {
                workload["status"]["updateRevision"]
                    .as_str()
                    .map_or(Self::Unknown, |r| Self::Label {
                        key: "controller-revision-hash",
                        value: r.to_owned(),
                    })
            }
            _ => Self::Unknown,
        }
    }

    /// Whether a pod with `labels` may fail the wait.
    pub fn admits(&self, labels: &Value) -> bool {
        match self {
            Self::Label { key, value } => labels[*key].as_str() == Some(value.as_str()),
            Self::NotObserved => false,
            Self::Unknown => true,
        }
    }
}

use super::hub::POD_TEMPLATE_HASH;

/// Whether a ReplicaSet's pod template is a Deployment's: equal once the hash label the
/// deployment controller adds is taken away (both are stored defaulted by the API server).
/// Either may be the digest the shared watches keep of it.
pub(super) fn same_template(deployment: &Value, replica_set: &Value) -> bool {
    super::hub::template_digest(deployment) == super::hub::template_digest(replica_set)
}

/// Whether `labels` satisfy a workload's `spec.selector.matchLabels` (and the simple
/// `In` expressions charts use).
pub fn selects(selector: &Value, labels: &Value) -> bool {
    let mut any = false;
    if let Some(match_labels) = selector["matchLabels"].as_object() {
        for (k, v) in match_labels {
            any = true;
            if labels[k] != *v {
                return false;
            }
        }
    }
    for expr in selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        any = true;
        let key = expr["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = expr["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let have = labels[key].as_str();
        let ok = match expr["operator"].as_str() {
            Some("In") => have.is_some_and(|h| values.contains(&h)),
            Some("NotIn") => !have.is_some_and(|h| values.contains(&h)),
            Some("Exists") => have.is_some(),
            Some("DoesNotExist") => have.is_none(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    // An empty selector selects nothing here: we never want "every pod".
    any
}

#[cfg(test)]
mod revision_tests {
    use super::*;
    use serde_json::json;

    fn template(image: &str) -> Value {
        json!({"metadata": {"labels": {"app": "web"}},
               "spec": {"containers": [{"name": "app", "image": image}]}})
    }

    fn deployment(generation: i64, observed: i64, image: &str) -> Value {
        json!({"metadata": {"generation": generation, "uid": "d-1"},
               "spec": {"template": template(image)},
               "status": {"observedGeneration": observed,
                          "conditions": [{"type": "Progressing",
                                          "message": "ReplicaSet \"web-broken\" is progressing."}]}})
    }

    fn replica_set(owner: &str, hash: &str, image: &str) -> Value {
        let mut t = template(image);
        t["metadata"]["labels"][POD_TEMPLATE_HASH] = hash.into();
        json!({"metadata": {"labels": {"app": "web", "pod-template-hash": hash},
                            "ownerReferences": [{"uid": owner, "controller": true}]},
               "spec": {"template": t}})
    }

    #[test]
    fn a_deployments_pods_are_those_of_the_replica_set_with_its_template() {
        let sets = [
            replica_set("d-1", "5d4f8c7b9", "web:1"),
            replica_set("d-1", "7c9d6b5f4", "web:broken"),
            // Another Deployment's, with the same template.
            replica_set("d-2", "0000000", "web:1"),
        ];
        // Returned to an earlier template: the Progressing condition still names the
        // broken set; the template says which set is current.
        let r = Revision::of("Deployment", &deployment(3, 3, "web:1"), &sets);
        assert_eq!(
            r,
            Revision::Label {
                key: "pod-template-hash",
                value: "5d4f8c7b9".into()
            }
        );
        assert!(r.admits(&json!({"app": "web", "pod-template-hash": "5d4f8c7b9"})));
        assert!(!r.admits(&json!({"app": "web", "pod-template-hash": "7c9d6b5f4"})));
        // The new set does not exist yet: no pod there is the new template's.
        let r = Revision::of("Deployment", &deployment(3, 3, "web:2"), &sets);
        assert_eq!(r, Revision::NotObserved);
        assert!(!r.admits(&json!({"pod-template-hash": "7c9d6b5f4"})));
        // Not observed yet: likewise.
        let r = Revision::of("Deployment", &deployment(4, 3, "web:1"), &sets);
        assert_eq!(r, Revision::NotObserved);
        assert!(Revision::Unknown.admits(&json!({})));
    }

    #[test]
    fn a_statefulsets_pods_are_its_update_revisions() {
        let sts = json!({"metadata": {"generation": 2},
                         "status": {"observedGeneration": 2, "updateRevision": "db-6f7b9"}});
        let r = Revision::of("StatefulSet", &sts, &[]);
        assert!(r.admits(&json!({"controller-revision-hash": "db-6f7b9"})));
        assert!(!r.admits(&json!({"controller-revision-hash": "db-58c4d"})));
        let ds = json!({"metadata": {"generation": 1}, "status": {"observedGeneration": 1}});
        assert_eq!(Revision::of("DaemonSet", &ds, &[]), Revision::Unknown);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-01-01T00:10:00Z".parse().unwrap()
    }

    #[test]
    fn terminal_container_states_fail_fast_naming_the_reason() {
        for reason in TERMINAL_WAITING_REASONS {
            let pod = json!({"status": {"containerStatuses": [
                {"name": "app", "state": {"waiting": {"reason": reason, "message": "boom"}}}]}});
            let why = pod_failure(&pod, now(), Duration::from_secs(30)).unwrap();
            assert_eq!(why, format!("{reason} (container app): boom"));
        }
        let init = json!({"status": {"initContainerStatuses": [
            {"name": "migrate", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
        assert_eq!(
            pod_failure(&init, now(), Duration::ZERO).unwrap(),
            "CrashLoopBackOff (container migrate)"
        );
    }

    #[test]
    fn transient_states_do_not_fail() {
        let pod = json!({"status": {"containerStatuses": [
            {"name": "app", "state": {"waiting": {"reason": "ContainerCreating"}}}]}});
        assert_eq!(pod_failure(&pod, now(), Duration::ZERO), None);
        let gated = json!({"status": {"conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        assert_eq!(pod_failure(&gated, now(), Duration::ZERO), None);
    }

    #[test]
    fn unschedulable_fails_only_after_the_grace_period() {
        let pod = |since: &str| {
            json!({"status": {"conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/1 nodes are available", "lastTransitionTime": since}]}})
        };
        assert_eq!(
            pod_failure(&pod("2026-01-01T00:09:50Z"), now(), Duration::from_secs(30)),
            None
        );
        let why =
            pod_failure(&pod("2026-01-01T00:09:00Z"), now(), Duration::from_secs(30)).unwrap();
        assert!(why.starts_with("Unschedulable for 60s"), "{why}");
    }

    #[test]
    fn selectors_match_labels_and_expressions() {
        let labels = json!({"app": "web", "tier": "front"});
        assert!(selects(&json!({"matchLabels": {"app": "web"}}), &labels));
        assert!(!selects(&json!({"matchLabels": {"app": "db"}}), &labels));
        assert!(selects(
            &json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]}),
            &labels
        ));
        assert!(!selects(
            &json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
            &labels
        ));
        assert!(!selects(&json!({}), &labels));
    }
}

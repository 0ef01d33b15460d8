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

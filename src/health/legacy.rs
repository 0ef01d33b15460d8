//! Helm 3's readiness rules: Helm 4's `--wait=legacy`, Flux's `waitStrategy: {name:
//! legacy}` (Helm's `ReadyChecker`, as its legacy waiter builds it: a paused Deployment
//! counts as ready, Jobs are waited for unless `disableWaitForJobs`). Only the kinds those
//! rules name are waited for, each by its own rule; any other kind is ready once it
//! exists. Pure: the objects as the API server returns them, with what a rule needs
//! besides them ([`Related`]).

use serde_json::Value;

use super::failfast;
use super::readiness::Readiness;

/// What a rule reads besides the object itself.
#[derive(Default)]
pub struct Related<'a> {
    /// A Deployment's own ReplicaSets, whole.
    pub replica_sets: &'a [Value],
    /// The pods a ReplicaSet's or ReplicationController's selector selects.
    pub pods: &'a [Value],
}

/// Readiness of `obj` by Helm 3's rules; `check_jobs`: a Job must complete (Helm's
/// `--wait-for-jobs`, Flux unless `disableWaitForJobs`).
pub fn of(obj: &Value, related: &Related<'_>, check_jobs: bool) -> Readiness {
    let kind = obj["kind"].as_str().unwrap_or_default();
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    match (group, kind) {
        ("", "Pod") => pod(obj),
        ("batch", "Job") if check_jobs => job(obj),
        ("apps", "Deployment") => deployment(obj, related.replica_sets),
        ("", "PersistentVolumeClaim") => volume(obj),
        ("", "Service") => service(obj),
        ("apps", "DaemonSet") => daemon_set(obj),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd(obj),
        ("apps", "StatefulSet") => stateful_set(obj),
        ("", "ReplicationController") | ("apps", "ReplicaSet") => match generation_observed(obj) {
            Readiness::Ready => pods_ready(related.pods),
            waiting => waiting,
        },
        _ => Readiness::Ready,
    }
}

fn waiting(why: impl Into<String>) -> Readiness {
    Readiness::InProgress(why.into())
}

/// An integer field as Go reads it into an int64: absent is 0.
fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn pod_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn pod(obj: &Value) -> Readiness {
    if pod_ready(obj) {
        Readiness::Ready
    } else {
        waiting("pod is not ready")
    }
}

fn pods_ready(pods: &[Value]) -> Readiness {
    match pods.iter().find(|p| !pod_ready(p)) {
        None => Readiness::Ready,
        Some(p) => waiting(format!(
            "pod {} is not ready",
            p["metadata"]["name"].as_str().unwrap_or_default()
        )),
    }
}

fn job(obj: &Value) -> Readiness {
    // The API server defaults backoffLimit to 6.
    let backoff_limit = obj["spec"]["backoffLimit"].as_i64().unwrap_or(6);
    if int(&obj["status"]["failed"]) > backoff_limit {
        return Readiness::Failed("job is failed".into());
    }
    if let Some(completions) = obj["spec"]["completions"].as_i64()
        && int(&obj["status"]["succeeded"]) < completions
    {
        return waiting("job is not completed");
    }
    Readiness::Ready
}

fn generation_observed(obj: &Value) -> Readiness {
    let generation = int(&obj["metadata"]["generation"]);
    let observed = int(&obj["status"]["observedGeneration"]);
    if observed == generation {
        Readiness::Ready
    } else {
        waiting(format!(
            "observedGeneration {observed} does not match generation {generation}"
        ))
    }
}

/// Kubernetes' `GetScaledValueFromIntOrPercent`: an integer as it is, `"N%"` of `total`
/// rounded up or down; anything else is not a value.
fn scaled(v: &Value, total: i64, round_up: bool) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    let percent: i64 = v.as_str()?.strip_suffix('%')?.parse().ok()?;
    let product = percent * total;
    Some(if round_up {
        (product + 99) / 100
    } else {
        product / 100
    })
}

/// The deployment controller's `MaxUnavailable`.
fn max_unavailable(deployment: &Value, replicas: i64) -> i64 {
    let strategy = &deployment["spec"]["strategy"];
    if strategy["type"] != "RollingUpdate" || replicas == 0 {
        return 0;
    }
    let rolling = &strategy["rollingUpdate"];
    let or_default = |v: &Value| {
        if v.is_null() {
            Value::from("25%")
        } else {
            v.clone()
        }
    };
    let surge = scaled(&or_default(&rolling["maxSurge"]), replicas, true).unwrap_or(0);
    let mut unavailable =
        scaled(&or_default(&rolling["maxUnavailable"]), replicas, false).unwrap_or(0);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    unavailable.min(replicas)
}

fn deployment(obj: &Value, replica_sets: &[Value]) -> Readiness {
    if obj["spec"]["paused"].as_bool() == Some(true) {
        return Readiness::Ready;
    }
    // The new ReplicaSet: the oldest of its own whose template is the Deployment's.
    let mut current: Vec<&Value> = replica_sets
        .iter()
        .filter(|rs| failfast::same_template(&obj["spec"]["template"], &rs["spec"]["template"]))
        .collect();
    current.sort_by(|a, b| {
        let created = |rs: &Value| {
            rs["metadata"]["creationTimestamp"]
                .as_str()
                .map(str::to_owned)
        };
        created(a).cmp(&created(b))
    });
    let Some(rs) = current.first() else {
        return waiting("no ReplicaSet of the current template yet");
    };
    if let waiting @ Readiness::InProgress(_) = generation_observed(rs) {
        return waiting;
    }
    if let waiting @ Readiness::InProgress(_) = generation_observed(obj) {
        return waiting;
    }
    let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let expected = replicas - max_unavailable(obj, replicas);
    let ready = int(&rs["status"]["readyReplicas"]);
    if ready < expected {
        return waiting(format!("{ready} of {expected} pods ready"));
    }
    Readiness::Ready
}

fn volume(obj: &Value) -> Readiness {
    if obj["status"]["phase"] == "Bound" {
        Readiness::Ready
    } else {
        waiting("PersistentVolumeClaim is not bound")
    }
}

fn service(obj: &Value) -> Readiness {
    let spec = &obj["spec"];
    if spec["type"] == "ExternalName" {
        return Readiness::Ready;
    }
    if spec["clusterIP"].as_str().unwrap_or_default().is_empty() {
        return waiting("Service has no cluster IP");
    }
    if spec["type"] == "LoadBalancer" {
        if spec["externalIPs"]
            .as_array()
            .is_some_and(|ips| !ips.is_empty())
        {
            return Readiness::Ready;
        }
        // Go's nil slice: an ingress list that is absent, not one that is empty.
        if obj["status"]["loadBalancer"]["ingress"].is_null() {
            return waiting("LoadBalancer Service has no ingress address");
        }
    }
    Readiness::Ready
}

fn daemon_set(obj: &Value) -> Readiness {
    if let waiting @ Readiness::InProgress(_) = generation_observed(obj) {
        return waiting;
    }
    let strategy = &obj["spec"]["updateStrategy"];
    if strategy["type"] != "RollingUpdate" {
        return Readiness::Ready;
    }
    let status = &obj["status"];
    let desired = int(&status["desiredNumberScheduled"]);
    let updated = int(&status["updatedNumberScheduled"]);
    if updated != desired {
        return waiting(format!("{updated} of {desired} updated pods scheduled"));
    }
    let max_unavailable =
        scaled(&strategy["rollingUpdate"]["maxUnavailable"], desired, true).unwrap_or(desired);
    let expected = desired - max_unavailable;
    let ready = int(&status["numberReady"]);
    if ready < expected {
        return waiting(format!("{ready} of {expected} pods ready"));
    }
    Readiness::Ready
}

fn crd(obj: &Value) -> Readiness {
    let conditions = obj["status"]["conditions"].as_array();
    let settled = conditions.into_iter().flatten().any(|c| {
        (c["type"] == "Established" && c["status"] == "True")
            // A naming conflict is not the wait's to fail on.
            || (c["type"] == "NamesAccepted" && c["status"] == "False")
    });
    if settled {
        Readiness::Ready
    } else {
        waiting("CustomResourceDefinition is not established")
    }
}

fn stateful_set(obj: &Value) -> Readiness {
    if let waiting @ Readiness::InProgress(_) = generation_observed(obj) {
        return waiting;
    }
    let strategy = &obj["spec"]["updateStrategy"];
    if strategy["type"] != "RollingUpdate" {
        return Readiness::Ready;
    }
    let partition = int(&strategy["rollingUpdate"]["partition"]);
    let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let status = &obj["status"];
    let expected = replicas - partition;
    let updated = int(&status["updatedReplicas"]);
    if updated < expected {
        return waiting(format!("{updated} of {expected} pods updated"));
    }
    let ready = int(&status["readyReplicas"]);
    if ready != replicas {
        return waiting(format!("{ready} of {replicas} pods ready"));
    }
    if partition == 0 && status["currentRevision"] != status["updateRevision"] {
        return waiting("currentRevision does not match updateRevision");
    }
    Readiness::Ready
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ready(obj: &Value, related: &Related<'_>) -> bool {
        of(obj, related, true).is_ready()
    }

    fn template() -> Value {
        json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "web:1"}]}})
    }

    fn deployment(replicas: i64, strategy: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "generation": 2},
               "spec": {"replicas": replicas, "strategy": strategy, "template": template()},
               "status": {"observedGeneration": 2}})
    }

    fn replica_set(ready: i64, template: Value) -> Value {
        let mut t = template;
        t["metadata"]["labels"]["pod-template-hash"] = "abc".into();
        json!({"metadata": {"generation": 1, "creationTimestamp": "2026-01-01T00:00:00Z"},
               "spec": {"template": t}, "status": {"observedGeneration": 1, "readyReplicas": ready}})
    }

    /// Ready once the new ReplicaSet has `replicas - maxUnavailable` ready pods (25% of
    /// 4, rounded down, is 1): where kstatus waits for every pod, updated and available.
    #[test]
    fn a_deployment_is_ready_with_max_unavailable_pods_still_missing() {
        let rolling = json!({"type": "RollingUpdate"});
        let d = deployment(4, rolling.clone());
        let rs = |ready| [replica_set(ready, template())];
        assert!(!ready(
            &d,
            &Related {
                replica_sets: &rs(2),
                pods: &[]
            }
        ));
        assert!(ready(
            &d,
            &Related {
                replica_sets: &rs(3),
                pods: &[]
            }
        ));
        // An old template's ReplicaSet does not count.
        let mut old = template();
        old["spec"]["containers"][0]["image"] = "web:0".into();
        assert!(!ready(
            &d,
            &Related {
                replica_sets: &[replica_set(4, old)],
                pods: &[]
            }
        ));
        // Recreate: every pod; maxSurge and maxUnavailable both 0 leaves one missing.
        let d = deployment(4, json!({"type": "Recreate"}));
        assert!(!ready(
            &d,
            &Related {
                replica_sets: &rs(3),
                pods: &[]
            }
        ));
        let d = deployment(
            4,
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}),
        );
        assert!(ready(
            &d,
            &Related {
                replica_sets: &rs(3),
                pods: &[]
            }
        ));
        // Paused counts as ready; an unobserved generation does not.
        let mut paused = deployment(4, rolling.clone());
        paused["spec"]["paused"] = true.into();
        assert!(ready(&paused, &Related::default()));
        let mut unobserved = deployment(4, rolling);
        unobserved["status"]["observedGeneration"] = 1.into();
        assert!(!ready(
            &unobserved,
            &Related {
                replica_sets: &rs(4),
                pods: &[]
            }
        ));
    }

    /// A LoadBalancer waits for its ingress (Helm 4's default does not), unless it has
    /// external IPs; ExternalName never waits.
    #[test]
    fn services_wait_for_a_cluster_ip_and_a_load_balancers_ingress() {
        let svc = |spec: Value, status: Value| json!({"apiVersion": "v1", "kind": "Service", "spec": spec, "status": status});
        let r = Related::default();
        assert!(ready(
            &svc(
                json!({"type": "ClusterIP", "clusterIP": "10.0.0.1"}),
                json!({})
            ),
            &r
        ));
        assert!(!ready(&svc(json!({"type": "ClusterIP"}), json!({})), &r));
        let lb = json!({"type": "LoadBalancer", "clusterIP": "10.0.0.1"});
        assert!(!ready(&svc(lb.clone(), json!({"loadBalancer": {}})), &r));
        assert!(ready(
            &svc(
                lb.clone(),
                json!({"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}})
            ),
            &r
        ));
        let mut with_ips = lb;
        with_ips["externalIPs"] = json!(["1.2.3.4"]);
        assert!(ready(&svc(with_ips, json!({})), &r));
        assert!(ready(&svc(json!({"type": "ExternalName"}), json!({})), &r));
    }

    #[test]
    fn pods_jobs_volumes_and_crds_follow_helm_3() {
        let r = Related::default();
        let pod = |conditions: Value| json!({"apiVersion": "v1", "kind": "Pod", "status": {"conditions": conditions}});
        assert!(ready(
            &pod(json!([{"type": "Ready", "status": "True"}])),
            &r
        ));
        // A completed pod is not Ready: Helm 3 waits for it (kstatus does not).
        assert!(!ready(
            &pod(json!([{"type": "Ready", "status": "False", "reason": "PodCompleted"}])),
            &r
        ));
        let job = |status: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "spec": {"completions": 1, "backoffLimit": 1}, "status": status});
        assert!(!ready(&job(json!({})), &r));
        assert!(ready(&job(json!({"succeeded": 1})), &r));
        assert!(matches!(
            of(&job(json!({"failed": 2})), &r, true),
            Readiness::Failed(_)
        ));
        // Without --wait-for-jobs a Job is not waited for.
        assert!(of(&job(json!({})), &r, false).is_ready());
        let pvc = |phase: &str| json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "status": {"phase": phase}});
        assert!(!ready(&pvc("Pending"), &r));
        assert!(ready(&pvc("Bound"), &r));
        let crd = |t: &str, s: &str| json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "status": {"conditions": [{"type": t, "status": s}]}});
        assert!(ready(&crd("Established", "True"), &r));
        assert!(ready(&crd("NamesAccepted", "False"), &r));
        assert!(!ready(&crd("Established", "False"), &r));
        // Kinds the rules do not name are ready once they exist.
        assert!(ready(
            &json!({"apiVersion": "example.com/v1", "kind": "Widget", "status": {"phase": "Broken"}}),
            &r
        ));
    }

    #[test]
    fn stateful_sets_daemon_sets_and_replica_sets_follow_helm_3() {
        let r = Related::default();
        let sts = |status: Value, partition: i64| {
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"generation": 1},
            "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": partition}}},
            "status": status})
        };
        let full = json!({"observedGeneration": 1, "updatedReplicas": 3, "readyReplicas": 3, "currentRevision": "a", "updateRevision": "a"});
        assert!(ready(&sts(full.clone(), 0), &r));
        let mut rolling = full.clone();
        rolling["updateRevision"] = "b".into();
        assert!(!ready(&sts(rolling.clone(), 0), &r));
        // A partitioned rollout: only the partition's pods are updated, revisions differ.
        let mut partitioned = rolling;
        partitioned["updatedReplicas"] = 1.into();
        assert!(ready(&sts(partitioned, 2), &r));
        let ds = |ready_pods: i64| {
            json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"generation": 1},
            "spec": {"updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}},
            "status": {"observedGeneration": 1, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberReady": ready_pods}})
        };
        assert!(!ready(&ds(1), &r));
        assert!(ready(&ds(2), &r));
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"generation": 1}, "status": {"observedGeneration": 1}});
        let pod = |ready: &str| json!({"metadata": {"name": "p"}, "status": {"conditions": [{"type": "Ready", "status": ready}]}});
        assert!(ready(
            &rs,
            &Related {
                replica_sets: &[],
                pods: &[pod("True")]
            }
        ));
        assert!(!ready(
            &rs,
            &Related {
                replica_sets: &[],
                pods: &[pod("True"), pod("False")]
            }
        ));
    }

    #[test]
    fn percentages_scale_as_kubernetes_rounds_them() {
        assert_eq!(scaled(&json!("25%"), 5, false), Some(1));
        assert_eq!(scaled(&json!("25%"), 5, true), Some(2));
        assert_eq!(scaled(&json!(2), 5, true), Some(2));
        assert_eq!(scaled(&json!("two"), 5, true), None);
    }
}

//! Readiness of one object, reaching the verdict of Helm 4's `--wait` (kstatus, the
//! fluxcd/cli-utils rules) with the Helm 4 / Flux overrides (a Job is ready only when
//! complete, as `--wait-for-jobs`; a Pod only when Ready or Succeeded). Anything stricter
//! is a per-release option ([`Strictness`]). Pure: takes the object as the API server
//! returned it.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    Ready,
    /// Not ready yet; the text says what it waits for (shown to the operator).
    InProgress(String),
    /// Will not become ready by waiting (e.g. a failed Job); the text says why.
    Failed(String),
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        matches!(self, Self::Ready)
    }
}

/// Waits stricter than Helm 4's, each opted into per release.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Strictness {
    /// A LoadBalancer Service is ready only once it has an ingress address (Helm 4 only
    /// needs its cluster IP).
    pub load_balancer_address: bool,
    /// Not stricter but looser: a Job counts once it has started, as kstatus judges it
    /// when Helm waits without `--wait-for-jobs` (Flux's `disableWaitForJobs`); a failed
    /// Job still fails the wait.
    pub job_started_is_enough: bool,
}

/// Readiness of `obj` (a whole object: apiVersion, kind, metadata, spec, status), with
/// Helm 4's verdict.
pub fn of(obj: &Value) -> Readiness {
    of_with(obj, Strictness::default())
}

/// Readiness of `obj` with the stricter checks `strict` asks for.
pub fn of_with(obj: &Value, strict: Strictness) -> Readiness {
    // kstatus' generic checks come first for every kind: an object being deleted is not
    // current, nor one whose controller has not observed its generation yet.
    if obj["metadata"]["deletionTimestamp"].is_string() {
        return Readiness::InProgress("being deleted".into());
    }
    if !obj["status"]["observedGeneration"].is_null()
        && let Some(r) = generation_observed(obj)
    {
        return r;
    }
    let kind = obj["kind"].as_str().unwrap_or_default();
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    match (group, kind) {
        ("apps", "Deployment") => deployment(obj),
        ("apps", "StatefulSet") => stateful_set(obj),
        ("apps", "DaemonSet") => daemon_set(obj),
        ("apps", "ReplicaSet") => replica_set(obj),
        ("batch", "Job") if strict.job_started_is_enough => job_started(obj),
        ("batch", "Job") => job(obj),
        ("", "Pod") => pod(obj),
        ("", "PersistentVolumeClaim") => pvc(obj),
        ("", "Service") => service(obj, strict),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => crd(obj),
        // Built-in kinds without a rollout are ready once they exist.
        ("", _)
        | (
            "apps"
            | "batch"
            | "rbac.authorization.k8s.io"
            | "networking.k8s.io"
            | "policy"
            | "storage.k8s.io"
            | "scheduling.k8s.io"
            | "autoscaling"
            | "coordination.k8s.io"
            | "admissionregistration.k8s.io"
            | "apiregistration.k8s.io"
            | "discovery.k8s.io"
            | "node.k8s.io"
            | "certificates.k8s.io",
            _,
        ) => Readiness::Ready,
        _ => custom_resource(obj),
    }
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn generation_observed(obj: &Value) -> Option<Readiness> {
    let generation = int(&obj["metadata"]["generation"]);
    let observed = &obj["status"]["observedGeneration"];
    if observed.is_null() || int(observed) < generation {
        Some(Readiness::InProgress(
            "waiting for the controller to observe the new generation".into(),
        ))
    } else {
        None
    }
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn deployment(obj: &Value) -> Readiness {
    if let Some(c) = condition(obj, "Progressing")
        && c["reason"] == "ProgressDeadlineExceeded"
    {
        return Readiness::Failed(format!(
            "ProgressDeadlineExceeded: {}",
            c["message"]
                .as_str()
                .unwrap_or("rollout stopped progressing")
        ));
    }
    if obj["spec"]["paused"].as_bool() == Some(true) {
        return Readiness::InProgress("the Deployment is paused".into());
    }
    if let Some(r) = generation_observed(obj) {
        return r;
    }
    let desired = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let s = &obj["status"];
    let (replicas, updated, ready, available) = (
        int(&s["replicas"]),
        int(&s["updatedReplicas"]),
        int(&s["readyReplicas"]),
        int(&s["availableReplicas"]),
    );
    if updated < desired {
        return Readiness::InProgress(format!("{updated} of {desired} replicas updated"));
    }
    if replicas > updated {
        return Readiness::InProgress(format!(
            "{} old replica(s) pending termination",
            replicas - updated
        ));
    }
    if available < desired {
        return Readiness::InProgress(format!("{available} of {desired} replicas available"));
    }
    if ready < desired {
        return Readiness::InProgress(format!("{ready} of {desired} replicas ready"));
    }
    Readiness::Ready
}

fn stateful_set(obj: &Value) -> Readiness {
    if let Some(r) = generation_observed(obj) {
        return r;
    }
    let strategy = &obj["spec"]["updateStrategy"];
    // As kstatus: an OnDelete StatefulSet is rolled by its user, not waited for.
    if strategy["type"] == "OnDelete" {
        return Readiness::Ready;
    }
    let desired = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let s = &obj["status"];
    let ready = int(&s["readyReplicas"]);
    if ready < desired {
        return Readiness::InProgress(format!("{ready} of {desired} replicas ready"));
    }
    let replicas = int(&s["replicas"]);
    if replicas > desired {
        return Readiness::InProgress(format!("{} old replicas terminating", replicas - desired));
    }
    let partition = int(&strategy["rollingUpdate"]["partition"]);
    if partition > 0 {
        // Only ordinals >= partition are updated.
        let expected = (desired - partition).max(0);
        let updated = int(&s["updatedReplicas"]);
        return if updated < expected {
            Readiness::InProgress(format!(
                "{updated} of {expected} replicas updated (partition {partition})"
            ))
        } else {
            Readiness::Ready
        };
    }
    let (current, update) = (&s["currentRevision"], &s["updateRevision"]);
    if !update.is_null() && current != update {
        let updated = int(&s["updatedReplicas"]);
        return Readiness::InProgress(format!("{updated} of {desired} replicas updated"));
    }
    Readiness::Ready
}

fn daemon_set(obj: &Value) -> Readiness {
    if let Some(r) = generation_observed(obj) {
        return r;
    }
    let s = &obj["status"];
    let desired = int(&s["desiredNumberScheduled"]);
    let updated = int(&s["updatedNumberScheduled"]);
    let available = int(&s["numberAvailable"]);
    if updated < desired {
        return Readiness::InProgress(format!("{updated} of {desired} pods updated"));
    }
    if available < desired {
        return Readiness::InProgress(format!("{available} of {desired} pods available"));
    }
    Readiness::Ready
}

fn replica_set(obj: &Value) -> Readiness {
    if let Some(r) = generation_observed(obj) {
        return r;
    }
    let desired = obj["spec"]["replicas"].as_i64().unwrap_or(1);
    let available = int(&obj["status"]["availableReplicas"]);
    if available < desired {
        Readiness::InProgress(format!("{available} of {desired} replicas available"))
    } else {
        Readiness::Ready
    }
}

fn job(obj: &Value) -> Readiness {
    let is = |t: &str| condition(obj, t).is_some_and(|c| c["status"] == "True");
    if is("Failed") {
        let c = condition(obj, "Failed").unwrap();
        return Readiness::Failed(format!(
            "Job failed: {}",
            c["reason"]
                .as_str()
                .or(c["message"].as_str())
                .unwrap_or("failed")
        ));
    }
    if is("Complete") {
        return Readiness::Ready;
    }
    let succeeded = int(&obj["status"]["succeeded"]);
    let completions = obj["spec"]["completions"].as_i64().unwrap_or(1);
    Readiness::InProgress(format!("{succeeded} of {completions} completions"))
}

/// kstatus' own Job rule: complete or started is current, failed is failed.
fn job_started(obj: &Value) -> Readiness {
    match job(obj) {
        Readiness::InProgress(_)
            if obj["status"]["startTime"]
                .as_str()
                .is_none_or(str::is_empty) =>
        {
            Readiness::InProgress("Job not started".into())
        }
        Readiness::InProgress(_) => Readiness::Ready,
        verdict => verdict,
    }
}

fn pod(obj: &Value) -> Readiness {
    match obj["status"]["phase"].as_str() {
        Some("Succeeded") => Readiness::Ready,
        Some("Failed") => Readiness::Failed(format!(
            "Pod failed: {}",
            obj["status"]["reason"]
                .as_str()
                .unwrap_or("a container exited non-zero")
        )),
        _ if condition(obj, "Ready").is_some_and(|c| c["status"] == "True") => Readiness::Ready,
        phase => Readiness::InProgress(format!("pod {}", phase.unwrap_or("Pending"))),
    }
}

fn pvc(obj: &Value) -> Readiness {
    match obj["status"]["phase"].as_str() {
        Some("Bound") => Readiness::Ready,
        phase => Readiness::InProgress(format!("claim {}", phase.unwrap_or("Pending"))),
    }
}

fn service(obj: &Value, strict: Strictness) -> Readiness {
    if obj["spec"]["type"] != "LoadBalancer" {
        return Readiness::Ready;
    }
    // Helm 4 (kstatus) waits only for the cluster IP of a LoadBalancer Service.
    if obj["spec"]["clusterIP"].as_str().is_none_or(str::is_empty) {
        return Readiness::InProgress("waiting for a cluster IP".into());
    }
    let has_ingress = obj["status"]["loadBalancer"]["ingress"]
        .as_array()
        .is_some_and(|i| !i.is_empty());
    if !strict.load_balancer_address || has_ingress {
        Readiness::Ready
    } else {
        Readiness::InProgress("waiting for a load balancer address".into())
    }
}

fn crd(obj: &Value) -> Readiness {
    if let Some(c) = condition(obj, "NamesAccepted")
        && c["status"] == "False"
    {
        return Readiness::Failed(format!(
            "names not accepted: {}",
            c["message"].as_str().unwrap_or_default()
        ));
    }
    match condition(obj, "Established") {
        Some(c) if c["status"] == "True" => Readiness::Ready,
        Some(c) if c["status"] == "False" && c["reason"] != "Installing" => {
            Readiness::Failed(format!(
                "not established: {}",
                c["message"].as_str().unwrap_or_default()
            ))
        }
        _ => Readiness::InProgress("waiting for the CRD to be established".into()),
    }
}

/// kstatus for custom resources: generation observed when reported, then the Ready and
/// Stalled conditions when present; no status at all means ready once it exists.
fn custom_resource(obj: &Value) -> Readiness {
    let status = &obj["status"];
    if !status["observedGeneration"].is_null()
        && let Some(r) = generation_observed(obj)
    {
        return r;
    }
    if let Some(c) = condition(obj, "Reconciling")
        && c["status"] == "True"
    {
        return Readiness::InProgress(format!(
            "Reconciling: {}",
            c["message"]
                .as_str()
                .unwrap_or("the controller is working on it")
        ));
    }
    if let Some(c) = condition(obj, "Stalled")
        && c["status"] == "True"
    {
        return Readiness::Failed(format!(
            "Stalled: {}",
            c["message"].as_str().unwrap_or("the controller gave up")
        ));
    }
    match condition(obj, "Ready") {
        Some(c) if c["status"] == "True" => Readiness::Ready,
        Some(c) => Readiness::InProgress(format!(
            "Ready={}: {}",
            c["status"].as_str().unwrap_or("Unknown"),
            c["message"].as_str().unwrap_or("")
        )),
        None => Readiness::Ready,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deploy(status: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "generation": 2},
               "spec": {"replicas": 3}, "status": status})
    }

    #[test]
    fn deployment_ready_only_when_every_count_matches() {
        let full = json!({"observedGeneration": 2, "replicas": 3, "updatedReplicas": 3,
                          "readyReplicas": 3, "availableReplicas": 3});
        assert_eq!(of(&deploy(full.clone())), Readiness::Ready);

        let mut stale = full.clone();
        stale["observedGeneration"] = json!(1);
        assert!(matches!(of(&deploy(stale)), Readiness::InProgress(_)));

        let mut old = full.clone();
        old["replicas"] = json!(4);
        assert_eq!(
            of(&deploy(old)),
            Readiness::InProgress("1 old replica(s) pending termination".into())
        );

        let mut unavailable = full;
        unavailable["availableReplicas"] = json!(1);
        assert_eq!(
            of(&deploy(unavailable)),
            Readiness::InProgress("1 of 3 replicas available".into())
        );
    }

    #[test]
    fn deployment_progress_deadline_fails() {
        let d = deploy(json!({"observedGeneration": 2, "conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
             "message": "ReplicaSet \"web-1\" has timed out progressing."}]}));
        assert!(matches!(of(&d), Readiness::Failed(m) if m.contains("ProgressDeadlineExceeded")));
    }

    #[test]
    fn statefulset_respects_partition_and_revisions() {
        let sts = |spec: Value, status: Value| {
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
                   "metadata": {"generation": 1}, "spec": spec, "status": status})
        };
        let rolling = sts(
            json!({"replicas": 3}),
            json!({"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 1,
                   "currentRevision": "a", "updateRevision": "b"}),
        );
        assert!(matches!(of(&rolling), Readiness::InProgress(_)));
        let partitioned = sts(
            json!({"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}}),
            json!({"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 1,
                   "currentRevision": "a", "updateRevision": "b"}),
        );
        assert_eq!(of(&partitioned), Readiness::Ready);
        let done = sts(
            json!({"replicas": 3}),
            json!({"observedGeneration": 1, "readyReplicas": 3, "updatedReplicas": 3,
                   "currentRevision": "b", "updateRevision": "b"}),
        );
        assert_eq!(of(&done), Readiness::Ready);
    }

    #[test]
    fn daemonset_needs_all_updated_and_available() {
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"generation": 1},
            "status": {"observedGeneration": 1, "desiredNumberScheduled": 2,
                       "updatedNumberScheduled": 2, "numberAvailable": 1}});
        assert!(matches!(of(&ds), Readiness::InProgress(_)));
    }

    #[test]
    fn job_is_ready_only_when_complete() {
        let job = |conds: Value| {
            json!({"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {}, "spec": {}, "status": {"conditions": conds}})
        };
        assert!(matches!(of(&job(json!([]))), Readiness::InProgress(_)));
        assert_eq!(
            of(&job(json!([{"type": "Complete", "status": "True"}]))),
            Readiness::Ready
        );
        assert!(matches!(
            of(&job(json!([{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]))),
            Readiness::Failed(m) if m.contains("BackoffLimitExceeded")
        ));
    }

    #[test]
    fn without_waiting_for_jobs_a_started_job_is_ready_as_kstatus_says() {
        let started = Strictness {
            job_started_is_enough: true,
            ..Strictness::default()
        };
        let job = |status: Value| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {}, "spec": {}, "status": status});
        assert_eq!(
            of_with(&job(json!({})), started),
            Readiness::InProgress("Job not started".into())
        );
        let running = job(json!({"startTime": "2026-11-26T10:00:00Z", "active": 1}));
        assert_eq!(of_with(&running, started), Readiness::Ready);
        assert!(matches!(of(&running), Readiness::InProgress(_)));
        assert!(matches!(
            of_with(
                &job(json!({"startTime": "2026-11-26T10:00:00Z",
                "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]})),
                started
            ),
            Readiness::Failed(_)
        ));
    }

    #[test]
    fn pod_ready_or_succeeded() {
        let pod = |status: Value| json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}, "status": status});
        assert_eq!(of(&pod(json!({"phase": "Succeeded"}))), Readiness::Ready);
        assert_eq!(
            of(&pod(
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
            )),
            Readiness::Ready
        );
        assert!(matches!(
            of(&pod(
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]})
            )),
            Readiness::InProgress(_)
        ));
        assert!(matches!(
            of(&pod(json!({"phase": "Failed"}))),
            Readiness::Failed(_)
        ));
    }

    #[test]
    fn pvc_service_crd_and_plain_objects() {
        assert!(matches!(
            of(
                &json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "status": {"phase": "Pending"}})
            ),
            Readiness::InProgress(_)
        ));
        assert_eq!(
            of(&json!({"apiVersion": "v1", "kind": "Service", "spec": {"type": "ClusterIP"}})),
            Readiness::Ready
        );
        // Helm 4 waits for a LoadBalancer's cluster IP only; the address is opt-in.
        let lb = json!({"apiVersion": "v1", "kind": "Service",
            "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.7"}, "status": {}});
        assert_eq!(of(&lb), Readiness::Ready);
        let strict = Strictness {
            load_balancer_address: true,
            ..Strictness::default()
        };
        assert!(matches!(of_with(&lb, strict), Readiness::InProgress(_)));
        let mut with_address = lb.clone();
        with_address["status"] = json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}});
        assert_eq!(of_with(&with_address, strict), Readiness::Ready);
        assert!(matches!(
            of(&json!({"apiVersion": "v1", "kind": "Service", "spec": {"type": "LoadBalancer"}})),
            Readiness::InProgress(_)
        ));
        assert!(matches!(
            of(
                &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "status": {}})
            ),
            Readiness::InProgress(_)
        ));
        assert_eq!(
            of(&json!({"apiVersion": "v1", "kind": "ConfigMap"})),
            Readiness::Ready
        );
    }

    #[test]
    fn generic_kstatus_checks_apply_to_every_kind() {
        let deleting = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}});
        assert!(matches!(of(&deleting), Readiness::InProgress(_)));
        let hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"generation": 2}, "status": {"observedGeneration": 1}});
        assert!(matches!(of(&hpa), Readiness::InProgress(_)));
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "status": {"conditions": [{"type": "NamesAccepted", "status": "False", "message": "taken"}]}});
        assert!(matches!(of(&crd), Readiness::Failed(_)));
        let reconciling = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "status": {"conditions": [{"type": "Reconciling", "status": "True"},
                                      {"type": "Ready", "status": "True"}]}});
        assert!(matches!(of(&reconciling), Readiness::InProgress(_)));
        let on_delete = json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"generation": 1},
            "spec": {"replicas": 3, "updateStrategy": {"type": "OnDelete"}},
            "status": {"observedGeneration": 1, "readyReplicas": 1}});
        assert_eq!(of(&on_delete), Readiness::Ready);
    }

    #[test]
    fn custom_resources_follow_kstatus() {
        let cr = |status: Value| {
            json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"generation": 3}, "status": status})
        };
        assert_eq!(of(&cr(json!(null))), Readiness::Ready);
        assert!(matches!(
            of(&cr(json!({"observedGeneration": 2}))),
            Readiness::InProgress(_)
        ));
        assert!(matches!(
            of(&cr(json!({"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "False", "message": "db down"}]}))),
            Readiness::InProgress(m) if m.contains("db down")
        ));
        assert!(matches!(
            of(&cr(
                json!({"conditions": [{"type": "Stalled", "status": "True", "message": "bad spec"}]})
            )),
            Readiness::Failed(_)
        ));
        assert_eq!(
            of(&cr(
                json!({"observedGeneration": 3, "conditions": [{"type": "Ready", "status": "True"}]})
            )),
            Readiness::Ready
        );
    }
}

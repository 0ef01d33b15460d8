//! Hooks and tests, run as Helm runs them (`pkg/action/hooks.go` in Helm 4).

use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::runtime::watcher;

use super::Error;
use super::applier::{Applier, Target};
use super::manifest::{ObjectRef, parse_manifest};
use crate::helm::release::{
    Hook, HookExecution, HookPhase, Timestamp, hook_delete_policy as policy,
};

/// The hooks of `event` in the order Helm runs them: by weight, then by name; hooks of
/// equal weight and name keep their order (the renderer's, which is Helm's kind order).
pub fn execution_order(hooks: &[Hook], event: &str) -> Vec<usize> {
    let mut order: Vec<usize> = (0..hooks.len())
        .filter(|&i| hooks[i].events.iter().any(|e| e == event))
        .collect();
    order.sort_by(|&a, &b| {
        (hooks[a].weight, &hooks[a].name).cmp(&(hooks[b].weight, &hooks[b].name))
    });
    order
}

fn has_policy(hook: &Hook, wanted: &str) -> bool {
    hook.delete_policies.iter().any(|p| p == wanted)
}

/// Helm never deletes CRD hooks: that could garbage-collect every object of the kind.
fn deletable(hook: &Hook, wanted: &str) -> bool {
    hook.kind != "CustomResourceDefinition" && has_policy(hook, wanted)
}

/// Why a hook failed. Held as text by `Error::HookFailed`, not as its source, so
/// `Error::cluster_cause` counts a hook's failure as the release's, whatever the cause.
#[derive(Debug, thiserror::Error)]
pub enum HookFailure {
    /// Its objects could not be read or applied, or an earlier run's not deleted.
    #[error("{0}")]
    Objects(Box<Error>),
    #[error("timed out after {}s waiting for {object} to finish", .timeout.as_secs())]
    TimedOut {
        object: ObjectRef,
        timeout: Duration,
    },
    #[error("{0} was deleted before it finished")]
    Deleted(ObjectRef),
    #[error("cannot watch it: {0}")]
    Watch(watcher::Error),
    /// The Job's Failed condition, with its reason and message.
    #[error("job failed: {reason}{}", after_colon(message.as_deref()))]
    JobFailed {
        reason: String,
        message: Option<String>,
    },
    /// The Pod's phase is Failed: its reason or message, and the first container that
    /// exited with an error.
    #[error(
        "pod failed{}{}",
        after_colon(why.as_deref()),
        exited.as_ref().map(|e| format!("; {e}")).unwrap_or_default()
    )]
    PodFailed {
        why: Option<String>,
        exited: Option<ContainerExit>,
    },
    /// It succeeded, and its hook-succeeded deletion failed.
    #[error("succeeded, but deleting it failed: {0}")]
    Cleanup(Box<Error>),
}

/// A container of a failed hook Pod that exited with an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("container {name} exited with code {code}{}", after_colon(why.as_deref()))]
pub struct ContainerExit {
    pub name: String,
    pub code: i32,
    pub why: Option<String>,
}

/// `: text` when there is a text.
fn after_colon(text: Option<&str>) -> String {
    text.map(|t| format!(": {t}")).unwrap_or_default()
}

/// The hook a [`Applier::run_hooks_reporting`] runs now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningHook {
    /// `Job/web-migrate`.
    pub object: String,
    /// `pre-upgrade`, `post-install`, `test`, ...
    pub event: String,
    pub started_at: Timestamp,
    /// When its timeout ends it.
    pub deadline: Timestamp,
}

impl Applier {
    /// Runs the hooks of `event` (`pre-install`, ..., or `test`) in `namespace` as Helm
    /// does: ordered by weight then name; for each, the `before-hook-creation` policy
    /// (the default when a hook names none) deletes an existing object of its name and
    /// waits for it to go; the hook is server-side applied (forced, field manager
    /// `wheelhouse`, without the release ownership metadata, which Helm leaves off hooks)
    /// and `last_run` records start, end and
    /// phase; a Job is waited for until Complete or Failed and a Pod until Succeeded or
    /// Failed, each within `timeout`; other kinds only need to be created. The first hook
    /// that fails stops the run with an error naming it and the reason; it is deleted if
    /// it has `hook-failed`, and the hooks that had succeeded are deleted if they have
    /// `hook-succeeded`. When all succeed, those with `hook-succeeded` are deleted (in
    /// reverse order) and waited for.
    ///
    /// There is deliberately no cancellation token (docs/design.md, "Cancellation: a wait, never an apply"): hooks may be database
    /// migrations and always run to completion; only health-check waits are cancelled.
    /// Callers must likewise not drop this future part-way (e.g. as a losing
    /// `select!` branch).
    pub async fn run_hooks(
        &self,
        hooks: &mut [Hook],
        event: &str,
        namespace: &str,
        timeout: Duration,
    ) -> Result<(), Error> {
        self.run_hooks_reporting(hooks, event, namespace, timeout, None)
            .await
    }

    /// [`Applier::run_hooks`], telling `report` which hook runs (and `None` when none does),
    /// so status and the dashboard can show it.
    pub async fn run_hooks_reporting(
        &self,
        hooks: &mut [Hook],
        event: &str,
        namespace: &str,
        timeout: Duration,
        report: Option<&tokio::sync::watch::Sender<Option<RunningHook>>>,
    ) -> Result<(), Error> {
        let result = self
            .run_each(hooks, event, namespace, timeout, report)
            .await;
        if let Some(report) = report {
            report.send_replace(None);
        }
        result
    }

    async fn run_each(
        &self,
        hooks: &mut [Hook],
        event: &str,
        namespace: &str,
        timeout: Duration,
        report: Option<&tokio::sync::watch::Sender<Option<RunningHook>>>,
    ) -> Result<(), Error> {
        let order = execution_order(hooks, event);
        let mut finished: Vec<(usize, Vec<Target>)> = Vec::with_capacity(order.len());
        for &i in &order {
            let hook = &mut hooks[i];
            if hook.delete_policies.is_empty() {
                hook.delete_policies
                    .push(policy::BEFORE_HOOK_CREATION.to_string());
            }
            let failed = |hook: &Hook, reason: HookFailure| Error::HookFailed {
                event: event.to_string(),
                name: hook.name.clone(),
                path: hook.path.clone(),
                reason: Box::new(reason),
            };

            let targets = match self.hook_targets(hook, namespace).await {
                Ok(targets) => targets,
                Err(e) => return Err(failed(hook, HookFailure::Objects(Box::new(e)))),
            };
            if deletable(hook, policy::BEFORE_HOOK_CREATION) {
                for target in &targets {
                    if let Err(e) = self.delete_and_wait(target, timeout).await {
                        return Err(failed(hook, HookFailure::Objects(Box::new(e))));
                    }
                }
            }

            let started = Timestamp::now();
            hook.last_run = HookExecution {
                started_at: Some(started),
                completed_at: None,
                phase: HookPhase::Running,
            };
            if let Some(report) = report {
                report.send_replace(Some(RunningHook {
                    object: format!("{}/{}", hook.kind, hook.name),
                    event: event.to_string(),
                    started_at: started,
                    deadline: started + timeout,
                }));
            }
            let outcome = self.execute_hook(&targets, timeout).await;
            hook.last_run.completed_at = Some(Timestamp::now());
            match outcome {
                Ok(()) => {
                    hook.last_run.phase = HookPhase::Succeeded;
                    finished.push((i, targets));
                }
                Err(reason) => {
                    hook.last_run.phase = HookPhase::Failed;
                    let error = failed(hook, reason);
                    // Clean-up after a failure is best effort: the failure is what matters.
                    if deletable(hook, policy::HOOK_FAILED) {
                        self.delete_quietly(&targets, timeout).await;
                    }
                    for (j, targets) in &finished {
                        if deletable(&hooks[*j], policy::HOOK_SUCCEEDED) {
                            self.delete_quietly(targets, timeout).await;
                        }
                    }
                    return Err(error);
                }
            }
        }

        for (i, targets) in finished.iter().rev() {
            let hook = &hooks[*i];
            if deletable(hook, policy::HOOK_SUCCEEDED) {
                for target in targets {
                    self.delete_and_wait(target, timeout)
                        .await
                        .map_err(|e| Error::HookFailed {
                            event: event.to_string(),
                            name: hook.name.clone(),
                            path: hook.path.clone(),
                            reason: Box::new(HookFailure::Cleanup(Box::new(e))),
                        })?;
                }
            }
        }
        Ok(())
    }

    async fn hook_targets(&self, hook: &Hook, namespace: &str) -> Result<Vec<Target>, Error> {
        let mut targets = Vec::new();
        for obj in parse_manifest(&hook.manifest)? {
            targets.push(self.target(obj, namespace).await?);
        }
        Ok(targets)
    }

    async fn delete_quietly(&self, targets: &[Target], timeout: Duration) {
        for target in targets {
            if let Err(e) = self.delete_and_wait(target, timeout).await {
                tracing::warn!(object = %target.reference, error = %e, "cannot delete hook object");
            }
        }
    }

    /// Applies a hook's objects and waits for its Jobs and Pods to finish; the error is
    /// the reason it failed.
    async fn execute_hook(&self, targets: &[Target], timeout: Duration) -> Result<(), HookFailure> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut uids = Vec::with_capacity(targets.len());
        for target in targets {
            uids.push(
                self.server_side_apply(target)
                    .await
                    .map_err(|e| HookFailure::Objects(Box::new(e)))?,
            );
        }
        for (target, uid) in targets.iter().zip(uids) {
            let reference = &target.reference;
            let namespace = reference.namespace.as_deref().unwrap_or_default();
            let waited = match (reference.group(), reference.kind.as_str()) {
                ("batch", "Job") => {
                    let api: Api<Job> = Api::namespaced(self.client.clone(), namespace);
                    wait_for(api, &reference.name, uid, deadline, job_outcome).await
                }
                ("", "Pod") => {
                    let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
                    wait_for(api, &reference.name, uid, deadline, pod_outcome).await
                }
                _ => continue,
            };
            waited.map_err(|reason| match reason {
                Waited::TimedOut => HookFailure::TimedOut {
                    object: reference.clone(),
                    timeout,
                },
                Waited::Deleted => HookFailure::Deleted(reference.clone()),
                Waited::Failed(why) => why,
            })?;
        }
        Ok(())
    }
}

enum Waited {
    TimedOut,
    Deleted,
    Failed(HookFailure),
}

/// Watches the object we created (`uid`) until `outcome` says it finished, it goes
/// away, or the deadline passes. Events about an earlier object of the same name (the
/// one `before-hook-creation` just deleted) are not about this run and are ignored.
async fn wait_for<K>(
    api: Api<K>,
    name: &str,
    uid: Option<String>,
    deadline: tokio::time::Instant,
    outcome: fn(&K) -> Option<Result<(), HookFailure>>,
) -> Result<(), Waited>
where
    K: kube::Resource + Clone + std::fmt::Debug + Send + serde::de::DeserializeOwned + 'static,
{
    let ours = |obj: &K| uid.is_none() || obj.meta().uid == uid;
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut events = std::pin::pin!(watcher(api, config));
    // Whether the current (re)list showed our object: a relist without it means it went
    // while the watch was down.
    let mut listed = false;
    let watched = async {
        while let Some(event) = events.try_next().await? {
            match event {
                watcher::Event::Init => listed = false,
                watcher::Event::InitApply(obj) | watcher::Event::Apply(obj) if ours(&obj) => {
                    listed = true;
                    if let Some(result) = outcome(&obj) {
                        return Ok(Some(result));
                    }
                }
                watcher::Event::Delete(obj) if ours(&obj) => return Ok(None),
                watcher::Event::InitDone if !listed => return Ok(None),
                _ => {}
            }
        }
        Ok::<_, watcher::Error>(None)
    };
    match tokio::time::timeout_at(deadline, watched).await {
        Err(_) => Err(Waited::TimedOut),
        Ok(Err(e)) => Err(Waited::Failed(HookFailure::Watch(e))),
        Ok(Ok(None)) => Err(Waited::Deleted),
        Ok(Ok(Some(Ok(())))) => Ok(()),
        Ok(Ok(Some(Err(reason)))) => Err(Waited::Failed(reason)),
    }
}

/// A Job is done when its Complete or Failed condition is True.
fn job_outcome(job: &Job) -> Option<Result<(), HookFailure>> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    let is_true = |kind: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == kind && c.status == "True")
    };
    if is_true("Complete").is_some() {
        return Some(Ok(()));
    }
    let failed = is_true("Failed")?;
    Some(Err(HookFailure::JobFailed {
        reason: failed.reason.as_deref().unwrap_or("Failed").to_owned(),
        message: failed.message.clone().filter(|m| !m.is_empty()),
    }))
}

/// A Pod is done when its phase is Succeeded or Failed.
fn pod_outcome(pod: &Pod) -> Option<Result<(), HookFailure>> {
    let status = pod.status.as_ref()?;
    match status.phase.as_deref()? {
        "Succeeded" => Some(Ok(())),
        "Failed" => {
            let exited = status
                .container_statuses
                .iter()
                .flatten()
                .filter_map(|c| Some((c, c.state.as_ref()?.terminated.as_ref()?)))
                .find(|(_, t)| t.exit_code != 0)
                .map(|(container, t)| ContainerExit {
                    name: container.name.clone(),
                    code: t.exit_code,
                    why: t.message.clone().or_else(|| t.reason.clone()),
                });
            Some(Err(HookFailure::PodFailed {
                why: status.reason.clone().or_else(|| status.message.clone()),
                exited,
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The outcomes as the text of their failure, which the tests compare.
    fn job_outcome(job: &Job) -> Option<Result<(), String>> {
        super::job_outcome(job).map(|r| r.map_err(|e| e.to_string()))
    }

    fn pod_outcome(pod: &Pod) -> Option<Result<(), String>> {
        super::pod_outcome(pod).map(|r| r.map_err(|e| e.to_string()))
    }

    fn hook(name: &str, weight: i32, events: &[&str]) -> Hook {
        Hook {
            name: name.to_string(),
            weight,
            events: events.iter().map(|e| e.to_string()).collect(),
            ..Hook::default()
        }
    }

    #[test]
    fn hooks_run_by_weight_then_name() {
        let hooks = [
            hook("b", 0, &["pre-install"]),
            hook("late", 5, &["pre-install", "pre-upgrade"]),
            hook("a", 0, &["pre-install"]),
            hook("test", -10, &["test"]),
            hook("early", -1, &["pre-install"]),
        ];
        assert_eq!(execution_order(&hooks, "pre-install"), [4, 2, 0, 1]);
        assert_eq!(execution_order(&hooks, "pre-upgrade"), [1]);
        assert_eq!(execution_order(&hooks, "test"), [3]);
        assert!(execution_order(&hooks, "post-delete").is_empty());
    }

    #[test]
    fn job_outcomes() {
        let job = |conditions: serde_json::Value| -> Job {
            serde_json::from_value(serde_json::json!({"status": {"conditions": conditions}}))
                .unwrap()
        };
        assert_eq!(job_outcome(&Job::default()), None);
        assert_eq!(
            job_outcome(&job(serde_json::json!([
                {"type": "SuccessCriteriaMet", "status": "True"}
            ]))),
            None
        );
        assert_eq!(
            job_outcome(&job(
                serde_json::json!([{"type": "Complete", "status": "True"}])
            )),
            Some(Ok(()))
        );
        assert_eq!(
            job_outcome(&job(serde_json::json!([
                {"type": "FailureTarget", "status": "True"},
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit"}
            ]))),
            Some(Err(
                "job failed: BackoffLimitExceeded: Job has reached the specified backoff limit"
                    .to_string()
            ))
        );
    }

    #[test]
    fn pod_outcomes() {
        let pod = |status: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({ "status": status })).unwrap()
        };
        assert_eq!(
            pod_outcome(&pod(serde_json::json!({"phase": "Running"}))),
            None
        );
        assert_eq!(
            pod_outcome(&pod(serde_json::json!({"phase": "Succeeded"}))),
            Some(Ok(()))
        );
        let failed = pod(serde_json::json!({
            "phase": "Failed",
            "containerStatuses": [{
                "name": "test", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 1, "reason": "Error",
                                         "message": "connection refused"}}
            }]
        }));
        assert_eq!(
            pod_outcome(&failed),
            Some(Err(
                "pod failed; container test exited with code 1: connection refused".to_string()
            ))
        );
    }
}

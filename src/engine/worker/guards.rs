//! What keeps a release from being acted on, checked before anything is planned: another
//! HelmRelease manages its Helm release, its dependsOn leads back to itself, or a
//! dependency is not Ready yet. The first two stall it; the last is waited for.

use std::time::Duration;

use kube::Api;
use kube::runtime::events::EventType;

use crate::api::{HelmRelease, HelmReleaseStatus};
use crate::engine::claim;
use crate::engine::run::Run;
use crate::engine::status::{self, Verdict, condition};
use crate::engine::vocabulary::ReleaseKey;
use crate::helm::release::Release;
use crate::helm::render::cel::CelError;

/// Ready=False and Stalled=True with `reason`, an Event, and the next look after
/// `interval` (what would lift it may happen elsewhere, e.g. another object is deleted).
pub(super) async fn stall(
    run: &mut Run<'_>,
    why: &'static str,
    message: String,
    interval: Duration,
) -> Duration {
    let generation = run.hr.metadata.generation;
    let changed = run
        .hr
        .condition(condition::STALLED)
        .is_none_or(|c| c.reason != why || c.message != message);
    stalled(&mut run.status, why, &message, generation);
    run.write_status().await;
    if changed {
        tracing::warn!(release = %run.key, reason = why, "{}", run.intent.masker.mask(&message));
        run.event(EventType::Warning, why, "Reconcile", message)
            .await;
    }
    interval
}

/// What the tenancy policy holds a release to, when it holds it.
pub(super) enum Tenancy {
    /// A reference leaves the HelmRelease's namespace under `--no-cross-namespace-refs`:
    /// refused until the spec changes (Flux stalls it too).
    Refused(String),
    /// The ServiceAccount the release acts as does not exist: nothing is done as anyone
    /// else; tried again as soon as it is created.
    MissingAccount(String),
}

/// Whether the tenancy policy lets this release act now (as its [`Run::acting`]).
pub(super) async fn tenancy(run: &Run<'_>) -> crate::engine::Result<Option<Tenancy>> {
    let policy = run.ctx.policy();
    if let Some(refused) = policy.refused_reference(&run.hr) {
        return Ok(Some(Tenancy::Refused(refused)));
    }
    let crate::cluster::tenancy::Identity::ServiceAccount { namespace, name } =
        &run.acting.identity
    else {
        return Ok(None);
    };
    // On a remote cluster the account is impersonated there, where the engine may not
    // read ServiceAccounts: the remote API server refuses what it does not know (Flux
    // does not look either).
    if run.acting.remote.is_some() {
        return Ok(None);
    }
    // Read as the engine: impersonating a ServiceAccount that does not exist would act
    // with the rights of every ServiceAccount's groups, which is never what was meant.
    if crate::cluster::tenancy::service_account_exists(&run.ctx.client, namespace, name).await? {
        return Ok(None);
    }
    run.ctx
        .known
        .missing_accounts
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert((namespace.clone(), name.clone()));
    let why = if run.hr.spec.service_account_name.is_some() {
        "spec.serviceAccountName names it"
    } else {
        "the cluster's tenancy lockdown makes it every release's default (--default-service-account)"
    };
    Ok(Some(Tenancy::MissingAccount(format!(
        "ServiceAccount {namespace}/{name} does not exist ({why}): the release acts only as that ServiceAccount, so nothing is done until it is created"
    ))))
}

/// Why this HelmRelease must leave its Helm release alone, if it must: another
/// HelmRelease that still exists manages it. An unclaimed release (the helm CLI's, or
/// one whose HelmRelease is gone) is claimed here, before anything is done to it.
pub(super) async fn claimed_elsewhere(run: &mut Run<'_>) -> crate::engine::Result<Option<String>> {
    Ok(claim_check(run).await?.refused)
}

/// What [`claim_check`] found: why the release must be left alone, if it must, and the
/// history it read, unless claiming the release changed it.
struct Claimed {
    refused: Option<String>,
    history: Option<Vec<Release>>,
}

async fn claim_check(run: &Run<'_>) -> crate::engine::Result<Claimed> {
    let uid = run.hr.metadata.uid.clone().unwrap_or_default();
    let history = run.storage.history(&run.target.release_name).await?;
    let claim = claim::Claim::of(history.last(), &uid);
    let free = match &claim {
        claim::Claim::Ours => {
            return Ok(Claimed {
                refused: None,
                history: Some(history),
            });
        }
        claim::Claim::Unclaimed => true,
        other => !claim::holder_exists(&run.ctx.client, other).await?,
    };
    if free {
        if let Some(newest) = history.last() {
            claim::stamp(&run.acting.client, run.storage.namespace(), newest, &run.hr).await?;
        }
        return Ok(Claimed {
            refused: None,
            history: None,
        });
    }
    Ok(Claimed {
        refused: Some(format!(
            "Helm release {}/{} is managed by {}; this HelmRelease does nothing to it, and deleting it uninstalls nothing, until it names another release (spec.releaseName, spec.storageNamespace) or that HelmRelease is gone",
            run.storage.namespace(),
            run.target.release_name,
            claim.describe_owner()
        )),
        history: None,
    })
}

/// Why this HelmRelease must leave its (release name, target namespace) alone, if it
/// must: a live release stored in another namespace already deploys it (the helm CLI's
/// release in the target namespace, or another HelmRelease's storage). Helm's ownership
/// metadata cannot tell the two apart, so acting would overwrite its objects and
/// deleting this HelmRelease would delete them. Keeps what it found in `run.target.elsewhere`
/// for the actions, which refuse and never delete those objects.
pub(super) async fn identity_taken_elsewhere(
    run: &mut Run<'_>,
) -> crate::engine::Result<Option<String>> {
    let scan = scan_elsewhere(run).await?;
    Ok(take_scan(run, scan))
}

pub(super) async fn scan_elsewhere(
    run: &Run<'_>,
) -> crate::engine::Result<Option<crate::helm::release::Scan>> {
    let (client, records) = run.ctx.records_of(&run.acting);
    Ok(crate::helm::release::stored_elsewhere(
        client,
        records,
        run.storage.namespace(),
        &run.target.release_name,
        &run.target.namespace,
        run.hr.metadata.uid.as_deref(),
        run.storage.floor(),
    )
    .await?)
}

pub(super) fn take_scan(
    run: &mut Run<'_>,
    scan: Option<crate::helm::release::Scan>,
) -> Option<String> {
    let found = scan.unwrap_or_default();
    run.target.elsewhere = found.found;
    let first = run.target.elsewhere.first()?;
    // Looked at again as soon as a record of that name changes (uninstalled, say).
    run.memory.watches.conflict = Some(found.looked);
    Some(format!(
        "release {:?} in namespace {} is already {}; this HelmRelease (stored in namespace {}) applies nothing to it, and deleting it deletes none of its objects, until it names another release (spec.releaseName, spec.targetNamespace) or that release is uninstalled",
        run.target.release_name,
        run.target.namespace,
        first.describe(),
        run.storage.namespace(),
    ))
}

/// Both guards above, their reads made at once (a fix's reconcile meets them first).
/// `Ok(history)`: the release is this HelmRelease's to act on, and the history the claim
/// check read, for the plan's first step (none when claiming it wrote the record).
pub(super) async fn ours_to_act_on(
    run: &mut Run<'_>,
) -> crate::engine::Result<Result<Option<Vec<Release>>, String>> {
    let (claimed, scan) = tokio::join!(claim_check(run), scan_elsewhere(run));
    let claimed = claimed?;
    if let Some(refused) = claimed.refused {
        return Ok(Err(refused));
    }
    match take_scan(run, scan?) {
        Some(refused) => Ok(Err(refused)),
        None => Ok(Ok(claimed.history)),
    }
}

/// The releases `hr` (in namespace `ns`) depends on; a dependency without a namespace
/// is in the release's own.
fn deps(hr: &HelmRelease, ns: &str) -> Vec<ReleaseKey> {
    hr.spec
        .depends_on
        .iter()
        .map(|d| ReleaseKey {
            namespace: d.namespace.clone().unwrap_or_else(|| ns.to_string()),
            name: d.name.clone(),
        })
        .collect()
}

/// A dependsOn path that leads back to this release, as `a/x -> a/y -> a/x`.
pub(super) async fn dependency_cycle(run: &Run<'_>) -> Option<String> {
    if run.hr.spec.depends_on.is_empty() {
        return None;
    }
    let start = run.key.clone();
    // Read as the release (RBAC decides what it may see of other namespaces); what it may
    // not read is not followed. Depth-first over the dependency graph as the API shows it,
    // bounded so a huge graph costs a bounded number of reads.
    let as_release = run.ctx.acting(&run.acting.identity).client.clone();
    let mut stack: Vec<(ReleaseKey, Vec<ReleaseKey>)> =
        vec![(start.clone(), deps(&run.hr, &start.namespace))];
    let mut done = std::collections::HashSet::new();
    let mut reads = 0;
    while let Some((_, pending)) = stack.last_mut() {
        let Some(next) = pending.pop() else {
            let (key, _) = stack.pop().expect("not empty");
            done.insert(key);
            continue;
        };
        if let Some(at) = stack.iter().position(|(k, _)| *k == next) {
            let path: Vec<String> = stack[at..]
                .iter()
                .map(|(k, _)| k.to_string())
                .chain([next.to_string()])
                .collect();
            return Some(format!("dependsOn forms a cycle: {}", path.join(" -> ")));
        }
        if done.contains(&next) || reads >= 256 {
            continue;
        }
        reads += 1;
        let api: Api<HelmRelease> = Api::namespaced(as_release.clone(), &next.namespace);
        if let Ok(Some(hr)) = api.get_opt(&next.name).await {
            let children = deps(&hr, &next.namespace);
            stack.push((next, children));
        } else {
            done.insert(next);
        }
    }
    None
}

/// The first dependency that is not ready, described for the status message: by its
/// `readyExpr` when it has one (in place of its Ready condition, as helm-controller does
/// without its AdditiveCELDependencyCheck gate), else by its Ready condition.
///
/// Each dependency is read as the release itself (its ServiceAccount under tenancy, in
/// the engine's cluster), never with the engine's identity: what a release's spec makes
/// the engine read is the release's read, so a readyExpr can never test what the tenant
/// may not see (docs/operations/multi-tenancy.md, "Side reads").
pub(super) async fn unready_dependency(run: &Run<'_>) -> Option<String> {
    let refs = &run.hr.spec.depends_on;
    let this = refs
        .iter()
        .any(|d| d.ready_expr.is_some())
        .then(|| serde_json::to_value(&*run.hr).unwrap_or_default());
    let as_release = run.ctx.acting(&run.acting.identity).client.clone();
    for (dep, reference) in deps(&run.hr, &run.key.namespace).into_iter().zip(refs) {
        let api: Api<HelmRelease> = Api::namespaced(as_release.clone(), &dep.namespace);
        let found = match api.get_opt(&dep.name).await {
            Ok(Some(found)) => found,
            Ok(None) => return Some(format!("dependency '{dep}' is not ready")),
            Err(e) => return Some(unreadable_dependency(&dep, &run.acting.identity, &e)),
        };
        let (Some(expr), Some(this)) = (&reference.ready_expr, &this) else {
            if !is_ready(&found) {
                return Some(format!("dependency '{dep}' is not ready"));
            }
            continue;
        };
        let Some(cel) = run.ctx.renderer.cel() else {
            return Some(NO_CEL.into());
        };
        let found = serde_json::to_value(&found).unwrap_or_default();
        match cel.ready(expr, Some((this, &found))).await {
            Ok(true) => {}
            Ok(false) => {
                return Some(format!(
                    "dependency '{dep}' is not ready according to its readyExpr"
                ));
            }
            Err(e) => return Some(format!("dependency '{dep}': {e}")),
        }
    }
    None
}

/// Why a dependency could not be read as the release: a refusal names the identity and
/// the rule, anything else says the API server's reason (never an object's content).
fn unreadable_dependency(
    dep: &ReleaseKey,
    identity: &crate::cluster::tenancy::Identity,
    e: &kube::Error,
) -> String {
    match e {
        kube::Error::Api(status) if status.code == 403 => format!(
            "dependency '{dep}' cannot be read as {identity} (Forbidden): a dependsOn is read with the release's own rights, so it needs get on helmreleases.wheelhouse.dev in namespace {}",
            dep.namespace
        ),
        kube::Error::Api(status) => format!(
            "dependency '{dep}' cannot be read as {identity}: HTTP {} {}",
            status.code, status.reason
        ),
        other => format!("dependency '{dep}' cannot be read: {other}"),
    }
}

/// Why a release with CEL expressions cannot be reconciled here.
const NO_CEL: &str = "healthCheckExprs and dependsOn[].readyExpr need the render helper, which evaluates CEL as Flux does: the helm CLI renderer (--renderer helm, WHEELHOUSE_RENDERER=helm) cannot; run the engine with the render helper (the default renderer, wheelhouse-render)";

/// A CEL expression of the spec that does not compile, or that nothing here can evaluate:
/// the release is stalled until its spec changes, as helm-controller stalls it.
pub(super) async fn invalid_cel(run: &Run<'_>) -> Option<String> {
    let checks = &run.hr.spec.health_check_exprs;
    let ready = run
        .hr
        .spec
        .depends_on
        .iter()
        .enumerate()
        .filter_map(|(i, d)| Some((i, d.ready_expr.as_deref()?)));
    if checks.is_empty() && ready.clone().next().is_none() {
        return None;
    }
    let Some(cel) = run.ctx.renderer.cel() else {
        return Some(NO_CEL.into());
    };
    // Only an expression that does not compile stalls; an evaluator that is not running
    // is the engine's fault, and the wait or dependency check that needs it says so.
    if !checks.is_empty()
        && let Err(CelError::Invalid(e)) = cel.check_health(checks).await
    {
        return Some(format!("healthCheckExprs: {e}"));
    }
    for (i, expr) in ready {
        if let Err(CelError::Invalid(e)) = cel.ready(expr, None).await {
            return Some(format!("dependsOn[{i}].readyExpr: {e}"));
        }
    }
    None
}

/// Ready=False and Stalled=True with `why`: the status part of [`stall`].
fn stalled(s: &mut HelmReleaseStatus, why: &str, message: &str, generation: Option<i64>) {
    let verdict = Verdict::Stalled {
        reason: why,
        message,
    };
    status::summarise(s, verdict, generation);
    s.observed_generation = generation;
}

/// A dependency is ready once its status speaks of its current generation and says Ready.
fn is_ready(dependency: &HelmRelease) -> bool {
    let observed = dependency
        .status
        .as_ref()
        .and_then(|s| s.observed_generation)
        == dependency.metadata.generation;
    observed
        && dependency
            .condition(condition::READY)
            .is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::status::{Truth, reason};
    use crate::engine::worker::test_release;

    #[test]
    fn dependencies_default_to_the_release_namespace() {
        let cases: &[(&str, &[&str])] = &[
            ("[]", &[]),
            ("[{name: db}]", &["apps/db"]),
            (
                "[{name: db, namespace: data}, {name: cache}]",
                &["data/db", "apps/cache"],
            ),
        ];
        for (depends_on, keys) in cases {
            let hr = test_release(&format!("dependsOn: {depends_on}"));
            let got: Vec<String> = deps(&hr, "apps").iter().map(ToString::to_string).collect();
            assert_eq!(got, *keys, "{depends_on}");
        }
    }

    #[test]
    fn a_dependency_is_ready_when_its_current_generation_is() {
        let with = |observed: Option<i64>, ready: Option<&str>| {
            let mut hr = test_release("");
            hr.metadata.generation = Some(2);
            let mut s = HelmReleaseStatus {
                observed_generation: observed,
                ..HelmReleaseStatus::default()
            };
            if let Some(truth) = ready {
                let truth = if truth == "True" {
                    Truth::True
                } else {
                    Truth::False
                };
                status::set(&mut s, condition::READY, truth, "R", "", Some(2));
            }
            hr.status = Some(s);
            hr
        };
        let cases = [
            ("ready, current", with(Some(2), Some("True")), true),
            (
                "ready, older generation",
                with(Some(1), Some("True")),
                false,
            ),
            ("not ready", with(Some(2), Some("False")), false),
            ("no Ready condition", with(Some(2), None), false),
            ("no status", test_release(""), false),
        ];
        for (what, dependency, ready) in cases {
            assert_eq!(is_ready(&dependency), ready, "{what}");
        }
    }

    #[test]
    fn a_stall_says_why_on_ready_and_stalled_and_ends_reconciling() {
        let mut s = HelmReleaseStatus::default();
        status::set(
            &mut s,
            condition::RECONCILING,
            Truth::True,
            reason::PROGRESSING,
            "",
            Some(1),
        );
        stalled(&mut s, reason::DEPENDENCY_CYCLE, "a -> b -> a", Some(3));
        let got: Vec<_> = s
            .conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("Ready", "False", reason::DEPENDENCY_CYCLE),
                ("Stalled", "True", reason::DEPENDENCY_CYCLE),
            ]
        );
        assert!(s.conditions.iter().all(|c| c.message == "a -> b -> a"));
        assert_eq!(s.observed_generation, Some(3));
    }
}

//! An interval check of a release that nothing touched: the last reconcile found it in
//! sync, and since then its HelmRelease (uid, generation, no request), its records in
//! Helm's storage (by resourceVersion, from the engine's watch of them) and its desired
//! state (by digest) are unchanged, no rival record appeared, and drift detection can
//! rely on its last clean check. The plan would be "in sync" on the same history, so the
//! history is not read and decoded again: at 10,000 releases at a 10 minute interval,
//! that read was most of an idle engine's work (17 checks a second).
//!
//! Only a check at the interval takes this path: a request, a change or a push always
//! reads afresh (a watch may not yet show a write made just before a request), and so
//! does any check where one of the above cannot be told.

use super::guards::{scan_elsewhere, take_scan};
use crate::engine::run::{PrepareError, Prepared, Run, Settled, prepare};

/// What an interval check learned on its way.
pub(super) enum Unchanged {
    /// In sync as last planned; the status is written.
    InSync,
    /// Something changed: the full reconcile goes on with the desired state prepared here.
    Prepared(Box<Result<Prepared, PrepareError>>),
    /// Something changed before preparing: the full reconcile does everything.
    Changed,
}

/// Whether what `settled` planned on still holds, as far as can be told without a read.
/// `requested`: the reconcile took a request token (reconcile, reset or cancel).
pub(super) fn may_skip_history(run: &Run<'_>, settled: &Settled, requested: bool) -> bool {
    let hr = &run.hr;
    if !run.memory.retry.by_interval
        || requested
        || run.memory.handoff.candidate.is_some()
        || run.memory.handoff.superseding.is_some()
        || !hr.spec.depends_on.is_empty()
        || run.status.external_revision.is_some()
        || settled.uid != hr.metadata.uid
        || settled.generation != hr.metadata.generation
        || settled.records.name != run.target.release_name
        || crate::engine::run::new_token(
            hr,
            crate::api::annotations::FORCE_AT,
            run.status.last_handled_force_at.as_deref(),
        )
        .is_some()
    {
        return false;
    }
    let (_, records) = run.ctx.records_of(&run.acting);
    records
        .records_in(run.storage.namespace(), &run.target.release_name)
        .is_some_and(|now| now == settled.records.records)
}

/// The check itself, once [`may_skip_history`] said it may be made.
pub(super) async fn check(run: &mut Run<'_>, settled: Settled) -> Unchanged {
    // A rival record elsewhere is looked for as every reconcile looks (the engine's index
    // answers without a read when it can); one found is the full reconcile's to report.
    let Ok(scan) = scan_elsewhere(run).await else {
        return Unchanged::Changed;
    };
    if take_scan(run, scan).is_some() {
        return Unchanged::Changed;
    }
    let hr = run.hr.clone();
    let prepared = match prepare(run.ctx, &run.acting, &hr, run.precedence.priority).await {
        Ok(prepared) if prepared.digest() == settled.desired => prepared,
        other => return Unchanged::Prepared(Box::new(other)),
    };
    if !super::drift::unchanged_at_interval(run, settled.version) {
        return Unchanged::Prepared(Box::new(Ok(prepared)));
    }
    run.intent.masker = prepared.values.secrets.clone();
    run.intent.digest = settled.desired.clone();
    run.intent.sources = prepared.values.sources.clone();
    run.ctx.metrics.unchanged_check();
    run.write_status().await;
    run.memory.cache.settled = Some(settled);
    Unchanged::InSync
}

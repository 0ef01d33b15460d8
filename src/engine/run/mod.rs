//! What a reconcile runs with, shared by the worker that drives it and the actions it
//! runs: the engine-wide [`Context`] and the [`Run`] of one reconcile (`context`), the
//! worker's [`Memory`] between reconciles (`memory`: its [`Inbox`] of messages, read in
//! one place, `inbox`; its retry and urgency rules, `retry`), the desired state
//! (`desired`), what wakes a worker (`triggers`), and the cancellable health check
//! (`health_check`). The engine's worker and its actions build on it; it uses neither.

mod acting;
mod context;
mod desired;
mod health_check;
mod inbox;
mod loaded_charts;
mod memory;
mod retry;
mod triggers;

pub use acting::Acting;
pub use context::{Context, Intent, Precedence, Run, Target, Trail};
pub use desired::{Candidate, PrepareError, Prepared, render, spec_values_label};
pub use health_check::{WaitEnd, Window};
pub use inbox::{Heard, Msg};
pub use memory::{CleanDrift, Memory, Settled, Superseding};
pub use retry::Requeue;

pub(super) use context::note_seen;
pub(super) use desired::prepare;
pub(super) use triggers::{Trigger, new_token, values_source_events};

use crate::api::HelmReleaseStatus;

/// How often a waiting or failed release's chart source is checked for a new desired
/// state: `chart.interval` when set, else the engine's short default (15 s).
pub fn source_poll(ctx: &Context, chart: &crate::api::ChartSpec) -> std::time::Duration {
    chart
        .interval
        .map_or(ctx.settings.chart_poll, |d| d.as_std())
        .max(std::time::Duration::from_secs(1))
}

/// Whether `chart` comes from somewhere that can change under the same spec (a
/// repository, a registry, Git): only those are polled.
pub fn polls(chart: &crate::api::ChartSpec) -> bool {
    chart.repository.is_some() || chart.git.is_some()
}

/// Whether writing `b` over `a` would store the same: their JSON, where a `Time` keeps
/// whole seconds and a `MicroTime` microseconds, whatever precision either was computed
/// or read with (a custom resource's status keeps the times as their writer wrote them,
/// which is not always as this engine would).
pub(super) fn same_as_stored(a: &HelmReleaseStatus, b: &HelmReleaseStatus) -> bool {
    match (serde_json::to_vec(a), serde_json::to_vec(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// What the worker keeps of a status it wrote: the SHA-256 of its JSON (the struct's
/// fields in their order, maps sorted), enough to tell the same status again.
pub(super) fn status_digest(status: &HelmReleaseStatus) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let json = serde_json::to_vec(status).expect("a status serialises");
    Sha256::digest(json).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::status::{self, Truth, condition, reason};

    /// A status computed now carries nanoseconds in its times; the one stored (and read
    /// back) has whole seconds. Compared as stored, the two are equal: an unchanged
    /// release's status is not sent again.
    #[test]
    fn a_status_compares_as_the_api_server_stores_it() {
        let mut computed = HelmReleaseStatus::default();
        status::set(
            &mut computed,
            condition::READY,
            Truth::True,
            reason::INSTALL_SUCCEEDED,
            "installed",
            Some(1),
        );
        let read_back: HelmReleaseStatus =
            serde_json::from_slice(&serde_json::to_vec(&computed).unwrap()).unwrap();
        let time = |s: &HelmReleaseStatus| s.conditions[0].last_transition_time.0;
        assert_ne!(
            time(&computed).subsec_nanosecond(),
            0,
            "computed with nanoseconds (a whole second now would make this test prove nothing)"
        );
        assert_ne!(computed, read_back);
        assert!(same_as_stored(&read_back, &computed));
        assert_eq!(status_digest(&computed), status_digest(&read_back));
        // Written by another hand with microseconds (as a custom resource keeps them),
        // read back with them: still the same once written.
        let mut by_hand = read_back.clone();
        by_hand.conditions[0].last_transition_time.0 = time(&computed);
        assert!(same_as_stored(&by_hand, &read_back));
        // A real change is one.
        let mut changed = read_back.clone();
        changed.conditions[0].message = "upgraded".into();
        assert!(!same_as_stored(&changed, &read_back));
    }
}

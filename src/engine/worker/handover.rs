//! Taking over a release another engine acted on moments ago (relabelled into this
//! shard, or its namespace changed hands): nothing is done until that engine's step on it
//! ended, so two engines never write one release at once. The positive sign is the
//! `letGo` record the previous engine writes once its worker stopped; without it, the
//! previous engine's Lease says whether it lives: a live one is waited for (up to the
//! release's timeout plus the Lease's length, the longest a step runs), one whose Lease
//! stops being renewed is gone after the Lease's length.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::api::{EngineRef, HelmRelease};
use crate::engine::run::{Context, Heard, Memory};
use crate::engine::status::{self, Verdict, reason};
use crate::engine::vocabulary::ReleaseKey;

/// How long a Lease goes unrenewed before its holder counts as gone (a Lease's length).
pub const GONE_AFTER: Duration = Duration::from_secs(15);

/// What the previous engine's Lease says of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// It holds its Lease and renewed it lately (or was first seen holding it lately).
    Alive,
    /// Its Lease lapsed, is held by another, or is gone.
    Gone,
    /// The Lease cannot be read.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Act now; why, for the log.
    Go(String),
    /// Not yet; what status says meanwhile.
    Wait(String),
}

/// Whether this engine (`me`) may act on a release whose status names `acting` and
/// `let_go`, having waited `waited` so far. `bound`: how long a live engine is waited for.
pub fn decide(
    me: &EngineRef,
    acting: Option<&EngineRef>,
    let_go: Option<&EngineRef>,
    liveness: Liveness,
    waited: Duration,
    bound: Duration,
) -> Gate {
    let Some(acting) = acting.filter(|a| a.identity != me.identity) else {
        return Gate::Go("no other engine acted on it".into());
    };
    let who = &acting.identity;
    if let_go == Some(acting) {
        return Gate::Go(format!("engine {who} let go of it"));
    }
    match liveness {
        Liveness::Gone => Gate::Go(format!("engine {who} is gone (its Lease lapsed)")),
        Liveness::Alive if waited < bound => Gate::Wait(format!(
            "taking over from engine {who}, which acted on this release and is still running: waiting for it to let go (its step ends first), at most {}s more",
            (bound - waited).as_secs()
        )),
        Liveness::Alive => Gate::Go(format!(
            "engine {who} did not let go within {}s",
            bound.as_secs()
        )),
        Liveness::Unknown if waited < GONE_AFTER => Gate::Wait(format!(
            "taking over from engine {who}, whose Lease cannot be read: waiting up to {}s more for it to let go",
            (GONE_AFTER - waited).as_secs()
        )),
        Liveness::Unknown => Gate::Go(format!(
            "engine {who} did not let go within {}s",
            GONE_AFTER.as_secs()
        )),
    }
}

/// Watches one engine's Lease across polls: alive while its renewals keep coming, as
/// the engines' own election judges it (by change seen locally, not by clocks).
#[derive(Default)]
struct LeaseWatch {
    last: Option<(Option<String>, Instant)>,
}

impl LeaseWatch {
    async fn look(&mut self, client: &kube::Client, engine: &EngineRef) -> Liveness {
        let Some((ns, name)) = engine.lease.split_once('/') else {
            return Liveness::Unknown;
        };
        let lease = match Api::<Lease>::namespaced(client.clone(), ns)
            .get_opt(name)
            .await
        {
            Ok(Some(lease)) => lease,
            Ok(None) => return Liveness::Gone,
            Err(_) => return Liveness::Unknown,
        };
        let spec = lease.spec.unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(engine.identity.as_str()) {
            return Liveness::Gone;
        }
        let renewed = spec.renew_time.map(|t| t.0.to_string());
        let now = Instant::now();
        match &self.last {
            Some((seen, since)) if *seen == renewed => {
                if now.duration_since(*since) >= GONE_AFTER {
                    Liveness::Gone
                } else {
                    Liveness::Alive
                }
            }
            _ => {
                self.last = Some((renewed, now));
                Liveness::Alive
            }
        }
    }
}

/// Waits until this engine may act on the release (see [`decide`]); false when the
/// worker should end instead (the engine stops, or the release is gone).
pub(super) async fn await_predecessor(
    ctx: &Context,
    key: &ReleaseKey,
    memory: &mut Memory,
    stop: &CancellationToken,
) -> bool {
    let started = Instant::now();
    let mut lease = LeaseWatch::default();
    let mut said: Option<String> = None;
    loop {
        let hr = memory.inbox.newest.clone();
        let s = hr.status.clone().unwrap_or_default();
        let acting = s
            .acting
            .as_ref()
            .filter(|a| a.identity != ctx.engine.identity);
        let liveness = match acting {
            Some(a) if s.let_go.as_ref() != Some(a) => lease.look(&ctx.client, a).await,
            _ => Liveness::Unknown,
        };
        let bound = hr.longest_action_timeout().as_std() + GONE_AFTER;
        match decide(
            &ctx.engine,
            s.acting.as_ref(),
            s.let_go.as_ref(),
            liveness,
            started.elapsed(),
            bound,
        ) {
            Gate::Go(why) => {
                if said.is_some() {
                    tracing::info!(release = %key, waited = ?started.elapsed(), "taking the release over: {why}");
                }
                return true;
            }
            Gate::Wait(message) => {
                if said.is_none() {
                    tracing::info!(release = %key, "{message}");
                    say(ctx, key, &hr, &message).await;
                    said = Some(message);
                }
            }
        }
        tokio::select! {
            () = stop.cancelled() => return false,
            // A command is kept for the first reconcile (see `Memory::absorb`).
            msg = memory.inbox.recv() => if let Heard::Deleted | Heard::Closed = memory.absorb(ctx, key, msg) {
                return false;
            },
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Says in Reconciling why nothing is done yet.
async fn say(ctx: &Context, key: &ReleaseKey, hr: &HelmRelease, message: &str) {
    let mut s = hr.status.clone().unwrap_or_default();
    let verdict = Verdict::Reconciling {
        reason: reason::PROGRESSING,
        message,
    };
    status::summarise(&mut s, verdict, hr.metadata.generation);
    let api: Api<HelmRelease> = Api::namespaced(ctx.client.clone(), &key.namespace);
    ctx.metrics.status_written();
    if let Err(e) = status::write(&api, &key.name, &s).await {
        tracing::warn!(release = %key, error = %e, "cannot write status");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(id: &str) -> EngineRef {
        EngineRef {
            identity: id.into(),
            lease: format!("wheelhouse/{id}"),
        }
    }

    #[test]
    fn a_release_is_taken_over_on_a_positive_sign_or_once_its_engine_is_gone() {
        let (me, x, y) = (engine("me"), engine("x"), engine("y"));
        let bound = Duration::from_secs(315);
        let s = Duration::from_secs;
        use Liveness::*;
        // (what, acting, let go, liveness, waited, go?)
        type Case<'a> = (
            &'a str,
            Option<&'a EngineRef>,
            Option<&'a EngineRef>,
            Liveness,
            u64,
            bool,
        );
        let cases: [Case; 10] = [
            ("nobody acted", None, None, Unknown, 0, true),
            ("we acted last", Some(&me), None, Alive, 0, true),
            ("x let go", Some(&x), Some(&x), Alive, 0, true),
            (
                "an older let-go of y says nothing of x",
                Some(&x),
                Some(&y),
                Alive,
                0,
                false,
            ),
            ("x alive, in its step", Some(&x), None, Alive, 200, false),
            ("x alive past the bound", Some(&x), None, Alive, 315, true),
            ("x gone", Some(&x), None, Gone, 0, true),
            (
                "x unknown, within a Lease's length",
                Some(&x),
                None,
                Unknown,
                14,
                false,
            ),
            (
                "x unknown, past a Lease's length",
                Some(&x),
                None,
                Unknown,
                15,
                true,
            ),
            ("x gone, let-go of y", Some(&x), Some(&y), Gone, 0, true),
        ];
        for (what, acting, let_go, liveness, waited, go) in cases {
            let gate = decide(&me, acting, let_go, liveness, s(waited), bound);
            assert_eq!(matches!(gate, Gate::Go(_)), go, "{what}: {gate:?}");
        }
    }
}

//! When a release is looked at again and what goes first: the retry and urgency rules,
//! pure, in one place (the worker applies them; unit tests below pin them down).

use std::time::Duration;

use crate::cluster::slots::{Precedence, Priority, UrgentWork};

/// How a reconcile ended, for when the release is looked at next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requeue {
    /// After this long (the interval, or at once, or never).
    After(Duration),
    /// It failed: again after an exponential backoff.
    Failed,
    /// The cluster failed it (discovery, the API server): again after a backoff, or as
    /// soon as the engine sees the cluster heal, whichever comes first.
    Blocked,
}

/// What the worker remembers of its retries and of why it woke.
#[derive(Default)]
pub struct Retry {
    /// Reconciles in a row that ended in an error or a failure: the retry backs off.
    pub(in crate::engine) failing: u32,
    /// The last reconcile was held up by the cluster ([`Requeue::Blocked`]): the worker
    /// listens for the cluster healing.
    pub(in crate::engine) blocked: bool,
    /// The next reconcile is urgent (a fix for a failed release, an operator's request,
    /// a push): it takes the next render slot ahead of routine ones.
    pub urgent: bool,
    /// The urgent work that found a newer desired state during a wait, carried to the
    /// reconcile that applies it (routine work keeps giving way until the fix's first
    /// object).
    pub carried_urgency: Option<UrgentWork>,
    /// When the worker woke for the next reconcile: where an urgent run's timeline starts.
    pub woke_at: Option<std::time::Instant>,
    /// This reconcile came at its interval, not for a request, a change or a push: the
    /// only one whose drift check may rely on a cached clean check.
    pub by_interval: bool,
}

/// What a reconcile starting now runs as.
pub struct Urgency {
    pub priority: Priority,
    /// Held until its first object is written: routine work gives way meanwhile.
    pub precedence: Option<UrgentWork>,
}

impl Retry {
    /// The priority of the reconcile starting now, for a release whose Ready is False
    /// (`failed`) and whose spec changed since the last attempt (`new_spec`).
    ///
    /// A fix for a failed release, an operator's request or a push goes first; routine
    /// work gives way to a fix (a new desired state, a request), not to a failed
    /// release's retry of the same desired state.
    pub fn urgency(&mut self, failed: bool, new_spec: bool, precedence: &Precedence) -> Urgency {
        if let Some(carried) = self.carried_urgency.take() {
            return Urgency {
                priority: Priority::Urgent,
                precedence: Some(carried),
            };
        }
        if !(self.urgent || failed) {
            return Urgency {
                priority: Priority::Routine,
                precedence: None,
            };
        }
        Urgency {
            priority: Priority::Urgent,
            precedence: (self.urgent || new_spec).then(|| precedence.urgent()),
        }
    }

    /// Remembers how a reconcile ended and says when the release is looked at next.
    /// `superseding` is the urgency of a fix that superseded a wait: it goes on in the
    /// next reconcile, still urgent.
    pub fn ended(
        &mut self,
        requeue: Requeue,
        interval: Duration,
        superseding: Option<UrgentWork>,
    ) -> Duration {
        self.ended_with_jitter(requeue, interval, superseding, clock_nanos())
    }

    fn ended_with_jitter(
        &mut self,
        requeue: Requeue,
        interval: Duration,
        superseding: Option<UrgentWork>,
        nanos: u32,
    ) -> Duration {
        self.blocked = requeue == Requeue::Blocked;
        self.urgent = false;
        if superseding.is_some() {
            self.carried_urgency = superseding;
        }
        match requeue {
            Requeue::After(d) => {
                self.failing = 0;
                d
            }
            Requeue::Failed | Requeue::Blocked => {
                self.failing = self.failing.saturating_add(1);
                backoff_at(self.failing, interval, nanos)
            }
        }
    }
}

fn clock_nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}

/// The delay before retry number `failing` (1 = the first): 5 s doubling, capped at the
/// interval, with ±10 % jitter drawn from `nanos` (0 is −10 %, 1000 none, 2000 +10 %,
/// and so on round) so releases failing together do not retry in lockstep.
pub(in crate::engine) fn backoff_at(failing: u32, interval: Duration, nanos: u32) -> Duration {
    let base = Duration::from_secs(5).saturating_mul(1 << failing.saturating_sub(1).min(16));
    let capped = base.min(interval).max(Duration::from_secs(1));
    let jitter = f64::from(nanos % 2001) / 10_000.0 - 0.1;
    capped.mul_f64(1.0 + jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_JITTER: u32 = 1000;
    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn failures_back_off_doubling_to_the_interval_and_a_success_resets_them() {
        let mut retry = Retry::default();
        let delays: Vec<_> = (0..6)
            .map(|_| {
                retry.ended_with_jitter(Requeue::Failed, Duration::from_secs(60), None, NO_JITTER)
            })
            .collect();
        let secs: Vec<_> = delays.iter().map(Duration::as_secs).collect();
        assert_eq!(secs, [5, 10, 20, 40, 60, 60]);
        assert_eq!(retry.failing, 6);
        let after = retry.ended_with_jitter(Requeue::After(HOUR), HOUR, None, NO_JITTER);
        assert_eq!((after, retry.failing), (HOUR, 0));
        let again = retry.ended_with_jitter(Requeue::Failed, HOUR, None, NO_JITTER);
        assert_eq!(again, Duration::from_secs(5), "the backoff starts over");
    }

    #[test]
    fn a_blocked_reconcile_backs_off_and_listens_for_the_cluster_to_heal() {
        let mut retry = Retry::default();
        let after = retry.ended_with_jitter(Requeue::Blocked, HOUR, None, NO_JITTER);
        assert_eq!(after, Duration::from_secs(5));
        assert!(retry.blocked);
        retry.ended_with_jitter(Requeue::After(HOUR), HOUR, None, NO_JITTER);
        assert!(!retry.blocked, "healed: no longer listening");
    }

    #[test]
    fn the_jitter_stays_within_ten_percent() {
        let at = |nanos| backoff_at(1, HOUR, nanos).as_millis();
        assert_eq!((at(0), at(1000), at(2000)), (4500, 5000, 5500));
        assert_eq!(at(2001), at(0), "round");
        // Never below a second, even for a one-second interval with the jitter down.
        assert!(backoff_at(3, Duration::from_secs(1), 0) >= Duration::from_millis(900));
    }

    #[test]
    fn a_routine_reconcile_of_a_healthy_release_takes_no_precedence() {
        let precedence = Precedence::default();
        let urgency = Retry::default().urgency(false, true, &precedence);
        assert_eq!(urgency.priority, Priority::Routine);
        assert!(urgency.precedence.is_none());
    }

    #[test]
    fn a_failed_release_goes_first_but_only_a_new_desired_state_makes_others_give_way() {
        let precedence = Precedence::default();
        let retried = Retry::default().urgency(true, false, &precedence);
        assert_eq!(retried.priority, Priority::Urgent);
        assert!(
            retried.precedence.is_none(),
            "a retry of the same is not a fix"
        );
        let fix = Retry::default().urgency(true, true, &precedence);
        assert!(
            fix.precedence.is_some(),
            "a new spec for a failed release is a fix"
        );
    }

    #[test]
    fn an_operators_request_goes_first_and_is_used_once() {
        let precedence = Precedence::default();
        let mut retry = Retry {
            urgent: true,
            ..Retry::default()
        };
        let urgency = retry.urgency(false, false, &precedence);
        assert_eq!(urgency.priority, Priority::Urgent);
        assert!(urgency.precedence.is_some());
        retry.ended_with_jitter(Requeue::After(HOUR), HOUR, None, NO_JITTER);
        assert!(!retry.urgent, "the next reconcile is routine again");
    }

    #[test]
    fn a_fix_found_during_a_wait_stays_urgent_into_the_reconcile_that_applies_it() {
        let precedence = Precedence::default();
        let mut retry = Retry::default();
        let found = precedence.urgent();
        retry.ended_with_jitter(Requeue::After(Duration::ZERO), HOUR, Some(found), NO_JITTER);
        let urgency = retry.urgency(false, false, &precedence);
        assert_eq!(urgency.priority, Priority::Urgent);
        assert!(
            urgency.precedence.is_some(),
            "the same urgent work, carried"
        );
        assert!(retry.carried_urgency.is_none(), "carried once");
    }

    #[test]
    fn retries_back_off_exponentially_up_to_the_interval() {
        let interval = Duration::from_secs(600);
        // (failing, interval, expected before jitter)
        let cases = [
            (1, interval, 5.0),
            (2, interval, 10.0),
            (3, interval, 20.0),
            (4, interval, 40.0),
            (8, interval, 600.0),
            (10, interval, 600.0),
            (u32::MAX, interval, 600.0),
            (3, Duration::from_secs(8), 8.0),
            // Never faster than once a second, however short the interval.
            (1, Duration::ZERO, 1.0),
            // 0 is not a retry, but must not underflow.
            (0, interval, 5.0),
        ];
        for (failing, interval, secs) in cases {
            for (nanos, factor) in [(0, 0.9), (1000, 1.0), (2000, 1.1), (2001, 0.9)] {
                let got = backoff_at(failing, interval, nanos).as_secs_f64();
                assert!(
                    (got - secs * factor).abs() < 1e-6,
                    "failing {failing}, interval {interval:?}, nanos {nanos}: {got}"
                );
            }
            let got = backoff_at(failing, interval, clock_nanos()).as_secs_f64();
            assert!(
                got >= secs * 0.9 - 1e-9 && got <= secs * 1.1 + 1e-9,
                "failing {failing}: {got} outside ±10 % of {secs}"
            );
        }
    }
}

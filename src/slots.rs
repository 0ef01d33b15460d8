//! A bounded number of slots (renders, chart loads) handed out urgent first: a fix for a
//! stuck or failed release, or an operator's request, takes the next free slot ahead of
//! routine work (initial installs, resyncs, a fleet-wide upgrade), which otherwise is
//! served in arrival order. Urgent work is rare (each is a release someone is waiting
//! on), so routine work is delayed by it, never starved.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// How urgent a request for a slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    #[default]
    Routine,
    Urgent,
}

#[derive(Clone)]
pub struct Slots {
    inner: Arc<Mutex<State>>,
}

struct State {
    free: usize,
    urgent: VecDeque<oneshot::Sender<Permit>>,
    routine: VecDeque<oneshot::Sender<Permit>>,
}

/// One slot, held until dropped; then it goes to the next waiter.
pub struct Permit {
    slots: Arc<Mutex<State>>,
    /// False for a permit that was never handed over (its slot is passed on already).
    armed: bool,
}

impl Slots {
    pub fn new(slots: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(State {
                free: slots.max(1),
                urgent: VecDeque::new(),
                routine: VecDeque::new(),
            })),
        }
    }

    /// A slot: at once when one is free, else when the waiters ahead of this one (the
    /// urgent ones first) have had theirs.
    pub async fn acquire(&self, priority: Priority) -> Permit {
        let rx = {
            let mut state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if state.free > 0 {
                state.free -= 1;
                return Permit {
                    slots: self.inner.clone(),
                    armed: true,
                };
            }
            let (tx, rx) = oneshot::channel();
            match priority {
                Priority::Urgent => state.urgent.push_back(tx),
                Priority::Routine => state.routine.push_back(tx),
            }
            rx
        };
        // The permit travels through the channel: a waiter that gives up before taking
        // it drops it, and the slot goes on to the next one.
        rx.await
            .expect("a queued waiter is handed a permit, never dropped")
    }

    /// Waiters in line.
    pub fn waiting(&self) -> usize {
        let state = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        state.urgent.len() + state.routine.len()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut state = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let Some(next) = state
                .urgent
                .pop_front()
                .or_else(|| state.routine.pop_front())
            else {
                state.free += 1;
                return;
            };
            if next.is_closed() {
                continue;
            }
            let handed = Permit {
                slots: self.slots.clone(),
                armed: true,
            };
            // Sent with the lock held: a receiver dropped after this takes the lock
            // again only once this returns.
            match next.send(handed) {
                Ok(()) => return,
                Err(mut unwanted) => {
                    // Gone meanwhile: the slot is still ours to pass on.
                    unwanted.armed = false;
                }
            }
        }
    }
}

/// Urgent work in flight, for routine work to give way to: while a fix is on its way to
/// its first written object, routine reconciles hold before their next render or apply,
/// so the CPU and the API server serve the fix first (a slot alone does not: routine
/// work already holding slots still fills the API server's queues). Each hold is
/// bounded, so routine work is delayed, never starved.
#[derive(Clone, Default)]
pub struct Precedence(Arc<Urgency>);

#[derive(Default)]
struct Urgency {
    in_flight: std::sync::atomic::AtomicUsize,
    cleared: tokio::sync::Notify,
}

/// One piece of urgent work in flight, until dropped.
pub struct UrgentWork(Arc<Urgency>);

impl Precedence {
    /// The longest a routine step gives way at a time.
    pub const MOST: std::time::Duration = std::time::Duration::from_secs(1);

    pub fn urgent(&self) -> UrgentWork {
        self.0
            .in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        UrgentWork(self.0.clone())
    }

    /// Waits while urgent work is in flight, at most [`Self::MOST`].
    pub async fn give_way(&self) {
        let deadline = tokio::time::Instant::now() + Self::MOST;
        loop {
            let cleared = self.0.cleared.notified();
            tokio::pin!(cleared);
            // Registered before the count is read: a clearing in between still wakes it.
            cleared.as_mut().enable();
            if self.0.in_flight.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, cleared).await.is_err() {
                return;
            }
        }
    }
}

impl Drop for UrgentWork {
    fn drop(&mut self) {
        if self
            .0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst)
            == 1
        {
            self.0.cleared.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn urgent_waiters_go_first_and_routine_ones_in_order() {
        let slots = Slots::new(1);
        let held = slots.acquire(Priority::Routine).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (name, priority) in [
            ("r1", Priority::Routine),
            ("r2", Priority::Routine),
            ("u1", Priority::Urgent),
            ("r3", Priority::Routine),
            ("u2", Priority::Urgent),
        ] {
            let (waiter, order) = (slots.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let _permit = waiter.acquire(priority).await;
                order.lock().unwrap().push(name);
            }));
            // Each is in line before the next asks.
            while slots.waiting() < tasks.len() {
                tokio::task::yield_now().await;
            }
        }
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["u1", "u2", "r1", "r2", "r3"]);
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_loses_no_slot() {
        let slots = Slots::new(1);
        let held = slots.acquire(Priority::Routine).await;
        let gone = tokio::time::timeout(
            std::time::Duration::from_millis(10),
            slots.acquire(Priority::Urgent),
        )
        .await;
        assert!(gone.is_err());
        drop(held);
        // The slot is free again, not lost to the waiter that left.
        let again = tokio::time::timeout(
            std::time::Duration::from_millis(100),
            slots.acquire(Priority::Routine),
        )
        .await;
        assert!(again.is_ok());
    }

    #[tokio::test]
    async fn routine_work_gives_way_to_urgent_work_until_it_is_done_or_for_a_second() {
        use std::time::{Duration, Instant};
        let precedence = Precedence::default();
        // Nothing urgent: no wait.
        let start = Instant::now();
        precedence.give_way().await;
        assert!(start.elapsed() < Duration::from_millis(50));
        // Urgent work that ends after 100 ms.
        let urgent = precedence.urgent();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            drop(urgent);
        });
        let start = Instant::now();
        precedence.give_way().await;
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_millis(100) && waited < Precedence::MOST,
            "{waited:?}"
        );
        // Urgent work that never ends holds routine work a second at most.
        let _stuck = precedence.urgent();
        let start = Instant::now();
        precedence.give_way().await;
        let waited = start.elapsed();
        assert!(
            waited >= Precedence::MOST && waited < Precedence::MOST * 2,
            "{waited:?}"
        );
    }
}

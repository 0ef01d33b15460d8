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

/// One piece of urgent work in flight, until dropped. The task that holds it sends its
/// requests ahead of routine ones (see [`giving_way`]).
pub struct UrgentWork {
    urgency: Arc<Urgency>,
    /// The task's own mark before this one was taken, put back on drop.
    was: Option<bool>,
}

tokio::task_local! {
    /// Whether the task polling a request is doing urgent work: set while it holds an
    /// [`UrgentWork`], inside [`marking`].
    static URGENT: std::cell::Cell<bool>;
}

/// Runs `work` (a release's worker) so that the urgent work it takes marks its own
/// requests as going first.
pub fn marking<F: std::future::Future>(work: F) -> impl std::future::Future<Output = F::Output> {
    URGENT.scope(std::cell::Cell::new(false), work)
}

/// `work`, spawned on behalf of the current task, carries its mark: an Event a fix sends
/// on the side goes first as the fix does.
pub fn carrying_mark<F: std::future::Future>(
    work: F,
) -> impl std::future::Future<Output = F::Output> {
    URGENT.scope(std::cell::Cell::new(urgent_here()), work)
}

fn urgent_here() -> bool {
    URGENT.try_with(std::cell::Cell::get).unwrap_or(false)
}

impl Precedence {
    /// The longest a routine step gives way at a time.
    pub const MOST: std::time::Duration = std::time::Duration::from_secs(1);

    pub fn urgent(&self) -> UrgentWork {
        self.0
            .in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        UrgentWork {
            urgency: self.0.clone(),
            was: URGENT.try_with(|u| u.replace(true)).ok(),
        }
    }

    /// Before a request: routine work's waits while urgent work is in flight (at most
    /// [`Self::MOST`]); the urgent task's own never does. Asked again at every wake-up, so
    /// a read that urgent work came to share (polled by it now) goes on at once.
    pub async fn before_request(&self) {
        if urgent_here() || self.0.in_flight.load(std::sync::atomic::Ordering::SeqCst) == 0 {
            return;
        }
        let waiting = self.give_way();
        tokio::pin!(waiting);
        std::future::poll_fn(|cx| {
            if urgent_here() {
                return std::task::Poll::Ready(());
            }
            std::future::Future::poll(waiting.as_mut(), cx)
        })
        .await;
    }

    /// Waits while urgent work is in flight, at most [`Self::MOST`]; never for a task
    /// doing urgent work itself (it would wait for its own).
    pub async fn give_way(&self) {
        if urgent_here() {
            return;
        }
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
        if let Some(was) = self.was {
            let _ = URGENT.try_with(|u| u.set(was));
        }
        if self
            .urgency
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst)
            == 1
        {
            self.urgency.cleared.notify_waiters();
        }
    }
}

/// A request that goes first whoever sends it: a read urgent work may be waiting on
/// through a lock another task holds (discovery, shared between renders).
#[derive(Clone, Copy, Debug)]
pub struct GoesFirst;

/// A client whose requests give way to urgent work's (see [`Precedence::before_request`]):
/// while a fix is on its way, routine reconciles hold every request (at most a second
/// each), so an API server the fleet saturates serves the fix's requests without a queue.
/// Watches (long-lived, and the fix's own readiness comes through them) and requests
/// marked [`GoesFirst`] never wait. kube's errors come back as they are, as
/// [`crate::cluster::tenancy::impersonating`]'s do.
pub fn giving_way(base: &kube::Client, precedence: Precedence) -> kube::Client {
    let inner = base.clone();
    let service = tower::service_fn(move |request: hyper::Request<kube::client::Body>| {
        let (inner, precedence) = (inner.clone(), precedence.clone());
        async move {
            let watch = request
                .uri()
                .query()
                .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
            if !watch && request.extensions().get::<GoesFirst>().is_none() {
                precedence.before_request().await;
            }
            // What a fix waits on, request by request (`WHEELHOUSE_LOG=wheelhouse::slots=debug`).
            let traced = (urgent_here() && !watch)
                .then(|| (request.method().clone(), request.uri().path().to_owned()));
            let started = std::time::Instant::now();
            let response = inner.send(request).await;
            if let Some((method, path)) = traced {
                tracing::debug!(%method, path, took = ?started.elapsed(), "urgent request");
            }
            response.map_err(|e| -> tower::BoxError { Box::new(e) })
        }
    });
    kube::Client::new(service, base.default_namespace().to_owned())
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

    #[tokio::test]
    async fn the_urgent_task_s_requests_go_first_and_routine_ones_wait_for_it() {
        use std::time::{Duration, Instant};
        let precedence = Precedence::default();
        let (release, released) = oneshot::channel::<()>();
        let (marked, is_marked) = oneshot::channel::<(Duration, bool)>();
        let urgent = precedence.clone();
        let fix = tokio::spawn(marking(async move {
            let work = urgent.urgent();
            let start = Instant::now();
            urgent.before_request().await;
            // Nor does it give way to itself before its render or apply.
            urgent.give_way().await;
            // What it spawns on its behalf goes first too.
            let side = tokio::spawn(carrying_mark(async { urgent_here() }));
            marked.send((start.elapsed(), side.await.unwrap())).unwrap();
            released.await.unwrap();
            drop(work);
            // Its mark ends with the work.
            urgent_here()
        }));
        let (waited_for_fix, side_marked) = is_marked.await.unwrap();
        assert!(
            waited_for_fix < Duration::from_millis(50),
            "{waited_for_fix:?}"
        );
        assert!(side_marked);
        let routine = precedence.clone();
        let held = tokio::spawn(marking(async move {
            let start = Instant::now();
            routine.before_request().await;
            start.elapsed()
        }));
        tokio::time::sleep(Duration::from_millis(150)).await;
        release.send(()).unwrap();
        assert!(!fix.await.unwrap());
        let waited = held.await.unwrap();
        assert!(
            waited >= Duration::from_millis(150) && waited < Precedence::MOST,
            "{waited:?}"
        );
    }

    #[tokio::test]
    async fn a_giving_way_client_holds_routine_requests_but_not_watches_or_those_that_go_first() {
        use std::time::{Duration, Instant};
        // An answer at once for every request: what is timed is the hold before it.
        let answering = tower::service_fn(|_: hyper::Request<kube::client::Body>| async {
            Ok::<_, std::convert::Infallible>(
                hyper::Response::builder()
                    .body(kube::client::Body::from(b"{}".to_vec()))
                    .unwrap(),
            )
        });
        let base = kube::Client::new(answering, "default");
        let precedence = Precedence::default();
        let client = giving_way(&base, precedence.clone());
        let _fix = precedence.urgent();
        let timed = |request: hyper::Request<Vec<u8>>| {
            let client = client.clone();
            async move {
                let start = Instant::now();
                client.request_text(request).await.unwrap();
                start.elapsed()
            }
        };
        let list = hyper::Request::get("/api/v1/namespaces/a/secrets")
            .body(Vec::new())
            .unwrap();
        assert!(timed(list).await >= Precedence::MOST);
        let watch =
            hyper::Request::get("/api/v1/namespaces/a/secrets?watch=true&resourceVersion=1")
                .body(Vec::new())
                .unwrap();
        assert!(timed(watch).await < Duration::from_millis(200));
        let first = hyper::Request::get("/apis")
            .extension(GoesFirst)
            .body(Vec::new())
            .unwrap();
        assert!(timed(first).await < Duration::from_millis(200));
    }
}

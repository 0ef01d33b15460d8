//! A term's first look at its releases: when an engine starts, or takes the Lease over,
//! every release it reconciles gets a first reconcile (a few at a time), and until each
//! has had it the engine has not checked what changed while nobody was looking. The
//! moment the last one ends is logged ("every release reconciled once"), with how many
//! and how long it took: after a restart at 10,000 releases that is when the engine is
//! caught up, and what `tests/bench.sh scale` times without scraping `/metrics` (whose
//! 10,000 histograms, 22 MB of text, cost a fifth of a core at the rate it polled).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

/// Shared by the term's first workers, each holding it until its first reconcile ends;
/// the last one to let go logs the line (see the module's doc).
#[derive(Debug)]
pub struct Warmup {
    started: Instant,
    releases: AtomicUsize,
    /// The term: a term that ended (the engine stopped, the Lease lost) logs nothing.
    term: CancellationToken,
}

impl Warmup {
    pub fn new(term: CancellationToken) -> Arc<Self> {
        Arc::new(Self {
            started: Instant::now(),
            releases: AtomicUsize::new(0),
            term,
        })
    }

    /// One more release whose first reconcile this warm-up waits for: it is done when
    /// the handle returned is dropped.
    pub fn enter(self: &Arc<Self>) -> Arc<Self> {
        self.releases.fetch_add(1, Ordering::Relaxed);
        self.clone()
    }

    /// Releases entered so far.
    pub fn releases(&self) -> usize {
        self.releases.load(Ordering::Relaxed)
    }

    /// What the line says once the last release let go (releases, milliseconds), `None`
    /// for a term that ended.
    fn outcome(&self) -> Option<(usize, u64)> {
        (!self.term.is_cancelled())
            .then(|| (self.releases(), self.started.elapsed().as_millis() as u64))
    }
}

impl Drop for Warmup {
    fn drop(&mut self) {
        if let Some((releases, ms)) = self.outcome() {
            tracing::info!(
                releases,
                ms,
                "every release reconciled once since the engine took the lease"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn done_when_the_last_handle_goes_and_only_for_a_running_term() {
        let term = CancellationToken::new();
        let warmup = Warmup::new(term.clone());
        let handles: Vec<_> = (0..3).map(|_| warmup.enter()).collect();
        assert_eq!(warmup.releases(), 3);
        let weak = Arc::downgrade(&warmup);
        drop(warmup);
        let mut handles = handles.into_iter();
        drop(handles.next());
        drop(handles.next());
        assert!(
            weak.upgrade().is_some(),
            "one release still has its first look to do"
        );
        drop(handles.next());
        assert!(weak.upgrade().is_none());

        let running = Warmup::new(CancellationToken::new());
        let _ = running.enter();
        assert_eq!(running.outcome().map(|(releases, _)| releases), Some(1));
        let ended = CancellationToken::new();
        let warmup = Warmup::new(ended.clone());
        let _ = warmup.enter();
        ended.cancel();
        // No line: the term ended before its releases were looked at.
        assert_eq!(warmup.outcome(), None);
    }
}

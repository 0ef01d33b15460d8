//! Coalescing bursts of changes: a key fires once its changes have been quiet for the
//! window (trailing edge), or at the latest `max_delay` after its first change, so a
//! steady stream of writes cannot postpone a rollout forever.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

#[derive(Debug)]
pub struct Debouncer<K> {
    window: Duration,
    max_delay: Duration,
    pending: HashMap<K, (Instant, Instant)>,
}

impl<K: Eq + Hash + Clone> Debouncer<K> {
    /// `max_delay` is raised to at least `window`.
    pub fn new(window: Duration, max_delay: Duration) -> Self {
        Self {
            window,
            max_delay: max_delay.max(window),
            pending: HashMap::new(),
        }
    }

    /// Records a change of `key` at `now`.
    pub fn touch(&mut self, key: K, now: Instant) {
        let (first, deadline) = self.pending.entry(key).or_insert((now, now));
        *deadline = (now + self.window).min(*first + self.max_delay);
    }

    pub fn remove(&mut self, key: &K) {
        self.pending.remove(key);
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        self.pending.values().map(|(_, deadline)| *deadline).min()
    }

    /// Takes the keys whose deadline has passed at `now`.
    pub fn take_due(&mut self, now: Instant) -> Vec<K> {
        let due: Vec<K> = self
            .pending
            .iter()
            .filter(|(_, (_, deadline))| *deadline <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in &due {
            self.pending.remove(k);
        }
        due
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.pending.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_burst_within_the_window_fires_once_after_the_last_change() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(2000 * MS, 10_000 * MS);
        d.touch("w", t0);
        d.touch("w", t0 + 500 * MS);
        d.touch("w", t0 + 1500 * MS);
        assert!(d.take_due(t0 + 2000 * MS).is_empty());
        assert_eq!(d.next_deadline(), Some(t0 + 3500 * MS));
        assert!(d.take_due(t0 + 3499 * MS).is_empty());
        assert_eq!(d.take_due(t0 + 3500 * MS), vec!["w"]);
        assert!(d.is_empty());
        assert!(d.take_due(t0 + 9000 * MS).is_empty());
    }

    #[test]
    fn changes_after_firing_start_a_new_round() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(1000 * MS, 5000 * MS);
        d.touch(1, t0);
        assert_eq!(d.take_due(t0 + 1000 * MS), vec![1]);
        d.touch(1, t0 + 1200 * MS);
        assert_eq!(d.next_deadline(), Some(t0 + 2200 * MS));
    }

    #[test]
    fn a_steady_stream_fires_at_max_delay() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(1000 * MS, 3000 * MS);
        for i in 0..10 {
            d.touch("w", t0 + i * 500 * MS);
        }
        assert_eq!(d.next_deadline(), Some(t0 + 3000 * MS));
    }

    #[test]
    fn keys_are_independent_and_removable() {
        let t0 = Instant::now();
        let mut d = Debouncer::new(1000 * MS, 1000 * MS);
        d.touch("a", t0);
        d.touch("b", t0 + 600 * MS);
        d.touch("c", t0);
        d.remove(&"c");
        assert_eq!(d.take_due(t0 + 1000 * MS), vec!["a"]);
        assert_eq!(d.take_due(t0 + 1600 * MS), vec!["b"]);
    }
}

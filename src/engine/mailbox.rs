//! A mailbox for one reader and one writer that costs little while empty: each release's
//! worker has one, and most of them sit empty for hours. tokio's unbounded channel
//! allocates its first block of 32 slots and cache-padded counters up front, about 1 KB
//! a channel (10 MB at 10,000 releases by `heaptrack`); this is a locked queue and a
//! `Notify`, about 150 bytes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

struct Shared<T> {
    queue: Mutex<VecDeque<T>>,
    /// The sender is gone: once the queue is empty, `recv` returns `None`.
    closed: AtomicBool,
    notify: Notify,
}

/// The writing end. Dropping it closes the mailbox (after what it holds is read).
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// The reading end.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

pub fn mailbox<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        queue: Mutex::new(VecDeque::new()),
        closed: AtomicBool::new(false),
        notify: Notify::new(),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

impl<T> Shared<T> {
    fn queue(&self) -> std::sync::MutexGuard<'_, VecDeque<T>> {
        // A push or a pop cannot leave the queue half-done: a poisoned lock is usable.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl<T> Sender<T> {
    /// Whether the receiver is gone (its worker ended).
    pub fn is_closed(&self) -> bool {
        Arc::strong_count(&self.shared) < 2
    }

    /// Queues `msg`; gives it back when the receiver is gone.
    pub fn send(&self, msg: T) -> Result<(), T> {
        if self.is_closed() {
            return Err(msg);
        }
        self.shared.queue().push_back(msg);
        // Stores a permit when the receiver is not waiting: the next `recv` finds the
        // message in the queue either way.
        self.shared.notify.notify_one();
        Ok(())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::Release);
        self.shared.notify.notify_one();
    }
}

impl<T> Receiver<T> {
    /// The next message; `None` once the sender is gone and every message was read.
    /// Cancel-safe: a message is taken only by the call that returns it.
    pub async fn recv(&mut self) -> Option<T> {
        loop {
            if let Some(msg) = self.shared.queue().pop_front() {
                return Some(msg);
            }
            if self.shared.closed.load(Ordering::Acquire) {
                // A message sent just before the close is still in the queue.
                return self.shared.queue().pop_front();
            }
            // A send since the look above left a permit: this returns at once.
            self.shared.notify.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn messages_arrive_in_order_and_the_end_after_them() {
        let (tx, mut rx) = mailbox();
        for i in 0..3 {
            tx.send(i).unwrap();
        }
        drop(tx);
        assert_eq!(rx.recv().await, Some(0));
        assert_eq!(rx.recv().await, Some(1));
        assert_eq!(rx.recv().await, Some(2));
        assert_eq!(rx.recv().await, None);
    }

    #[tokio::test]
    async fn a_waiting_receiver_wakes_for_a_message_and_for_the_close() {
        let (tx, mut rx) = mailbox();
        let reader = tokio::spawn(async move {
            let first = rx.recv().await;
            let end = rx.recv().await;
            (first, end)
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.send("hello").unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(tx);
        let (first, end) = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .expect("the reader woke")
            .unwrap();
        assert_eq!((first, end), (Some("hello"), None));
    }

    #[tokio::test]
    async fn a_receive_cut_short_loses_no_message() {
        let (tx, mut rx) = mailbox();
        // A receive that loses a race (as in `select!`) and is dropped ...
        tokio::select! {
            biased;
            () = std::future::ready(()) => {}
            _ = rx.recv() => unreachable!("nothing was sent"),
        }
        tx.send(7).unwrap();
        // ... leaves the message to the next one.
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), rx.recv()).await,
            Ok(Some(7))
        );
    }

    #[test]
    fn sending_to_a_dropped_receiver_gives_the_message_back() {
        let (tx, rx) = mailbox();
        assert!(!tx.is_closed());
        drop(rx);
        assert!(tx.is_closed());
        assert_eq!(tx.send(1), Err(1));
    }

    #[test]
    fn an_empty_mailbox_is_small() {
        let (tx, _rx) = mailbox::<u64>();
        // The shared state: the queue (empty, unallocated), the flag and the Notify.
        assert!(std::mem::size_of_val(&*tx.shared) <= 128);
    }

    #[tokio::test]
    async fn many_messages_from_another_task_all_arrive() {
        let (tx, mut rx) = mailbox();
        let writer = tokio::spawn(async move {
            for i in 0..10_000u32 {
                tx.send(i).unwrap();
                if i % 100 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        });
        let mut next = 0;
        while let Some(i) = rx.recv().await {
            assert_eq!(i, next);
            next += 1;
        }
        writer.await.unwrap();
        assert_eq!(next, 10_000);
    }
}

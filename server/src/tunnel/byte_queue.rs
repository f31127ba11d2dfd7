//! A queue bounded by bytes, not items: the tunnel's outgoing messages and each terminal's
//! output wait in one. A producer that must never block (the tunnel reader) uses
//! [`ByteQueue::try_push`] and drops the queue when it is full; one that may wait (terminal input
//! from a browser) uses [`ByteQueue::push_below`]. One consumer pops.

use std::collections::VecDeque;

use parking_lot::Mutex;
use tokio::sync::Notify;

struct State<T> {
    items: VecDeque<(T, usize)>,
    bytes: usize,
    /// No more pushes; the consumer drains what is queued.
    closed: bool,
    /// Dropped (what was queued is gone): the consumer stops at once.
    dropped: bool,
}

/// A multi-producer, single-consumer queue holding at most `capacity` bytes (one item larger
/// than that is taken when the queue is empty, so nothing wedges).
pub struct ByteQueue<T> {
    state: Mutex<State<T>>,
    capacity: usize,
    /// Wakes the consumer (a stored permit: no wake-up is lost).
    readable: Notify,
    /// Wakes producers waiting for room, and anyone waiting for the queue to be dropped.
    changed: Notify,
}

impl<T> ByteQueue<T> {
    /// An empty queue of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        let state = State { items: VecDeque::new(), bytes: 0, closed: false, dropped: false };
        Self { state: Mutex::new(state), capacity, readable: Notify::new(), changed: Notify::new() }
    }

    /// Queues `item` (weighing `bytes`) unless that would pass the capacity or the queue is
    /// closed; gives the item back then.
    pub fn try_push(&self, item: T, bytes: usize) -> Result<(), T> {
        self.push_if(item, bytes, self.capacity)
    }

    fn push_if(&self, item: T, bytes: usize, limit: usize) -> Result<(), T> {
        let mut state = self.state.lock();
        if state.closed || (!state.items.is_empty() && state.bytes.saturating_add(bytes) > limit) {
            return Err(item);
        }
        state.bytes += bytes;
        state.items.push_back((item, bytes));
        drop(state);
        self.readable.notify_one();
        Ok(())
    }

    /// Queues `item` once the queue holds at most `limit - bytes` bytes (waiting for the consumer
    /// as long as needed: wrap it in a timeout); gives it back if the queue is closed.
    pub async fn push_below(&self, item: T, bytes: usize, limit: usize) -> Result<(), T> {
        let limit = limit.min(self.capacity);
        let mut item = item;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.push_if(item, bytes, limit) {
                Ok(()) => return Ok(()),
                Err(back) if self.is_closed() => return Err(back),
                Err(back) => item = back,
            }
            changed.await;
        }
    }

    /// The next item; `None` once the queue is dropped, or closed and drained.
    pub async fn pop(&self) -> Option<T> {
        loop {
            {
                let mut state = self.state.lock();
                if state.dropped {
                    return None;
                }
                if let Some((item, bytes)) = state.items.pop_front() {
                    state.bytes -= bytes;
                    drop(state);
                    self.changed.notify_waiters();
                    return Some(item);
                }
                if state.closed {
                    return None;
                }
            }
            self.readable.notified().await;
        }
    }

    /// No more pushes; what is queued is still delivered.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.readable.notify_one();
        self.changed.notify_waiters();
    }

    /// No more pushes, and what is queued is thrown away: the consumer stops at once.
    pub fn drop_all(&self) {
        let mut state = self.state.lock();
        state.closed = true;
        state.dropped = true;
        state.items.clear();
        state.bytes = 0;
        drop(state);
        self.readable.notify_one();
        self.changed.notify_waiters();
    }

    /// Whether pushes are refused (closed or dropped).
    pub fn is_closed(&self) -> bool {
        self.state.lock().closed
    }

    /// Whether the queue was dropped ([`Self::drop_all`]).
    pub fn was_dropped(&self) -> bool {
        self.state.lock().dropped
    }

    /// Bytes queued now.
    pub fn queued_bytes(&self) -> usize {
        self.state.lock().bytes
    }

    /// Resolves once the queue is dropped.
    pub async fn dropped(&self) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.was_dropped() {
                return;
            }
            changed.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn it_holds_at_most_its_capacity_in_bytes() {
        let queue = ByteQueue::new(10);
        assert!(queue.try_push("a", 6).is_ok());
        assert!(queue.try_push("b", 4).is_ok());
        assert_eq!(queue.try_push("c", 1), Err("c"), "full");
        assert_eq!(queue.queued_bytes(), 10);
        assert_eq!(queue.pop().await, Some("a"));
        assert!(queue.try_push("c", 6).is_ok());
        queue.close();
        assert_eq!(queue.try_push("d", 0), Err("d"), "closed");
        assert_eq!(queue.pop().await, Some("b"));
        assert_eq!(queue.pop().await, Some("c"));
        assert_eq!(queue.pop().await, None);
    }

    #[tokio::test]
    async fn one_item_larger_than_the_capacity_passes_an_empty_queue() {
        let queue = ByteQueue::new(10);
        assert!(queue.try_push("big", 100).is_ok());
        assert_eq!(queue.try_push("small", 1), Err("small"));
    }

    #[tokio::test]
    async fn dropping_stops_the_consumer_at_once() {
        let queue = Arc::new(ByteQueue::new(10));
        assert!(queue.try_push(1, 5).is_ok());
        queue.drop_all();
        assert!(queue.was_dropped());
        assert_eq!(queue.pop().await, None);
        tokio::time::timeout(Duration::from_secs(5), queue.dropped()).await.expect("resolves");
    }

    #[tokio::test]
    async fn a_waiting_producer_gets_room_when_the_consumer_pops() {
        let queue = Arc::new(ByteQueue::new(10));
        assert!(queue.try_push(1, 8).is_ok());
        let producer = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.push_below(2, 4, 10).await })
        };
        assert_eq!(queue.pop().await, Some(1));
        let pushed = tokio::time::timeout(Duration::from_secs(5), producer).await.expect("in time").expect("joins");
        assert!(pushed.is_ok());
        assert_eq!(queue.pop().await, Some(2));
    }

    #[tokio::test]
    async fn a_waiting_producer_is_refused_when_the_queue_is_dropped() {
        let queue = Arc::new(ByteQueue::new(10));
        assert!(queue.try_push(1, 10).is_ok());
        let producer = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.push_below(2, 4, 10).await })
        };
        tokio::task::yield_now().await;
        queue.drop_all();
        let pushed = tokio::time::timeout(Duration::from_secs(5), producer).await.expect("in time").expect("joins");
        assert_eq!(pushed, Err(2));
    }
}

//! The input queue between the run loop and one writer task (a process's stdin, a terminal's
//! PTY), bounded by bytes.
//!
//! The run loop pushes; the writer takes items in order and reports each one done once it is
//! written. Bytes count against the bound from the push until the writer reports them done, so
//! [`Sender::held`] is exactly "accepted but not yet written". Consecutive data items are
//! coalesced into one buffer, so a flood of tiny frames costs what its bytes cost (plus
//! [`ITEM_COST`] per non-data item), never a queue slot each.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::sync::Notify;

/// What a non-data item (a resize) counts against the bound.
pub const ITEM_COST: usize = 16;

/// One thing for the writer to do, in order.
#[derive(Debug, PartialEq, Eq)]
pub enum Item {
    /// Bytes to write.
    Data(BytesMut),
    /// A new terminal size.
    Resize {
        /// Columns.
        cols: u16,
        /// Rows.
        rows: u16,
    },
}

impl Item {
    fn cost(&self) -> usize {
        match self {
            Self::Data(bytes) => bytes.len(),
            Self::Resize { .. } => ITEM_COST,
        }
    }
}

/// Why a push was refused; nothing of it was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// It would take what is held past the bound.
    Full {
        /// What is held now.
        held: usize,
        /// The bound.
        limit: usize,
    },
    /// The queue was closed, or its writer is gone or failed.
    Closed,
}

#[derive(Debug)]
struct Inner {
    items: VecDeque<Item>,
    /// Cost of the queued items plus the one the writer is working on.
    held: usize,
    limit: usize,
    /// No more pushes: the sender closed it.
    closed: bool,
    /// The writer is gone or failed: pushes are refused.
    broken: bool,
    /// Data bytes the writer reported written.
    written: u64,
}

#[derive(Debug)]
struct Shared {
    inner: Mutex<Inner>,
    wake: Notify,
}

/// The run loop's end.
#[derive(Debug)]
pub struct Sender {
    shared: Arc<Shared>,
}

/// The writer's end.
#[derive(Debug)]
pub struct Receiver {
    shared: Arc<Shared>,
}

/// A queue holding at most `limit` bytes.
pub fn bounded(limit: usize) -> (Sender, Receiver) {
    let inner = Inner { items: VecDeque::new(), held: 0, limit, closed: false, broken: false, written: 0 };
    let shared = Arc::new(Shared { inner: Mutex::new(inner), wake: Notify::new() });
    (Sender { shared: shared.clone() }, Receiver { shared })
}

impl Sender {
    /// Queues bytes whole, or refuses them whole.
    pub fn push_data(&self, bytes: &[u8]) -> Result<(), Refused> {
        if bytes.is_empty() {
            return Ok(());
        }
        let mut inner = self.shared.inner.lock();
        inner.admit(bytes.len())?;
        inner.held += bytes.len();
        match inner.items.back_mut() {
            Some(Item::Data(last)) => last.extend_from_slice(bytes),
            _ => inner.items.push_back(Item::Data(BytesMut::from(bytes))),
        }
        drop(inner);
        self.shared.wake.notify_one();
        Ok(())
    }

    /// Queues a resize (a queued resize not yet taken is replaced: only the last size matters).
    pub fn push_resize(&self, cols: u16, rows: u16) -> Result<(), Refused> {
        let mut inner = self.shared.inner.lock();
        if let Some(Item::Resize { cols: c, rows: r }) = inner.items.back_mut() {
            (*c, *r) = (cols, rows);
            return Ok(());
        }
        inner.admit(ITEM_COST)?;
        inner.held += ITEM_COST;
        inner.items.push_back(Item::Resize { cols, rows });
        drop(inner);
        self.shared.wake.notify_one();
        Ok(())
    }

    /// No more items: the writer ends once it has written what is queued.
    pub fn close(&self) {
        self.shared.inner.lock().closed = true;
        self.shared.wake.notify_one();
    }

    /// Bytes (and item costs) accepted but not yet written.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.shared.inner.lock().held
    }

    /// Data bytes written so far.
    pub fn written(&self) -> u64 {
        self.shared.inner.lock().written
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.close();
    }
}

impl Inner {
    fn admit(&self, cost: usize) -> Result<(), Refused> {
        if self.closed || self.broken {
            return Err(Refused::Closed);
        }
        if self.held.saturating_add(cost) > self.limit {
            return Err(Refused::Full { held: self.held, limit: self.limit });
        }
        Ok(())
    }
}

impl Receiver {
    /// The next item, or `None` once the queue is closed and empty. Call [`Receiver::done`]
    /// with the item once it is written.
    pub async fn next(&mut self) -> Option<Item> {
        loop {
            {
                let mut inner = self.shared.inner.lock();
                if let Some(item) = inner.items.pop_front() {
                    return Some(item);
                }
                if inner.closed {
                    return None;
                }
            }
            // A notification sent since the check is kept as a permit (one receiver).
            self.shared.wake.notified().await;
        }
    }

    /// The item was written (or given up on): its cost leaves the bound. Returns the total of
    /// data bytes written and whether nothing else is queued.
    pub fn done(&mut self, item: &Item, written: bool) -> (u64, bool) {
        let mut inner = self.shared.inner.lock();
        inner.held = inner.held.saturating_sub(item.cost());
        if written && let Item::Data(bytes) = item {
            inner.written += bytes.len() as u64;
        }
        (inner.written, inner.items.is_empty())
    }

    /// The writer cannot write any more (its pipe broke): further pushes are refused and what
    /// is queued is dropped.
    pub fn fail(&mut self) {
        let mut inner = self.shared.inner.lock();
        inner.broken = true;
        let dropped: usize = inner.items.drain(..).map(|item| item.cost()).sum();
        inner.held = inner.held.saturating_sub(dropped);
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.fail();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bytes_are_bounded_coalesced_and_released_when_done() {
        let (tx, mut rx) = bounded(10);
        tx.push_data(b"abc").expect("fits");
        tx.push_data(b"defg").expect("fits");
        assert_eq!(tx.push_data(b"hijk"), Err(Refused::Full { held: 7, limit: 10 }), "whole or nothing");
        tx.push_data(b"hij").expect("exactly the bound fits");
        assert_eq!(tx.held(), 10);
        let item = rx.next().await.expect("an item");
        assert_eq!(item, Item::Data(BytesMut::from(&b"abcdefghij"[..])), "coalesced");
        assert_eq!(tx.push_data(b"k"), Err(Refused::Full { held: 10, limit: 10 }), "in flight still counts");
        assert_eq!(rx.done(&item, true), (10, true));
        assert_eq!((tx.held(), tx.written()), (0, 10));
        tx.push_data(b"k").expect("room again");
    }

    #[tokio::test]
    async fn resizes_keep_their_place_and_the_last_size_wins() {
        let (tx, mut rx) = bounded(100);
        tx.push_data(b"ls\n").expect("fits");
        tx.push_resize(80, 24).expect("fits");
        tx.push_resize(100, 30).expect("fits");
        tx.push_data(b"x").expect("fits");
        assert_eq!(tx.held(), 3 + ITEM_COST + 1);
        assert_eq!(rx.next().await, Some(Item::Data(BytesMut::from(&b"ls\n"[..]))));
        assert_eq!(rx.next().await, Some(Item::Resize { cols: 100, rows: 30 }));
        assert_eq!(rx.next().await, Some(Item::Data(BytesMut::from(&b"x"[..]))));
    }

    #[tokio::test]
    async fn close_ends_after_the_queue_drains_and_failure_refuses() {
        let (tx, mut rx) = bounded(100);
        tx.push_data(b"last").expect("fits");
        tx.close();
        assert_eq!(tx.push_data(b"late"), Err(Refused::Closed));
        assert!(matches!(rx.next().await, Some(Item::Data(_))));
        assert_eq!(rx.next().await, None);

        let (tx, mut rx) = bounded(100);
        tx.push_data(b"queued").expect("fits");
        rx.fail();
        assert_eq!((tx.held(), tx.push_data(b"more")), (0, Err(Refused::Closed)));
        drop(rx);
        assert_eq!(tx.push_data(b"more"), Err(Refused::Closed), "a gone writer refuses too");
    }

    #[tokio::test]
    async fn a_waiting_writer_wakes_on_push_and_on_close() {
        let (tx, mut rx) = bounded(100);
        let writer = tokio::spawn(async move {
            let first = rx.next().await;
            let second = rx.next().await;
            (first, second)
        });
        tokio::task::yield_now().await;
        tx.push_data(b"hi").expect("fits");
        tokio::task::yield_now().await;
        tx.close();
        let (first, second) = writer.await.expect("joins");
        assert_eq!((first, second), (Some(Item::Data(BytesMut::from(&b"hi"[..]))), None));
    }
}

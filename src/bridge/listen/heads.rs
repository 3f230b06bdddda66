//! What unfinished request heads may cost: at most [`MAX_HEAD`] each
//! (hyper's read buffer, answered `431` past it), and at most
//! [`HEAD_BUDGET`] for all of them together. A connection whose head
//! would take the sum past the budget is cut (its read fails), so 2,000
//! clients each holding a head open cost the budget, not 2,000 buffers.
//! Counted from the bytes read while no request is in flight; a head's
//! bytes are given back when its request begins or its connection ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest request head (request line and headers) read.
pub const MAX_HEAD: usize = 64 << 10;

/// The bytes all unfinished heads together may hold.
pub const HEAD_BUDGET: usize = 16 << 20;

/// One connection's share of the head budget.
pub(super) struct HeadBytes {
    mine: AtomicUsize,
    total: Arc<AtomicUsize>,
    /// The connection was upgraded (a WebSocket): no more heads on it.
    off: std::sync::atomic::AtomicBool,
}

impl HeadBytes {
    /// A connection's counter against the bridge-wide `total`.
    pub(super) fn new(total: Arc<AtomicUsize>) -> HeadBytes {
        HeadBytes {
            mine: AtomicUsize::new(0),
            total,
            off: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// `n` more bytes of an unfinished head; `false` when the budget is
    /// spent (then they are not counted: the connection is to be cut).
    pub(super) fn add(&self, n: usize) -> bool {
        if self.off.load(Ordering::Relaxed) {
            return true;
        }
        let before = self.total.fetch_add(n, Ordering::Relaxed);
        if before + n > HEAD_BUDGET {
            self.total.fetch_sub(n, Ordering::Relaxed);
            return false;
        }
        self.mine.fetch_add(n, Ordering::Relaxed);
        true
    }

    /// The connection asks to be upgraded: what it reads from now on are
    /// WebSocket frames, bounded by the WebSocket's own limits.
    pub(super) fn stop(&self) {
        self.off.store(true, Ordering::Relaxed);
        self.release();
    }

    /// The head is done (its request began): its bytes are hyper's
    /// request now, bounded by the body limits.
    pub(super) fn release(&self) {
        let mine = self.mine.swap(0, Ordering::Relaxed);
        self.total.fetch_sub(mine, Ordering::Relaxed);
    }
}

impl Drop for HeadBytes {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_shared_and_given_back() {
        let total = Arc::new(AtomicUsize::new(0));
        let a = HeadBytes::new(total.clone());
        let b = HeadBytes::new(total.clone());
        assert!(a.add(HEAD_BUDGET - 10));
        assert!(!b.add(11), "over the budget");
        assert!(b.add(10));
        a.release();
        assert_eq!(total.load(Ordering::Relaxed), 10);
        drop(b);
        assert_eq!(total.load(Ordering::Relaxed), 0);
    }
}

//! The bytes of request bodies being read and processed at once (`max_body_bytes_in_flight`).
//!
//! A request reserves its declared `Content-Length` (the route's body limit when it has
//! none) before its body is read, and, once its signature is verified, what parsing it
//! will cost beyond that; it gives everything back when it is answered. A request that cannot reserve within a
//! short wait is answered 503 with `Retry-After`, so a burst of large bodies queues for a
//! moment and then sheds load instead of taking the process's memory.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// How long a request waits for room before it is answered 503.
pub const MAX_WAIT: Duration = Duration::from_secs(2);
/// Bodies smaller than this are not scanned for their parse cost (it stays small).
const SCAN_FROM: usize = 64 * 1024;
/// Bytes a parsed JSON value takes in memory (an ordered-map `serde_json::Value` node
/// and its share of the containing vector), for the parse-cost estimate.
const NODE_BYTES: u64 = 96;

/// The shared budget: the bytes reserved, taken and given back with one atomic
/// operation each while there is room (no lock, no timer); requests that must wait
/// are woken when room is given back.
pub struct BodyBudget {
    reserved: AtomicU64,
    total: u64,
    /// Requests waiting for room.
    waiting: AtomicUsize,
    freed: Notify,
}

/// Room reserved by one request, given back when dropped.
pub struct Reservation<'a> {
    budget: &'a BodyBudget,
    bytes: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

/// Counts a request among the waiting for as long as it waits (cancelled or not).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl BodyBudget {
    pub fn new(max_bytes: u64) -> Self {
        BodyBudget {
            reserved: AtomicU64::new(0),
            total: max_bytes.max(1),
            waiting: AtomicUsize::new(0),
            freed: Notify::new(),
        }
    }

    /// Reserves `bytes` (at most the whole budget), waiting up to [`MAX_WAIT`].
    pub async fn reserve(&self, bytes: u64) -> Option<Reservation<'_>> {
        let mut reservation = Reservation {
            budget: self,
            bytes: 0,
        };
        self.grow(&mut reservation, bytes)
            .await
            .then_some(reservation)
    }

    /// Adds `bytes` to a reservation (the whole reservation stays within the budget).
    pub async fn grow(&self, reservation: &mut Reservation<'_>, bytes: u64) -> bool {
        let wanted = bytes
            .max(1)
            .min(self.total.saturating_sub(reservation.bytes));
        if wanted == 0 {
            return true;
        }
        let taken = self.try_take(wanted) || self.wait_and_take(wanted).await;
        if taken {
            reservation.bytes += wanted;
        }
        taken
    }

    fn try_take(&self, bytes: u64) -> bool {
        self.reserved
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |held| {
                // `max_body_bytes_in_flight` comes from config: no overflow near u64::MAX.
                held.checked_add(bytes).filter(|&after| after <= self.total)
            })
            .is_ok()
    }

    async fn wait_and_take(&self, bytes: u64) -> bool {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _waiting = Waiting(&self.waiting);
        let deadline = tokio::time::Instant::now() + MAX_WAIT;
        loop {
            // Listening before the retry: room given back after it wakes us.
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            if self.try_take(bytes) {
                return true;
            }
            if tokio::time::timeout_at(deadline, freed).await.is_err() {
                return false;
            }
        }
    }

    fn give_back(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.reserved.fetch_sub(bytes, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.freed.notify_waiters();
        }
    }
}

/// What parsing `body` as JSON is expected to take in memory beyond the body itself:
/// one node per value, counted from the separators and openers (an overestimate for
/// text that holds them inside strings).
pub fn parse_cost(body: &[u8]) -> u64 {
    if body.len() < SCAN_FROM {
        return body.len() as u64;
    }
    let nodes = body
        .iter()
        .filter(|b| matches!(b, b',' | b'[' | b'{' | b':'))
        .count() as u64;
    nodes * NODE_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reservations_wait_then_give_up_and_are_returned() {
        const UNIT: u64 = 1024;
        let budget = BodyBudget::new(10 * UNIT);
        let a = budget.reserve(8 * UNIT).await.unwrap();
        let started = std::time::Instant::now();
        assert!(budget.reserve(4 * UNIT).await.is_none());
        assert!(started.elapsed() >= MAX_WAIT);
        drop(a);
        let mut b = budget.reserve(4 * UNIT).await.unwrap();
        // Growing stops at the whole budget: one huge request still gets through alone.
        assert!(budget.grow(&mut b, 1 << 40).await);
        drop(b);
        assert!(budget.reserve(1 << 40).await.is_some());
        assert_eq!(budget.reserved.load(Ordering::SeqCst), 0);
        // A budget as large as config allows never overflows.
        let huge = BodyBudget::new(u64::MAX);
        let _a = huge.reserve(u64::MAX - 1).await.unwrap();
        assert!(huge.try_take(1));
        assert!(!huge.try_take(1));
    }

    #[tokio::test]
    async fn a_waiting_request_gets_the_room_given_back() {
        let budget = BodyBudget::new(10);
        let a = budget.reserve(10).await.unwrap();
        let (waiter, _) = tokio::join!(budget.reserve(5), async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(a);
        });
        let b = waiter.expect("woken when room was given back");
        assert_eq!(budget.reserved.load(Ordering::SeqCst), 5);
        drop(b);
        assert_eq!(budget.waiting.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn parse_cost_counts_nodes_of_large_bodies() {
        assert_eq!(parse_cost(b"[[],[]]"), 7);
        let nested = "[[],".repeat(40_000);
        assert!(parse_cost(nested.as_bytes()) > 40 * nested.len() as u64);
    }
}

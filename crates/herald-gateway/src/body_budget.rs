//! The bytes of request bodies being read and processed at once (`max_body_bytes_in_flight`).
//!
//! A request reserves its declared `Content-Length` (the route's body limit when it has
//! none) before its body is read, and, once read, what parsing it will cost beyond that;
//! it gives everything back when it is answered. A request that cannot reserve within a
//! short wait is answered 503 with `Retry-After`, so a burst of large bodies queues for a
//! moment and then sheds load instead of taking the process's memory.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Reservations are counted in units of this many bytes.
const UNIT: u64 = 1024;
/// How long a request waits for room before it is answered 503.
pub const MAX_WAIT: Duration = Duration::from_secs(2);
/// Bodies smaller than this are not scanned for their parse cost (it stays small).
const SCAN_FROM: usize = 64 * 1024;
/// Bytes a parsed JSON value takes in memory (an ordered-map `serde_json::Value` node
/// and its share of the containing vector), for the parse-cost estimate.
const NODE_BYTES: u64 = 96;

/// The shared budget.
pub struct BodyBudget {
    permits: Arc<Semaphore>,
    total_units: u32,
}

/// Room reserved by one request, given back when dropped.
pub struct Reservation {
    permit: Option<OwnedSemaphorePermit>,
}

impl BodyBudget {
    pub fn new(max_bytes: u64) -> Self {
        let total_units = u32::try_from(max_bytes.div_ceil(UNIT).max(1)).unwrap_or(u32::MAX >> 4);
        BodyBudget {
            permits: Arc::new(Semaphore::new(total_units as usize)),
            total_units,
        }
    }

    /// Reserves `bytes` (at most the whole budget), waiting up to [`MAX_WAIT`].
    pub async fn reserve(&self, bytes: u64) -> Option<Reservation> {
        let mut reservation = Reservation { permit: None };
        self.grow(&mut reservation, bytes)
            .await
            .then_some(reservation)
    }

    /// Adds `bytes` to a reservation (the whole reservation stays within the budget).
    pub async fn grow(&self, reservation: &mut Reservation, bytes: u64) -> bool {
        let held = reservation
            .permit
            .as_ref()
            .map_or(0, |p| p.num_permits() as u32);
        let wanted = u32::try_from(bytes.div_ceil(UNIT).max(1))
            .unwrap_or(u32::MAX)
            .min(self.total_units.saturating_sub(held));
        if wanted == 0 {
            return true;
        }
        let acquire = self.permits.clone().acquire_many_owned(wanted);
        match tokio::time::timeout(MAX_WAIT, acquire).await {
            Ok(Ok(permit)) => {
                match &mut reservation.permit {
                    Some(held) => held.merge(permit),
                    None => reservation.permit = Some(permit),
                }
                true
            }
            _ => false,
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
    }

    #[test]
    fn parse_cost_counts_nodes_of_large_bodies() {
        assert_eq!(parse_cost(b"[[],[]]"), 7);
        let nested = "[[],".repeat(40_000);
        assert!(parse_cost(nested.as_bytes()) > 40 * nested.len() as u64);
    }
}

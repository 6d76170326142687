//! Back-pressure from a front door's reader to the provider. A run's streamed text is
//! held in queues until its reader takes it; when a reader stops reading (a stalled
//! client), reading on from a fast provider would hold the whole answer in memory. A
//! [`Flow`] counts the bytes produced and not yet taken; past its limit the provider
//! client stops reading the provider's stream (TCP then slows the provider) until the
//! reader takes some. A flow no reader engages within [`ENGAGE_WITHIN`] of its start
//! never waits after that (its run's events go unread), and one whose reader left never
//! waits again.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// How long a new flow waits for its reader to come (the front door takes the events
/// just after the run starts) before it stops pausing the provider for nobody.
pub const ENGAGE_WITHIN: Duration = Duration::from_secs(2);

const AWAITED: u8 = 0;
const ENGAGED: u8 = 1;
const OFF: u8 = 2;

/// How many bytes of a run's text may wait for its reader before the provider is paused.
pub const FLOW_LIMIT: u64 = 512 * 1024;

/// The bytes of one run's output waiting for its reader.
#[derive(Debug)]
pub struct Flow {
    held: AtomicU64,
    limit: u64,
    /// Whether a reader takes the output ([`ENGAGED`]), may still come ([`AWAITED`],
    /// until `awaited_until`) or will not ([`OFF`]).
    reader: AtomicU8,
    awaited_until: Instant,
    freed: Notify,
}

impl Default for Flow {
    fn default() -> Self {
        Flow::new(FLOW_LIMIT)
    }
}

impl Flow {
    pub fn new(limit: u64) -> Self {
        Flow {
            held: AtomicU64::new(0),
            limit: limit.max(1),
            reader: AtomicU8::new(AWAITED),
            awaited_until: Instant::now() + ENGAGE_WITHIN,
            freed: Notify::new(),
        }
    }

    /// A reader takes the output from now on.
    pub fn engage(&self) {
        let _ = self
            .reader
            .compare_exchange(AWAITED, ENGAGED, Ordering::SeqCst, Ordering::SeqCst);
        self.freed.notify_waiters();
    }

    /// The reader is gone: nothing is held for it any more, and nothing waits.
    pub fn disengage(&self) {
        self.reader.store(OFF, Ordering::SeqCst);
        self.held.store(0, Ordering::SeqCst);
        self.freed.notify_waiters();
    }

    /// `bytes` more wait for the reader.
    pub fn hold(&self, bytes: u64) {
        self.held.fetch_add(bytes, Ordering::SeqCst);
    }

    /// The reader took `bytes`.
    pub fn release(&self, bytes: u64) {
        let _ = self
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |h| {
                Some(h.saturating_sub(bytes))
            });
        self.freed.notify_waiters();
    }

    fn over(&self) -> bool {
        self.held.load(Ordering::SeqCst) > self.limit
    }

    /// Waits while the reader is more than the limit behind (or, for a new flow, while
    /// its reader may still come).
    pub async fn room(&self) {
        loop {
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            if !self.over() {
                return;
            }
            match self.reader.load(Ordering::SeqCst) {
                ENGAGED => freed.await,
                AWAITED => {
                    if tokio::time::timeout_at(self.awaited_until, freed)
                        .await
                        .is_err()
                    {
                        let _ = self.reader.compare_exchange(
                            AWAITED,
                            OFF,
                            Ordering::SeqCst,
                            Ordering::SeqCst,
                        );
                    }
                }
                _ => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_full_flow_waits_until_its_reader_takes_or_leaves() {
        let flow = Flow::new(10);
        flow.hold(100);
        flow.engage();
        let stuck = tokio::time::timeout(Duration::from_millis(50), flow.room()).await;
        assert!(stuck.is_err(), "engaged and full: waits");
        let (woken, ()) = tokio::join!(
            tokio::time::timeout(Duration::from_secs(2), flow.room()),
            async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                flow.release(95);
            }
        );
        assert!(woken.is_ok(), "room again once the reader took some");
        flow.hold(100);
        let (woken, ()) = tokio::join!(
            tokio::time::timeout(Duration::from_secs(2), flow.room()),
            async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                flow.disengage();
            }
        );
        assert!(woken.is_ok(), "a reader that left frees the provider");
    }

    #[tokio::test]
    async fn a_new_flow_waits_for_its_reader_only_a_while() {
        let flow = Flow::new(10);
        flow.hold(100);
        let started = Instant::now();
        flow.room().await;
        assert!(
            started.elapsed() >= ENGAGE_WITHIN,
            "waited for a reader to come"
        );
        flow.engage();
        let again = tokio::time::timeout(Duration::from_millis(50), flow.room()).await;
        assert!(again.is_ok(), "nobody came: never waits again");
    }
}

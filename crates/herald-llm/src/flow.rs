//! Back-pressure from a front door's reader to the provider. A run's streamed text is
//! held in queues until its reader takes it; when a reader stops reading (a stalled
//! client), reading on from a fast provider would hold the whole answer in memory. A
//! [`Flow`] counts the bytes produced and not yet taken; past its limit the provider
//! client stops reading the provider's stream (TCP then slows the provider) until the
//! reader takes some. A flow no reader has engaged never waits.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::sync::Notify;

/// How many bytes of a run's text may wait for its reader before the provider is paused.
pub const FLOW_LIMIT: u64 = 512 * 1024;

/// The bytes of one run's output waiting for its reader.
#[derive(Debug)]
pub struct Flow {
    held: AtomicU64,
    limit: u64,
    /// A reader takes the output: only then may the provider be paused.
    engaged: AtomicBool,
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
            engaged: AtomicBool::new(false),
            freed: Notify::new(),
        }
    }

    /// A reader takes the output from now on.
    pub fn engage(&self) {
        self.engaged.store(true, Ordering::SeqCst);
    }

    /// The reader is gone: nothing is held for it any more, and nothing waits.
    pub fn disengage(&self) {
        self.engaged.store(false, Ordering::SeqCst);
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

    fn full(&self) -> bool {
        self.engaged.load(Ordering::SeqCst) && self.held.load(Ordering::SeqCst) > self.limit
    }

    /// Waits while the reader is more than the limit behind.
    pub async fn room(&self) {
        loop {
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            if !self.full() {
                return;
            }
            freed.await;
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
        let quick = tokio::time::timeout(Duration::from_millis(50), flow.room()).await;
        assert!(quick.is_ok(), "not engaged: never waits");
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
}

//! What the writer thread tells work that must never hold it up (the search index's
//! builder): whether it has writes in hand, and since when it has had none.
//!
//! The writer marks itself busy as soon as it takes a write and idle once nothing is
//! waiting; background work starts a transaction only after the writer has been idle
//! for a moment and ends it as soon as the writer is busy again, as PostgreSQL's
//! autovacuum yields to foreground work.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The writer's state, shared with background work on the same database.
#[derive(Debug)]
pub(crate) struct WriterGate {
    busy: AtomicBool,
    /// Microseconds since `epoch` when the writer last went idle.
    idle_since_us: AtomicU64,
    epoch: Instant,
}

impl Default for WriterGate {
    fn default() -> WriterGate {
        WriterGate {
            busy: AtomicBool::new(false),
            idle_since_us: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl WriterGate {
    /// The writer has taken a write.
    pub(crate) fn busy(&self) {
        self.busy.store(true, Ordering::Release);
    }

    /// The writer has nothing in hand.
    pub(crate) fn idle(&self) {
        if self.busy.swap(false, Ordering::AcqRel) {
            self.idle_since_us
                .store(self.elapsed_us(), Ordering::Release);
        }
    }

    /// Whether the writer has work in hand (background work should stop).
    pub(crate) fn is_busy(&self) -> bool {
        self.busy.load(Ordering::Acquire)
    }

    /// Whether the writer has been idle for at least `quiet`.
    pub(crate) fn quiet_for(&self, quiet: Duration) -> bool {
        if self.is_busy() {
            return false;
        }
        let since = self.idle_since_us.load(Ordering::Acquire);
        self.elapsed_us().saturating_sub(since) >= quiet.as_micros() as u64
    }

    fn elapsed_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_only_after_the_writer_rested() {
        let gate = WriterGate::default();
        std::thread::sleep(Duration::from_millis(3));
        assert!(gate.quiet_for(Duration::from_millis(2)));
        gate.busy();
        assert!(gate.is_busy());
        assert!(!gate.quiet_for(Duration::ZERO));
        gate.idle();
        assert!(!gate.quiet_for(Duration::from_millis(50)));
        std::thread::sleep(Duration::from_millis(3));
        assert!(gate.quiet_for(Duration::from_millis(2)));
    }
}

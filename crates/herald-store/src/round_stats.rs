//! A debug-level summary of a store thread's rounds (the writer's commits, the
//! syncer's syncs): how many, how many items each, how long each took.

use std::time::{Duration, Instant};

/// Counts rounds and logs their means every few seconds, then starts over.
pub(crate) struct RoundStats {
    /// What the summary line says (e.g. "store writer").
    what: &'static str,
    rounds: u64,
    items: u64,
    busy: Duration,
    since: Option<Instant>,
}

impl RoundStats {
    pub(crate) fn new(what: &'static str) -> RoundStats {
        RoundStats {
            what,
            rounds: 0,
            items: 0,
            busy: Duration::ZERO,
            since: None,
        }
    }

    /// One round of `items` that took `took`.
    pub(crate) fn record(&mut self, items: usize, took: Duration) {
        let since = *self.since.get_or_insert_with(Instant::now);
        self.rounds += 1;
        self.items += items as u64;
        self.busy += took;
        if since.elapsed() >= Duration::from_secs(5) {
            tracing::debug!(
                rounds = self.rounds,
                items = self.items,
                mean_items = self.items as f64 / self.rounds as f64,
                mean_us = self.busy.as_micros() as u64 / self.rounds,
                "{}",
                self.what
            );
            *self = RoundStats::new(self.what);
        }
    }
}

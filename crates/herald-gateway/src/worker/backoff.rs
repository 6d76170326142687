//! Retry back-off for failing runs and deliveries (spec §14.5).

use std::time::Duration;

/// herald's back-off (`retry_initial_seconds` doubling up to `retry_max_seconds`, up
/// to 10 % jitter), retried for `retry_for`.
#[derive(Debug, Clone, PartialEq)]
pub struct Backoff {
    pub waits: herald_retry::Backoff,
    /// How long a failing stage is retried before the entry is dead.
    pub retry_for: Duration,
}

impl Backoff {
    /// `retry_initial_seconds`, `retry_max_seconds` and `retry_for_seconds`.
    pub fn from_settings(w: &herald_config::WorkerSettings) -> Self {
        Backoff {
            waits: herald_retry::Backoff {
                initial: Duration::from_secs(w.retry_initial_secs),
                cap: Duration::from_secs(w.retry_max_secs),
                jitter: 0.1,
            },
            retry_for: Duration::from_secs(w.retry_for_secs),
        }
    }

    /// The wait before the next attempt after `failures` failures in a row (≥ 1).
    pub fn wait(&self, failures: u32) -> Duration {
        self.waits.wait(failures)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_initial_and_is_capped() {
        let b = Backoff {
            waits: herald_retry::Backoff {
                initial: Duration::from_secs(1),
                cap: Duration::from_secs(15),
                jitter: 0.1,
            },
            retry_for: Duration::from_secs(600),
        };
        for (failures, base) in [(1, 1), (2, 2), (3, 4), (4, 8), (5, 15), (40, 15)] {
            let w = b.wait(failures);
            let base = Duration::from_secs(base);
            assert!(w >= base && w <= base.mul_f64(1.1), "{failures}: {w:?}");
        }
        // 10 minutes of retries at the cap is dozens of attempts: a 22 s outage
        // is absorbed.
        let mut total = Duration::ZERO;
        let mut n = 0;
        while total < Duration::from_secs(22) {
            n += 1;
            total += b.wait(n);
        }
        assert!(total < b.retry_for && n < 10);
    }
}

//! herald's one back-off, for every retry loop: the webhook worker's runs and
//! deliveries, the provider client's attempts and the plugin host's restarts. A first
//! wait doubles with each failure up to a cap, plus jitter: a fraction of the wait
//! drawn from an injected source ([`Backoff::wait_with`]), so tests choose the draw;
//! [`Backoff::wait`] draws it at random.

use std::time::Duration;

/// The end of a provider error whose local server refused the connection twice (nothing
/// listens there): a call gives up at once instead of backing off for seconds, while the
/// webhook worker, whose window is minutes, still tries the event again later.
pub const NOT_LISTENING: &str =
    " (nothing listens there: start the local server, or correct the base URL)";

/// A first wait doubling up to `cap`, plus up to `jitter` (a fraction) of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Backoff {
    pub initial: Duration,
    pub cap: Duration,
    /// The largest jitter, as a fraction of the wait (0.1: up to 10 % more).
    pub jitter: f64,
}

impl Backoff {
    /// The wait before the next attempt after `failures` failures in a row (≥ 1),
    /// without jitter: `initial` doubling, at most `cap` (never below `initial`).
    pub fn base(&self, failures: u32) -> Duration {
        let exp = failures.saturating_sub(1).min(20);
        self.initial
            .saturating_mul(1u32 << exp)
            .min(self.cap.max(self.initial))
    }

    /// [`Backoff::base`] plus `draw` (in `[0, 1]`, clamped) times the jitter.
    pub fn wait_with(&self, failures: u32, draw: f64) -> Duration {
        let base = self.base(failures);
        let fraction = (draw.clamp(0.0, 1.0) * self.jitter).max(0.0);
        base + base.mul_f64(fraction)
    }

    /// [`Backoff::wait_with`] a random draw.
    pub fn wait(&self, failures: u32) -> Duration {
        self.wait_with(failures, rand::random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_is_capped_and_jitters_by_the_draw() {
        let b = Backoff {
            initial: Duration::from_secs(1),
            cap: Duration::from_secs(15),
            jitter: 0.1,
        };
        for (failures, base) in [(0, 1), (1, 1), (2, 2), (3, 4), (4, 8), (5, 15), (400, 15)] {
            assert_eq!(b.base(failures), Duration::from_secs(base), "{failures}");
            assert_eq!(b.wait_with(failures, 0.0), Duration::from_secs(base));
            let top = Duration::from_secs(base).mul_f64(1.1);
            assert_eq!(b.wait_with(failures, 1.0), top);
            assert_eq!(b.wait_with(failures, 7.0), top, "the draw is clamped");
            let w = b.wait(failures);
            assert!(w >= Duration::from_secs(base) && w <= top);
        }
        let small_cap = Backoff {
            cap: Duration::from_millis(10),
            ..b
        };
        assert_eq!(
            small_cap.base(3),
            Duration::from_secs(1),
            "never below initial"
        );
    }
}

//! Per-route rate limit: a rolling 60-second window over the times of allowed requests
//! (spec §12). Rejected requests are not counted.
//!
//! Allowed requests within a millisecond of each other share one entry (a count and
//! the latest time), which leaves the window when its latest request does. The limit is
//! therefore never exceeded in any 60 s, a request is held at most 1 ms longer than
//! its own time says, and a route's memory is bounded by 60,000 entries however high
//! its `rate_limit` and however fast the requests come (one entry per request would
//! keep millions of them under a load test).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The window length.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Allowed requests this close together are counted in one entry.
const GRAIN: Duration = Duration::from_millis(1);

/// Allowed requests close together (all within `GRAIN` of the first): how many, and
/// when the first and the latest came.
struct Burst {
    first: Instant,
    latest: Instant,
    count: u64,
}

/// One route's allowed requests within the window.
#[derive(Default)]
struct Window {
    bursts: VecDeque<Burst>,
    /// The sum of the bursts' counts.
    total: u64,
}

impl Window {
    /// Counts out what has left the window at `now`.
    fn expire(&mut self, now: Instant) {
        while let Some(front) = self.bursts.front()
            && now.saturating_duration_since(front.latest) >= WINDOW
        {
            self.total -= front.count;
            self.bursts.pop_front();
        }
    }

    fn record(&mut self, now: Instant) {
        self.total += 1;
        if let Some(back) = self.bursts.back_mut()
            && now.saturating_duration_since(back.first) < GRAIN
        {
            back.count += 1;
            back.latest = back.latest.max(now);
            return;
        }
        self.bursts.push_back(Burst {
            first: now,
            latest: now,
            count: 1,
        });
    }
}

/// Counts allowed requests per route name.
#[derive(Default)]
pub struct RateLimiter {
    allowed: Mutex<HashMap<String, Window>>,
}

impl RateLimiter {
    /// Whether a request to `route` at `now` is allowed under `limit`; counts it if so.
    pub fn check(&self, route: &str, limit: u32, now: Instant) -> bool {
        if limit == 0 {
            return false;
        }
        let mut map = match self.allowed.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let window = match map.get_mut(route) {
            Some(w) => w,
            None => map.entry(route.to_owned()).or_default(),
        };
        window.expire(now);
        if window.total >= u64::from(limit) {
            return false;
        }
        window.record(now);
        true
    }

    /// Entries kept for a route (tests: the memory bound).
    #[cfg(test)]
    fn entries(&self, route: &str) -> usize {
        self.allowed
            .lock()
            .unwrap()
            .get(route)
            .map_or(0, |w| w.bursts.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rolling_window() {
        let rl = RateLimiter::default();
        let t0 = Instant::now();
        assert!(rl.check("r", 2, t0));
        assert!(rl.check("r", 2, t0 + Duration::from_secs(30)));
        assert!(!rl.check("r", 2, t0 + Duration::from_secs(59)));
        assert!(rl.check("other", 2, t0 + Duration::from_secs(59)));
        // The first allowed request leaves the window at 60 s; the rejected one never counted.
        assert!(rl.check("r", 2, t0 + Duration::from_secs(60)));
        assert!(!rl.check("r", 2, t0 + Duration::from_secs(61)));
        assert!(rl.check("r", 2, t0 + Duration::from_secs(90)));
        assert!(!rl.check("z", 0, t0));
    }

    #[test]
    fn requests_close_together_share_an_entry_and_never_exceed_the_limit() {
        let rl = RateLimiter::default();
        let t0 = Instant::now();
        // 100,000 requests within one second: 1,000 entries, not 100,000.
        for i in 0..100_000u64 {
            assert!(rl.check("r", 1_000_000, t0 + Duration::from_micros(i * 10)));
        }
        assert_eq!(rl.entries("r"), 1_000);
        // A steady stream expires bit by bit: at 60.5 s the first half has left.
        assert!(!rl.check("r", 50_000, t0 + WINDOW + Duration::from_millis(499)));
        assert!(rl.check("r", 50_001, t0 + WINDOW + Duration::from_millis(500)));
        // At 61 s only that request is left; the one allowed now makes two entries.
        assert!(!rl.check("r", 1, t0 + WINDOW + Duration::from_secs(1)));
        assert!(rl.check("r", 2, t0 + WINDOW + Duration::from_secs(1)));
        assert_eq!(rl.entries("r"), 2);
        // A limit reached inside one burst holds for the whole window…
        let rl = RateLimiter::default();
        for i in 0..3u64 {
            assert!(rl.check("b", 3, t0 + Duration::from_micros(i * 100)));
        }
        assert!(!rl.check("b", 3, t0 + Duration::from_micros(400)));
        assert!(!rl.check("b", 3, t0 + WINDOW));
        // …and ends when the burst's latest request leaves it (200 µs after the first).
        assert!(rl.check("b", 3, t0 + WINDOW + Duration::from_micros(200)));
        // Times that go backwards (another thread's clock reading) are counted too.
        let rl = RateLimiter::default();
        assert!(rl.check("c", 2, t0 + Duration::from_micros(500)));
        assert!(rl.check("c", 2, t0));
        assert!(!rl.check("c", 2, t0 + Duration::from_micros(600)));
    }
}

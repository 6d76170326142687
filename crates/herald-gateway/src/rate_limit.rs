//! Per-route rate limit: a rolling 60-second window over the times of allowed requests
//! (spec §12). Rejected requests are not counted.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The window length.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Counts allowed requests per route name.
#[derive(Default)]
pub struct RateLimiter {
    allowed: Mutex<HashMap<String, VecDeque<Instant>>>,
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
        let times = match map.get_mut(route) {
            Some(t) => t,
            None => map.entry(route.to_owned()).or_default(),
        };
        while times
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW)
        {
            times.pop_front();
        }
        if times.len() >= limit as usize {
            return false;
        }
        times.push_back(now);
        true
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
}

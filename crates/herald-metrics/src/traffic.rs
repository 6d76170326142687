//! A route's requests per minute over the last hour, for the dashboard's charts:
//! accepted, ignored (not taken, filtered, a duplicate) and failed (refused, or its
//! direct delivery failed).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Minutes kept per route.
const MINUTES: usize = 60;

/// One minute of a route's requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Minute {
    /// Unix minutes.
    pub minute: i64,
    pub accepted: u32,
    pub ignored: u32,
    pub failed: u32,
}

/// Every route's last hour.
#[derive(Default)]
pub struct Traffic {
    routes: Mutex<HashMap<String, VecDeque<Minute>, foldhash::fast::RandomState>>,
}

fn this_minute() -> i64 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    i64::try_from(secs / 60).unwrap_or(0)
}

impl Traffic {
    /// Counts one request of `route` (a label value already bounded) with `outcome`.
    pub(crate) fn count(&self, route: &str, outcome: &str) {
        let now = this_minute();
        let Ok(mut routes) = self.routes.lock() else {
            return;
        };
        let minutes = match routes.get_mut(route) {
            Some(m) => m,
            None => routes.entry(route.to_owned()).or_default(),
        };
        if minutes.back().is_none_or(|m| m.minute != now) {
            minutes.push_back(Minute {
                minute: now,
                ..Minute::default()
            });
            while minutes.len() > MINUTES {
                minutes.pop_front();
            }
        }
        if let Some(m) = minutes.back_mut() {
            match outcome {
                "accepted" | "delivered" => m.accepted += 1,
                "ignored" | "filtered" | "script_dropped" | "duplicate" => m.ignored += 1,
                _ => m.failed += 1,
            }
        }
    }

    /// `route`'s minutes within the last hour, oldest first (minutes without requests
    /// are left out).
    pub fn of(&self, route: &str) -> Vec<Minute> {
        let since = this_minute() - MINUTES as i64;
        self.routes
            .lock()
            .ok()
            .and_then(|r| r.get(route).cloned())
            .map(|m| m.into_iter().filter(|m| m.minute > since).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_fall_into_three_columns() {
        let t = Traffic::default();
        for o in [
            "accepted",
            "delivered",
            "filtered",
            "duplicate",
            "invalid_signature",
        ] {
            t.count("r", o);
        }
        let m = t.of("r");
        assert_eq!(m.len(), 1);
        assert_eq!((m[0].accepted, m[0].ignored, m[0].failed), (2, 2, 1));
        assert!(t.of("other").is_empty());
    }
}

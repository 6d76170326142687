//! Logging rejected requests without letting a flood of them flood the log.
//!
//! The first rejection of a route for a reason is logged at warn with its details; the
//! ones after it are only counted, and every [`SUMMARY_EVERY`] one line per route and
//! reason reports how many there were. Route names come from the request path, so they
//! are quoted and cut, and the number of routes tracked is bounded (the rest share one
//! line).

use herald_webhook::quoted::cut;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// How often the counts of repeated rejections are reported.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(10);
/// Routes tracked per reason; rejections of further names are counted under one entry.
const MAX_ROUTES: usize = 1024;
/// The entry that stands for routes beyond [`MAX_ROUTES`].
const OTHER_ROUTES: &str = "(other routes)";

/// Why a request was turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    UnknownProfile,
    UnknownRoute,
    RouteDisabled,
    TooLarge,
    BadBody,
    InvalidSignature,
    RateLimited,
    CannotParse,
    Busy,
}

impl Reason {
    fn text(self) -> &'static str {
        match self {
            Reason::UnknownProfile => "unknown profile",
            Reason::UnknownRoute => "unknown route",
            Reason::RouteDisabled => "route disabled",
            Reason::TooLarge => "payload too large",
            Reason::BadBody => "body could not be read",
            Reason::InvalidSignature => "invalid signature",
            Reason::RateLimited => "rate limit exceeded",
            Reason::CannotParse => "cannot parse body",
            Reason::Busy => "too many bodies in flight",
        }
    }
}

/// Per route, hashed with a seeded fast hash (route names come from request paths).
type RouteCounts = HashMap<Box<str>, u64, foldhash::fast::RandomState>;
type Counts = HashMap<Reason, RouteCounts, foldhash::fast::RandomState>;

/// The rejection log of one gateway.
#[derive(Default)]
pub struct RejectLog {
    /// Rejections not yet reported, per reason and route (an entry exists once the
    /// first was logged).
    counts: Arc<Mutex<Counts>>,
    flusher: std::sync::OnceLock<()>,
}

impl RejectLog {
    /// Records one rejection; `detail` is logged with the first one only.
    pub fn record(&self, reason: Reason, route: &str, detail: &dyn std::fmt::Display) {
        let first = {
            let mut counts = lock(&self.counts);
            let routes = counts.entry(reason).or_default();
            if let Some(n) = routes.get_mut(route) {
                *n += 1;
                false
            } else if routes.len() >= MAX_ROUTES {
                *routes.entry(OTHER_ROUTES.into()).or_insert(0) += 1;
                false
            } else {
                routes.insert(route.into(), 0);
                true
            }
        };
        if first {
            tracing::warn!(
                route = &*cut(route),
                %detail,
                repeats_reported_every_s = SUMMARY_EVERY.as_secs(),
                "rejected: {}",
                reason.text()
            );
            self.start_flusher();
        }
    }

    /// Reports the counts gathered since the last report, one line per route and reason.
    pub fn flush(&self) {
        flush(&self.counts);
    }

    fn start_flusher(&self) {
        self.flusher.get_or_init(|| {
            let weak = Arc::downgrade(&self.counts);
            if let Ok(handle) = tokio::runtime::Handle::try_current() {
                handle.spawn(flush_every(weak));
            }
        });
    }
}

async fn flush_every(counts: Weak<Mutex<Counts>>) {
    let mut every = tokio::time::interval(SUMMARY_EVERY);
    every.tick().await;
    loop {
        every.tick().await;
        let Some(counts) = counts.upgrade() else {
            return;
        };
        flush(&counts);
    }
}

fn flush(counts: &Mutex<Counts>) {
    let mut reported = Vec::new();
    {
        let mut counts = lock(counts);
        for (reason, routes) in counts.iter_mut() {
            for (route, n) in routes.iter_mut() {
                if *n > 0 {
                    reported.push((*reason, route.clone(), *n));
                    *n = 0;
                }
            }
        }
    }
    for (reason, route, n) in reported {
        tracing::warn!(
            route = &*cut(&route),
            count = n,
            "rejected: {} ({n} more in the last {} s)",
            reason.text(),
            SUMMARY_EVERY.as_secs()
        );
    }
}

fn lock(counts: &Mutex<Counts>) -> std::sync::MutexGuard<'_, Counts> {
    counts
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_are_counted_and_routes_are_bounded() {
        let log = RejectLog::default();
        for _ in 0..5 {
            log.record(Reason::InvalidSignature, "r", &"bad");
        }
        for i in 0..(MAX_ROUTES + 10) {
            log.record(Reason::UnknownRoute, &format!("x{i}"), &"");
        }
        {
            let counts = lock(&log.counts);
            assert_eq!(counts[&Reason::InvalidSignature]["r"], 4);
            let unknown = &counts[&Reason::UnknownRoute];
            assert_eq!(unknown.len(), MAX_ROUTES + 1);
            assert_eq!(unknown[OTHER_ROUTES], 10);
        }
        log.flush();
        assert_eq!(lock(&log.counts)[&Reason::InvalidSignature]["r"], 0);
    }
}

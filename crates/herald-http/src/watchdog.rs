//! One watchdog for every open connection: at its own ticks it reads each connection's
//! activity counters and tells the connections that must close (a head overdue, idle
//! too long, the server shutting down) through a flag and a wake-up. A request costs
//! the watchdog nothing but counter updates: no clock read, timer or extra future.

use futures_util::task::AtomicWaker;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Context;
use std::time::{Duration, Instant};

/// What one connection's I/O and handler tell the watchdog.
#[derive(Default)]
pub struct Activity {
    /// Requests whose handler has not answered yet.
    pub in_flight: AtomicUsize,
    /// Reads that brought bytes (a client that does not read its answer is idle too).
    pub moved: AtomicU64,
    /// Request heads completed (handlers started).
    pub heads: AtomicU64,
    /// Bytes were read since the last head completed: a new head is arriving.
    pub head_pending: AtomicBool,
}

/// Why a connection ended, or must.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    Finished = 0,
    HeaderTimeout = 1,
    Idle = 2,
    Shutdown = 3,
}

impl Closed {
    fn from_u8(v: u8) -> Closed {
        match v {
            1 => Closed::HeaderTimeout,
            2 => Closed::Idle,
            3 => Closed::Shutdown,
            _ => Closed::Finished,
        }
    }
}

/// What the watchdog and a connection share.
#[derive(Default)]
pub struct Watched {
    pub activity: Activity,
    /// `Closed` as u8: what the watchdog asks of the connection (`Finished`: nothing).
    close: AtomicU8,
    waker: AtomicWaker,
}

impl Watched {
    /// What the watchdog asks, registering the connection's task to be woken for it.
    pub fn asked(&self, cx: &Context<'_>) -> Closed {
        self.waker.register(cx.waker());
        Closed::from_u8(self.close.load(Ordering::Acquire))
    }

    fn ask(&self, why: Closed) {
        // A timeout is never downgraded to a shutdown, nor the other way round.
        let _ = self.close.compare_exchange(
            Closed::Finished as u8,
            why as u8,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        self.waker.wake();
    }
}

/// The timeouts the watchdog enforces.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub header: Duration,
    pub idle: Duration,
}

impl Timeouts {
    /// How often the watchdog looks (a quarter of the shorter timeout, at least 50 ms).
    pub fn tick(self) -> Duration {
        (self.idle.min(self.header) / 4).max(Duration::from_millis(50))
    }
}

/// Every open connection, by id.
#[derive(Default)]
pub struct Watchlist {
    entries: Mutex<HashMap<u64, (Arc<Watched>, Clock)>>,
    next_id: AtomicU64,
}

/// Removes its connection from the watchlist when dropped.
pub struct Enrolment {
    list: Arc<Watchlist>,
    id: u64,
    pub watched: Arc<Watched>,
}

impl Drop for Enrolment {
    fn drop(&mut self) {
        self.list.lock().remove(&self.id);
    }
}

impl Watchlist {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, (Arc<Watched>, Clock)>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts watching a new connection (its first head is awaited from now).
    pub fn enrol(self: &Arc<Self>) -> Enrolment {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let watched = Arc::new(Watched::default());
        self.lock()
            .insert(id, (watched.clone(), Clock::new(Instant::now())));
        Enrolment {
            list: self.clone(),
            id,
            watched,
        }
    }

    /// Asks every open connection to shut down gracefully.
    pub fn shut_down_all(&self) {
        for (watched, _) in self.lock().values() {
            watched.ask(Closed::Shutdown);
        }
    }

    /// Checks every connection once; overdue ones are asked to close.
    pub fn check_all(&self, timeouts: Timeouts, now: Instant) {
        for (watched, clock) in self.lock().values_mut() {
            if let Some(why) = clock.check(&watched.activity, timeouts, now) {
                watched.ask(why);
            }
        }
    }

    /// Checks every connection at every tick, for as long as it runs.
    pub async fn run(self: Arc<Self>, timeouts: Timeouts) {
        let mut ticks = tokio::time::interval(timeouts.tick());
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            self.check_all(timeouts, Instant::now());
        }
    }
}

/// Times one connection's heads and idleness from its activity counters.
struct Clock {
    last_moved: u64,
    quiet_since: Instant,
    /// The head being waited for (as the count of heads before it) and since when.
    head: Option<(u64, Instant)>,
}

impl Clock {
    fn new(now: Instant) -> Self {
        // The first head is awaited from the connection's opening.
        Clock {
            last_moved: 0,
            quiet_since: now,
            head: Some((0, now)),
        }
    }

    /// Why the connection must close now, if it must.
    fn check(&mut self, activity: &Activity, timeouts: Timeouts, now: Instant) -> Option<Closed> {
        if activity.in_flight.load(Ordering::Relaxed) > 0 {
            self.quiet_since = now;
            self.head = None;
            return None;
        }
        let moved = activity.moved.load(Ordering::Relaxed);
        if moved != self.last_moved {
            self.last_moved = moved;
            self.quiet_since = now;
        }
        let heads = activity.heads.load(Ordering::Relaxed);
        let awaiting = heads == 0 || activity.head_pending.load(Ordering::Relaxed);
        self.head = match self.head {
            _ if !awaiting => None,
            Some((n, since)) if n == heads => Some((n, since)),
            _ => Some((heads, now)),
        };
        if let Some((_, since)) = self.head
            && now.duration_since(since) >= timeouts.header
        {
            return Some(Closed::HeaderTimeout);
        }
        (now.duration_since(self.quiet_since) >= timeouts.idle).then_some(Closed::Idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUTS: Timeouts = Timeouts {
        header: Duration::from_secs(10),
        idle: Duration::from_secs(60),
    };

    #[test]
    fn a_head_is_timed_from_its_first_byte_and_idleness_from_the_last() {
        let start = Instant::now();
        let activity = Activity::default();
        let mut clock = Clock::new(start);
        assert_eq!(
            clock.check(&activity, TIMEOUTS, start + Duration::from_secs(9)),
            None
        );
        assert_eq!(
            clock.check(&activity, TIMEOUTS, start + Duration::from_secs(10)),
            Some(Closed::HeaderTimeout)
        );
        // A request answered, then quiet: idle, not a head timeout.
        let mut clock = Clock::new(start);
        activity.heads.store(1, Ordering::Relaxed);
        activity.moved.store(3, Ordering::Relaxed);
        assert_eq!(
            clock.check(&activity, TIMEOUTS, start + Duration::from_secs(1)),
            None
        );
        assert_eq!(
            clock.check(&activity, TIMEOUTS, start + Duration::from_secs(60)),
            None
        );
        assert_eq!(
            clock.check(&activity, TIMEOUTS, start + Duration::from_secs(61)),
            Some(Closed::Idle)
        );
        // A request in flight is never timed out.
        activity.in_flight.store(1, Ordering::Relaxed);
        assert_eq!(
            clock.check(&activity, TIMEOUTS, start + Duration::from_secs(999)),
            None
        );
    }

    #[test]
    fn a_timeout_is_not_replaced_by_a_shutdown() {
        let watched = Watched::default();
        watched.ask(Closed::Idle);
        watched.ask(Closed::Shutdown);
        let waker = futures_util::task::noop_waker();
        assert_eq!(watched.asked(&Context::from_waker(&waker)), Closed::Idle);
    }
}

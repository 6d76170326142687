//! The chat platforms' bots as an operator sees them. Each running bot reports here;
//! `/health/detailed`, the dashboard and `/metrics` read the same reports.

use crate::labels::PlatformLabel;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

/// One bot's state.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct BotReport {
    /// `telegram`, `slack`, `discord`.
    pub platform: &'static str,
    /// `long polling`, `webhook at /telegram`, or `standing by` (another instance
    /// holds the bot's poll).
    pub receiving: String,
    /// Its last poll (or webhook delivery) worked.
    pub connected: bool,
    /// When its last poll answered (unix ms).
    pub last_poll_ms: Option<i64>,
    /// When it last stored an update (unix ms).
    pub last_update_ms: Option<i64>,
    /// Updates stored since the start.
    pub received: u64,
    /// Flood-control answers (429) it waited out.
    pub flood_waits: u64,
    /// Times a stalled poll was started again.
    pub poll_restarts: u64,
    /// Messages waiting for their slot in the send governor.
    pub waiting_sends: u64,
    /// The chats with the most messages waiting (at most ten).
    pub busiest_chats: Vec<ChatQueue>,
    /// Why polls fail, while they do.
    pub failure: Option<String>,
}

/// Messages waiting to be sent to one chat.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ChatQueue {
    pub chat_id: String,
    pub waiting: u64,
}

/// A running bot.
pub trait ReportsBot: Send + Sync {
    fn report(&self) -> BotReport;
}

static BOARD: Mutex<Vec<Weak<dyn ReportsBot>>> = Mutex::new(Vec::new());

/// Lists `bot` until it is dropped.
pub fn register(bot: &Arc<dyn ReportsBot>) {
    if let Ok(mut board) = BOARD.lock() {
        board.retain(|b| b.strong_count() > 0);
        board.push(Arc::downgrade(bot));
    }
}

/// Every running bot's report.
pub fn reports() -> Vec<BotReport> {
    let live: Vec<Arc<dyn ReportsBot>> = match BOARD.lock() {
        Ok(board) => board.iter().filter_map(Weak::upgrade).collect(),
        Err(_) => return Vec::new(),
    };
    live.iter().map(|b| b.report()).collect()
}

/// The bots' series, read from the reports before each scrape.
#[derive(Default)]
pub struct Bots {
    connected: Family<PlatformLabel, Gauge>,
    last_update: Family<PlatformLabel, Gauge>,
    waiting: Family<PlatformLabel, Gauge>,
    received: Family<PlatformLabel, Counter>,
    floods: Family<PlatformLabel, Counter>,
    restarts: Family<PlatformLabel, Counter>,
    /// What the counters were last set from, per platform.
    seen: Mutex<HashMap<&'static str, (u64, u64, u64)>>,
}

impl Bots {
    pub(crate) fn register(&self, r: &mut Registry) {
        r.register(
            "herald_bot_connected",
            "1 while a chat-platform bot's last poll (or webhook delivery) worked, by platform",
            self.connected.clone(),
        );
        r.register(
            "herald_bot_last_update_seconds",
            "When a bot last stored an update (unix seconds), by platform",
            self.last_update.clone(),
        );
        r.register(
            "herald_bot_waiting_sends",
            "Messages waiting for their slot in a bot's send governor, by platform",
            self.waiting.clone(),
        );
        r.register(
            "herald_bot_updates",
            "Updates a bot stored, by platform",
            self.received.clone(),
        );
        r.register(
            "herald_bot_flood_waits",
            "Flood-control answers (429) a bot waited out, by platform",
            self.floods.clone(),
        );
        r.register(
            "herald_bot_poll_restarts",
            "Times a bot's stalled poll was started again, by platform",
            self.restarts.clone(),
        );
    }

    /// Sets the series from the bots' reports.
    pub(crate) fn refresh(&self) {
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        for r in reports() {
            let label = PlatformLabel {
                platform: r.platform,
            };
            self.connected
                .get_or_create(&label)
                .set(i64::from(r.connected));
            let secs = r.last_update_ms.unwrap_or(0) / 1000;
            self.last_update.get_or_create(&label).set(secs);
            let waiting = i64::try_from(r.waiting_sends).unwrap_or(i64::MAX);
            self.waiting.get_or_create(&label).set(waiting);
            let before = seen.entry(r.platform).or_default();
            let grow = |c: &Counter, was: &mut u64, now: u64| {
                c.inc_by(now.saturating_sub(*was));
                *was = now.max(*was);
            };
            grow(
                &self.received.get_or_create(&label),
                &mut before.0,
                r.received,
            );
            grow(
                &self.floods.get_or_create(&label),
                &mut before.1,
                r.flood_waits,
            );
            grow(
                &self.restarts.get_or_create(&label),
                &mut before.2,
                r.poll_restarts,
            );
        }
    }
}

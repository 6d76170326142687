//! The chat-platform door: people talking to a bot get answers from herald's
//! conversations (herald-session), one per Hermes session key. Every update is stored
//! in the inbox before the platform is told it arrived, and each answer is sent once.
//!
//! - [`door`]: the door on herald-session's conversations, the same for every platform;
//! - [`dispatch`]: the chat entries of the inbox, each chat's in order;
//! - [`outbox`]: Telegram's send limits, applied once per bot;
//! - [`telegram`]: the Bot API, long polling, access rules;
//! - [`slack`]: Socket Mode, the Events API, the Web API, access rules;
//! - [`discord`]: the gateway WebSocket, the REST API, access rules;
//! - [`key`]: Hermes's session keys.

pub mod allow;
pub mod discord;
pub mod dispatch;
pub mod door;
pub mod hold;
pub mod intake;
pub mod key;
mod net;
pub mod outbox;
pub mod pairing;
pub mod slack;
pub mod start;
pub mod start_discord;
pub mod start_slack;
pub mod telegram;

pub use door::{ChatDoor, ChatRef, Inbound, Platform, SendFailure};
pub use start::{ChatBot, StartError, TelegramStart, WebhookMode, start_telegram};
pub use start_discord::{DiscordStart, start_discord};
pub use start_slack::{SlackEvents, SlackStart, start_slack};

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// What an operator sees of one bot (in `herald gateway status`, `/health/detailed`,
/// the dashboard and `/metrics`).
pub struct BotStatus {
    platform: &'static str,
    /// How it receives (`long polling`, `webhook at /telegram`).
    receiving: String,
    /// When the last poll answered (unix ms; 0: never).
    last_poll_ms: AtomicI64,
    /// When the last update was stored (unix ms; 0: never).
    last_update_ms: AtomicI64,
    /// Updates stored.
    received: AtomicU64,
    /// Stalled polls started again.
    restarts: AtomicU64,
    /// Another instance holds the bot's poll; this one stands by.
    standing_by: AtomicBool,
    /// The last failure of a poll, if the last poll failed.
    failure: Mutex<Option<String>>,
    /// The bot's send governor (its queues and floods).
    pub(crate) governor: Arc<outbox::Governor>,
    /// When a poll last answered or failed (a poll that does neither has stalled).
    progressed: Mutex<tokio::time::Instant>,
}

impl BotStatus {
    pub(crate) fn new(platform: &'static str, receiving: String) -> BotStatus {
        BotStatus::with_limits(platform, receiving, outbox::Limits::TELEGRAM)
    }
    pub(crate) fn with_limits(
        platform: &'static str,
        receiving: String,
        limits: outbox::Limits,
    ) -> BotStatus {
        BotStatus {
            platform,
            receiving,
            last_poll_ms: AtomicI64::new(0),
            last_update_ms: AtomicI64::new(0),
            received: AtomicU64::new(0),
            restarts: AtomicU64::new(0),
            standing_by: AtomicBool::new(false),
            failure: Mutex::new(None),
            governor: Arc::new(outbox::Governor::new(limits)),
            progressed: Mutex::new(tokio::time::Instant::now()),
        }
    }
    pub(crate) fn progressed(&self) {
        *herald_session::conversation::lock(&self.progressed) = tokio::time::Instant::now();
    }
    pub(crate) fn since_progress(&self) -> std::time::Duration {
        herald_session::conversation::lock(&self.progressed).elapsed()
    }
    pub(crate) fn polled(&self, at_ms: i64) {
        self.last_poll_ms.store(at_ms, Ordering::Relaxed);
        if let Ok(mut f) = self.failure.lock() {
            *f = None;
        }
    }
    pub(crate) fn received(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.last_update_ms
            .store(herald_store::now_ms(), Ordering::Relaxed);
    }
    pub(crate) fn failed(&self, why: String) {
        if let Ok(mut f) = self.failure.lock() {
            *f = Some(why);
        }
    }
    pub(crate) fn restarted(&self) {
        self.restarts.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn stand_by(&self, on: bool) {
        self.standing_by.store(on, Ordering::Relaxed);
    }
    /// The platform's name (`telegram`, `slack`).
    pub fn platform(&self) -> &'static str {
        self.platform
    }
    /// How the bot receives, in words.
    pub fn receiving(&self) -> &str {
        &self.receiving
    }
    /// When the last poll answered (unix ms), if one did.
    pub fn last_poll_ms(&self) -> Option<i64> {
        Some(self.last_poll_ms.load(Ordering::Relaxed)).filter(|t| *t > 0)
    }
    pub fn received_count(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
    /// Why the last poll failed, while polls fail.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }
}

impl herald_metrics::bots::ReportsBot for BotStatus {
    fn report(&self) -> herald_metrics::bots::BotReport {
        let standing_by = self.standing_by.load(Ordering::Relaxed);
        let failure = self.failure();
        let (waiting, busiest) = self.governor.queues(10);
        herald_metrics::bots::BotReport {
            platform: self.platform,
            receiving: match standing_by {
                true => "standing by (another instance polls this bot)".to_owned(),
                false => self.receiving.clone(),
            },
            connected: !standing_by && failure.is_none() && self.last_poll_ms().is_some(),
            last_poll_ms: self.last_poll_ms(),
            last_update_ms: Some(self.last_update_ms.load(Ordering::Relaxed)).filter(|t| *t > 0),
            received: self.received_count(),
            flood_waits: self.governor.flood_count(),
            poll_restarts: self.restarts.load(Ordering::Relaxed),
            waiting_sends: waiting,
            busiest_chats: busiest
                .into_iter()
                .map(|(chat_id, waiting)| herald_metrics::bots::ChatQueue { chat_id, waiting })
                .collect(),
            failure,
        }
    }
}

/// Resolves once `stop` is set (or its sender is gone).
pub(crate) async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

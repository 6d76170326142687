//! The chat-platform door: people talking to a bot get answers from herald's
//! conversations (herald-session), one per Hermes session key. Every update is stored
//! in the inbox before the platform is told it arrived, and each answer is sent once.
//!
//! - [`door`]: the door on herald-session's conversations, the same for every platform;
//! - [`dispatch`]: the chat entries of the inbox, each chat's in order;
//! - [`outbox`]: Telegram's send limits, applied once per bot;
//! - [`telegram`]: the Bot API, long polling, access rules;
//! - [`key`]: Hermes's session keys.

pub mod dispatch;
pub mod door;
pub mod key;
pub mod outbox;
pub mod pairing;
pub mod start;
pub mod telegram;

pub use door::{ChatDoor, ChatRef, Inbound, Platform, SendFailure};
pub use start::{ChatBot, StartError, TelegramStart, WebhookMode, start_telegram};

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// What an operator sees of one bot.
#[derive(Debug, Default)]
pub struct BotStatus {
    /// When the last poll answered (unix ms; 0: never).
    last_poll_ms: AtomicI64,
    /// Updates stored.
    received: AtomicU64,
    /// The last failure of a poll, if the last poll failed.
    failure: Mutex<Option<String>>,
}

impl BotStatus {
    pub(crate) fn polled(&self, at_ms: i64) {
        self.last_poll_ms.store(at_ms, Ordering::Relaxed);
        if let Ok(mut f) = self.failure.lock() {
            *f = None;
        }
    }
    pub(crate) fn received(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn failed(&self, why: String) {
        if let Ok(mut f) = self.failure.lock() {
            *f = Some(why);
        }
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

/// Resolves once `stop` is set (or its sender is gone).
pub(crate) async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

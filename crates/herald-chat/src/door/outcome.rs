//! How an inbox entry of a chat ends: done (answered, a command's reply, ignored with
//! a reason), failed (the chat was told), or tried again later (a send that failed
//! for a while); each recorded as a delivery, as the webhook routes' are.

use super::{ChatDoor, ChatRef, Platform};
use herald_store::{NewDelivery, Stage, now_ms};

/// Why a send failed, and whether trying again later may work.
#[derive(Debug, Clone)]
pub struct SendFailure {
    pub message: String,
    /// A network error, a 5xx, flood control: worth another try.
    pub transient: bool,
}

/// Deliveries of one answer tried before the entry is given up.
const MAX_DELIVERY_ATTEMPTS: i64 = 8;

/// What a re-sent answer starts with when an earlier attempt may have reached the
/// chat (Hermes's delivery ledger marks its recovered replies likewise).
pub(crate) const MAYBE_REPEATED: &str = "♻️ Recovered reply (may be a repeat):\n\n";

impl<P: Platform> ChatDoor<P> {
    /// Sends a stored answer: done once sent, tried again later when the send failed
    /// for a while, failed when the platform refused it.
    pub(crate) async fn deliver(
        &self,
        id: i64,
        started: i64,
        attempts: i64,
        chat: &ChatRef,
        answer: &str,
        reply_to: Option<i64>,
    ) {
        let text = match attempts > 1 {
            true => format!("{MAYBE_REPEATED}{answer}"),
            false => answer.to_owned(),
        };
        match self.platform.send(chat, &text, reply_to).await {
            Ok(ids) => self.finish(id, started, "delivered", &ids.join(",")).await,
            Err(f) if f.transient && attempts < MAX_DELIVERY_ATTEMPTS => {
                self.retry(id, started, attempts, Stage::Delivery, &f.message)
                    .await
            }
            Err(f) => self.fail(id, started, &f.message).await,
        }
    }

    /// Sends a note; a failure is logged (the entry's own outcome is what counts).
    pub(crate) async fn tell(&self, chat: &ChatRef, text: &str) {
        if let Err(e) = self.platform.send(chat, text, None).await {
            tracing::warn!(error = %e.message, chat = chat.chat_id, "cannot send a note to a chat");
        }
    }

    /// The entry is done (`status`: delivered, ignored, interrupted ...).
    pub(crate) async fn finish(&self, id: i64, started: i64, status: &str, message: &str) {
        let delivery = self.delivery(id, status, None, message);
        if let Err(e) = self.store.mark_delivered(id, started, delivery).await {
            tracing::error!(error = %e, inbox_id = id, "cannot mark a chat message done");
        }
        self.held.release(id);
    }

    /// The entry failed for good (the chat was told, where it could be).
    pub(crate) async fn fail(&self, id: i64, started: i64, why: &str) {
        let delivery = self.delivery(id, "failed", Some(why.to_owned()), why);
        if let Err(e) = self
            .store
            .mark_dead(id, Stage::Run, started, why.to_owned(), Some(delivery))
            .await
        {
            tracing::error!(error = %e, inbox_id = id, "cannot mark a chat message failed");
        }
        self.held.release(id);
    }

    /// The entry waits and is taken again: a send that failed for now, or no room
    /// for its conversation.
    pub(crate) async fn retry(
        &self,
        id: i64,
        started: i64,
        attempts: i64,
        stage: Stage,
        why: &str,
    ) {
        let wait_s = 1i64 << attempts.clamp(0, 8);
        let next = now_ms() + wait_s.min(300) * 1000;
        if let Err(e) = self
            .store
            .retry_later(id, stage, started, next, why.to_owned())
            .await
        {
            tracing::error!(error = %e, inbox_id = id, "cannot put a chat message back");
        }
        self.held.release(id);
    }

    fn delivery(&self, id: i64, status: &str, error: Option<String>, message: &str) -> NewDelivery {
        NewDelivery {
            kind: "chat".into(),
            route: format!("chat:{}", P::NAME),
            delivery_id: id.to_string(),
            target: P::NAME.into(),
            status: status.into(),
            attempts: 1,
            latency_ms: 0,
            error,
            message: message.chars().take(200).collect(),
            created_at_ms: now_ms(),
        }
    }
}

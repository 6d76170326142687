//! How an inbox entry of a chat ends: done (answered, a command's reply, ignored with
//! a reason), failed (the chat was told), or tried again later (a send that failed
//! for a while); each recorded as a delivery, as the webhook routes' are.

use super::bubble::Left;
use super::media::Media;
use super::{ChatDoor, ChatRef, Platform};
use herald_store::{NewDelivery, Stage, now_ms};
use std::path::PathBuf;

/// Why a send failed, and whether trying again later may work.
#[derive(Debug, Clone)]
pub struct SendFailure {
    pub message: String,
    /// A network error, a 5xx, flood control: worth another try.
    pub transient: bool,
    /// Flood control answered (the chat is paused).
    pub flood: bool,
}

/// Deliveries of one answer tried before the entry is given up.
const MAX_DELIVERY_ATTEMPTS: i64 = 8;

/// What a re-sent answer starts with when an earlier attempt may have reached the
/// chat (Hermes's delivery ledger marks its recovered replies likewise).
pub(crate) const MAYBE_REPEATED: &str = "♻️ Recovered reply (may be a repeat):\n\n";

/// An answer to send for an inbox entry.
pub(crate) struct Answer<'a> {
    pub inbox_id: i64,
    pub started_ms: i64,
    /// Deliveries tried so far, this one included.
    pub attempts: i64,
    pub chat: &'a ChatRef,
    pub text: &'a str,
    pub reply_to: Option<i64>,
    /// The message the answer streamed into, which it replaces.
    pub preview: Option<Left>,
    /// The session whose folder its files may come from.
    pub session: Option<String>,
}

impl<P: Platform> ChatDoor<P> {
    /// Sends a stored answer (its text, then its `MEDIA:` files): done once sent,
    /// tried again later when the send failed for a while, failed when the platform
    /// refused it.
    pub(crate) async fn deliver(&self, a: Answer<'_>) {
        let (id, started) = (a.inbox_id, a.started_ms);
        let media = super::media::extract(a.text);
        let text = match a.attempts > 1 {
            true => format!("{MAYBE_REPEATED}{}", media.text),
            false => media.text.clone(),
        };
        let sent = match media.text.is_empty() {
            true => Ok(Vec::new()),
            false => self.send_answer(a.chat, &text, a.reply_to, a.preview).await,
        };
        match sent {
            Ok(mut ids) => {
                ids.extend(self.send_media(a.chat, &media, a.session.as_deref()).await);
                self.finish(id, started, "delivered", &ids.join(",")).await
            }
            Err(f) if f.transient && a.attempts < MAX_DELIVERY_ATTEMPTS => {
                self.retry(id, started, a.attempts, Stage::Delivery, &f.message)
                    .await
            }
            Err(f) => self.fail(id, started, &f.message).await,
        }
    }

    /// The answer's text: into the message it streamed into when that still works
    /// and it fits, else whole as new messages (the preview goes).
    async fn send_answer(
        &self,
        chat: &ChatRef,
        text: &str,
        reply_to: Option<i64>,
        preview: Option<Left>,
    ) -> Result<Vec<String>, SendFailure> {
        if let Some(Left {
            message_id: Some(m),
            healthy,
        }) = preview
        {
            if healthy && self.platform.edit(chat, &m, text, true).await.is_ok() {
                return Ok(vec![m]);
            }
            self.platform.delete(chat, &m).await;
        }
        self.platform.send(chat, text, reply_to).await
    }

    /// Sends the files an answer names, from the allowed folders: the ids of those
    /// sent; each one that cannot be sent is said in the chat.
    async fn send_media(
        &self,
        chat: &ChatRef,
        media: &Media,
        session: Option<&str>,
    ) -> Vec<String> {
        if media.paths.is_empty() {
            return Vec::new();
        }
        let runtime = self.conversations.host().runtime();
        let mut roots: Vec<PathBuf> = self.display.media_allow_dirs.clone();
        roots.extend(runtime.cwd.clone());
        if let Some(s) = session {
            roots.push(super::files::session_folder(runtime.home.root(), s));
        }
        let mut ids = Vec::new();
        for raw in &media.paths {
            let (path, r, voice, doc) = (
                raw.clone(),
                roots.clone(),
                media.as_voice,
                media.as_document,
            );
            let read =
                tokio::task::spawn_blocking(move || super::media::read(&path, &r, voice, doc))
                    .await
                    .unwrap_or_else(|e| Err(e.to_string()));
            let sent = match read {
                Ok(file) => self
                    .platform
                    .send_file(chat, file)
                    .await
                    .map_err(|f| f.message),
                Err(why) => Err(why),
            };
            match sent {
                Ok(id) => ids.push(id),
                Err(why) => {
                    tracing::warn!(file = %super::media::shown(raw), error = %why, "an answer's file was not sent");
                    let name = super::media::shown(raw);
                    self.tell(chat, &format!("⚠️ Could not send {name}: {why}"))
                        .await;
                }
            }
        }
        ids
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

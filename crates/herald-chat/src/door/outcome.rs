//! How an inbox entry of a chat ends: done (answered, a command's reply, ignored with
//! a reason), failed (the chat was told), or tried again later (a send that failed
//! for a while); each recorded as a delivery, as the webhook routes' are.

use super::bubble::Left;
use super::media::{Allowed, Media};
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
    pub reply_to: Option<&'a str>,
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
        let marked = match a.attempts > 1 {
            true => Some(MAYBE_REPEATED),
            false => None,
        };
        let session = a.session.as_deref();
        let sent = self
            .send_whole(a.chat, a.text, a.reply_to, a.preview, session, marked)
            .await;
        match sent {
            Ok(ids) => self.finish(id, started, "delivered", &ids.join(",")).await,
            Err(f) if f.transient && a.attempts < MAX_DELIVERY_ATTEMPTS => {
                self.retry(id, started, a.attempts, Stage::Delivery, &f.message)
                    .await
            }
            Err(f) => self.fail(id, started, &f.message).await,
        }
    }

    /// An answer's text (after `marked`, when given) and then its `MEDIA:` files: the
    /// ids of the messages sent. A streamed preview is replaced, or goes.
    pub(crate) async fn send_whole(
        &self,
        chat: &ChatRef,
        answer: &str,
        reply_to: Option<&str>,
        preview: Option<Left>,
        session: Option<&str>,
        marked: Option<&str>,
    ) -> Result<Vec<String>, SendFailure> {
        let media = super::media::extract(answer);
        let mut ids = match media.text.is_empty() {
            true => {
                self.drop_preview(chat, preview).await;
                Vec::new()
            }
            false => {
                let text = format!("{}{}", marked.unwrap_or(""), media.text);
                self.send_answer(chat, &text, reply_to, preview).await?
            }
        };
        ids.extend(self.send_media(chat, &media, session).await);
        Ok(ids)
    }

    /// Deletes a streamed preview nothing replaces (a turn that failed, was cancelled,
    /// or answered with files only).
    pub(crate) async fn drop_preview(&self, chat: &ChatRef, preview: Option<Left>) {
        if let Some(m) = preview.and_then(|p| p.message_id) {
            self.platform.delete(chat, &m).await;
        }
    }

    /// The answer's text: into the message it streamed into when that still works
    /// and it fits, else whole as new messages (the preview goes).
    async fn send_answer(
        &self,
        chat: &ChatRef,
        text: &str,
        reply_to: Option<&str>,
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
    /// sent. Those that cannot be sent are said in the chat, in one note.
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
        let allowed = Allowed::new(&roots, runtime.home.root());
        let mut ids = Vec::new();
        let mut unsent = Vec::new();
        for raw in &media.paths {
            let (path, a, voice, doc) = (
                raw.clone(),
                allowed.clone(),
                media.as_voice,
                media.as_document,
            );
            let read =
                tokio::task::spawn_blocking(move || super::media::read(&path, &a, voice, doc))
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
                    let name = super::media::shown(raw);
                    tracing::warn!(file = %name, error = %why, "an answer's file was not sent");
                    unsent.push(format!("{name}: {why}"));
                }
            }
        }
        if !unsent.is_empty() {
            let list = unsent.join("\n");
            self.tell(chat, &format!("⚠️ Could not send:\n{list}"))
                .await;
        }
        ids
    }

    /// Sends a note; a failure is logged (the entry's own outcome is what counts).
    pub(crate) async fn tell(&self, chat: &ChatRef, text: &str) {
        if let Err(e) = self.platform.send(chat, text, None).await {
            tracing::warn!(error = %e.message, chat = %chat.chat_id, "cannot send a note to a chat");
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

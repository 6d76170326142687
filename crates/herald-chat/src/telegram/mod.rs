//! Telegram: long polling into the inbox ([`poll`]), messages read and gated
//! ([`access`]), answers sent through the governor as HTML with a plain-text fallback
//! that keeps the whole text.

pub mod access;
pub mod api;
mod files;
pub mod format;
pub mod menu;
pub mod poll;
pub mod webhook;
pub mod wire;

use crate::door::{ChatRef, Downloaded, Inbound, Mark, OutFile, Platform, SendFailure};
use crate::key::{ChatType, Source};
use crate::outbox::Governor;
use crate::pairing::PairingStore;
use access::Access;
use api::{ApiError, BotApi};
use herald_config::telegram_settings::ReplyToMode;
use herald_deliver::split::{TELEGRAM_MAX_UTF16, split_message, utf16_len};
use herald_deliver::telegram_split::html_to_plain;
use herald_store::InboxItem;
use serde_json::{Value, json};
use std::time::Duration;
use wire::{Sent, Update};

/// What the start and `config check` say of a configured bot: how it receives, and
/// that Hermes's own Telegram adapter must be off.
pub fn serving_note(settings: &herald_config::telegram_settings::TelegramSettings) -> String {
    let how = match &settings.webhook {
        Some(w) => format!("by webhook at {}", w.url),
        None => "by long polling".to_owned(),
    };
    format!(
        "telegram: herald answers people who write to the bot ({how}); turn Hermes's own Telegram adapter off (or stop Hermes): two gateways on one token get 409 Conflict"
    )
}

/// Floods in a row a send waits out before it gives up.
const MAX_FLOODS: u32 = 3;

/// One bot, as the door's platform.
pub struct Telegram {
    pub api: BotApi,
    pub governor: std::sync::Arc<Governor>,
    pub access: Access,
    /// Users approved by pairing are allowed too (with the allow-lists).
    pub pairing: PairingStore,
    /// Which parts of an answer reply to the message they answer.
    pub reply_mode: ReplyToMode,
    /// `TELEGRAM_REACTIONS`: 👀 on a message while its turn runs, 👍 or 👎 after.
    pub reactions: bool,
}

impl Telegram {
    /// One message, waiting for its slot; a flood pauses the chat and is tried again.
    async fn send_one(&self, chat: &ChatRef, body: &Value) -> Result<i64, ApiError> {
        let mut floods = 0;
        loop {
            self.governor.slot(&chat.chat_id, chat.group).await;
            match self
                .api
                .call::<Sent>("sendMessage", body, Duration::ZERO)
                .await
            {
                Ok(sent) => return Ok(sent.message_id),
                Err(ApiError::Flood(wait)) if floods < MAX_FLOODS => {
                    floods += 1;
                    tracing::warn!(
                        chat = %chat.chat_id,
                        wait_s = wait.as_secs(),
                        "telegram: flood control; the chat waits"
                    );
                    self.governor.flooded(&chat.chat_id, wait);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One call in the chat's slot, not repeated: a flood pauses the chat and is
    /// returned. The message id it answered, when it answered one.
    async fn once(
        &self,
        method: &str,
        chat: &ChatRef,
        body: Value,
    ) -> Result<Option<String>, SendFailure> {
        self.governor.slot(&chat.chat_id, chat.group).await;
        match self.api.call::<Value>(method, &body, Duration::ZERO).await {
            Ok(v) => Ok(v
                .get("message_id")
                .and_then(Value::as_i64)
                .map(|id| id.to_string())),
            Err(e) => {
                if let ApiError::Flood(wait) = &e {
                    self.governor.flooded(&chat.chat_id, *wait);
                }
                Err(failure(e))
            }
        }
    }

    /// Sends the HTML parts in order: the ids of those sent. A part whose formatting
    /// Telegram refuses goes as its plain text, whole (split again when it must be).
    async fn send_parts(
        &self,
        chat: &ChatRef,
        parts: &[String],
        reply_to: Option<&str>,
    ) -> Result<Vec<String>, ApiError> {
        let mut ids = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            let replying = match self.reply_mode {
                ReplyToMode::Off => None,
                ReplyToMode::First => reply_to.filter(|_| i == 0),
                ReplyToMode::All => reply_to,
            };
            let mut body = message(chat, part, true);
            if let Some(to) = replying {
                body["reply_parameters"] =
                    json!({"message_id": chat_value(to), "allow_sending_without_reply": true});
            }
            match self.send_one(chat, &body).await {
                Ok(id) => ids.push(id.to_string()),
                Err(e) if e.bad_formatting() => {
                    tracing::warn!(error = %e, "telegram: formatting refused; this part goes as plain text");
                    let plain = html_to_plain(part);
                    for piece in split_message(&plain, TELEGRAM_MAX_UTF16, utf16_len) {
                        ids.push(
                            self.send_one(chat, &message(chat, &piece, false))
                                .await?
                                .to_string(),
                        );
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(ids)
    }
}

/// A `sendMessage` body for `chat` (the General topic, 1, is addressed without an id).
fn message(chat: &ChatRef, text: &str, html: bool) -> Value {
    let mut body = json!({"chat_id": chat_value(&chat.chat_id), "text": text});
    if html {
        body["parse_mode"] = json!("HTML");
    }
    if let Some(t) = topic_of(chat) {
        body["message_thread_id"] = json!(t);
    }
    body
}

/// A chat (or message) id as the Bot API takes it: a number when it is one.
pub(crate) fn chat_value(id: &str) -> Value {
    match id.parse::<i64>() {
        Ok(n) => json!(n),
        Err(_) => json!(id),
    }
}

/// The forum topic a message goes to (the General topic, 1, is addressed without an
/// id).
pub(crate) fn topic_of(chat: &ChatRef) -> Option<i64> {
    let t = chat.thread_id.as_deref()?.parse::<i64>().ok()?;
    (t != 1).then_some(t)
}

/// A failed call as the door judges it: worth another try, or not.
fn failure(e: ApiError) -> SendFailure {
    let transient = match &e {
        ApiError::Network(_) | ApiError::Flood(_) => true,
        ApiError::Refused { code, .. } => *code >= 500,
        ApiError::Conflict(_) => false,
    };
    SendFailure {
        flood: matches!(e, ApiError::Flood(_)),
        message: e.to_string(),
        transient,
    }
}

impl Telegram {
    /// On an allow-list, or approved by pairing.
    fn allowed(&self, m: &wire::Message) -> bool {
        self.access.authorized(m)
            || m.from.as_ref().is_some_and(|u| {
                !u.is_bot && self.pairing.is_approved("telegram", &u.id.to_string())
            })
    }

    /// A button pressed under one of the bot's messages; the presser is authorized
    /// again (a stranger's press is answered by nothing).
    fn click(&self, q: wire::CallbackQuery) -> Result<Inbound, String> {
        let Some(m) = q.message else {
            return Err("a button press without its message".into());
        };
        let allowed = self.access.authorized_in(&m, Some(&q.from))
            || self.pairing.is_approved("telegram", &q.from.id.to_string());
        if !allowed {
            return Err(format!(
                "user {} may not answer this bot's buttons",
                q.from.id
            ));
        }
        let mut read = inbound(&m, String::new());
        read.source.user_id = Some(q.from.id.to_string());
        read.click = Some(crate::door::Click {
            id: q.id,
            data: q.data.unwrap_or_default(),
            message_id: m.message_id.to_string(),
            by: q.from.first_name,
        });
        Ok(read)
    }

    /// A sender not allowed: their name when they wrote in private (they may pair);
    /// silence in a group.
    fn stranger(&self, m: &wire::Message) -> Result<String, String> {
        let who = m.from.as_ref().map_or(0, |u| u.id);
        tracing::info!(
            user = who,
            chat = m.chat.id,
            "telegram: a message from a user not allowed"
        );
        match (&m.from, access::is_private(m)) {
            (Some(u), true) if !u.is_bot => Ok(u.first_name.clone()),
            _ => Err(format!("user {who} is not allowed")),
        }
    }
}

impl Platform for Telegram {
    const NAME: &'static str = "telegram";

    async fn send(
        &self,
        chat: &ChatRef,
        text: &str,
        reply_to: Option<&str>,
    ) -> Result<Vec<String>, SendFailure> {
        let parts = format::html_parts(text);
        self.send_parts(chat, &parts, reply_to)
            .await
            .map_err(failure)
    }

    async fn typing(&self, chat: &ChatRef) {
        // Typing takes a spare slot or is skipped: it never delays a message.
        if !self.governor.spare_slot(&chat.chat_id) {
            return;
        }
        let mut body = json!({"chat_id": chat_value(&chat.chat_id), "action": "typing"});
        if let Some(t) = topic_of(chat) {
            body["message_thread_id"] = json!(t);
        }
        if let Err(e) = self
            .api
            .call::<Value>("sendChatAction", &body, Duration::ZERO)
            .await
        {
            tracing::debug!(error = %e, "telegram: sendChatAction failed");
        }
    }

    async fn send_approval(
        &self,
        chat: &ChatRef,
        token: &str,
        text: &str,
    ) -> Result<Option<String>, SendFailure> {
        let html = format::to_html(text);
        let button = |label: &str, choice: &str| json!({"text": label, "callback_data": format!("ap:{token}:{choice}")});
        let mut body = json!({
            "chat_id": chat_value(&chat.chat_id),
            "text": html,
            "parse_mode": "HTML",
            "reply_markup": {"inline_keyboard": [
                [button("✅ Allow Once", "o"), button("✅ Session", "s")],
                [button("✅ Always", "a"), button("❌ Deny", "d")],
            ]},
        });
        if let Some(t) = topic_of(chat) {
            body["message_thread_id"] = json!(t);
        }
        let id = self.send_one(chat, &body).await.map_err(failure)?;
        Ok(Some(id.to_string()))
    }

    async fn send_plain(&self, chat: &ChatRef, text: &str) -> Result<String, SendFailure> {
        self.once("sendMessage", chat, message(chat, text, false))
            .await?
            .ok_or_else(|| SendFailure {
                message: "telegram: sendMessage answered no message id".into(),
                transient: false,
                flood: false,
            })
    }

    async fn edit(
        &self,
        chat: &ChatRef,
        message_id: &str,
        text: &str,
        formatted: bool,
    ) -> Result<(), SendFailure> {
        let Ok(message_id) = message_id.parse::<i64>() else {
            return Err(SendFailure {
                message: format!("telegram: {message_id:?} is no message id"),
                transient: false,
                flood: false,
            });
        };
        let shown = match formatted {
            true => format::to_html(text),
            false => text.to_owned(),
        };
        let mut body =
            json!({"chat_id": chat_value(&chat.chat_id), "message_id": message_id, "text": shown});
        if formatted {
            body["parse_mode"] = json!("HTML");
        }
        self.once("editMessageText", chat, body).await.map(|_| ())
    }

    async fn delete(&self, chat: &ChatRef, message_id: &str) {
        let Ok(message_id) = message_id.parse::<i64>() else {
            return;
        };
        let body = json!({"chat_id": chat_value(&chat.chat_id), "message_id": message_id});
        if let Err(e) = self.once("deleteMessage", chat, body).await {
            tracing::debug!(error = %e.message, "telegram: deleteMessage failed");
        }
    }

    async fn download(&self, file_id: &str, max: u64) -> Result<Downloaded, String> {
        self.fetch(file_id, max).await
    }

    async fn send_file(&self, chat: &ChatRef, file: OutFile) -> Result<String, SendFailure> {
        self.upload(chat, file)
            .await
            .map(|id| id.to_string())
            .map_err(failure)
    }

    async fn react(&self, chat: &ChatRef, message_id: &str, mark: Mark) {
        let Ok(message_id) = message_id.parse::<i64>() else {
            return;
        };
        if !self.reactions {
            return;
        }
        let reaction = match mark {
            Mark::Working => json!([{"type": "emoji", "emoji": "👀"}]),
            Mark::Done => json!([{"type": "emoji", "emoji": "👍"}]),
            Mark::Failed => json!([{"type": "emoji", "emoji": "👎"}]),
            Mark::Clear => json!([]),
        };
        let body = json!({"chat_id": chat_value(&chat.chat_id), "message_id": message_id, "reaction": reaction});
        self.governor.side_slot(&chat.chat_id).await;
        match self
            .api
            .call::<Value>("setMessageReaction", &body, Duration::ZERO)
            .await
        {
            Ok(_) => {}
            Err(ApiError::Flood(wait)) => self.governor.flooded(&chat.chat_id, wait),
            Err(e) => tracing::debug!(error = %e, "telegram: setMessageReaction failed"),
        }
    }

    async fn answer_click(&self, click_id: &str, text: &str) {
        let mut body = json!({"callback_query_id": click_id});
        if !text.is_empty() {
            body["text"] = json!(text);
        }
        if let Err(e) = self
            .api
            .call::<Value>("answerCallbackQuery", &body, Duration::ZERO)
            .await
        {
            tracing::debug!(error = %e, "telegram: answerCallbackQuery failed");
        }
    }

    fn chat_of(&self, item: &InboxItem) -> Option<String> {
        #[derive(serde::Deserialize)]
        struct Peek {
            message: Option<PeekMessage>,
            callback_query: Option<PeekClick>,
        }
        #[derive(serde::Deserialize)]
        struct PeekClick {
            message: Option<PeekMessage>,
        }
        #[derive(serde::Deserialize)]
        struct PeekMessage {
            chat: PeekChat,
        }
        #[derive(serde::Deserialize)]
        struct PeekChat {
            id: i64,
        }
        let peek: Peek = serde_json::from_str(item.payload.text()).ok()?;
        let message = peek.message.or(peek.callback_query.and_then(|q| q.message));
        message.map(|m| m.chat.id.to_string())
    }

    async fn read(&self, item: &InboxItem) -> Result<Inbound, String> {
        let update: Update = serde_json::from_str(item.payload.text())
            .map_err(|e| format!("not a Telegram update: {e}"))?;
        if let Some(q) = update.callback_query {
            return self.click(q);
        }
        let Some(m) = update.message else {
            return Err(format!("{} updates are not served yet", item.event_type));
        };
        if !self.access.addressed(&m, topic(&m)) {
            return Err("a group message not addressed to the bot".into());
        }
        let stranger = match self.allowed(&m) {
            true => None,
            false => Some(self.stranger(&m)?),
        };
        let mut text = m
            .text
            .clone()
            .or_else(|| m.caption.clone())
            .unwrap_or_default();
        let (files, sticker) = m.attachments();
        if let Some(note) = sticker {
            text = format!("{note}\n{text}").trim_end().to_owned();
        }
        if text.trim().is_empty() && files.is_empty() {
            return Err("a message with neither text nor a file is not served yet".into());
        }
        let mut read = inbound(&m, self.access.without_mention(&text));
        read.stranger = stranger;
        read.files = files;
        Ok(read)
    }
}

/// The forum topic of a message (the General topic is 1); a reply anchor is no
/// topic.
fn topic(m: &wire::Message) -> Option<i64> {
    match (m.chat.is_forum, m.message_thread_id, m.is_topic_message) {
        (true, Some(t), true) => Some(t),
        (true, _, _) => Some(1),
        _ => None,
    }
}

/// The door's view of a message.
fn inbound(m: &wire::Message, text: String) -> Inbound {
    let chat_type = match m.chat.kind.as_str() {
        "private" => ChatType::Dm,
        "channel" => ChatType::Channel,
        _ => ChatType::Group,
    };
    let thread = topic(m);
    Inbound {
        source: Source {
            platform: "telegram",
            chat_type,
            chat_id: m.chat.id.to_string(),
            thread_id: thread.map(|t| t.to_string()),
            user_id: m.from.as_ref().map(|u| u.id.to_string()),
        },
        chat: ChatRef {
            chat_id: m.chat.id.to_string(),
            thread_id: thread.map(|t| t.to_string()),
            group: chat_type != ChatType::Dm,
        },
        text,
        stranger: None,
        click: None,
        files: Vec::new(),
        message_id: Some(m.message_id.to_string()),
    }
}

//! Telegram: long polling into the inbox ([`poll`]), messages read and gated
//! ([`access`]), answers sent through the governor as HTML with a plain-text fallback
//! that keeps the whole text.

pub mod access;
pub mod api;
pub mod format;
pub mod menu;
pub mod poll;
pub mod webhook;
pub mod wire;

use crate::door::{ChatRef, Inbound, Platform};
use crate::key::{ChatType, Source};
use crate::outbox::Governor;
use crate::pairing::PairingStore;
use access::Access;
use api::{ApiError, BotApi};
use herald_deliver::split::{TELEGRAM_MAX_UTF16, split_message, utf16_len};
use herald_store::InboxItem;
use serde_json::{Value, json};
use std::time::Duration;
use wire::{Sent, Update};

/// Floods in a row a send waits out before it gives up.
const MAX_FLOODS: u32 = 3;

/// One bot, as the door's platform.
pub struct Telegram {
    pub api: BotApi,
    pub governor: Governor,
    pub access: Access,
    /// Users approved by pairing are allowed too (with the allow-lists).
    pub pairing: PairingStore,
}

impl Telegram {
    /// One message, waiting for its slot; a flood pauses the chat and is tried again.
    async fn send_one(&self, chat: &ChatRef, body: &Value) -> Result<i64, ApiError> {
        let mut floods = 0;
        loop {
            self.governor.slot(chat.chat_id, chat.group).await;
            match self
                .api
                .call::<Sent>("sendMessage", body, Duration::ZERO)
                .await
            {
                Ok(sent) => return Ok(sent.message_id),
                Err(ApiError::Flood(wait)) if floods < MAX_FLOODS => {
                    floods += 1;
                    tracing::warn!(
                        chat = chat.chat_id,
                        wait_s = wait.as_secs(),
                        "telegram: flood control; the chat waits"
                    );
                    self.governor.flooded(chat.chat_id, wait);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Sends the parts in order; the ids of those sent.
    async fn send_parts(
        &self,
        chat: &ChatRef,
        parts: &[String],
        html: bool,
    ) -> Result<Vec<String>, ApiError> {
        let mut ids = Vec::new();
        for part in parts {
            let mut body = json!({"chat_id": chat.chat_id, "text": part});
            if html {
                body["parse_mode"] = json!("HTML");
            }
            if let Some(t) = chat.thread_id.filter(|t| *t != 1) {
                body["message_thread_id"] = json!(t);
            }
            ids.push(self.send_one(chat, &body).await?.to_string());
        }
        Ok(ids)
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

    async fn send(&self, chat: &ChatRef, text: &str) -> Result<Vec<String>, String> {
        let parts = format::html_parts(text);
        match self.send_parts(chat, &parts, true).await {
            Ok(ids) => Ok(ids),
            // Telegram refused the formatting: the whole text, plain.
            Err(e) if e.bad_formatting() => {
                tracing::warn!(error = %e, "telegram: formatting refused; sending plain text");
                let plain = split_message(text, TELEGRAM_MAX_UTF16, utf16_len);
                self.send_parts(chat, &plain, false)
                    .await
                    .map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        }
    }

    async fn typing(&self, chat: &ChatRef) {
        let mut body = json!({"chat_id": chat.chat_id, "action": "typing"});
        if let Some(t) = chat.thread_id.filter(|t| *t != 1) {
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
    ) -> Result<Option<String>, String> {
        let html = format::to_html(text);
        let button = |label: &str, choice: &str| json!({"text": label, "callback_data": format!("ap:{token}:{choice}")});
        let mut body = json!({
            "chat_id": chat.chat_id,
            "text": html,
            "parse_mode": "HTML",
            "reply_markup": {"inline_keyboard": [
                [button("✅ Allow Once", "o"), button("✅ Session", "s")],
                [button("✅ Always", "a"), button("❌ Deny", "d")],
            ]},
        });
        if let Some(t) = chat.thread_id.filter(|t| *t != 1) {
            body["message_thread_id"] = json!(t);
        }
        let id = self
            .send_one(chat, &body)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Some(id.to_string()))
    }

    async fn edit(&self, chat: &ChatRef, message_id: &str, text: &str) {
        let Ok(message_id) = message_id.parse::<i64>() else {
            return;
        };
        self.governor.slot(chat.chat_id, chat.group).await;
        let body = json!({"chat_id": chat.chat_id, "message_id": message_id, "text": text});
        if let Err(e) = self
            .api
            .call::<Value>("editMessageText", &body, Duration::ZERO)
            .await
        {
            tracing::debug!(error = %e, "telegram: editMessageText failed");
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

    fn chat_of(&self, item: &InboxItem) -> Option<i64> {
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
        message.map(|m| m.chat.id)
    }

    fn read(&self, item: &InboxItem) -> Result<Inbound, String> {
        let update: Update = serde_json::from_str(item.payload.text())
            .map_err(|e| format!("not a Telegram update: {e}"))?;
        if let Some(q) = update.callback_query {
            return self.click(q);
        }
        let Some(m) = update.message else {
            return Err(format!("{} updates are not served yet", item.event_type));
        };
        if !self.access.addressed(&m) {
            return Err("a group message not addressed to the bot".into());
        }
        let stranger = match self.allowed(&m) {
            true => None,
            false => Some(self.stranger(&m)?),
        };
        let Some(text) = m.text.clone().or_else(|| m.caption.clone()) else {
            return Err("a message without text is not served yet".into());
        };
        let mut read = inbound(&m, self.access.without_mention(&text));
        read.stranger = stranger;
        Ok(read)
    }
}

/// The door's view of a message.
fn inbound(m: &wire::Message, text: String) -> Inbound {
    let chat_type = match m.chat.kind.as_str() {
        "private" => ChatType::Dm,
        "channel" => ChatType::Channel,
        _ => ChatType::Group,
    };
    // Only a forum's topics are threads (a reply anchor is not).
    let thread = match (m.chat.is_forum, m.message_thread_id, m.is_topic_message) {
        (true, Some(t), true) => Some(t),
        (true, _, _) => Some(1),
        _ => None,
    };
    Inbound {
        source: Source {
            platform: "telegram",
            chat_type,
            chat_id: m.chat.id.to_string(),
            thread_id: thread.map(|t| t.to_string()),
            user_id: m.from.as_ref().map(|u| u.id.to_string()),
        },
        chat: ChatRef {
            chat_id: m.chat.id,
            thread_id: thread,
            group: chat_type != ChatType::Dm,
        },
        text,
        stranger: None,
        click: None,
    }
}

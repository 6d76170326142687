//! Who may talk to the bot, and which group messages are meant for it, in Hermes's
//! order (`gateway/authz_mixin.py` `_is_user_authorized`, the adapter's
//! `_should_process_message`).

use super::wire::{Entity, Message, User};
use std::collections::BTreeSet;

/// The allow-lists and group gates of one bot.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// `TELEGRAM_ALLOWED_USERS` (`*`: everyone).
    pub allowed_users: BTreeSet<String>,
    /// `TELEGRAM_ALLOW_ALL_USERS`.
    pub allow_all: bool,
    /// `GATEWAY_ALLOWED_USERS`.
    pub gateway_allowed_users: BTreeSet<String>,
    /// `GATEWAY_ALLOW_ALL_USERS`.
    pub gateway_allow_all: bool,
    /// `TELEGRAM_GROUP_ALLOWED_USERS`: senders allowed in groups only.
    pub group_allowed_users: BTreeSet<String>,
    /// `TELEGRAM_GROUP_ALLOWED_CHATS`: every member of these groups.
    pub group_allowed_chats: BTreeSet<String>,
    /// `TELEGRAM_ALLOWED_CHATS`: only these groups are answered (DMs never filtered).
    pub allowed_chats: BTreeSet<String>,
    /// `TELEGRAM_REQUIRE_MENTION`.
    pub require_mention: bool,
    /// `TELEGRAM_FREE_RESPONSE_CHATS`: groups answered without a mention.
    pub free_response_chats: BTreeSet<String>,
    /// The bot's own username (from `getMe`), without `@`.
    pub bot_username: String,
    pub bot_id: i64,
}

/// Whether a message is a private chat's.
pub fn is_private(m: &Message) -> bool {
    m.chat.kind == "private"
}

impl Access {
    /// Whether the sender may talk to the bot.
    pub fn authorized(&self, m: &Message) -> bool {
        self.authorized_in(m, m.from.as_ref())
    }

    /// Whether `from` may talk to the bot in the chat of `m` (a button's presser is
    /// checked again this way).
    pub fn authorized_in(&self, m: &Message, from: Option<&User>) -> bool {
        let group = !is_private(m);
        if group && self.group_allowed_chats.contains(&m.chat.id.to_string()) {
            return true;
        }
        let Some(user) = from else {
            return false;
        };
        if user.is_bot {
            return false;
        }
        if self.allow_all {
            return true;
        }
        let id = user.id.to_string();
        let listed = |set: &BTreeSet<String>| set.contains("*") || set.contains(&id);
        if listed(&self.allowed_users) || listed(&self.gateway_allowed_users) {
            return true;
        }
        if group && listed(&self.group_allowed_users) {
            return true;
        }
        let any_list = !self.allowed_users.is_empty()
            || !self.gateway_allowed_users.is_empty()
            || !self.group_allowed_users.is_empty();
        !any_list && self.gateway_allow_all
    }

    /// Whether a group message is meant for the bot (a DM always is).
    pub fn addressed(&self, m: &Message) -> bool {
        if is_private(m) {
            return true;
        }
        let chat = m.chat.id.to_string();
        if !self.allowed_chats.is_empty() && !self.allowed_chats.contains(&chat) {
            return false;
        }
        if !self.require_mention || self.free_response_chats.contains(&chat) {
            return true;
        }
        let replied_to_bot = m
            .reply_to_message
            .as_ref()
            .and_then(|r| r.from.as_ref())
            .is_some_and(|u| u.id == self.bot_id);
        replied_to_bot || self.mentioned(m)
    }

    /// `@bot` in the text, or `/command@bot`.
    fn mentioned(&self, m: &Message) -> bool {
        let Some(text) = m.text.as_deref().or(m.caption.as_deref()) else {
            return false;
        };
        let me = format!("@{}", self.bot_username).to_lowercase();
        m.entities.iter().any(|e| {
            let said = entity_text(text, e).to_lowercase();
            match e.kind.as_str() {
                "mention" => said == me,
                "bot_command" => said.ends_with(&me),
                _ => false,
            }
        })
    }

    /// The text with the bot's own `@username` taken out (`/new@bot` is `/new`).
    pub fn without_mention(&self, text: &str) -> String {
        if self.bot_username.is_empty() {
            return text.to_owned();
        }
        let me = format!("@{}", self.bot_username);
        text.replace(&me, "").trim().to_owned()
    }
}

/// The text an entity covers (offsets are in UTF-16 code units).
fn entity_text(text: &str, e: &Entity) -> String {
    let units: Vec<u16> = text.encode_utf16().collect();
    let end = e.offset.saturating_add(e.length).min(units.len());
    let start = e.offset.min(end);
    String::from_utf16_lossy(&units[start..end])
}

//! Who may talk to the bot, and which group messages are meant for it, in Hermes's
//! order (`gateway/authz_mixin.py` `_is_user_authorized`, the adapter's
//! `_should_process_message`).

use super::wire::{Entity, Message, User};
use std::collections::BTreeSet;

/// The allow-lists and group gates of one bot.
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// `TELEGRAM_ALLOWED_USERS`, `TELEGRAM_ALLOW_ALL_USERS` and the gateway's.
    pub users: crate::allow::Users,
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
    /// `TELEGRAM_FREE_RESPONSE_TOPICS`: `<chat>:<thread>` answered without a mention.
    pub free_response_topics: BTreeSet<String>,
    /// `TELEGRAM_ALLOWED_TOPICS`: only these forum topics are answered (General: 1).
    pub allowed_topics: BTreeSet<String>,
    /// `TELEGRAM_IGNORED_THREADS`: never answered.
    pub ignored_threads: BTreeSet<i64>,
    /// `TELEGRAM_EXCLUSIVE_BOT_MENTIONS`: a message naming other bots (and not this
    /// one) is theirs.
    pub exclusive_bot_mentions: bool,
    /// `TELEGRAM_MENTION_PATTERNS`: wake words (case-insensitive).
    pub mention_patterns: Vec<regex::Regex>,
    /// The bot's own username (from `getMe`), without `@`.
    pub bot_username: String,
    pub bot_id: i64,
    /// `TELEGRAM_ALLOW_BOTS`: other bots' messages let through (all of them, or those
    /// that mention this bot).
    pub allow_bots: herald_config::telegram_settings::AllowBots,
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
            use herald_config::telegram_settings::AllowBots;
            return user.id != self.bot_id
                && match self.allow_bots {
                    AllowBots::None => false,
                    AllowBots::Mentions => self.mentioned(m),
                    AllowBots::All => true,
                };
        }
        let id = user.id.to_string();
        match group {
            true => self.users.allow(&id, &[&self.group_allowed_users], false),
            false => self
                .users
                .allow(&id, &[], !self.group_allowed_users.is_empty()),
        }
    }

    /// Whether a group message is meant for the bot (a DM always is), in the order of
    /// Hermes's `_should_process_message`.
    pub fn addressed(&self, m: &Message, thread: Option<i64>) -> bool {
        if is_private(m) {
            return true;
        }
        let topic = thread.unwrap_or(1).to_string();
        if !self.allowed_topics.is_empty() && !self.allowed_topics.contains(&topic) {
            return false;
        }
        if thread.is_some_and(|t| self.ignored_threads.contains(&t)) {
            return false;
        }
        if self.exclusive_bot_mentions && self.names_only_other_bots(m) {
            return false;
        }
        let chat = m.chat.id.to_string();
        if !self.allowed_chats.is_empty() && !self.allowed_chats.contains(&chat) {
            return false;
        }
        let free_topic =
            thread.is_some_and(|t| self.free_response_topics.contains(&format!("{chat}:{t}")));
        if self.free_response_chats.contains(&chat) || free_topic || !self.require_mention {
            return true;
        }
        let replied_to_bot = m
            .reply_to_message
            .as_ref()
            .and_then(|r| r.from.as_ref())
            .is_some_and(|u| u.id == self.bot_id);
        replied_to_bot || self.mentioned(m) || self.wake_word(m)
    }

    /// The bot usernames a message names (`@...bot` mentions, `/cmd@...bot`).
    fn bot_names(m: &Message) -> Vec<String> {
        let (text, entities) = text_and_entities(m);
        let mut names: Vec<String> = entities
            .iter()
            .filter(|e| e.kind == "mention" || e.kind == "bot_command")
            .filter_map(|e| {
                let said = entity_text(text, e).to_lowercase();
                let name = said.rsplit('@').next()?.to_owned();
                (said.contains('@') && name.ends_with("bot")).then_some(name)
            })
            .collect();
        // Some clients send a picked bot handle as plain text.
        for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '@')) {
            if let Some(name) = word.strip_prefix('@').map(str::to_lowercase)
                && name.ends_with("bot")
                && !names.contains(&name)
            {
                names.push(name);
            }
        }
        names
    }

    /// Other bots are named and this one is not.
    fn names_only_other_bots(&self, m: &Message) -> bool {
        let me = self.bot_username.to_lowercase();
        let names = Self::bot_names(m);
        !me.is_empty() && !names.is_empty() && !names.contains(&me)
    }

    /// `@bot` in the text, or `/command@bot`.
    fn mentioned(&self, m: &Message) -> bool {
        let me = self.bot_username.to_lowercase();
        !me.is_empty() && Self::bot_names(m).contains(&me) || {
            let (text, entities) = text_and_entities(m);
            let at = format!("@{me}");
            entities
                .iter()
                .any(|e| e.kind == "mention" && entity_text(text, e).to_lowercase() == at)
        }
    }

    /// A wake word in the text or caption.
    fn wake_word(&self, m: &Message) -> bool {
        let texts = [m.text.as_deref(), m.caption.as_deref()];
        texts
            .into_iter()
            .flatten()
            .any(|t| self.mention_patterns.iter().any(|p| p.is_match(t)))
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

/// The text of a message (or its caption) and the entities in it.
fn text_and_entities(m: &Message) -> (&str, &[Entity]) {
    match (&m.text, &m.caption) {
        (Some(t), _) => (t, &m.entities),
        (None, Some(c)) => (c, &m.caption_entities),
        (None, None) => ("", &[]),
    }
}

/// The text an entity covers (offsets are in UTF-16 code units).
fn entity_text(text: &str, e: &Entity) -> String {
    let units: Vec<u16> = text.encode_utf16().collect();
    let end = e.offset.saturating_add(e.length).min(units.len());
    let start = e.offset.min(end);
    String::from_utf16_lossy(&units[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group_message(text: &str, entities: serde_json::Value) -> Message {
        serde_json::from_value(serde_json::json!({
            "message_id": 1,
            "chat": {"id": -100, "type": "supergroup"},
            "from": {"id": 7, "is_bot": false, "first_name": "U"},
            "text": text,
            "entities": entities,
        }))
        .unwrap()
    }

    fn access() -> Access {
        Access {
            require_mention: true,
            bot_username: "herald_bot".into(),
            bot_id: 1,
            exclusive_bot_mentions: true,
            ..Access::default()
        }
    }

    #[test]
    fn groups_answer_mentions_wake_words_and_not_other_bots_or_ignored_threads() {
        let a = access();
        let mention = serde_json::json!([{"type": "mention", "offset": 0, "length": 10}]);
        assert!(a.addressed(&group_message("@herald_bot hi", mention.clone()), None));
        assert!(!a.addressed(&group_message("just chatting", serde_json::json!([])), None));
        assert!(!a.addressed(&group_message("@other_bot hi", mention), None));
        let command = serde_json::json!([{"type": "bot_command", "offset": 0, "length": 15}]);
        assert!(a.addressed(&group_message("/new@herald_bot", command.clone()), None));
        assert!(!a.addressed(&group_message("/new@others_bot", command), None));
        let mut woken = access();
        woken.mention_patterns = vec![
            regex::RegexBuilder::new("^hey herald")
                .case_insensitive(true)
                .build()
                .unwrap(),
        ];
        assert!(woken.addressed(
            &group_message("Hey Herald, help", serde_json::json!([])),
            None
        ));
        let mut quiet = access();
        quiet.require_mention = false;
        quiet.ignored_threads = [5].into();
        quiet.allowed_topics = ["1".to_owned(), "5".to_owned()].into();
        assert!(!quiet.addressed(&group_message("hi", serde_json::json!([])), Some(5)));
        assert!(quiet.addressed(&group_message("hi", serde_json::json!([])), None));
        assert!(!quiet.addressed(&group_message("hi", serde_json::json!([])), Some(9)));
    }

    #[test]
    fn other_bots_are_let_through_as_allow_bots_says() {
        use herald_config::telegram_settings::AllowBots;
        let from_bot = |text: &str, entities: serde_json::Value, id: i64| -> Message {
            serde_json::from_value(serde_json::json!({
                "message_id": 1,
                "chat": {"id": -100, "type": "supergroup"},
                "from": {"id": id, "is_bot": true, "first_name": "B"},
                "text": text,
                "entities": entities,
            }))
            .unwrap()
        };
        let mention = serde_json::json!([{"type": "mention", "offset": 0, "length": 11}]);
        let named = from_bot("@herald_bot run it", mention, 50);
        let plain = from_bot("status report", serde_json::json!([]), 50);
        let mut a = access();
        assert!(!a.authorized(&named), "none by default");
        a.allow_bots = AllowBots::Mentions;
        assert!(a.authorized(&named));
        assert!(!a.authorized(&plain));
        a.allow_bots = AllowBots::All;
        assert!(a.authorized(&plain));
        // Never its own messages.
        assert!(!a.authorized(&from_bot("echo", serde_json::json!([]), 1)));
    }
}

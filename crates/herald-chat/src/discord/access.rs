//! Which Discord messages are the bot's, in the order of Hermes's admission and
//! `_handle_message`: its own and other bots' messages left alone (unless
//! `DISCORD_ALLOW_BOTS`), system messages ignored, the user allow-list (ids, `*`,
//! usernames, roles), then in a server: allowed and ignored channels, free-response
//! channels, threads the bot takes part in, and the mention.

use super::wire::Message;
use herald_config::telegram_settings::AllowBots;
use std::collections::BTreeSet;

/// One bot's gates.
#[derive(Debug, Default)]
pub struct Access {
    /// `DISCORD_ALLOWED_USERS` (ids, `*`, or usernames), `DISCORD_ALLOW_ALL_USERS`, the
    /// gateway's.
    pub users: crate::allow::Users,
    /// `DISCORD_ALLOWED_ROLES`: members with one of these roles.
    pub roles: BTreeSet<String>,
    /// `DISCORD_ALLOWED_CHANNELS` (`*`: all).
    pub allowed_channels: BTreeSet<String>,
    /// `DISCORD_IGNORED_CHANNELS` (wins over allowed).
    pub ignored_channels: BTreeSet<String>,
    /// `DISCORD_FREE_RESPONSE_CHANNELS`.
    pub free_channels: BTreeSet<String>,
    /// `DISCORD_REQUIRE_MENTION` (true).
    pub require_mention: bool,
    /// `DISCORD_THREAD_REQUIRE_MENTION` (false): threads the bot is in need one too.
    pub thread_require_mention: bool,
    /// `DISCORD_ALLOW_BOTS`.
    pub allow_bots: AllowBots,
    /// The bot's user id (from `GET /users/@me`).
    pub bot_id: String,
}

/// What the gates say of a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Ignore(&'static str),
    Answer {
        mentioned: bool,
    },
    /// Answered if the thread is the bot's (it created it, or a session is stored).
    IfBotThread,
}

/// Where a guild message was written: its channel, and its parent when a thread.
#[derive(Debug, Clone, Default)]
pub struct Place {
    pub channel: String,
    pub parent: Option<String>,
}

impl Place {
    fn keys(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.channel).chain(self.parent.iter())
    }
}

impl Access {
    /// Whether the author may talk to the bot (by id, `*`, username, or a role).
    pub fn authorized(&self, m: &Message) -> bool {
        let roles = m
            .member
            .as_ref()
            .map(|r| r.roles.as_slice())
            .unwrap_or_default();
        self.authorized_user(&m.author, roles)
    }

    pub fn authorized_user(&self, user: &super::wire::User, roles: &[String]) -> bool {
        // A username is the user's own; a display name anyone may take.
        let by_name = !user.bot
            && self.users.allowed.iter().any(|entry| {
                !entry.chars().all(|c| c.is_ascii_digit())
                    && entry.eq_ignore_ascii_case(&user.username)
            });
        let by_role = roles.iter().any(|r| self.roles.contains(r));
        by_name || by_role || self.users.allow(&user.id, &[], !self.roles.is_empty())
    }

    /// Whether the bot is mentioned (`<@id>`, `<@!id>`, or in `mentions`; a role
    /// mention is not one).
    pub fn mentioned(&self, m: &Message) -> bool {
        !self.bot_id.is_empty()
            && (m.mentions.iter().any(|u| u.id == self.bot_id)
                || m.content.contains(&format!("<@{}>", self.bot_id))
                || m.content.contains(&format!("<@!{}>", self.bot_id)))
    }

    /// The text without the bot's mentions.
    pub fn without_mention(&self, text: &str) -> String {
        if self.bot_id.is_empty() {
            return text.trim().to_owned();
        }
        text.replace(&format!("<@{}>", self.bot_id), "")
            .replace(&format!("<@!{}>", self.bot_id), "")
            .trim()
            .to_owned()
    }

    /// The gates, in Hermes's order; `place` is `None` in a DM.
    pub fn judge(&self, m: &Message, place: Option<&Place>) -> Verdict {
        if m.author.id == self.bot_id {
            return Verdict::Ignore("the bot's own message");
        }
        if !matches!(m.kind, 0 | 19) {
            return Verdict::Ignore("a system message");
        }
        let mentioned = self.mentioned(m);
        if m.author.bot || m.webhook_id.is_some() {
            let let_in = match self.allow_bots {
                AllowBots::None => false,
                AllowBots::Mentions => mentioned,
                AllowBots::All => true,
            };
            if !let_in {
                return Verdict::Ignore("another bot's message");
            }
        }
        let Some(place) = place else {
            return Verdict::Answer { mentioned };
        };
        let listed =
            |set: &BTreeSet<String>| set.contains("*") || place.keys().any(|k| set.contains(k));
        if !self.allowed_channels.is_empty() && !listed(&self.allowed_channels) {
            return Verdict::Ignore("a channel not in DISCORD_ALLOWED_CHANNELS");
        }
        if listed(&self.ignored_channels) {
            return Verdict::Ignore("a channel in DISCORD_IGNORED_CHANNELS");
        }
        if !self.require_mention || listed(&self.free_channels) || mentioned {
            return Verdict::Answer { mentioned };
        }
        match place.parent.is_some() && !self.thread_require_mention {
            true => Verdict::IfBotThread,
            false => Verdict::Ignore("a channel message without a mention"),
        }
    }

    /// Whether a channel is free-response (no mention, no auto-thread).
    pub fn free(&self, place: &Place) -> bool {
        self.free_channels.contains("*") || place.keys().any(|k| self.free_channels.contains(k))
    }
}

/// Hermes's thread name for a message: mentions and channel links taken out, spaces
/// collapsed, at most 80 characters (77 and `...`), `Hermes` when nothing is left.
pub fn thread_name(text: &str) -> String {
    let words: Vec<&str> = text
        .split_whitespace()
        .filter(|w| !(w.starts_with("<@") || w.starts_with("<#")) || !w.ends_with('>'))
        .collect();
    let name = words.join(" ");
    if name.is_empty() {
        return "Hermes".to_owned();
    }
    match name.chars().count() > 80 {
        true => format!("{}...", name.chars().take(77).collect::<String>()),
        false => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(author: &str, content: &str) -> Message {
        serde_json::from_value(serde_json::json!({
            "id": "10", "channel_id": "C", "guild_id": "G", "type": 0,
            "author": {"id": author, "username": "ann"}, "content": content,
            "mentions": [], "member": {"roles": ["R1"]},
        }))
        .unwrap()
    }

    #[test]
    fn servers_need_a_mention_unless_free_or_a_bot_thread() {
        let a = Access {
            require_mention: true,
            bot_id: "99".into(),
            ..Access::default()
        };
        let place = Place {
            channel: "C".into(),
            parent: None,
        };
        assert!(matches!(
            a.judge(&message("1", "hi"), Some(&place)),
            Verdict::Ignore(_)
        ));
        assert_eq!(
            a.judge(&message("1", "<@99> hi"), Some(&place)),
            Verdict::Answer { mentioned: true }
        );
        assert_eq!(
            a.judge(&message("1", "hi"), None),
            Verdict::Answer { mentioned: false }
        );
        let thread = Place {
            channel: "T".into(),
            parent: Some("C".into()),
        };
        assert_eq!(
            a.judge(&message("1", "hi"), Some(&thread)),
            Verdict::IfBotThread
        );
        assert!(matches!(
            a.judge(&message("99", "hi"), None),
            Verdict::Ignore(_)
        ));
        let ignoring = Access {
            ignored_channels: ["C".to_owned()].into(),
            ..a
        };
        assert!(matches!(
            ignoring.judge(&message("1", "<@99> hi"), Some(&thread)),
            Verdict::Ignore(_)
        ));
        assert_eq!(ignoring.without_mention("<@!99> hi <@99>"), "hi");
    }

    #[test]
    fn users_are_allowed_by_id_name_or_role() {
        let mut a = Access::default();
        a.users.allowed = ["ANN".to_owned()].into();
        assert!(a.authorized(&message("1", "")));
        a.users.allowed = ["2".to_owned()].into();
        assert!(!a.authorized(&message("1", "")));
        a.roles = ["R1".to_owned()].into();
        assert!(a.authorized(&message("1", "")));
        assert_eq!(thread_name("<@99>  fix   the <#5> build"), "fix the build");
        assert_eq!(thread_name("<@99>"), "Hermes");
        assert_eq!(thread_name(&"x".repeat(90)).chars().count(), 80);
    }
}

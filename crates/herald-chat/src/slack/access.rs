//! Which Slack messages are the bot's, in the order of Hermes's `_handle_slack_message`:
//! its own and other bots' messages left alone (unless `SLACK_ALLOW_BOTS`), edits and
//! deletions ignored, channels gated by `SLACK_ALLOWED_CHANNELS`, then answered when
//! free-response, mentioned, or in a thread the bot takes part in (unless
//! `SLACK_STRICT_MENTION`).

use super::wire::Event;
use herald_config::telegram_settings::AllowBots;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::sync::Mutex;

/// Threads remembered as the bot's (Hermes keeps 5,000).
const THREADS_KEPT: usize = 5_000;

/// One bot's gates.
#[derive(Debug, Default)]
pub struct Access {
    pub users: crate::allow::Users,
    /// `SLACK_ALLOWED_CHANNELS`: only these channels are answered (DMs never filtered).
    pub allowed_channels: BTreeSet<String>,
    /// `SLACK_REQUIRE_MENTION` (true).
    pub require_mention: bool,
    /// `SLACK_STRICT_MENTION`: every message in a channel needs a mention, threads too.
    pub strict_mention: bool,
    /// `SLACK_FREE_RESPONSE_CHANNELS`.
    pub free_response_channels: BTreeSet<String>,
    /// `SLACK_MENTION_PATTERNS` (case-insensitive wake words).
    pub mention_patterns: Vec<regex::Regex>,
    /// `SLACK_ALLOW_BOTS`.
    pub allow_bots: AllowBots,
    /// The bot's own user id (from `auth.test`).
    pub bot_user: String,
    /// Threads the bot was mentioned in or posted in.
    pub threads: Threads,
}

/// The threads the bot takes part in, the oldest forgotten first.
#[derive(Debug, Default)]
pub struct Threads(Mutex<(HashSet<String>, VecDeque<String>)>);

impl Threads {
    pub fn add(&self, channel: &str, thread: &str) {
        let key = format!("{channel}:{thread}");
        let mut t = herald_session::conversation::lock(&self.0);
        if t.0.insert(key.clone()) {
            t.1.push_back(key);
        }
        while t.1.len() > THREADS_KEPT {
            if let Some(old) = t.1.pop_front() {
                t.0.remove(&old);
            }
        }
    }
    pub fn has(&self, channel: &str, thread: &str) -> bool {
        herald_session::conversation::lock(&self.0)
            .0
            .contains(&format!("{channel}:{thread}"))
    }
}

/// What the gates say of a message.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Not the bot's: why.
    Ignore(&'static str),
    /// Answered; `mentioned`: it named the bot.
    Answer { mentioned: bool },
    /// Answered if the thread has a stored session (asked of the store).
    IfSession,
}

/// A direct message (1:1); a group DM (`mpim`) is gated as a channel.
pub fn is_dm(e: &Event) -> bool {
    match e.channel_type.as_deref() {
        Some(t) => t == "im",
        None => e.channel.starts_with('D'),
    }
}

impl Access {
    /// Whether the sender may talk to the bot.
    pub fn authorized(&self, user: &str) -> bool {
        self.users.allow(user, &[], false)
    }

    pub fn mentioned(&self, text: &str) -> bool {
        let tag = format!("<@{}>", self.bot_user);
        (!self.bot_user.is_empty() && text.contains(&tag))
            || self.mention_patterns.iter().any(|p| p.is_match(text))
    }

    /// The gates, in Hermes's order.
    pub fn judge(&self, e: &Event) -> Verdict {
        if matches!(
            e.subtype.as_deref(),
            Some("message_changed" | "message_deleted")
        ) {
            return Verdict::Ignore("an edit or deletion");
        }
        let mentioned = self.mentioned(&e.text);
        if e.user.as_deref() == Some(self.bot_user.as_str()) {
            return Verdict::Ignore("the bot's own message");
        }
        let bot = e.bot_id.is_some() || e.subtype.as_deref() == Some("bot_message");
        if bot {
            let let_in = match self.allow_bots {
                AllowBots::None => false,
                AllowBots::Mentions => mentioned,
                AllowBots::All => true,
            };
            if !let_in {
                return Verdict::Ignore("another bot's message");
            }
        }
        if is_dm(e) {
            return Verdict::Answer { mentioned };
        }
        if !self.allowed_channels.is_empty() && !self.allowed_channels.contains(&e.channel) {
            return Verdict::Ignore("a channel not in SLACK_ALLOWED_CHANNELS");
        }
        if self.free_response_channels.contains(&e.channel) || !self.require_mention {
            return Verdict::Answer { mentioned };
        }
        if mentioned {
            return Verdict::Answer { mentioned };
        }
        let reply = e.thread_ts.as_deref().filter(|t| *t != e.ts);
        match (self.strict_mention, reply) {
            (true, _) | (false, None) => Verdict::Ignore("a channel message without a mention"),
            (false, Some(t)) if self.threads.has(&e.channel, t) => {
                Verdict::Answer { mentioned: false }
            }
            (false, Some(_)) => Verdict::IfSession,
        }
    }

    /// The text without the bot's mention.
    pub fn without_mention(&self, text: &str) -> String {
        match self.bot_user.is_empty() {
            true => text.trim().to_owned(),
            false => text
                .replace(&format!("<@{}>", self.bot_user), "")
                .trim()
                .to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(channel: &str, text: &str, ts: &str, thread: Option<&str>) -> Event {
        serde_json::from_value(serde_json::json!({
            "type": "message", "channel": channel, "user": "U1", "text": text, "ts": ts,
            "thread_ts": thread,
            "channel_type": if channel.starts_with('D') { "im" } else { "channel" },
        }))
        .unwrap()
    }

    #[test]
    fn channels_need_a_mention_unless_the_thread_is_the_bots() {
        let a = Access {
            require_mention: true,
            bot_user: "UBOT".into(),
            ..Access::default()
        };
        assert_eq!(
            a.judge(&event("D1", "hi", "1", None)),
            Verdict::Answer { mentioned: false }
        );
        assert!(matches!(
            a.judge(&event("C1", "hi", "1", None)),
            Verdict::Ignore(_)
        ));
        assert_eq!(
            a.judge(&event("C1", "<@UBOT> hi", "1", None)),
            Verdict::Answer { mentioned: true }
        );
        assert_eq!(
            a.judge(&event("C1", "more", "2", Some("1"))),
            Verdict::IfSession
        );
        a.threads.add("C1", "1");
        assert_eq!(
            a.judge(&event("C1", "more", "2", Some("1"))),
            Verdict::Answer { mentioned: false }
        );
        let strict = Access {
            strict_mention: true,
            ..a
        };
        assert!(matches!(
            strict.judge(&event("C1", "more", "2", Some("1"))),
            Verdict::Ignore(_)
        ));
        assert_eq!(strict.without_mention("<@UBOT> hi "), "hi");
    }

    #[test]
    fn bots_edits_and_channels_off_the_list_are_left_alone() {
        let mut a = Access {
            require_mention: false,
            bot_user: "UBOT".into(),
            allowed_channels: ["C1".to_owned()].into(),
            ..Access::default()
        };
        let mut own = event("C1", "x", "1", None);
        own.user = Some("UBOT".into());
        assert!(matches!(a.judge(&own), Verdict::Ignore(_)));
        let mut bot = event("C1", "<@UBOT> x", "1", None);
        bot.bot_id = Some("B2".into());
        assert!(matches!(a.judge(&bot), Verdict::Ignore(_)));
        a.allow_bots = AllowBots::Mentions;
        assert!(matches!(a.judge(&bot), Verdict::Answer { .. }));
        let mut edit = event("C1", "x", "1", None);
        edit.subtype = Some("message_changed".into());
        assert!(matches!(a.judge(&edit), Verdict::Ignore(_)));
        assert!(matches!(
            a.judge(&event("C2", "x", "1", None)),
            Verdict::Ignore(_)
        ));
        assert!(matches!(
            a.judge(&event("C1", "x", "1", None)),
            Verdict::Answer { .. }
        ));
    }
}

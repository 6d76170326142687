//! Discord's settings, typed, read as Hermes 0.19.0's Discord adapter reads them
//! (`plugins/platforms/discord/adapter.py`): `config.extra` first where the adapter
//! looks there, then the environment (`DISCORD_*`, `GATEWAY_*`, with `.env` merged),
//! which Hermes fills from the top-level `discord:` block where a variable is unset.
//! The missed-message backfill is on by default in herald (Hermes's is opt-in).
//!
//! Discord is on when a token is set (`DISCORD_BOT_TOKEN`, else
//! `platforms.discord.token`) and no block says `enabled: false`.

use crate::chat_sources::{ChatInput, Sources, no, split, yes};
use crate::telegram_settings::{AllowBots, HomeChannel, ReplyToMode, UnauthorizedDm};
use serde_json::Value;
use std::collections::BTreeSet;

/// The REST API's address when neither `extra.base_url` nor `DISCORD_BASE_URL` is set.
pub const DEFAULT_BASE_URL: &str = "https://discord.com/api/v10";

/// Keys of the top-level `discord:` block herald reads.
pub const DISCORD_KEYS: &[&str] = &[
    "require_mention",
    "thread_require_mention",
    "allow_from",
    "free_response_channels",
    "auto_thread",
    "reactions",
    "ignored_channels",
    "allowed_channels",
    "no_thread_channels",
    "reply_to_mode",
    "allow_bots",
    "missed_message_backfill",
    "unauthorized_dm_behavior",
];

/// Keys Hermes reads in a `discord:` block that herald does not implement.
#[rustfmt::skip]
pub const DISCORD_HERMES_KEYS: &[&str] = &[
    "bots_require_inline_mention", "approval_mentions", "history_backfill",
    "history_backfill_limit", "allow_mentions", "channel_prompts", "channel_skill_bindings",
    "dm_role_auth_guild", "slash_commands", "reply_prefix",
];

/// `DISCORD_MISSED_MESSAGE_BACKFILL*` / `missed_message_backfill:`.
#[derive(Debug, Clone, PartialEq)]
pub struct BackfillSettings {
    /// On by default in herald.
    pub enabled: bool,
    /// Channels always read (besides those herald stored messages from).
    pub channels: Vec<String>,
    /// 21,600 (six hours), at least 60.
    pub window_secs: u64,
    /// Messages read per channel (100; Discord gives at most 100 a call).
    pub limit: u32,
}

/// Discord's settings.
#[derive(Clone, PartialEq)]
pub struct DiscordSettings {
    pub token: String,
    /// `extra.base_url`, else `DISCORD_BASE_URL`, else [`DEFAULT_BASE_URL`].
    pub base_url: String,
    /// `DISCORD_ALLOWED_USERS`, else `allow_from`: ids, `*`, or usernames (`<@id>` and
    /// `user:` prefixes taken off).
    pub allowed_users: BTreeSet<String>,
    pub allow_all_users: bool,
    pub gateway_allowed_users: BTreeSet<String>,
    pub gateway_allow_all_users: bool,
    /// `DISCORD_ALLOWED_ROLES` (role ids).
    pub allowed_roles: BTreeSet<String>,
    pub allowed_channels: BTreeSet<String>,
    pub ignored_channels: BTreeSet<String>,
    pub no_thread_channels: BTreeSet<String>,
    /// `extra.free_response_channels`, else the variable, else the block's.
    pub free_response_channels: BTreeSet<String>,
    /// `DISCORD_REQUIRE_MENTION` (true).
    pub require_mention: bool,
    /// `DISCORD_THREAD_REQUIRE_MENTION` (false).
    pub thread_require_mention: bool,
    /// `DISCORD_AUTO_THREAD` (true).
    pub auto_thread: bool,
    /// `DISCORD_REACTIONS` (true).
    pub reactions: bool,
    pub allow_bots: AllowBots,
    /// `DISCORD_REPLY_TO_MODE` (`first`).
    pub reply_to_mode: ReplyToMode,
    pub home: Option<HomeChannel>,
    pub backfill: BackfillSettings,
    pub unauthorized_dm: UnauthorizedDm,
    pub group_sessions_per_user: bool,
    pub thread_sessions_per_user: bool,
    pub display: crate::chat_display::ChatDisplay,
}

impl DiscordSettings {
    /// The members intent is needed: usernames in the allow-list, or roles.
    pub fn members_intent(&self) -> bool {
        !self.allowed_roles.is_empty()
            || self
                .allowed_users
                .iter()
                .any(|u| u != "*" && !u.chars().all(|c| c.is_ascii_digit()))
    }
}

impl std::fmt::Debug for DiscordSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordSettings")
            .field("token", &"***")
            .field("require_mention", &self.require_mention)
            .field("auto_thread", &self.auto_thread)
            .field("backfill", &self.backfill)
            .finish_non_exhaustive()
    }
}

/// Reads Discord's settings; `None` when Discord is off.
pub fn read_discord_settings(input: &ChatInput<'_>) -> Option<DiscordSettings> {
    let s = Sources::new(input, "discord");
    if s.block_enabled() == Some(false) || s.nested.and_then(|p| p.enabled) == Some(false) {
        return None;
    }
    let token = s
        .env("DISCORD_BOT_TOKEN")
        .or_else(|| s.nested.and_then(|p| p.token.clone()))
        .filter(|t| !t.trim().is_empty())?;
    let allowed_users: BTreeSet<String> = s
        .list_env_first("DISCORD_ALLOWED_USERS", "allow_from")
        .into_iter()
        .map(|u| clean_id(&u))
        .filter(|u| !u.is_empty())
        .collect();
    let gateway_allowed_users = s.env_list("GATEWAY_ALLOWED_USERS");
    let allowed_roles: BTreeSet<String> = s
        .env_list("DISCORD_ALLOWED_ROLES")
        .into_iter()
        .filter(|r| r.chars().all(|c| c.is_ascii_digit()))
        .collect();
    let listed =
        !(allowed_users.is_empty() && gateway_allowed_users.is_empty() && allowed_roles.is_empty());
    Some(DiscordSettings {
        base_url: s
            .extra_text("base_url")
            .or_else(|| s.env("DISCORD_BASE_URL"))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
        allow_all_users: s.env("DISCORD_ALLOW_ALL_USERS").is_some_and(|v| yes(&v)),
        gateway_allow_all_users: s.env("GATEWAY_ALLOW_ALL_USERS").is_some_and(|v| yes(&v)),
        allowed_channels: s.list_env_first("DISCORD_ALLOWED_CHANNELS", "allowed_channels"),
        ignored_channels: s.list_env_first("DISCORD_IGNORED_CHANNELS", "ignored_channels"),
        no_thread_channels: s.list_env_first("DISCORD_NO_THREAD_CHANNELS", "no_thread_channels"),
        free_response_channels: s
            .list_extra_first("free_response_channels", "DISCORD_FREE_RESPONSE_CHANNELS"),
        require_mention: s
            .flag_extra_first("require_mention", "DISCORD_REQUIRE_MENTION")
            .is_none_or(|v| !no(&v)),
        thread_require_mention: s
            .flag_extra_first("thread_require_mention", "DISCORD_THREAD_REQUIRE_MENTION")
            .is_some_and(|v| yes(&v)),
        auto_thread: s
            .flag_env_first("DISCORD_AUTO_THREAD", "auto_thread")
            .is_none_or(|v| yes(&v)),
        reactions: s
            .flag_env_first("DISCORD_REACTIONS", "reactions")
            .is_none_or(|v| !matches!(v.trim().to_lowercase().as_str(), "false" | "0" | "no")),
        allow_bots: match s
            .flag_env_first("DISCORD_ALLOW_BOTS", "allow_bots")
            .map(|v| v.trim().to_lowercase())
            .as_deref()
        {
            Some("mentions") => AllowBots::Mentions,
            Some("all") => AllowBots::All,
            _ => AllowBots::None,
        },
        reply_to_mode: match s
            .flag_env_first("DISCORD_REPLY_TO_MODE", "reply_to_mode")
            .map(|v| v.trim().to_lowercase())
            .as_deref()
        {
            Some("off" | "false") => ReplyToMode::Off,
            Some("all") => ReplyToMode::All,
            _ => ReplyToMode::First,
        },
        home: s.home("DISCORD"),
        backfill: backfill(&s),
        unauthorized_dm: s.unauthorized_dm(listed),
        group_sessions_per_user: s.session_flag("group_sessions_per_user", true),
        thread_sessions_per_user: s.session_flag("thread_sessions_per_user", false),
        display: Default::default(),
        token,
        allowed_users,
        gateway_allowed_users,
        allowed_roles,
    })
}

/// `<@id>`, `<@!id>` and `user:` taken off an allow-list entry (Hermes's
/// `_clean_discord_id`).
fn clean_id(entry: &str) -> String {
    let e = entry.trim();
    let e = match e.strip_prefix("<@").and_then(|r| r.strip_suffix('>')) {
        Some(inner) => inner.trim_start_matches('!'),
        None => e,
    };
    let lower = e.to_ascii_lowercase();
    match lower.strip_prefix("user:") {
        Some(_) => e[5..].trim().to_owned(),
        None => e.to_owned(),
    }
}

/// The backfill's settings: `extra.missed_message_backfill` (a mapping) over the
/// variables.
fn backfill(s: &Sources<'_>) -> BackfillSettings {
    let extra = s
        .nested
        .and_then(|p| p.extra.get("missed_message_backfill"))
        .or_else(|| s.block_value("missed_message_backfill"))
        .cloned()
        .unwrap_or(Value::Null);
    let text = |key: &str, var: &str| {
        extra
            .get(key)
            .and_then(crate::chat_sources::text_of)
            .or_else(|| s.env(var))
    };
    let number = |key: &str, var: &str| text(key, var).and_then(|v| v.trim().parse::<u64>().ok());
    BackfillSettings {
        enabled: text("enabled", "DISCORD_MISSED_MESSAGE_BACKFILL").is_none_or(|v| !no(&v)),
        channels: text("channels", "DISCORD_MISSED_MESSAGE_BACKFILL_CHANNELS")
            .map(|v| split(&v).into_iter().collect())
            .unwrap_or_default(),
        window_secs: number(
            "window_seconds",
            "DISCORD_MISSED_MESSAGE_BACKFILL_WINDOW_SECONDS",
        )
        .unwrap_or(21_600)
        .max(60),
        limit: number("limit", "DISCORD_MISSED_MESSAGE_BACKFILL_LIMIT")
            .unwrap_or(100)
            .clamp(1, 100) as u32,
    }
}

/// Checks the keys of the top-level `discord:` block; the Hermes keys herald does not
/// implement are returned as dotted keys.
pub fn check_top_level_block(
    r: &mut crate::reader::Reader,
    doc: &crate::node::Node,
) -> Vec<String> {
    let Some(block) = doc
        .get("discord")
        .filter(|n| matches!(n.value, crate::node::NodeValue::Map(_)))
    else {
        return Vec::new();
    };
    let known: Vec<&str> = DISCORD_KEYS
        .iter()
        .chain(&["enabled", "extra"])
        .copied()
        .collect();
    r.check_keys_knowing(block, "discord", &known, DISCORD_HERMES_KEYS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list_entries_are_cleaned_as_hermes_cleans_them() {
        assert_eq!(clean_id(" <@!123> "), "123");
        assert_eq!(clean_id("<@45>"), "45");
        assert_eq!(clean_id("User:ann"), "ann");
        assert_eq!(clean_id("*"), "*");
    }
}

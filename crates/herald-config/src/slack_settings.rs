//! Slack's settings, typed, read as Hermes 0.19.0's Slack adapter reads them
//! (`plugins/platforms/slack/adapter.py`): the adapter's `config.extra` first (the
//! `platforms.slack` / `gateway.platforms.slack` blocks' `extra:` maps), then the
//! environment (`SLACK_*`, `GATEWAY_*`, with `.env` merged into it), which Hermes fills
//! from the top-level `slack:` block only where a variable is unset. herald adds the
//! Events API (`SLACK_SIGNING_SECRET`, `SLACK_EVENTS_PATH`), which Hermes lacks.
//!
//! Slack is answered when a bot token is set (`SLACK_BOT_TOKEN`, else
//! `platforms.slack.token`) with a way to receive (`SLACK_APP_TOKEN` for Socket Mode,
//! `SLACK_SIGNING_SECRET` for the Events API), and no block says `enabled: false`. A
//! bot token alone serves `deliver: slack` only.

use crate::chat_sources::{ChatInput, Sources, no, yes};
use crate::node::Node;
use crate::telegram_settings::{AllowBots, HomeChannel, UnauthorizedDm};
use std::collections::BTreeSet;

/// The Web API's address when neither `extra.base_url` nor `SLACK_BASE_URL` is set.
pub const DEFAULT_BASE_URL: &str = "https://slack.com/api/";
/// Where the Events API is served when `SLACK_EVENTS_PATH` is unset.
pub const DEFAULT_EVENTS_PATH: &str = "/slack/events";
/// The status line's text when `typing_status_text` is unset.
pub const DEFAULT_STATUS_TEXT: &str = "is thinking...";

/// Keys of the top-level `slack:` block herald reads (Hermes bridges them into
/// `SLACK_*` variables).
pub const SLACK_KEYS: &[&str] = &[
    "require_mention",
    "strict_mention",
    "allow_bots",
    "free_response_channels",
    "reactions",
    "allowed_channels",
    "mention_patterns",
    "reply_in_thread",
    "allow_from",
    "unauthorized_dm_behavior",
    "typing_indicator",
    "typing_status_text",
];

/// Slack's settings.
#[derive(Clone, PartialEq)]
pub struct SlackSettings {
    /// `SLACK_BOT_TOKEN` (`xoxb-`), else `platforms.slack.token`; the first of a
    /// comma-separated list (Hermes's primary workspace).
    pub bot_token: String,
    /// `SLACK_APP_TOKEN` (`xapp-`): Socket Mode.
    pub app_token: Option<String>,
    /// `SLACK_SIGNING_SECRET` (a herald setting): the Events API.
    pub signing_secret: Option<String>,
    /// `SLACK_EVENTS_PATH`, else `extra.events_path`, else `/slack/events`.
    pub events_path: String,
    /// `extra.base_url`, else `SLACK_BASE_URL`, else [`DEFAULT_BASE_URL`].
    pub base_url: String,
    /// `SLACK_ALLOWED_USERS`, else `allow_from` (`*`: everyone).
    pub allowed_users: BTreeSet<String>,
    /// `SLACK_ALLOW_ALL_USERS`.
    pub allow_all_users: bool,
    pub gateway_allowed_users: BTreeSet<String>,
    pub gateway_allow_all_users: bool,
    /// `extra.allowed_channels`, else `SLACK_ALLOWED_CHANNELS`, else the block's.
    pub allowed_channels: BTreeSet<String>,
    /// `extra.require_mention`, else `SLACK_REQUIRE_MENTION`, else the block's (true).
    pub require_mention: bool,
    /// `extra.strict_mention`, else `SLACK_STRICT_MENTION` (false).
    pub strict_mention: bool,
    /// `extra.free_response_channels`, else `SLACK_FREE_RESPONSE_CHANNELS`.
    pub free_response_channels: BTreeSet<String>,
    /// `extra.mention_patterns`, else `SLACK_MENTION_PATTERNS` (a JSON list, else one
    /// per line or comma).
    pub mention_patterns: Vec<String>,
    /// `extra.allow_bots`, else `SLACK_ALLOW_BOTS` (`none`).
    pub allow_bots: AllowBots,
    /// `SLACK_REACTIONS`, else the block's `reactions` (true; off for
    /// `false/0/no`).
    pub reactions: bool,
    /// `extra.reply_in_thread`, else the block's (true).
    pub reply_in_thread: bool,
    /// `extra.dm_top_level_threads_as_sessions` (true).
    pub dm_threads: bool,
    /// `typing_indicator` (true): the assistant status line.
    pub status_line: bool,
    /// `typing_status_text` (`is thinking...`).
    pub status_text: String,
    /// `SLACK_HOME_CHANNEL` (+ `_NAME`, `_THREAD_ID`), else `platforms.slack.home_channel`.
    pub home: Option<HomeChannel>,
    pub unauthorized_dm: UnauthorizedDm,
    pub group_sessions_per_user: bool,
    pub thread_sessions_per_user: bool,
    /// `extra.ping_interval_seconds` (5, a herald setting): how often each Socket Mode
    /// socket is pinged; one with no pong for four intervals is replaced.
    pub ping_every: std::time::Duration,
    /// Streaming, tool progress, the folders answers may send files from.
    pub display: crate::chat_display::ChatDisplay,
}

impl std::fmt::Debug for SlackSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackSettings")
            .field("bot_token", &"***")
            .field("app_token", &self.app_token.as_ref().map(|_| "***"))
            .field(
                "signing_secret",
                &self.signing_secret.as_ref().map(|_| "***"),
            )
            .field("events_path", &self.events_path)
            .field("require_mention", &self.require_mention)
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

/// Reads Slack's settings; `None` when Slack is off.
pub fn read_slack_settings(input: &ChatInput<'_>) -> Option<SlackSettings> {
    let s = Sources::new(input, "slack");
    if s.block_enabled() == Some(false) || s.nested.and_then(|p| p.enabled) == Some(false) {
        return None;
    }
    let bot_token = s
        .env("SLACK_BOT_TOKEN")
        .or_else(|| s.nested.and_then(|p| p.token.clone()))?
        .split(',')
        .map(str::trim)
        .find(|t| !t.is_empty())?
        .to_owned();
    let (app_token, signing_secret) = (s.env("SLACK_APP_TOKEN"), s.env("SLACK_SIGNING_SECRET"));
    if app_token.is_none() && signing_secret.is_none() {
        return None;
    }
    let any_list = |lists: &[&BTreeSet<String>]| lists.iter().any(|l| !l.is_empty());
    let allowed_users = s.list_env_first("SLACK_ALLOWED_USERS", "allow_from");
    let gateway_allowed_users = s.env_list("GATEWAY_ALLOWED_USERS");
    let listed = any_list(&[&allowed_users, &gateway_allowed_users]);
    Some(SlackSettings {
        app_token,
        signing_secret,
        events_path: s
            .env("SLACK_EVENTS_PATH")
            .or_else(|| s.extra_text("events_path"))
            .unwrap_or_else(|| DEFAULT_EVENTS_PATH.to_owned()),
        base_url: s
            .extra_text("base_url")
            .or_else(|| s.env("SLACK_BASE_URL"))
            .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()),
        allow_all_users: s.env("SLACK_ALLOW_ALL_USERS").is_some_and(|v| yes(&v)),
        gateway_allow_all_users: s.env("GATEWAY_ALLOW_ALL_USERS").is_some_and(|v| yes(&v)),
        allowed_channels: s.list_extra_first("allowed_channels", "SLACK_ALLOWED_CHANNELS"),
        require_mention: s
            .flag_extra_first("require_mention", "SLACK_REQUIRE_MENTION")
            .is_none_or(|v| !no(&v)),
        strict_mention: s
            .flag_extra_first("strict_mention", "SLACK_STRICT_MENTION")
            .is_some_and(|v| yes(&v)),
        free_response_channels: s
            .list_extra_first("free_response_channels", "SLACK_FREE_RESPONSE_CHANNELS"),
        mention_patterns: s.mention_patterns("SLACK_MENTION_PATTERNS"),
        allow_bots: match s
            .flag_extra_first("allow_bots", "SLACK_ALLOW_BOTS")
            .as_deref()
            .map(str::trim)
        {
            Some("mentions") => AllowBots::Mentions,
            Some("all") => AllowBots::All,
            _ => AllowBots::None,
        },
        reactions: s
            .env("SLACK_REACTIONS")
            .or_else(|| s.block_text("reactions"))
            .is_none_or(|v| !matches!(v.trim().to_lowercase().as_str(), "false" | "0" | "no")),
        reply_in_thread: s
            .flag_extra_first("reply_in_thread", "")
            .is_none_or(|v| !no(&v)),
        dm_threads: s
            .extra_text("dm_top_level_threads_as_sessions")
            .is_none_or(|v| yes(&v)),
        status_line: s
            .flag_extra_first("typing_indicator", "")
            .is_none_or(|v| !no(&v)),
        status_text: s
            .flag_extra_first("typing_status_text", "")
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| DEFAULT_STATUS_TEXT.to_owned()),
        home: s.home("SLACK"),
        unauthorized_dm: s.unauthorized_dm(listed),
        group_sessions_per_user: s.session_flag("group_sessions_per_user", true),
        thread_sessions_per_user: s.session_flag("thread_sessions_per_user", false),
        ping_every: std::time::Duration::from_secs_f64(
            s.extra_text("ping_interval_seconds")
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.1)
                .unwrap_or(5.0)
                .min(60.0),
        ),
        display: Default::default(),
        bot_token,
        allowed_users,
        gateway_allowed_users,
    })
}

/// Keys Hermes reads in a `slack:` block that herald does not implement.
#[rustfmt::skip]
pub const SLACK_HERMES_KEYS: &[&str] = &[
    "cron_continuable_surface", "reply_prefix", "channel_prompts", "channel_skill_bindings",
    "dm_policy", "reply_broadcast", "rich_blocks", "feedback_buttons", "suggested_prompts",
    "assistant_thread_titles", "dm_top_level_threads_as_sessions", "notice_delivery",
];

/// Checks the keys of the top-level `slack:` block; the Hermes keys herald does not
/// implement are returned as dotted keys.
pub fn check_top_level_block(r: &mut crate::reader::Reader, doc: &Node) -> Vec<String> {
    let Some(block) = doc
        .get("slack")
        .filter(|n| matches!(n.value, crate::node::NodeValue::Map(_)))
    else {
        return Vec::new();
    };
    let known: Vec<&str> = SLACK_KEYS
        .iter()
        .chain(&["enabled", "extra"])
        .copied()
        .collect();
    r.check_keys_knowing(block, "slack", &known, SLACK_HERMES_KEYS)
}

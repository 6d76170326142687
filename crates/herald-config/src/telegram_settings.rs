//! Telegram's settings, typed, read from a Hermes home key by key as Hermes 0.19.0 reads
//! them: the environment (`TELEGRAM_*`, `GATEWAY_*`, with `.env` merged into it), the
//! top-level `telegram:` block, `platforms.telegram` / `gateway.platforms.telegram` with
//! their `extra:` maps, and the gateway-wide keys (`require_mention`,
//! `unauthorized_dm_behavior`, `group_sessions_per_user`, `thread_sessions_per_user`).
//! Each field names its variable, its YAML key and the order in which Hermes consults
//! them; [`crate::telegram_sources`] models where Hermes looks.
//!
//! Telegram is on when a token is set (`TELEGRAM_BOT_TOKEN`, else the nested block's
//! `token`) and no block says `enabled: false`; else [`read_telegram_settings`] gives
//! `None` and reads nothing else.

use crate::config::EnvLookup;
use crate::node::{Node, NodeValue};
use crate::platforms::PlatformSettings;
use crate::reader::Reader;
use crate::telegram_sources::{Found, Raw, Sources, scalar_text, split_commas};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The Bot API's address when neither `extra.base_url` nor `TELEGRAM_BASE_URL` is set
/// (the token is appended).
pub const DEFAULT_BASE_URL: &str = "https://api.telegram.org/bot";
/// Where files are fetched from without `extra.base_file_url` or a base URL.
pub const DEFAULT_BASE_FILE_URL: &str = "https://api.telegram.org/file/bot";
/// `TELEGRAM_WEBHOOK_PORT` when unset.
pub const DEFAULT_WEBHOOK_PORT: u16 = 8443;
/// A home channel's name when none is given.
pub const DEFAULT_HOME_NAME: &str = "Home";

/// Keys of a Telegram block herald reads (besides [`crate::platforms::PLATFORM_KEYS`]).
pub const TELEGRAM_KEYS: &[&str] = &[
    "require_mention",
    "mention_patterns",
    "exclusive_bot_mentions",
    "allow_bots",
    "free_response_chats",
    "free_response_topics",
    "allowed_chats",
    "group_allowed_chats",
    "allowed_topics",
    "ignored_threads",
    "reactions",
    "proxy_url",
    "reply_to_mode",
    "allow_from",
    "group_allow_from",
    "unauthorized_dm_behavior",
    "dm_policy",
];

/// Keys Hermes reads in a Telegram block that herald does not implement.
#[rustfmt::skip]
pub const TELEGRAM_HERMES_KEYS: &[&str] = &[
    "guest_mode", "observe_unmentioned_group_messages", "disable_topic_auto_rename",
    "disable_link_previews", "notice_delivery", "reply_prefix", "reply_in_thread",
    "cron_continuable_surface", "free_response_channels", "allow_admin_from",
    "user_allowed_commands", "group_policy", "group_allow_admin_from",
    "group_user_allowed_commands", "channel_prompts", "gateway_restart_notification",
    "typing_indicator", "typing_status_text", "channel_overrides",
];

/// Top-level keys this module reads (besides `telegram:` itself).
pub const TOP_KEYS: &[&str] = &[
    "telegram",
    "require_mention",
    "unauthorized_dm_behavior",
    "group_sessions_per_user",
    "thread_sessions_per_user",
];

/// Keys of `gateway:` this module reads.
pub const GATEWAY_KEYS: &[&str] = &[
    "unauthorized_dm_behavior",
    "group_sessions_per_user",
    "thread_sessions_per_user",
];

/// `TELEGRAM_ALLOW_BOTS` / `allow_bots`: which other bots' messages are let through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllowBots {
    /// Other bots are never answered (the default).
    #[default]
    None,
    /// Only when they mention this bot.
    Mentions,
    All,
}

/// `TELEGRAM_REPLY_TO_MODE` / `reply_to_mode`: which chunks of an answer quote the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReplyToMode {
    Off,
    /// Only the first chunk (the default).
    #[default]
    First,
    All,
}

/// `unauthorized_dm_behavior`: what an unknown user's private message gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnauthorizedDm {
    /// A pairing code.
    Pair,
    /// Silence.
    Ignore,
}

/// Webhook mode (`TELEGRAM_WEBHOOK_URL` set): Telegram posts updates instead of herald
/// polling.
#[derive(Clone, PartialEq, Eq)]
pub struct TelegramWebhook {
    /// `TELEGRAM_WEBHOOK_URL`: the public HTTPS URL (its path is the path served).
    pub url: String,
    /// `TELEGRAM_WEBHOOK_SECRET`: required, checked against
    /// `X-Telegram-Bot-Api-Secret-Token`.
    pub secret: String,
    /// `TELEGRAM_WEBHOOK_PORT` (8443; a value that is not a number is the default, as in
    /// Hermes).
    pub port: u16,
}

impl std::fmt::Debug for TelegramWebhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramWebhook")
            .field("url", &self.url)
            .field("secret", &"***")
            .field("port", &self.port)
            .finish()
    }
}

/// Where cron jobs with `deliver: telegram` and gateway notices go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeChannel {
    /// `TELEGRAM_HOME_CHANNEL`, else `home_channel.chat_id` of `platforms.telegram`.
    pub chat_id: String,
    /// `TELEGRAM_HOME_CHANNEL_NAME`, else `home_channel.name` ("Home").
    pub name: String,
    /// `TELEGRAM_HOME_CHANNEL_THREAD_ID`, else `home_channel.thread_id` (a forum topic).
    pub thread_id: Option<String>,
}

/// Telegram's settings. Lists are sets of ids as text (`*` in an allow-list means
/// everyone). "Environment wins" means the variable when set and not empty, else the
/// YAML key (Hermes copies YAML into unset variables); "`extra` wins" means the adapter
/// reads its `config.extra` first.
#[derive(Clone, PartialEq)]
pub struct TelegramSettings {
    /// `TELEGRAM_BOT_TOKEN`, else `platforms.telegram.token` (environment wins).
    pub token: String,
    /// `TELEGRAM_ALLOWED_USERS`, else the block's `allow_from` (a list or a comma
    /// string); `*` = everyone. Environment wins.
    pub allowed_users: BTreeSet<String>,
    /// `TELEGRAM_ALLOW_ALL_USERS` (`true/1/yes`; environment only).
    pub allow_all_users: bool,
    /// `GATEWAY_ALLOWED_USERS` (environment only).
    pub gateway_allowed_users: BTreeSet<String>,
    /// `GATEWAY_ALLOW_ALL_USERS` (`true/1/yes`; environment only): everyone, when no
    /// allow-list is set.
    pub gateway_allow_all_users: bool,
    /// `TELEGRAM_GROUP_ALLOWED_USERS`, else `group_allow_from`: senders allowed in groups
    /// only. Environment wins.
    pub group_allowed_users: BTreeSet<String>,
    /// `TELEGRAM_GROUP_ALLOWED_CHATS`, else `group_allowed_chats`: every member of these
    /// groups (`*`: every group). Environment wins (the authorization check's order).
    pub group_allowed_chats: BTreeSet<String>,
    /// `extra.allowed_chats` / the block's `allowed_chats`, else `TELEGRAM_ALLOWED_CHATS`:
    /// only these groups are answered (DMs never filtered). `extra` wins.
    pub allowed_chats: BTreeSet<String>,
    /// `allowed_topics`, else `TELEGRAM_ALLOWED_TOPICS`: forum topic ids answered (General
    /// = `1`). `extra` wins.
    pub allowed_topics: BTreeSet<String>,
    /// `extra.ignored_threads`, else `TELEGRAM_IGNORED_THREADS`, else the block's
    /// `ignored_threads`: thread ids never answered (non-numbers are skipped).
    pub ignored_threads: BTreeSet<i64>,
    /// `require_mention` (block, `extra`, or top-level), else `TELEGRAM_REQUIRE_MENTION`
    /// (false): groups need an @mention, a reply or a wake word. `extra` wins.
    pub require_mention: bool,
    /// `mention_patterns`, else `TELEGRAM_MENTION_PATTERNS` (a JSON list, else one per
    /// line): case-insensitive wake-word regexes; ones that do not compile are skipped.
    pub mention_patterns: Vec<String>,
    /// `extra.free_response_chats`, else `TELEGRAM_FREE_RESPONSE_CHATS`, else the block's
    /// `free_response_chats`: groups answered without a mention.
    pub free_response_chats: BTreeSet<String>,
    /// `free_response_topics`, else `TELEGRAM_FREE_RESPONSE_TOPICS`: `<chat_id>:<thread_id>`
    /// topics answered without a mention. `extra` wins.
    pub free_response_topics: BTreeSet<String>,
    /// `exclusive_bot_mentions`, else `TELEGRAM_EXCLUSIVE_BOT_MENTIONS` (true): a message
    /// that @mentions another bot is not ours. `extra` wins.
    pub exclusive_bot_mentions: bool,
    /// `TELEGRAM_ALLOW_BOTS`, else `allow_bots` (`none`). Environment wins.
    pub allow_bots: AllowBots,
    /// `TELEGRAM_REACTIONS`, else `reactions` (false; any value but `false/0/no` is on, as
    /// in Hermes). Environment wins.
    pub reactions: bool,
    /// `TELEGRAM_HOME_CHANNEL` (+ `_NAME`, `_THREAD_ID`), else `platforms.telegram.home_channel`.
    pub home: Option<HomeChannel>,
    /// `TELEGRAM_WEBHOOK_URL` / `_SECRET` / `_PORT` (environment only); `None`: polling.
    pub webhook: Option<TelegramWebhook>,
    /// `TELEGRAM_REPLY_TO_MODE`, else the block's `reply_to_mode` (or its
    /// `extra.reply_to_mode`), else `platforms.telegram.reply_to_mode` (`first`; YAML
    /// `false` is `off`). Environment wins.
    pub reply_to_mode: ReplyToMode,
    /// `TELEGRAM_PROXY`, else `proxy_url`. Environment wins.
    pub proxy: Option<String>,
    /// `unauthorized_dm_behavior` of the Telegram block or its `extra`, else the
    /// top-level (or `gateway.`) one when `ignore`, else the block's `dm_policy`, else
    /// `ignore` when any allow-list is set, else `pair`.
    pub unauthorized_dm: UnauthorizedDm,
    /// Top-level `group_sessions_per_user`, else `gateway.group_sessions_per_user` (true):
    /// each participant of a group has their own session.
    pub group_sessions_per_user: bool,
    /// Top-level `thread_sessions_per_user`, else `gateway.thread_sessions_per_user`
    /// (false): each participant of a thread has their own session.
    pub thread_sessions_per_user: bool,
    /// `extra.base_url`, else `TELEGRAM_BASE_URL` (a herald variable), else
    /// [`DEFAULT_BASE_URL`]: a local Bot API server.
    pub base_url: String,
    /// `extra.base_file_url`, else the base URL when one is set, else
    /// [`DEFAULT_BASE_FILE_URL`].
    pub base_file_url: String,
    /// Streaming, tool progress and the folders answers may send files from
    /// ([`crate::chat_display`]).
    pub display: crate::chat_display::ChatDisplay,
}

impl std::fmt::Debug for TelegramSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSettings")
            .field("token", &"***")
            .field("allowed_users", &self.allowed_users)
            .field("group_allowed_chats", &self.group_allowed_chats)
            .field("require_mention", &self.require_mention)
            .field("reply_to_mode", &self.reply_to_mode)
            .field("unauthorized_dm", &self.unauthorized_dm)
            .field("webhook", &self.webhook)
            .field("home", &self.home)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

impl TelegramSettings {
    /// Whether any allow-list (`TELEGRAM_ALLOWED_USERS`, `TELEGRAM_GROUP_ALLOWED_USERS`,
    /// `TELEGRAM_GROUP_ALLOWED_CHATS`, `GATEWAY_ALLOWED_USERS`) is set.
    pub fn has_allow_list(&self) -> bool {
        !(self.allowed_users.is_empty()
            && self.group_allowed_users.is_empty()
            && self.group_allowed_chats.is_empty()
            && self.gateway_allowed_users.is_empty())
    }
}

/// What the reader is given.
pub struct TelegramInput<'a> {
    pub doc: &'a Node,
    pub gateway: Option<&'a Node>,
    /// The nested blocks as [`crate::platforms::read_platforms`] read them.
    pub platforms: &'a BTreeMap<String, PlatformSettings>,
    pub env: EnvLookup<'a>,
    /// `.env`, named in messages about variables.
    pub env_file: &'a Path,
}

/// Reads Telegram's settings; `None` when Telegram is off. Problems go to `r`.
pub fn read_telegram_settings(
    r: &mut Reader,
    input: &TelegramInput<'_>,
) -> Option<TelegramSettings> {
    let s = Sources::new(input.doc, input.gateway, input.env, input.env_file);
    let mut t = Telegram { r, s: &s };
    let token = t.token(input.platforms)?;
    let (base_url, base_file_url) = t.base_urls();
    let mut settings = TelegramSettings {
        token,
        allowed_users: t.env_list("TELEGRAM_ALLOWED_USERS", "allow_from"),
        allow_all_users: t.env_yes("TELEGRAM_ALLOW_ALL_USERS"),
        gateway_allowed_users: t.env_only_list("GATEWAY_ALLOWED_USERS"),
        gateway_allow_all_users: t.env_yes("GATEWAY_ALLOW_ALL_USERS"),
        group_allowed_users: t.env_list("TELEGRAM_GROUP_ALLOWED_USERS", "group_allow_from"),
        group_allowed_chats: t.env_list("TELEGRAM_GROUP_ALLOWED_CHATS", "group_allowed_chats"),
        allowed_chats: t.extra_list("allowed_chats", "TELEGRAM_ALLOWED_CHATS"),
        allowed_topics: t.extra_list("allowed_topics", "TELEGRAM_ALLOWED_TOPICS"),
        ignored_threads: t.ignored_threads(),
        require_mention: t.require_mention(),
        mention_patterns: t.mention_patterns(),
        free_response_chats: t.extra_list("free_response_chats", "TELEGRAM_FREE_RESPONSE_CHATS"),
        free_response_topics: t.extra_list("free_response_topics", "TELEGRAM_FREE_RESPONSE_TOPICS"),
        exclusive_bot_mentions: t.extra_flag(
            "exclusive_bot_mentions",
            "TELEGRAM_EXCLUSIVE_BOT_MENTIONS",
            true,
        ),
        allow_bots: t.allow_bots(),
        reactions: t.reactions(),
        home: t.home(),
        webhook: t.webhook(),
        reply_to_mode: t.reply_to_mode(),
        proxy: t.proxy(),
        unauthorized_dm: UnauthorizedDm::Pair,
        group_sessions_per_user: t.session_flag("group_sessions_per_user", true),
        thread_sessions_per_user: t.session_flag("thread_sessions_per_user", false),
        base_url,
        base_file_url,
        display: Default::default(),
    };
    settings.unauthorized_dm = t.unauthorized_dm(settings.has_allow_list());
    Some(settings)
}

/// Checks the keys of the top-level `telegram:` block; the Hermes keys herald does not
/// implement are returned as dotted keys.
pub fn check_top_level_block(r: &mut Reader, doc: &Node) -> Vec<String> {
    let Some(block) = doc
        .get("telegram")
        .filter(|n| matches!(n.value, NodeValue::Map(_)))
    else {
        return Vec::new();
    };
    for key in ["token", "api_key", "home_channel"] {
        if let Some(n) = block.get(key) {
            r.warn(
                Some(n),
                &format!("telegram.{key}"),
                format!("ignored, as Hermes ignores it: `{key}` is read from `platforms.telegram.{key}` (or the TELEGRAM_* variable), not from the top-level `telegram:` block"),
            );
        }
    }
    let known: Vec<&str> = TELEGRAM_KEYS
        .iter()
        .chain(&["enabled", "extra", "token", "api_key", "home_channel"])
        .copied()
        .collect();
    r.check_keys_knowing(block, "telegram", &known, TELEGRAM_HERMES_KEYS)
}

/// The words Hermes's adapter reads as true (`{"true", "1", "yes", "on"}`).
fn truthy(text: &str) -> bool {
    matches!(
        text.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

/// A word Hermes reads as a boolean one way or the other.
fn known_bool_word(text: &str) -> bool {
    matches!(
        text.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on" | "false" | "0" | "no" | "off"
    )
}

/// The reader's state: where to report, where to look.
struct Telegram<'x, 'a> {
    r: &'x mut Reader,
    s: &'x Sources<'a>,
}

impl Telegram<'_, '_> {
    /// The token when Telegram is on: `TELEGRAM_BOT_TOKEN`, else the nested block's
    /// `token` (`gateway/config.py:1721`); off with `enabled: false` in any block (the
    /// top-level block's wins, `gateway/config.py:1512`), or with a placeholder token
    /// (`_validate_gateway_config`, `has_usable_secret`).
    fn token(&mut self, platforms: &BTreeMap<String, PlatformSettings>) -> Option<String> {
        let nested_enabled = platforms.get("telegram").and_then(|p| p.enabled);
        let top_enabled = self
            .s
            .block
            .as_ref()
            .filter(|b| b.key == "telegram")
            .and_then(|b| b.node.get("enabled"))
            .filter(|n| !n.is_null())
            .and_then(|n| self.r.bool(n, "telegram.enabled"));
        if top_enabled.or(nested_enabled) == Some(false) {
            return None;
        }
        let raw = self
            .s
            .env_text("TELEGRAM_BOT_TOKEN")
            .map(|text| Raw::Env {
                var: "TELEGRAM_BOT_TOKEN",
                text,
            })
            .or_else(|| {
                self.s
                    .nested_entry("token")
                    .filter(|f| scalar_text(f.node).is_some_and(|t| !t.is_empty()))
                    .map(Raw::Yaml)
            })?;
        let token = match &raw {
            Raw::Env { text, .. } => text.clone(),
            Raw::Yaml(f) => scalar_text(f.node).unwrap_or_default(),
        };
        if is_placeholder(&token) {
            self.s.warn(
                self.r,
                &raw,
                "the Telegram bot token is a placeholder, so Telegram stays off (as in Hermes): set the token BotFather gave",
            );
            return None;
        }
        Some(token)
    }

    /// A boolean of Hermes's adapter: `true/1/yes/on` is on, any other word off (warned).
    fn flag(&mut self, raw: &Raw<'_>) -> bool {
        match raw {
            Raw::Env { text, .. } => self.word_flag(raw, text),
            Raw::Yaml(f) => match &f.node.value {
                NodeValue::Bool(b) => *b,
                NodeValue::Int(0) => false,
                NodeValue::Int(1) => true,
                NodeValue::Str(text) => self.word_flag(raw, text),
                _ => {
                    let found = f.node.kind();
                    self.s.error(
                        self.r,
                        raw,
                        format!("expected true or false, found {found}"),
                    );
                    false
                }
            },
        }
    }

    fn word_flag(&mut self, raw: &Raw<'_>, text: &str) -> bool {
        if !known_bool_word(text) {
            self.s.warn(
                self.r,
                raw,
                format!("{text:?} is not true or false: read as false, as Hermes reads it"),
            );
        }
        truthy(text)
    }

    /// `extra.<key>`, else the variable, else the block's key, as a boolean.
    fn extra_flag(&mut self, key: &str, var: &'static str, default: bool) -> bool {
        match self.s.extra_env_block(key, var) {
            Some(raw) => self.flag(&raw),
            None => default,
        }
    }

    /// `require_mention` (`adapter.py:7266`): `extra` (the block's key, a nested
    /// `extra.require_mention`, or the top-level key), else the variable, else what the
    /// plugin and the core copy into it (`adapter.py:9310`, `gateway/config.py:1572`).
    fn require_mention(&mut self) -> bool {
        const VAR: &str = "TELEGRAM_REQUIRE_MENTION";
        let s = self.s;
        let raw = s
            .extra_value("require_mention")
            .map(Raw::Yaml)
            .or_else(|| s.env_text(VAR).map(|text| Raw::Env { var: VAR, text }))
            .or_else(|| require_mention_copied(s).map(Raw::Yaml));
        raw.is_some_and(|raw| self.flag(&raw))
    }

    /// Items of a raw list value (a YAML list, a comma string, or a number).
    fn items(&mut self, raw: &Raw<'_>) -> Vec<String> {
        let f = match raw {
            Raw::Env { text, .. } => return split_commas(text),
            Raw::Yaml(f) => f,
        };
        match &f.node.value {
            NodeValue::Str(s) => split_commas(s),
            NodeValue::Int(i) => vec![i.to_string()],
            NodeValue::Null => Vec::new(),
            NodeValue::Seq(items) => self.seq_items(f, items),
            _ => {
                let found = f.node.kind();
                self.r.error(
                    Some(f.node),
                    &f.key,
                    format!("expected a list or a comma-separated string, found {found}"),
                );
                Vec::new()
            }
        }
    }

    fn seq_items(&mut self, f: &Found<'_>, items: &[Node]) -> Vec<String> {
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match scalar_text(item) {
                Some(text) if !text.is_empty() => out.push(text),
                Some(_) => {}
                None => self.r.error(
                    Some(item),
                    &format!("{}[{i}]", f.key),
                    format!(
                        "expected an id (a string or a number), found {}",
                        item.kind()
                    ),
                ),
            }
        }
        out
    }

    /// The variable, else the block's key, as a set (the environment wins).
    fn env_list(&mut self, var: &'static str, key: &str) -> BTreeSet<String> {
        match self.s.env_or_block(var, key) {
            Some(raw) => self.items(&raw).into_iter().collect(),
            None => BTreeSet::new(),
        }
    }

    /// A variable alone, as a set.
    fn env_only_list(&self, var: &str) -> BTreeSet<String> {
        self.s
            .env_text(var)
            .map(|t| split_commas(&t).into_iter().collect())
            .unwrap_or_default()
    }

    /// `extra.<key>`, else the variable, else the block's key, as a set.
    fn extra_list(&mut self, key: &str, var: &'static str) -> BTreeSet<String> {
        match self.s.extra_env_block(key, var) {
            Some(raw) => self.items(&raw).into_iter().collect(),
            None => BTreeSet::new(),
        }
    }

    /// `*_ALLOW_ALL_USERS`: `true/1/yes` (not `on`), environment only
    /// (`gateway/authz_mixin.py:443`, `:529`).
    fn env_yes(&self, var: &str) -> bool {
        self.s
            .env_text(var)
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes"))
    }

    /// `ignored_threads` (`adapter.py:7398`): numbers only, others skipped with a warning.
    fn ignored_threads(&mut self) -> BTreeSet<i64> {
        let Some(raw) = self
            .s
            .extra_env_block("ignored_threads", "TELEGRAM_IGNORED_THREADS")
        else {
            return BTreeSet::new();
        };
        let mut out = BTreeSet::new();
        for item in self.items(&raw) {
            match item.parse::<i64>() {
                Ok(id) => {
                    out.insert(id);
                }
                Err(_) => self.s.warn(
                    self.r,
                    &raw,
                    format!("{item:?} is not a thread id (a number): skipped, as Hermes skips it"),
                ),
            }
        }
        out
    }

    /// `mention_patterns` (`adapter.py:7419`).
    fn mention_patterns(&mut self) -> Vec<String> {
        let Some(raw) = self
            .s
            .extra_env_block("mention_patterns", "TELEGRAM_MENTION_PATTERNS")
        else {
            return Vec::new();
        };
        let patterns = match &raw {
            Raw::Env { text, .. } => env_patterns(text),
            Raw::Yaml(f) => Some(match &f.node.value {
                NodeValue::Seq(items) => items.iter().map(Node::to_json).collect(),
                other => vec![Node::at(other.clone(), 0, 0).to_json()],
            }),
        };
        let Some(patterns) = patterns.filter(|p| is_pattern_list(&raw, p)) else {
            self.s.warn(
                self.r,
                &raw,
                "mention patterns must be a list of regexes or one regex: none are used, as in Hermes",
            );
            return Vec::new();
        };
        self.compiled(&raw, patterns)
    }

    /// The patterns that are strings and compile (case-insensitive); the others warned.
    fn compiled(&mut self, raw: &Raw<'_>, patterns: Vec<serde_json::Value>) -> Vec<String> {
        let mut out = Vec::new();
        for p in patterns {
            let serde_json::Value::String(p) = p else {
                continue;
            };
            if p.trim().is_empty() {
                continue;
            }
            match regex::RegexBuilder::new(&p).case_insensitive(true).build() {
                Ok(_) => out.push(p),
                Err(e) => self.s.warn(
                    self.r,
                    raw,
                    format!("mention pattern {p:?} does not compile, skipped: {e}"),
                ),
            }
        }
        out
    }

    /// `TELEGRAM_ALLOW_BOTS`, else `allow_bots` (`gateway/authz_mixin.py:374`).
    fn allow_bots(&mut self) -> AllowBots {
        let Some(raw) = self.s.env_or_block("TELEGRAM_ALLOW_BOTS", "allow_bots") else {
            return AllowBots::None;
        };
        let Some(word) = self.word(&raw) else {
            return AllowBots::None;
        };
        match word.as_str() {
            "mentions" => AllowBots::Mentions,
            "all" => AllowBots::All,
            "none" | "false" => AllowBots::None,
            _ => {
                self.s.warn(
                    self.r,
                    &raw,
                    format!("{word:?} is not none, mentions or all: read as none, as in Hermes"),
                );
                AllowBots::None
            }
        }
    }

    /// A raw value as the lower-case word Hermes compares (`str(value).lower()`).
    fn word(&mut self, raw: &Raw<'_>) -> Option<String> {
        let text = match raw {
            Raw::Env { text, .. } => text.clone(),
            Raw::Yaml(f) => match &f.node.value {
                NodeValue::Str(s) => s.clone(),
                NodeValue::Bool(b) => b.to_string(),
                NodeValue::Int(i) => i.to_string(),
                _ => {
                    let found = f.node.kind();
                    self.r.error(
                        Some(f.node),
                        &f.key,
                        format!("expected a word, found {found}"),
                    );
                    return None;
                }
            },
        };
        Some(text.trim().to_ascii_lowercase())
    }

    /// `TELEGRAM_REACTIONS`, else `reactions` (`adapter.py:9107`): on unless
    /// `false/0/no`.
    fn reactions(&mut self) -> bool {
        let Some(raw) = self.s.env_or_block("TELEGRAM_REACTIONS", "reactions") else {
            return false;
        };
        let Some(word) = self.word(&raw) else {
            return false;
        };
        let on = !matches!(word.as_str(), "false" | "0" | "no");
        if on && !matches!(word.as_str(), "true" | "1" | "yes" | "on") {
            self.s.warn(
                self.r,
                &raw,
                format!(
                    "{word:?} turns reactions on, as in Hermes (only false, 0 or no turn them off)"
                ),
            );
        }
        on
    }

    /// `TELEGRAM_PROXY`, else `proxy_url` (`adapter.py:9350`, `:3520`).
    fn proxy(&mut self) -> Option<String> {
        let raw = self.s.env_or_block("TELEGRAM_PROXY", "proxy_url")?;
        match &raw {
            Raw::Env { text, .. } => Some(text.clone()),
            Raw::Yaml(f) => self
                .r
                .string(f.node, &f.key)
                .flatten()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty()),
        }
    }
}

/// What Hermes copies into an unset `TELEGRAM_REQUIRE_MENTION`: the block's key (when
/// written, even `null`), else the top-level one; then the core's copy of the top-level
/// key when `telegram:` has none.
fn require_mention_copied<'a>(s: &Sources<'a>) -> Option<Found<'a>> {
    let top = s.top_level("require_mention");
    let from_plugin = match s.block_entry("require_mention") {
        Some(f) => Some(f).filter(|f| !f.node.is_null()),
        None => top.clone(),
    };
    let top_section_has = s
        .doc
        .get("telegram")
        .and_then(|t| t.get("require_mention"))
        .is_some();
    from_plugin.or(if top_section_has { None } else { top })
}

/// `TELEGRAM_MENTION_PATTERNS` as Hermes parses it: JSON, else one pattern per line, else
/// comma-separated. `None`: JSON that is neither a list nor a string nor null.
fn env_patterns(text: &str) -> Option<Vec<serde_json::Value>> {
    use serde_json::Value;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Array(items)) => Some(items),
        Ok(Value::String(s)) => Some(vec![Value::String(s)]),
        Ok(Value::Null) => Some(Vec::new()),
        Ok(_) => None,
        Err(_) => {
            let mut items: Vec<String> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect();
            if items.is_empty() {
                items = split_commas(text);
            }
            Some(items.into_iter().map(Value::String).collect())
        }
    }
}

/// Whether a YAML value is one Hermes takes as patterns (a list, or one string).
fn is_pattern_list(raw: &Raw<'_>, patterns: &[serde_json::Value]) -> bool {
    match raw {
        Raw::Env { .. } => true,
        Raw::Yaml(f) => {
            matches!(f.node.value, NodeValue::Seq(_))
                || patterns.iter().all(serde_json::Value::is_string)
        }
    }
}

/// Hermes's placeholder secrets (`hermes_cli/auth.py` `_PLACEHOLDER_SECRET_VALUES`), and
/// anything shorter than 4 characters.
fn is_placeholder(token: &str) -> bool {
    const PLACEHOLDERS: &[&str] = &[
        "*",
        "**",
        "***",
        "changeme",
        "your_api_key",
        "your_api_key_here",
        "your-api-key",
        "placeholder",
        "example",
        "dummy",
        "null",
        "none",
    ];
    let token = token.trim();
    token.chars().count() < 4 || PLACEHOLDERS.contains(&token.to_ascii_lowercase().as_str())
}

#[path = "telegram_gateway.rs"]
mod gateway;

#[cfg(test)]
#[path = "telegram_settings_tests.rs"]
mod tests;

//! The Telegram settings Hermes's gateway core decides rather than the adapter: the home
//! channel, webhook mode, reply threading, unknown users' DMs, session sharing and the
//! Bot API's address.

use super::{
    DEFAULT_BASE_FILE_URL, DEFAULT_BASE_URL, DEFAULT_HOME_NAME, DEFAULT_WEBHOOK_PORT, HomeChannel,
    ReplyToMode, Telegram, TelegramWebhook, UnauthorizedDm, known_bool_word, truthy,
};
use crate::node::NodeValue;
use crate::telegram_sources::{Found, Raw, Sources, scalar_text};

impl Telegram<'_, '_> {
    /// `TELEGRAM_HOME_CHANNEL` with `_NAME` ("Home") and `_THREAD_ID`
    /// (`gateway/config.py:1741`), else the nested blocks' `home_channel`
    /// (`HomeChannel.from_dict`, `gateway/config.py:446`).
    pub(super) fn home(&mut self) -> Option<HomeChannel> {
        if let Some(chat_id) = self.s.env_text("TELEGRAM_HOME_CHANNEL") {
            return Some(HomeChannel {
                chat_id,
                name: self
                    .s
                    .env_text("TELEGRAM_HOME_CHANNEL_NAME")
                    .unwrap_or_else(|| DEFAULT_HOME_NAME.to_owned()),
                thread_id: self.s.env_text("TELEGRAM_HOME_CHANNEL_THREAD_ID"),
            });
        }
        let f = self
            .s
            .nested_entry("home_channel")
            .filter(|f| !f.node.is_null())?;
        match &f.node.value {
            NodeValue::Map(_) => self.home_mapping(&f),
            // A bare chat id: herald's own shorthand (`platforms.rs`); Hermes ignores it.
            NodeValue::Str(_) | NodeValue::Int(_) => scalar_text(f.node)
                .filter(|c| !c.is_empty())
                .map(|chat_id| HomeChannel {
                    chat_id,
                    name: DEFAULT_HOME_NAME.to_owned(),
                    thread_id: None,
                }),
            // `read_platforms` reports other types.
            _ => None,
        }
    }

    fn home_mapping(&mut self, f: &Found<'_>) -> Option<HomeChannel> {
        let chat_id = f
            .node
            .get("chat_id")
            .and_then(scalar_text)
            .filter(|c| !c.is_empty());
        let Some(chat_id) = chat_id else {
            self.r.warn(
                Some(f.node),
                &f.key,
                "a home channel needs `chat_id` (Hermes does not load without it): no home channel",
            );
            return None;
        };
        let name = f
            .node
            .get("name")
            .and_then(scalar_text)
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| DEFAULT_HOME_NAME.to_owned());
        let thread_id = f
            .node
            .get("thread_id")
            .and_then(scalar_text)
            .filter(|t| !t.is_empty() && t != "0");
        Some(HomeChannel {
            chat_id,
            name,
            thread_id,
        })
    }

    /// `TELEGRAM_WEBHOOK_URL`, `_SECRET`, `_PORT` (`adapter.py:3658`): a URL without a
    /// secret is refused, as Hermes refuses to start the webhook (GHSA-3vpc-7q5r-276h).
    pub(super) fn webhook(&mut self) -> Option<TelegramWebhook> {
        const URL: &str = "TELEGRAM_WEBHOOK_URL";
        let url = self.s.env_text(URL)?;
        let Some(secret) = self.s.env_text("TELEGRAM_WEBHOOK_SECRET") else {
            let raw = Raw::Env {
                var: URL,
                text: url,
            };
            self.s.error(
                self.r,
                &raw,
                format!(
                    "TELEGRAM_WEBHOOK_SECRET is required when TELEGRAM_WEBHOOK_URL is set: without it the webhook accepts forged updates from anyone who can reach it (GHSA-3vpc-7q5r-276h); Hermes refuses to start it too. Generate one with `openssl rand -hex 32`, set TELEGRAM_WEBHOOK_SECRET in {}, and give it to setWebhook as secret_token",
                    self.s.env_file.display()
                ),
            );
            return None;
        };
        Some(TelegramWebhook {
            url,
            secret,
            port: self.webhook_port(),
        })
    }

    /// `TELEGRAM_WEBHOOK_PORT` (`env_int`, default 8443 also for a non-number).
    fn webhook_port(&mut self) -> u16 {
        const VAR: &str = "TELEGRAM_WEBHOOK_PORT";
        let Some(text) = self.s.env_text(VAR) else {
            return DEFAULT_WEBHOOK_PORT;
        };
        let raw = Raw::Env {
            var: VAR,
            text: text.clone(),
        };
        match text.parse::<i64>().map(u16::try_from) {
            Ok(Ok(port)) => port,
            Ok(Err(_)) => {
                self.s.error(
                    self.r,
                    &raw,
                    format!("{text} is not a port: use a number from 0 to 65535"),
                );
                DEFAULT_WEBHOOK_PORT
            }
            Err(_) => {
                self.s.warn(
                    self.r,
                    &raw,
                    format!(
                        "{text:?} is not a number: port {DEFAULT_WEBHOOK_PORT} is used, as in Hermes"
                    ),
                );
                DEFAULT_WEBHOOK_PORT
            }
        }
    }

    /// `TELEGRAM_REPLY_TO_MODE`, else what the plugin copies into it (the block's
    /// `reply_to_mode`, else its `extra.reply_to_mode`; YAML `false` is `off`,
    /// `adapter.py:9352`), when it is `off`, `first` or `all` (`gateway/config.py:1727`);
    /// else the nested blocks' `reply_to_mode` (`PlatformConfig`, `or 'first'`).
    pub(super) fn reply_to_mode(&mut self) -> ReplyToMode {
        const VAR: &str = "TELEGRAM_REPLY_TO_MODE";
        let s = self.s;
        let raw = s
            .env_text(VAR)
            .map(|text| Raw::Env { var: VAR, text })
            .or_else(|| reply_to_mode_copied(s).map(Raw::Yaml));
        if let Some(mode) = raw.and_then(|raw| self.mode(&raw)) {
            return mode;
        }
        let nested = self.s.nested_entry("reply_to_mode");
        match nested.as_ref().map(|f| &f.node.value) {
            Some(NodeValue::Str(s)) if s == "off" => ReplyToMode::Off,
            Some(NodeValue::Str(s)) if s == "all" => ReplyToMode::All,
            _ => ReplyToMode::First,
        }
    }

    /// A reply mode word; `None` (warned) when it is not one.
    fn mode(&mut self, raw: &Raw<'_>) -> Option<ReplyToMode> {
        let word = match raw {
            Raw::Yaml(f) if f.node.value == NodeValue::Bool(false) => "off".to_owned(),
            _ => self.word(raw)?,
        };
        match word.as_str() {
            "off" => Some(ReplyToMode::Off),
            "first" => Some(ReplyToMode::First),
            "all" => Some(ReplyToMode::All),
            _ => {
                self.s.warn(
                    self.r,
                    raw,
                    format!("{word:?} is not off, first or all: ignored, as Hermes ignores it"),
                );
                None
            }
        }
    }

    /// `GatewayRunner._get_unauthorized_dm_behavior` (`gateway/authz_mixin.py:622`):
    /// the Telegram block's (or its `extra`'s) value; else the gateway-wide one when it is
    /// `ignore`; else the block's `dm_policy`; else `ignore` with any allow-list, `pair`
    /// without.
    pub(super) fn unauthorized_dm(&mut self, has_allow_list: bool) -> UnauthorizedDm {
        let global = match self.s.top_or_gateway("unauthorized_dm_behavior") {
            Some(f) => self.dm_behavior(&f, UnauthorizedDm::Pair),
            None => UnauthorizedDm::Pair,
        };
        if let Some(f) = self.s.extra.get("unauthorized_dm_behavior").cloned() {
            return self.dm_behavior(&f, global);
        }
        if global == UnauthorizedDm::Ignore {
            return global;
        }
        let policy = self
            .s
            .extra_value("dm_policy")
            .and_then(|f| scalar_text(f.node))
            .map(|p| p.to_ascii_lowercase());
        match policy.as_deref() {
            Some("pairing") => UnauthorizedDm::Pair,
            Some("allowlist" | "disabled") => UnauthorizedDm::Ignore,
            _ if has_allow_list => UnauthorizedDm::Ignore,
            _ => UnauthorizedDm::Pair,
        }
    }

    /// `pair` or `ignore` (any case); anything else is `default` (warned unless `null`).
    fn dm_behavior(&mut self, f: &Found<'_>, default: UnauthorizedDm) -> UnauthorizedDm {
        let word = match &f.node.value {
            NodeValue::Null => return default,
            NodeValue::Str(s) => s.trim().to_ascii_lowercase(),
            _ => String::new(),
        };
        match word.as_str() {
            "pair" => UnauthorizedDm::Pair,
            "ignore" => UnauthorizedDm::Ignore,
            _ => {
                let read_as = match default {
                    UnauthorizedDm::Pair => "pair",
                    UnauthorizedDm::Ignore => "ignore",
                };
                self.r.warn(
                    Some(f.node),
                    &f.key,
                    format!("expected pair or ignore: read as {read_as}, as in Hermes"),
                );
                default
            }
        }
    }

    /// A gateway-wide session flag: the top-level key if written, else `gateway.<key>`
    /// (`gateway/config.py:1275`), as `_coerce_bool` reads it (other words: `default`).
    pub(super) fn session_flag(&mut self, key: &str, default: bool) -> bool {
        let Some(f) = self.s.top_or_gateway(key) else {
            return default;
        };
        match &f.node.value {
            NodeValue::Null => default,
            NodeValue::Bool(b) => *b,
            NodeValue::Int(i) => *i != 0,
            NodeValue::Float(x) => *x != 0.0,
            NodeValue::Str(s) if known_bool_word(s) => truthy(s),
            NodeValue::Str(s) => {
                self.r.warn(
                    Some(f.node),
                    &f.key,
                    format!("{s:?} is not true or false: read as {default}, as in Hermes"),
                );
                default
            }
            NodeValue::Seq(_) | NodeValue::Map(_) => {
                let found = f.node.kind();
                self.r.error(
                    Some(f.node),
                    &f.key,
                    format!("expected true or false, found {found}"),
                );
                default
            }
        }
    }

    /// `extra.base_url`, else `TELEGRAM_BASE_URL`, else the Bot API; `extra.base_file_url`,
    /// else the base URL when one is set, else the Bot API's files (`adapter.py:3426`).
    pub(super) fn base_urls(&mut self) -> (String, String) {
        let base = self
            .extra_text("base_url")
            .or_else(|| self.s.env_text("TELEGRAM_BASE_URL"));
        let file = self
            .extra_text("base_file_url")
            .or_else(|| base.clone())
            .unwrap_or_else(|| DEFAULT_BASE_FILE_URL.to_owned());
        (base.unwrap_or_else(|| DEFAULT_BASE_URL.to_owned()), file)
    }

    /// `extra.<key>` as a non-empty string.
    fn extra_text(&mut self, key: &str) -> Option<String> {
        let f = self.s.extra_value(key)?;
        self.r
            .string(f.node, &f.key)
            .flatten()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    }
}

/// What the plugin copies into an unset `TELEGRAM_REPLY_TO_MODE`: the block's
/// `reply_to_mode` when written (even `null`), else its `extra.reply_to_mode`.
fn reply_to_mode_copied<'a>(s: &Sources<'a>) -> Option<Found<'a>> {
    match s.block_entry("reply_to_mode") {
        Some(f) => Some(f),
        None => s.block_entry("extra").and_then(|e| {
            e.node.get("reply_to_mode").map(|node| Found {
                node,
                key: format!("{}.reply_to_mode", e.key),
            })
        }),
    }
    .filter(|f| !f.node.is_null())
}

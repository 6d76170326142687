//! Where Hermes 0.19.0 finds a Telegram setting, modelled on `gateway/config.py`
//! `load_gateway_config` and the Telegram plugin's `_apply_yaml_config`
//! (`plugins/platforms/telegram/adapter.py:9295`):
//!
//! - **the block** Hermes bridges from: the top-level `telegram:` mapping, else
//!   `gateway.platforms.telegram`, else `platforms.telegram` (`gateway/config.py:1427`,
//!   `:1541`);
//! - **the nested blocks** `gateway.platforms.telegram` then `platforms.telegram`, merged
//!   key by key with the second winning (`_merge_platform_map`, `gateway/config.py:1369`):
//!   `token`, `enabled`, `home_channel`, `reply_to_mode` come from them only;
//! - **`extra`**, the adapter's `config.extra`, built in Hermes's order: the nested blocks'
//!   `extra:` maps; the block's shared keys (`gateway/config.py:1437-1524`, they
//!   overwrite); the plugin's extras (`free_response_topics`, ..., then the block's own
//!   `extra:` without the generic keys, `adapter.py:9375-9392`, they overwrite again); then
//!   a top-level `require_mention` when `telegram:` has none (`gateway/config.py:1572`);
//! - **the environment**, which the plugin fills from the block only where a variable is
//!   unset or empty (`adapter.py:9311-9374`): so "environment, else the block" for the
//!   keys read from the environment.

use crate::config::EnvLookup;
use crate::error::Problem;
use crate::node::{Node, NodeValue};
use crate::reader::Reader;
use std::collections::BTreeMap;
use std::path::Path;

/// Keys of the block Hermes's shared-key loop copies into `extra` (those herald reads).
const BRIDGED: &[&str] = &[
    "unauthorized_dm_behavior",
    "require_mention",
    "allowed_chats",
    "group_allowed_chats",
    "allowed_topics",
    "mention_patterns",
    "exclusive_bot_mentions",
    "dm_policy",
    "allow_from",
    "group_allow_from",
];

/// Keys of the block the plugin returns as extras (`adapter.py:9302`, `:9375`).
const SEEDED: &[&str] = &[
    "disable_topic_auto_rename",
    "guest_mode",
    "disable_link_previews",
    "observe_unmentioned_group_messages",
    "free_response_topics",
];

/// Keys of the block's `extra:` the plugin does not pass on (`_GENERIC_MERGE_KEYS`).
const GENERIC: &[&str] = &[
    "reply_prefix",
    "reply_in_thread",
    "reply_to_mode",
    "unauthorized_dm_behavior",
    "notice_delivery",
    "require_mention",
    "channel_skill_bindings",
    "channel_prompts",
    "gateway_restart_notification",
    "allow_from",
    "allow_admin_from",
    "dm_policy",
    "group_policy",
];

/// A value written in config.yaml and its dotted key.
#[derive(Debug, Clone)]
pub(crate) struct Found<'a> {
    pub node: &'a Node,
    pub key: String,
}

impl<'a> Found<'a> {
    fn child(&self, key: &str) -> Option<Found<'a>> {
        self.node.get(key).map(|node| Found {
            node,
            key: format!("{}.{key}", self.key),
        })
    }
}

/// One setting's raw value: a variable's text, or a value of config.yaml.
#[derive(Debug, Clone)]
pub(crate) enum Raw<'a> {
    Env { var: &'static str, text: String },
    Yaml(Found<'a>),
}

/// The places Hermes reads Telegram settings from.
pub(crate) struct Sources<'a> {
    pub doc: &'a Node,
    pub gateway: Option<&'a Node>,
    /// The block Hermes bridges from (see the module's docs).
    pub block: Option<Found<'a>>,
    /// `gateway.platforms.telegram` then `platforms.telegram` (the later wins).
    pub nested: Vec<Found<'a>>,
    /// The adapter's `config.extra`, key by key (`null` values kept: presence matters).
    pub extra: BTreeMap<String, Found<'a>>,
    pub env: EnvLookup<'a>,
    /// `.env`, to name a variable's line in messages.
    pub env_file: &'a Path,
}

fn mapping<'a>(node: Option<&'a Node>, key: &str) -> Option<Found<'a>> {
    node.filter(|n| matches!(n.value, NodeValue::Map(_)))
        .map(|node| Found {
            node,
            key: key.to_owned(),
        })
}

impl<'a> Sources<'a> {
    pub fn new(
        doc: &'a Node,
        gateway: Option<&'a Node>,
        env: EnvLookup<'a>,
        env_file: &'a Path,
    ) -> Self {
        let top = mapping(doc.get("telegram"), "telegram");
        let in_gateway = mapping(
            gateway
                .and_then(|g| g.get("platforms"))
                .and_then(|p| p.get("telegram")),
            "gateway.platforms.telegram",
        );
        let in_platforms = mapping(
            doc.get("platforms").and_then(|p| p.get("telegram")),
            "platforms.telegram",
        );
        let nested: Vec<Found<'a>> = [in_gateway.clone(), in_platforms.clone()]
            .into_iter()
            .flatten()
            .collect();
        let mut sources = Sources {
            doc,
            gateway,
            block: top.or(in_gateway).or(in_platforms),
            nested,
            extra: BTreeMap::new(),
            env,
            env_file,
        };
        sources.extra = sources.build_extra();
        sources
    }

    /// `config.extra` in Hermes's order (see the module's docs).
    fn build_extra(&self) -> BTreeMap<String, Found<'a>> {
        let mut extra = BTreeMap::new();
        for block in &self.nested {
            add_extra_map(&mut extra, block, |_| true, true);
        }
        if let Some(block) = &self.block {
            for key in BRIDGED {
                if let Some(found) = block.child(key) {
                    extra.insert((*key).to_owned(), found);
                }
            }
            let mut seeded = BTreeMap::new();
            for key in SEEDED {
                if let Some(found) = block.child(key) {
                    seeded.insert((*key).to_owned(), found);
                }
            }
            add_extra_map(&mut seeded, block, |k| !GENERIC.contains(&k), false);
            extra.extend(seeded);
        }
        if let Some(top) = self.top_level("require_mention")
            && self
                .doc
                .get("telegram")
                .and_then(|t| t.get("require_mention"))
                .is_none()
        {
            extra.entry("require_mention".to_owned()).or_insert(top);
        }
        extra
    }

    /// A top-level key's value, unless missing or `null`.
    pub fn top_level(&self, key: &str) -> Option<Found<'a>> {
        self.doc
            .get(key)
            .filter(|n| !n.is_null())
            .map(|node| Found {
                node,
                key: key.to_owned(),
            })
    }

    /// A top-level key if written (even `null`), else `gateway.<key>`: Hermes's
    /// "top level wins, nested `gateway:` falls back" for gateway-wide settings.
    pub fn top_or_gateway(&self, key: &str) -> Option<Found<'a>> {
        if let Some(node) = self.doc.get(key) {
            return Some(Found {
                node,
                key: key.to_owned(),
            });
        }
        self.gateway.and_then(|g| g.get(key)).map(|node| Found {
            node,
            key: format!("gateway.{key}"),
        })
    }

    /// The block's `key` as written (even `null`).
    pub fn block_entry(&self, key: &str) -> Option<Found<'a>> {
        self.block.as_ref().and_then(|b| b.child(key))
    }

    /// The block's `key`, unless missing or `null`.
    pub fn block_value(&self, key: &str) -> Option<Found<'a>> {
        self.block_entry(key).filter(|f| !f.node.is_null())
    }

    /// `extra.<key>`, unless missing or `null`.
    pub fn extra_value(&self, key: &str) -> Option<Found<'a>> {
        self.extra.get(key).filter(|f| !f.node.is_null()).cloned()
    }

    /// The nested blocks' `key` as merged (the later block's entry wins, even `null`).
    pub fn nested_entry(&self, key: &str) -> Option<Found<'a>> {
        self.nested.iter().rev().find_map(|b| b.child(key))
    }

    /// A variable's value, trimmed, unless unset or empty.
    pub fn env_text(&self, var: &str) -> Option<String> {
        (self.env)(var)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    /// The variable, else the block's key (the plugin fills only unset variables).
    pub fn env_or_block(&self, var: &'static str, key: &str) -> Option<Raw<'a>> {
        self.env_text(var)
            .map(|text| Raw::Env { var, text })
            .or_else(|| self.block_value(key).map(Raw::Yaml))
    }

    /// The adapter's order: `extra.<key>`, else the variable, else the block's key.
    pub fn extra_env_block(&self, key: &str, var: &'static str) -> Option<Raw<'a>> {
        self.extra_value(key)
            .map(Raw::Yaml)
            .or_else(|| self.env_or_block(var, key))
    }

    /// Where a raw value is, for messages.
    pub fn place(&self, r: &Reader, raw: &Raw<'_>) -> crate::error::Place {
        match raw {
            Raw::Env { var, .. } => crate::start_guard::env_place(self.env_file, var),
            Raw::Yaml(found) => r.place(Some(found.node), &found.key),
        }
    }

    /// Records a warning about a raw value.
    pub fn warn(&self, r: &mut Reader, raw: &Raw<'_>, message: impl Into<String>) {
        let place = self.place(r, raw);
        r.warnings.push(Problem {
            place,
            message: message.into(),
        });
    }

    /// Records an error about a raw value.
    pub fn error(&self, r: &mut Reader, raw: &Raw<'_>, message: impl Into<String>) {
        let place = self.place(r, raw);
        r.errors.push(Problem {
            place,
            message: message.into(),
        });
    }
}

/// Adds the entries of `block.extra` passing `keep`; `overwrite` false keeps what is
/// there (Python's `setdefault`).
fn add_extra_map<'a>(
    into: &mut BTreeMap<String, Found<'a>>,
    block: &Found<'a>,
    keep: impl Fn(&str) -> bool,
    overwrite: bool,
) {
    let Some(extra) = block.child("extra") else {
        return;
    };
    for (key, _) in extra.node.entries() {
        if !keep(key) || (!overwrite && into.contains_key(key)) {
            continue;
        }
        if let Some(found) = extra.child(key) {
            into.insert(key.clone(), found);
        }
    }
}

/// The text of a scalar as Python's `str()` gives it for ids: strings (trimmed) and
/// integers.
pub(crate) fn scalar_text(node: &Node) -> Option<String> {
    match &node.value {
        NodeValue::Str(s) => Some(s.trim().to_owned()),
        NodeValue::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// Comma-separated items, trimmed, empty ones dropped.
pub(crate) fn split_commas(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

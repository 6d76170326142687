//! Where Hermes 0.19.0's Slack and Discord adapters find a setting: the adapter's
//! `config.extra` (the `platforms.<name>` / `gateway.platforms.<name>` blocks' `extra:`
//! maps), the environment (with `.env` merged into it), and the top-level `<name>:`
//! block, which Hermes copies into unset variables.

use crate::config::EnvLookup;
use crate::node::Node;
use crate::platforms::PlatformSettings;
use crate::telegram_settings::{HomeChannel, UnauthorizedDm};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// What a chat platform's settings are read from.
pub struct ChatInput<'a> {
    pub doc: &'a Node,
    pub gateway: Option<&'a Node>,
    pub platforms: &'a BTreeMap<String, PlatformSettings>,
    pub env: EnvLookup<'a>,
}

/// `true/1/yes/on`.
pub(crate) fn yes(v: &str) -> bool {
    matches!(
        v.trim().to_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

/// `false/0/no/off`.
pub(crate) fn no(v: &str) -> bool {
    matches!(
        v.trim().to_lowercase().as_str(),
        "false" | "0" | "no" | "off"
    )
}

/// A YAML value as Hermes's `str(v).lower()` would give it (lists joined by `,`).
pub(crate) fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(text_of)
                .collect::<Vec<_>>()
                .join(","),
        ),
        Value::Object(_) => None,
    }
}

pub(crate) fn split(text: &str) -> BTreeSet<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The places a chat platform's setting is found.
pub(crate) struct Sources<'a> {
    env: EnvLookup<'a>,
    /// The top-level `<platform>:` block, as JSON.
    block: Option<Value>,
    pub(crate) nested: Option<&'a PlatformSettings>,
    doc: &'a Node,
    gateway: Option<&'a Node>,
}

impl<'a> Sources<'a> {
    pub(crate) fn new(input: &ChatInput<'a>, platform: &str) -> Sources<'a> {
        Sources {
            env: input.env,
            block: input
                .doc
                .get(platform)
                .map(Node::to_json)
                .filter(Value::is_object),
            nested: input.platforms.get(platform),
            doc: input.doc,
            gateway: input.gateway,
        }
    }
    pub(crate) fn env(&self, var: &str) -> Option<String> {
        (self.env)(var).filter(|v| !v.trim().is_empty())
    }
    pub(crate) fn env_list(&self, var: &str) -> BTreeSet<String> {
        self.env(var).map(|v| split(&v)).unwrap_or_default()
    }
    pub(crate) fn extra_text(&self, key: &str) -> Option<String> {
        self.nested.and_then(|p| p.extra.get(key)).and_then(text_of)
    }
    pub(crate) fn block_text(&self, key: &str) -> Option<String> {
        self.block
            .as_ref()
            .and_then(|b| b.get(key))
            .and_then(text_of)
    }
    pub(crate) fn block_value(&self, key: &str) -> Option<&Value> {
        self.block.as_ref().and_then(|b| b.get(key))
    }
    /// The variable, else the top-level block (which Hermes copies into it).
    pub(crate) fn flag_env_first(&self, var: &str, key: &str) -> Option<String> {
        self.env(var).or_else(|| self.block_text(key))
    }
    pub(crate) fn block_enabled(&self) -> Option<bool> {
        self.block.as_ref()?.get("enabled")?.as_bool()
    }
    /// `extra`, else the variable, else the top-level block (which Hermes copies into
    /// the unset variable). An empty `var`: no variable.
    pub(crate) fn flag_extra_first(&self, key: &str, var: &str) -> Option<String> {
        self.extra_text(key)
            .or_else(|| (!var.is_empty()).then(|| self.env(var)).flatten())
            .or_else(|| self.block_text(key))
    }
    pub(crate) fn list_extra_first(&self, key: &str, var: &str) -> BTreeSet<String> {
        self.flag_extra_first(key, var)
            .map(|v| split(&v))
            .unwrap_or_default()
    }
    /// The variable, else `extra`, else the block.
    pub(crate) fn list_env_first(&self, var: &str, key: &str) -> BTreeSet<String> {
        self.env(var)
            .or_else(|| self.extra_text(key))
            .or_else(|| self.block_text(key))
            .map(|v| split(&v))
            .unwrap_or_default()
    }
    pub(crate) fn mention_patterns(&self, var: &str) -> Vec<String> {
        let from_yaml = self
            .nested
            .and_then(|p| p.extra.get("mention_patterns"))
            .or_else(|| self.block.as_ref().and_then(|b| b.get("mention_patterns")));
        match from_yaml {
            Some(Value::Array(items)) => items.iter().filter_map(text_of).collect(),
            Some(Value::String(s)) => vec![s.clone()],
            _ => {
                let Some(raw) = self.env(var) else {
                    return Vec::new();
                };
                match serde_json::from_str::<Vec<String>>(&raw) {
                    Ok(list) => list,
                    Err(_) => raw
                        .split(['\n', ','])
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect(),
                }
            }
        }
    }
    /// `<PREFIX>_HOME_CHANNEL` (+ `_NAME`, `_THREAD_ID`), else the nested block's.
    pub(crate) fn home(&self, prefix: &str) -> Option<HomeChannel> {
        let chat_id = self
            .env(&format!("{prefix}_HOME_CHANNEL"))
            .or_else(|| self.nested.and_then(|p| p.home_channel.clone()))?;
        Some(HomeChannel {
            chat_id,
            name: self
                .env(&format!("{prefix}_HOME_CHANNEL_NAME"))
                .unwrap_or_default(),
            thread_id: self.env(&format!("{prefix}_HOME_CHANNEL_THREAD_ID")),
        })
    }
    /// The block's (or `extra`'s) `unauthorized_dm_behavior`, else the top-level or
    /// `gateway.` one, else `ignore` when an allow-list is set, else `pair`.
    pub(crate) fn unauthorized_dm(&self, listed: bool) -> UnauthorizedDm {
        let top = |n: Option<&Node>| {
            n.and_then(|n| n.get("unauthorized_dm_behavior"))
                .and_then(|v| text_of(&v.to_json()))
        };
        let said = self
            .extra_text("unauthorized_dm_behavior")
            .or_else(|| self.block_text("unauthorized_dm_behavior"))
            .or_else(|| top(Some(self.doc)))
            .or_else(|| top(self.gateway));
        match said.as_deref().map(str::trim) {
            Some("pair") => UnauthorizedDm::Pair,
            Some("ignore") => UnauthorizedDm::Ignore,
            _ if listed => UnauthorizedDm::Ignore,
            _ => UnauthorizedDm::Pair,
        }
    }
    /// A top-level key, else `gateway.`'s, else `default`.
    pub(crate) fn session_flag(&self, key: &str, default: bool) -> bool {
        [Some(self.doc), self.gateway]
            .into_iter()
            .flatten()
            .find_map(|n| n.get(key).and_then(|v| v.to_json().as_bool()))
            .unwrap_or(default)
    }
}

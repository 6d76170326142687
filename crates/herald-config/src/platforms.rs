//! Messaging platforms' own blocks (`platforms.<name>`): whether enabled, token, home
//! channel and `extra` (e.g. `base_url`). The delivery targets interpret them together
//! with the environment variables Hermes uses.

use crate::node::{Node, NodeValue};
use crate::reader::Reader;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Keys of a platform block herald reads.
pub const PLATFORM_KEYS: &[&str] = &["enabled", "token", "api_key", "home_channel", "extra"];

/// One platform's settings from config.yaml.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlatformSettings {
    /// `Some(false)` only when config says `enabled: false` explicitly.
    pub enabled: Option<bool>,
    pub token: Option<String>,
    /// `home_channel.chat_id` (or a plain string).
    pub home_channel: Option<String>,
    pub extra: Map<String, Value>,
}

/// Checks a platform block's keys: a Telegram block also has the keys
/// [`crate::telegram_settings`] reads, and the Hermes keys herald does not implement are
/// added to `hermes_only` instead of warned about.
fn check_platform_keys(
    r: &mut Reader,
    name: &str,
    node: &Node,
    key: &str,
    hermes_only: &mut Vec<String>,
) {
    use crate::telegram_settings::{TELEGRAM_HERMES_KEYS, TELEGRAM_KEYS};
    if name != "telegram" {
        r.check_keys(node, key, PLATFORM_KEYS);
        return;
    }
    let known: Vec<&str> = PLATFORM_KEYS.iter().chain(TELEGRAM_KEYS).copied().collect();
    hermes_only.extend(r.check_keys_knowing(node, key, &known, TELEGRAM_HERMES_KEYS));
}

/// Reads every non-webhook platform block (top-level `platforms` over `gateway.platforms`);
/// Hermes keys herald does not implement go to `hermes_only`.
pub fn read_platforms(
    r: &mut Reader,
    sources: &[(&str, Option<&Node>)],
    hermes_only: &mut Vec<String>,
) -> BTreeMap<String, PlatformSettings> {
    let mut out: BTreeMap<String, PlatformSettings> = BTreeMap::new();
    // Lower-priority sources first so the top-level block overwrites key by key.
    for (prefix, platforms) in sources.iter().rev() {
        let Some(platforms) = platforms else { continue };
        for (name, node) in platforms.entries() {
            if name == "webhook" || !matches!(node.value, NodeValue::Map(_)) {
                continue;
            }
            let key = format!("{prefix}.{name}");
            check_platform_keys(r, name, node, &key, hermes_only);
            let entry = out.entry(name.clone()).or_default();
            if let Some(n) = node.get("enabled").filter(|n| !n.is_null()) {
                entry.enabled = r.bool(n, &format!("{key}.enabled"));
            }
            for token_key in ["token", "api_key"] {
                if let Some(n) = node.get(token_key).filter(|n| !n.is_null())
                    && let Some(Some(t)) = r.string(n, &format!("{key}.{token_key}"))
                {
                    entry.token = Some(t);
                }
            }
            if let Some(n) = node.get("home_channel").filter(|n| !n.is_null()) {
                entry.home_channel = match &n.value {
                    NodeValue::Map(_) => n.get("chat_id").map(|c| match c.to_json() {
                        Value::String(s) => s,
                        other => other.to_string(),
                    }),
                    NodeValue::Str(s) => Some(s.clone()),
                    NodeValue::Int(i) => Some(i.to_string()),
                    _ => {
                        r.error(
                            Some(n),
                            &format!("{key}.home_channel"),
                            "expected {chat_id: ...} or a chat id",
                        );
                        None
                    }
                };
            }
            if let Some(n) = node.get("extra").filter(|n| !n.is_null()) {
                match n.to_json() {
                    Value::Object(map) => entry.extra.extend(map),
                    _ => r.error(
                        Some(n),
                        &format!("{key}.extra"),
                        format!("expected a mapping, found {}", n.kind()),
                    ),
                }
            }
        }
    }
    out
}

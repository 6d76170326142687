//! The agent half of `config.yaml`, typed: limits (`agent.*`), the terminal
//! (`terminal.*`), approvals (`approvals.*`, `command_allowlist`), the web tools (`web.*`,
//! `security.allow_private_urls`), skills (`skills.*`) and plugins (`plugins.*`). A value of the wrong type is an
//! error naming file, line, key and fix, like the webhook half. The model blocks
//! (`model`, `providers`, `custom_providers`) are typed in [`crate::model_settings`].

use crate::node::{Node, NodeValue};
use crate::reader::Reader;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Every agent setting herald uses, with Hermes's defaults.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentSettings {
    /// `agent.max_turns`: tool-using steps per turn (`None`: the core's default, 90).
    pub max_turns: Option<u32>,
    /// `agent.api_max_retries`: attempts per provider call (`None`: 3).
    pub api_max_retries: Option<u32>,
    /// `agent.max_tool_calls_per_answer`: tool calls of one model answer that run; the
    /// rest get an error result (`None`: 64). herald's own key.
    pub max_tool_calls_per_answer: Option<usize>,
    /// `agent.disabled_toolsets`: subtracted from every surface's toolsets.
    pub disabled_toolsets: Vec<String>,
    /// `terminal.backend` (`None` or `local`: commands run here).
    pub terminal_backend: Option<String>,
    /// `terminal.cwd`.
    pub terminal_cwd: Option<PathBuf>,
    /// `terminal.timeout` in seconds.
    pub terminal_timeout_secs: Option<u64>,
    /// `approvals.mode` (`manual`, `smart`, `off`).
    pub approvals_mode: Option<String>,
    /// `approvals.deny`: globs refused everywhere, even in yolo.
    pub approvals_deny: Vec<String>,
    /// `approvals.timeout` in seconds.
    pub approvals_timeout_secs: Option<u64>,
    /// `command_allowlist`: commands (or globs) approved for good.
    pub command_allowlist: Vec<String>,
    /// `web.backend`.
    pub web_backend: Option<String>,
    /// `web.searxng_url`.
    pub searxng_url: Option<String>,
    /// `web.allow_private_urls` or `security.allow_private_urls`.
    pub allow_private_urls: bool,
    /// `skills.external_dirs` as written (`~` not yet expanded).
    pub skills_external_dirs: Vec<String>,
    /// `skills.disabled`.
    pub skills_disabled: Vec<String>,
    /// `skills.platform_disabled.<platform>`.
    pub skills_platform_disabled: BTreeMap<String, Vec<String>>,
    /// `plugins.enabled`: the plugins that run (every standalone plugin is opt-in).
    pub plugins_enabled: Vec<String>,
    /// `plugins.disabled`: never run, even when enabled.
    pub plugins_disabled: Vec<String>,
    /// The plugins with `plugins.entries.<id>.allow_tool_override: true`: they may
    /// replace a built-in tool (Hermes's trust gate).
    pub plugins_tool_override: Vec<String>,
    /// `plugins.python`: the interpreter of the Python plugin host (`python3`).
    pub plugins_python: Option<String>,
    /// `plugins.host.callback_timeout` in seconds (30): one plugin callback's own time.
    pub plugins_callback_timeout_secs: Option<u64>,
    /// `plugins.host.startup_timeout` in seconds (60): importing and registering.
    pub plugins_startup_timeout_secs: Option<u64>,
    /// `plugins.host.pre_tool_call_when_down`: `block` (the default) or `allow`.
    pub plugins_pre_tool_call_when_down: Option<String>,
    /// `max_live_sessions`: conversations a front door holds live at once (`None`: 16).
    pub max_live_sessions: Option<usize>,
    /// `display.busy_input_mode`: what a prompt sent while a turn runs does.
    pub busy_input_mode: crate::default_config::BusyInputMode,
}

/// Reads the agent settings from the top-level document; problems go to `r`.
pub fn read_agent_settings(r: &mut Reader, doc: &Node) -> AgentSettings {
    let at = |section: &str, key: &str| {
        doc.get(section)
            .and_then(|s| s.get(key))
            .filter(|n| !n.is_null())
    };
    let int = |r: &mut Reader, section: &str, key: &str, min: i128, max: i128| {
        at(section, key).and_then(|n| r.int(n, &format!("{section}.{key}"), min, max))
    };
    let text = |r: &mut Reader, section: &str, key: &str| {
        at(section, key).and_then(|n| r.string(n, &format!("{section}.{key}")).flatten())
    };
    let list = |r: &mut Reader, section: &str, key: &str| {
        at(section, key)
            .and_then(|n| r.string_list(n, &format!("{section}.{key}")))
            .unwrap_or_default()
    };
    let flag = |r: &mut Reader, section: &str, key: &str| {
        at(section, key)
            .and_then(|n| r.bool(n, &format!("{section}.{key}")))
            .unwrap_or(false)
    };
    let as_u32 = |v: i128| u32::try_from(v).unwrap_or(u32::MAX);
    let as_u64 = |v: i128| u64::try_from(v).unwrap_or(u64::MAX);
    AgentSettings {
        max_turns: int(r, "agent", "max_turns", 1, i128::from(u32::MAX)).map(as_u32),
        api_max_retries: int(r, "agent", "api_max_retries", 1, 100).map(as_u32),
        max_tool_calls_per_answer: int(r, "agent", "max_tool_calls_per_answer", 1, 4096)
            .and_then(|v| usize::try_from(v).ok()),
        disabled_toolsets: list(r, "agent", "disabled_toolsets"),
        terminal_backend: text(r, "terminal", "backend"),
        terminal_cwd: text(r, "terminal", "cwd").map(PathBuf::from),
        terminal_timeout_secs: int(r, "terminal", "timeout", 1, 86_400).map(as_u64),
        approvals_mode: text(r, "approvals", "mode"),
        approvals_deny: list(r, "approvals", "deny"),
        approvals_timeout_secs: int(r, "approvals", "timeout", 1, 86_400).map(as_u64),
        command_allowlist: doc
            .get("command_allowlist")
            .filter(|n| !n.is_null())
            .and_then(|n| r.string_list(n, "command_allowlist"))
            .unwrap_or_default(),
        web_backend: text(r, "web", "backend").map(|b| b.to_ascii_lowercase()),
        searxng_url: text(r, "web", "searxng_url").filter(|u| !u.is_empty()),
        allow_private_urls: flag(r, "web", "allow_private_urls")
            | flag(r, "security", "allow_private_urls"),
        skills_external_dirs: list(r, "skills", "external_dirs"),
        skills_disabled: list(r, "skills", "disabled"),
        skills_platform_disabled: platform_lists(r, at("skills", "platform_disabled")),
        plugins_enabled: list(r, "plugins", "enabled"),
        plugins_disabled: list(r, "plugins", "disabled"),
        plugins_python: text(r, "plugins", "python").filter(|p| !p.is_empty()),
        plugins_tool_override: tool_override(doc),
        max_live_sessions: doc
            .get("max_live_sessions")
            .filter(|n| !n.is_null())
            .and_then(|n| r.int(n, "max_live_sessions", 1, 4096))
            .and_then(|v| usize::try_from(v).ok()),
        busy_input_mode: text(r, "display", "busy_input_mode")
            .and_then(|t| crate::default_config::BusyInputMode::parse(&t))
            .unwrap_or_default(),
        plugins_callback_timeout_secs: host_int(r, doc, "callback_timeout"),
        plugins_startup_timeout_secs: host_int(r, doc, "startup_timeout"),
        plugins_pre_tool_call_when_down: doc
            .get("plugins")
            .and_then(|p| p.get("host"))
            .and_then(|h| h.get("pre_tool_call_when_down"))
            .filter(|n| !n.is_null())
            .and_then(|n| {
                r.string(n, "plugins.host.pre_tool_call_when_down")
                    .flatten()
            }),
    }
}

/// The ids under `plugins.entries` whose `allow_tool_override` is true.
fn tool_override(doc: &Node) -> Vec<String> {
    let Some(entries) = doc.get("plugins").and_then(|p| p.get("entries")) else {
        return Vec::new();
    };
    entries
        .entries()
        .iter()
        .filter(|(_, e)| {
            e.get("allow_tool_override")
                .is_some_and(|v| match &v.value {
                    NodeValue::Bool(b) => *b,
                    NodeValue::Str(s) => crate::reader::parse_bool_text(s) == Some(true),
                    _ => false,
                })
        })
        .map(|(id, _)| id.clone())
        .collect()
}

/// A number of seconds under `plugins.host`.
fn host_int(r: &mut Reader, doc: &Node, key: &str) -> Option<u64> {
    let node = doc
        .get("plugins")
        .and_then(|p| p.get("host"))
        .and_then(|h| h.get(key))
        .filter(|n| !n.is_null())?;
    r.int(node, &format!("plugins.host.{key}"), 1, 86_400)
        .and_then(|v| u64::try_from(v).ok())
}

/// `skills.platform_disabled`: a mapping of platform name to skill names.
fn platform_lists(r: &mut Reader, node: Option<&Node>) -> BTreeMap<String, Vec<String>> {
    let Some(node) = node else {
        return BTreeMap::new();
    };
    if !matches!(node.value, NodeValue::Map(_)) {
        r.error(
            Some(node),
            "skills.platform_disabled",
            format!(
                "expected a mapping of platform to skill names, found {}",
                node.kind()
            ),
        );
        return BTreeMap::new();
    }
    node.entries()
        .iter()
        .filter_map(|(platform, names)| {
            let key = format!("skills.platform_disabled.{platform}");
            Some((platform.clone(), r.string_list(names, &key)?))
        })
        .collect()
}

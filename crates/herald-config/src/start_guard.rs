//! Every reason `herald gateway run` refuses to start on a configuration that loads,
//! each with its file, line and key, so that `herald config check` reports what the start
//! would refuse and the start names the setting.

use crate::api_settings::{ApiServerSettings, key_problem};
use crate::error::{Place, Problem};
use crate::node::{Node, NodeValue};
use std::path::{Path, PathBuf};

/// What the guard reads.
pub(crate) struct Guarded<'a> {
    pub config_file: &'a Path,
    pub env_file: PathBuf,
    pub doc: &'a Node,
    pub gateway: Option<&'a Node>,
    pub webhook_enabled: bool,
    pub api: &'a ApiServerSettings,
    /// A chat bot (Telegram, Slack) is configured (something to serve without a
    /// listener).
    pub chat_bot: bool,
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// The `platforms` blocks in the order herald reads them (the top-level one wins).
fn platform_blocks<'a>(g: &Guarded<'a>) -> [(&'static str, Option<&'a Node>); 2] {
    [
        ("platforms", g.doc.get("platforms")),
        (
            "gateway.platforms",
            g.gateway.and_then(|n| n.get("platforms")),
        ),
    ]
}

fn place_of(file: &Path, node: Option<&Node>, key: String) -> Place {
    Place {
        file: file.to_path_buf(),
        line: node.map_or(0, |n| n.line),
        column: node.map_or(0, |n| n.column),
        key,
    }
}

pub(crate) fn start_refusals(g: &Guarded<'_>) -> Vec<Problem> {
    let mut refusals = Vec::new();
    if !g.webhook_enabled && !g.api.enabled && !g.chat_bot {
        let node = platform_blocks(g).into_iter().find_map(|(prefix, p)| {
            let w = p?.get("webhook")?;
            Some((prefix, w.get("enabled").unwrap_or(w)))
        });
        let key = format!(
            "{}.webhook.enabled",
            node.map_or("platforms", |(prefix, _)| prefix)
        );
        refusals.push(Problem {
            place: place_of(g.config_file, node.map(|(_, n)| n), key),
            message: format!(
                "neither the webhook platform nor the API server is enabled (nor a Telegram bot), so `herald gateway run` does not start: set `platforms.webhook.enabled: true` (or WEBHOOK_ENABLED=true in {}); for the OpenAI-compatible API set `platforms.api_server.enabled: true`; for a Telegram bot set TELEGRAM_BOT_TOKEN",
                g.env_file.display()
            ),
        });
    }
    if g.api.enabled
        && let Some(problem) = key_problem(g.api.key.as_deref())
    {
        refusals.push(Problem {
            place: key_place(g),
            message: format!(
                "{problem}; `herald gateway run` refuses to start the API server (generate a key with `openssl rand -hex 32`)"
            ),
        });
    }
    refusals
}

/// Where the API key came from, in the order herald reads it: `extra.key`, the block's
/// `token`/`api_key`, then `API_SERVER_KEY` (its line in `.env` when it is there); without
/// a key, where it belongs.
fn key_place(g: &Guarded<'_>) -> Place {
    let set = |n: &&Node| match &n.value {
        NodeValue::Null => false,
        NodeValue::Str(s) => !s.trim().is_empty(),
        _ => true,
    };
    for path in [&["extra", "key"][..], &["token"], &["api_key"]] {
        for (prefix, platforms) in platform_blocks(g) {
            let mut node = platforms.and_then(|p| p.get("api_server"));
            for step in path {
                node = node.and_then(|n| n.get(step));
            }
            if let Some(n) = node.filter(set) {
                let key = format!("{prefix}.api_server.{}", path.join("."));
                return place_of(g.config_file, Some(n), key);
            }
        }
    }
    if (g.env)("API_SERVER_KEY").is_some_and(|v| !v.trim().is_empty()) {
        return env_place(&g.env_file, "API_SERVER_KEY");
    }
    let block = platform_blocks(g)
        .into_iter()
        .find_map(|(_, p)| p?.get("api_server"));
    place_of(
        g.config_file,
        block,
        "platforms.api_server.extra.key".to_owned(),
    )
}

/// Where the variable `var` is set: its line in `.env` when it is there, else the process
/// environment.
pub(crate) fn env_place(env_file: &Path, var: &str) -> Place {
    let line = std::fs::read_to_string(env_file).ok().and_then(|text| {
        text.lines().position(|l| {
            let l = l.trim_start();
            let l = l.strip_prefix("export ").unwrap_or(l).trim_start();
            l.strip_prefix(var)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
    });
    Place {
        file: match line {
            Some(_) => env_file.to_path_buf(),
            None => PathBuf::from("(the environment)"),
        },
        line: line.map_or(0, |i| i as u64 + 1),
        column: u64::from(line.is_some()),
        key: var.to_owned(),
    }
}

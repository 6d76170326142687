//! What Hermes's TUI asks of its gateway beside turns, served over herald's own parts
//! in Hermes's result shapes: `setup.status`, `session.save`, `paste.collapse`,
//! `input.detect_drop`, `shell.exec`, the skills and plugins hubs, and `rollback.*`
//! (herald keeps no checkpoints: the answers Hermes gives without any).

use crate::errors::RpcError;
use crate::gateway::Gateway;
use crate::params::{self, required};
use herald_session::approval::{self, Verdict};
use herald_session::{python_plugins, toolsets};
use serde::Serialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// `setup.status`: whether a provider credential resolves.
pub fn setup_status(gw: &Gateway) -> Value {
    json!({"provider_configured": gw.host.runtime().credential_resolves()})
}

/// The local time as `YYYYmmdd_HHMMSS` (`HHMMSS` with `time_only`).
fn stamp(time_only: bool) -> String {
    let now = jiff::Zoned::now();
    let format = if time_only { "%H%M%S" } else { "%Y%m%d_%H%M%S" };
    now.strftime(format).to_string()
}

/// `session.save {session_id}`: the transcript as JSON under `<home>/sessions/saved/`.
pub fn session_save(gw: &Gateway, p: params::Target) -> Result<Value, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let session = live.conversation.session();
    let dir = gw.host.runtime().home.root().join("sessions").join("saved");
    let failed = |e: std::io::Error| RpcError::new(5011, format!("failed to save: {e}"));
    std::fs::create_dir_all(&dir).map_err(failed)?;
    let path = dir.join(format!("hermes_conversation_{}.json", stamp(false)));
    let messages =
        session.with_history(|h| h.iter().map(|s| s.message.clone()).collect::<Vec<_>>());
    let model = session.endpoint().map(|e| e.model).unwrap_or_default();
    let doc = json!({
        "model": model,
        "session_id": session.id(),
        "system_prompt": session.system_prompt(),
        "messages": messages,
    });
    let text = serde_json::to_vec_pretty(&doc).map_err(|e| failed(std::io::Error::other(e)))?;
    write_private(&path, &text).map_err(failed)?;
    Ok(json!({"file": path}))
}

/// Writes a file only its owner reads (a transcript or a paste may hold secrets).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    herald_config::default_config::write_private_replace(path, bytes)
}

static PASTES: AtomicU64 = AtomicU64::new(0);

/// `paste.collapse {text}`: a long paste kept in `<home>/pastes/`, and the placeholder
/// the prompt carries instead.
pub fn paste_collapse(gw: &Gateway, p: params::Paste) -> Result<Value, RpcError> {
    let text = p.text.filter(|t| !t.is_empty());
    let text = text.ok_or_else(|| RpcError::new(4004, "empty paste"))?;
    let n = PASTES.fetch_add(1, Ordering::Relaxed) + 1;
    let lines = text.matches('\n').count() + 1;
    let dir = gw.host.runtime().home.root().join("pastes");
    let path = dir.join(format!("paste_{n}_{}.txt", stamp(true)));
    std::fs::create_dir_all(&dir)
        .and_then(|()| write_private(&path, text.as_bytes()))
        .map_err(|e| RpcError::new(5011, format!("cannot keep the paste: {e}")))?;
    let placeholder = format!("[Pasted text #{n}: {lines} lines → {}]", path.display());
    Ok(json!({"placeholder": placeholder, "path": path, "lines": lines}))
}

/// The file a prompt starts with when a file was dropped on the terminal: its first
/// word (quoted, or with `\ ` escapes) as an existing absolute or `~/` path; the rest.
fn dropped_file(text: &str) -> Option<(PathBuf, String)> {
    let text = text.trim_start();
    let (word, rest) = match text.chars().next()? {
        q @ ('"' | '\'') => {
            let end = text[1..].find(q)? + 1;
            (text[1..end].to_owned(), &text[end + 1..])
        }
        _ => {
            let mut word = String::new();
            let mut chars = text.char_indices().peekable();
            let mut end = text.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => word.extend(chars.next().map(|(_, c)| c)),
                    c if c.is_whitespace() => {
                        end = i;
                        break;
                    }
                    c => word.push(c),
                }
            }
            (word, &text[end..])
        }
    };
    let path = match (word.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(&word),
    };
    (path.is_absolute() && path.is_file()).then(|| (path, rest.trim().to_owned()))
}

/// `input.detect_drop {session_id, text}`: a dropped image is attached to the next
/// prompt; a dropped file is named in it.
pub fn detect_drop(gw: &Gateway, p: params::Paste) -> Result<Value, RpcError> {
    let live = gw.live(p.session_id.as_deref())?;
    let Some((path, rest)) = p.text.as_deref().and_then(dropped_file) else {
        return Ok(json!({"matched": false}));
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    let shown = path.display().to_string();
    if herald_session::images::mime(&path).is_some() {
        if live.conversation.attached() >= crate::extras::MAX_ATTACHED {
            return Ok(json!({"matched": false}));
        }
        let count = crate::extras::attach(&live, shown.clone());
        let label = name.clone().unwrap_or_default();
        let text = match rest.is_empty() {
            true => format!("[User attached image: {label}]"),
            false => rest,
        };
        return Ok(
            json!({"matched": true, "is_image": true, "path": shown, "name": name,
                         "count": count, "text": text}),
        );
    }
    let mut text = format!("[User attached file: {shown}]");
    if !rest.is_empty() {
        text = format!("{text}\n{rest}");
    }
    Ok(json!({"matched": true, "is_image": false, "path": shown, "name": name, "text": text}))
}

/// The end of `s`, at most `max` bytes (on a character boundary).
fn tail(s: &str, max: usize) -> String {
    let from = s.len().saturating_sub(max);
    let from = (from..=s.len())
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0);
    s[from..].to_owned()
}

/// `shell.exec {command}`: the TUI's `!command`, in the session folder's shell for at
/// most 30 s. It passes the profile's one approval policy (the floor, `approvals.deny`,
/// yolo, `command_allowlist` and the attended "always" answers, the TUI being attended);
/// a dangerous command none of these lets through is refused, as nobody is asked here
/// (the agent asks for those).
pub async fn shell_exec(gw: &Gateway, p: params::Shell) -> Result<Value, RpcError> {
    let command = required(p.command, "command", 4004)?;
    let policy = &gw.host.runtime().approvals;
    if let Verdict::Blocked(why) = policy.check_unasked(&command, true).await {
        // Hermes's words for the floor and for a flagged command; a deny rule's own.
        let why = match (approval::hard_line(&command), approval::dangerous(&command)) {
            (Some(floor), _) => format!("blocked (hardline): {floor}."),
            (None, Some(danger)) if why.starts_with("DENIED") => format!("blocked: {danger}."),
            _ => why,
        };
        return Err(RpcError::new(
            4005,
            format!("{why} Use the agent for dangerous commands."),
        ));
    }
    let cwd = gw
        .host
        .runtime()
        .cwd
        .clone()
        .or_else(|| std::env::current_dir().ok());
    let dir = cwd.unwrap_or_else(|| std::path::PathBuf::from("."));
    // Its own process group, its output read up to a bound, the group killed after.
    let mut cmd = herald_process::command("bash");
    cmd.args(["-c", &command]).current_dir(dir);
    let done = match herald_process::run_bounded(cmd, SHELL_WITHIN, MAX_SHELL_OUTPUT).await {
        Ok(done) => done,
        Err(herald_process::RunFailed::Timeout) => {
            return Err(RpcError::new(5002, "command timed out (30s)"));
        }
        Err(herald_process::RunFailed::Spawn(e) | herald_process::RunFailed::Wait(e)) => {
            return Err(RpcError::new(5003, e.to_string()));
        }
    };
    let (o, e, status) = (done.stdout, done.stderr, done.status);
    Ok(json!({
        "stdout": tail(&String::from_utf8_lossy(&o), 4000),
        "stderr": tail(&String::from_utf8_lossy(&e), 2000),
        "code": status.code().unwrap_or(-1),
    }))
}

/// What `shell.exec` reads of each stream at most (the answer keeps the last 4,000 /
/// 2,000 bytes).
const MAX_SHELL_OUTPUT: usize = 1024 * 1024;
/// How long `shell.exec` may run before its group is killed.
const SHELL_WITHIN: Duration = Duration::from_secs(30);

/// `skills.manage {action, query?, name?}` over the installed skills (herald has no
/// skills hub: `install` says how to add one).
pub fn skills_manage(gw: &Gateway, p: params::Hub) -> Result<Value, RpcError> {
    let installed = gw.host.runtime().skills.discover();
    let action = p.action.as_deref().unwrap_or("list");
    let matches = |s: &herald_session::skills::Skill, q: &str| {
        let q = q.to_lowercase();
        s.name.to_lowercase().contains(&q) || s.description.to_lowercase().contains(&q)
    };
    match action {
        "list" => Ok(json!({"skills": crate::info::skills_by_category(&gw.host)})),
        "search" => {
            let q = p.query.unwrap_or_default();
            let results: Vec<Value> = installed
                .iter()
                .filter(|s| matches(s, &q))
                .map(|s| json!({"name": s.name, "description": s.description}))
                .collect();
            Ok(json!({"results": results}))
        }
        "inspect" => {
            let name = p.name.or(p.query).unwrap_or_default();
            let found = installed.iter().find(|s| s.name == name);
            let s = found.ok_or_else(|| RpcError::new(5024, format!("no skill named {name}")))?;
            Ok(json!({"info": {"name": s.name, "category": s.category,
                               "path": s.path, "description": s.description}}))
        }
        "browse" => Ok(json!({"items": [], "page": 1, "total_pages": 1, "total": 0})),
        "install" => Err(RpcError::new(
            5024,
            format!(
                "herald has no skills hub: put the skill's folder (with SKILL.md) in {}",
                gw.host.runtime().home.root().join("skills").display()
            ),
        )),
        other => Err(RpcError::new(
            4017,
            format!("unknown skills action: {other}"),
        )),
    }
}

/// `skills.reload`: skills are read from disk at every use, so this counts them.
pub fn skills_reload(gw: &Gateway) -> Value {
    let total = gw.host.runtime().skills.discover().len();
    let output =
        format!("Reloading skills...\nNo new skills detected.\n{total} skill(s) available");
    json!({"output": output, "result": {"added": [], "removed": [], "total": total}})
}

/// One row of the plugin hub.
#[derive(Serialize)]
struct PluginRow {
    name: String,
    version: String,
    description: String,
    source: &'static str,
    status: &'static str,
}

fn plugin_rows(gw: &Gateway) -> Result<Vec<PluginRow>, RpcError> {
    let home = &gw.host.runtime().home;
    let config = herald_config::Config::load(home, &herald_config::process_env)
        .map_err(|e| RpcError::new(5026, e.to_string()))?;
    Ok(python_plugins::list(home, &config.agent)
        .iter()
        .map(|p| PluginRow {
            name: p.key.clone(),
            version: p.manifest.version.clone().unwrap_or_default(),
            description: p
                .problem
                .clone()
                .or_else(|| p.manifest.description.clone())
                .unwrap_or_default(),
            source: if p.path.is_some() {
                "user"
            } else {
                "entrypoint"
            },
            status: p.status(),
        })
        .collect())
}

/// `plugins.manage {action: list | toggle, name, enable}`, as `herald plugins` does it
/// (a toggle takes effect when the plugin host next starts: `herald plugins reload`).
pub fn plugins_manage(gw: &Gateway, p: params::Hub) -> Result<Value, RpcError> {
    match p.action.as_deref().unwrap_or("list") {
        "list" => {
            let rows = plugin_rows(gw)?;
            Ok(json!({"plugins": rows, "user_count": rows.len(), "bundled_count": 0}))
        }
        "toggle" => {
            let name = required(p.name, "name", 4019)?;
            let home = &gw.host.runtime().home;
            let config = herald_config::Config::load(home, &herald_config::process_env)
                .map_err(|e| RpcError::new(5026, e.to_string()))?;
            let plugins = python_plugins::list(home, &config.agent);
            let (key, changed) = python_plugins::switch(home, &plugins, &name, p.enable)
                .map_err(|e| RpcError::new(5026, e.to_string()))?;
            let row = plugin_rows(gw)?.into_iter().find(|r| r.name == key);
            Ok(json!({"ok": true, "unchanged": !changed, "name": key, "plugin": row}))
        }
        other => Err(RpcError::new(
            4017,
            format!("unknown plugins action: {other}"),
        )),
    }
}

/// `tools.configure {action: enable | disable, names}`: `platform_toolsets.cli` in
/// config.yaml changed as Hermes changes it; sessions opened from then on get it (a
/// live session keeps its tools: `reset` false).
pub fn tools_configure(gw: &Gateway, p: params::Configure) -> Result<Value, RpcError> {
    let action = p.action.as_deref().unwrap_or_default().to_ascii_lowercase();
    if action != "enable" && action != "disable" {
        return Err(RpcError::new(
            4017,
            format!("unknown tools action: {action}"),
        ));
    }
    let names: Vec<String> = p
        .names
        .iter()
        .filter_map(|n| n.as_str())
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect();
    if names.is_empty() {
        return Err(RpcError::new(4018, "names required"));
    }
    let home = &gw.host.runtime().home;
    let config = herald_config::Config::load(home, &herald_config::process_env)
        .map_err(|e| RpcError::new(5035, e.to_string()))?;
    let mut enabled = config
        .platform_toolsets
        .cli
        .unwrap_or_else(|| vec!["hermes-cli".to_owned()]);
    let (known, unknown): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|n| toolsets::is_toolset(n));
    for name in &known {
        enabled = toolsets::switched(&enabled, name, action == "enable");
    }
    herald_config::default_config::set_platform_toolsets(&home.config_file(), "cli", &enabled)
        .map_err(|e| RpcError::new(5035, e.to_string()))?;
    Ok(
        json!({"changed": known, "enabled_toolsets": enabled, "info": null,
              "missing_servers": [], "reset": false, "unknown": unknown}),
    )
}

/// The `.env` variable of the picker's provider `slug`: 4001 without one, 4002 for a
/// provider herald does not know, 4004 when its key has no variable.
fn key_env_of(gw: &Gateway, slug: Option<String>) -> Result<(String, String), RpcError> {
    let slug = slug.ok_or_else(|| RpcError::new(4001, "slug is required"))?;
    let settings = gw.host.runtime().model_settings();
    let known = ["openrouter", "or"].contains(&slug.as_str())
        || settings.providers.contains_key(&slug)
        || slug
            .strip_prefix("custom:")
            .is_some_and(|n| settings.custom_provider(n).is_some());
    if !known {
        return Err(RpcError::new(4002, format!("unknown provider: {slug}")));
    }
    let var = herald_session::model_select::key_env(settings, &slug).ok_or_else(|| {
        RpcError::new(
            4004,
            format!("provider {slug} takes no key from .env: set its api_key in config.yaml"),
        )
    })?;
    Ok((slug, var))
}

/// `model.save_key {slug, api_key}`: the key written to `.env` (0600) for that
/// provider's variable, used from then on.
pub fn model_save_key(gw: &Gateway, p: params::Configure) -> Result<Value, RpcError> {
    let (slug, var) = key_env_of(gw, p.slug)?;
    let key = p
        .api_key
        .ok_or_else(|| RpcError::new(4001, "slug and api_key are required"))?;
    let env = gw.host.runtime().home.env_file();
    herald_config::env_file::set_value(&env, &var, &key)
        .map_err(|e| RpcError::new(5035, e.to_string()))?;
    Ok(
        json!({"provider": {"slug": slug, "name": slug, "is_current": false, "models": [],
                           "total_models": 0, "authenticated": true}}),
    )
}

/// `model.disconnect {slug}`: the provider's key taken out of `.env`.
pub fn model_disconnect(gw: &Gateway, p: params::Configure) -> Result<Value, RpcError> {
    let (slug, var) = key_env_of(gw, p.slug)?;
    let env = gw.host.runtime().home.env_file();
    let removed = herald_config::env_file::remove_value(&env, &var)
        .map_err(|e| RpcError::new(5035, e.to_string()))?;
    if !removed {
        return Err(RpcError::new(
            4005,
            format!("no credentials found for {slug}"),
        ));
    }
    Ok(json!({"slug": slug, "name": slug, "disconnected": true}))
}

/// `rollback.list`: herald keeps no filesystem checkpoints.
pub fn rollback_list(gw: &Gateway, p: params::Target) -> Result<Value, RpcError> {
    gw.live(p.session_id.as_deref())?;
    Ok(json!({"enabled": false, "checkpoints": []}))
}

/// `rollback.diff {hash}`: there is no checkpoint to compare.
pub fn rollback_diff(gw: &Gateway, p: params::Hub) -> Result<Value, RpcError> {
    gw.live(p.session_id.as_deref())?;
    required(p.hash, "hash", 4014)?;
    Ok(json!({"stat": "", "diff": ""}))
}

/// `rollback.restore {hash}`: there is no checkpoint to restore.
pub fn rollback_restore(gw: &Gateway, p: params::Hub) -> Result<Value, RpcError> {
    gw.live(p.session_id.as_deref())?;
    required(p.hash, "hash", 4014)?;
    Ok(json!({"success": false, "error": "No checkpoints exist for this directory"}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_path_is_the_first_word_quoted_or_escaped() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("my shot.png");
        std::fs::write(&file, "x").unwrap();
        let shown = file.display().to_string();
        let escaped = shown.replace(' ', "\\ ");
        assert_eq!(
            dropped_file(&format!("{escaped} what is this")),
            Some((file.clone(), "what is this".into()))
        );
        assert_eq!(
            dropped_file(&format!("'{shown}'")),
            Some((file.clone(), String::new()))
        );
        assert_eq!(dropped_file("hello there"), None);
        assert_eq!(dropped_file("/no/such/file.png"), None);
        assert_eq!(dropped_file("'unclosed"), None);
        assert_eq!(tail("héllo", 4), "llo");
    }
}

//! Discord's application commands: the door's commands from the one command table (and
//! the installed skills), each with an optional `args` text, as Hermes registers them.
//! They are synced only when the set changed since the last successful sync (its
//! fingerprint is kept in `<home>/chat-state/discord-commands.json`), in one bulk
//! overwrite within its bucket; a 429 keeps its `retry_after` so no later start asks
//! again before then.

use super::api::{ApiError, Body, RestApi};
use reqwest::Method;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// Discord allows 100 global commands.
pub const MAX_COMMANDS: usize = 100;

/// What the last sync left.
#[derive(Debug, Default, Serialize, Deserialize)]
struct SyncState {
    fingerprint: String,
    /// Unix ms before which no sync is tried (a 429's `retry_after`).
    retry_after_ms: i64,
}

/// A name as Discord takes it: lowercase `[a-z0-9_-]`, at most 32.
pub fn name_of(raw: &str) -> String {
    raw.to_lowercase()
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_' || *c == '-')
        .take(32)
        .collect()
}

/// The commands: the door's, then skills, deduplicated, at most [`MAX_COMMANDS`].
pub fn commands(skills: &[(String, String)]) -> Vec<Value> {
    let door = herald_session::commands::offered(herald_session::commands::Door::Platform)
        .map(|c| (c.name.to_owned(), c.what.to_owned()));
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (raw, what) in door.chain(skills.iter().cloned()) {
        let name = name_of(&raw);
        if name.is_empty() || !seen.insert(name.clone()) {
            continue;
        }
        let mut description: String = what.chars().take(100).collect();
        if description.is_empty() {
            description = format!("/{name}");
        }
        out.push(json!({
            "name": name,
            "description": description,
            "type": 1,
            "options": [{"type": 3, "name": "args", "description": "Arguments", "required": false}],
        }));
        if out.len() == MAX_COMMANDS {
            break;
        }
    }
    out
}

fn fingerprint(commands: &[Value]) -> String {
    hex::encode(Sha256::digest(
        Value::Array(commands.to_vec()).to_string().as_bytes(),
    ))
}

/// Syncs `commands` for application `app` unless they are what was synced last.
pub async fn sync(
    api: &RestApi,
    app: &str,
    commands: Vec<Value>,
    state_file: PathBuf,
    now_ms: i64,
) {
    let state: SyncState = std::fs::read_to_string(&state_file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    let print = fingerprint(&commands);
    if state.fingerprint == print {
        tracing::debug!("discord: the application commands are unchanged; not synced");
        return;
    }
    if state.retry_after_ms > now_ms {
        tracing::info!("discord: the command sync waits out Discord's last rate limit");
        return;
    }
    let path = format!("/applications/{app}/commands");
    let kept = match api
        .call(Method::PUT, &path, Body::Json(Value::Array(commands)))
        .await
    {
        Ok(_) => {
            tracing::info!("discord: application commands synced");
            SyncState {
                fingerprint: print,
                retry_after_ms: 0,
            }
        }
        Err(ApiError::RateLimited(wait)) => {
            tracing::warn!(
                wait_s = wait.as_secs(),
                "discord: the command sync is rate limited; tried again at a later start"
            );
            let until = now_ms.saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX));
            SyncState {
                fingerprint: state.fingerprint,
                retry_after_ms: until,
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "discord: the command sync failed; type /commands as messages meanwhile");
            return;
        }
    };
    if let Ok(text) = serde_json::to_string(&kept) {
        let _ = super::gateway::write_private(&state_file, &text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_named_as_discord_takes_them_and_bounded() {
        assert_eq!(name_of("Set-Home"), "set-home");
        assert_eq!(name_of("web research!"), "webresearch");
        assert_eq!(name_of(&"a".repeat(40)).len(), 32);
        let skills: Vec<(String, String)> = (0..200)
            .map(|i| (format!("skill-{i}"), "does x".into()))
            .collect();
        let all = commands(&skills);
        assert_eq!(all.len(), MAX_COMMANDS);
        assert!(all.iter().any(|c| c["name"] == "new"));
        assert!(
            all.iter()
                .all(|c| c["description"].as_str().unwrap().chars().count() <= 100)
        );
        assert_eq!(fingerprint(&all), fingerprint(&commands(&skills)));
        assert_ne!(fingerprint(&all), fingerprint(&commands(&[])));
    }
}

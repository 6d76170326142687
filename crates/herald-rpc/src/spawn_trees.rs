//! Saved subagent trees (rpc-gateway.md §5): `spawn_tree.save` writes the tree a client
//! hands over to `<home>/spawn-trees/<session>/`, `.list` lists them newest first, and
//! `.load` reads one back, refusing any path outside that folder (4030).

use crate::errors::RpcError;
use crate::params::{Params, count, flag, text};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Trees read per folder by `list`, at most.
const SCAN: usize = 1000;
const DEFAULT_LIMIT: usize = 50;

fn root(home: &Path) -> PathBuf {
    home.join("spawn-trees")
}

/// The folder of a session's trees: its id with anything but `[A-Za-z0-9_-]` as `_`.
fn session_dir(home: &Path, session_id: &str) -> PathBuf {
    let safe: String = session_id
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c,
                false => '_',
            },
        )
        .collect();
    root(home).join(if safe.is_empty() { "default" } else { &safe })
}

fn failed(what: &str, e: impl std::fmt::Display) -> RpcError {
    RpcError::new(RpcError::FAILED, format!("spawn_tree.{what} failed: {e}"))
}

/// `spawn_tree.save {session_id?, subagents, label?, started_at?, finished_at?}`.
pub fn save(home: &Path, p: &Params) -> Result<Value, RpcError> {
    let subagents = match p.get("subagents") {
        Some(Value::Array(a)) if !a.is_empty() => a.clone(),
        _ => return Err(RpcError::new(RpcError::MISSING, "subagents list required")),
    };
    let session_id = text(p, "session_id").unwrap_or_default();
    let finished = p
        .get("finished_at")
        .and_then(Value::as_f64)
        .unwrap_or_else(herald_session::now_secs);
    let tree = json!({
        "session_id": session_id,
        "started_at": p.get("started_at").and_then(Value::as_f64),
        "finished_at": finished,
        "label": text(p, "label").unwrap_or_default(),
        "subagents": subagents,
    });
    let dir = session_dir(home, &session_id);
    std::fs::create_dir_all(&dir).map_err(|e| failed("save", e))?;
    let stamp = jiff::Timestamp::from_second(finished as i64)
        .map(|t| t.strftime("%Y%m%dT%H%M%S").to_string())
        .unwrap_or_else(|_| "undated".into());
    let unique = &uuid::Uuid::new_v4().simple().to_string()[..6];
    let path = dir.join(format!("{stamp}-{unique}.json"));
    std::fs::write(&path, tree.to_string()).map_err(|e| failed("save", e))?;
    Ok(json!({"path": path.display().to_string(), "session_id": session_id}))
}

/// One saved tree as a list shows it; `None` for a file that is not one.
fn entry(path: &Path) -> Option<Value> {
    let tree: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    let count = tree
        .get("subagents")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    Some(json!({
        "path": path.display().to_string(),
        "session_id": tree.get("session_id"),
        "started_at": tree.get("started_at"),
        "finished_at": tree.get("finished_at"),
        "label": tree.get("label"),
        "count": count,
    }))
}

fn trees_in(dir: &Path) -> Vec<Value> {
    let Ok(files) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    files
        .flatten()
        .map(|f| f.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .take(SCAN)
        .filter_map(|p| entry(&p))
        .collect()
}

/// `spawn_tree.list {session_id?, limit?, cross_session?}`: `{entries}`, newest first.
pub fn list(home: &Path, p: &Params) -> Value {
    let dirs: Vec<PathBuf> = match flag(p, "cross_session") {
        true => std::fs::read_dir(root(home))
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default(),
        false => vec![session_dir(
            home,
            &text(p, "session_id").unwrap_or_default(),
        )],
    };
    let mut entries: Vec<Value> = dirs.iter().flat_map(|d| trees_in(d)).collect();
    let finished = |e: &Value| e["finished_at"].as_f64().unwrap_or(0.0);
    entries.sort_by(|a, b| finished(b).total_cmp(&finished(a)));
    entries.truncate(count(p, "limit").unwrap_or(DEFAULT_LIMIT));
    json!({"entries": entries})
}

/// `spawn_tree.load {path}`: the saved tree.
pub fn load(home: &Path, p: &Params) -> Result<Value, RpcError> {
    let raw = text(p, "path").ok_or_else(|| RpcError::new(RpcError::MISSING, "path required"))?;
    let outside = || RpcError::new(RpcError::DISAGREE, "path outside the spawn-trees root");
    let root = root(home).canonicalize().map_err(|_| outside())?;
    let path = Path::new(&raw).canonicalize().map_err(|_| outside())?;
    if !path.starts_with(&root) {
        return Err(outside());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| failed("load", e))?;
    serde_json::from_str(&text).map_err(|e| failed("load", e))
}

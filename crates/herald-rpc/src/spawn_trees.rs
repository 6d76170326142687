//! Saved subagent trees (rpc-gateway.md §5): `spawn_tree.save` writes the tree a client
//! hands over to `<home>/spawn-trees/<session>/`, `.list` lists them newest first, and
//! `.load` reads one back, refusing any path outside that folder (4030).

use crate::errors::RpcError;
use crate::params;
use crate::results::{TreeList, TreeSaved};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Trees read per folder by `list`, at most.
const SCAN: usize = 1000;
const DEFAULT_LIMIT: usize = 50;

/// A saved tree, as `save` writes it.
#[derive(Debug, Serialize)]
struct Tree {
    session_id: String,
    started_at: Option<f64>,
    finished_at: f64,
    label: String,
    subagents: Vec<Value>,
}

/// What `list` reads of a saved file (written by any version: every field may be
/// missing or of another type).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TreeFile {
    session_id: Value,
    started_at: Value,
    finished_at: Value,
    label: Value,
    subagents: Value,
}

/// One saved tree as a list shows it.
#[derive(Debug, Serialize)]
pub struct TreeEntry {
    path: String,
    session_id: Value,
    started_at: Value,
    finished_at: Value,
    label: Value,
    count: usize,
}

fn root(home: &Path) -> PathBuf {
    home.join("spawn-trees")
}

/// The folder of a session's trees: its id with anything but `[A-Za-z0-9_-]` as `_`.
fn session_dir(home: &Path, session_id: &str) -> PathBuf {
    let safe = herald_config::home::folder_name(session_id);
    root(home).join(if safe.is_empty() { "default" } else { &safe })
}

fn failed(what: &str, e: impl std::fmt::Display) -> RpcError {
    RpcError::new(RpcError::FAILED, format!("spawn_tree.{what} failed: {e}"))
}

/// `spawn_tree.save {session_id?, subagents, label?, started_at?, finished_at?}`.
pub fn save(home: &Path, p: params::SpawnTree) -> Result<TreeSaved, RpcError> {
    let subagents = match p.subagents {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => return Err(RpcError::new(RpcError::MISSING, "subagents list required")),
    };
    let session_id = p.session_id.unwrap_or_default();
    let finished = p.finished_at.unwrap_or_else(herald_session::now_secs);
    let tree = Tree {
        session_id: session_id.clone(),
        started_at: p.started_at,
        finished_at: finished,
        label: p.label.unwrap_or_default(),
        subagents,
    };
    let dir = session_dir(home, &session_id);
    std::fs::create_dir_all(&dir).map_err(|e| failed("save", e))?;
    let stamp = jiff::Timestamp::from_second(finished as i64)
        .map(|t| t.strftime("%Y%m%dT%H%M%S").to_string())
        .unwrap_or_else(|_| "undated".into());
    let unique = &uuid::Uuid::new_v4().simple().to_string()[..6];
    let path = dir.join(format!("{stamp}-{unique}.json"));
    let text = serde_json::to_string(&tree).map_err(|e| failed("save", e))?;
    std::fs::write(&path, text).map_err(|e| failed("save", e))?;
    Ok(TreeSaved {
        path: path.display().to_string(),
        session_id,
    })
}

/// One saved tree as a list shows it; `None` for a file that is not one.
fn entry(path: &Path) -> Option<TreeEntry> {
    let tree: TreeFile = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    Some(TreeEntry {
        path: path.display().to_string(),
        count: tree.subagents.as_array().map_or(0, Vec::len),
        session_id: tree.session_id,
        started_at: tree.started_at,
        finished_at: tree.finished_at,
        label: tree.label,
    })
}

fn trees_in(dir: &Path) -> Vec<TreeEntry> {
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
pub fn list(home: &Path, p: params::SpawnTree) -> TreeList<TreeEntry> {
    let dirs: Vec<PathBuf> = match p.cross_session {
        true => std::fs::read_dir(root(home))
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default(),
        false => vec![session_dir(home, &p.session_id.unwrap_or_default())],
    };
    let mut entries: Vec<TreeEntry> = dirs.iter().flat_map(|d| trees_in(d)).collect();
    let finished = |e: &TreeEntry| e.finished_at.as_f64().unwrap_or(0.0);
    entries.sort_by(|a, b| finished(b).total_cmp(&finished(a)));
    entries.truncate(p.limit.unwrap_or(DEFAULT_LIMIT));
    TreeList { entries }
}

/// `spawn_tree.load {path}`: the saved tree.
pub fn load(home: &Path, p: params::SpawnTree) -> Result<Value, RpcError> {
    let raw = p
        .path
        .ok_or_else(|| RpcError::new(RpcError::MISSING, "path required"))?;
    let outside = || RpcError::new(RpcError::DISAGREE, "path outside the spawn-trees root");
    let root = root(home).canonicalize().map_err(|_| outside())?;
    let path = Path::new(&raw).canonicalize().map_err(|_| outside())?;
    if !path.starts_with(&root) {
        return Err(outside());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| failed("load", e))?;
    serde_json::from_str(&text).map_err(|e| failed("load", e))
}

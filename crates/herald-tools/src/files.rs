//! `read_file` and `write_file`, with the path rules: writes to credential folders and
//! system directories are refused.

use crate::error_result;
use herald_agent::tool::{Tool, ToolContext, ToolFuture, cap_result};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Largest file `read_file` reads.
pub const MAX_READ_BYTES: u64 = 10 * 1024 * 1024;

fn resolve(path: &str, cwd: &Path) -> PathBuf {
    if path == "~" {
        return dirs::home_dir().unwrap_or_default();
    }
    if let Some(rest) = path.strip_prefix("~/") {
        return dirs::home_dir().unwrap_or_default().join(rest);
    }
    let p = PathBuf::from(path);
    if p.is_absolute() { p } else { cwd.join(p) }
}

/// Why a write to `path` is refused, if it is.
pub fn write_refused(path: &Path) -> Option<String> {
    let home = dirs::home_dir().unwrap_or_default();
    // Resolve what exists of the path so symlinks cannot smuggle a write elsewhere.
    let mut probe = path.to_path_buf();
    let mut rest = Vec::new();
    while !probe.exists() {
        match (
            probe.file_name().map(|n| n.to_owned()),
            probe.parent().map(Path::to_path_buf),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                probe = parent;
            }
            _ => break,
        }
    }
    let mut real = probe.canonicalize().unwrap_or(probe);
    for part in rest.into_iter().rev() {
        real.push(part);
    }
    let credential_dirs = [
        ".ssh",
        ".aws",
        ".gnupg",
        ".kube",
        ".docker",
        ".config/gcloud",
        ".netrc",
        ".git-credentials",
        ".herald/.env",
        ".hermes/.env",
    ];
    for c in credential_dirs {
        if real.starts_with(home.join(c)) {
            return Some(format!(
                "writing to {} is refused: it holds credentials",
                home.join(c).display()
            ));
        }
    }
    for sys in [
        "/etc", "/boot", "/usr", "/bin", "/sbin", "/lib", "/proc", "/sys", "/dev",
    ] {
        if real.starts_with(sys) {
            return Some(format!("writing under {sys} is refused"));
        }
    }
    None
}

pub struct ReadFile;

impl Tool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Read a text file. Returns numbered lines; use offset (1-based) and limit for large files."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string"}, "offset": {"type": "integer", "minimum": 1}, "limit": {"type": "integer", "minimum": 1}
        }, "required": ["path"]})
    }
    fn parallel_safe(&self) -> bool {
        true
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(path) = args["path"].as_str() else {
                return error_result("`path` is required");
            };
            let path = resolve(path, &ctx.cwd);
            match tokio::fs::metadata(&path).await {
                Ok(m) if m.len() > MAX_READ_BYTES => {
                    return error_result(format!("{} is larger than 10 MiB", path.display()));
                }
                Ok(m) if m.is_dir() => {
                    return error_result(format!("{} is a directory", path.display()));
                }
                Err(e) => return error_result(format!("cannot read {}: {e}", path.display())),
                Ok(_) => {}
            }
            let bytes = match tokio::fs::read(&path).await {
                Ok(b) => b,
                Err(e) => return error_result(format!("cannot read {}: {e}", path.display())),
            };
            let text = String::from_utf8_lossy(&bytes);
            let offset = args["offset"].as_u64().unwrap_or(1).max(1) as usize;
            let limit = args["limit"].as_u64().unwrap_or(500).clamp(1, 2000) as usize;
            let total = text.lines().count();
            let content: String = text
                .lines()
                .enumerate()
                .skip(offset - 1)
                .take(limit)
                .map(|(i, l)| format!("{:>6}|{l}\n", i + 1))
                .collect();
            json!({"path": path.display().to_string(), "content": cap_result(content, 100_000), "total_lines": total}).to_string()
        })
    }
}

pub struct WriteFile;

impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "Write a text file, replacing it (parent folders are created)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]})
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let (Some(path), Some(content)) = (args["path"].as_str(), args["content"].as_str())
            else {
                return error_result("`path` and `content` are required");
            };
            let path = resolve(path, &ctx.cwd);
            if let Some(why) = write_refused(&path) {
                return error_result(why);
            }
            if let Some(parent) = path.parent()
                && let Err(e) = tokio::fs::create_dir_all(parent).await
            {
                return error_result(format!("cannot create {}: {e}", parent.display()));
            }
            match tokio::fs::write(&path, content).await {
                Ok(()) => {
                    json!({"path": path.display().to_string(), "bytes_written": content.len()})
                        .to_string()
                }
                Err(e) => error_result(format!("cannot write {}: {e}", path.display())),
            }
        })
    }
}

pub struct Patch;

impl Tool for Patch {
    fn name(&self) -> &str {
        "patch"
    }
    fn description(&self) -> &str {
        "Edit a file by replacing exact text: old_string must occur once (or set replace_all). Returns the change as a unified diff."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}, "replace_all": {"type": "boolean"}
        }, "required": ["path", "old_string", "new_string"]})
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let (Some(path), Some(old), Some(new)) = (
                args["path"].as_str(),
                args["old_string"].as_str(),
                args["new_string"].as_str(),
            ) else {
                return error_result("`path`, `old_string` and `new_string` are required");
            };
            if old.is_empty() {
                return error_result("`old_string` is empty; use write_file to create a file");
            }
            let path = resolve(path, &ctx.cwd);
            if let Some(why) = write_refused(&path) {
                return error_result(why);
            }
            let text = match tokio::fs::read_to_string(&path).await {
                Ok(t) => t,
                Err(e) => return error_result(format!("cannot read {}: {e}", path.display())),
            };
            let count = text.matches(old).count();
            let replace_all = args["replace_all"].as_bool().unwrap_or(false);
            if count == 0 {
                return error_result(format!("old_string was not found in {}", path.display()));
            }
            if count > 1 && !replace_all {
                return error_result(format!(
                    "old_string occurs {count} times in {}; add context to make it unique or set replace_all",
                    path.display()
                ));
            }
            let updated = if replace_all {
                text.replace(old, new)
            } else {
                text.replacen(old, new, 1)
            };
            if let Err(e) = tokio::fs::write(&path, &updated).await {
                return error_result(format!("cannot write {}: {e}", path.display()));
            }
            let shown = args["path"].as_str().unwrap_or_default();
            json!({
                "success": true,
                "diff": unified_diff(&text, &updated, shown),
                "files_modified": [path.display().to_string()],
                "replacements": if replace_all { count } else { 1 },
            })
            .to_string()
        })
    }
}

/// The change as a unified diff (`--- a/<path>`, `+++ b/<path>`, three lines of context),
/// as Hermes's patch tool reports it.
pub fn unified_diff(old: &str, new: &str, path: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

/// Most matches `search_files` returns.
pub const MAX_MATCHES: usize = 100;
/// Files larger than this are skipped by `search_files`.
const MAX_SEARCH_FILE_BYTES: u64 = 1024 * 1024;
/// Folders `search_files` never enters.
const SKIPPED_DIRS: &[&str] = &[".git", "node_modules", "target", ".venv", "__pycache__"];

pub struct SearchFiles;

impl SearchFiles {
    fn search(root: &Path, re: &regex::Regex, name_filter: Option<&str>) -> (Vec<Value>, bool) {
        let mut matches = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut entries: Vec<_> = entries.flatten().collect();
            entries.sort_by_key(|e| e.file_name());
            for entry in entries {
                let path = entry.path();
                let name = entry.file_name().to_string_lossy().into_owned();
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    if !SKIPPED_DIRS.contains(&name.as_str()) {
                        stack.push(path);
                    }
                    continue;
                }
                if !kind.is_file()
                    || name_filter.is_some_and(|f| !name.ends_with(f.trim_start_matches('*')))
                {
                    continue;
                }
                if entry
                    .metadata()
                    .map(|m| m.len() > MAX_SEARCH_FILE_BYTES)
                    .unwrap_or(true)
                {
                    continue;
                }
                let Ok(bytes) = std::fs::read(&path) else {
                    continue;
                };
                if bytes.contains(&0) {
                    continue;
                }
                for (i, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
                    if re.is_match(line) {
                        matches.push(json!({"path": path.display().to_string(), "line": i + 1, "text": line.chars().take(300).collect::<String>()}));
                        if matches.len() >= MAX_MATCHES {
                            return (matches, true);
                        }
                    }
                }
            }
        }
        (matches, false)
    }
}

impl Tool for SearchFiles {
    fn name(&self) -> &str {
        "search_files"
    }
    fn description(&self) -> &str {
        "Search file contents with a regular expression under a folder (default: the working directory)."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "pattern": {"type": "string"}, "path": {"type": "string"}, "file_glob": {"type": "string", "description": "e.g. *.rs"}
        }, "required": ["pattern"]})
    }
    fn parallel_safe(&self) -> bool {
        true
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(pattern) = args["pattern"].as_str() else {
                return error_result("`pattern` is required");
            };
            let re = match regex::RegexBuilder::new(pattern)
                .size_limit(1 << 20)
                .build()
            {
                Ok(r) => r,
                Err(e) => return error_result(format!("invalid pattern: {e}")),
            };
            let root = args["path"]
                .as_str()
                .map(|p| resolve(p, &ctx.cwd))
                .unwrap_or_else(|| ctx.cwd.clone());
            let filter = args["file_glob"].as_str().map(str::to_owned);
            let found = tokio::task::spawn_blocking(move || {
                SearchFiles::search(&root, &re, filter.as_deref())
            })
            .await;
            match found {
                Ok((matches, truncated)) => {
                    json!({"matches": matches, "truncated": truncated}).to_string()
                }
                Err(e) => error_result(format!("search failed: {e}")),
            }
        })
    }
}

//! `read_file` and `write_file`, with the path rules: writes to credential folders and
//! system directories are refused.

use super::error_result;
use crate::tool::{Tool, ToolContext, ToolFuture, cap_result};
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
            let limit = args["limit"].as_u64().unwrap_or(2000) as usize;
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

//! The "always" answers given on attended surfaces (`approvals_always.json` in the
//! home), kept apart from `command_allowlist`: they apply to runs a human attends
//! (chat, the TUI, ACP, the API's runs), never to unattended ones such as webhook runs.
//! Each entry names the surface that gave it. `command_allowlist`, written by hand or
//! migrated from Hermes, still applies everywhere.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file's name in the home.
pub const FILE_NAME: &str = "approvals_always.json";

/// One "always" answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlwaysApproval {
    /// The danger approved for good: the pattern key a dangerous command is flagged
    /// with (`recursive or forced delete`).
    pub pattern: String,
    /// The surface whose human answered (`cli`, `tui`, `acp`, `api_server` ...).
    pub surface: String,
    /// Unix seconds.
    pub at: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Document {
    #[serde(default)]
    always: Vec<AlwaysApproval>,
}

/// The entries of `path`; none when it is missing. A file that cannot be read or
/// parsed is an error: its caller applies none of it (a damaged file never widens what
/// runs unasked).
pub fn load(path: &Path) -> std::io::Result<Vec<AlwaysApproval>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    serde_json::from_str::<Document>(&text)
        .map(|doc| doc.always)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Adds `pattern` as approved for good by `surface` (once per pattern and surface),
/// written owner-only through a temporary file and a rename.
pub fn add(path: &Path, pattern: &str, surface: &str) -> std::io::Result<()> {
    // Two answers given at once in this process must not lose one.
    static WRITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = WRITING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut doc = Document {
        always: load(path)?,
    };
    if doc
        .always
        .iter()
        .any(|a| a.pattern == pattern && a.surface == surface)
    {
        return Ok(());
    }
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    doc.always.push(AlwaysApproval {
        pattern: pattern.to_owned(),
        surface: surface.to_owned(),
        at,
    });
    let text = serde_json::to_vec_pretty(&doc).map_err(std::io::Error::other)?;
    crate::default_config::write_private_replace(path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_kept_tagged_once_each_and_a_damaged_file_grants_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        assert!(load(&path).unwrap().is_empty());
        add(&path, "recursive or forced delete", "tui").unwrap();
        add(&path, "recursive or forced delete", "tui").unwrap();
        add(&path, "recursive or forced delete", "acp").unwrap();
        let kept = load(&path).unwrap();
        let tags: Vec<(&str, &str)> = kept
            .iter()
            .map(|a| (a.pattern.as_str(), a.surface.as_str()))
            .collect();
        assert_eq!(
            tags,
            [
                ("recursive or forced delete", "tui"),
                ("recursive or forced delete", "acp")
            ]
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(&path, "{not json").unwrap();
        assert!(load(&path).is_err());
        assert!(
            add(&path, "sudo", "tui").is_err(),
            "a damaged file is not overwritten"
        );
    }
}

//! The files a new session's prompt reads (`SOUL.md`, the installed skills), read at
//! most once per [`FRESH_FOR`]: sessions opened together (an API under load) share one
//! read, and an edit shows in sessions opened a moment later.

use herald_agent::skills::{self, SkillLibrary};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long one read serves new sessions.
pub const FRESH_FOR: Duration = Duration::from_secs(1);

/// What the files said.
#[derive(Debug, Default, PartialEq)]
pub struct PromptFiles {
    /// `SOUL.md` when it has text.
    pub soul: Option<String>,
    /// The skills index, when any skill is installed.
    pub skills_index: Option<String>,
}

impl PromptFiles {
    fn read(root: &Path, skills: &SkillLibrary) -> PromptFiles {
        let soul = std::fs::read_to_string(root.join("SOUL.md"))
            .ok()
            .filter(|s| !s.trim().is_empty());
        let installed = skills.discover();
        let skills_index = (!installed.is_empty()).then(|| skills::index(&installed));
        PromptFiles { soul, skills_index }
    }
}

/// The last read and when it was made.
#[derive(Default)]
pub struct PromptFileCache {
    last: Mutex<Option<(Instant, Arc<PromptFiles>)>>,
}

impl PromptFileCache {
    /// The files as read within [`FRESH_FOR`], read again when older.
    pub fn get(&self, root: &Path, skills: &SkillLibrary) -> Arc<PromptFiles> {
        let Ok(mut last) = self.last.lock() else {
            return Arc::new(PromptFiles::read(root, skills));
        };
        if let Some((at, files)) = last.as_ref()
            && at.elapsed() < FRESH_FOR
        {
            return files.clone();
        }
        let files = Arc::new(PromptFiles::read(root, skills));
        *last = Some((Instant::now(), files.clone()));
        files
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_read_serves_for_a_moment_then_edits_show() {
        let dir = tempfile::tempdir().unwrap();
        let skills = SkillLibrary::at(dir.path().join("skills"));
        let cache = PromptFileCache::default();
        assert_eq!(*cache.get(dir.path(), &skills), PromptFiles::default());
        std::fs::write(dir.path().join("SOUL.md"), "You are terse.").unwrap();
        assert_eq!(
            cache.get(dir.path(), &skills).soul,
            None,
            "still the first read"
        );
        std::thread::sleep(FRESH_FOR + Duration::from_millis(50));
        assert_eq!(
            cache.get(dir.path(), &skills).soul.as_deref(),
            Some("You are terse.")
        );
    }
}

//! The files a new session's prompt reads (`SOUL.md`, the installed skills, the
//! folder's `AGENTS.md`), read at most once per [`FRESH_FOR`]: sessions opened together
//! (an API under load) share one read, and an edit shows in sessions opened a moment
//! later. While every read is fresh a prompt is built without touching a file.

use herald_agent::skills::{self, SkillLibrary};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
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

/// Folders whose `AGENTS.md` is remembered at most (then the memory starts over).
const FOLDERS: usize = 64;

/// A folder's `AGENTS.md` when it has text.
pub type AgentsFile = Option<Arc<str>>;

/// The last reads and when they were made.
#[derive(Default)]
pub struct PromptFileCache {
    last: Mutex<Option<(Instant, Arc<PromptFiles>)>>,
    agents: Mutex<HashMap<PathBuf, (Instant, AgentsFile)>>,
}

fn read_agents(cwd: &Path) -> AgentsFile {
    std::fs::read_to_string(cwd.join("AGENTS.md"))
        .ok()
        .filter(|s| !s.trim().is_empty())
        .map(Arc::from)
}

impl PromptFileCache {
    /// Whether the files and `cwd`'s `AGENTS.md` were all read within [`FRESH_FOR`],
    /// so a prompt built now reads no file.
    pub fn fresh(&self, cwd: &Path) -> bool {
        let files = self
            .last
            .lock()
            .is_ok_and(|l| l.as_ref().is_some_and(|(at, _)| at.elapsed() < FRESH_FOR));
        let agents = self
            .agents
            .lock()
            .is_ok_and(|a| a.get(cwd).is_some_and(|(at, _)| at.elapsed() < FRESH_FOR));
        files && agents
    }

    /// `cwd`'s `AGENTS.md` as read within [`FRESH_FOR`], read again when older.
    pub fn agents(&self, cwd: &Path) -> AgentsFile {
        let Ok(mut known) = self.agents.lock() else {
            return read_agents(cwd);
        };
        if let Some((at, text)) = known.get(cwd)
            && at.elapsed() < FRESH_FOR
        {
            return text.clone();
        }
        if known.len() >= FOLDERS {
            known.clear();
        }
        let text = read_agents(cwd);
        known.insert(cwd.to_path_buf(), (Instant::now(), text.clone()));
        text
    }

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

    #[test]
    fn a_folders_agents_file_is_read_once_for_a_moment_and_freshness_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let skills = SkillLibrary::at(dir.path().join("skills"));
        let cache = PromptFileCache::default();
        assert!(!cache.fresh(dir.path()), "nothing read yet");
        std::fs::write(dir.path().join("AGENTS.md"), "Use tabs.").unwrap();
        cache.get(dir.path(), &skills);
        assert!(!cache.fresh(dir.path()), "AGENTS.md not read yet");
        assert_eq!(cache.agents(dir.path()).as_deref(), Some("Use tabs."));
        assert!(cache.fresh(dir.path()));
        let other = tempfile::tempdir().unwrap();
        assert!(!cache.fresh(other.path()), "another folder is its own");
        std::fs::write(dir.path().join("AGENTS.md"), "Use spaces.").unwrap();
        assert_eq!(cache.agents(dir.path()).as_deref(), Some("Use tabs."));
        std::thread::sleep(FRESH_FOR + Duration::from_millis(50));
        assert!(!cache.fresh(dir.path()));
        assert_eq!(cache.agents(dir.path()).as_deref(), Some("Use spaces."));
    }
}

//! Skills: `SKILL.md` documents under the home's `skills/` folder (nested categories),
//! their index for the system prompt (the `skills_list` / `skill_view` tools are in
//! `herald-tools`).

use std::path::{Path, PathBuf};

/// Largest SKILL.md read.
pub const MAX_SKILL_BYTES: u64 = 256 * 1024;

/// One installed skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The folders between `skills/` and the skill's own folder, joined with `/`.
    pub category: String,
    pub path: PathBuf,
}

/// Splits `---` front matter from the body; returns (name, description, body).
pub fn parse_skill(text: &str) -> (Option<String>, Option<String>, String) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (name, description, body) = parse_front(text);
    // Without a description: the first non-heading body line (80 characters).
    let description = description.or_else(|| {
        body.lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| l.chars().take(80).collect())
    });
    (name, description, body)
}

fn parse_front(text: &str) -> (Option<String>, Option<String>, String) {
    let Some(rest) = text.strip_prefix("---") else {
        return (None, None, text.to_owned());
    };
    let Some(end) = rest.find("\n---") else {
        return (None, None, text.to_owned());
    };
    let front = &rest[..end];
    let body = rest[end + 4..].trim_start_matches(['\r', '\n']).to_owned();
    let field = |key: &str| {
        front.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key)
                .then(|| v.trim().trim_matches(['"', '\'']).to_owned())
                .filter(|v| !v.is_empty())
        })
    };
    (field("name"), field("description"), body)
}

/// A skill's slash command name: lower case, spaces and underscores to hyphens, other
/// characters removed (agent spec §10.2).
pub fn slug(name: &str) -> String {
    name.chars()
        .filter_map(|c| match c {
            ' ' | '_' | '-' => Some('-'),
            c if c.is_alphanumeric() => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

/// Where skills are found and which are hidden: the home's `skills/`, then
/// `skills.external_dirs` (read-only; a local name wins), minus `skills.disabled` and
/// `skills.platform_disabled.<platform>` (agent spec §10.2).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillLibrary {
    pub root: PathBuf,
    pub external_dirs: Vec<PathBuf>,
    /// Names (or slugs) of hidden skills.
    pub disabled: Vec<String>,
    /// Skills Python plugins registered (`ctx.register_skill`), as
    /// `<plugin>:<name>`: loaded by that name only, never listed in the index.
    pub plugin_skills: PluginSkills,
}

/// The plugins' skills: (qualified name, path of its SKILL.md), shared by every copy
/// of a library and replaced when the plugins reload.
#[derive(Debug, Clone, Default)]
pub struct PluginSkills(std::sync::Arc<std::sync::RwLock<Vec<(String, PathBuf)>>>);

impl PluginSkills {
    pub fn set(&self, skills: Vec<(String, PathBuf)>) {
        if let Ok(mut s) = self.0.write() {
            *s = skills;
        }
    }

    fn path_of(&self, name: &str) -> Option<PathBuf> {
        let skills = self.0.read().ok()?;
        skills
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.clone())
    }
}

/// Every copy shares the same registry: equal as settings.
impl PartialEq for PluginSkills {
    fn eq(&self, _: &PluginSkills) -> bool {
        true
    }
}
impl Eq for PluginSkills {}

impl SkillLibrary {
    /// The skills under `root` alone.
    pub fn at(root: impl Into<PathBuf>) -> SkillLibrary {
        SkillLibrary {
            root: root.into(),
            ..SkillLibrary::default()
        }
    }

    /// Every visible skill, sorted by name.
    pub fn discover(&self) -> Vec<Skill> {
        let mut out = discover_in(&self.root);
        for dir in &self.external_dirs {
            for skill in discover_in(dir) {
                if !out.iter().any(|s| s.name == skill.name) {
                    out.push(skill);
                }
            }
        }
        out.retain(|s| !self.is_disabled(&s.name));
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    fn is_disabled(&self, name: &str) -> bool {
        let slugged = slug(name);
        self.disabled
            .iter()
            .any(|d| d == name || slug(d) == slugged)
    }

    /// The file of the named skill: a plugin's `<plugin>:<name>`, else a visible one.
    fn path_of(&self, name: &str) -> Option<PathBuf> {
        if name.contains(':') {
            return self.plugin_skills.path_of(name);
        }
        self.discover()
            .into_iter()
            .find(|s| s.name == name)
            .map(|s| s.path)
    }

    /// The body of the named skill.
    pub fn load(&self, name: &str) -> Option<String> {
        let (_, _, body) = parse_skill(&read_capped(&self.path_of(name)?)?);
        Some(body)
    }

    /// The body of skill `name` and the environment variables its front matter says it
    /// needs (`crate::skill_setup`).
    pub fn load_with_needs(
        &self,
        name: &str,
    ) -> Option<(String, Vec<crate::skill_setup::RequiredEnv>)> {
        let text = read_capped(&self.path_of(name)?)?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let front = text
            .strip_prefix("---")
            .and_then(|rest| rest.find("\n---").map(|end| &rest[..end]))
            .unwrap_or_default();
        let (_, _, body) = parse_skill(text);
        Some((body, crate::skill_setup::required_env(front)))
    }

    /// The user message for an explicit skill invocation (a webhook route's `skills:`, a
    /// chat's `/<slug>`): the first listed skill that exists wraps `instruction` (agent
    /// spec §10.3). Returns the message, the skill used, and the names not found.
    pub fn invocation_message(
        &self,
        names: &[String],
        instruction: &str,
        session_id: &str,
    ) -> (String, Option<String>, Vec<String>) {
        let installed = self.discover();
        let mut missing = Vec::new();
        for name in names {
            let Some(skill) = installed.iter().find(|s| &s.name == name) else {
                missing.push(name.clone());
                continue;
            };
            let Some(text) = read_capped(&skill.path) else {
                missing.push(name.clone());
                continue;
            };
            let dir = skill.path.parent().unwrap_or(&self.root);
            let msg = invocation_text(skill, dir, &text, instruction, session_id);
            return (msg, Some(skill.name.clone()), missing);
        }
        (instruction.to_owned(), None, missing)
    }
}

/// Every skill under `root`, sorted by name.
fn discover_in(root: &Path) -> Vec<Skill> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let dir_name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if [".git", ".github", ".hub", ".archive"].contains(&dir_name) {
                continue;
            }
            let file = path.join("SKILL.md");
            if file.is_file() {
                let text = read_capped(&file).unwrap_or_default();
                let (name, description, _) = parse_skill(&text);
                let folder = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default()
                    .to_owned();
                let category = path
                    .parent()
                    .and_then(|p| p.strip_prefix(root).ok())
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap_or_default();
                out.push(Skill {
                    name: name.unwrap_or(folder),
                    description: description.unwrap_or_default(),
                    category,
                    path: file,
                });
            } else {
                stack.push(path);
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

fn read_capped(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_SKILL_BYTES {
        return None;
    }
    std::fs::read_to_string(path).ok()
}

fn invocation_text(
    skill: &Skill,
    dir: &Path,
    text: &str,
    instruction: &str,
    session_id: &str,
) -> String {
    let (_, _, body) = parse_skill(text);
    let body = body
        .replace("${HERMES_SKILL_DIR}", &dir.display().to_string())
        .replace("${HERMES_SESSION_ID}", session_id);
    let mut files = Vec::new();
    for sub in ["references", "templates", "scripts", "assets"] {
        if let Ok(entries) = std::fs::read_dir(dir.join(sub)) {
            let mut names: Vec<String> = entries
                .flatten()
                .map(|e| format!("{sub}/{}", e.file_name().to_string_lossy()))
                .collect();
            names.sort();
            files.extend(names);
        }
    }
    let mut msg = format!(
        "[The user invoked the skill \"{}\". Follow its instructions.]\n\n{}\n\nSkill directory: {}",
        skill.name,
        body.trim_end(),
        dir.display()
    );
    if !files.is_empty() {
        msg.push_str(&format!("\nSupporting files: {}", files.join(", ")));
    }
    msg.push_str(&format!("\n\nUser instruction:\n{instruction}"));
    msg
}

/// The skills index for the system prompt.
pub fn index(skills: &[Skill]) -> String {
    let mut out = String::from("Skills (load one with skill_view when it fits the task):");
    for s in skills {
        out.push_str(&format!("\n- {}: {}", s.name, s.description));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frontmatter_and_nested_categories() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("devops/deploy")).unwrap();
        std::fs::write(
            root.join("devops/deploy/SKILL.md"),
            "---\nname: deploy-check\ndescription: \"Check a deploy\"\n---\nStep 1.\n",
        )
        .unwrap();
        std::fs::create_dir_all(root.join("plain")).unwrap();
        std::fs::write(root.join("plain/SKILL.md"), "No front matter.").unwrap();
        let library = SkillLibrary::at(root);
        let skills = library.discover();
        assert_eq!(skills.len(), 2);
        assert_eq!(
            (
                skills[0].name.as_str(),
                skills[0].description.as_str(),
                skills[0].category.as_str()
            ),
            ("deploy-check", "Check a deploy", "devops")
        );
        assert_eq!(skills[1].name, "plain");
        assert_eq!(library.load("deploy-check").unwrap(), "Step 1.\n");
        assert!(index(&skills).contains("- deploy-check: Check a deploy"));
        assert!(library.load("nope").is_none());
        assert_eq!(
            skills[1].description, "No front matter.",
            "the first body line stands in for a description"
        );
    }

    #[test]
    fn route_skill_invocation_uses_the_first_existing_skill() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("ops/triage/scripts")).unwrap();
        std::fs::write(root.join("ops/triage/SKILL.md"), "---\nname: triage\ndescription: Triage a PR\n---\nRun ${HERMES_SKILL_DIR}/scripts/check.sh for ${HERMES_SESSION_ID}.\n").unwrap();
        std::fs::write(root.join("ops/triage/scripts/check.sh"), "true").unwrap();
        std::fs::create_dir_all(root.join(".git/evil")).unwrap();
        std::fs::write(root.join(".git/evil/SKILL.md"), "---\nname: evil\n---\nx").unwrap();
        let names = vec!["ghost".to_owned(), "triage".to_owned(), "other".to_owned()];
        let library = SkillLibrary::at(root);
        let (msg, used, missing) = library.invocation_message(&names, "Review PR #7", "sess-1");
        assert_eq!(used.as_deref(), Some("triage"));
        assert_eq!(missing, vec!["ghost".to_owned()]);
        assert!(
            msg.starts_with("[The user invoked the skill \"triage\"."),
            "{msg}"
        );
        assert!(
            msg.contains(&format!(
                "Run {}/scripts/check.sh for sess-1.",
                root.join("ops/triage").display()
            )),
            "{msg}"
        );
        assert!(msg.contains("Supporting files: scripts/check.sh"), "{msg}");
        assert!(msg.ends_with("User instruction:\nReview PR #7"), "{msg}");
        let (plain, none, _) = library.invocation_message(&["evil".to_owned()], "x", "s");
        assert_eq!(
            (plain.as_str(), none),
            ("x", None),
            "skills under .git are skipped"
        );
    }

    #[test]
    fn external_dirs_and_disabled_skills() {
        let local = tempfile::tempdir().unwrap();
        let shared = tempfile::tempdir().unwrap();
        for (root, name, body) in [
            (local.path(), "review", "local"),
            (shared.path(), "review", "shared"),
            (shared.path(), "deploy", "shared deploy"),
            (shared.path(), "Old Tool", "old"),
        ] {
            std::fs::create_dir_all(root.join(name)).unwrap();
            std::fs::write(root.join(name).join("SKILL.md"), body).unwrap();
        }
        let library = SkillLibrary {
            root: local.path().to_path_buf(),
            external_dirs: vec![shared.path().to_path_buf()],
            disabled: vec!["old-tool".into()],
            plugin_skills: PluginSkills::default(),
        };
        let names: Vec<String> = library.discover().into_iter().map(|s| s.name).collect();
        assert_eq!(names, ["deploy", "review"]);
        assert_eq!(
            library.load("review").unwrap(),
            "local",
            "a local name wins"
        );
        assert_eq!(library.load("deploy").unwrap(), "shared deploy");
        assert!(library.load("Old Tool").is_none(), "disabled by its slug");
    }
}

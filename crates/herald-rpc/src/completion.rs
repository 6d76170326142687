//! Tab completion for Hermes's TUI: `complete.slash` over the command table and the
//! installed skills, `complete.path` over a folder's entries (and the `@` context tags),
//! in Hermes's shapes (`{items: [{text, display, meta}], replace_from}`).

use crate::catalog::{TUI_EXTRA, canonical, offered};
use crate::errors::RpcError;
use crate::gateway::Gateway;
use crate::params;
use herald_session::skills;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// At most this many items, as Hermes gives.
const MAX_ITEMS: usize = 30;
/// Matching entries of one folder looked at, at most (then sorted, then cut to 30).
const MAX_SCANNED: usize = 4096;

/// One completion.
#[derive(Debug, Serialize, PartialEq)]
pub struct Item {
    /// What replaces the text from `replace_from`.
    pub text: String,
    pub display: String,
    pub meta: String,
}

/// `complete.slash` and `complete.path`.
#[derive(Debug, Serialize)]
pub struct Completions {
    pub items: Vec<Item>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replace_from: Option<usize>,
}

fn item(text: impl Into<String>, display: impl Into<String>, meta: impl Into<String>) -> Item {
    Item {
        text: text.into(),
        display: display.into(),
        meta: meta.into(),
    }
}

/// `complete.slash {text}`.
pub fn slash(gw: &Gateway, p: params::Complete) -> Result<Completions, RpcError> {
    let text = p.text.unwrap_or_default();
    if !text.starts_with('/') {
        return Ok(Completions {
            items: Vec::new(),
            replace_from: None,
        });
    }
    let skills: Vec<(String, String)> = gw
        .host
        .runtime()
        .skills
        .discover()
        .into_iter()
        .map(|s| (skills::slug(&s.name), s.description))
        .collect();
    // A character index, as Hermes gives it (the text may hold non-ASCII letters).
    let replace_from = text.rfind(' ').map_or(1, |i| text[..i].chars().count() + 1);
    let items = match text.split_once(' ') {
        None => top_level(&text, &skills),
        Some((base, rest)) => subcommands(base, rest),
    };
    Ok(Completions {
        items,
        replace_from: Some(replace_from),
    })
}

/// `/wor`: the commands (and aliases), then the skills, whose name starts with `wor`;
/// then the TUI's own commands that match.
fn top_level(text: &str, skills: &[(String, String)]) -> Vec<Item> {
    let word = &text[1..];
    let completed = |name: &str| match name == word && name != "model" {
        true => format!("{name} "),
        false => name.to_owned(),
    };
    let mut items = Vec::new();
    for c in offered() {
        if c.name.starts_with(word) {
            items.push(item(
                completed(c.name),
                format!("/{}", c.name),
                c.described(),
            ));
        }
        for alias in c.aliases.iter().filter(|a| a.starts_with(word)) {
            let meta = format!("{} (alias for /{})", c.what, c.name);
            items.push(item(completed(alias), format!("/{alias}"), meta));
        }
    }
    for (slug, what) in skills.iter().filter(|(s, _)| s.starts_with(word)) {
        let short: String = what.chars().take(50).collect();
        let more = if what.chars().count() > 50 { "..." } else { "" };
        items.push(item(
            completed(slug),
            format!("/{slug}"),
            format!("⚡ {short}{more}"),
        ));
    }
    items.truncate(MAX_ITEMS);
    let lower = text.to_lowercase();
    for (name, what) in TUI_EXTRA {
        if name.starts_with(&lower) && !items.iter().any(|i| i.display == *name) {
            items.push(item(*name, *name, *what));
        }
    }
    items
}

/// `/busy q`: the command's subcommands that start with the word typed.
fn subcommands(base: &str, rest: &str) -> Vec<Item> {
    let Some(command) = canonical(base) else {
        return Vec::new();
    };
    let typed = rest.trim_start().to_lowercase();
    if typed.contains(' ') {
        return Vec::new();
    }
    command
        .subcommands()
        .into_iter()
        .filter(|s| s.starts_with(&typed) && *s != typed)
        .map(|s| item(s, s, ""))
        .take(MAX_ITEMS)
        .collect()
}

/// The `@` context tags Hermes offers for a bare `@`.
const CONTEXT_TAGS: [(&str, &str); 6] = [
    ("@diff", "git diff"),
    ("@staged", "staged diff"),
    ("@file:", "attach file"),
    ("@folder:", "attach folder"),
    ("@url:", "fetch url"),
    ("@git:", "git log"),
];

/// Which entries a listing keeps.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Any,
    Files,
    Folders,
}

/// `complete.path {word, cwd?, session_id?}`: entries of the folder the word names
/// (relative words from the session's folder), directories with a trailing `/`.
pub fn path(gw: &Gateway, p: params::Complete) -> Result<Completions, RpcError> {
    let word = p.word.clone().unwrap_or_default();
    let root = root_of(gw, &p);
    let items = match word.strip_prefix('@') {
        None if word.is_empty() => Vec::new(),
        None => listing(&root, &word, "", Kind::Any),
        Some("") => CONTEXT_TAGS
            .iter()
            .map(|(tag, what)| item(*tag, *tag, *what))
            .collect(),
        Some(rest) => match rest.split_once(':') {
            Some(("file", part)) => listing(&root, part, "@file:", Kind::Files),
            Some(("folder", part)) => listing(&root, part, "@folder:", Kind::Folders),
            _ => listing(&root, rest, "@file:", Kind::Any),
        },
    };
    Ok(Completions {
        items,
        replace_from: None,
    })
}

/// The folder relative words start from: `cwd` when it is one, else the live session's,
/// else `terminal.cwd`, else the process's.
fn root_of(gw: &Gateway, p: &params::Complete) -> PathBuf {
    let given = p.cwd.as_ref().map(PathBuf::from).filter(|d| d.is_dir());
    let session = || {
        gw.live(p.session_id.as_deref())
            .ok()
            .map(|l| l.conversation.session().cwd().to_path_buf())
    };
    given
        .or_else(session)
        .or_else(|| gw.host.runtime().cwd.clone())
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The entries of the folder `part` names whose name starts (any case) with its last
/// piece. `tag` (`@file:`…) goes before each text; a tagged listing skips dot files.
fn listing(root: &Path, part: &str, tag: &str, kind: Kind) -> Vec<Item> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let expanded = match (part.strip_prefix("~/"), &home) {
        (Some(rest), Some(h)) => h.join(rest),
        _ => PathBuf::from(part),
    };
    let (folder, prefix) = match part {
        "" | "." => (PathBuf::from("."), String::new()),
        p if p.ends_with('/') => (expanded, String::new()),
        _ => {
            let name = expanded
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            let parent = expanded.parent().map(Path::to_path_buf).unwrap_or_default();
            (parent, name.unwrap_or_default())
        }
    };
    let typed_dir = match part.rfind('/') {
        Some(i) => &part[..=i],
        None => "",
    };
    let folder = if folder.is_absolute() {
        folder
    } else {
        root.join(folder)
    };
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return Vec::new();
    };
    let wanted = prefix.to_lowercase();
    // Names are matched before anything is looked up (a folder may be huge); only
    // symlinks cost a stat to learn whether they lead to a folder.
    let mut names: Vec<(String, bool)> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .to_lowercase()
                .starts_with(&wanted)
        })
        .take(MAX_SCANNED)
        .map(|e| {
            let dir = e
                .file_type()
                .is_ok_and(|t| t.is_dir() || (t.is_symlink() && e.path().is_dir()));
            (e.file_name().to_string_lossy().into_owned(), dir)
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .filter(|(n, _)| tag.is_empty() || !n.starts_with('.') || wanted.starts_with('.'))
        .filter(|(_, dir)| match kind {
            Kind::Any => true,
            Kind::Files => !dir,
            Kind::Folders => *dir,
        })
        .take(MAX_ITEMS)
        .map(|(name, dir)| {
            let suffix = if dir { "/" } else { "" };
            let meta = if dir { "dir" } else { "" };
            let tag = match (tag, dir) {
                ("@file:", true) if kind == Kind::Any => "@folder:",
                (t, _) => t,
            };
            item(
                format!("{tag}{typed_dir}{name}{suffix}"),
                format!("{name}{suffix}"),
                meta,
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_words_complete_to_commands_aliases_and_the_tui_extras() {
        let items = top_level("/he", &[]);
        assert_eq!(items[0], item("help", "/help", "Show available commands"));
        let full = top_level("/help", &[]);
        assert_eq!(full[0].text, "help ", "a complete word gets its space");
        assert_eq!(top_level("/model", &[])[0].text, "model", "but not /model");
        let c = top_level("/c", &[("cook".into(), "d".repeat(60))]);
        let names: Vec<&str> = c.iter().map(|i| i.display.as_str()).collect();
        assert_eq!(
            names,
            ["/clear", "/compress", "/compact", "/context", "/cook"],
            "/compress and its alias /compact, then the skill; the TUI's /compact is not twice"
        );
        assert!(c[4].meta.ends_with("..."));
        let busy = subcommands("/busy", "s");
        let subs: Vec<&str> = busy.iter().map(|i| i.text.as_str()).collect();
        assert_eq!(subs, ["steer", "status"]);
        assert!(subcommands("/nope", "").is_empty());
    }

    #[test]
    fn paths_list_a_folder_with_dirs_marked_and_tags_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("Setup.py"), "").unwrap();
        std::fs::write(dir.path().join(".env"), "").unwrap();
        std::fs::write(dir.path().join("src/main.rs"), "").unwrap();
        let texts = |part: &str, tag: &str, kind: Kind| -> Vec<String> {
            listing(dir.path(), part, tag, kind)
                .into_iter()
                .map(|i| i.text)
                .collect()
        };
        assert_eq!(texts("s", "", Kind::Any), ["Setup.py", "src/"]);
        assert_eq!(texts("src/m", "", Kind::Any), ["src/main.rs"]);
        assert_eq!(texts(".e", "", Kind::Any), [".env"]);
        assert_eq!(texts("", "@file:", Kind::Files), ["@file:Setup.py"]);
        assert_eq!(texts("", "@folder:", Kind::Folders), ["@folder:src/"]);
        assert_eq!(
            texts("s", "@file:", Kind::Any),
            ["@file:Setup.py", "@folder:src/"]
        );
        assert!(texts("nowhere/x", "", Kind::Any).is_empty());
        let abs = format!("{}/sr", dir.path().display());
        assert_eq!(
            texts(&abs, "", Kind::Any),
            [format!("{}/src/", dir.path().display())]
        );
    }
}

//! Files an answer sends: `MEDIA:/path` tags (as Hermes's tools and skills write them)
//! are taken out of the text and the files sent after it, from allowed folders only:
//! the session's own folder, `terminal.cwd` when set, and the folders
//! `HERMES_MEDIA_ALLOW_DIRS` / `gateway.media_delivery_allow_dirs` name (Hermes's strict
//! mode: a model talked into `MEDIA:~/.ssh/id_rsa` sends nothing). A file that cannot be
//! sent is said in the chat, never dropped silently.

use super::platform::{OutFile, OutKind};
use std::path::{Path, PathBuf};

/// The largest file sent (the Bot API's upload limit).
pub const MAX_SEND_BYTES: u64 = 50 * 1024 * 1024;
/// Tags read from one answer at most.
const MAX_TAGS: usize = 10;

/// An answer with its `MEDIA:` tags taken out.
#[derive(Debug, Default, PartialEq)]
pub struct Media {
    /// The text without the tags (and without `[[audio_as_voice]]`, `[[as_document]]`).
    pub text: String,
    /// The paths as written.
    pub paths: Vec<String>,
    /// `[[audio_as_voice]]`: audio goes as a voice message.
    pub as_voice: bool,
    /// `[[as_document]]`: images go as files, uncompressed.
    pub as_document: bool,
}

/// Finds the tags outside code (fenced blocks and inline code hold examples).
pub fn extract(answer: &str) -> Media {
    let mut media = Media {
        as_voice: answer.contains("[[audio_as_voice]]"),
        as_document: answer.contains("[[as_document]]"),
        ..Media::default()
    };
    let answer = answer
        .replace("[[audio_as_voice]]", "")
        .replace("[[as_document]]", "");
    if !answer.contains("MEDIA:") {
        media.text = answer.trim().to_owned();
        return media;
    }
    let mut out = Vec::new();
    let mut fenced = false;
    for line in answer.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || media.paths.len() >= MAX_TAGS {
            out.push(line.to_owned());
            continue;
        }
        out.push(take_tags(line, &mut media.paths, MAX_TAGS));
    }
    media.text = out.join("\n").trim().to_owned();
    media
}

/// A line with its tags taken into `paths`, up to `cap` in all (tags inside inline
/// code, and those past the cap, stay).
fn take_tags(line: &str, paths: &mut Vec<String>, cap: usize) -> String {
    let mut kept = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("MEDIA:").filter(|_| paths.len() < cap) {
        let before = &rest[..at];
        let in_code = (kept.matches('`').count() + before.matches('`').count()) % 2 == 1;
        let after = &rest[at + "MEDIA:".len()..];
        match (in_code, tag_path(after)) {
            (false, Some((path, used))) => {
                kept.push_str(before.trim_end_matches(['`', '"', '\'']));
                paths.push(path);
                rest = &after[used..];
            }
            _ => {
                kept.push_str(&rest[..at + "MEDIA:".len()]);
                rest = after;
            }
        }
    }
    kept.push_str(rest);
    kept.trim_end().to_owned()
}

/// The path after `MEDIA:` (quoted, or up to a space) and the bytes it took; only
/// absolute paths and `~/` count.
fn tag_path(after: &str) -> Option<(String, usize)> {
    let lead = after.len() - after.trim_start_matches([' ', '\t']).len();
    let s = &after[lead..];
    let (raw, used) = match s.chars().next()? {
        q @ ('`' | '"' | '\'') => {
            let end = s[1..].find(q)?;
            (&s[1..1 + end], end + 2)
        }
        _ => {
            let end = s.find(char::is_whitespace).unwrap_or(s.len());
            (&s[..end], end)
        }
    };
    let path = raw
        .trim()
        .trim_end_matches([',', '.', ';', ':', ')', '}', ']', '`', '"', '\'']);
    match path.starts_with('/') || path.starts_with("~/") {
        true => Some((path.to_owned(), lead + used)),
        false => None,
    }
}

/// How a file goes, by its extension.
pub fn kind(path: &Path, as_voice: bool, as_document: bool) -> OutKind {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "jpg" | "jpeg" | "png" | "webp" if !as_document => OutKind::Photo,
        "ogg" | "opus" => OutKind::Voice,
        "mp3" | "m4a" | "wav" | "flac" if as_voice => OutKind::Voice,
        "mp3" | "m4a" | "wav" | "flac" => OutKind::Audio,
        "mp4" | "mov" | "webm" if !as_document => OutKind::Video,
        _ => OutKind::Document,
    }
}

/// Why a tag's file is not sent: one answer for a file that is missing and one that
/// is outside the allowed folders (a model cannot probe what exists).
const NOT_ALLOWED: &str = "it is not a file in a folder answers may send files from";

/// Where an answer's files may come from: its roots, less what is never sent.
#[derive(Debug, Clone, Default)]
pub struct Allowed {
    /// Allowed folders (canonical paths); `/` is never one.
    pub roots: Vec<PathBuf>,
    /// herald's home: nothing in it is sent but its `chat-files`.
    pub home: Option<PathBuf>,
}

impl Allowed {
    pub fn new(roots: &[PathBuf], home: &Path) -> Allowed {
        let roots = roots
            .iter()
            .filter_map(|r| r.canonicalize().ok())
            .filter(|r| r.parent().is_some())
            .collect();
        Allowed {
            roots,
            home: home.canonicalize().ok(),
        }
    }

    /// Whether a canonical path may be sent: under a root, in no hidden folder and no
    /// hidden file below it (`.ssh`, `.env`, `.aws`), not in herald's home but for the
    /// files people sent.
    fn admits(&self, real: &Path) -> bool {
        let Some(root) = self.roots.iter().find(|r| real.starts_with(r)) else {
            return false;
        };
        let hidden = real
            .strip_prefix(root)
            .map(|rest| {
                rest.components()
                    .any(|c| c.as_os_str().to_string_lossy().starts_with('.'))
            })
            .unwrap_or(true);
        let in_home = self
            .home
            .as_ref()
            .is_some_and(|h| real.starts_with(h) && !real.starts_with(h.join("chat-files")));
        !hidden && !in_home
    }
}

/// Reads a file a tag names, when it is an allowed regular file (after symlinks are
/// resolved, checked again on the opened file) and small enough. Blocking; never
/// waits on a FIFO or a device.
pub fn read(
    raw: &str,
    allowed: &Allowed,
    as_voice: bool,
    as_document: bool,
) -> Result<OutFile, String> {
    let path = herald_config::home::expand_tilde(raw);
    let real = path.canonicalize().map_err(|_| NOT_ALLOWED.to_owned())?;
    if !allowed.admits(&real) {
        return Err(NOT_ALLOWED.into());
    }
    let file = open_plain(&real).map_err(|_| NOT_ALLOWED.to_owned())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(NOT_ALLOWED.into());
    }
    if meta.len() > MAX_SEND_BYTES {
        return Err(format!("it is larger than {} MB", MAX_SEND_BYTES >> 20));
    }
    let mut bytes = Vec::new();
    use std::io::Read;
    file.take(MAX_SEND_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_SEND_BYTES {
        return Err(format!("it is larger than {} MB", MAX_SEND_BYTES >> 20));
    }
    let name = real
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("file")
        .to_owned();
    Ok(OutFile {
        kind: kind(&real, as_voice, as_document),
        name,
        bytes,
    })
}

/// Opens a path for reading without following a last symlink and without blocking
/// (a FIFO opens at once, and is then refused as no regular file).
fn open_plain(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    options.open(path)
}

/// A path as shown in the chat: its file name only (the folders are the host's).
pub fn shown(raw: &str) -> &str {
    raw.rsplit('/').next().unwrap_or(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_taken_out_of_the_text_but_not_out_of_code() {
        let m = extract(
            "Here is the chart.\nMEDIA:/tmp/out/chart.png\nAnd the report: `MEDIA:/x.pdf` stays.\n```\nMEDIA:/in/fence.png\n```\nMEDIA: \"/tmp/out/a b.pdf\".",
        );
        assert_eq!(m.paths, vec!["/tmp/out/chart.png", "/tmp/out/a b.pdf"]);
        assert!(
            m.text
                .starts_with("Here is the chart.\n\nAnd the report: `MEDIA:/x.pdf` stays."),
            "{}",
            m.text
        );
        assert!(m.text.contains("MEDIA:/in/fence.png"));
        assert!(!m.text.contains("a b.pdf"));
        // Relative paths are no tags.
        assert!(extract("MEDIA:relative.png").paths.is_empty());
        // At most ten, also from one line.
        let many = "MEDIA:/x.png ".repeat(500);
        let m = extract(&many);
        assert_eq!(m.paths.len(), MAX_TAGS);
        assert!(m.text.contains("MEDIA:/x.png"));
        let v = extract("[[audio_as_voice]]\nMEDIA:~/out/reply.mp3");
        assert!(v.as_voice);
        assert_eq!(v.paths, vec!["~/out/reply.mp3"]);
        assert_eq!(v.text, "");
    }

    #[test]
    fn files_outside_the_allowed_folders_are_refused_even_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let allowed = dir.path().join("allowed");
        std::fs::create_dir(&allowed).unwrap();
        std::fs::write(allowed.join("ok.png"), b"png").unwrap();
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, b"key").unwrap();
        std::os::unix::fs::symlink(&secret, allowed.join("link.txt")).unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join("chat-files/s1")).unwrap();
        std::fs::write(home.join(".env"), b"TOKEN=x").unwrap();
        std::fs::write(home.join("chat-files/s1/doc.pdf"), b"pdf").unwrap();
        std::fs::create_dir(allowed.join(".ssh")).unwrap();
        std::fs::write(allowed.join(".ssh/id_rsa"), b"key").unwrap();
        // The whole temp folder is a root (as a home set as terminal.cwd would be).
        let wide = [allowed.clone(), dir.path().to_owned(), "/".into()];
        let roots = Allowed::new(&wide, &home);
        assert!(
            !roots.roots.contains(&PathBuf::from("/")),
            "/ is never a root"
        );
        let path = |p: &Path| p.to_str().unwrap().to_owned();
        let ok = read(&path(&allowed.join("ok.png")), &roots, false, false).unwrap();
        assert_eq!((ok.name.as_str(), ok.kind), ("ok.png", OutKind::Photo));
        let sent = read(
            &path(&home.join("chat-files/s1/doc.pdf")),
            &roots,
            false,
            false,
        );
        assert!(sent.is_ok());
        for refused in [
            home.join(".env"),
            allowed.join(".ssh/id_rsa"),
            allowed.clone(),
            allowed.join("missing.png"),
        ] {
            let why = read(&path(&refused), &roots, false, false).unwrap_err();
            assert_eq!(why, NOT_ALLOWED, "{refused:?}");
        }
        // Only the allowed folder: a link out of it, and `..`, are refused.
        let narrow = Allowed::new(std::slice::from_ref(&allowed), &home);
        assert!(read(&path(&secret), &narrow, false, false).is_err());
        assert!(read(&path(&allowed.join("link.txt")), &narrow, false, false).is_err());
        let dotdot = format!("{}/../secret.txt", allowed.display());
        assert!(read(&dotdot, &narrow, false, false).is_err());
        // A FIFO is refused at once, never waited on.
        let fifo = allowed.join("pipe.png");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let why = read(&path(&fifo), &narrow, false, false).unwrap_err();
        assert_eq!(why, NOT_ALLOWED);
        assert_eq!(kind(Path::new("a.png"), false, true), OutKind::Document);
        assert_eq!(kind(Path::new("a.ogg"), false, false), OutKind::Voice);
    }
}

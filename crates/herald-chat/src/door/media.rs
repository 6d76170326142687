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
        out.push(take_tags(line, &mut media.paths));
    }
    media.text = out.join("\n").trim().to_owned();
    media
}

/// A line with its tags taken into `paths` (tags inside inline code stay).
fn take_tags(line: &str, paths: &mut Vec<String>) -> String {
    let mut kept = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("MEDIA:") {
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

/// Reads a file a tag names, when it is in an allowed folder (after symlinks are
/// resolved), a regular file and small enough. Blocking.
pub fn read(
    raw: &str,
    roots: &[PathBuf],
    as_voice: bool,
    as_document: bool,
) -> Result<OutFile, String> {
    let path = match raw.strip_prefix("~/") {
        Some(rest) => herald_config::home::user_home().join(rest),
        None => PathBuf::from(raw),
    };
    let real = path.canonicalize().map_err(|_| "no such file".to_owned())?;
    let allowed = roots
        .iter()
        .filter_map(|r| r.canonicalize().ok())
        .any(|r| real.starts_with(&r));
    if !allowed {
        return Err("it is outside the folders answers may send files from".into());
    }
    let meta = std::fs::metadata(&real).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("it is not a file".into());
    }
    if meta.len() > MAX_SEND_BYTES {
        return Err(format!("it is larger than {} MB", MAX_SEND_BYTES >> 20));
    }
    let bytes = std::fs::read(&real).map_err(|e| e.to_string())?;
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
        let roots = vec![allowed.clone()];
        let ok = read(
            allowed.join("ok.png").to_str().unwrap(),
            &roots,
            false,
            false,
        )
        .unwrap();
        assert_eq!((ok.name.as_str(), ok.kind), ("ok.png", OutKind::Photo));
        assert!(read(secret.to_str().unwrap(), &roots, false, false).is_err());
        assert!(
            read(
                allowed.join("link.txt").to_str().unwrap(),
                &roots,
                false,
                false
            )
            .is_err()
        );
        let dotdot = format!("{}/../secret.txt", allowed.display());
        assert!(read(&dotdot, &roots, false, false).is_err());
        assert!(read(allowed.to_str().unwrap(), &roots, false, false).is_err());
        assert_eq!(kind(Path::new("a.png"), false, true), OutKind::Document);
        assert_eq!(kind(Path::new("a.ogg"), false, false), OutKind::Voice);
    }
}

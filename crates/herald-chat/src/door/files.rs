//! Files a message brings: photos reach the model as image parts; documents, voice
//! notes, audio and video are saved in the session's folder
//! (`<home>/chat-files/<session id>/`) and named to the model with where they are;
//! small text documents are inlined as Hermes inlines them. Nothing sent is dropped
//! without a word: what cannot be fetched is said in the prompt.

use super::platform::{Attachment, AttachmentKind};
use super::{ChatDoor, Platform};
use herald_session::{ImageUrl, UserInput};
use std::path::{Path, PathBuf};

/// The largest file fetched (the Bot API's `getFile` limit, Hermes's default).
pub const MAX_FILE_BYTES: u64 = 20 * 1024 * 1024;
/// Text documents up to this size are inlined in the prompt (Hermes's limit).
const MAX_INLINE_BYTES: usize = 100 * 1024;

/// Extensions whose files are text to inline (UTF-8 permitting).
const TEXT_EXTENSIONS: &[&str] = &[
    "txt", "md", "markdown", "csv", "tsv", "log", "json", "jsonl", "ndjson", "xml", "yaml", "yml",
    "toml", "ini", "cfg", "conf", "html", "htm", "css", "py", "js", "ts", "tsx", "jsx", "sh",
    "bash", "c", "h", "cpp", "hpp", "cs", "java", "kt", "go", "rs", "rb", "php", "pl", "lua", "r",
    "swift", "scala", "sql", "graphql", "proto", "tf", "rst", "tex", "srt", "vtt", "diff", "patch",
];

/// The folder where a session's received files are kept.
pub fn session_folder(home: &Path, session_id: &str) -> PathBuf {
    home.join("chat-files")
        .join(herald_config::home::folder_name(session_id))
}

/// How long a received file is kept (Hermes keeps its document cache a day).
pub const KEEP_FILES_FOR: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Removes received files older than `max_age` under `<home>/chat-files`, and the
/// session folders left empty: how many files went. Blocking.
pub fn sweep(home: &Path, max_age: std::time::Duration) -> usize {
    let Some(cutoff) = std::time::SystemTime::now().checked_sub(max_age) else {
        return 0;
    };
    let Ok(folders) = std::fs::read_dir(home.join("chat-files")) else {
        return 0;
    };
    let mut removed = 0;
    for folder in folders.filter_map(Result::ok) {
        let dir = folder.path();
        let Ok(files) = std::fs::read_dir(&dir) else {
            continue;
        };
        for f in files.filter_map(Result::ok) {
            let old = f
                .metadata()
                .ok()
                .filter(|m| m.is_file())
                .and_then(|m| m.modified().ok())
                .is_some_and(|t| t < cutoff);
            if old && std::fs::remove_file(f.path()).is_ok() {
                removed += 1;
            }
        }
        // Only an empty folder goes.
        let _ = std::fs::remove_dir(&dir);
    }
    removed
}

/// A name safe to keep on disk: word characters, `.`, `-` and spaces, at most
/// [`MAX_NAME_BYTES`] (its extension kept).
fn safe_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| match c.is_alphanumeric() || ".- _".contains(c) {
            true => c,
            false => '_',
        })
        .collect();
    let cleaned = cleaned.trim_matches('.').trim();
    if cleaned.is_empty() {
        return "file".to_owned();
    }
    let ext = Path::new(cleaned)
        .extension()
        .and_then(|e| e.to_str())
        .filter(|e| e.len() <= 16)
        .map(|e| format!(".{e}"))
        .unwrap_or_default();
    let mut stem = String::new();
    for c in cleaned[..cleaned.len() - ext.len()].chars() {
        if stem.len() + c.len_utf8() + ext.len() > MAX_NAME_BYTES {
            break;
        }
        stem.push(c);
    }
    format!("{stem}{ext}")
}

/// The longest file name kept, in bytes (file systems allow 255).
const MAX_NAME_BYTES: usize = 120;
/// What one session's folder may hold.
pub const SESSION_QUOTA_BYTES: u64 = 500 * 1024 * 1024;

impl<P: Platform> ChatDoor<P> {
    /// The message's text, its photos as images and its other files saved and named.
    pub(crate) async fn input(
        &self,
        text: &str,
        files: &[Attachment],
        session_id: &str,
        inbox_id: i64,
    ) -> UserInput {
        let mut input = UserInput::from(text.trim());
        let mut notes = Vec::new();
        for (i, file) in files.iter().enumerate() {
            match file.kind {
                AttachmentKind::Photo => match self.photo(file).await {
                    Ok(url) => input.images.push(ImageUrl { url, detail: None }),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot fetch an image from the chat");
                        notes.push(format!("[An image was sent but could not be fetched: {e}]"));
                    }
                },
                _ => {
                    let prefix = format!("{inbox_id}-{i}");
                    notes.push(self.saved(file, session_id, &prefix).await);
                }
            }
        }
        if !notes.is_empty() {
            notes.push(input.text.clone());
            input.text = notes.join("\n\n").trim_end().to_owned();
        }
        input
    }

    async fn photo(&self, file: &Attachment) -> Result<String, String> {
        let max = herald_session::images::MAX_ATTACHED_BYTES;
        let got = self.platform.download(&file.file_id, max).await?;
        let mime = herald_session::images::mime(Path::new(&got.path)).unwrap_or("image/jpeg");
        Ok(herald_session::images::data_url(mime, &got.bytes))
    }

    /// Saves one file in the session's folder: the note that tells the model of it.
    async fn saved(&self, file: &Attachment, session_id: &str, prefix: &str) -> String {
        let what = describe(file);
        if file.size.is_some_and(|n| n > MAX_FILE_BYTES) {
            return format!(
                "[The user sent {what}, larger than {} MB; herald did not fetch it.]",
                MAX_FILE_BYTES >> 20
            );
        }
        let got = match self.platform.download(&file.file_id, MAX_FILE_BYTES).await {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(error = %e, "cannot fetch a file from the chat");
                return format!("[The user sent {what}, but it could not be fetched: {e}]");
            }
        };
        let name = file_name(file, &got.path);
        let home = self.conversations.host().runtime().home.root().to_owned();
        let dir = session_folder(&home, session_id);
        let path = dir.join(format!("{prefix}-{}", safe_name(&name)));
        let (bytes, to) = (got.bytes, path.clone());
        let written = tokio::task::spawn_blocking(move || save(&dir, &to, &bytes).map(|()| bytes))
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(|r| r);
        let bytes = match written {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "cannot save a file from the chat");
                return format!("[The user sent {what}, but herald could not save it: {e}]");
            }
        };
        note(file, &name, &path, &bytes)
    }
}

/// What a file is, for the model: "a document (report.pdf)".
fn describe(file: &Attachment) -> String {
    let kind = match file.kind {
        AttachmentKind::Photo => "a photo",
        AttachmentKind::Document => "a document",
        AttachmentKind::Voice => "a voice message",
        AttachmentKind::Audio => "an audio file",
        AttachmentKind::Video => "a video",
    };
    match &file.name {
        Some(n) => format!("{kind} ({})", safe_name(n)),
        None => kind.to_owned(),
    }
}

/// The file's name: as sent, else a name with the extension of the platform's path.
fn file_name(file: &Attachment, platform_path: &str) -> String {
    if let Some(n) = &file.name {
        return n.clone();
    }
    let ext = Path::new(platform_path)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("bin");
    let stem = match file.kind {
        AttachmentKind::Voice => "voice",
        AttachmentKind::Audio => "audio",
        AttachmentKind::Video => "video",
        _ => "document",
    };
    format!("{stem}.{ext}")
}

/// The note for a saved file; a small text document's content follows it.
fn note(file: &Attachment, name: &str, path: &Path, bytes: &[u8]) -> String {
    let (name, at) = (safe_name(name), path.display());
    match file.kind {
        AttachmentKind::Voice | AttachmentKind::Audio => format!(
            "[The user sent {}. It is saved at: {at}. No transcription is configured, so its words are not known; process the file with your tools if you can.]",
            describe(file)
        ),
        AttachmentKind::Video => format!(
            "[The user sent a video: '{name}'. It is saved at: {at}. Inspect it with your tools if the request needs what it shows.]"
        ),
        _ => match inline_text(file, &name, bytes) {
            Some(text) => format!(
                "[The user sent a text document: '{name}'. Its content is included below. The file is also saved at: {at}]\n[Content of {name}]:\n{text}"
            ),
            None => format!(
                "[The user sent a document: '{name}'. It is saved at: {at}. Its text is not inlined here; read it with your tools (the terminal, for example) before answering rather than asking the user to paste it.]"
            ),
        },
    }
}

/// A document's text when it is small text (by extension or MIME type, never by a
/// blind decode: a PDF's header decodes too).
fn inline_text<'a>(file: &Attachment, name: &str, bytes: &'a [u8]) -> Option<&'a str> {
    let ext = Path::new(name)
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let texty = TEXT_EXTENSIONS.contains(&ext.as_str())
        || file.mime.as_deref().is_some_and(|m| m.starts_with("text/"));
    match texty && bytes.len() <= MAX_INLINE_BYTES {
        true => std::str::from_utf8(bytes).ok(),
        false => None,
    }
}

/// Writes a file only its owner reads, in a folder only its owner reads, within the
/// session's quota; a link planted at its name is replaced, never followed.
fn save(dir: &Path, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    herald_config::home::create_private_dir(dir)?;
    let held: u64 = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len())
        .sum();
    if held + bytes.len() as u64 > SESSION_QUOTA_BYTES {
        return Err(std::io::Error::other(format!(
            "the session's folder holds its {} MB already",
            SESSION_QUOTA_BYTES >> 20
        )));
    }
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path)?.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(name: &str, mime: Option<&str>) -> Attachment {
        Attachment {
            file_id: "f".into(),
            name: Some(name.into()),
            size: Some(10),
            mime: mime.map(str::to_owned),
            kind: AttachmentKind::Document,
        }
    }

    #[test]
    fn small_text_is_inlined_and_binaries_are_pointed_to() {
        let p = Path::new("/h/chat-files/s/1-0-notes.md");
        let text = note(&doc("notes.md", None), "notes.md", p, b"# Title\nbody");
        assert!(
            text.contains("[Content of notes.md]:\n# Title\nbody"),
            "{text}"
        );
        let pdf = note(
            &doc("r.pdf", Some("application/pdf")),
            "r.pdf",
            p,
            b"%PDF-1.7 ascii",
        );
        assert!(
            pdf.contains("It is saved at: /h/chat-files/s/1-0-notes.md"),
            "{pdf}"
        );
        assert!(!pdf.contains("%PDF"));
        let big = vec![b'a'; MAX_INLINE_BYTES + 1];
        assert!(!note(&doc("big.txt", None), "big.txt", p, &big).contains("[Content of"));
        let mime_text = note(&doc("README", Some("text/plain")), "README", p, b"hi");
        assert!(mime_text.contains("[Content of README]:\nhi"));
        let not_utf8 = note(&doc("x.txt", None), "x.txt", p, &[0xff, 0xfe]);
        assert!(!not_utf8.contains("[Content of"));
    }

    #[test]
    fn a_saved_file_replaces_a_planted_link_and_keeps_to_the_quota() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside.txt");
        std::fs::write(&outside, b"keep").unwrap();
        let folder = dir.path().join("s");
        std::fs::create_dir(&folder).unwrap();
        let at = folder.join("1-0-a.txt");
        std::os::unix::fs::symlink(&outside, &at).unwrap();
        save(&folder, &at, b"new").unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"keep");
        assert_eq!(std::fs::read(&at).unwrap(), b"new");
        let big = vec![0u8; (SESSION_QUOTA_BYTES / 2) as usize + 1];
        save(&folder, &folder.join("big1"), &big).unwrap();
        assert!(save(&folder, &folder.join("big2"), &big).is_err());
    }

    #[test]
    fn files_older_than_a_day_are_swept_and_empty_folders_go() {
        let home = tempfile::tempdir().unwrap();
        let (a, b) = (
            session_folder(home.path(), "a"),
            session_folder(home.path(), "b"),
        );
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(25 * 3600);
        for p in [a.join("1-0-old.pdf"), b.join("2-0-old.txt")] {
            std::fs::write(&p, b"x").unwrap();
            let f = std::fs::File::options().write(true).open(&p).unwrap();
            f.set_modified(old).unwrap();
        }
        std::fs::write(b.join("3-0-new.txt"), b"y").unwrap();
        assert_eq!(sweep(home.path(), KEEP_FILES_FOR), 2);
        assert!(!a.exists(), "an emptied folder goes");
        assert!(b.join("3-0-new.txt").exists());
        assert_eq!(
            sweep(tempfile::tempdir().unwrap().path(), KEEP_FILES_FOR),
            0
        );
    }

    #[test]
    fn names_cannot_leave_the_folder() {
        assert_eq!(safe_name("../../etc/passwd"), "_.._etc_passwd");
        assert_eq!(safe_name(".."), "file");
        assert_eq!(safe_name("report 2026.pdf"), "report 2026.pdf");
        // Long names in many-byte characters stay within a file system's limit, with
        // their extension.
        let long = safe_name(&format!("{}.pdf", "日本".repeat(200)));
        assert!(
            long.len() <= MAX_NAME_BYTES && long.ends_with(".pdf"),
            "{long}"
        );
        assert_eq!(
            session_folder(Path::new("/h"), "../x"),
            PathBuf::from("/h/chat-files/___x")
        );
    }
}

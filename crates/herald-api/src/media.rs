//! `MEDIA:<path>` image tags in a whole answer, inlined as markdown `data:` URLs
//! (§5.4): remote front-ends cannot read the server's files. Only safe paths qualify:
//! an absolute (or `~/`) path to a regular image file of at most 5 MB, outside the
//! system and credential folders and outside herald's home; anything else is left as
//! it was.

use herald_session::images;
use regex::{Captures, Regex};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

const MAX_BYTES: u64 = 5 * 1024 * 1024;

const DENIED_PREFIXES: [&str; 9] = [
    "/etc", "/proc", "/sys", "/dev", "/root", "/boot", "/var/log", "/var/lib", "/var/run",
];

const DENIED_IN_HOME: [&str; 8] = [
    ".ssh", ".aws", ".gnupg", ".kube", ".docker", ".config", ".azure", ".gcloud",
];

static TAG: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r#"[`"']?MEDIA:\s*(`[^`\n]+`|"[^"\n]+"|'[^'\n]+'|(?:~/|/)[^\s`"']+)[`"']?"#).ok()
});

/// The resolved file a tag's path names, when it is safe to show.
fn safe_file(raw: &str, herald_home: &Path) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let expanded = match (raw.strip_prefix("~/"), &home) {
        (Some(rest), Some(h)) => h.join(rest),
        (Some(_), None) => return None,
        (None, _) => PathBuf::from(raw),
    };
    if !expanded.is_absolute() {
        return None;
    }
    let resolved = expanded.canonicalize().ok()?;
    let meta = resolved.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return None;
    }
    let denied = DENIED_PREFIXES.iter().any(|p| resolved.starts_with(p))
        || home.is_some_and(|h| {
            DENIED_IN_HOME
                .iter()
                .any(|d| resolved.starts_with(h.join(d)))
        })
        || herald_home
            .canonicalize()
            .is_ok_and(|h| resolved.starts_with(h));
    (!denied).then_some(resolved)
}

fn data_url(raw: &str, herald_home: &Path) -> Option<String> {
    let path = safe_file(raw, herald_home)?;
    let mime = images::mime(&path)?;
    let bytes = std::fs::read(&path).ok()?;
    Some(format!("![image]({})", images::data_url(mime, &bytes)))
}

/// `text` with each safe image tag replaced by its inline image.
pub fn inline_images(text: &str, herald_home: &Path) -> String {
    let Some(tag) = TAG.as_ref() else {
        return text.to_owned();
    };
    if !text.contains("MEDIA:") {
        return text.to_owned();
    }
    tag.replace_all(text, |c: &Captures<'_>| {
        let whole = &c[0];
        let quoted = c[1].trim_matches(|ch| matches!(ch, '`' | '"' | '\''));
        let path = quoted.trim_end_matches([',', '.', ';', ':', ')', '}', ']']);
        let Some(image) = data_url(path, herald_home) else {
            return whole.to_owned();
        };
        // Punctuation the path swallowed stays in the text.
        let tail = if c[1].starts_with(['`', '"', '\'']) {
            ""
        } else {
            &quoted[path.len()..]
        };
        format!("{image}{tail}")
    })
    .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_images_are_inlined_and_everything_else_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let herald_home = dir.path().join("home");
        std::fs::create_dir_all(&herald_home).unwrap();
        let pic = dir.path().join("pic.png");
        std::fs::write(&pic, b"\x89PNG").unwrap();
        std::fs::write(herald_home.join("secret.png"), b"x").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        let p = pic.display();
        let text = format!(
            "See MEDIA:{p}. Also `MEDIA:{p}` and MEDIA:{}/secret.png and MEDIA:{}/notes.txt and MEDIA:/etc/hostname and MEDIA:rel/pic.png",
            herald_home.display(),
            dir.path().display()
        );
        let out = inline_images(&text, &herald_home);
        let url = "![image](data:image/png;base64,iVBORw==)";
        assert!(
            out.starts_with(&format!("See {url}. Also {url} and MEDIA:")),
            "{out}"
        );
        assert!(out.contains("/secret.png and MEDIA:"), "{out}");
        assert!(out.contains("notes.txt and MEDIA:/etc/hostname and MEDIA:rel/pic.png"));
        assert_eq!(inline_images("no tags", &herald_home), "no tags");
    }
}

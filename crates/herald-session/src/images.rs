//! Images as OpenAI `image_url` parts: a local image file read into a `data:` URL (what
//! an attached path becomes, and what the API inlines), and the check every door's
//! image URLs pass (an `http(s)` URL or a `data:image/...` URL).

use base64::Engine;
use herald_protocol::{ImageUrl, UserInput};
use std::path::Path;

/// Largest local image attached to a prompt.
pub const MAX_ATTACHED_BYTES: u64 = 20 * 1024 * 1024;

/// The MIME type of an image file by its extension.
pub fn mime(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        _ => return None,
    })
}

/// `bytes` of type `mime` as a `data:` URL.
pub fn data_url(mime: &str, bytes: &[u8]) -> String {
    let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    format!("data:{mime};base64,{encoded}")
}

/// A local image file (at most `max` bytes) as a `data:` URL; `None` when it is no
/// image, too big or unreadable. Blocking: call it off the async workers.
pub fn read_data_url(path: &Path, max: u64) -> Option<String> {
    let mime = mime(path)?;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > max {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    Some(data_url(mime, &bytes))
}

/// Why an image URL is refused, as the API's codes name it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefused {
    #[error("Image parts must include a non-empty image URL.")]
    Empty,
    #[error("Only image data URLs are supported. Non-image data payloads are not supported.")]
    NotAnImage,
    #[error("Image inputs must use http(s) URLs or data:image/... URLs.")]
    Scheme,
}

impl ImageRefused {
    /// The OpenAI-style error code.
    pub fn code(&self) -> &'static str {
        match self {
            ImageRefused::Empty | ImageRefused::Scheme => "invalid_image_url",
            ImageRefused::NotAnImage => "unsupported_content_type",
        }
    }
}

/// `url` (trimmed) when it is an `http(s)` URL or a `data:image/...,` URL.
pub fn checked_url(url: &str) -> Result<String, ImageRefused> {
    let url = url.trim();
    if url.is_empty() {
        return Err(ImageRefused::Empty);
    }
    let lowered = url.to_ascii_lowercase();
    if lowered.starts_with("data:") {
        if !lowered.starts_with("data:image/") || !url.contains(',') {
            return Err(ImageRefused::NotAnImage);
        }
    } else if !(lowered.starts_with("http://") || lowered.starts_with("https://")) {
        return Err(ImageRefused::Scheme);
    }
    Ok(url.to_owned())
}

/// `input` with the images at `paths` attached, as Hermes attaches them natively: each
/// readable one an image part and a line `[Image attached at: PATH]` after the text;
/// one that cannot be read is named for `vision_analyze` instead, never dropped.
/// Blocking: call it off the async workers.
pub fn attach_files(mut input: UserInput, paths: &[String]) -> UserInput {
    let mut hints = Vec::new();
    let mut unread = Vec::new();
    for path in paths {
        match read_data_url(Path::new(path), MAX_ATTACHED_BYTES) {
            Some(url) => {
                input.images.push(ImageUrl { url, detail: None });
                hints.push(format!("[Image attached at: {path}]"));
            }
            None => unread.push(format!(
                "[Attached image: {path} (look at it with vision_analyze)]"
            )),
        }
    }
    if !unread.is_empty() {
        input.text = format!("{}\n\n{}", unread.join("\n"), input.text);
    }
    if !hints.is_empty() {
        input.text = format!("{}\n\n{}", input.text, hints.join("\n"));
    }
    input
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_as_hermes_checks_them() {
        assert_eq!(checked_url(" https://x/a.png ").unwrap(), "https://x/a.png");
        assert!(checked_url("data:image/png;base64,AAAA").is_ok());
        assert_eq!(checked_url(""), Err(ImageRefused::Empty));
        assert_eq!(
            checked_url("data:text/plain,hi"),
            Err(ImageRefused::NotAnImage)
        );
        assert_eq!(checked_url("data:image/png"), Err(ImageRefused::NotAnImage));
        assert_eq!(checked_url("file:///etc/passwd"), Err(ImageRefused::Scheme));
        assert_eq!(ImageRefused::Scheme.code(), "invalid_image_url");
        assert_eq!(ImageRefused::NotAnImage.code(), "unsupported_content_type");
    }

    #[test]
    fn attached_files_become_parts_and_an_unreadable_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("cat.png");
        std::fs::write(&png, [0x89, b'P', b'N', b'G']).unwrap();
        let png = png.display().to_string();
        let gone = dir.path().join("gone.png").display().to_string();
        let input = attach_files("look".into(), &[png.clone(), gone.clone()]);
        assert_eq!(input.images.len(), 1);
        assert_eq!(input.images[0].url, "data:image/png;base64,iVBORw==");
        assert!(input.text.starts_with(&format!("[Attached image: {gone}")));
        assert!(
            input
                .text
                .ends_with(&format!("look\n\n[Image attached at: {png}]"))
        );
    }
}

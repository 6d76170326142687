//! Untrusted text (paths, header values, config values) in a log line or an error
//! message: quoted, escaped and cut, so that one input can never make a huge line.

/// The longest untrusted text put in a log line, in bytes.
pub const MAX_LOGGED_BYTES: usize = 200;

/// Untrusted text for a log line: quoted and escaped, cut to [`MAX_LOGGED_BYTES`].
pub fn quoted(text: &str) -> Quoted<'_> {
    Quoted(text)
}

/// Untrusted text for a log field (the log format quotes and escapes fields itself): as
/// it is when short, else its first [`MAX_LOGGED_BYTES`] bytes and its length.
pub fn cut(text: &str) -> std::borrow::Cow<'_, str> {
    let kept = prefix(text);
    if kept.len() == text.len() {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(format!("{kept}… ({} bytes)", text.len()))
}

/// The longest prefix of `text` within [`MAX_LOGGED_BYTES`] that ends on a character.
fn prefix(text: &str) -> &str {
    let mut end = text.len().min(MAX_LOGGED_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The [`Display`](std::fmt::Display) of [`quoted`] (no allocation).
pub struct Quoted<'a>(pub &'a str);

impl std::fmt::Display for Quoted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = self.0;
        let kept = prefix(text);
        if kept.len() < text.len() {
            write!(f, "{kept:?}… ({} bytes)", text.len())
        } else {
            write!(f, "{text:?}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_cuts_long_and_escapes_control_text() {
        assert_eq!(quoted("a\nb").to_string(), r#""a\nb""#);
        let long = "é".repeat(1000);
        let q = quoted(&long).to_string();
        assert!(q.len() < MAX_LOGGED_BYTES + 40, "{}", q.len());
        assert!(q.ends_with("(2000 bytes)"));
        assert_eq!(cut("short"), "short");
        assert!(cut(&long).len() < MAX_LOGGED_BYTES + 20);
    }
}

//! Credentials stripped from error text before it reaches the model, as Hermes strips
//! them (`ghp_…`, `sk-…`, `Bearer …`, `token=`, `key=`, `password=`, `secret=`), and a
//! few shapes Hermes misses (`github_pat_…`, Slack `xox?-…`, `Basic …`, JSON
//! `"token": "…"`).

use regex::Regex;
use std::sync::LazyLock;

static SHAPES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"(?i)ghp_[A-Za-z0-9_]{1,255}",
        r"(?i)github_pat_[A-Za-z0-9_]{1,255}",
        r"(?i)sk-[A-Za-z0-9_\-]{1,255}",
        r"(?i)xox[abprs]-[A-Za-z0-9\-]{1,255}",
        r"(?i)(bearer|basic)\s+\S+",
        r#"(?i)(token|key|api_key|password|secret)=[^\s&,;"']{1,255}"#,
        r#"(?i)"(token|api_key|apikey|password|secret|access_token)"\s*:\s*"[^"]{1,255}""#,
    ]
    .iter()
    .filter_map(|p| Regex::new(p).ok())
    .collect()
});

/// `text` with every credential shape replaced by `[REDACTED]`.
pub fn redacted(text: &str) -> String {
    let mut out = text.to_owned();
    for shape in SHAPES.iter() {
        if shape.is_match(&out) {
            out = shape.replace_all(&out, "[REDACTED]").into_owned();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_stripped() {
        let t = redacted(
            "failed: Bearer abc.def token=xyz ghp_123 sk-live-9 {\"password\": \"p\"} apikey=1",
        );
        for secret in [
            "abc.def",
            "xyz",
            "ghp_123",
            "sk-live-9",
            "\"p\"",
            "apikey=1",
        ] {
            assert!(!t.contains(secret), "{t}");
        }
        assert!(t.starts_with("failed: [REDACTED]"), "{t}");
    }
}

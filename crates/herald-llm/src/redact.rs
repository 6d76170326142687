//! Provider text made safe to pass on. A provider's error message reaches API answers,
//! run events, RPC and ACP errors and the CLI word for word, and a provider (or a proxy
//! in front of it) that echoes the request shows the caller the key it was sent. Before
//! any provider text leaves the client, the endpoint's own secrets (its key, the
//! password in its URL, its extra header values) and anything shaped like a credential
//! (an `Authorization` value, a bearer token, a known key prefix, an `x-api-key` value,
//! a URL's `user:password@`, a JWT, and Hermes's `token=`, `key=`, `password=`,
//! `secret=` and JSON `"token": "…"` forms) become `[REDACTED]`. The shapes alone
//! ([`shapes_redacted`]) also clean what MCP servers say before the model reads it.

use crate::endpoint::Endpoint;
use regex::Regex;
use std::sync::LazyLock;

/// What stands in for a secret.
pub const REDACTED: &str = "[REDACTED]";

/// Secrets shorter than this are not searched for by value (they would match ordinary
/// words); the shape patterns still apply.
const MIN_SECRET_LEN: usize = 6;

static SHAPES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // The header's value, with or without its scheme word.
        (
            r"(?i)((?:proxy-)?authorization[\x22']?\s*[:=]\s*[\x22']?)(?:[a-z][\w.+-]*\s+)?[^\s\x22',}]+",
            "${1}[REDACTED]",
        ),
        (r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=-]+", "$1 [REDACTED]"),
        (r"(?i)\b(basic)\s+[A-Za-z0-9+/=]{8,}", "$1 [REDACTED]"),
        (
            r"(?i)((?:x-api-key|x-goog-api-key|api-key|apikey|api_key|x-auth-token|x-access-token)[\x22']?\s*[:=]\s*[\x22']?)[^\s\x22',}]+",
            "${1}[REDACTED]",
        ),
        (
            r"\b(?:sk-|sk_live_|sk_test_|sk-ant-|ghp_|gho_|ghs_|github_pat_|xox[baprs]-|hf_|gsk_|pplx-|xai-|r8_|AIza)[A-Za-z0-9_-]{6,}",
            "[REDACTED]",
        ),
        (r"\bAKIA[A-Z0-9]{16}\b", "[REDACTED]"),
        (r"(?i)\b([a-z][a-z0-9+.-]*://[^\s/:@]+):[^\s/@]+@", "$1:[REDACTED]@"),
        (r"\beyJ[A-Za-z0-9_-]{10,}(?:\.[A-Za-z0-9_=-]{4,}){0,2}", "[REDACTED]"),
        (
            r#"(?i)\b(token|key|api_key|access_token|password|passwd|secret)=[^\s&,;"']+"#,
            "$1=[REDACTED]",
        ),
        (
            r#"(?i)"(token|api_key|apikey|password|secret|access_token|refresh_token)"\s*:\s*"[^"]*""#,
            "\"$1\": \"[REDACTED]\"",
        ),
    ]
    .into_iter()
    .filter_map(|(re, with)| Regex::new(re).ok().map(|r| (r, with)))
    .collect()
});

/// The secrets `endpoint` holds: its key, its URL's password, its extra header values.
fn secrets(endpoint: &Endpoint) -> Vec<&str> {
    let password = endpoint
        .base_url
        .split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
        .and_then(|authority| authority.rsplit_once('@'))
        .and_then(|(userinfo, _)| userinfo.split_once(':'))
        .map(|(_, password)| password);
    std::iter::once(endpoint.api_key.as_str())
        .chain(password)
        .chain(endpoint.extra_headers.iter().map(|(_, v)| v.as_str()))
        .filter(|s| s.len() >= MIN_SECRET_LEN)
        .collect()
}

/// `text` with `endpoint`'s secrets and every credential-shaped value replaced.
pub fn redacted(text: &str, endpoint: &Endpoint) -> String {
    let mut out = text.to_owned();
    for secret in secrets(endpoint) {
        if out.contains(secret) {
            out = out.replace(secret, REDACTED);
        }
    }
    shapes_redacted(&out)
}

/// `text` with every credential-shaped value replaced (no endpoint's own secrets).
pub fn shapes_redacted(text: &str) -> String {
    let mut out = text.to_owned();
    for (shape, with) in SHAPES.iter() {
        if shape.is_match(&out) {
            out = shape.replace_all(&out, *with).into_owned();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(key: &str, base_url: &str) -> Endpoint {
        let mut e = Endpoint::new(base_url, key, "m");
        e.extra_headers = vec![("X-Tenant-Secret".into(), "tenant-secret-value".into())];
        e
    }

    #[test]
    fn the_endpoints_secrets_and_credential_shapes_are_replaced() {
        let e = endpoint("local-key-123", "http://u:hunter22@127.0.0.1:1/v1");
        let echoed = "bad request; you sent Authorization: Bearer local-key-123 and \
            {\"authorization\": \"Bearer abcdefgh12345678\"} x-api-key: zzzzzzzz9 \
            password hunter22 header tenant-secret-value key sk-abcdefghijklmnop \
            url https://me:pw123456@example.com/x jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_value";
        let out = redacted(echoed, &e);
        for secret in [
            "local-key-123",
            "abcdefgh12345678",
            "zzzzzzzz9",
            "hunter22",
            "tenant-secret-value",
            "sk-abcdefghijklmnop",
            "pw123456",
            "eyJhbGci",
        ] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
        assert!(
            out.starts_with("bad request; you sent Authorization: [REDACTED]"),
            "{out}"
        );
    }

    #[test]
    fn hermes_forms_are_replaced_too() {
        let t = shapes_redacted(
            "failed: Bearer abc.def token=xyz ghp_1234567890ab sk-live-9abcdefghij {\"password\": \"p\"} apikey=1 Basic dXNlcjpwYXNz",
        );
        for secret in [
            "abc.def",
            "xyz",
            "ghp_1234567890ab",
            "sk-live-9abcdefghij",
            "\"p\"",
            "apikey=1",
            "dXNlcjpwYXNz",
        ] {
            assert!(!t.contains(secret), "{secret} in {t}");
        }
        assert!(t.starts_with("failed: Bearer [REDACTED]"), "{t}");
    }

    #[test]
    fn ordinary_text_is_left_alone() {
        let e = endpoint("", "http://127.0.0.1:1/v1");
        let text = "This model's maximum context length is 8192 tokens; the token budget ran out.";
        assert_eq!(redacted(text, &e), text);
    }
}

//! Signature verification (spec §5 and §19): a pure function of headers, body, secret
//! and the current time. The scheme is chosen by the headers present; the chosen scheme
//! alone decides.

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD};
use hmac::{Hmac, KeyInit, Mac};
use http::HeaderMap;
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// Timestamps further than this from now (either way) are refused.
pub const TIMESTAMP_TOLERANCE_SECS: i64 = 300;

/// The secret value that turns verification off (loopback binds only).
pub const INSECURE_NO_AUTH: &str = "INSECURE_NO_AUTH";

/// A source of the current time in Unix seconds; injected so tests can fix it.
pub trait Clock: Send + Sync {
    fn now_unix(&self) -> i64;
    /// Milliseconds since the epoch (dedup windows are kept in milliseconds).
    fn now_ms(&self) -> i64 {
        self.now_unix().saturating_mul(1000)
    }
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_unix(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    }
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// A clock that always says the same time.
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub i64);

impl Clock for FixedClock {
    fn now_unix(&self) -> i64 {
        self.0
    }
}

/// How a request proved (or failed to prove) who sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureScheme {
    Svix,
    Standard,
    Github,
    GitlabToken,
    GenericV2,
    GenericV1,
    Insecure,
    /// A route's `source:` preset decided.
    Preset(crate::sender::Sender),
}

impl SignatureScheme {
    pub fn as_str(self) -> &'static str {
        match self {
            SignatureScheme::Svix => "svix",
            SignatureScheme::Standard => "standard",
            SignatureScheme::Github => "github",
            SignatureScheme::GitlabToken => "gitlab_token",
            SignatureScheme::GenericV2 => "generic_v2",
            SignatureScheme::GenericV1 => "generic_v1",
            SignatureScheme::Insecure => "insecure",
            SignatureScheme::Preset(sender) => sender.name(),
        }
    }
}

/// Why verification failed; every variant is answered 401 `Invalid signature`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error("no recognised signature header")]
    NoSignatureHeader,
    #[error("{scheme} signature: required header `{header}` is missing")]
    MissingHeader {
        scheme: &'static str,
        header: &'static str,
    },
    #[error("{scheme} signature: timestamp is not an integer")]
    BadTimestamp { scheme: &'static str },
    #[error("{scheme} signature: timestamp is {skew}s away from now (limit {limit}s)")]
    StaleTimestamp {
        scheme: &'static str,
        skew: i64,
        limit: i64,
    },
    #[error("{scheme} signature does not match")]
    Mismatch { scheme: &'static str },
    #[error("secret starts with whsec_ but the rest is not valid base64")]
    BadWhsecSecret,
    #[error("{scheme}: {why}")]
    Unsupported {
        scheme: &'static str,
        why: &'static str,
    },
}

impl VerifyError {
    /// The signature scheme the request was checked under (`none` when it named none).
    pub fn scheme(&self) -> &'static str {
        match self {
            VerifyError::NoSignatureHeader => "none",
            VerifyError::BadWhsecSecret => "standard",
            VerifyError::MissingHeader { scheme, .. }
            | VerifyError::BadTimestamp { scheme }
            | VerifyError::StaleTimestamp { scheme, .. }
            | VerifyError::Mismatch { scheme }
            | VerifyError::Unsupported { scheme, .. } => scheme,
        }
    }

    /// Why the check failed, as one word for counting.
    pub fn reason(&self) -> &'static str {
        match self {
            VerifyError::NoSignatureHeader => "no_signature_header",
            VerifyError::MissingHeader { .. } => "missing_header",
            VerifyError::BadTimestamp { .. } => "bad_timestamp",
            VerifyError::StaleTimestamp { .. } => "stale_timestamp",
            VerifyError::Mismatch { .. } => "mismatch",
            VerifyError::BadWhsecSecret => "bad_secret",
            VerifyError::Unsupported { .. } => "unsupported",
        }
    }
}

/// The key bytes of a secret: for Standard Webhooks / Svix a `whsec_` secret is
/// base64 (padding optional), otherwise the UTF-8 bytes.
pub fn standard_key(secret: &str) -> Result<Vec<u8>, VerifyError> {
    match secret.strip_prefix("whsec_") {
        Some(rest) => LENIENT_PADDING
            .decode(rest)
            .map_err(|_| VerifyError::BadWhsecSecret),
        None => Ok(secret.as_bytes().to_vec()),
    }
}

const LENIENT_PADDING: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A header's value as bytes, with an empty value counted as absent.
pub(crate) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a [u8]> {
    headers
        .get(name)
        .map(|v| v.as_bytes())
        .filter(|v| !v.is_empty())
}

/// Chooses the scheme from the headers present (spec §5.1); `None` if none applies.
pub fn select_scheme(headers: &HeaderMap) -> Option<SignatureScheme> {
    if ["svix-id", "svix-timestamp", "svix-signature"]
        .iter()
        .any(|h| header(headers, h).is_some())
    {
        Some(SignatureScheme::Svix)
    } else if header(headers, "webhook-signature").is_some() {
        Some(SignatureScheme::Standard)
    } else if header(headers, "x-hub-signature-256").is_some() {
        Some(SignatureScheme::Github)
    } else if header(headers, "x-gitlab-token").is_some() {
        Some(SignatureScheme::GitlabToken)
    } else if header(headers, "x-webhook-signature-v2").is_some() {
        Some(SignatureScheme::GenericV2)
    } else if header(headers, "x-webhook-signature").is_some() {
        Some(SignatureScheme::GenericV1)
    } else {
        None
    }
}

/// Verifies a request; returns the scheme that accepted it.
pub fn verify(
    secret: &str,
    headers: &HeaderMap,
    body: &[u8],
    clock: &dyn Clock,
) -> Result<SignatureScheme, VerifyError> {
    if secret == INSECURE_NO_AUTH {
        return Ok(SignatureScheme::Insecure);
    }
    let scheme = select_scheme(headers).ok_or(VerifyError::NoSignatureHeader)?;
    verify_as(scheme, secret, headers, body, clock).map(|()| scheme)
}

/// Verifies a request under one scheme, whatever other headers it carries.
pub(crate) fn verify_as(
    scheme: SignatureScheme,
    secret: &str,
    headers: &HeaderMap,
    body: &[u8],
    clock: &dyn Clock,
) -> Result<(), VerifyError> {
    match scheme {
        SignatureScheme::Svix => verify_standard_like(secret, headers, body, clock, SVIX),
        SignatureScheme::Standard => {
            verify_standard_like(secret, headers, body, clock, STANDARD_HEADERS)
        }
        SignatureScheme::Github => {
            let got = header(headers, "x-hub-signature-256").unwrap_or_default();
            let want = format!(
                "sha256={}",
                hex::encode(hmac_sha256(secret.as_bytes(), &[body]))
            );
            check_eq(got, want.as_bytes(), "github")
        }
        SignatureScheme::GitlabToken => {
            let got = header(headers, "x-gitlab-token").unwrap_or_default();
            check_eq(got, secret.as_bytes(), "gitlab_token")
        }
        SignatureScheme::GenericV2 => {
            let scheme_name = "generic_v2";
            let ts = header(headers, "x-webhook-timestamp").ok_or(VerifyError::MissingHeader {
                scheme: scheme_name,
                header: "X-Webhook-Timestamp",
            })?;
            check_timestamp(ts, clock, scheme_name, TIMESTAMP_TOLERANCE_SECS)?;
            let got = header(headers, "x-webhook-signature-v2").unwrap_or_default();
            let want = hex::encode(hmac_sha256(secret.as_bytes(), &[ts, b".", body]));
            check_eq(got, want.as_bytes(), scheme_name)
        }
        SignatureScheme::GenericV1 => {
            let got = header(headers, "x-webhook-signature").unwrap_or_default();
            let want = hex::encode(hmac_sha256(secret.as_bytes(), &[body]));
            check_eq(got, want.as_bytes(), "generic_v1")
        }
        SignatureScheme::Insecure | SignatureScheme::Preset(_) => Ok(()),
    }
}

struct StandardHeaders {
    scheme: &'static str,
    id: &'static str,
    timestamp: &'static str,
    signature: &'static str,
}

const SVIX: StandardHeaders = StandardHeaders {
    scheme: "svix",
    id: "svix-id",
    timestamp: "svix-timestamp",
    signature: "svix-signature",
};

const STANDARD_HEADERS: StandardHeaders = StandardHeaders {
    scheme: "standard",
    id: "webhook-id",
    timestamp: "webhook-timestamp",
    signature: "webhook-signature",
};

fn verify_standard_like(
    secret: &str,
    headers: &HeaderMap,
    body: &[u8],
    clock: &dyn Clock,
    names: StandardHeaders,
) -> Result<(), VerifyError> {
    let missing = |header| VerifyError::MissingHeader {
        scheme: names.scheme,
        header,
    };
    let id = header(headers, names.id).ok_or(missing(names.id))?;
    let ts = header(headers, names.timestamp).ok_or(missing(names.timestamp))?;
    let sigs = header(headers, names.signature).ok_or(missing(names.signature))?;
    check_timestamp(ts, clock, names.scheme, TIMESTAMP_TOLERANCE_SECS)?;
    let key = standard_key(secret)?;
    let expected = STANDARD.encode(hmac_sha256(&key, &[id, b".", ts, b".", body]));
    let mut matched = subtle::Choice::from(0u8);
    for entry in sigs
        .split(|b| b.is_ascii_whitespace())
        .filter(|e| !e.is_empty())
    {
        let Some(comma) = entry.iter().position(|b| *b == b',') else {
            continue;
        };
        let (version, sig) = (&entry[..comma], &entry[comma + 1..]);
        if version == b"v1" {
            matched |= ct_eq(sig, expected.as_bytes());
        }
    }
    if bool::from(matched) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch {
            scheme: names.scheme,
        })
    }
}

/// A Unix-seconds timestamp no further than `limit` seconds from the clock's now.
pub(crate) fn check_timestamp(
    ts: &[u8],
    clock: &dyn Clock,
    scheme: &'static str,
    limit: i64,
) -> Result<(), VerifyError> {
    check_timestamp_within(ts, clock.now_unix(), scheme, limit)
}

/// A Unix-seconds timestamp no further than `limit` seconds from `now` either way.
pub(crate) fn check_timestamp_within(
    ts: &[u8],
    now: i64,
    scheme: &'static str,
    limit: i64,
) -> Result<(), VerifyError> {
    let text = std::str::from_utf8(ts).map_err(|_| VerifyError::BadTimestamp { scheme })?;
    let valid_digits = {
        let digits = text.strip_prefix('-').unwrap_or(text);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    };
    if !valid_digits {
        return Err(VerifyError::BadTimestamp { scheme });
    }
    let ts: i64 = text
        .parse()
        .map_err(|_| VerifyError::BadTimestamp { scheme })?;
    let skew = now.saturating_sub(ts);
    if skew.checked_abs().is_none_or(|s| s > limit) {
        return Err(VerifyError::StaleTimestamp {
            scheme,
            skew,
            limit,
        });
    }
    Ok(())
}

pub(crate) fn check_eq(got: &[u8], want: &[u8], scheme: &'static str) -> Result<(), VerifyError> {
    if bool::from(ct_eq(got, want)) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch { scheme })
    }
}

/// Constant-time comparison (the length itself is not secret).
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> subtle::Choice {
    if a.len() != b.len() {
        return subtle::Choice::from(0u8);
    }
    a.ct_eq(b)
}

/// HMAC-SHA256 over the concatenation of `parts`.
pub fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = match <Hmac<Sha256> as KeyInit>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => return [0u8; 32],
    };
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// Signing helpers for senders, tests and the CLI's `webhook test`.
pub mod sign {
    use super::*;

    /// `sha256=<hex>` for `X-Hub-Signature-256`.
    pub fn github(secret: &str, body: &[u8]) -> String {
        format!(
            "sha256={}",
            hex::encode(hmac_sha256(secret.as_bytes(), &[body]))
        )
    }

    /// Hex for `X-Webhook-Signature-V2`.
    pub fn generic_v2(secret: &str, timestamp: &str, body: &[u8]) -> String {
        hex::encode(hmac_sha256(
            secret.as_bytes(),
            &[timestamp.as_bytes(), b".", body],
        ))
    }

    /// Hex for `X-Webhook-Signature`.
    pub fn generic_v1(secret: &str, body: &[u8]) -> String {
        hex::encode(hmac_sha256(secret.as_bytes(), &[body]))
    }

    /// `v1,<base64>` for `webhook-signature` / `svix-signature`.
    pub fn standard(
        secret: &str,
        id: &str,
        timestamp: &str,
        body: &[u8],
    ) -> Result<String, VerifyError> {
        let key = standard_key(secret)?;
        let mac = hmac_sha256(
            &key,
            &[id.as_bytes(), b".", timestamp.as_bytes(), b".", body],
        );
        Ok(format!("v1,{}", STANDARD.encode(mac)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn github_vector() {
        let sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(
            sign::github("It's a Secret to Everybody", b"Hello, World!"),
            sig
        );
        let h = headers(&[("x-hub-signature-256", sig)]);
        assert_eq!(
            verify(
                "It's a Secret to Everybody",
                &h,
                b"Hello, World!",
                &FixedClock(0)
            ),
            Ok(SignatureScheme::Github)
        );
        let upper = headers(&[("x-hub-signature-256", &sig.to_uppercase())]);
        assert!(
            verify(
                "It's a Secret to Everybody",
                &upper,
                b"Hello, World!",
                &FixedClock(0)
            )
            .is_err()
        );
    }

    #[test]
    fn generic_vectors() {
        assert_eq!(
            sign::generic_v2("s3cret", "1700000000", br#"{"a":1}"#),
            "1698a50bc74d1ff1db85c4e0a5297c2ad9fdba245d5737cdb789e4cc6e098940"
        );
        assert_eq!(
            sign::generic_v1("s3cret", br#"{"a":1}"#),
            "5910e62016ef5034272c926c27071992a465c2335cecf41851bda071577f4f6d"
        );
        let clock = FixedClock(1_700_000_300);
        let ok = headers(&[
            (
                "x-webhook-signature-v2",
                "1698a50bc74d1ff1db85c4e0a5297c2ad9fdba245d5737cdb789e4cc6e098940",
            ),
            ("x-webhook-timestamp", "1700000000"),
        ]);
        assert_eq!(
            verify("s3cret", &ok, br#"{"a":1}"#, &clock),
            Ok(SignatureScheme::GenericV2)
        );
        assert!(verify("s3cret", &ok, br#"{"a":1}"#, &FixedClock(1_700_000_301)).is_err());
        // No downgrade: V2 without its timestamp fails even with a valid V1 signature.
        let stripped = headers(&[
            (
                "x-webhook-signature-v2",
                "1698a50bc74d1ff1db85c4e0a5297c2ad9fdba245d5737cdb789e4cc6e098940",
            ),
            (
                "x-webhook-signature",
                "5910e62016ef5034272c926c27071992a465c2335cecf41851bda071577f4f6d",
            ),
        ]);
        assert!(verify("s3cret", &stripped, br#"{"a":1}"#, &clock).is_err());
        let v1 = headers(&[(
            "x-webhook-signature",
            "5910e62016ef5034272c926c27071992a465c2335cecf41851bda071577f4f6d",
        )]);
        assert_eq!(
            verify("s3cret", &v1, br#"{"a":1}"#, &clock),
            Ok(SignatureScheme::GenericV1)
        );
        let decimal = headers(&[
            ("x-webhook-signature-v2", "00"),
            ("x-webhook-timestamp", "12.5"),
        ]);
        assert_eq!(
            verify("s3cret", &decimal, b"", &clock),
            Err(VerifyError::BadTimestamp {
                scheme: "generic_v2"
            })
        );
    }

    #[test]
    fn standard_vectors() {
        let cases = [
            (
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                "msg_p5jXN8AQM9LWM0D4loKWxJek",
                "1614265330",
                r#"{"test": 2432232314}"#,
                "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
            ),
            (
                "whsec_aGVyYWxkLXN0YW5kYXJkLXdlYmhvb2tzLWtleS0zMmI=",
                "whe_01k1jbxexample",
                "1788253679",
                r#"{"type":"event","id":"whe_01k1jbxexample","created_at":"2026-09-01T09:07:59Z","data":{"type":"forward.schedule_run.succeeded","id":"srun_01k1jbrexample","schema_version":1,"status":"completed"}}"#,
                "v1,vQNKfZELKXjBDj6LYdwX+abhMgwn+2KeC6TfyO44or8=",
            ),
            (
                "whsec_MDEyMzQ1Njc4OQ",
                "msg_1",
                "1700000000",
                "{}",
                "v1,iglk8egL6WhU+nipnFCfs3vgU+46ciIJt5ml4VoY+NY=",
            ),
        ];
        for (secret, id, ts, body, sig) in cases {
            assert_eq!(
                sign::standard(secret, id, ts, body.as_bytes()).unwrap(),
                sig
            );
            let clock = FixedClock(ts.parse::<i64>().unwrap() + 300);
            for prefix in ["webhook", "svix"] {
                let h = headers(&[
                    (
                        if prefix == "svix" {
                            "svix-id"
                        } else {
                            "webhook-id"
                        },
                        id,
                    ),
                    (
                        if prefix == "svix" {
                            "svix-timestamp"
                        } else {
                            "webhook-timestamp"
                        },
                        ts,
                    ),
                    (
                        if prefix == "svix" {
                            "svix-signature"
                        } else {
                            "webhook-signature"
                        },
                        &format!("v1,AAAA {sig}"),
                    ),
                ]);
                assert!(
                    verify(secret, &h, body.as_bytes(), &clock).is_ok(),
                    "{prefix} {id}"
                );
                assert!(verify(secret, &h, body.as_bytes(), &FixedClock(clock.0 + 1)).is_err());
            }
            let v2_only = headers(&[
                ("webhook-id", id),
                ("webhook-timestamp", ts),
                ("webhook-signature", &sig.replace("v1,", "v2,")),
            ]);
            assert!(verify(secret, &v2_only, body.as_bytes(), &clock).is_err());
        }
    }

    #[test]
    fn selection_order() {
        let h = headers(&[
            ("webhook-id", "x"),
            ("webhook-timestamp", "1"),
            ("x-gitlab-token", "t"),
        ]);
        assert_eq!(select_scheme(&h), Some(SignatureScheme::GitlabToken));
        assert_eq!(
            verify("t", &h, b"", &FixedClock(0)),
            Ok(SignatureScheme::GitlabToken)
        );
        let h = headers(&[("authorization", "Bearer t")]);
        assert_eq!(
            verify("t", &h, b"", &FixedClock(0)),
            Err(VerifyError::NoSignatureHeader)
        );
        let h = headers(&[("x-hub-signature-256", "")]);
        assert_eq!(select_scheme(&h), None);
        assert_eq!(
            verify(INSECURE_NO_AUTH, &h, b"", &FixedClock(0)),
            Ok(SignatureScheme::Insecure)
        );
    }

    #[test]
    fn non_ascii_header_is_a_mismatch() {
        let mut h = HeaderMap::new();
        h.insert(
            "x-gitlab-token",
            HeaderValue::from_bytes(b"caf\xe9").unwrap(),
        );
        assert!(verify("café", &h, b"", &FixedClock(0)).is_err());
    }
}

//! The signature check of each preset. Every comparison is constant-time; a header
//! that is absent or empty is missing; the preset alone decides (no fallback to header
//! detection).

use super::{Sender, SenderPreset};
use crate::verify::{
    self, Clock, SignatureScheme, TIMESTAMP_TOLERANCE_SECS, VerifyError, check_eq, check_timestamp,
    ct_eq, header, hmac_sha256,
};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;
use sha2::{Digest, Sha256};

/// The parts of a request a signature can cover.
#[derive(Debug, Clone, Copy)]
pub struct SignedRequest<'a> {
    pub headers: &'a HeaderMap,
    pub body: &'a [u8],
    /// The request's query string (Twilio signs the URL it called, query included).
    pub query: Option<&'a str>,
}

/// Verifies a request under its route's preset.
pub fn verify(
    preset: &SenderPreset,
    secret: &str,
    request: &SignedRequest<'_>,
    clock: &dyn Clock,
) -> Result<SignatureScheme, VerifyError> {
    let sender = preset.sender;
    let name = sender.name();
    let headers = request.headers;
    let body = request.body;
    let key = secret.as_bytes();
    match sender {
        Sender::Stripe => item_header(&STRIPE, key, headers, body, clock, TIMESTAMP_TOLERANCE_SECS),
        Sender::Jira => jira(key, headers, body),
        Sender::Shopify => {
            // Event-style webhooks send the same headers without the `X-` prefix.
            let got = header(headers, "shopify-hmac-sha256")
                .map_or_else(|| required(headers, name, "X-Shopify-Hmac-Sha256"), Ok)?;
            let want = STANDARD.encode(hmac_sha256(key, &[body]));
            check_eq(got, want.as_bytes(), name)
        }
        Sender::Slack => {
            let ts = required(headers, name, "X-Slack-Request-Timestamp")?;
            let got = required(headers, name, "X-Slack-Signature")?;
            check_timestamp(ts, clock, name, TIMESTAMP_TOLERANCE_SECS)?;
            let want = format!(
                "v0={}",
                hex::encode(hmac_sha256(key, &[b"v0:", ts, b":", body]))
            );
            check_eq(got, want.as_bytes(), name)
        }
        Sender::Linear => linear(key, headers, body, clock),
        Sender::Pagerduty => {
            let got = required(headers, name, "X-PagerDuty-Signature")?;
            let want = format!("v1={}", hex::encode(hmac_sha256(key, &[body])));
            any_matches(got.split(|b| *b == b','), want.as_bytes(), name)
        }
        Sender::Sentry => hex_body(key, headers, body, name, "Sentry-Hook-Signature", ""),
        Sender::Paddle => item_header(&PADDLE, key, headers, body, clock, preset.tolerance_secs),
        Sender::Bitbucket => hex_body(key, headers, body, name, "X-Hub-Signature", "sha256="),
        Sender::Gitea => hex_body(key, headers, body, name, "X-Gitea-Signature", ""),
        Sender::Forgejo => hex_body(key, headers, body, name, "X-Forgejo-Signature", ""),
        Sender::Twilio => twilio(preset, key, request),
        Sender::Discord => discord(preset, headers, body, clock),
        Sender::Token => token(preset, key, headers),
        Sender::StandardWebhooks | Sender::Svix => {
            let forced = if sender == Sender::Svix {
                SignatureScheme::Svix
            } else {
                SignatureScheme::Standard
            };
            return verify::verify_as(forced, secret, headers, body, clock).map(|()| forced);
        }
    }
    .map(|()| SignatureScheme::Preset(sender))
}

/// A header the scheme needs.
fn required<'a>(
    headers: &'a HeaderMap,
    scheme: &'static str,
    name: &'static str,
) -> Result<&'a [u8], VerifyError> {
    header(headers, name).ok_or(VerifyError::MissingHeader {
        scheme,
        header: name,
    })
}

/// `<prefix><hex HMAC-SHA256 of the body>` in one header.
fn hex_body(
    key: &[u8],
    headers: &HeaderMap,
    body: &[u8],
    scheme: &'static str,
    name: &'static str,
    prefix: &str,
) -> Result<(), VerifyError> {
    let got = required(headers, scheme, name)?;
    let want = format!("{prefix}{}", hex::encode(hmac_sha256(key, &[body])));
    check_eq(got, want.as_bytes(), scheme)
}

/// Any of several signatures matching (a sender rolling its secret signs with both).
fn any_matches<'a>(
    candidates: impl Iterator<Item = &'a [u8]>,
    want: &[u8],
    scheme: &'static str,
) -> Result<(), VerifyError> {
    let mut matched = subtle::Choice::from(0u8);
    for candidate in candidates {
        matched |= ct_eq(candidate.trim_ascii(), want);
    }
    if bool::from(matched) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch { scheme })
    }
}

/// The values of `key=value` items of a signature header, split on `separator`.
fn items<'a>(value: &'a [u8], separator: u8, key: &'a [u8]) -> impl Iterator<Item = &'a [u8]> {
    value
        .split(move |b| *b == separator)
        .filter_map(move |item| {
            let item = item.trim_ascii();
            let eq = item.iter().position(|b| *b == b'=')?;
            (&item[..eq] == key).then(|| &item[eq + 1..])
        })
}

/// A header of `key=value` items: one timestamp and one or more signatures (any may
/// match, for a secret roll), each the hex HMAC-SHA256 of `"<ts><join><body>"`.
struct ItemHeader {
    scheme: &'static str,
    header: &'static str,
    separator: u8,
    ts_key: &'static [u8],
    sig_key: &'static [u8],
    join: &'static [u8],
    /// Only an old timestamp is refused (Stripe's SDKs set no bound on a future one).
    past_only: bool,
}

/// `Stripe-Signature: t=<unix>,v1=<hex>[,v1=...]` over `"<t>.<body>"`, keyed with the
/// `whsec_` string's own bytes.
const STRIPE: ItemHeader = ItemHeader {
    scheme: "stripe",
    header: "Stripe-Signature",
    separator: b',',
    ts_key: b"t",
    sig_key: b"v1",
    join: b".",
    past_only: true,
};

/// `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=...]` over `"<ts>:<body>"`.
const PADDLE: ItemHeader = ItemHeader {
    scheme: "paddle",
    header: "Paddle-Signature",
    separator: b';',
    ts_key: b"ts",
    sig_key: b"h1",
    join: b":",
    past_only: false,
};

fn item_header(
    format: &ItemHeader,
    key: &[u8],
    headers: &HeaderMap,
    body: &[u8],
    clock: &dyn Clock,
    limit: i64,
) -> Result<(), VerifyError> {
    let scheme = format.scheme;
    let value = required(headers, scheme, format.header)?;
    let ts = items(value, format.separator, format.ts_key)
        .next()
        .ok_or(VerifyError::BadTimestamp { scheme })?;
    let want = hex::encode(hmac_sha256(key, &[ts, format.join, body]));
    let signatures = items(value, format.separator, format.sig_key);
    any_matches(signatures, want.as_bytes(), scheme)?;
    let now = clock.now_unix();
    let reference = match format.past_only {
        // A timestamp ahead of herald's clock is measured from itself: never too old.
        true => std::str::from_utf8(ts)
            .ok()
            .and_then(|t| t.parse::<i64>().ok())
            .map_or(now, |t| t.max(now)),
        false => now,
    };
    verify::check_timestamp_within(ts, reference, scheme, limit)
}

/// Admin-registered Jira webhooks: `X-Hub-Signature: sha256=<hex>`. Connect apps and
/// OAuth 2.0 integrations sign with a JWT in `Authorization` instead, which proves
/// nothing without the app's installation secret: refused with that reason.
fn jira(key: &[u8], headers: &HeaderMap, body: &[u8]) -> Result<(), VerifyError> {
    let scheme = "jira";
    if header(headers, "X-Hub-Signature").is_none()
        && header(headers, "authorization").is_some_and(|v| v.starts_with(b"JWT "))
    {
        return Err(VerifyError::Unsupported {
            scheme,
            why: "Jira Connect and OAuth 2.0 app webhooks are signed with a JWT, not X-Hub-Signature: \
                  register the webhook as an admin webhook (System > WebHooks) with a secret",
        });
    }
    hex_body(key, headers, body, scheme, "X-Hub-Signature", "sha256=")
}

/// `Linear-Signature: <hex>` over the body; the payload's `webhookTimestamp`
/// (milliseconds) must be within a minute of now.
fn linear(
    key: &[u8],
    headers: &HeaderMap,
    body: &[u8],
    clock: &dyn Clock,
) -> Result<(), VerifyError> {
    let scheme = "linear";
    hex_body(key, headers, body, scheme, "Linear-Signature", "")?;
    #[derive(serde::Deserialize)]
    struct Stamp {
        #[serde(rename = "webhookTimestamp")]
        webhook_timestamp: Option<i64>,
    }
    let stamp: Stamp =
        serde_json::from_slice(body).map_err(|_| VerifyError::BadTimestamp { scheme })?;
    let ms = stamp
        .webhook_timestamp
        .ok_or(VerifyError::BadTimestamp { scheme })?;
    let skew_ms = clock.now_ms().saturating_sub(ms);
    if skew_ms.checked_abs().is_none_or(|s| s > LINEAR_WINDOW_MS) {
        return Err(VerifyError::StaleTimestamp {
            scheme,
            skew: skew_ms / 1000,
            limit: LINEAR_WINDOW_MS / 1000,
        });
    }
    Ok(())
}

/// Linear's SDK refuses a `webhookTimestamp` further than this from now.
const LINEAR_WINDOW_MS: i64 = 60_000;

/// `X-Twilio-Signature`: base64 HMAC-SHA1 (the Auth Token as key) of the URL Twilio
/// called, then for a form body each field name and value, sorted. A JSON body is
/// covered by the URL's `bodySHA256` query parameter instead. As Twilio's validators,
/// the URL is tried with and without its scheme's default port.
fn twilio(
    preset: &SenderPreset,
    key: &[u8],
    request: &SignedRequest<'_>,
) -> Result<(), VerifyError> {
    let scheme = "twilio";
    let got = required(request.headers, scheme, "X-Twilio-Signature")?;
    let base = preset.public_url.as_deref().unwrap_or_default();
    let base = base.split_once('?').map_or(base, |(b, _)| b);
    let url = match request.query.filter(|q| !q.is_empty()) {
        Some(q) => format!("{base}?{q}"),
        None => base.to_owned(),
    };
    let body_hash = request.query.and_then(|q| {
        form_urlencoded::parse(q.as_bytes())
            .find(|(k, _)| k == "bodySHA256")
            .map(|(_, v)| v.into_owned())
    });
    let fields = match &body_hash {
        Some(want) => {
            let have = hex::encode(Sha256::digest(request.body));
            check_eq(
                have.as_bytes(),
                want.to_ascii_lowercase().as_bytes(),
                scheme,
            )?;
            String::new()
        }
        None => twilio_fields(request.body).ok_or(VerifyError::Mismatch { scheme })?,
    };
    let mut matched = subtle::Choice::from(0u8);
    for candidate in with_and_without_port(&url) {
        let want = STANDARD.encode(hmac_sha1(key, &[candidate.as_bytes(), fields.as_bytes()]));
        matched |= ct_eq(got, want.as_bytes());
    }
    if bool::from(matched) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch { scheme })
    }
}

/// A form body's fields as Twilio signs them: names sorted, each name's distinct values
/// sorted, `name` then `value` appended.
pub(super) fn twilio_fields(body: &[u8]) -> Option<String> {
    let mut pairs: Vec<_> = form_urlencoded::parse(body)
        .take(TWILIO_MAX_FIELDS + 1)
        .collect();
    if pairs.len() > TWILIO_MAX_FIELDS {
        return None;
    }
    pairs.sort();
    pairs.dedup();
    Some(pairs.into_iter().map(|(k, v)| k + v).collect())
}

/// Twilio's callbacks carry a few dozen fields: a forged body with more is refused
/// before it costs a sort.
const TWILIO_MAX_FIELDS: usize = 500;

/// The URL as given, without its port, and with its scheme's default port added when
/// it has none: the forms Twilio's own validators accept.
fn with_and_without_port(url: &str) -> Vec<String> {
    let mut out = vec![url.to_owned()];
    let Some((scheme, rest)) = url.split_once("://") else {
        return out;
    };
    let default = match scheme.to_ascii_lowercase().as_str() {
        "https" => "443",
        "http" => "80",
        _ => return out,
    };
    let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(split);
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), authority),
    };
    let port_at = host_port
        .rfind(':')
        .filter(|i| !host_port[*i..].contains(']'));
    let other = match port_at {
        Some(i) => host_port[..i].to_owned(),
        None => format!("{host_port}:{default}"),
    };
    out.push(format!("{scheme}://{userinfo}{other}{tail}"));
    out
}

/// HMAC-SHA1 (Twilio's scheme; SHA-1 stays secure as an HMAC).
pub(super) fn hmac_sha1(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, key);
    let mut ctx = ring::hmac::Context::with_key(&key);
    for part in parts {
        ctx.update(part);
    }
    ctx.sign().as_ref().to_vec()
}

/// Ed25519 over `X-Signature-Timestamp` + body with the application's public key.
fn discord(
    preset: &SenderPreset,
    headers: &HeaderMap,
    body: &[u8],
    clock: &dyn Clock,
) -> Result<(), VerifyError> {
    let scheme = "discord";
    let sig_hex = required(headers, scheme, "X-Signature-Ed25519")?;
    let ts = required(headers, scheme, "X-Signature-Timestamp")?;
    let Some(public_key) = preset.public_key else {
        return Err(VerifyError::Mismatch { scheme });
    };
    let sig = hex::decode(sig_hex).map_err(|_| VerifyError::Mismatch { scheme })?;
    let mut message = Vec::with_capacity(ts.len() + body.len());
    message.extend_from_slice(ts);
    message.extend_from_slice(body);
    ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, public_key)
        .verify(&message, &sig)
        .map_err(|_| VerifyError::Mismatch { scheme })?;
    check_timestamp(ts, clock, scheme, TIMESTAMP_TOLERANCE_SECS)
}

/// A shared token: `Authorization: Bearer <secret>`, or the bare secret in the
/// route's `header:`.
fn token(preset: &SenderPreset, key: &[u8], headers: &HeaderMap) -> Result<(), VerifyError> {
    let scheme = "token";
    match &preset.header {
        Some(name) => {
            let got = header(headers, name.as_str()).ok_or(VerifyError::MissingHeader {
                scheme,
                header: "the route's `header:`",
            })?;
            check_eq(got, key, scheme)
        }
        None => {
            let got = required(headers, scheme, "Authorization")?;
            let bearer = got
                .get(..7)
                .filter(|p| p.eq_ignore_ascii_case(b"bearer "))
                .map(|_| got[7..].trim_ascii())
                .ok_or(VerifyError::Mismatch { scheme })?;
            check_eq(bearer, key, scheme)
        }
    }
}

//! Signing as each sender signs: for `herald webhook test` and the tests. Discord signs
//! with the application's private key, which herald never holds: [`discord`] takes a
//! seed, and [`request`] refuses Discord.

use super::check::{hmac_sha1, twilio_fields};
use super::{Sender, SenderPreset};
use crate::verify::{self, hmac_sha256};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

/// A signed request's extra headers, and the query string to send it with (Twilio's
/// `bodySHA256` and the public URL's own query).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Signed {
    pub headers: Vec<(String, String)>,
    pub query: Option<String>,
}

/// Why a request cannot be signed here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    #[error(
        "Discord signs interactions with the application's private key, which herald never has: \
         use the Developer Portal's Interactions Endpoint URL check instead"
    )]
    NoPrivateKey,
    #[error("{0}")]
    Secret(#[from] verify::VerifyError),
    #[error("a Twilio form body has at most 500 fields: herald refuses more before it checks them")]
    TooManyFields,
}

/// Signs `body` as `preset`'s sender would at `now` (Unix seconds). A Linear body must
/// already carry its `webhookTimestamp` ([`stamp_linear`]). `message_id` is the id
/// Standard Webhooks and Svix sign (a fresh one when `None`).
pub fn request(
    preset: &SenderPreset,
    secret: &str,
    body: &[u8],
    now: i64,
    message_id: Option<&str>,
) -> Result<Signed, SignError> {
    let key = secret.as_bytes();
    let ts = now.to_string();
    let hex_body = || hex::encode(hmac_sha256(key, &[body]));
    let headers = match preset.sender {
        Sender::Stripe => vec![("Stripe-Signature", stripe(secret, &ts, body))],
        Sender::Jira | Sender::Bitbucket => {
            vec![("X-Hub-Signature", format!("sha256={}", hex_body()))]
        }
        Sender::Shopify => vec![(
            "X-Shopify-Hmac-Sha256",
            STANDARD.encode(hmac_sha256(key, &[body])),
        )],
        Sender::Slack => vec![
            ("X-Slack-Request-Timestamp", ts.clone()),
            ("X-Slack-Signature", slack(secret, &ts, body)),
        ],
        Sender::Linear => vec![("Linear-Signature", hex_body())],
        Sender::Pagerduty => vec![("X-PagerDuty-Signature", format!("v1={}", hex_body()))],
        Sender::Sentry => vec![("Sentry-Hook-Signature", hex_body())],
        Sender::Paddle => vec![("Paddle-Signature", paddle(secret, &ts, body))],
        Sender::Gitea => vec![("X-Gitea-Signature", hex_body())],
        Sender::Forgejo => vec![("X-Forgejo-Signature", hex_body())],
        Sender::Twilio => return twilio(preset, secret, body).ok_or(SignError::TooManyFields),
        Sender::Discord => return Err(SignError::NoPrivateKey),
        Sender::Token => {
            let name = preset
                .header
                .as_ref()
                .map_or("Authorization", |h| h.as_str());
            let value = match preset.header {
                Some(_) => secret.to_owned(),
                None => format!("Bearer {secret}"),
            };
            return Ok(Signed {
                headers: vec![(name.to_owned(), value)],
                query: None,
            });
        }
        Sender::StandardWebhooks | Sender::Svix => {
            let prefix = if preset.sender == Sender::Svix {
                ["svix-id", "svix-timestamp", "svix-signature"]
            } else {
                ["webhook-id", "webhook-timestamp", "webhook-signature"]
            };
            let id = message_id.map_or_else(
                || format!("msg_{}", uuid::Uuid::now_v7().simple()),
                str::to_owned,
            );
            let sig = verify::sign::standard(secret, &id, &ts, body)?;
            vec![(prefix[0], id), (prefix[1], ts.clone()), (prefix[2], sig)]
        }
    };
    Ok(Signed {
        headers: headers
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        query: None,
    })
}

/// `t=<ts>,v1=<hex>` for `Stripe-Signature`.
pub fn stripe(secret: &str, ts: &str, body: &[u8]) -> String {
    let mac = hmac_sha256(secret.as_bytes(), &[ts.as_bytes(), b".", body]);
    format!("t={ts},v1={}", hex::encode(mac))
}

/// `v0=<hex>` for `X-Slack-Signature`.
pub fn slack(secret: &str, ts: &str, body: &[u8]) -> String {
    let mac = hmac_sha256(secret.as_bytes(), &[b"v0:", ts.as_bytes(), b":", body]);
    format!("v0={}", hex::encode(mac))
}

/// `ts=<ts>;h1=<hex>` for `Paddle-Signature`.
pub fn paddle(secret: &str, ts: &str, body: &[u8]) -> String {
    let mac = hmac_sha256(secret.as_bytes(), &[ts.as_bytes(), b":", body]);
    format!("ts={ts};h1={}", hex::encode(mac))
}

/// Twilio: a form body signs the public URL and its fields; a JSON body the URL with a
/// `bodySHA256` query parameter.
/// `None` for a form body with more fields than herald verifies.
fn twilio(preset: &SenderPreset, secret: &str, body: &[u8]) -> Option<Signed> {
    let url = preset.public_url.clone().unwrap_or_default();
    let is_json = body.trim_ascii_start().first() == Some(&b'{');
    let (signed_url, fields) = if is_json {
        let hash = hex::encode(Sha256::digest(body));
        let sep = if url.contains('?') { '&' } else { '?' };
        (format!("{url}{sep}bodySHA256={hash}"), String::new())
    } else {
        (url, twilio_fields(body)?)
    };
    let mac = hmac_sha1(
        secret.as_bytes(),
        &[signed_url.as_bytes(), fields.as_bytes()],
    );
    Some(Signed {
        headers: vec![("X-Twilio-Signature".to_owned(), STANDARD.encode(mac))],
        query: signed_url.split_once('?').map(|(_, q)| q.to_owned()),
    })
}

/// Sets a Linear payload's `webhookTimestamp` (milliseconds), as Linear stamps it.
pub fn stamp_linear(payload: &mut serde_json::Map<String, serde_json::Value>, now_ms: i64) {
    payload.insert("webhookTimestamp".to_owned(), now_ms.into());
}

/// Discord's `X-Signature-Ed25519` (hex) over `timestamp` + body, from a 32-byte seed;
/// with the public key the route's `public_key` holds.
pub fn discord(seed: &[u8; 32], timestamp: &str, body: &[u8]) -> Option<(String, String)> {
    use ring::signature::KeyPair;
    let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(seed).ok()?;
    let mut message = timestamp.as_bytes().to_vec();
    message.extend_from_slice(body);
    let sig = pair.sign(&message);
    Some((
        hex::encode(sig.as_ref()),
        hex::encode(pair.public_key().as_ref()),
    ))
}

//! Where each preset's event type and delivery id come from.

use super::Sender;
use crate::event;
use crate::pick::PayloadPaths;
use crate::verify::header;
use http::HeaderMap;
use serde_json::{Map, Value};

/// A header's text, an empty value counted as absent.
fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    header(headers, name).map(|v| String::from_utf8_lossy(v).into_owned())
}

/// The value at a payload path, when it is a non-empty string or a number.
fn field(payload: &Map<String, Value>, path: &[&str]) -> Option<Value> {
    let (last, parents) = path.split_last()?;
    let mut map = payload;
    for key in parents {
        map = map.get(*key)?.as_object()?;
    }
    match map.get(*last)? {
        Value::String(s) if s.is_empty() => None,
        v @ (Value::String(_) | Value::Number(_)) => Some(v.clone()),
        _ => None,
    }
}

fn field_text(payload: &Map<String, Value>, path: &[&str]) -> Option<String> {
    field(payload, path).map(|v| match v {
        Value::String(s) => s,
        other => other.to_string(),
    })
}

/// The headers naming the event type for the presets that send one, in order
/// (Shopify's event-style webhooks drop the `X-` prefix).
pub(super) fn event_headers(sender: Sender) -> &'static [&'static str] {
    match sender {
        Sender::Shopify => &["x-shopify-topic", "shopify-topic"],
        Sender::Sentry => &["sentry-hook-resource"],
        Sender::Bitbucket => &["x-event-key"],
        Sender::Gitea => &["x-gitea-event"],
        Sender::Forgejo => &["x-forgejo-event"],
        _ => &[],
    }
}

/// The payload paths naming the event type, in order.
pub(super) fn event_paths(sender: Sender) -> &'static [&'static [&'static str]] {
    match sender {
        Sender::Stripe | Sender::Linear => &[&["type"]],
        Sender::Jira => &[&["webhookEvent"]],
        Sender::Slack => &[&["event", "type"], &["type"]],
        Sender::Pagerduty => &[&["event", "event_type"]],
        Sender::Paddle => &[&["event_type"]],
        Sender::Discord => &[&["type"]],
        Sender::Twilio => &[&["MessageStatus"], &["CallStatus"], &["SmsStatus"]],
        _ => &[],
    }
}

/// The payload paths naming the delivery id (several are joined with `:`).
pub(super) fn id_paths(sender: Sender) -> &'static [&'static [&'static str]] {
    match sender {
        Sender::Stripe | Sender::Discord => &[&["id"]],
        Sender::Slack => &[&["event_id"]],
        Sender::Paddle => &[&["event_id"]],
        Sender::Pagerduty => &[&["event", "id"]],
        _ => &[],
    }
}

/// The headers naming the delivery id, in order of preference.
pub(super) fn id_headers(sender: Sender) -> &'static [&'static str] {
    match sender {
        Sender::Jira => &["x-atlassian-webhook-identifier"],
        Sender::Shopify => &[
            "x-shopify-event-id",
            "x-shopify-webhook-id",
            "shopify-event-id",
            "shopify-webhook-id",
        ],
        Sender::Linear => &["linear-delivery"],
        Sender::Pagerduty => &["x-webhook-id"],
        Sender::Sentry => &["request-id"],
        Sender::Bitbucket => &["x-request-uuid", "x-request-id"],
        Sender::Gitea => &["x-gitea-delivery"],
        Sender::Forgejo => &["x-forgejo-delivery"],
        Sender::Twilio => &["i-twilio-idempotency-token"],
        Sender::StandardWebhooks => &["webhook-id"],
        Sender::Svix => &["svix-id"],
        _ => &[],
    }
}

/// Whether the preset keeps today's header detection for the event type.
fn detects(sender: Sender) -> bool {
    matches!(
        sender,
        Sender::Token | Sender::StandardWebhooks | Sender::Svix
    )
}

/// The event type when the preset reads it from a header (the pipeline's fast path).
pub fn header_event_type(sender: Sender, headers: &HeaderMap) -> Option<&[u8]> {
    if detects(sender) {
        return event::header_event_type(headers);
    }
    event_headers(sender)
        .iter()
        .find_map(|name| header(headers, name))
}

/// The event type under the preset (`unknown` when the sender did not name one).
pub fn event_type(sender: Sender, headers: &HeaderMap, payload: &Map<String, Value>) -> Value {
    if detects(sender) {
        return event::event_type(headers, payload);
    }
    let named = event_headers(sender);
    if !named.is_empty() {
        return named
            .iter()
            .find_map(|name| header_text(headers, name))
            .map_or_else(unknown, Value::String);
    }
    event_paths(sender)
        .iter()
        .find_map(|path| field(payload, path))
        .unwrap_or_else(unknown)
}

fn unknown() -> Value {
    Value::String("unknown".to_owned())
}

/// The sender's id for the delivery, if it sent one.
pub fn delivery_id(
    sender: Sender,
    headers: &HeaderMap,
    payload: &Map<String, Value>,
) -> Option<String> {
    if let Some(id) = id_headers(sender)
        .iter()
        .find_map(|name| header_text(headers, name))
    {
        return Some(id);
    }
    match sender {
        Sender::Token => event::sender_delivery_id(headers),
        // A message's (or call's) status callbacks share its SID: the status tells
        // them apart.
        Sender::Twilio => [["MessageSid", "MessageStatus"], ["CallSid", "CallStatus"]]
            .iter()
            .find_map(|[sid, status]| {
                let sid = field_text(payload, &[sid])?;
                let status = field_text(payload, &[status]).unwrap_or_default();
                Some(format!("{sid}:{status}"))
            }),
        _ => id_paths(sender)
            .iter()
            .find_map(|path| field_text(payload, path)),
    }
}

/// The headers worth keeping with a preset's inbox entry: those naming its event and
/// its delivery id (and Slack's retry count).
pub fn kept_headers(sender: Sender) -> impl Iterator<Item = &'static str> {
    let retry: &[&str] = match sender {
        Sender::Slack => &["x-slack-retry-num"],
        _ => &[],
    };
    event_headers(sender)
        .iter()
        .chain(id_headers(sender))
        .chain(retry)
        .copied()
}

/// Adds the payload paths the preset reads (event type, delivery id, handshakes,
/// Discord's follow-up) to what the route parses.
pub fn payload_paths(sender: Sender, paths: &mut PayloadPaths) {
    let mut add =
        |path: &[&str]| paths.add(&path.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
    for path in event_paths(sender).iter().chain(id_paths(sender)) {
        add(path);
    }
    match sender {
        Sender::Slack => add(&["challenge"]),
        Sender::Discord => {
            add(&["application_id"]);
            add(&["token"]);
        }
        Sender::Twilio => {
            for key in ["MessageSid", "CallSid"] {
                add(&[key]);
            }
        }
        _ => {}
    }
}

//! A route's `source:` and the settings its preset reads (`public_key`, `public_url`,
//! `header`, `tolerance_seconds`).

use crate::node::Node;
use crate::reader::{Reader, join_key, suggest};
use herald_webhook::sender::{self, SETTING_KEYS, Sender, SenderPreset};

/// What a missing required setting is and where the sender shows it.
fn what_it_is(key: &str) -> &'static str {
    match key {
        "public_key" => {
            "the application's public key, from the Developer Portal's General Information page"
        }
        "public_url" => "the exact URL configured in Twilio's console, which Twilio signs",
        _ => "",
    }
}

/// Whether herald reads or keeps `name` itself (event type, delivery id, the headers
/// stored with an event): a token header may not be one, or its secret would be shown
/// and stored as one.
fn is_read_header(name: &http::HeaderName) -> bool {
    use herald_webhook::event::{DELIVERY_ID_HEADERS, EVENT_HEADERS, KEPT_HEADERS};
    let name = name.as_str();
    [
        &DELIVERY_ID_HEADERS[..],
        &EVENT_HEADERS,
        KEPT_HEADERS,
        &["content-length", "host"],
    ]
    .iter()
    .any(|names| names.contains(&name))
}

/// Reads `source:` and its settings. `Err(())` when any is an error (the reader has it).
pub(crate) fn read_sender(
    reader: &mut Reader,
    name: &str,
    node: &Node,
    prefix: &str,
) -> Result<Option<SenderPreset>, ()> {
    let key = |k: &str| join_key(prefix, k);
    let Some(source_node) = node.get("source").filter(|n| !n.is_null()) else {
        for setting in SETTING_KEYS {
            if node.get(setting).is_some() {
                reader.findings.push(format!(
                    "route `{name}`: `{setting}:` is read only with a `source:` that uses it; without `source:` it is ignored"
                ));
            }
        }
        return Ok(None);
    };
    let Some(Some(text)) = reader.string(source_node, &key("source")) else {
        return Err(());
    };
    let Some(sender) = Sender::parse(text.trim()) else {
        let names = Sender::names();
        let hint = suggest(text.trim(), &names)
            .map(|s| format!("did you mean `{s}`? "))
            .unwrap_or_default();
        reader.error(
            Some(source_node),
            &key("source"),
            format!(
                "unknown source {text:?}: {hint}known sources are {}",
                names.join(", ")
            ),
        );
        return Err(());
    };
    let mut preset = SenderPreset::new(sender);
    let errors_before = reader.errors.len();
    for setting in SETTING_KEYS {
        let Some(value) = node.get(setting).filter(|n| !n.is_null()) else {
            if sender.settings().contains(&(setting, true)) {
                reader.error(
                    Some(source_node),
                    &key(setting),
                    format!(
                        "`source: {sender}` needs `{setting}:` ({})",
                        what_it_is(setting)
                    ),
                );
            }
            continue;
        };
        if !sender.settings().iter().any(|(k, _)| *k == setting) {
            reader.findings.push(format!(
                "route `{name}`: `{setting}:` is not read by `source: {sender}` and is ignored"
            ));
            continue;
        }
        read_setting(reader, &mut preset, setting, value, &key(setting));
    }
    if reader.errors.len() > errors_before {
        return Err(());
    }
    Ok(Some(preset))
}

fn read_setting(
    reader: &mut Reader,
    preset: &mut SenderPreset,
    setting: &str,
    value: &Node,
    key: &str,
) {
    if setting == "tolerance_seconds" {
        if let Some(secs) = reader.int(value, key, 1, 86_400) {
            preset.tolerance_secs = secs as i64;
        }
        return;
    }
    let Some(Some(text)) = reader.string(value, key) else {
        return;
    };
    let text = text.trim().to_owned();
    match setting {
        "public_key" => match sender::parse_public_key(&text) {
            Some(k) => preset.public_key = Some(k),
            None => reader.error(
                Some(value),
                key,
                "expected the application's public key: 64 hex digits",
            ),
        },
        "public_url" => {
            if text.starts_with("https://") || text.starts_with("http://") {
                preset.public_url = Some(text);
            } else {
                reader.error(
                    Some(value),
                    key,
                    format!("expected the full URL Twilio calls (https://...), found {text:?}"),
                );
            }
        }
        "header" => match http::HeaderName::from_bytes(text.as_bytes()) {
            Ok(h) if is_read_header(&h) => reader.error(
                Some(value),
                key,
                format!(
                    "{text:?} is a header herald reads as an event type or delivery id, or keeps with each event: the secret in it would be shown and stored; name another header"
                ),
            ),
            Ok(h) => preset.header = Some(h),
            Err(_) => reader.error(Some(value), key, format!("{text:?} is not a header name")),
        },
        _ => {}
    }
}

/// Checks a subscription's sender fields before it is written (the same rules as when
/// the route is read): the first problem, said as the reader says it.
pub fn check_sender_fields(fields: &crate::SenderFields) -> Result<Option<Sender>, String> {
    let value = serde_json::to_value(fields).map_err(|e| e.to_string())?;
    let node = Node::from_json(&value);
    let mut reader = Reader::new(std::path::Path::new("subscription"));
    match read_sender(&mut reader, "", &node, "") {
        Ok(preset) => Ok(preset.map(|p| p.sender)),
        Err(()) => Err(reader
            .errors
            .first()
            .map(|p| p.message.clone())
            .unwrap_or_else(|| "invalid source settings".to_owned())),
    }
}

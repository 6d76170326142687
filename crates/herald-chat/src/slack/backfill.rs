//! Messages sent while herald was down longer than Slack keeps redelivering (about
//! three tries over some five minutes, and only for an unacknowledged envelope): at
//! start, each channel herald answered in lately is read with `conversations.history`
//! from the last message it stored, within [`WINDOW`], and what it never saw is
//! committed as the event Slack would have sent. Keyed by channel and `ts` as live
//! events are, so nothing is stored (or answered) twice. Hermes has no such backfill.

use super::api::WebApi;
use super::intake::Intake;
use herald_store::InboxQuery;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The recent entries looked at for the channels served and their last message.
const LOOK_BACK: u32 = 1_000;
/// The most channels read.
const MAX_CHANNELS: usize = 50;
/// The most messages read per channel.
const PER_CHANNEL: &str = "100";
/// How far back a message is still answered (Hermes's Discord backfill window).
pub const WINDOW_SECS: f64 = 6.0 * 3600.0;

/// A channel served: the newest message stored and the channel's type.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    ts: f64,
    ts_text: String,
    channel_type: Option<String>,
}

/// Reads what was missed and commits it; how many messages were found.
pub async fn backfill(api: &WebApi, intake: &Intake, now_secs: f64) -> usize {
    let query = InboxQuery {
        route: Some(intake.route.clone()),
        limit: Some(LOOK_BACK),
        ..InboxQuery::default()
    };
    let items = match intake.store.list(query).await {
        Ok(items) => items,
        Err(e) => {
            tracing::warn!(error = %e, "slack: cannot read the inbox for the backfill");
            return 0;
        }
    };
    let seen = last_seen(items.iter().map(|i| i.payload.text()));
    let mut found = 0;
    for (channel, s) in seen.into_iter().take(MAX_CHANNELS) {
        let oldest = s.ts.max(now_secs - WINDOW_SECS);
        let oldest = match oldest > s.ts {
            true => format!("{oldest:.6}"),
            false => s.ts_text.clone(),
        };
        let args = [
            ("channel", channel.as_str()),
            ("oldest", oldest.as_str()),
            ("limit", PER_CHANNEL),
        ];
        let history = match api.form("conversations.history", &args).await {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!(error = %e, channel = %channel, "slack: conversations.history failed; that channel is not backfilled");
                continue;
            }
        };
        let messages = history["messages"].as_array().cloned().unwrap_or_default();
        // Slack lists the newest first; they are committed oldest first.
        for m in messages.into_iter().rev() {
            let Some(payload) = missed_event(&channel, &s, m) else {
                continue;
            };
            match intake.commit(&payload).await {
                Ok(()) => found += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "slack: cannot store a missed message");
                    return found;
                }
            }
        }
    }
    if found > 0 {
        tracing::info!(
            messages = found,
            "slack: messages sent while herald was down were read back"
        );
    }
    found
}

/// The event Slack would have sent for a message of `channel` newer than `seen`.
fn missed_event(channel: &str, seen: &Seen, mut m: Value) -> Option<Value> {
    let ts: f64 = m["ts"].as_str()?.parse().ok()?;
    // The bots' posts (this app's answers among them) are not read back.
    if ts <= seen.ts || m["type"] != "message" || !m["bot_id"].is_null() {
        return None;
    }
    m["channel"] = json!(channel);
    if let Some(t) = &seen.channel_type {
        m["channel_type"] = json!(t);
    }
    let id = format!("backfill:{channel}:{}", m["ts"].as_str()?);
    Some(json!({"type": "event_callback", "event_id": id, "event": m}))
}

/// The channels of stored message events, each with its newest message.
fn last_seen<'a>(payloads: impl Iterator<Item = &'a str>) -> BTreeMap<String, Seen> {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    for text in payloads {
        let Ok(p) = serde_json::from_str::<Value>(text) else {
            continue;
        };
        let e = &p["event"];
        let (Some(channel), Some(ts_text)) = (e["channel"].as_str(), e["ts"].as_str()) else {
            continue;
        };
        let Ok(ts) = ts_text.parse::<f64>() else {
            continue;
        };
        let newer = seen.get(channel).is_none_or(|s| ts > s.ts);
        if newer {
            let channel_type = e["channel_type"].as_str().map(str::to_owned);
            let ts_text = ts_text.to_owned();
            seen.insert(
                channel.to_owned(),
                Seen {
                    ts,
                    ts_text,
                    channel_type,
                },
            );
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_channel_is_read_from_its_newest_stored_message() {
        let stored = [
            r#"{"type":"event_callback","event":{"type":"message","channel":"D1","channel_type":"im","ts":"10.000100"}}"#,
            r#"{"type":"event_callback","event":{"type":"message","channel":"D1","channel_type":"im","ts":"12.000100"}}"#,
            r#"{"type":"event_callback","event":{"type":"app_mention","channel":"C1","ts":"11.5"}}"#,
            r#"{"type":"block_actions"}"#,
        ];
        let seen = last_seen(stored.into_iter());
        assert_eq!(seen["D1"].ts_text, "12.000100");
        assert_eq!(seen["D1"].channel_type.as_deref(), Some("im"));
        assert_eq!(seen["C1"].ts, 11.5);
        let s = &seen["D1"];
        let old = json!({"type": "message", "ts": "12.000100", "user": "U1", "text": "seen"});
        assert!(missed_event("D1", s, old).is_none());
        let new = json!({"type": "message", "ts": "13.000100", "user": "U1", "text": "missed"});
        let e = missed_event("D1", s, new).unwrap();
        assert_eq!(e["event"]["channel"], "D1");
        assert_eq!(e["event"]["channel_type"], "im");
        assert_eq!(
            crate::slack::intake::identify(&e).unwrap().1,
            "msg:D1:13.000100"
        );
    }
}

//! Messages sent while herald was down longer than Discord keeps a session resumable:
//! at start, each channel herald serves (those named by
//! `DISCORD_MISSED_MESSAGE_BACKFILL_CHANNELS`, else the allowed and free-response
//! channels, and every channel it stored a message from lately) is read with
//! `GET /channels/{id}/messages?after=` from the last message stored, within the
//! window (six hours by default), and what herald never saw is committed as the
//! MESSAGE_CREATE Discord would have sent: keyed by message id as live ones are, so
//! nothing is answered twice. On by default in herald (Hermes's is opt-in).

use super::api::{Body, RestApi};
use crate::intake::Intake;
use herald_store::InboxQuery;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Discord's epoch (2015-01-01), in unix milliseconds.
const DISCORD_EPOCH_MS: i64 = 1_420_070_400_000;
/// The recent entries looked at for channels and their last message.
const LOOK_BACK: u32 = 1_000;
/// The most channels read.
const MAX_CHANNELS: usize = 50;

/// `DISCORD_MISSED_MESSAGE_BACKFILL*`.
#[derive(Debug, Clone)]
pub struct Backfill {
    pub enabled: bool,
    /// Channels always read (besides those seen).
    pub channels: Vec<String>,
    pub window_secs: u64,
    /// Messages read per channel (1..=100).
    pub limit: u32,
}

/// A channel's newest stored message and its server.
#[derive(Debug, Clone, Default, PartialEq)]
struct Seen {
    last: u64,
    guild: Option<String>,
}

/// The snowflake of a moment: messages after it are newer.
fn snowflake_at(ms: i64) -> u64 {
    u64::try_from(ms.saturating_sub(DISCORD_EPOCH_MS)).unwrap_or(0) << 22
}

/// Reads what was missed and commits it; how many messages were found.
pub async fn backfill(api: &RestApi, intake: &Intake, settings: &Backfill, now_ms: i64) -> usize {
    if !settings.enabled {
        return 0;
    }
    let query = InboxQuery {
        route: Some(intake.route.clone()),
        limit: Some(LOOK_BACK),
        ..InboxQuery::default()
    };
    let stored = match intake.store.list(query).await {
        Ok(items) => items,
        Err(e) => {
            tracing::warn!(error = %e, "discord: cannot read the inbox for the backfill");
            return 0;
        }
    };
    let mut seen = last_seen(stored.iter().map(|i| i.payload.text()));
    for c in &settings.channels {
        seen.entry(c.clone()).or_default();
    }
    let window_ms = i64::try_from(settings.window_secs)
        .unwrap_or(i64::MAX)
        .saturating_mul(1000);
    let floor = snowflake_at(now_ms.saturating_sub(window_ms));
    let mut found = 0;
    for (channel, s) in seen.into_iter().take(MAX_CHANNELS) {
        let guild = match s.guild.clone() {
            Some(g) => Some(g),
            None => guild_of(api, &channel).await,
        };
        let after = s.last.max(floor);
        let path = format!(
            "/channels/{channel}/messages?after={after}&limit={}",
            settings.limit.clamp(1, 100)
        );
        let messages = match api.call(Method::GET, &path, Body::None).await {
            Ok(Value::Array(m)) => m,
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %e, channel = %channel, "discord: cannot read a channel's messages; it is not backfilled");
                continue;
            }
        };
        // Discord lists the newest first; they are committed oldest first.
        for mut m in messages.into_iter().rev() {
            if m["author"]["bot"] == true {
                continue;
            }
            m["channel_id"] = json!(channel);
            if let Some(g) = &guild {
                m["guild_id"] = json!(g);
            }
            match intake.commit(&json!({"t": "MESSAGE_CREATE", "d": m})).await {
                Ok(()) => found += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "discord: cannot store a missed message");
                    return found;
                }
            }
        }
    }
    if found > 0 {
        tracing::info!(
            messages = found,
            "discord: messages sent while herald was down were read back"
        );
    }
    found
}

/// A channel's server, from `GET /channels/{id}` (`None` for a DM).
async fn guild_of(api: &RestApi, channel: &str) -> Option<String> {
    let c = api
        .call(Method::GET, &format!("/channels/{channel}"), Body::None)
        .await
        .ok()?;
    c["guild_id"].as_str().map(str::to_owned)
}

/// The channels of stored messages, each with its newest message and server.
fn last_seen<'a>(payloads: impl Iterator<Item = &'a str>) -> BTreeMap<String, Seen> {
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    for text in payloads {
        let Ok(p) = serde_json::from_str::<Value>(text) else {
            continue;
        };
        if p["t"] != "MESSAGE_CREATE" {
            continue;
        }
        let d = &p["d"];
        let (Some(channel), Some(id)) = (
            d["channel_id"].as_str(),
            d["id"].as_str().and_then(|i| i.parse::<u64>().ok()),
        ) else {
            continue;
        };
        let entry = seen.entry(channel.to_owned()).or_default();
        if id > entry.last {
            entry.last = id;
            entry.guild = d["guild_id"].as_str().map(str::to_owned);
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_channel_is_read_from_its_newest_message_within_the_window() {
        let stored = [
            r#"{"t":"MESSAGE_CREATE","d":{"id":"100","channel_id":"5","guild_id":"G"}}"#,
            r#"{"t":"MESSAGE_CREATE","d":{"id":"120","channel_id":"5","guild_id":"G"}}"#,
            r#"{"t":"MESSAGE_CREATE","d":{"id":"90","channel_id":"6"}}"#,
            r#"{"t":"INTERACTION_CREATE","d":{"id":"999","channel_id":"5"}}"#,
        ];
        let seen = last_seen(stored.into_iter());
        assert_eq!(
            seen["5"],
            Seen {
                last: 120,
                guild: Some("G".into())
            }
        );
        assert_eq!(seen["6"].guild, None);
        // 2015-01-01 plus one second.
        assert_eq!(snowflake_at(DISCORD_EPOCH_MS + 1000), 1000 << 22);
        assert_eq!(snowflake_at(0), 0);
    }
}

//! A Slack payload, from either door (Socket Mode or the Events API), committed to the
//! inbox. A post is keyed by its channel and `ts`, so its `message` and `app_mention`
//! events (and Slack's retries of either) are one entry; other events by `event_id`.

use crate::BotStatus;
use herald_store::Store;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::Notify;

/// Where a bot's payloads go.
#[derive(Clone)]
pub struct Intake {
    pub store: Store,
    /// `chat:slack:<app>`.
    pub route: String,
    pub wake: Arc<Notify>,
    pub status: Arc<BotStatus>,
}

impl Intake {
    /// Commits `payload` (an `event_callback`, `block_actions` or a slash command
    /// tagged `slash_command`); resolves once it is durable. A payload herald does not
    /// serve is not stored.
    pub async fn commit(&self, payload: &Value) -> Result<(), herald_store::StoreError> {
        let Some((kind, id)) = identify(payload) else {
            tracing::debug!("slack: a payload herald does not serve; acknowledged");
            return Ok(());
        };
        let update = crate::intake::Update {
            route: &self.route,
            platform: "slack",
            kind,
            id: &id,
            payload,
        };
        crate::intake::commit(&self.store, update, &self.status).await?;
        self.status.polled(herald_store::now_ms());
        self.wake.notify_one();
        Ok(())
    }
}

/// A payload's kind and dedup key, for the kinds herald serves.
pub fn identify(payload: &Value) -> Option<(&'static str, String)> {
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    match payload["type"].as_str()? {
        "event_callback" => {
            let e = &payload["event"];
            let post = text(&e["channel"]).zip(text(&e["ts"]));
            let id = match (e["type"].as_str(), post) {
                (Some("message" | "app_mention"), Some((c, ts)))
                    if e["subtype"].is_null()
                        || e["subtype"] == "file_share"
                        || e["subtype"] == "thread_broadcast" =>
                {
                    format!("msg:{c}:{ts}")
                }
                _ => format!("ev:{}", text(&payload["event_id"])?),
            };
            Some(("event_callback", id))
        }
        "block_actions" => {
            let a = &payload["actions"][0];
            let id = text(&a["action_ts"]).or_else(|| text(&payload["trigger_id"]))?;
            Some(("block_actions", format!("act:{id}")))
        }
        "slash_command" => Some((
            "slash_command",
            format!("cmd:{}", text(&payload["trigger_id"])?),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::identify;
    use serde_json::json;

    #[test]
    fn a_posts_two_events_are_one_entry_and_retries_are_too() {
        let message = json!({"type": "event_callback", "event_id": "Ev1", "event": {"type": "message", "channel": "C1", "ts": "1.5"}});
        let mention = json!({"type": "event_callback", "event_id": "Ev2", "event": {"type": "app_mention", "channel": "C1", "ts": "1.5"}});
        assert_eq!(identify(&message), identify(&mention));
        let edit = json!({"type": "event_callback", "event_id": "Ev3", "event": {"type": "message", "subtype": "message_changed", "channel": "C1", "ts": "1.6"}});
        assert_eq!(identify(&edit).unwrap().1, "ev:Ev3");
        let click =
            json!({"type": "block_actions", "actions": [{"action_ts": "9.9"}], "trigger_id": "t"});
        assert_eq!(identify(&click).unwrap().1, "act:9.9");
        assert!(identify(&json!({"type": "view_submission"})).is_none());
    }
}

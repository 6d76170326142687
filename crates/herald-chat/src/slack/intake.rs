//! How a Slack payload, from either door (Socket Mode or the Events API), is named in
//! the inbox. A post is keyed by its channel and `ts`, so its `message` and `app_mention`
//! events (and Slack's retries of either) are one entry; other events by `event_id`.

pub use crate::intake::Intake;
use serde_json::Value;

/// A payload's kind and dedup key, for the kinds herald serves.
pub fn identify(payload: &Value) -> Option<(&'static str, String)> {
    let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_owned);
    match payload["type"].as_str()? {
        "event_callback" => {
            let e = &payload["event"];
            let post = text(&e["channel"]).zip(text(&e["ts"]));
            let id = match (e["type"].as_str(), post) {
                (Some("message" | "app_mention"), Some((c, ts))) => format!("msg:{c}:{ts}"),
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
        // Live, retried or read back, a message of any subtype has one key.
        assert_eq!(identify(&edit).unwrap().1, "msg:C1:1.6");
        let other =
            json!({"type": "event_callback", "event_id": "Ev4", "event": {"type": "team_join"}});
        assert_eq!(identify(&other).unwrap().1, "ev:Ev4");
        let click =
            json!({"type": "block_actions", "actions": [{"action_ts": "9.9"}], "trigger_id": "t"});
        assert_eq!(identify(&click).unwrap().1, "act:9.9");
        assert!(identify(&json!({"type": "view_submission"})).is_none());
    }
}

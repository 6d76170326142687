//! Slack's payloads as herald reads them: the events of the Events API (inside an
//! `event_callback`, whether it came over Socket Mode or HTTP), block actions (a
//! button pressed) and slash commands. Only the fields herald uses; every field may be
//! absent.

use serde::Deserialize;

/// What is stored in the inbox for one Slack delivery: the payload as Slack sent it.
#[derive(Debug, Deserialize)]
#[serde(tag = "type")]
pub enum Payload {
    #[serde(rename = "event_callback")]
    Event(EventCallback),
    #[serde(rename = "block_actions")]
    Actions(BlockActions),
    /// A slash command (stored with this tag added: Slack's has none).
    #[serde(rename = "slash_command")]
    Slash(SlashCommand),
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
pub struct EventCallback {
    #[serde(default)]
    pub event_id: String,
    #[serde(default)]
    pub team_id: String,
    pub event: Event,
}

/// A `message` or `app_mention` event (other types are read and left alone).
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub subtype: Option<String>,
    #[serde(default)]
    pub channel: String,
    /// `im`, `mpim`, `channel`, `group` (absent on `app_mention`).
    #[serde(default)]
    pub channel_type: Option<String>,
    #[serde(default)]
    pub user: Option<String>,
    #[serde(default)]
    pub bot_id: Option<String>,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub ts: String,
    #[serde(default)]
    pub thread_ts: Option<String>,
    #[serde(default)]
    pub files: Vec<File>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct File {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub mimetype: Option<String>,
    #[serde(default)]
    pub size: Option<u64>,
    #[serde(default)]
    pub subtype: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct BlockActions {
    pub user: ActionUser,
    #[serde(default)]
    pub container: Container,
    #[serde(default)]
    pub channel: Option<IdOnly>,
    #[serde(default)]
    pub actions: Vec<Action>,
    #[serde(default)]
    pub trigger_id: String,
}

#[derive(Debug, Deserialize)]
pub struct ActionUser {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub struct Container {
    #[serde(default)]
    pub channel_id: Option<String>,
    #[serde(default)]
    pub message_ts: Option<String>,
    #[serde(default)]
    pub thread_ts: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct IdOnly {
    pub id: String,
}

#[derive(Debug, Deserialize)]
pub struct Action {
    #[serde(default)]
    pub action_id: String,
    #[serde(default)]
    pub value: Option<String>,
}

/// A slash command's form fields.
#[derive(Debug, Deserialize)]
pub struct SlashCommand {
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub user_id: String,
    #[serde(default)]
    pub user_name: Option<String>,
    #[serde(default)]
    pub channel_id: String,
    #[serde(default)]
    pub trigger_id: String,
}

/// The action ids of the approval buttons, as Hermes names them, and the door's
/// choice letter of each.
pub const APPROVAL_ACTIONS: &[(&str, &str, &str)] = &[
    ("hermes_approve_once", "Allow Once", "o"),
    ("hermes_approve_session", "Allow Session", "s"),
    ("hermes_approve_always", "Always Allow", "a"),
    ("hermes_deny", "Deny", "d"),
];

/// The chat a stored payload belongs to (`<channel>` or `<channel>:<thread>`), read
/// cheaply: entries of one chat are taken in order.
pub fn chat_of(payload: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Peek {
        event: Option<PeekEvent>,
        container: Option<Container>,
        channel_id: Option<String>,
    }
    #[derive(Deserialize)]
    struct PeekEvent {
        channel: Option<String>,
        ts: Option<String>,
        thread_ts: Option<String>,
    }
    let peek: Peek = serde_json::from_str(payload).ok()?;
    if let Some(e) = peek.event {
        let thread = e.thread_ts.or(e.ts).unwrap_or_default();
        return Some(format!("{}:{thread}", e.channel?));
    }
    if let Some(c) = peek.container {
        let thread = c.thread_ts.or(c.message_ts).unwrap_or_default();
        return Some(format!("{}:{thread}", c.channel_id?));
    }
    peek.channel_id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_read_by_their_type() {
        let event = r#"{"type":"event_callback","event_id":"Ev1","team_id":"T1","event":{"type":"message","channel":"D1","channel_type":"im","user":"U1","text":"hi","ts":"1.000100"}}"#;
        let Ok(Payload::Event(e)) = serde_json::from_str::<Payload>(event) else {
            panic!("not an event");
        };
        assert_eq!(e.event.ts, "1.000100");
        assert_eq!(chat_of(event).as_deref(), Some("D1:1.000100"));
        let click = r#"{"type":"block_actions","user":{"id":"U1","name":"ann"},"container":{"type":"message","channel_id":"C1","message_ts":"2.0","thread_ts":"1.0"},"actions":[{"action_id":"hermes_deny","value":"ap:t:d"}],"trigger_id":"x"}"#;
        assert!(matches!(
            serde_json::from_str::<Payload>(click),
            Ok(Payload::Actions(_))
        ));
        assert_eq!(chat_of(click).as_deref(), Some("C1:1.0"));
        assert!(matches!(
            serde_json::from_str::<Payload>(r#"{"type":"view_submission"}"#),
            Ok(Payload::Other)
        ));
    }
}

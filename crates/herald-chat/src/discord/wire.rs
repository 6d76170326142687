//! Discord's payloads as herald reads them: a message (MESSAGE_CREATE, live, replayed
//! or read back) and a button press (INTERACTION_CREATE). Only the fields herald uses;
//! any may be absent.

use serde::Deserialize;

/// What is stored for one gateway event: its type and data.
#[derive(Debug, Deserialize)]
#[serde(tag = "t", content = "d")]
pub enum Payload {
    #[serde(rename = "MESSAGE_CREATE")]
    Message(Message),
    #[serde(rename = "INTERACTION_CREATE")]
    Interaction(Interaction),
}

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub id: String,
    pub channel_id: String,
    #[serde(default)]
    pub guild_id: Option<String>,
    pub author: User,
    #[serde(default)]
    pub member: Option<Member>,
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub mentions: Vec<User>,
    #[serde(default)]
    pub attachments: Vec<Attachment>,
    /// 0: a plain message, 19: a reply; others are system messages.
    #[serde(default, rename = "type")]
    pub kind: u64,
    #[serde(default)]
    pub webhook_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct User {
    pub id: String,
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub global_name: Option<String>,
    #[serde(default)]
    pub bot: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Member {
    #[serde(default)]
    pub roles: Vec<String>,
    /// Present on an interaction's member.
    #[serde(default)]
    pub user: Option<User>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Attachment {
    pub id: String,
    #[serde(default)]
    pub filename: String,
    #[serde(default)]
    pub size: Option<u64>,
    pub url: String,
    #[serde(default)]
    pub content_type: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Interaction {
    pub id: String,
    /// 3: a message component (a button).
    #[serde(rename = "type")]
    pub kind: u64,
    #[serde(default)]
    pub channel_id: Option<String>,
    #[serde(default)]
    pub guild_id: Option<String>,
    #[serde(default)]
    pub member: Option<Member>,
    /// In a DM.
    #[serde(default)]
    pub user: Option<User>,
    #[serde(default)]
    pub message: Option<InteractionMessage>,
    #[serde(default)]
    pub data: Option<ComponentData>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct InteractionMessage {
    pub id: String,
}

/// A button's data (`custom_id`) or a slash command's (`name`, `options`).
#[derive(Debug, Clone, Deserialize)]
pub struct ComponentData {
    #[serde(default)]
    pub custom_id: String,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub options: Vec<CommandOption>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CommandOption {
    #[serde(default)]
    pub value: serde_json::Value,
}

impl Interaction {
    /// Who pressed.
    pub fn presser(&self) -> Option<&User> {
        self.member
            .as_ref()
            .and_then(|m| m.user.as_ref())
            .or(self.user.as_ref())
    }
}

/// The chat a stored payload belongs to (its channel), read cheaply.
pub fn chat_of(payload: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct Peek {
        d: PeekData,
    }
    #[derive(Deserialize)]
    struct PeekData {
        channel_id: Option<String>,
    }
    serde_json::from_str::<Peek>(payload).ok()?.d.channel_id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_presses_are_read_by_their_type() {
        let m = r#"{"t":"MESSAGE_CREATE","d":{"id":"1","channel_id":"2","author":{"id":"3","username":"ann"},"content":"hi","mentions":[],"type":0}}"#;
        let Ok(Payload::Message(msg)) = serde_json::from_str::<Payload>(m) else {
            panic!("not a message");
        };
        assert_eq!(
            (msg.id.as_str(), msg.author.username.as_str()),
            ("1", "ann")
        );
        assert_eq!(chat_of(m).as_deref(), Some("2"));
        let i = r#"{"t":"INTERACTION_CREATE","d":{"id":"9","type":3,"channel_id":"2","member":{"roles":[],"user":{"id":"3","username":"ann"}},"message":{"id":"8"},"data":{"custom_id":"ap:t:o","component_type":2}}}"#;
        let Ok(Payload::Interaction(press)) = serde_json::from_str::<Payload>(i) else {
            panic!("not an interaction");
        };
        assert_eq!(press.presser().unwrap().id, "3");
        // Only messages and presses are stored; anything else does not read.
        assert!(serde_json::from_str::<Payload>(r#"{"t":"TYPING_START","d":{}}"#).is_err());
    }
}

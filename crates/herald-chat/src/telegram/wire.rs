//! The parts of the Bot API's update objects the door reads (unknown fields are
//! ignored, as Telegram adds them).

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub struct Update {
    pub update_id: i64,
    pub message: Option<Message>,
    pub callback_query: Option<CallbackQuery>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub message_id: i64,
    pub chat: Chat,
    pub from: Option<User>,
    pub text: Option<String>,
    pub caption: Option<String>,
    pub message_thread_id: Option<i64>,
    #[serde(default)]
    pub is_topic_message: bool,
    #[serde(default)]
    pub entities: Vec<Entity>,
    #[serde(default)]
    pub caption_entities: Vec<Entity>,
    pub reply_to_message: Option<Box<Message>>,
    /// A photo in its sizes, smallest first.
    #[serde(default)]
    pub photo: Vec<PhotoSize>,
    pub document: Option<FileMeta>,
    pub voice: Option<FileMeta>,
    pub audio: Option<FileMeta>,
    pub video: Option<FileMeta>,
    pub sticker: Option<serde_json::Value>,
}

/// A file attached to a message (document, voice note, audio, video).
#[derive(Debug, Clone, Deserialize)]
pub struct FileMeta {
    pub file_name: Option<String>,
}

impl Message {
    /// A note for the model on an attachment herald does not read yet (as Hermes
    /// notes what it cannot take), so nothing sent is dropped without a word.
    pub fn unread_attachment(&self) -> Option<String> {
        let named = |kind: &str, f: &FileMeta| match &f.file_name {
            Some(name) => format!("a {kind} ({name})"),
            None => format!("a {kind}"),
        };
        let what = [
            self.document.as_ref().map(|f| named("document", f)),
            self.voice.as_ref().map(|f| named("voice note", f)),
            self.audio.as_ref().map(|f| named("audio file", f)),
            self.video.as_ref().map(|f| named("video", f)),
            self.sticker.as_ref().map(|_| "a sticker".to_owned()),
        ]
        .into_iter()
        .flatten()
        .next()?;
        Some(format!(
            "[The user sent {what}, which herald cannot open yet.]"
        ))
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct PhotoSize {
    pub file_id: String,
    pub file_size: Option<u64>,
}

/// What `getFile` answers.
#[derive(Debug, Clone, Deserialize)]
pub struct FileInfo {
    pub file_path: Option<String>,
    pub file_size: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Chat {
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub is_forum: bool,
}

#[derive(Debug, Clone, Deserialize)]
pub struct User {
    pub id: i64,
    #[serde(default)]
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
    pub username: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Entity {
    #[serde(rename = "type")]
    pub kind: String,
    pub offset: usize,
    pub length: usize,
}

#[derive(Debug, Clone, Deserialize)]
pub struct CallbackQuery {
    pub id: String,
    pub from: User,
    pub message: Option<Message>,
    pub data: Option<String>,
}

/// What `getMe` says of the bot.
#[derive(Debug, Clone, Deserialize)]
pub struct Me {
    pub id: i64,
    pub username: Option<String>,
    #[serde(default)]
    pub can_read_all_group_messages: bool,
}

/// What `sendMessage` answers.
#[derive(Debug, Clone, Deserialize)]
pub struct Sent {
    pub message_id: i64,
}

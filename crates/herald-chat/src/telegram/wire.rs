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
    #[serde(default)]
    pub file_id: String,
    pub file_name: Option<String>,
    pub file_size: Option<u64>,
    pub mime_type: Option<String>,
}

impl Message {
    /// The files of a message the door saves for the model, and a sticker's note
    /// (stickers are named, not read).
    pub fn attachments(&self) -> (Vec<crate::door::Attachment>, Option<String>) {
        use crate::door::{Attachment, AttachmentKind};
        let file = |kind, f: &FileMeta| Attachment {
            file_id: f.file_id.clone(),
            name: f.file_name.clone(),
            size: f.file_size,
            mime: f.mime_type.clone(),
            kind,
        };
        let mut files: Vec<Attachment> = [
            self.document
                .as_ref()
                .map(|f| file(AttachmentKind::Document, f)),
            self.voice.as_ref().map(|f| file(AttachmentKind::Voice, f)),
            self.audio.as_ref().map(|f| file(AttachmentKind::Audio, f)),
            self.video.as_ref().map(|f| file(AttachmentKind::Video, f)),
        ]
        .into_iter()
        .flatten()
        .filter(|f| !f.file_id.is_empty())
        .collect();
        // The largest size of a photo.
        if let Some(p) = self.photo.last() {
            files.push(Attachment {
                file_id: p.file_id.clone(),
                name: None,
                size: p.file_size,
                mime: None,
                kind: AttachmentKind::Photo,
            });
        }
        let sticker = self
            .sticker
            .as_ref()
            .map(|_| "[The user sent a sticker, which herald does not read.]".to_owned());
        (files, sticker)
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

//! Files through the Bot API: `getFile` and its download, and uploads
//! (`sendPhoto`, `sendDocument`, `sendVoice`, `sendAudio`, `sendVideo`) as multipart
//! forms, each through the send governor.

use super::Telegram;
use super::api::ApiError;
use super::wire::{FileInfo, Sent};
use crate::door::{ChatRef, Downloaded, OutFile, OutKind};
use reqwest::multipart::{Form, Part};
use serde_json::json;
use std::time::Duration;

impl Telegram {
    /// Fetches a file by id, refusing more than `max` bytes.
    pub(crate) async fn fetch(&self, file_id: &str, max: u64) -> Result<Downloaded, String> {
        let body = json!({"file_id": file_id});
        let info: FileInfo = self
            .api
            .call("getFile", &body, Duration::ZERO)
            .await
            .map_err(|e| e.to_string())?;
        if info.file_size.is_some_and(|n| n > max) {
            return Err(format!("larger than {} MB", max >> 20));
        }
        let path = info.file_path.ok_or("Telegram gave no file path")?;
        let cap = usize::try_from(max).unwrap_or(usize::MAX);
        let bytes = self
            .api
            .download(&path, cap)
            .await
            .map_err(|e| e.to_string())?;
        Ok(Downloaded { bytes, path })
    }

    /// Uploads one file to `chat` in its slot: the message's id.
    pub(crate) async fn upload(&self, chat: &ChatRef, file: OutFile) -> Result<i64, ApiError> {
        let (method, field) = match file.kind {
            OutKind::Photo => ("sendPhoto", "photo"),
            OutKind::Voice => ("sendVoice", "voice"),
            OutKind::Audio => ("sendAudio", "audio"),
            OutKind::Video => ("sendVideo", "video"),
            OutKind::Document => ("sendDocument", "document"),
        };
        let mut form = Form::new()
            .text("chat_id", chat.chat_id.clone())
            .part(field, Part::bytes(file.bytes).file_name(file.name));
        if let Some(t) = super::topic_of(chat) {
            form = form.text("message_thread_id", t.to_string());
        }
        self.governor.slot(&chat.chat_id, chat.group).await;
        match self.api.upload::<Sent>(method, form).await {
            Ok(sent) => Ok(sent.message_id),
            Err(ApiError::Flood(wait)) => {
                self.governor.flooded(&chat.chat_id, wait);
                Err(ApiError::Flood(wait))
            }
            Err(e) => Err(e),
        }
    }
}

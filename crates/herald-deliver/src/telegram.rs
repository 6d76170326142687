//! Telegram Bot API: `POST <base_url><token>/sendMessage`.

use crate::http::{network_error, read_answer, status_error};
use crate::split::{TELEGRAM_MAX_UTF16, split_message, utf16_len};
use crate::{OutgoingMessage, Receipt, SendError, SendFuture, Target};
use serde_json::{Value, json};
use std::time::Duration;

pub struct Telegram {
    pub client: reqwest::Client,
    /// Per-request time limit (`platforms.<name>.extra.timeout_seconds`, default 15).
    pub timeout: std::time::Duration,
    /// Requests go to `<base_url><token>/<method>`.
    pub base_url: String,
    pub token: Option<String>,
    pub home_channel: Option<String>,
}

impl Telegram {
    async fn send_text(&self, message: &OutgoingMessage) -> Result<Receipt, SendError> {
        let token = self.token.as_deref().ok_or_else(|| {
            SendError::permanent(
                "telegram: no bot token: set TELEGRAM_BOT_TOKEN (or platforms.telegram.token)",
            )
        })?;
        let chat_id = message.extra_text("chat_id").or_else(|| self.home_channel.clone()).ok_or_else(|| {
            SendError::permanent(
                "telegram: no chat id or home channel: set deliver_extra.chat_id or TELEGRAM_HOME_CHANNEL",
            )
        })?;
        // The General topic (1) is addressed without a thread id.
        let thread = message.thread().filter(|t| t != "1");
        let url = format!("{}{}/sendMessage", self.base_url, token);
        let mut receipt = Receipt::default();
        for part in split_message(&message.text, TELEGRAM_MAX_UTF16, utf16_len) {
            let mut body =
                json!({ "chat_id": chat_id, "text": part, "disable_notification": true });
            if let Some(t) = &thread {
                body["message_thread_id"] = t
                    .parse::<i64>()
                    .map(Value::from)
                    .unwrap_or_else(|_| Value::from(t.clone()));
            }
            let resp = self
                .client
                .post(&url)
                .json(&body)
                .timeout(self.timeout)
                .send()
                .await
                .map_err(|e| network_error("telegram", &e))?;
            let (status, retry_after, text) = read_answer("telegram", resp).await?;
            let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            if (200..300).contains(&status) && answer["ok"] == Value::Bool(true) {
                if let Some(id) = answer["result"]["message_id"].as_i64() {
                    receipt.message_ids.push(id.to_string());
                }
                continue;
            }
            // Telegram puts the wait in the body as well as the header.
            let retry_after = answer["parameters"]["retry_after"]
                .as_u64()
                .map(Duration::from_secs)
                .or(retry_after);
            let detail = answer["description"].as_str().unwrap_or(&text);
            return Err(status_error("telegram", status, retry_after, detail));
        }
        Ok(receipt)
    }
}

impl Target for Telegram {
    fn name(&self) -> &str {
        "telegram"
    }
    fn send<'a>(&'a self, message: &'a OutgoingMessage) -> SendFuture<'a> {
        Box::pin(self.send_text(message))
    }
}

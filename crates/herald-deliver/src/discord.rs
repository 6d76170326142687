//! Discord: bot token REST (`POST /channels/<id>/messages`) and webhook URLs.

use crate::http::{network_error, read_answer, status_error};
use crate::split::{DISCORD_MAX_CHARS, char_len, split_message};
use crate::{OutgoingMessage, Receipt, SendError, SendFuture, Target};
use serde_json::{Value, json};
use std::time::Duration;

pub struct Discord {
    pub client: reqwest::Client,
    /// Per-request time limit (`platforms.<name>.extra.timeout_seconds`, default 15).
    pub timeout: std::time::Duration,
    pub base_url: String,
    pub token: Option<String>,
    pub home_channel: Option<String>,
}

impl Discord {
    async fn send_text(&self, message: &OutgoingMessage) -> Result<Receipt, SendError> {
        // A webhook URL (in deliver_extra.webhook_url or as the chat id) needs no token.
        let webhook = message.extra_text("webhook_url").or_else(|| {
            message
                .extra_text("chat_id")
                .filter(|c| c.starts_with("http"))
        });
        let (url, auth) = match webhook {
            Some(hook) => {
                let url = match message.thread() {
                    Some(t) => format!(
                        "{hook}{}thread_id={t}",
                        if hook.contains('?') { '&' } else { '?' }
                    ),
                    None => hook,
                };
                let sep = if url.contains('?') { '&' } else { '?' };
                (format!("{url}{sep}wait=true"), None)
            }
            None => {
                let token = self.token.as_deref().ok_or_else(|| {
                    SendError::permanent(
                        "discord: no bot token: set DISCORD_BOT_TOKEN (or give a webhook_url)",
                    )
                })?;
                // A thread is a channel of its own.
                let channel = message
                    .thread()
                    .or_else(|| message.extra_text("chat_id"))
                    .or_else(|| self.home_channel.clone())
                    .ok_or_else(|| {
                        SendError::permanent("discord: no chat id or home channel: set deliver_extra.chat_id or DISCORD_HOME_CHANNEL")
                    })?;
                if !channel.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(SendError::permanent(format!(
                        "discord: channel id {channel:?} is not a numeric id"
                    )));
                }
                (
                    format!(
                        "{}/channels/{channel}/messages",
                        self.base_url.trim_end_matches('/')
                    ),
                    Some(format!("Bot {token}")),
                )
            }
        };
        let mut receipt = Receipt::default();
        for part in split_message(&message.text, DISCORD_MAX_CHARS, char_len) {
            let sent = self
                .request(reqwest::Method::POST, &url, auth.as_deref(), &part)
                .await?;
            receipt.message_ids.extend(sent);
        }
        Ok(receipt)
    }

    /// Sends one message part; the message id Discord gave it, if any.
    pub(crate) async fn request(
        &self,
        method: reqwest::Method,
        url: &str,
        auth: Option<&str>,
        content: &str,
    ) -> Result<Option<String>, SendError> {
        let mut req = self
            .client
            .request(method, url)
            .json(&json!({ "content": content }));
        if let Some(a) = auth {
            req = req.header(reqwest::header::AUTHORIZATION, a);
        }
        let resp = req
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| network_error("discord", &e))?;
        let (status, retry_after, text) = read_answer("discord", resp).await?;
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(answer["id"].as_str().map(str::to_owned));
        }
        let retry_after = answer["retry_after"]
            .as_f64()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .or(retry_after);
        let detail = answer["message"].as_str().unwrap_or(&text);
        Err(status_error("discord", status, retry_after, detail))
    }
}

impl Target for Discord {
    fn name(&self) -> &str {
        "discord"
    }
    fn send<'a>(&'a self, message: &'a OutgoingMessage) -> SendFuture<'a> {
        Box::pin(self.send_text(message))
    }
}

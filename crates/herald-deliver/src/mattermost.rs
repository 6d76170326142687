//! Mattermost: `POST <MATTERMOST_URL>/api/v4/posts` with a bearer token.

use crate::http::{network_error, read_answer, status_error};
use crate::split::{char_len, split_message};
use crate::{OutgoingMessage, Receipt, SendError, SendFuture, Target};
use serde_json::{Value, json};

/// Mattermost's default post size limit.
const MAX_CHARS: usize = 16383;

pub struct Mattermost {
    pub client: reqwest::Client,
    /// Per-request time limit (`platforms.<name>.extra.timeout_seconds`, default 15).
    pub timeout: std::time::Duration,
    pub url: Option<String>,
    pub token: Option<String>,
    pub home_channel: Option<String>,
}

impl Mattermost {
    async fn send_text(&self, message: &OutgoingMessage) -> Result<Receipt, SendError> {
        let url = self
            .url
            .as_deref()
            .ok_or_else(|| SendError::permanent("mattermost: no server: set MATTERMOST_URL"))?;
        let token = self
            .token
            .as_deref()
            .ok_or_else(|| SendError::permanent("mattermost: no token: set MATTERMOST_TOKEN"))?;
        let channel = message.extra_text("chat_id").or_else(|| self.home_channel.clone()).ok_or_else(|| {
            SendError::permanent("mattermost: no chat id or home channel: set deliver_extra.chat_id or MATTERMOST_HOME_CHANNEL")
        })?;
        let endpoint = format!("{}/api/v4/posts", url.trim_end_matches('/'));
        let mut receipt = Receipt::default();
        for part in split_message(&message.text, MAX_CHARS, char_len) {
            let mut body = json!({ "channel_id": channel, "message": part });
            if let Some(root) = message.thread() {
                body["root_id"] = Value::from(root);
            }
            let resp = self
                .client
                .post(&endpoint)
                .bearer_auth(token)
                .json(&body)
                .timeout(self.timeout)
                .send()
                .await
                .map_err(|e| network_error("mattermost", &e))?;
            let (status, retry_after, text) = read_answer("mattermost", resp).await?;
            if !(200..300).contains(&status) {
                let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                return Err(status_error(
                    "mattermost",
                    status,
                    retry_after,
                    answer["message"].as_str().unwrap_or(&text),
                ));
            }
            if let Some(id) = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["id"].as_str().map(str::to_owned))
            {
                receipt.message_ids.push(id);
            }
        }
        Ok(receipt)
    }
}

impl Target for Mattermost {
    fn name(&self) -> &str {
        "mattermost"
    }
    fn send<'a>(&'a self, message: &'a OutgoingMessage) -> SendFuture<'a> {
        Box::pin(self.send_text(message))
    }
}

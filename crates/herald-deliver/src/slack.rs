//! Slack: `chat.postMessage` with a bot token, and incoming-webhook URLs.

use crate::http::{network_error, read_answer, status_error};
use crate::split::{SLACK_MAX_CHARS, char_len, split_message};
use crate::{OutgoingMessage, Receipt, SendError, SendFuture, Target};
use serde_json::{Value, json};

pub struct Slack {
    pub client: reqwest::Client,
    /// Per-request time limit (`platforms.<name>.extra.timeout_seconds`, default 15).
    pub timeout: std::time::Duration,
    /// `https://slack.com/api/` by default; methods are appended.
    pub base_url: String,
    pub token: Option<String>,
    pub home_channel: Option<String>,
}

/// Slack `error` codes worth a retry.
const TRANSIENT_ERRORS: &[&str] = &[
    "ratelimited",
    "service_unavailable",
    "internal_error",
    "fatal_error",
    "request_timeout",
];

impl Slack {
    async fn send_text(&self, message: &OutgoingMessage) -> Result<Receipt, SendError> {
        let webhook = message.extra_text("webhook_url").or_else(|| {
            message
                .extra_text("chat_id")
                .filter(|c| c.starts_with("http"))
        });
        let mut receipt = Receipt::default();
        let thread = message.extra_text("thread_ts").or_else(|| message.thread());
        let text = crate::slack_mrkdwn::markdown_to_mrkdwn(&message.text);
        for part in split_message(&text, SLACK_MAX_CHARS, char_len) {
            let resp = match &webhook {
                Some(hook) => {
                    let mut body = json!({ "text": part });
                    if let Some(t) = &thread {
                        body["thread_ts"] = Value::from(t.clone());
                    }
                    self.client.post(hook).json(&body).timeout(self.timeout).send().await
                }
                None => {
                    let token = self.token.as_deref().ok_or_else(|| {
                        SendError::permanent("slack: no bot token: set SLACK_BOT_TOKEN (or give a webhook_url)")
                    })?;
                    let channel = message.extra_text("chat_id").or_else(|| self.home_channel.clone()).ok_or_else(|| {
                        SendError::permanent("slack: no chat id or home channel: set deliver_extra.chat_id or SLACK_HOME_CHANNEL")
                    })?;
                    let mut body = json!({ "channel": channel, "text": part });
                    if let Some(t) = &thread {
                        body["thread_ts"] = Value::from(t.clone());
                    }
                    let url = format!("{}/chat.postMessage", self.base_url.trim_end_matches('/'));
                    self.client.post(url).bearer_auth(token).json(&body).timeout(self.timeout).send().await
                }
            }
            .map_err(|e| network_error("slack", &e))?;
            let (status, retry_after, text) = read_answer("slack", resp).await?;
            if !(200..300).contains(&status) {
                return Err(status_error("slack", status, retry_after, &text));
            }
            if webhook.is_some() {
                // Incoming webhooks answer the plain text "ok".
                continue;
            }
            let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            if answer["ok"] == Value::Bool(true) {
                if let Some(ts) = answer["ts"].as_str() {
                    receipt.message_ids.push(ts.to_owned());
                }
                continue;
            }
            let error = answer["error"].as_str().unwrap_or("unknown_error");
            let message = format!("slack: {error}");
            return Err(if TRANSIENT_ERRORS.contains(&error) {
                SendError::transient(message, retry_after)
            } else {
                SendError::permanent(message)
            });
        }
        Ok(receipt)
    }
}

impl Target for Slack {
    fn name(&self) -> &str {
        "slack"
    }
    fn send<'a>(&'a self, message: &'a OutgoingMessage) -> SendFuture<'a> {
        Box::pin(self.send_text(message))
    }
}

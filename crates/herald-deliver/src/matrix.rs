//! Matrix client-server API: `PUT /_matrix/client/v3/rooms/<room>/send/m.room.message/<txn>`.

use crate::http::{network_error, read_answer, status_error};
use crate::{OutgoingMessage, Receipt, SendError, SendFuture, Target};
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};
use std::time::Duration;

pub struct Matrix {
    pub client: reqwest::Client,
    /// Per-request time limit (`platforms.<name>.extra.timeout_seconds`, default 15).
    pub timeout: std::time::Duration,
    pub homeserver: Option<String>,
    pub token: Option<String>,
    pub home_room: Option<String>,
}

impl Matrix {
    async fn send_text(&self, message: &OutgoingMessage) -> Result<Receipt, SendError> {
        let hs = self
            .homeserver
            .as_deref()
            .ok_or_else(|| SendError::permanent("matrix: no homeserver: set MATRIX_HOMESERVER"))?;
        let token = self.token.as_deref().ok_or_else(|| {
            SendError::permanent("matrix: no access token: set MATRIX_ACCESS_TOKEN")
        })?;
        let room = message
            .extra_text("chat_id")
            .or_else(|| self.home_room.clone())
            .ok_or_else(|| {
                SendError::permanent(
                    "matrix: no room: set deliver_extra.chat_id or MATRIX_HOME_ROOM",
                )
            })?;
        // The transaction id makes a retried PUT idempotent on the homeserver.
        let txn = message
            .extra_text("_txn_id")
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let url = format!(
            "{}/_matrix/client/v3/rooms/{}/send/m.room.message/{}",
            hs.trim_end_matches('/'),
            utf8_percent_encode(&room, NON_ALPHANUMERIC),
            utf8_percent_encode(&txn, NON_ALPHANUMERIC)
        );
        let mut body = json!({ "msgtype": "m.text", "body": message.text });
        if let Some(thread) = message.thread() {
            body["m.relates_to"] = json!({ "rel_type": "m.thread", "event_id": thread });
        }
        let resp = self
            .client
            .put(&url)
            .bearer_auth(token)
            .json(&body)
            .timeout(self.timeout)
            .send()
            .await
            .map_err(|e| network_error("matrix", &e))?;
        let (status, retry_after, text) = read_answer("matrix", resp).await?;
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(Receipt {
                message_ids: answer["event_id"]
                    .as_str()
                    .map(|s| vec![s.to_owned()])
                    .unwrap_or_default(),
            });
        }
        let retry_after = answer["retry_after_ms"]
            .as_u64()
            .map(Duration::from_millis)
            .or(retry_after);
        Err(status_error(
            "matrix",
            status,
            retry_after,
            answer["error"].as_str().unwrap_or(&text),
        ))
    }
}

impl Target for Matrix {
    fn name(&self) -> &str {
        "matrix"
    }
    fn send<'a>(&'a self, message: &'a OutgoingMessage) -> SendFuture<'a> {
        Box::pin(self.send_text(message))
    }
}

//! The Bot API client: `POST <base_url><token>/<method>` with a JSON body, answered
//! `{"ok": true, "result": ...}` or `{"ok": false, "error_code", "description",
//! "parameters": {"retry_after"}}`. The token is part of every URL, so URLs are never
//! logged.

use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;

/// Why a call did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// No answer: the request may or may not have reached Telegram.
    #[error("telegram: {0}")]
    Network(String),
    /// 429: wait this long before the next call of this kind.
    #[error("telegram: flood control, retry after {}s", .0.as_secs())]
    Flood(Duration),
    /// 409: another poller or a webhook holds the bot's updates.
    #[error("telegram: {0}")]
    Conflict(String),
    /// Telegram refused the call (a bad request, a blocked chat, a wrong token).
    #[error("telegram: {code}: {description}")]
    Refused { code: i64, description: String },
}

impl ApiError {
    /// Whether Telegram refused the text's formatting (HTML it cannot parse).
    pub fn bad_formatting(&self) -> bool {
        matches!(self, ApiError::Refused { code: 400, description } if description.contains("can't parse entities"))
    }
}

/// One bot's Bot API endpoint.
#[derive(Clone)]
pub struct BotApi {
    client: reqwest::Client,
    /// `<base_url><token>/`.
    base: String,
    /// `<file base><token>/`, where `getFile`'s paths are downloaded.
    files: String,
    /// Per-call limit besides a long poll's own wait.
    timeout: Duration,
}

impl std::fmt::Debug for BotApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BotApi { .. }")
    }
}

impl BotApi {
    /// `base_url` as Hermes's `extra.base_url` (`https://api.telegram.org/bot`).
    pub fn new(client: reqwest::Client, base_url: &str, token: &str, timeout: Duration) -> BotApi {
        BotApi {
            client,
            base: format!("{base_url}{token}/"),
            files: format!("{}{token}/", file_base(base_url)),
            timeout,
        }
    }

    /// Downloads a file `getFile` named, refusing more than `max` bytes.
    pub async fn download(&self, file_path: &str, max: usize) -> Result<Vec<u8>, ApiError> {
        let resp = self
            .client
            .get(format!("{}{file_path}", self.files))
            .timeout(self.timeout * 3)
            .send()
            .await
            .map_err(|e| ApiError::Network(describe(&e)))?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(ApiError::Refused {
                code: i64::from(status),
                description: "the file could not be downloaded".into(),
            });
        }
        read_capped(resp, max).await
    }

    /// Calls `method` with `body`, waiting at most the client's limit plus `extra`.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        body: &Value,
        extra: Duration,
    ) -> Result<T, ApiError> {
        let request = self
            .client
            .post(format!("{}{method}", self.base))
            .json(body)
            .timeout(self.timeout + extra);
        answered(request).await
    }

    /// Calls `method` with a multipart form (a file upload); a file's upload may take
    /// a minute more than a call.
    pub async fn upload<T: DeserializeOwned>(
        &self,
        method: &str,
        form: reqwest::multipart::Form,
    ) -> Result<T, ApiError> {
        let request = self
            .client
            .post(format!("{}{method}", self.base))
            .multipart(form)
            .timeout(self.timeout + Duration::from_secs(60));
        answered(request).await
    }
}

/// Sends a call and reads its answer's envelope.
async fn answered<T: DeserializeOwned>(request: reqwest::RequestBuilder) -> Result<T, ApiError> {
    let resp = request
        .send()
        .await
        .map_err(|e| ApiError::Network(describe(&e)))?;
    let status = resp.status().as_u16();
    let bytes = read_capped(resp, MAX_ANSWER_BYTES).await?;
    answer(status, &bytes)
}

/// The largest answer read (a full `getUpdates` batch is far below it).
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// Where files are downloaded from: `https://api.telegram.org/bot` gives
/// `https://api.telegram.org/file/bot` (a local Bot API server's likewise).
fn file_base(base_url: &str) -> String {
    match base_url.strip_suffix("/bot") {
        Some(host) => format!("{host}/file/bot"),
        None => format!("{}/file/bot", base_url.trim_end_matches('/')),
    }
}

/// Reads a body, refusing one larger than `max`.
async fn read_capped(resp: reqwest::Response, max: usize) -> Result<Vec<u8>, ApiError> {
    crate::net::read_capped(resp, max)
        .await
        .map_err(ApiError::Network)
}

/// A network error in words, without the URL (it holds the token).
fn describe(e: &reqwest::Error) -> String {
    crate::net::describe(e)
}

#[derive(serde::Deserialize)]
struct Envelope {
    ok: bool,
    result: Option<Value>,
    error_code: Option<i64>,
    description: Option<String>,
    parameters: Option<Parameters>,
}

#[derive(serde::Deserialize)]
struct Parameters {
    retry_after: Option<u64>,
}

/// Reads an answer's envelope.
fn answer<T: DeserializeOwned>(status: u16, bytes: &[u8]) -> Result<T, ApiError> {
    let envelope: Envelope = serde_json::from_slice(bytes).map_err(|_| ApiError::Refused {
        code: i64::from(status),
        description: format!("not a Bot API answer (HTTP {status})"),
    })?;
    if envelope.ok {
        let result = envelope.result.unwrap_or(Value::Bool(true));
        return serde_json::from_value(result).map_err(|e| ApiError::Refused {
            code: i64::from(status),
            description: format!("unexpected result: {e}"),
        });
    }
    let code = envelope.error_code.unwrap_or(i64::from(status));
    let description = envelope.description.unwrap_or_default();
    let retry = envelope.parameters.and_then(|p| p.retry_after);
    Err(match (code, retry) {
        (429, wait) => ApiError::Flood(Duration::from_secs(wait.unwrap_or(1).clamp(1, 3600))),
        (409, _) => ApiError::Conflict(description),
        _ => ApiError::Refused { code, description },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_from_their_envelope() {
        let ok: Value = answer(200, br#"{"ok":true,"result":{"id":1}}"#).unwrap();
        assert_eq!(ok["id"], 1);
        let flood = answer::<Value>(
            429,
            br#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 7","parameters":{"retry_after":7}}"#,
        );
        assert!(matches!(flood, Err(ApiError::Flood(d)) if d == Duration::from_secs(7)));
        let conflict = answer::<Value>(409, br#"{"ok":false,"error_code":409,"description":"Conflict: terminated by other getUpdates request"}"#);
        assert!(matches!(conflict, Err(ApiError::Conflict(_))));
        let html = answer::<Value>(400, br#"{"ok":false,"error_code":400,"description":"Bad Request: can't parse entities: Unsupported start tag"}"#);
        assert!(html.unwrap_err().bad_formatting());
        assert!(matches!(
            answer::<Value>(502, b"<html>"),
            Err(ApiError::Refused { code: 502, .. })
        ));
    }
}

//! The Web API client: `POST <base>/<method>` with the token as a bearer header (never
//! in a URL), answered `{"ok": true, ...}` or `{"ok": false, "error": "..."}`. Slack
//! limits each method per workspace (and `chat.postMessage` per channel): a 429's
//! `Retry-After` pauses that method (that channel's posts) here, so every later call
//! waits the pause out instead of being refused again.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Why a call did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// No answer: the request may or may not have reached Slack.
    #[error("slack: {0}")]
    Network(String),
    /// 429: the method (and for `chat.postMessage` the channel) waits this long.
    #[error("slack: rate limited, retry after {}s", .0.as_secs())]
    RateLimited(Duration),
    /// Slack answered `ok: false` (or an HTTP error).
    #[error("slack: {0}")]
    Refused(String),
}

impl ApiError {
    /// Worth another try later.
    pub fn transient(&self) -> bool {
        match self {
            ApiError::Network(_) | ApiError::RateLimited(_) => true,
            ApiError::Refused(e) => TRANSIENT.contains(&e.as_str()) || e.starts_with("HTTP 5"),
        }
    }
}

/// Slack `error` codes worth another try.
const TRANSIENT: &[&str] = &[
    "ratelimited",
    "service_unavailable",
    "internal_error",
    "fatal_error",
    "request_timeout",
];

/// The largest answer read.
const MAX_ANSWER_BYTES: usize = 8 << 20;

/// One token's Web API endpoint.
pub struct WebApi {
    client: reqwest::Client,
    /// `https://slack.com/api/` (the method is appended).
    base: String,
    token: String,
    timeout: Duration,
    /// Methods paused by a 429, until when.
    paused: Mutex<HashMap<String, Instant>>,
    /// Rate-limit answers seen.
    limited: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for WebApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebApi { .. }")
    }
}

impl WebApi {
    pub fn new(client: reqwest::Client, base: &str, token: &str, timeout: Duration) -> WebApi {
        WebApi {
            client,
            base: format!("{}/", base.trim_end_matches('/')),
            token: token.to_owned(),
            timeout,
            paused: Mutex::default(),
            limited: Default::default(),
        }
    }

    /// Rate-limit answers seen since the start.
    pub fn limited_count(&self) -> u64 {
        self.limited.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Calls a write method with a JSON body.
    pub async fn call(&self, method: &str, body: &Value) -> Result<Value, ApiError> {
        let key = pause_key(method, body);
        self.wait_pause(&key).await;
        let request = self
            .client
            .post(format!("{}{method}", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .timeout(self.timeout);
        self.answered(&key, request).await
    }

    /// Calls a method with form arguments (read methods take no JSON body).
    pub async fn form(&self, method: &str, args: &[(&str, &str)]) -> Result<Value, ApiError> {
        self.wait_pause(method).await;
        let request = self
            .client
            .post(format!("{}{method}", self.base))
            .bearer_auth(&self.token)
            .form(args)
            .timeout(self.timeout);
        self.answered(method, request).await
    }

    /// Downloads a file Slack keeps (`url_private`), with the token, refusing more than
    /// `max` bytes.
    pub async fn download(&self, url: &str, max: usize) -> Result<Vec<u8>, ApiError> {
        let resp = self
            .client
            .get(url)
            .bearer_auth(&self.token)
            .timeout(self.timeout * 4)
            .send()
            .await
            .map_err(|e| ApiError::Network(crate::net::describe(&e)))?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(ApiError::Refused(format!(
                "HTTP {status}: the file could not be downloaded"
            )));
        }
        crate::net::read_capped(resp, max)
            .await
            .map_err(ApiError::Network)
    }

    /// Posts a file's bytes to the upload URL `files.getUploadURLExternal` gave.
    pub async fn upload(&self, url: &str, name: &str, bytes: Vec<u8>) -> Result<(), ApiError> {
        let part = reqwest::multipart::Part::bytes(bytes).file_name(name.to_owned());
        let form = reqwest::multipart::Form::new().part("file", part);
        let resp = self
            .client
            .post(url)
            .multipart(form)
            .timeout(self.timeout + Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| ApiError::Network(crate::net::describe(&e)))?;
        match resp.status().as_u16() {
            200..=299 => Ok(()),
            s => Err(ApiError::Refused(format!("HTTP {s}: the upload failed"))),
        }
    }

    /// Waits while `method` is paused by a 429.
    async fn wait_pause(&self, method: &str) {
        let until = herald_session::conversation::lock(&self.paused)
            .get(method)
            .copied();
        if let Some(until) = until.filter(|u| *u > Instant::now()) {
            tokio::time::sleep_until(until).await;
        }
    }

    /// Pauses `method` for `wait` (never shortening a longer pause).
    fn pause(&self, method: &str, wait: Duration) {
        self.limited
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let until = Instant::now() + wait;
        let mut paused = herald_session::conversation::lock(&self.paused);
        let at = paused.entry(method.to_owned()).or_insert(until);
        *at = (*at).max(until);
    }

    async fn answered(
        &self,
        method: &str,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, ApiError> {
        let resp = request
            .send()
            .await
            .map_err(|e| ApiError::Network(crate::net::describe(&e)))?;
        let status = resp.status().as_u16();
        if status == 429 {
            let wait = retry_after(resp.headers());
            self.pause(method, wait);
            return Err(ApiError::RateLimited(wait));
        }
        let bytes = crate::net::read_capped(resp, MAX_ANSWER_BYTES)
            .await
            .map_err(ApiError::Network)?;
        answer(status, &bytes)
    }
}

/// What a 429 pauses: the method, and for `chat.postMessage` (limited per channel)
/// only that channel's posts.
fn pause_key(method: &str, body: &Value) -> String {
    match (method, body["channel"].as_str()) {
        ("chat.postMessage", Some(channel)) => format!("{method}:{channel}"),
        _ => method.to_owned(),
    }
}

/// A 429's `Retry-After` (seconds; 1 when absent, at most an hour).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Duration {
    let secs = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1);
    Duration::from_secs(secs.clamp(1, 3600))
}

/// Reads an answer: its JSON when `ok`, else its `error`.
fn answer(status: u16, bytes: &[u8]) -> Result<Value, ApiError> {
    let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
        return Err(ApiError::Refused(format!(
            "HTTP {status}: not a Web API answer"
        )));
    };
    if v.get("ok") == Some(&Value::Bool(true)) {
        return Ok(v);
    }
    let error = v
        .get("error")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| format!("HTTP {status}"));
    if error == "ratelimited" {
        return Err(ApiError::RateLimited(Duration::from_secs(1)));
    }
    Err(ApiError::Refused(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_by_their_ok_and_error() {
        assert_eq!(
            answer(200, br#"{"ok":true,"ts":"1.2"}"#).unwrap()["ts"],
            "1.2"
        );
        let refused = answer(200, br#"{"ok":false,"error":"channel_not_found"}"#).unwrap_err();
        assert!(matches!(&refused, ApiError::Refused(e) if e == "channel_not_found"));
        assert!(!refused.transient());
        assert!(
            answer(200, br#"{"ok":false,"error":"internal_error"}"#)
                .unwrap_err()
                .transient()
        );
        assert!(answer(502, b"<html>").unwrap_err().transient());
    }

    #[tokio::test(start_paused = true)]
    async fn a_paused_method_waits_and_a_shorter_pause_does_not_shorten_it() {
        let api = WebApi::new(
            herald_deliver::http_client(),
            "http://127.0.0.1:9",
            "t",
            Duration::from_secs(1),
        );
        api.pause("chat.postMessage", Duration::from_secs(30));
        api.pause("chat.postMessage", Duration::from_secs(2));
        let start = Instant::now();
        api.wait_pause("chat.postMessage").await;
        assert!(start.elapsed() >= Duration::from_secs(30));
        let start = Instant::now();
        api.wait_pause("chat.update").await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(api.limited_count(), 2);
        assert_eq!(
            pause_key("chat.postMessage", &serde_json::json!({"channel": "C1"})),
            "chat.postMessage:C1"
        );
        assert_eq!(
            pause_key("chat.update", &serde_json::json!({"channel": "C1"})),
            "chat.update"
        );
    }
}

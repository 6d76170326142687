//! Discord's REST API (`/api/v10`) with the bot token (`Authorization: Bot <token>`,
//! never logged). Discord limits each route (its bucket, told in `X-RateLimit-*`
//! headers) and the whole bot (50 requests a second): a route whose bucket is spent
//! waits for its reset before the next call, and a 429 pauses its route (or, when
//! `global`, every route) for `retry_after`, then is tried again.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// Why a call did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// No answer: the request may or may not have reached Discord.
    #[error("discord: {0}")]
    Network(String),
    /// Still limited after [`MAX_LIMITED`] waits.
    #[error("discord: rate limited, retry after {}s", .0.as_secs_f32())]
    RateLimited(Duration),
    /// Discord refused the call: its status and message.
    #[error("discord: HTTP {status}: {message}")]
    Refused { status: u16, message: String },
}

impl ApiError {
    pub fn transient(&self) -> bool {
        match self {
            ApiError::Network(_) | ApiError::RateLimited(_) => true,
            ApiError::Refused { status, .. } => *status >= 500,
        }
    }
}

/// 429s a call waits out before it gives up.
const MAX_LIMITED: u32 = 3;
/// The largest answer read.
const MAX_ANSWER_BYTES: usize = 8 << 20;

/// A route's bucket as Discord last told it.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    remaining: u64,
    reset_at: Instant,
}

/// The bot's REST endpoint.
pub struct RestApi {
    client: reqwest::Client,
    /// `https://discord.com/api/v10`.
    base: String,
    token: String,
    timeout: Duration,
    buckets: Mutex<HashMap<String, Bucket>>,
    /// A global 429: every route waits until then.
    global_until: Mutex<Option<Instant>>,
    limited: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for RestApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RestApi { .. }")
    }
}

/// A request to make: its method, path (from `/`), and body.
pub enum Body {
    None,
    Json(Value),
    /// A message with a file: `payload_json` and one file.
    File {
        payload: Value,
        name: String,
        bytes: Vec<u8>,
    },
}

impl RestApi {
    pub fn new(client: reqwest::Client, base: &str, token: &str, timeout: Duration) -> RestApi {
        RestApi {
            client,
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            timeout,
            buckets: Mutex::default(),
            global_until: Mutex::default(),
            limited: Default::default(),
        }
    }

    /// Rate-limit answers seen since the start.
    pub fn limited_count(&self) -> u64 {
        self.limited.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Calls `method path`: the JSON answer (`null` for 204).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Body,
    ) -> Result<Value, ApiError> {
        let route = route_of(&method, path);
        let mut limited = 0;
        loop {
            self.wait_turn(&route).await;
            let request = self.request(method.clone(), path, &body)?;
            let resp = request
                .send()
                .await
                .map_err(|e| ApiError::Network(crate::net::describe(&e)))?;
            self.learn(&route, resp.headers());
            let header_wait = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok());
            let status = resp.status().as_u16();
            let bytes = crate::net::read_capped(resp, MAX_ANSWER_BYTES)
                .await
                .map_err(ApiError::Network)?;
            if status == 429 {
                let (wait, global) = limit_of(&bytes, header_wait);
                self.limited
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.pause(&route, wait, global);
                limited += 1;
                if limited > MAX_LIMITED {
                    return Err(ApiError::RateLimited(wait));
                }
                tracing::warn!(route = %route, wait_ms = wait.as_millis() as u64, global, "discord: rate limited; the route waits");
                continue;
            }
            return answer(status, &bytes);
        }
    }

    /// Downloads an attachment (Discord's CDN needs no token), refusing more than
    /// `max` bytes.
    pub async fn download(&self, url: &str, max: usize) -> Result<Vec<u8>, ApiError> {
        let resp = self
            .client
            .get(url)
            .timeout(self.timeout * 4)
            .send()
            .await
            .map_err(|e| ApiError::Network(crate::net::describe(&e)))?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(ApiError::Refused {
                status,
                message: "the attachment could not be downloaded".into(),
            });
        }
        crate::net::read_capped(resp, max)
            .await
            .map_err(ApiError::Network)
    }

    fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &Body,
    ) -> Result<reqwest::RequestBuilder, ApiError> {
        let request = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("authorization", format!("Bot {}", self.token))
            .timeout(self.timeout);
        Ok(match body {
            Body::None => request,
            Body::Json(v) => request.json(v),
            Body::File {
                payload,
                name,
                bytes,
            } => {
                let file = reqwest::multipart::Part::bytes(bytes.clone()).file_name(name.clone());
                let form = reqwest::multipart::Form::new()
                    .text("payload_json", payload.to_string())
                    .part("files[0]", file);
                request
                    .multipart(form)
                    .timeout(self.timeout + Duration::from_secs(60))
            }
        })
    }

    /// Waits while the route's bucket is spent or a global limit holds.
    async fn wait_turn(&self, route: &str) {
        let global = *herald_session::conversation::lock(&self.global_until);
        if let Some(until) = global.filter(|u| *u > Instant::now()) {
            tokio::time::sleep_until(until).await;
        }
        let bucket = herald_session::conversation::lock(&self.buckets)
            .get(route)
            .copied();
        if let Some(b) = bucket.filter(|b| b.remaining == 0 && b.reset_at > Instant::now()) {
            tokio::time::sleep_until(b.reset_at).await;
        }
    }

    /// Remembers what the headers say of the route's bucket.
    fn learn(&self, route: &str, headers: &reqwest::header::HeaderMap) {
        let number = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
        };
        let (Some(remaining), Some(reset_after)) = (
            number("x-ratelimit-remaining"),
            number("x-ratelimit-reset-after"),
        ) else {
            return;
        };
        let bucket = Bucket {
            remaining: remaining as u64,
            reset_at: Instant::now() + Duration::from_secs_f64(reset_after.min(3600.0)),
        };
        let mut buckets = herald_session::conversation::lock(&self.buckets);
        if buckets.len() > 1_000 {
            buckets.clear();
        }
        buckets.insert(route.to_owned(), bucket);
    }

    fn pause(&self, route: &str, wait: Duration, global: bool) {
        let until = Instant::now() + wait;
        if global {
            let mut g = herald_session::conversation::lock(&self.global_until);
            *g = Some(g.map_or(until, |old| old.max(until)));
            return;
        }
        let mut buckets = herald_session::conversation::lock(&self.buckets);
        buckets.insert(
            route.to_owned(),
            Bucket {
                remaining: 0,
                reset_at: until,
            },
        );
    }
}

/// A route as Discord buckets it: the method and the path with ids replaced, except
/// the major parameter (a channel's, a guild's, a webhook's id) and reaction emoji.
fn route_of(method: &reqwest::Method, path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    let mut out = Vec::new();
    let mut previous = "";
    for seg in path.split('/') {
        let major = matches!(previous, "channels" | "guilds" | "webhooks");
        let id = !seg.is_empty() && seg.chars().all(|c| c.is_ascii_digit());
        // An interaction's token is a secret: never in a key (or a log line).
        let token = previous.chars().all(|c| c.is_ascii_digit())
            && out.len() >= 2
            && out[out.len() - 2] == "interactions";
        out.push(match (id, major, previous) {
            (true, false, _) => ":id",
            (_, _, "reactions") => ":emoji",
            _ if token => ":token",
            _ => seg,
        });
        previous = seg;
    }
    format!("{method} {}", out.join("/"))
}

/// A 429's wait (its body's `retry_after`, else the `Retry-After` header, else a
/// second) and whether it is global.
fn limit_of(bytes: &[u8], header: Option<f64>) -> (Duration, bool) {
    let v: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let secs = v["retry_after"]
        .as_f64()
        .or(header)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .unwrap_or(1.0);
    (
        Duration::from_secs_f64(secs.clamp(0.05, 3600.0)),
        v["global"].as_bool().unwrap_or(false),
    )
}

/// Reads an answer: its JSON on success, else Discord's message.
fn answer(status: u16, bytes: &[u8]) -> Result<Value, ApiError> {
    if (200..300).contains(&status) {
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        return serde_json::from_slice(bytes).map_err(|_| ApiError::Refused {
            status,
            message: "not JSON".into(),
        });
    }
    let v: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let message = v["message"].as_str().unwrap_or("no message").to_owned();
    Err(ApiError::Refused { status, message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_keep_their_major_parameter_and_answers_are_read() {
        let post = reqwest::Method::POST;
        assert_eq!(
            route_of(&post, "/channels/123/messages"),
            "POST /channels/123/messages"
        );
        assert_eq!(
            route_of(&reqwest::Method::PATCH, "/channels/123/messages/456"),
            "PATCH /channels/123/messages/:id"
        );
        assert_eq!(
            route_of(
                &reqwest::Method::PUT,
                "/channels/1/messages/2/reactions/%F0%9F%91%80/@me"
            ),
            "PUT /channels/1/messages/:id/reactions/:emoji/@me"
        );
        assert_eq!(
            route_of(&post, "/interactions/99/tok/callback"),
            "POST /interactions/:id/:token/callback"
        );
        assert_eq!(
            limit_of(br#"{"retry_after": 1.5, "global": true}"#, None),
            (Duration::from_millis(1500), true)
        );
        assert_eq!(limit_of(b"<html>", Some(4.0)).0, Duration::from_secs(4));
        assert!(answer(204, b"").unwrap().is_null());
        let refused = answer(403, br#"{"message": "Missing Access", "code": 50001}"#).unwrap_err();
        assert!(!refused.transient());
        assert!(answer(502, b"").unwrap_err().transient());
    }

    #[tokio::test(start_paused = true)]
    async fn a_spent_bucket_and_a_global_limit_are_waited_out() {
        let api = RestApi::new(
            herald_deliver::http_client(),
            "http://127.0.0.1:9",
            "t",
            Duration::from_secs(1),
        );
        api.pause("POST /channels/1/messages", Duration::from_secs(3), false);
        let start = Instant::now();
        api.wait_turn("POST /channels/1/messages").await;
        assert!(start.elapsed() >= Duration::from_secs(3));
        let start = Instant::now();
        api.wait_turn("POST /channels/2/messages").await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        api.pause("x", Duration::from_secs(2), true);
        let start = Instant::now();
        api.wait_turn("POST /channels/2/messages").await;
        assert!(start.elapsed() >= Duration::from_secs(2));
    }
}

//! Shared HTTP plumbing: one client, and the mapping of answers to [`SendError`]s.

use crate::SendError;
use std::time::Duration;

/// Per-request time limit for platform APIs.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest platform answer read.
const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// Builds the shared client (rustls with the ring provider).
pub fn client() -> reqwest::Client {
    client_via(None).unwrap_or_else(|_| reqwest::Client::new())
}

/// The same client going through `proxy` (an `http(s)://` proxy URL), or why it
/// cannot be built.
pub fn client_via(proxy: Option<&str>) -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .connect_timeout(Duration::from_secs(5))
        .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")));
    if let Some(url) = proxy {
        let proxy = reqwest::Proxy::all(url).map_err(|e| format!("proxy {url}: {e}"))?;
        builder = builder.proxy(proxy);
    }
    builder.build().map_err(|e| e.to_string())
}

/// A network-level failure: always worth a retry.
pub fn network_error(platform: &str, e: &reqwest::Error) -> SendError {
    let what = if e.is_timeout() {
        "timed out"
    } else {
        "could not connect or was cut off"
    };
    SendError::transient(
        format!("{platform}: request {what}: {}", without_url(e)),
        None,
    )
}

/// reqwest errors carry the URL, which for Telegram contains the bot token.
fn without_url(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(url) = e.url() {
        s = s.replace(url.as_str(), "<url>");
    }
    s
}

/// Reads a platform's answer: status, `Retry-After` and the body (capped).
pub async fn read_answer(
    platform: &str,
    resp: reqwest::Response,
) -> Result<(u16, Option<Duration>, String), SendError> {
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok());
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| network_error(platform, &e))?;
    let body = String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_ANSWER_BYTES)]).into_owned();
    Ok((status, retry_after, body))
}

/// The error for a non-2xx status: 408, 429 and 5xx are transient, other 4xx permanent.
pub fn status_error(
    platform: &str,
    status: u16,
    retry_after: Option<Duration>,
    detail: &str,
) -> SendError {
    let detail: String = detail.chars().take(300).collect();
    let message = format!("{platform}: HTTP {status}: {detail}");
    if status == 408 || status == 429 || status >= 500 {
        SendError::transient(message, retry_after)
    } else {
        SendError::permanent(message)
    }
}

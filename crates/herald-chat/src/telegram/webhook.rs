//! Webhook mode: Telegram POSTs each update to herald's own listener (behind the TLS
//! proxy Telegram needs). A request whose `X-Telegram-Bot-Api-Secret-Token` is not the
//! configured secret is refused (401) before its body is read; an update is answered
//! 200 only once it is committed to the inbox, so Telegram delivers it again if herald
//! dies first.

use super::poll::store_update;
use crate::BotStatus;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use herald_store::Store;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::Notify;

/// The largest update body read (Telegram's are a few KiB).
pub const MAX_UPDATE_BYTES: usize = 1 << 20;
/// How long a body may take to arrive (Telegram sends one in a single write).
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the receiver needs.
#[derive(Clone)]
pub struct Receiver {
    pub store: Store,
    pub route: String,
    pub secret: Arc<str>,
    pub wake: Arc<Notify>,
    pub status: Arc<BotStatus>,
}

/// The router serving `path` (`/telegram` by default).
pub fn router(path: &str, receiver: Receiver) -> Router {
    Router::new()
        .route(path, axum::routing::post(receive))
        .with_state(receiver)
}

/// Whether the request carries the secret (compared in constant time).
fn holds_secret(headers: &HeaderMap, secret: &str) -> bool {
    let given = headers
        .get("x-telegram-bot-api-secret-token")
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    subtle::ConstantTimeEq::ct_eq(given, secret.as_bytes()).into()
}

async fn receive(State(r): State<Receiver>, request: Request) -> StatusCode {
    if !holds_secret(request.headers(), &r.secret) {
        return StatusCode::UNAUTHORIZED;
    }
    let read = axum::body::to_bytes(request.into_body(), MAX_UPDATE_BYTES);
    let body = match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => return StatusCode::PAYLOAD_TOO_LARGE,
        Err(_) => return StatusCode::REQUEST_TIMEOUT,
    };
    let Ok(update) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let Some(id) = update.get("update_id").and_then(Value::as_i64) else {
        return StatusCode::BAD_REQUEST;
    };
    match store_update(&r.store, &r.route, id, &update, &r.status).await {
        Ok(()) => {
            r.status.polled(herald_store::now_ms());
            r.wake.notify_one();
            StatusCode::OK
        }
        Err(e) => {
            tracing::error!(error = %e, update_id = id, "telegram: cannot store an update; Telegram delivers it again");
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

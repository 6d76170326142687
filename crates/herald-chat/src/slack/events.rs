//! The Events API, which Hermes lacks: Slack POSTs each event (and, at the same path,
//! each interactive payload and slash command when the app's Request URLs point here)
//! to herald's webhook listener. A request is verified as the `slack` sender preset
//! verifies it (signature, five-minute timestamp window) before anything else is
//! done; `url_verification` is answered with its challenge; every other payload is
//! committed to the inbox before the 200, so Slack's retries (`X-Slack-Retry-Num`) of
//! one not kept deliver it again, and those of one kept are answered without storing
//! it twice.

use super::intake::Intake;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use herald_webhook::sender::{Sender, SenderPreset, SignedRequest, handshake, verify};
use serde_json::{Map, Value};
use std::sync::Arc;

/// The path served when none is configured.
pub const DEFAULT_PATH: &str = "/slack/events";
/// The largest body read (Slack's payloads are a few KiB).
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// How long a body may take to arrive.
const BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the receiver needs.
#[derive(Clone)]
pub struct Receiver {
    pub intake: Intake,
    /// `SLACK_SIGNING_SECRET`.
    pub secret: Arc<str>,
}

/// The router serving `path`.
pub fn router(path: &str, receiver: Receiver) -> Router {
    Router::new()
        .route(path, axum::routing::post(receive))
        .with_state(receiver)
}

async fn receive(State(r): State<Receiver>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, MAX_BODY_BYTES);
    let body = match tokio::time::timeout(BODY_TIMEOUT, read).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => return StatusCode::PAYLOAD_TOO_LARGE.into_response(),
        Err(_) => return StatusCode::REQUEST_TIMEOUT.into_response(),
    };
    let signed = SignedRequest {
        headers: &parts.headers,
        body: &body,
        query: parts.uri.query(),
    };
    let preset = SenderPreset::new(Sender::Slack);
    if let Err(e) = verify(&preset, &r.secret, &signed, &herald_webhook::SystemClock) {
        tracing::warn!(error = %e, "slack: an Events API request failed verification");
        return (StatusCode::UNAUTHORIZED, "invalid signature").into_response();
    }
    let Some(payload) = payload(&parts.headers, &body) else {
        return (StatusCode::BAD_REQUEST, "not a Slack payload").into_response();
    };
    if let Some(h) = payload
        .as_object()
        .and_then(|m| handshake(Sender::Slack, m))
    {
        tracing::info!("slack: {} answered", h.kind);
        return axum::Json(h.answer).into_response();
    }
    match r.intake.commit(&payload).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => {
            let retry = parts.headers.get("x-slack-retry-num").is_some();
            tracing::error!(error = %e, retry, "slack: cannot store an event; Slack delivers it again");
            StatusCode::SERVICE_UNAVAILABLE.into_response()
        }
    }
}

/// The payload of a request: an event's JSON body; an interactive request's `payload`
/// form field; a slash command's form, tagged `slash_command`.
fn payload(headers: &HeaderMap, body: &[u8]) -> Option<Value> {
    let form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if !form {
        return serde_json::from_slice::<Value>(body)
            .ok()
            .filter(Value::is_object);
    }
    let fields: Map<String, Value> = form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect();
    if let Some(Value::String(inner)) = fields.get("payload") {
        return serde_json::from_str::<Value>(inner)
            .ok()
            .filter(Value::is_object);
    }
    fields.contains_key("command").then(|| {
        let mut slash = fields;
        slash.insert("type".into(), Value::String("slash_command".into()));
        Value::Object(slash)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_buttons_and_commands_are_read_from_their_bodies() {
        let json_type = HeaderMap::new();
        let event = payload(&json_type, br#"{"type":"event_callback","event":{}}"#).unwrap();
        assert_eq!(event["type"], "event_callback");
        assert!(payload(&json_type, b"[1]").is_none());
        let mut form_type = HeaderMap::new();
        form_type.insert(
            header::CONTENT_TYPE,
            "application/x-www-form-urlencoded".parse().unwrap(),
        );
        let click = payload(
            &form_type,
            b"payload=%7B%22type%22%3A%22block_actions%22%7D",
        )
        .unwrap();
        assert_eq!(click["type"], "block_actions");
        let slash = payload(&form_type, b"command=%2Fhermes&text=new&trigger_id=t1").unwrap();
        assert_eq!(slash["type"], "slash_command");
        assert_eq!(slash["text"], "new");
        assert!(payload(&form_type, b"other=1").is_none());
    }
}

//! The pipeline's answers (spec §21): status and JSON body, one constructor each.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A pipeline answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
    /// A `Retry-After` header, in seconds.
    pub retry_after_secs: Option<u64>,
}

impl Answer {
    fn new(status: StatusCode, body: Value) -> Self {
        Answer {
            status,
            body,
            retry_after_secs: None,
        }
    }
    fn error(status: StatusCode, message: impl Into<String>) -> Self {
        Answer::new(status, json!({ "error": message.into() }))
    }

    pub fn health() -> Self {
        Answer::new(
            StatusCode::OK,
            json!({"status": "ok", "platform": "webhook"}),
        )
    }
    /// `GET /health/detailed`: the inbox's entries per state.
    pub fn health_detailed(counts: &[(String, i64)]) -> Self {
        let mut inbox = serde_json::Map::new();
        for state in ["queued", "running", "delivering", "delivered", "dead"] {
            inbox.insert(state.into(), json!(0));
        }
        let mut total = 0;
        for (state, n) in counts {
            inbox.insert(state.clone(), json!(n));
            total += n;
        }
        inbox.insert("total".into(), json!(total));
        Answer::new(
            StatusCode::OK,
            json!({"status": "ok", "platform": "webhook", "inbox": inbox}),
        )
    }
    pub fn health_degraded() -> Self {
        Answer::new(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "degraded", "platform": "webhook", "error": "the inbox cannot be read"}),
        )
    }
    pub fn not_found() -> Self {
        Answer::error(StatusCode::NOT_FOUND, "Not found")
    }
    pub fn method_not_allowed() -> Self {
        Answer::error(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed")
    }
    pub fn unknown_route(route: &str) -> Self {
        Answer::error(StatusCode::NOT_FOUND, format!("Unknown route: {route}"))
    }
    pub fn unknown_profile() -> Self {
        Answer::error(StatusCode::NOT_FOUND, "Unknown or unconfigured profile")
    }
    pub fn route_disabled(route: &str) -> Self {
        Answer::error(StatusCode::FORBIDDEN, format!("Route disabled: {route}"))
    }
    pub fn missing_secret() -> Self {
        Answer::error(
            StatusCode::FORBIDDEN,
            "Webhook route is missing an HMAC secret",
        )
    }
    pub fn too_large() -> Self {
        Answer::error(StatusCode::PAYLOAD_TOO_LARGE, "Payload too large")
    }
    pub fn bad_request() -> Self {
        Answer::error(StatusCode::BAD_REQUEST, "Bad request")
    }
    pub fn invalid_signature() -> Self {
        Answer::error(StatusCode::UNAUTHORIZED, "Invalid signature")
    }
    pub fn rate_limited() -> Self {
        Answer::error(StatusCode::TOO_MANY_REQUESTS, "Rate limit exceeded")
    }
    pub fn cannot_parse() -> Self {
        Answer::error(StatusCode::BAD_REQUEST, "Cannot parse body")
    }
    pub fn unavailable() -> Self {
        Answer::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service unavailable, retry later",
        )
    }
    /// Too many request bodies are being processed at once: the sender should retry.
    pub fn busy(retry_after_secs: u64) -> Self {
        Answer {
            retry_after_secs: Some(retry_after_secs),
            ..Answer::unavailable()
        }
    }
    pub fn ignored_event(event: &Value) -> Self {
        Answer::new(StatusCode::OK, json!({"status": "ignored", "event": event}))
    }
    pub fn ignored(reason: &str, route: &str) -> Self {
        Answer::new(
            StatusCode::OK,
            json!({"status": "ignored", "reason": reason, "route": route}),
        )
    }
    pub fn duplicate(delivery_id: &str) -> Self {
        Answer::new(
            StatusCode::OK,
            json!({"status": "duplicate", "delivery_id": delivery_id}),
        )
    }
    pub fn accepted(route: &str, event: &Value, delivery_id: &str) -> Self {
        Answer::new(
            StatusCode::ACCEPTED,
            json!({"status": "accepted", "route": route, "event": event, "delivery_id": delivery_id}),
        )
    }
    pub fn delivered(route: &str, target: &str, delivery_id: &str) -> Self {
        Answer::new(
            StatusCode::OK,
            json!({"status": "delivered", "route": route, "target": target, "delivery_id": delivery_id}),
        )
    }
    pub fn delivery_failed(delivery_id: &str) -> Self {
        Answer::new(
            StatusCode::BAD_GATEWAY,
            json!({"status": "error", "error": "Delivery failed", "delivery_id": delivery_id}),
        )
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.body).unwrap_or_else(|_| b"{}".to_vec());
        let mut response = Response::new(Body::from(body));
        *response.status_mut() = self.status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

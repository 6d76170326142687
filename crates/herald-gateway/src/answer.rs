//! The pipeline's answers (spec §21): status and JSON body, one constructor each.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A pipeline answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub status: StatusCode,
    pub body: AnswerBody,
    /// A `Retry-After` header, in seconds.
    pub retry_after_secs: Option<u64>,
    /// What became of the request, as the metrics count it (`accepted`, `filtered`,
    /// `invalid_signature`, ...).
    pub outcome: &'static str,
}

/// An answer's JSON body: built per request, or fixed text for the answers that never
/// vary (the rejections a flood of forged requests gets, written without building JSON).
#[derive(Debug, Clone, PartialEq)]
pub enum AnswerBody {
    Json(Value),
    Fixed(&'static str),
    /// An XML document (Twilio's TwiML).
    Xml(&'static str),
}

impl AnswerBody {
    /// The body's `status` field, if it is built JSON with one.
    pub fn status(&self) -> Option<&str> {
        match self {
            AnswerBody::Json(v) => v.get("status").and_then(Value::as_str),
            AnswerBody::Fixed(_) | AnswerBody::Xml(_) => None,
        }
    }
}

impl Answer {
    fn new(status: StatusCode, outcome: &'static str, body: Value) -> Self {
        Answer {
            status,
            body: AnswerBody::Json(body),
            retry_after_secs: None,
            outcome,
        }
    }
    fn error(status: StatusCode, outcome: &'static str, message: impl Into<String>) -> Self {
        Answer::new(status, outcome, json!({ "error": message.into() }))
    }
    /// `json` must be exactly what `error` would write for the same message.
    fn fixed(status: StatusCode, outcome: &'static str, json: &'static str) -> Self {
        Answer {
            status,
            body: AnswerBody::Fixed(json),
            retry_after_secs: None,
            outcome,
        }
    }

    pub fn health() -> Self {
        Answer::new(
            StatusCode::OK,
            "health",
            json!({"status": "ok", "platform": "webhook"}),
        )
    }
    /// `GET /health/detailed`: the inbox's entries per state.
    pub fn health_detailed(counts: &[(String, i64)]) -> Self {
        let mut inbox = serde_json::Map::new();
        let mut total = 0;
        for (state, n) in counts {
            inbox.insert(state.clone(), json!(n));
            total += n;
        }
        inbox.insert("total".into(), json!(total));
        let mut body = json!({"status": "ok", "platform": "webhook", "inbox": inbox});
        let bots = herald_metrics::bots::reports();
        if !bots.is_empty() {
            body["bots"] = json!(bots);
        }
        Answer::new(StatusCode::OK, "health", body)
    }
    pub fn health_degraded() -> Self {
        Answer::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "health",
            json!({"status": "degraded", "platform": "webhook", "error": "the inbox cannot be read"}),
        )
    }
    pub fn not_found() -> Self {
        Answer::fixed(
            StatusCode::NOT_FOUND,
            "not_found",
            r#"{"error":"Not found"}"#,
        )
    }
    pub fn method_not_allowed() -> Self {
        Answer::fixed(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            r#"{"error":"Method not allowed"}"#,
        )
    }
    pub fn unknown_route(route: &str) -> Self {
        Answer::error(
            StatusCode::NOT_FOUND,
            "unknown_route",
            format!("Unknown route: {route}"),
        )
    }
    pub fn unknown_profile() -> Self {
        Answer::fixed(
            StatusCode::NOT_FOUND,
            "unknown_profile",
            r#"{"error":"Unknown or unconfigured profile"}"#,
        )
    }
    pub fn route_disabled(route: &str) -> Self {
        Answer::error(
            StatusCode::FORBIDDEN,
            "route_disabled",
            format!("Route disabled: {route}"),
        )
    }
    pub fn missing_secret() -> Self {
        Answer::error(
            StatusCode::FORBIDDEN,
            "missing_secret",
            "Webhook route is missing an HMAC secret",
        )
    }
    pub fn too_large() -> Self {
        Answer::fixed(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            r#"{"error":"Payload too large"}"#,
        )
    }
    pub fn bad_request() -> Self {
        Answer::fixed(
            StatusCode::BAD_REQUEST,
            "bad_request",
            r#"{"error":"Bad request"}"#,
        )
    }
    pub fn invalid_signature() -> Self {
        Answer::fixed(
            StatusCode::UNAUTHORIZED,
            "invalid_signature",
            r#"{"error":"Invalid signature"}"#,
        )
    }
    pub fn rate_limited() -> Self {
        Answer::fixed(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            r#"{"error":"Rate limit exceeded"}"#,
        )
    }
    pub fn cannot_parse() -> Self {
        Answer::fixed(
            StatusCode::BAD_REQUEST,
            "cannot_parse",
            r#"{"error":"Cannot parse body"}"#,
        )
    }
    pub fn unavailable() -> Self {
        Answer::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "Service unavailable, retry later",
        )
    }
    /// Too many request bodies are being processed at once: the sender should retry.
    pub fn busy(retry_after_secs: u64) -> Self {
        Answer {
            retry_after_secs: Some(retry_after_secs),
            outcome: "busy",
            ..Answer::unavailable()
        }
    }
    pub fn ignored_event(event: &Value) -> Self {
        Answer::new(
            StatusCode::OK,
            "ignored",
            json!({"status": "ignored", "event": event}),
        )
    }
    /// Dropped by the route's `filter` or `script` (the `reason`).
    pub fn ignored(reason: &'static str, route: &str) -> Self {
        let outcome = match reason {
            "filter" => "filtered",
            _ => "script_dropped",
        };
        Answer::new(
            StatusCode::OK,
            outcome,
            json!({"status": "ignored", "reason": reason, "route": route}),
        )
    }
    /// A sender's verification handshake, answered inline (never enqueued).
    pub fn handshake(body: Value) -> Self {
        Answer::new(StatusCode::OK, "handshake", body)
    }
    /// The answer a sender's protocol needs instead of herald's own (Discord's deferred
    /// response to a committed interaction), counted as the same outcome.
    pub fn replaced_by(self, body: Value) -> Self {
        Answer::new(StatusCode::OK, self.outcome, body)
    }
    /// Twilio's empty TwiML answer (no reply is sent), with status 200, counted as the
    /// same outcome.
    pub fn as_empty_twiml(self) -> Self {
        Answer {
            status: StatusCode::OK,
            body: AnswerBody::Xml(EMPTY_TWIML),
            retry_after_secs: None,
            outcome: self.outcome,
        }
    }
    /// The same answer with status 200 (senders that take no other success status).
    pub fn with_status_ok(mut self) -> Self {
        if self.status == StatusCode::ACCEPTED {
            self.status = StatusCode::OK;
        }
        self
    }
    pub fn duplicate(delivery_id: &str) -> Self {
        Answer::new(
            StatusCode::OK,
            "duplicate",
            json!({"status": "duplicate", "delivery_id": delivery_id}),
        )
    }
    pub fn accepted(route: &str, event: &Value, delivery_id: &str) -> Self {
        Answer::new(
            StatusCode::ACCEPTED,
            "accepted",
            json!({"status": "accepted", "route": route, "event": event, "delivery_id": delivery_id}),
        )
    }
    pub fn delivered(route: &str, target: &str, delivery_id: &str) -> Self {
        Answer::new(
            StatusCode::OK,
            "delivered",
            json!({"status": "delivered", "route": route, "target": target, "delivery_id": delivery_id}),
        )
    }
    pub fn delivery_failed(delivery_id: &str) -> Self {
        Answer::new(
            StatusCode::BAD_GATEWAY,
            "delivery_failed",
            json!({"status": "error", "error": "Delivery failed", "delivery_id": delivery_id}),
        )
    }
}

/// An empty TwiML document: Twilio sends no reply.
const EMPTY_TWIML: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response/>";

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        let content_type = match self.body {
            AnswerBody::Xml(_) => "text/xml; charset=utf-8",
            _ => "application/json; charset=utf-8",
        };
        let body = match self.body {
            AnswerBody::Json(v) => {
                Body::from(serde_json::to_vec(&v).unwrap_or_else(|_| b"{}".to_vec()))
            }
            AnswerBody::Fixed(text) | AnswerBody::Xml(text) => Body::from(text),
        };
        let mut response = Response::new(body);
        *response.status_mut() = self.status;
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_bodies_are_the_json_the_built_ones_would_be() {
        let fixed = [
            Answer::not_found(),
            Answer::method_not_allowed(),
            Answer::unknown_profile(),
            Answer::too_large(),
            Answer::bad_request(),
            Answer::invalid_signature(),
            Answer::rate_limited(),
            Answer::cannot_parse(),
        ];
        for answer in fixed {
            let AnswerBody::Fixed(text) = answer.body else {
                panic!("not fixed: {answer:?}");
            };
            let parsed: Value = serde_json::from_str(text).unwrap();
            let message = parsed["error"].as_str().unwrap();
            let built = Answer::error(answer.status, answer.outcome, message);
            let AnswerBody::Json(v) = built.body else {
                panic!("not built");
            };
            assert_eq!(serde_json::to_string(&v).unwrap(), text);
        }
    }
}

//! The OpenAI error envelope (api-server.md §2) and the answers built from it.

use crate::wire::{ErrorBody, ErrorEnvelope};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// An error answer: status, message, `type`, and `code` (`None`: JSON null; the short
/// form, some 400s, leaves `param` and `code` out).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    pub code: Option<&'static str>,
    /// The request field at fault (`messages[2].content`), else JSON null.
    pub param: Option<String>,
    /// Only `message` and `type` in the body.
    pub short: bool,
    pub retry_after: bool,
    /// Sent with `x-should-retry: false`: the OpenAI SDKs then do not try again (an
    /// agent failure, whose retry would be a second run).
    pub final_answer: bool,
    /// Extra fields inside `error` (the `hermes` object of `agent_incomplete`).
    /// How the run ended, on an `agent_incomplete` answer.
    pub hermes: Option<Box<Value>>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>, code: Option<&'static str>) -> Self {
        ApiError {
            status,
            message: message.into(),
            code,
            param: None,
            short: false,
            retry_after: false,
            final_answer: false,
            hermes: None,
        }
    }

    /// 424 `agent_incomplete`: the agent run failed without an answer (the provider
    /// refused, or kept failing after herald's own retries). A 4xx other than 408, 409
    /// and 429, with `x-should-retry: false`, so that no OpenAI-compatible client makes
    /// a second run of it; `hermes` tells how the run ended and whether a later try may
    /// succeed.
    pub fn agent_failed(message: impl Into<String>, hermes: Value) -> Self {
        ApiError {
            final_answer: true,
            hermes: Some(Box::new(hermes)),
            ..ApiError::new(
                StatusCode::FAILED_DEPENDENCY,
                message,
                Some("agent_incomplete"),
            )
        }
    }

    /// A 400 with only `message` and `type`.
    pub fn bad_request_short(message: impl Into<String>) -> Self {
        ApiError {
            short: true,
            ..ApiError::new(StatusCode::BAD_REQUEST, message, None)
        }
    }

    pub fn bad_request(message: impl Into<String>, code: Option<&'static str>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, message, code)
    }

    /// This error, naming the request field at fault.
    pub fn at(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn not_found(message: impl Into<String>, code: Option<&'static str>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, message, code)
    }

    pub fn conflict(message: impl Into<String>, code: &'static str) -> Self {
        ApiError::new(StatusCode::CONFLICT, message, Some(code))
    }

    pub fn unauthorized() -> Self {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Invalid API key",
            Some("invalid_api_key"),
        )
    }

    pub fn too_many_runs(max: usize) -> Self {
        ApiError {
            retry_after: true,
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!("Too many concurrent runs (max {max})"),
                Some("rate_limit_exceeded"),
            )
        }
    }

    /// 429 with `Retry-After`: as many runs as allowed wait for their clients' tool
    /// results (`extra.max_parked_runs`).
    pub fn too_many_parked(max: usize) -> Self {
        ApiError {
            retry_after: true,
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!("Too many runs wait for their clients' tool results (max {max})"),
                Some("rate_limit_exceeded"),
            )
        }
    }

    /// 503 with `Retry-After`: no room in the budget of body bytes in flight.
    pub fn busy() -> Self {
        let mut e = ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "Server busy: too many request bodies in flight; retry shortly",
            Some("server_busy"),
        );
        e.retry_after = true;
        e
    }

    /// 503 with `Retry-After`: the store is unreachable or did not answer within
    /// `store.statement_timeout_seconds` (the reason is in the log).
    pub fn store_unavailable() -> Self {
        ApiError {
            retry_after: true,
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "The store is not answering; retry shortly",
                Some("store_unavailable"),
            )
        }
    }

    pub fn draining() -> Self {
        ApiError {
            retry_after: true,
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "The gateway is shutting down; try again shortly",
                Some("gateway_draining"),
            )
        }
    }

    fn kind(&self) -> &'static str {
        match self.status.as_u16() {
            429 => "rate_limit_error",
            424 | 500.. => "server_error",
            _ => "invalid_request_error",
        }
    }

    pub fn envelope(&self) -> ErrorEnvelope {
        let long = !self.short;
        ErrorEnvelope {
            error: ErrorBody {
                message: self.message.clone(),
                kind: self.kind().into(),
                param: long.then(|| self.param.clone()),
                code: long.then(|| self.code.map(str::to_owned)),
                hermes: self.hermes.as_deref().cloned(),
            },
        }
    }

    /// The envelope as JSON.
    pub fn body(&self) -> Value {
        serde_json::to_value(self.envelope()).unwrap_or_default()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.envelope())).into_response();
        if self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.final_answer {
            response
                .headers_mut()
                .insert("x-should-retry", HeaderValue::from_static("false"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelopes() {
        assert_eq!(
            ApiError::unauthorized().body(),
            json!({"error": {"message": "Invalid API key", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}})
        );
        assert_eq!(
            ApiError::too_many_runs(10).body(),
            json!({"error": {"message": "Too many concurrent runs (max 10)", "type": "rate_limit_error", "param": null, "code": "rate_limit_exceeded"}})
        );
        assert_eq!(
            ApiError::bad_request_short("No user message found in messages").body(),
            json!({"error": {"message": "No user message found in messages", "type": "invalid_request_error"}})
        );
        assert_eq!(ApiError::draining().body()["error"]["type"], "server_error");
    }
}

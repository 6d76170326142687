//! Provider errors, classified before deciding whether to retry (agent spec §4.5).

/// What kind of failure a provider call had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    Auth,
    Billing,
    RateLimit,
    Overloaded,
    ServerError,
    Timeout,
    Network,
    Tls,
    ContextOverflow,
    ModelNotFound,
    ContentPolicy,
    Format,
    /// Empty, malformed or truncated response.
    InvalidResponse,
    /// Stopped by middleware on purpose (never retried).
    Blocked,
}

impl ErrorClass {
    /// The class as one word (metrics, logs).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Auth => "auth",
            ErrorClass::Billing => "billing",
            ErrorClass::RateLimit => "rate_limit",
            ErrorClass::Overloaded => "overloaded",
            ErrorClass::ServerError => "server_error",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Network => "network",
            ErrorClass::Tls => "tls",
            ErrorClass::ContextOverflow => "context_overflow",
            ErrorClass::ModelNotFound => "model_not_found",
            ErrorClass::ContentPolicy => "content_policy",
            ErrorClass::Format => "format",
            ErrorClass::InvalidResponse => "invalid_response",
            ErrorClass::Blocked => "blocked",
        }
    }

    /// Worth another attempt with back-off.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::RateLimit
                | ErrorClass::Overloaded
                | ErrorClass::ServerError
                | ErrorClass::Timeout
                | ErrorClass::Network
                | ErrorClass::InvalidResponse
        )
    }
}

use herald_retry::NOT_LISTENING;

/// A failed provider call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct LlmError {
    pub class: ErrorClass,
    pub status: Option<u16>,
    pub message: String,
}

impl LlmError {
    pub fn new(class: ErrorClass, status: Option<u16>, message: impl Into<String>) -> Self {
        LlmError {
            class,
            status,
            message: message.into(),
        }
    }
    pub fn retryable(&self) -> bool {
        self.class.retryable() && !self.message.ends_with(NOT_LISTENING)
    }

    /// This connection error, from a local server that refused it twice: nothing listens
    /// there, so no call retries it (see [`LlmError::retryable`]); the webhook worker
    /// still schedules its event again ([`herald_retry::NOT_LISTENING`]).
    pub fn not_listening(mut self) -> Self {
        if !self.message.ends_with(NOT_LISTENING) {
            self.message.push_str(NOT_LISTENING);
        }
        self
    }
}

/// Classifies an HTTP error answer from its status and the provider's message.
pub fn classify(status: u16, message: &str) -> ErrorClass {
    let m = message.to_ascii_lowercase();
    let says = |words: &[&str]| words.iter().any(|w| m.contains(w));
    if says(&[
        "context length",
        "context_length",
        "maximum context",
        "too many tokens",
        "prompt is too long",
    ]) || status == 413
    {
        return ErrorClass::ContextOverflow;
    }
    match status {
        401 | 403 => ErrorClass::Auth,
        402 => ErrorClass::Billing,
        404 => ErrorClass::ModelNotFound,
        408 => ErrorClass::Timeout,
        429 => ErrorClass::RateLimit,
        503 | 529 => ErrorClass::Overloaded,
        500..=599 => ErrorClass::ServerError,
        _ if says(&["content policy", "safety", "moderation", "flagged"]) => {
            ErrorClass::ContentPolicy
        }
        _ if says(&[
            "model not found",
            "no such model",
            "unknown model",
            "does not exist",
        ]) =>
        {
            ErrorClass::ModelNotFound
        }
        _ => ErrorClass::Format,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(classify(429, "slow down"), ErrorClass::RateLimit);
        assert_eq!(
            classify(400, "This model's maximum context length is 8192 tokens"),
            ErrorClass::ContextOverflow
        );
        assert_eq!(classify(401, "bad key"), ErrorClass::Auth);
        assert_eq!(classify(502, "bad gateway"), ErrorClass::ServerError);
        assert_eq!(classify(400, "invalid tools"), ErrorClass::Format);
        assert!(classify(503, "").retryable());
        assert!(!classify(400, "x").retryable());
    }
}

//! Delivery targets: where messages go (`telegram`, `discord`, `slack`, `mattermost`,
//! `matrix`, `github_comment`, `log`), each a real client of the platform's HTTP API or
//! CLI, and the retry rules around a send.
//!
//! A target sends on demand: no polling loop or inbound connection is needed first. A
//! failed send says whether it is worth retrying ([`SendError::retryable`]).

mod discord;
pub mod discord_interaction;
mod email;
mod github;
mod http;
mod log_target;
mod matrix;
mod mattermost;
pub mod retry;
mod slack;
pub mod slack_mrkdwn;
pub mod split;
mod targets;
mod telegram;
pub mod telegram_html;
pub mod telegram_split;

pub use http::{client as http_client, client_via as http_client_via};
pub use retry::{RetryPolicy, send_with_retries};
pub use targets::{TargetSet, TargetSettings};

use serde_json::{Map, Value};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// A message to send, with the route's rendered `deliver_extra`.
#[derive(Debug, Clone, PartialEq)]
pub struct OutgoingMessage {
    pub text: String,
    pub extra: Map<String, Value>,
}

impl OutgoingMessage {
    pub fn new(text: impl Into<String>, extra: Map<String, Value>) -> Self {
        OutgoingMessage {
            text: text.into(),
            extra,
        }
    }

    /// A non-empty `deliver_extra` value as text (numbers are written plainly).
    pub fn extra_text(&self, key: &str) -> Option<String> {
        match self.extra.get(key)? {
            Value::String(s) if !s.trim().is_empty() => Some(s.trim().to_owned()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }

    /// The thread: `message_thread_id`, else `thread_id`.
    pub fn thread(&self) -> Option<String> {
        self.extra_text("message_thread_id")
            .or_else(|| self.extra_text("thread_id"))
    }
}

/// What a target reports after a successful send.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Receipt {
    /// Platform message ids, one per part sent.
    pub message_ids: Vec<String>,
}

/// Why a send failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SendError {
    pub message: String,
    /// Worth trying again (network error, 408/429, 5xx).
    pub retryable: bool,
    /// How long the platform asked us to wait (429 `Retry-After`).
    pub retry_after: Option<Duration>,
}

impl SendError {
    pub fn permanent(message: impl Into<String>) -> Self {
        SendError {
            message: message.into(),
            retryable: false,
            retry_after: None,
        }
    }
    pub fn transient(message: impl Into<String>, retry_after: Option<Duration>) -> Self {
        SendError {
            message: message.into(),
            retryable: true,
            retry_after,
        }
    }
}

/// A boxed send future.
pub type SendFuture<'a> = Pin<Box<dyn Future<Output = Result<Receipt, SendError>> + Send + 'a>>;

/// A place messages can go.
pub trait Target: Send + Sync {
    /// The target's name as routes write it (`telegram`, `github_comment`, ...).
    fn name(&self) -> &str;
    /// Sends one message (split into parts where the platform needs it).
    fn send<'a>(&'a self, message: &'a OutgoingMessage) -> SendFuture<'a>;
}

/// Sends `message` through `target` once, counting the attempt, its outcome and how
/// long it took in the metrics: every send of herald goes through here.
pub async fn send_once(
    target: &dyn Target,
    message: &OutgoingMessage,
) -> Result<Receipt, SendError> {
    let started = std::time::Instant::now();
    let span = herald_trace::span!(
        "delivery.attempt",
        target = %target.name(),
        outcome = tracing::field::Empty,
    );
    let result = tracing::Instrument::instrument(target.send(message), span.clone()).await;
    let outcome = match &result {
        Ok(_) => "delivered",
        Err(e) if e.retryable => "transient_error",
        Err(_) => "permanent_error",
    };
    span.record("outcome", outcome);
    herald_metrics::get()
        .delivery
        .attempt(target.name(), outcome, started.elapsed());
    result
}

//! Retrying a send: transient failures are tried again after a wait (a platform's
//! `Retry-After` is honoured, clamped); permanent failures stop at once.

use crate::{OutgoingMessage, Receipt, SendError, Target};
use std::time::Duration;

/// How many attempts, and the waits between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Waits before the 2nd, 3rd, ... attempt; its length + 1 is the number of attempts.
    pub waits: Vec<Duration>,
    /// The longest `Retry-After` honoured inside one attempt sequence.
    pub max_retry_after: Duration,
}

impl RetryPolicy {
    /// Direct delivery (spec §14.5): three attempts, waiting 1 s then 2 s.
    pub fn direct() -> Self {
        RetryPolicy {
            waits: vec![Duration::from_secs(1), Duration::from_secs(2)],
            max_retry_after: Duration::from_secs(10),
        }
    }
}

/// The outcome of a send with retries.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempted {
    pub result: Result<Receipt, SendError>,
    pub attempts: u32,
}

/// Sends, retrying transient failures as `policy` says.
pub async fn send_with_retries(
    target: &dyn Target,
    message: &OutgoingMessage,
    policy: &RetryPolicy,
) -> Attempted {
    let mut attempts = 0;
    loop {
        attempts += 1;
        let result = crate::send_once(target, message).await;
        let err = match result {
            Ok(receipt) => {
                return Attempted {
                    result: Ok(receipt),
                    attempts,
                };
            }
            Err(e) => e,
        };
        let Some(wait) = policy
            .waits
            .get(attempts as usize - 1)
            .copied()
            .filter(|_| err.retryable)
        else {
            return Attempted {
                result: Err(err),
                attempts,
            };
        };
        let wait = match err.retry_after {
            Some(after) if after > policy.max_retry_after => {
                // Waiting that long inside a request is worse than failing now.
                return Attempted {
                    result: Err(err),
                    attempts,
                };
            }
            Some(after) => after,
            None => wait,
        };
        tracing::info!(target_name = target.name(), attempt = attempts, wait_ms = wait.as_millis() as u64, error = %err, "send failed; retrying");
        tokio::time::sleep(wait).await;
    }
}

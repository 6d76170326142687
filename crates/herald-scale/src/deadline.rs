//! The longest one store call may take (`store.statement_timeout_seconds`). A stalled
//! database (a frozen server, a network path that lost it) answers the caller
//! [`StoreError::TimedOut`] at the deadline, instead of holding it for as long as the
//! stall lasts; PostgreSQL's own `statement_timeout` on the pool's connections cancels
//! a statement that is merely slow.

use herald_store::StoreError;
use std::future::Future;
use std::time::Duration;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline(Duration);

impl Deadline {
    pub(crate) fn new(limit: Duration) -> Deadline {
        Deadline(limit)
    }

    pub(crate) fn limit(self) -> Duration {
        self.0
    }

    /// `call`'s outcome, or [`StoreError::TimedOut`] once the deadline passed (the
    /// call is dropped: a transaction it had begun is rolled back).
    pub(crate) async fn bound<T>(
        self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.0, call).await {
            Ok(outcome) => outcome,
            Err(_) => Err(self.missed()),
        }
    }

    /// The error of a call past the deadline.
    pub(crate) fn missed(self) -> StoreError {
        StoreError::TimedOut(format!(
            "no answer within {} s (store.statement_timeout_seconds)",
            self.0.as_secs()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_call_past_the_deadline_is_a_timeout_and_one_within_it_its_own_outcome() {
        let d = Deadline::new(Duration::from_millis(200));
        let started = std::time::Instant::now();
        let slow = d
            .bound(async {
                tokio::time::sleep(Duration::from_secs(90)).await;
                Ok(1)
            })
            .await;
        assert!(matches!(slow, Err(StoreError::TimedOut(_))), "{slow:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let quick = d
            .bound(async {
                tokio::time::sleep(Duration::from_millis(10)).await;
                Ok(2)
            })
            .await;
        assert_eq!(quick.ok(), Some(2));
    }
}

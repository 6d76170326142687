//! Deleting old inbox entries and delivery records a batch at a time, so that a prune
//! of millions of rows never holds the writer (or a PostgreSQL lock) for long:
//! `herald inbox purge` and the gateway's retention task both go through here.

use crate::InboxBackend;
use crate::StoreError;
use std::time::Duration;

/// Rows deleted in one transaction.
pub const BATCH: usize = 500;
/// The pause between batches: the writer's other work goes first.
const BETWEEN: Duration = Duration::from_millis(20);

/// Deletes every entry in `state` last changed before `before_ms`; how many.
pub async fn purge_entries(
    store: &dyn InboxBackend,
    state: &str,
    before_ms: i64,
) -> Result<usize, StoreError> {
    let mut total = 0;
    loop {
        let n = store.purge(state.to_owned(), before_ms, BATCH).await?;
        total += n;
        if n < BATCH {
            return Ok(total);
        }
        tokio::time::sleep(BETWEEN).await;
    }
}

/// Deletes every delivery record made before `before_ms` (`delivered` ones, or the
/// failed ones); how many.
pub async fn purge_deliveries(
    store: &dyn InboxBackend,
    delivered: bool,
    before_ms: i64,
) -> Result<usize, StoreError> {
    let mut total = 0;
    loop {
        let n = store.purge_deliveries(delivered, before_ms, BATCH).await?;
        total += n;
        if n < BATCH {
            return Ok(total);
        }
        tokio::time::sleep(BETWEEN).await;
    }
}

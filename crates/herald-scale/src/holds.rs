//! Leases on one key across instances: a row (key, holder, until) taken when free or
//! run out (its instance was lost), renewed while held, deleted when let go; waiting
//! polls. Sessions are held for a turn, direct deliveries for their send.

use crate::db_error;
use crate::deadline::Deadline;
use deadpool_postgres::Pool;
use herald_store::{StoreError, now_ms};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::oneshot;

/// How long a hold lasts unless renewed, how often it is renewed, and how often a
/// waiter looks again.
const HOLD_FOR_MS: i64 = 30_000;
const RENEW: Duration = Duration::from_secs(10);
const POLL: Duration = Duration::from_millis(20);

/// A table of holds: its name and its key column (the others are `owner` and
/// `until_ms`).
pub(crate) struct HoldTable {
    pub table: &'static str,
    pub key: &'static str,
}

/// A future that lets go of a hold.
pub(crate) type Release = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A holder name no other hold of this process has.
pub(crate) fn holder_of(owner: &str) -> String {
    static HOLDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = HOLDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{owner}/{n}")
}

/// One hold: the key of a table of holds, held as `holder`; every statement bounded
/// by the store's deadline.
pub(crate) struct Held {
    pub pool: Pool,
    pub table: &'static HoldTable,
    pub key: String,
    pub holder: String,
    pub deadline: Deadline,
}

impl Held {
    /// `sql` with `params` on a pooled connection, within the store's deadline.
    async fn execute(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        self.deadline
            .bound(async {
                self.pool
                    .get()
                    .await
                    .map_err(|e| StoreError::Unreachable(e.to_string()))?
                    .execute(sql, params)
                    .await
                    .map_err(db_error)
            })
            .await
    }

    /// Holds the key when it is free (or its hold ran out): whether it did.
    pub(crate) async fn try_acquire(&self) -> Result<bool, StoreError> {
        let sql = format!(
            "INSERT INTO {table} ({k}, owner, until_ms) VALUES ($1, $2, $3)
             ON CONFLICT ({k}) DO UPDATE SET owner = excluded.owner, until_ms = excluded.until_ms
                 WHERE {table}.until_ms < $4",
            table = self.table.table,
            k = self.table.key
        );
        let now = now_ms();
        let taken = self
            .execute(&sql, &[&self.key, &self.holder, &(now + HOLD_FOR_MS), &now])
            .await?;
        Ok(taken == 1)
    }

    /// Waits until the key is free (or its hold ran out), then holds it; `waiting` is
    /// said once if it had to wait. Waiting has no limit (another instance's turn
    /// takes as long as it takes); each look at the table does.
    pub(crate) async fn acquire(&self, waiting: &str) -> Result<(), StoreError> {
        let mut waited = false;
        loop {
            if self.try_acquire().await? {
                return Ok(());
            }
            if !waited {
                tracing::debug!(key = self.key, "{waiting}");
                waited = true;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Renews the hold until the returned sender is dropped, then hands the future
    /// that lets go of it to `schedule` (run it at once, or after writes queued before).
    pub(crate) fn keep(
        self,
        schedule: impl FnOnce(Release) + Send + 'static,
    ) -> oneshot::Sender<()> {
        self.keep_watched(schedule).0
    }

    /// As [`Held::keep`], and says when a renewal found the hold gone (it ran out and
    /// another instance may hold it): renewals stop then.
    pub(crate) fn keep_watched(
        self,
        schedule: impl FnOnce(Release) + Send + 'static,
    ) -> (oneshot::Sender<()>, tokio::sync::watch::Receiver<bool>) {
        let (alive, mut released) = oneshot::channel::<()>();
        let (lost_tx, lost) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            let renew_sql = format!(
                "UPDATE {} SET until_ms = $3 WHERE {} = $1 AND owner = $2",
                self.table.table, self.table.key
            );
            let mut renew = tokio::time::interval(RENEW);
            renew.tick().await;
            loop {
                tokio::select! {
                    _ = &mut released => break,
                    _ = renew.tick() => {
                        let until = now_ms() + HOLD_FOR_MS;
                        match self.execute(&renew_sql, &[&self.key, &self.holder, &until]).await {
                            Ok(0) => {
                                tracing::warn!(key = self.key, "store: a hold ran out before it was renewed; it is lost");
                                lost_tx.send_replace(true);
                                let _ = (&mut released).await;
                                break;
                            }
                            Ok(_) => {}
                            Err(e) => tracing::warn!(error = %e, "store: a hold was not renewed"),
                        }
                    }
                }
            }
            let release: Release = Box::pin(async move {
                let sql = format!(
                    "DELETE FROM {} WHERE {} = $1 AND owner = $2",
                    self.table.table, self.table.key
                );
                let out = self.execute(&sql, &[&self.key, &self.holder]).await;
                if let Err(e) = out {
                    tracing::warn!(error = %e, "store: a hold was not let go; it runs out in 30 s");
                }
            });
            schedule(release);
        });
        (alive, lost)
    }
}

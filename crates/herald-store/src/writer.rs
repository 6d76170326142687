//! The one writer thread: whatever writes are waiting are committed together in one
//! transaction (group commit), so many concurrent requests share one fsync.

use crate::StoreError;
use crate::deliveries::{self, NewDelivery};
use crate::inbox::{EnqueueOutcome, NewInboxItem};
use rusqlite::{Connection, OptionalExtension, params};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long a delivery id is remembered.
pub const DEDUP_WINDOW_MS: i64 = 3_600_000;
/// Most writes committed in one transaction.
pub const MAX_BATCH: usize = 512;
/// Longest wait for company before a commit, applied only under load.
const COMMIT_DELAY: Duration = Duration::from_micros(250);
/// How often expired dedup keys are deleted.
const PURGE_EVERY: Duration = Duration::from_secs(60);

/// How durable a write must be when its caller hears back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// On disk (fsynced): survives a power loss. Accepted events, dedup keys, deliveries
    /// of the ingress, anything a user asked for.
    Full,
    /// In the database file's WAL but not yet fsynced: survives a crash or `kill -9` of
    /// herald, not a power loss (the next `Full` commit or checkpoint syncs it). Worker
    /// bookkeeping whose loss only makes work happen again (claims, leases, outcomes).
    Process,
}

/// A write run inside the batch's transaction, under its own savepoint (a failure
/// undoes only its own statements); its value is handed back type-erased.
pub type WriteFn =
    Box<dyn FnOnce(&Connection) -> rusqlite::Result<Box<dyn std::any::Any + Send>> + Send>;

/// A write for the writer thread, with where to send its outcome.
pub enum Command {
    Write(
        WriteFn,
        Durability,
        oneshot::Sender<Result<Box<dyn std::any::Any + Send>, StoreError>>,
    ),
    Enqueue(
        Box<NewInboxItem>,
        oneshot::Sender<Result<EnqueueOutcome, StoreError>>,
    ),
    /// Whether (route, delivery id) was seen within the window at `now_ms`.
    Seen {
        route: String,
        delivery_id: String,
        now_ms: i64,
        reply: oneshot::Sender<Result<bool, StoreError>>,
    },
    /// Records a delivery, and when `mark_seen` its dedup key, in one transaction.
    RecordDelivery {
        delivery: Box<NewDelivery>,
        mark_seen: bool,
        reply: oneshot::Sender<Result<i64, StoreError>>,
    },
}

/// Runs until every sender is dropped.
pub fn run(mut conn: Connection, rx: Receiver<Command>) {
    let mut last_purge = Instant::now();
    // Time comes from the callers (their clock stamps each item), so expiry follows it.
    let mut latest_ms = crate::now_ms();
    let mut stats = BatchStats::default();
    let mut last_size = 0usize;
    // Whether commits are fsynced (`synchronous=FULL`, as the store opens).
    let mut synced = true;
    loop {
        let first = match rx.recv_timeout(PURGE_EVERY) {
            Ok(cmd) => cmd,
            Err(RecvTimeoutError::Timeout) => {
                purge(&conn, &mut last_purge, latest_ms);
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let mut batch = vec![first];
        // Under load (the last batch had company), wait a moment for more writes so
        // that they share one fsync; an idle store commits at once.
        let deadline = (last_size > 1).then(|| Instant::now() + COMMIT_DELAY);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(cmd) => batch.push(cmd),
                Err(_) => match deadline.map(|d| d.saturating_duration_since(Instant::now())) {
                    Some(left) if !left.is_zero() => match rx.recv_timeout(left) {
                        Ok(cmd) => batch.push(cmd),
                        Err(_) => break,
                    },
                    _ => break,
                },
            }
        }
        last_size = batch.len();
        for cmd in &batch {
            if let Command::Enqueue(item, _) = cmd {
                latest_ms = latest_ms.max(item.received_at_ms);
            }
        }
        let size = batch.len();
        let started = Instant::now();
        let full = batch
            .iter()
            .any(|c| !matches!(c, Command::Write(_, Durability::Process, _)));
        if full != synced {
            let mode = if full { "FULL" } else { "NORMAL" };
            match conn.pragma_update(None, "synchronous", mode) {
                Ok(()) => synced = full,
                Err(e) => tracing::error!(error = %e, "cannot set the store's synchronous mode"),
            }
        }
        commit_batch(&mut conn, batch);
        stats.record(size, started.elapsed());
        if last_purge.elapsed() >= PURGE_EVERY {
            purge(&conn, &mut last_purge, latest_ms);
        }
    }
}

/// Batch sizes and commit times, summarised at debug level every few seconds.
#[derive(Default)]
struct BatchStats {
    batches: u64,
    items: u64,
    busy: Duration,
    since: Option<Instant>,
}

impl BatchStats {
    fn record(&mut self, size: usize, took: Duration) {
        let since = *self.since.get_or_insert_with(Instant::now);
        self.batches += 1;
        self.items += size as u64;
        self.busy += took;
        if since.elapsed() >= Duration::from_secs(5) {
            tracing::debug!(
                batches = self.batches,
                items = self.items,
                mean_batch = self.items as f64 / self.batches as f64,
                mean_commit_us = self.busy.as_micros() as u64 / self.batches,
                "store writer"
            );
            *self = BatchStats::default();
        }
    }
}

fn commit_batch(conn: &mut Connection, batch: Vec<Command>) {
    let mut replies: Vec<Reply> = Vec::with_capacity(batch.len());
    let result = (|| -> rusqlite::Result<()> {
        let mut tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for cmd in batch {
            match cmd {
                Command::Write(f, _, reply) => {
                    let outcome = (|| {
                        let sp = tx.savepoint()?;
                        let value = f(&sp)?;
                        sp.commit()?;
                        Ok(value)
                    })();
                    replies.push(Reply::Write(reply, outcome));
                }
                Command::Enqueue(item, reply) => {
                    replies.push(Reply::Enqueue(reply, enqueue(&tx, &item)))
                }
                Command::Seen {
                    route,
                    delivery_id,
                    now_ms,
                    reply,
                } => replies.push(Reply::Seen(reply, seen(&tx, &route, &delivery_id, now_ms))),
                Command::RecordDelivery {
                    delivery,
                    mark_seen,
                    reply,
                } => {
                    let outcome = (|| {
                        if mark_seen {
                            tx.prepare_cached("INSERT OR REPLACE INTO dedup (route, delivery_id, seen_at_ms) VALUES (?1, ?2, ?3)")?
                                .execute(params![delivery.route, delivery.delivery_id, delivery.created_at_ms])?;
                        }
                        deliveries::insert(&tx, &delivery)
                    })();
                    replies.push(Reply::Record(reply, outcome));
                }
            }
        }
        tx.commit()
    })();
    let failed = result.err().map(|e| {
        tracing::error!(error = %e, "store commit failed; the batch is answered with an error");
        e.to_string()
    });
    for reply in replies {
        reply.send(failed.as_deref());
    }
}

/// A pending answer to a command of the batch.
enum Reply {
    Write(
        oneshot::Sender<Result<Box<dyn std::any::Any + Send>, StoreError>>,
        rusqlite::Result<Box<dyn std::any::Any + Send>>,
    ),
    Enqueue(
        oneshot::Sender<Result<EnqueueOutcome, StoreError>>,
        rusqlite::Result<EnqueueOutcome>,
    ),
    Seen(
        oneshot::Sender<Result<bool, StoreError>>,
        rusqlite::Result<bool>,
    ),
    Record(
        oneshot::Sender<Result<i64, StoreError>>,
        rusqlite::Result<i64>,
    ),
}

impl Reply {
    /// Sends the outcome, or the commit failure that undid it.
    fn send(self, commit_failed: Option<&str>) {
        fn out<T>(r: rusqlite::Result<T>, failed: Option<&str>) -> Result<T, StoreError> {
            match failed {
                Some(m) => Err(StoreError::Commit(m.to_owned())),
                None => r.map_err(StoreError::from),
            }
        }
        match self {
            Reply::Write(tx, r) => drop(tx.send(out(r, commit_failed))),
            Reply::Enqueue(tx, r) => drop(tx.send(out(r, commit_failed))),
            Reply::Seen(tx, r) => drop(tx.send(out(r, commit_failed))),
            Reply::Record(tx, r) => drop(tx.send(out(r, commit_failed))),
        }
    }
}

fn seen(
    tx: &rusqlite::Transaction<'_>,
    route: &str,
    delivery_id: &str,
    now_ms: i64,
) -> rusqlite::Result<bool> {
    let at: Option<i64> = tx
        .prepare_cached("SELECT seen_at_ms FROM dedup WHERE route = ?1 AND delivery_id = ?2")?
        .query_row(params![route, delivery_id], |r| r.get(0))
        .optional()?;
    Ok(at.is_some_and(|at| now_ms - at < DEDUP_WINDOW_MS))
}

fn enqueue(
    tx: &rusqlite::Transaction<'_>,
    item: &NewInboxItem,
) -> rusqlite::Result<EnqueueOutcome> {
    // One statement: insert the key, or refresh it only when it has expired. No row
    // changed means the key was seen within the window.
    let fresh = tx
        .prepare_cached(
            "INSERT INTO dedup (route, delivery_id, seen_at_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT (route, delivery_id) DO UPDATE SET seen_at_ms = excluded.seen_at_ms
             WHERE dedup.seen_at_ms <= excluded.seen_at_ms - ?4",
        )?
        .execute(params![
            item.route,
            item.delivery_id,
            item.received_at_ms,
            DEDUP_WINDOW_MS
        ])?;
    if fresh == 0 {
        return Ok(EnqueueOutcome::Duplicate);
    }
    tx.prepare_cached(
        "INSERT INTO inbox (route, event_type, delivery_id, state, received_at_ms, updated_at_ms, profile,
                            headers, payload, prompt, deliver, deliver_extra, skills, toolsets)
         VALUES (?1, ?2, ?3, 'queued', ?4, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?
    .execute(params![
        item.route,
        item.event_type,
        item.delivery_id,
        item.received_at_ms,
        item.profile,
        item.headers,
        item.payload,
        item.prompt,
        item.deliver,
        item.deliver_extra,
        item.skills,
        item.toolsets,
    ])?;
    Ok(EnqueueOutcome::Accepted {
        id: tx.last_insert_rowid(),
    })
}

fn purge(conn: &Connection, last_purge: &mut Instant, now_ms: i64) {
    *last_purge = Instant::now();
    match conn.execute(
        "DELETE FROM dedup WHERE seen_at_ms < ?1",
        params![now_ms - DEDUP_WINDOW_MS],
    ) {
        Ok(0) => {}
        Ok(n) => tracing::debug!(removed = n, "expired dedup keys removed"),
        Err(e) => tracing::warn!(error = %e, "could not remove expired dedup keys"),
    }
}

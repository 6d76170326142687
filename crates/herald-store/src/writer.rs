//! The one writer thread: whatever writes are waiting are committed together in one
//! transaction (group commit); the syncer thread then makes them durable, so many
//! concurrent requests share one fsync and the next batch is committed meanwhile.

use crate::StoreError;
use crate::dedup_keys::DedupKeys;
use crate::deliveries::{self, NewDelivery};
use crate::gate::WriterGate;
use crate::inbox::{EnqueueOutcome, NewInboxItem};
use crate::round_stats::RoundStats;
use crate::syncer::{Pending, SyncProgress};
use rusqlite::{Connection, OptionalExtension, params};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long a delivery id is remembered.
pub const DEDUP_WINDOW_MS: i64 = 3_600_000;
/// Most writes committed in one transaction.
pub const MAX_BATCH: usize = 512;
/// Longest the writer waits for the syncer to finish an earlier batch before it
/// commits the next one anyway.
const SYNC_WAIT_LIMIT: Duration = Duration::from_micros(250);
/// How often expired dedup keys are deleted.
const PURGE_EVERY: Duration = Duration::from_secs(60);

/// How durable a write must be when its caller hears back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// On disk (fsynced): survives a power loss. Accepted events, dedup keys, deliveries
    /// of the ingress, anything a user asked for.
    Full,
    /// In the database file's WAL but not yet fsynced: survives a crash or `kill -9` of
    /// herald, not a power loss (the next sync of the WAL or checkpoint covers it). Worker
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
        Box<Enqueue>,
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

/// An accepted event for the inbox, its payload already encoded for its column (by
/// the caller's thread, so the writer does not spend its time compressing).
pub struct Enqueue {
    pub item: NewInboxItem,
    pub payload: rusqlite::types::Value,
}

/// Runs until every sender is dropped. Committed batches whose callers need them on
/// disk go to the syncer (`to_sync`), which answers them after the WAL is synced;
/// `progress` tells how many of the batches that wrote it has seen on disk.
pub(crate) fn run(
    mut conn: Connection,
    dedup: Option<DedupKeys>,
    rx: Receiver<Command>,
    to_sync: Sender<Pending>,
    progress: Arc<SyncProgress>,
    gate: Arc<WriterGate>,
) {
    progress.register_writer();
    // A database without an inbox has no dedup keys to keep or purge.
    let has_dedup = dedup.is_some();
    let mut keys = dedup.unwrap_or_else(DedupKeys::new);
    // Batches with durable writes committed so far.
    let mut written: u64 = 0;
    let mut last_purge = Instant::now();
    // Time comes from the callers (their clock stamps each item), so expiry follows
    // it, and the wall clock too: keys of a quiet store or of direct deliveries alone
    // (which stamp no enqueue) still leave the window and memory.
    let mut latest_ms = crate::now_ms();
    let mut stats = RoundStats::new("store writer");
    let mut spill: Option<Spill> = None;
    loop {
        let wait = match spill {
            Some(_) => Duration::ZERO,
            None => PURGE_EVERY,
        };
        let first = match next_command(&rx, &gate, wait) {
            Ok(cmd) => cmd,
            Err(RecvTimeoutError::Timeout) => {
                gate.busy();
                if has_dedup {
                    purge(&conn, &mut keys, &mut last_purge, latest_ms);
                    spill_step(&conn, &mut keys, &mut spill, latest_ms);
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let mut batch = vec![first];
        // While the syncer is still at an earlier batch, this one could not be synced
        // before that sync ends anyway: let company gather meanwhile and commit when
        // the syncer is free, so that the commit is synced at once. An idle store
        // commits at once. Writes arriving during the wait queue up without waking
        // this thread one by one; only the syncer wakes it.
        progress.wait_until_synced(written, Instant::now() + SYNC_WAIT_LIMIT);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(cmd) => batch.push(cmd),
                Err(_) => break,
            }
        }
        for cmd in &batch {
            if let Command::Enqueue(e, _) = cmd {
                latest_ms = latest_ms.max(e.item.received_at_ms);
            }
        }
        let size = batch.len();
        let started = Instant::now();
        let (replies, failed) = commit_batch(&mut conn, &mut keys, batch);
        answer_batch(replies, failed, &mut written, &progress, &to_sync);
        stats.record(size, started.elapsed());
        if has_dedup && last_purge.elapsed() >= PURGE_EVERY {
            purge(&conn, &mut keys, &mut last_purge, latest_ms);
        }
        if has_dedup {
            spill_step(&conn, &mut keys, &mut spill, latest_ms);
        }
    }
}

/// The next write, waiting up to `wait` for one. The gate hears that the writer is
/// idle only when nothing is queued, and busy again as soon as a write is taken.
fn next_command(
    rx: &Receiver<Command>,
    gate: &WriterGate,
    wait: Duration,
) -> Result<Command, RecvTimeoutError> {
    let cmd = match rx.try_recv() {
        Ok(cmd) => Ok(cmd),
        Err(mpsc::TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
        Err(mpsc::TryRecvError::Empty) => {
            gate.idle();
            rx.recv_timeout(wait)
        }
    };
    if cmd.is_ok() {
        gate.busy();
    }
    cmd
}

/// Keys on their way from memory to the `dedup` table: those seen in `[from_ms,
/// cut_ms)` still to write.
struct Spill {
    from_ms: i64,
    cut_ms: i64,
}

/// Past the keys' memory budget, writes one slice of the oldest keys to disk; once all
/// of them are there, forgets them from memory. Between batches, so that no batch waits
/// for more than a slice.
fn spill_step(conn: &Connection, keys: &mut DedupKeys, spill: &mut Option<Spill>, latest_ms: i64) {
    let now_ms = latest_ms.max(crate::now_ms());
    let job = match spill.take() {
        Some(job) => job,
        None if keys.over_budget() => {
            let Some(cut_ms) = keys.spill_cut() else {
                return;
            };
            let job = Spill {
                from_ms: keys.spilled_until_ms.max(now_ms - DEDUP_WINDOW_MS),
                cut_ms,
            };
            tracing::info!("dedup keys past their memory budget: the oldest go to disk");
            job
        }
        None => return,
    };
    if job.from_ms >= job.cut_ms {
        keys.forget_before(job.cut_ms);
        return;
    }
    let slice_end: Option<i64> = conn
        .query_row(
            "SELECT received_at_ms FROM inbox INDEXED BY inbox_received
             WHERE received_at_ms >= ?1 AND received_at_ms < ?2
             ORDER BY received_at_ms LIMIT 1 OFFSET ?3",
            params![job.from_ms, job.cut_ms, crate::dedup_keys::SPILL_SLICE],
            |r| r.get(0),
        )
        .optional()
        .unwrap_or(None);
    let to = slice_end.map_or(job.cut_ms, |t| t.max(job.from_ms + 1));
    match crate::dedup_keys::spill_range(conn, job.from_ms, to) {
        Ok(_) => {
            *spill = Some(Spill {
                from_ms: to,
                cut_ms: job.cut_ms,
            })
        }
        Err(e) => {
            tracing::warn!(error = %e, "dedup keys could not be written to disk; they stay in memory");
        }
    }
}

/// Sends a committed batch's answers: failures and `Process` writes at once, reads
/// that rest only on batches already on disk at once, everything else through the
/// syncer after the WAL is synced. `written` counts the batches with durable writes.
fn answer_batch(
    replies: Vec<Reply>,
    failed: Option<String>,
    written: &mut u64,
    progress: &SyncProgress,
    to_sync: &Sender<Pending>,
) {
    let wrote = failed.is_none()
        && replies
            .iter()
            .any(|r| r.durability() == Durability::Full && !r.is_read_only());
    if wrote {
        *written += 1;
    }
    // A read (a duplicate, a `seen` check) of a batch that wrote nothing rests only
    // on earlier batches: once those are on disk it needs no sync of its own.
    let reads_settled = !wrote && progress.synced() >= *written;
    let mut durable = Vec::with_capacity(replies.len());
    for reply in replies {
        if failed.is_some()
            || reply.durability() == Durability::Process
            || (reads_settled && reply.is_read_only())
        {
            reply.send(failed.as_deref());
        } else {
            durable.push(reply);
        }
    }
    if durable.is_empty() {
        return;
    }
    let pending = Pending {
        replies: durable,
        upto: *written,
    };
    if let Err(mpsc::SendError(pending)) = to_sync.send(pending) {
        tracing::error!("the store syncer has stopped; answering with an error");
        for reply in pending.replies {
            reply.send(Some("the store syncer has stopped"));
        }
    }
}

/// Runs the batch in one transaction and commits it; the answers are returned
/// unsent, with the commit failure that undid them, if any. The dedup keys follow:
/// a failed commit undoes the batch's changes to them too.
fn commit_batch(
    conn: &mut Connection,
    keys: &mut DedupKeys,
    batch: Vec<Command>,
) -> (Vec<Reply>, Option<String>) {
    let mut replies: Vec<Reply> = Vec::with_capacity(batch.len());
    let result = (|| -> rusqlite::Result<()> {
        let mut tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        for cmd in batch {
            match cmd {
                Command::Write(f, durability, reply) => {
                    let outcome = (|| {
                        let sp = tx.savepoint()?;
                        let value = f(&sp)?;
                        sp.commit()?;
                        Ok(value)
                    })();
                    replies.push(Reply::Write(reply, durability, outcome));
                }
                Command::Enqueue(e, reply) => replies.push(Reply::Enqueue(
                    reply,
                    enqueue(&tx, keys, &e.item, &e.payload),
                )),
                Command::Seen {
                    route,
                    delivery_id,
                    now_ms,
                    reply,
                } => {
                    let in_memory = keys.is_seen(keys.key(&route, &delivery_id), now_ms);
                    let seen = match in_memory || !keys.spilled(now_ms) {
                        true => Ok(in_memory),
                        false => crate::dedup_keys::on_disk(&tx, &route, &delivery_id, now_ms),
                    };
                    replies.push(Reply::Seen(reply, seen));
                }
                Command::RecordDelivery {
                    delivery,
                    mark_seen,
                    reply,
                } => {
                    let outcome = (|| {
                        let sp = tx.savepoint()?;
                        if mark_seen {
                            sp.prepare_cached("INSERT OR REPLACE INTO dedup (route, delivery_id, seen_at_ms) VALUES (?1, ?2, ?3)")?
                                .execute(params![delivery.route, delivery.delivery_id, delivery.created_at_ms])?;
                        }
                        let id = deliveries::insert(&sp, &delivery)?;
                        sp.commit()?;
                        Ok(id)
                    })();
                    if mark_seen && outcome.is_ok() {
                        let key = keys.key(&delivery.route, &delivery.delivery_id);
                        keys.mark(key, delivery.created_at_ms);
                    }
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
    match failed {
        None => keys.keep_batch(),
        Some(_) => keys.undo_batch(),
    }
    (replies, failed)
}

/// A pending answer to a command of the batch.
pub(crate) enum Reply {
    Write(
        oneshot::Sender<Result<Box<dyn std::any::Any + Send>, StoreError>>,
        Durability,
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
    /// How durable the commit must be before this answer is sent. Reads and
    /// duplicates wait for the sync too: they may have seen a write of the same batch
    /// that is not on disk yet.
    fn durability(&self) -> Durability {
        match self {
            Reply::Write(_, durability, _) => *durability,
            _ => Durability::Full,
        }
    }

    /// Whether the answer only reports what is already stored (a `seen` check, a
    /// duplicate) rather than a write of its own.
    fn is_read_only(&self) -> bool {
        matches!(
            self,
            Reply::Seen(..) | Reply::Enqueue(_, Ok(EnqueueOutcome::Duplicate))
        )
    }

    /// Sends the outcome, or the failure (commit or sync) that undid it.
    pub(crate) fn send(self, commit_failed: Option<&str>) {
        fn out<T>(r: rusqlite::Result<T>, failed: Option<&str>) -> Result<T, StoreError> {
            match failed {
                Some(m) => Err(StoreError::Commit(m.to_owned())),
                None => r.map_err(StoreError::from),
            }
        }
        match self {
            Reply::Write(tx, _, r) => {
                // A detached write has nobody to tell: its failure is logged here.
                if let Err(Err(e)) = tx.send(out(r, commit_failed)) {
                    tracing::warn!(error = %e, "a write nobody waited for failed");
                }
            }
            Reply::Enqueue(tx, r) => drop(tx.send(out(r, commit_failed))),
            Reply::Seen(tx, r) => drop(tx.send(out(r, commit_failed))),
            Reply::Record(tx, r) => drop(tx.send(out(r, commit_failed))),
        }
    }
}

fn enqueue(
    tx: &rusqlite::Transaction<'_>,
    keys: &mut DedupKeys,
    item: &NewInboxItem,
    payload: &rusqlite::types::Value,
) -> rusqlite::Result<EnqueueOutcome> {
    // The key is decided in memory; the inbox row (route, delivery id, received time)
    // is what keeps it on disk (see `dedup_keys`).
    let key = keys.key(&item.route, &item.delivery_id);
    let now = item.received_at_ms;
    if keys.is_seen(key, now)
        || (keys.spilled(now)
            && crate::dedup_keys::on_disk(tx, &item.route, &item.delivery_id, now)?)
    {
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
        payload,
        item.prompt,
        item.deliver,
        item.deliver_extra,
        item.skills,
        item.toolsets,
    ])?;
    keys.mark(key, item.received_at_ms);
    Ok(EnqueueOutcome::Accepted {
        id: tx.last_insert_rowid(),
    })
}

/// Forgets the dedup keys that left the window: by the callers' latest stamp or the
/// wall clock, whichever is later.
fn purge(conn: &Connection, keys: &mut DedupKeys, last_purge: &mut Instant, latest_ms: i64) {
    *last_purge = Instant::now();
    let now_ms = latest_ms.max(crate::now_ms());
    let forgotten = keys.expire(now_ms);
    match conn.execute(
        "DELETE FROM dedup WHERE seen_at_ms < ?1",
        params![now_ms - DEDUP_WINDOW_MS],
    ) {
        Ok(n) if n + forgotten > 0 => {
            tracing::debug!(removed = n, forgotten, "expired dedup keys removed")
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "could not remove expired dedup keys"),
    }
}

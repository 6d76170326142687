//! herald's store, in SQLite: the durable inbox of accepted events, dedup keys and
//! deliveries (`herald.db`), and the sessions, messages and runs (`state.db`).
//!
//! Every write goes through one writer thread that commits whatever is waiting in a
//! single transaction (group commit) to the WAL; a syncer thread fsyncs the WAL and
//! only then answers, so a caller's future resolves only after its write is durable
//! (the same guarantee as `synchronous=FULL`, with the next batch committed while the
//! disk works). Readers use their own connections.
//!
//! Two databases, each with its own writer: the inbox (`herald.db`, [`Store`]) and the
//! sessions and runs (`state.db`, Hermes's file and table names, [`SessionStore`]).
//! Callers see neither SQL nor SQLite types: what is stored goes in and comes out as
//! the types of this crate.

mod dedup_keys;
pub mod deliveries;
pub mod inbox;
pub mod instance;
mod payload;
pub mod queue;
mod round_stats;
mod schema;
pub mod sessions;
mod syncer;
mod writer;

pub use deliveries::{Delivery, DeliveryQuery, NewDelivery};
pub use inbox::{Attempt, EnqueueOutcome, InboxItem, InboxQuery, NewInboxItem, StoredPayload};
pub use queue::{ClaimRequest, ReplayOutcome, Stage};
pub use sessions::{SessionReader, SessionStore};
pub use writer::{DEDUP_WINDOW_MS, Durability, MAX_BATCH};

use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use tokio::sync::oneshot;

/// A store failure.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store {path}: {reason}")]
    Open { path: PathBuf, reason: String },
    /// The database refused a statement (the engine's message).
    #[error("store: {0}")]
    Database(String),
    #[error("store commit failed: {0}")]
    Commit(String),
    #[error("the store writer has stopped")]
    WriterGone,
    #[error(
        "store {path} has schema version {found}, newer than this herald ({supported}); upgrade herald"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Database(e.to_string())
    }
}

/// Seconds since the Unix epoch (the unit of Hermes's `state.db` timestamps).
pub fn now_secs() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The writing side of the store; cheap to clone.
#[derive(Clone)]
pub struct Store {
    tx: mpsc::Sender<writer::Command>,
    path: PathBuf,
}

fn open_connection(path: &Path, flags: OpenFlags) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(path, flags).map_err(|e| StoreError::Open {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}

impl Store {
    /// Opens (creating if needed) the database, migrates it and starts the writer thread.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let mut conn = open_for_writing(path)?;
        let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if found > schema::latest_version() {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found,
                supported: schema::latest_version(),
            });
        }
        schema::migrate(&mut conn)?;
        let keys = dedup_keys::DedupKeys::load(&conn, now_ms())?;
        let tx = start_writer(path, conn, Some(keys))?;
        Ok(Store {
            tx,
            path: path.to_path_buf(),
        })
    }

    /// Stores an accepted event and its dedup key in one transaction; resolves once the
    /// transaction is durable.
    pub async fn enqueue(&self, mut item: NewInboxItem) -> Result<EnqueueOutcome, StoreError> {
        let payload = payload::encode(std::mem::take(&mut item.payload));
        let (reply, wait) = oneshot::channel();
        self.tx
            .send(writer::Command::Enqueue(
                Box::new(writer::Enqueue { item, payload }),
                reply,
            ))
            .map_err(|_| StoreError::WriterGone)?;
        wait.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Whether the route saw this delivery id within the dedup window.
    pub async fn seen(
        &self,
        route: &str,
        delivery_id: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let (reply, wait) = oneshot::channel();
        self.tx
            .send(writer::Command::Seen {
                route: route.to_owned(),
                delivery_id: delivery_id.to_owned(),
                now_ms,
                reply,
            })
            .map_err(|_| StoreError::WriterGone)?;
        wait.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Records a delivery; with `mark_seen` its dedup key too, in the same transaction.
    pub async fn record_delivery(
        &self,
        delivery: NewDelivery,
        mark_seen: bool,
    ) -> Result<i64, StoreError> {
        let (reply, wait) = oneshot::channel();
        self.tx
            .send(writer::Command::RecordDelivery {
                delivery: Box::new(delivery),
                mark_seen,
                reply,
            })
            .map_err(|_| StoreError::WriterGone)?;
        wait.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Runs `f` in the writer's next transaction (under its own savepoint) and resolves
    /// once that transaction is committed: fsynced when `durability` is `Full`.
    async fn write<T: Send + 'static>(
        &self,
        durability: Durability,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        write_on(&self.tx, durability, f).await
    }

    /// Claims ready entries for this process's workers.
    pub async fn claim(&self, req: ClaimRequest) -> Result<Vec<InboxItem>, StoreError> {
        self.write(Durability::Process, move |c| queue::claim(c, &req))
            .await
    }

    /// Stores a run's answer (before any delivery is tried).
    pub async fn store_answer(
        &self,
        id: i64,
        answer: String,
        started_ms: i64,
    ) -> Result<(), StoreError> {
        self.write(Durability::Process, move |c| {
            queue::store_answer(c, id, &answer, started_ms, now_ms())
        })
        .await
    }

    /// Records a transient failure; the entry is tried again at `next_ms`.
    pub async fn retry_later(
        &self,
        id: i64,
        stage: Stage,
        started_ms: i64,
        next_ms: i64,
        error: String,
    ) -> Result<(), StoreError> {
        self.write(Durability::Process, move |c| {
            queue::retry_later(c, id, stage, started_ms, now_ms(), next_ms, &error)
        })
        .await
    }

    /// Marks an entry dead with the reason (and its failed delivery record).
    pub async fn mark_dead(
        &self,
        id: i64,
        stage: Stage,
        started_ms: i64,
        error: String,
        delivery: Option<NewDelivery>,
    ) -> Result<(), StoreError> {
        self.write(Durability::Process, move |c| {
            queue::mark_dead(
                c,
                id,
                stage,
                started_ms,
                now_ms(),
                &error,
                delivery.as_ref(),
            )
        })
        .await
    }

    /// Marks an entry delivered, with its delivery record.
    pub async fn mark_delivered(
        &self,
        id: i64,
        started_ms: i64,
        delivery: NewDelivery,
    ) -> Result<(), StoreError> {
        self.write(Durability::Process, move |c| {
            queue::mark_delivered(c, id, started_ms, now_ms(), &delivery)
        })
        .await
    }

    /// Gives a claimed entry back to the queue unchanged (shutdown).
    pub async fn release(
        &self,
        id: i64,
        stage: Stage,
        started_ms: i64,
        why: String,
    ) -> Result<(), StoreError> {
        self.write(Durability::Process, move |c| {
            queue::release(c, id, stage, started_ms, now_ms(), &why)
        })
        .await
    }

    /// Entries left `running` by a crash wait again; returns how many.
    pub async fn recover(&self) -> Result<usize, StoreError> {
        self.write(Durability::Process, |c| queue::recover(c, now_ms()))
            .await
    }

    /// Extends the leases of the given entries.
    pub async fn renew_leases(&self, ids: Vec<i64>, until_ms: i64) -> Result<(), StoreError> {
        self.write(Durability::Process, move |c| {
            queue::renew(c, &ids, until_ms)
        })
        .await
    }

    /// Queues a dead or delivered entry again.
    pub async fn replay(&self, id: i64) -> Result<ReplayOutcome, StoreError> {
        self.write(Durability::Full, move |c| queue::replay(c, id, now_ms()))
            .await
    }

    /// Deletes entries in `state` last changed before `before_ms`; returns how many.
    pub async fn purge(&self, state: String, before_ms: i64) -> Result<usize, StoreError> {
        self.write(Durability::Full, move |c| {
            queue::purge(c, &state, before_ms, now_ms())
        })
        .await
    }

    /// A read connection to the same database.
    pub fn reader(&self) -> Result<StoreReader, StoreError> {
        StoreReader::open(&self.path)
    }
}

/// Opens a database file for its one writer: created owner-only, WAL, migrated by
/// the caller with `synchronous=FULL`; from here on commits only write the WAL and the
/// syncer fsyncs it before a caller who needs it on disk hears back (see `syncer`).
fn open_for_writing(path: &Path) -> Result<Connection, StoreError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| StoreError::Open {
            path: path.to_path_buf(),
            reason: format!("cannot create {}: {e}", parent.display()),
        })?;
    }
    schema::restrict_to_owner(path);
    let conn = open_connection(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
    )?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    Ok(conn)
}

/// Starts the writer and syncer threads of a migrated database; `dedup` is the inbox's
/// dedup keys (a database without an inbox has none).
fn start_writer(
    path: &Path,
    conn: Connection,
    dedup: Option<dedup_keys::DedupKeys>,
) -> Result<mpsc::Sender<writer::Command>, StoreError> {
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal = PathBuf::from(wal);
    let (to_sync, sync_rx) = mpsc::channel();
    let progress = std::sync::Arc::new(syncer::SyncProgress::default());
    let progress_for_syncer = progress.clone();
    std::thread::Builder::new()
        .name("herald-store-sync".into())
        .spawn(move || syncer::run(wal, sync_rx, progress_for_syncer))
        .map_err(|e| StoreError::Commit(format!("cannot start the syncer thread: {e}")))?;
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("herald-store-writer".into())
        .spawn(move || writer::run(conn, dedup, rx, to_sync, progress))
        .map_err(|e| StoreError::Commit(format!("cannot start the writer thread: {e}")))?;
    Ok(tx)
}

/// Runs `f` in the next transaction of the writer behind `tx` (under its own savepoint)
/// and resolves once that transaction is committed: fsynced when `durability` is `Full`.
async fn write_on<T: Send + 'static>(
    tx: &mpsc::Sender<writer::Command>,
    durability: Durability,
    f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
) -> Result<T, StoreError> {
    let (reply, wait) = oneshot::channel();
    let f: writer::WriteFn =
        Box::new(move |conn| f(conn).map(|v| Box::new(v) as Box<dyn std::any::Any + Send>));
    tx.send(writer::Command::Write(f, durability, reply))
        .map_err(|_| StoreError::WriterGone)?;
    let value = wait.await.map_err(|_| StoreError::WriterGone)??;
    value
        .downcast::<T>()
        .map(|v| *v)
        .map_err(|_| StoreError::Commit("internal: unexpected write result type".into()))
}

/// Queues `f` for the writer behind `tx` without waiting for it: it is committed in
/// order with the writes around it, and a failure is logged by the writer.
fn write_detached(
    tx: &mpsc::Sender<writer::Command>,
    durability: Durability,
    f: impl FnOnce(&Connection) -> rusqlite::Result<()> + Send + 'static,
) -> Result<(), StoreError> {
    let (reply, _) = oneshot::channel();
    let f: writer::WriteFn =
        Box::new(move |conn| f(conn).map(|v| Box::new(v) as Box<dyn std::any::Any + Send>));
    tx.send(writer::Command::Write(f, durability, reply))
        .map_err(|_| StoreError::WriterGone)
}

/// A read-only view of the store (used by the CLI and health endpoints).
pub struct StoreReader {
    conn: Connection,
}

impl StoreReader {
    /// Opens an existing database read-only.
    pub fn open(path: &Path) -> Result<StoreReader, StoreError> {
        let conn = open_connection(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        Ok(StoreReader { conn })
    }

    pub fn list(&self, query: &InboxQuery) -> Result<Vec<InboxItem>, StoreError> {
        Ok(inbox::list(&self.conn, query)?)
    }

    pub fn get(&self, id: i64) -> Result<Option<InboxItem>, StoreError> {
        Ok(inbox::get(&self.conn, id)?)
    }

    pub fn deliveries(&self, query: &DeliveryQuery) -> Result<Vec<Delivery>, StoreError> {
        Ok(deliveries::list(&self.conn, query)?)
    }

    pub fn attempts(&self, id: i64) -> Result<Vec<Attempt>, StoreError> {
        Ok(inbox::attempts(&self.conn, id)?)
    }

    pub fn counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        Ok(inbox::counts(&self.conn)?)
    }
}

#[cfg(test)]
mod tests;

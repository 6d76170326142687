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

mod backend;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
mod dedup_keys;
pub mod deliveries;
pub mod events;
pub mod export;
mod gate;
pub mod hermes_state;
pub mod inbox;
pub mod instance;
pub mod payload;
pub mod queue;
pub mod retention;
mod round_stats;
mod schema;
mod search_index;
pub mod sessions;
mod sqlite_inbox;
mod syncer;
mod writer;

pub use backend::InboxBackend;
#[cfg(test)]
use dedup_keys::BYTES_PER_KEY;
pub use deliveries::{Delivery, DeliveryQuery, NewDelivery};
pub use inbox::{
    Attempt, EnqueueOutcome, InboxGauges, InboxItem, InboxQuery, NewInboxItem, StoredPayload,
};
pub use queue::{CHAT_ROUTE_PREFIX, CancelOutcome, ClaimRequest, ClaimScope, ReplayOutcome, Stage};
pub use sessions::{SessionBackend, SessionStore, SqliteSessions};
pub use sqlite_inbox::SqliteInbox;
pub use writer::{DEDUP_WINDOW_MS, Durability, MAX_BATCH};

use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::{Arc, mpsc};
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
    #[error("the store is open for reading only")]
    ReadOnly,
    /// The database cannot be reached (a connection or pool failure).
    #[error("store unreachable: {0}")]
    Unreachable(String),
    /// The database did not answer in time (`store.statement_timeout_seconds`): a
    /// stalled or overloaded server, or a network path that lost it.
    #[error("store timed out: {0}")]
    TimedOut(String),
    #[error(
        "store {path} has schema version {found}, newer than this herald ({supported}); upgrade herald"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
}

impl StoreError {
    /// Whether the store could not be used for now (unreachable or too slow), as
    /// opposed to refusing what was asked: worth a retry later.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unreachable(_) | StoreError::TimedOut(_))
    }
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

/// The inbox store every caller holds, whichever backend keeps it; cheap to clone.
#[derive(Clone)]
pub struct Store {
    backend: Arc<dyn InboxBackend>,
}

impl Store {
    /// The SQLite inbox at `path`: opened (created if needed), migrated, its writer
    /// started.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Ok(Store::on(Arc::new(SqliteInbox::open(path)?)))
    }

    /// [`Store::open`] with the dedup keys kept within `dedup_memory` bytes.
    pub fn open_within(path: &Path, dedup_memory: usize) -> Result<Store, StoreError> {
        Ok(Store::on(Arc::new(SqliteInbox::open_within(
            path,
            dedup_memory,
        )?)))
    }

    /// An existing SQLite inbox, for reading only (writes fail with
    /// [`StoreError::ReadOnly`]).
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        Ok(Store::on(Arc::new(SqliteInbox::open_read_only(path)?)))
    }

    /// The store kept by `backend`.
    pub fn on(backend: Arc<dyn InboxBackend>) -> Store {
        Store { backend }
    }

    /// The backend, for what only the store's own tests reach.
    pub fn backend(&self) -> &Arc<dyn InboxBackend> {
        &self.backend
    }
}

impl std::ops::Deref for Store {
    type Target = dyn InboxBackend;
    fn deref(&self) -> &Self::Target {
        &*self.backend
    }
}

fn open_connection(path: &Path, flags: OpenFlags) -> Result<Connection, StoreError> {
    let conn = Connection::open_with_flags(path, flags).map_err(|e| StoreError::Open {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    Ok(conn)
}

/// A database's read-only connection, opened on first use and kept; reads run on the
/// blocking pool, never on an async worker. A failed read drops the connection for
/// the next one.
#[derive(Clone)]
pub(crate) struct ReadConn {
    path: PathBuf,
    conn: Arc<std::sync::Mutex<Option<Connection>>>,
}

impl ReadConn {
    pub(crate) fn new(path: &Path, conn: Option<Connection>) -> ReadConn {
        ReadConn {
            path: path.to_path_buf(),
            conn: Arc::new(std::sync::Mutex::new(conn)),
        }
    }

    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let this = self.clone();
        let read = move || {
            let mut conn = this.conn.lock().map_err(|_| StoreError::WriterGone)?;
            if conn.is_none() {
                *conn = Some(open_connection(
                    &this.path,
                    OpenFlags::SQLITE_OPEN_READ_ONLY,
                )?);
            }
            let outcome = match conn.as_ref() {
                Some(c) => f(c).map_err(StoreError::from),
                None => Err(StoreError::WriterGone),
            };
            if outcome.is_err() {
                *conn = None;
            }
            outcome
        };
        tokio::task::spawn_blocking(read)
            .await
            .map_err(|_| StoreError::WriterGone)?
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
    bound_wal(&conn)?;
    Ok(conn)
}

/// Largest the WAL file is left after a checkpoint has emptied it (SQLite otherwise
/// keeps it at the largest size it ever reached).
const WAL_SIZE_LIMIT: i64 = 16 * 1024 * 1024;

/// Has a connection truncate the WAL to [`WAL_SIZE_LIMIT`] whenever it resets it.
pub(crate) fn bound_wal(conn: &Connection) -> Result<(), StoreError> {
    conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)?;
    Ok(())
}

/// How long a writer waits for a write lock another connection holds (the search
/// index's builder, which gives it up within one entry; another process).
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Has the writer's connection look for a held write lock again every 100 µs rather
/// than SQLite's default backoff (1, 2, 5, 10 ms ...), so that a lock given up at once
/// is taken at once.
fn poll_for_locks(conn: &mut Connection) -> Result<(), StoreError> {
    let mut since = std::time::Instant::now();
    conn.busy_handler(Some(move |tries: i32| {
        if tries == 0 {
            since = std::time::Instant::now();
        }
        std::thread::sleep(std::time::Duration::from_micros(100));
        since.elapsed() < LOCK_WAIT
    }))?;
    Ok(())
}

/// Starts the writer and syncer threads of a migrated database; `dedup` is the inbox's
/// dedup keys (a database without an inbox has none). The gate tells background work
/// on the same database when the writer is busy.
fn start_writer(
    path: &Path,
    mut conn: Connection,
    dedup: Option<dedup_keys::DedupKeys>,
) -> Result<(mpsc::Sender<writer::Command>, Arc<gate::WriterGate>), StoreError> {
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    poll_for_locks(&mut conn)?;
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
    let gate = Arc::new(gate::WriterGate::default());
    let writer_gate = gate.clone();
    std::thread::Builder::new()
        .name("herald-store-writer".into())
        .spawn(move || writer::run(conn, dedup, rx, to_sync, progress, writer_gate))
        .map_err(|e| StoreError::Commit(format!("cannot start the writer thread: {e}")))?;
    Ok((tx, gate))
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

#[cfg(test)]
mod tests;

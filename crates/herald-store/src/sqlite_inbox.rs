//! The inbox in SQLite (`herald.db` in the home): the embedded default. Writes go
//! through the database's one writer thread (group commit, see `writer`); reads use
//! one read-only connection of their own, on the blocking pool.

use crate::backend::InboxBackend;
use crate::deliveries::{self, Delivery, DeliveryQuery, NewDelivery};
use crate::gate::WriterGate;
use crate::inbox::{self, Attempt, EnqueueOutcome, InboxItem, InboxQuery, NewInboxItem};
use crate::queue::{self, ClaimRequest, ReplayOutcome, Stage};
use crate::writer::{self, Durability};
use crate::{StoreError, dedup_keys, now_ms, open_connection, open_for_writing, payload, schema};
use async_trait::async_trait;
use rusqlite::{Connection, OpenFlags};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Once, mpsc};
use tokio::sync::oneshot;

/// The SQLite inbox: a writer (absent when opened read-only) and a read connection.
pub struct SqliteInbox {
    tx: Option<mpsc::Sender<writer::Command>>,
    /// The writer's state, for the search index's builder (absent when read-only).
    gate: Option<Arc<WriterGate>>,
    indexing: Once,
    path: PathBuf,
    reader: crate::ReadConn,
}

impl SqliteInbox {
    /// Opens (creating if needed) the database, migrates it and starts the writer thread.
    pub fn open(path: &Path) -> Result<SqliteInbox, StoreError> {
        SqliteInbox::open_within(path, dedup_keys::DEFAULT_BUDGET_BYTES)
    }

    /// [`SqliteInbox::open`], its dedup keys kept within `dedup_memory` bytes (past it
    /// the oldest are looked up on disk).
    pub fn open_within(path: &Path, dedup_memory: usize) -> Result<SqliteInbox, StoreError> {
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
        let keys = dedup_keys::DedupKeys::load(&conn, now_ms(), dedup_memory)?;
        let (tx, gate) = crate::start_writer(path, conn, Some(keys))?;
        Ok(SqliteInbox {
            tx: Some(tx),
            gate: Some(gate),
            indexing: Once::new(),
            path: path.to_path_buf(),
            reader: crate::ReadConn::new(path, None),
        })
    }

    /// Opens an existing database for reading only (the CLI beside a running
    /// gateway): its writes fail with [`StoreError::ReadOnly`].
    pub fn open_read_only(path: &Path) -> Result<SqliteInbox, StoreError> {
        let conn = open_connection(path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        Ok(SqliteInbox {
            tx: None,
            gate: None,
            indexing: Once::new(),
            path: path.to_path_buf(),
            reader: crate::ReadConn::new(path, Some(conn)),
        })
    }

    fn writer(&self) -> Result<&mpsc::Sender<writer::Command>, StoreError> {
        self.tx.as_ref().ok_or(StoreError::ReadOnly)
    }

    fn send<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, StoreError>>) -> writer::Command,
    ) -> Result<oneshot::Receiver<Result<T, StoreError>>, StoreError> {
        let (reply, wait) = oneshot::channel();
        self.writer()?
            .send(make(reply))
            .map_err(|_| StoreError::WriterGone)?;
        Ok(wait)
    }

    /// Runs `f` in the writer's next transaction (under its own savepoint) and resolves
    /// once that transaction is committed: fsynced when `durability` is `Full`.
    pub(crate) async fn write<T: Send + 'static>(
        &self,
        durability: Durability,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        crate::write_on(self.writer()?, durability, f).await
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        self.reader.run(f).await
    }
}

#[async_trait]
impl InboxBackend for SqliteInbox {
    async fn enqueue(&self, mut item: NewInboxItem) -> Result<EnqueueOutcome, StoreError> {
        let payload = payload::encode(std::mem::take(&mut item.payload));
        let wait = self.send(|reply| {
            writer::Command::Enqueue(Box::new(writer::Enqueue { item, payload }), reply)
        })?;
        wait.await.map_err(|_| StoreError::WriterGone)?
    }

    async fn seen(&self, route: &str, delivery_id: &str, now_ms: i64) -> Result<bool, StoreError> {
        let wait = self.send(|reply| writer::Command::Seen {
            route: route.to_owned(),
            delivery_id: delivery_id.to_owned(),
            now_ms,
            reply,
        })?;
        wait.await.map_err(|_| StoreError::WriterGone)?
    }

    async fn record_delivery(
        &self,
        delivery: NewDelivery,
        mark_seen: bool,
    ) -> Result<i64, StoreError> {
        let wait = self.send(|reply| writer::Command::RecordDelivery {
            delivery: Box::new(delivery),
            mark_seen,
            reply,
        })?;
        wait.await.map_err(|_| StoreError::WriterGone)?
    }

    async fn claim(&self, req: ClaimRequest) -> Result<Vec<InboxItem>, StoreError> {
        self.write(Durability::Process, move |c| queue::claim(c, &req))
            .await
    }

    async fn store_answer(
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

    async fn retry_later(
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

    async fn mark_dead(
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

    async fn mark_delivered(
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

    async fn release(
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

    /// One process writes a home's inbox: every entry left `running` was its own.
    async fn recover(&self) -> Result<usize, StoreError> {
        self.write(Durability::Process, |c| queue::recover(c, now_ms()))
            .await
    }

    async fn renew_leases(&self, ids: Vec<i64>, until_ms: i64) -> Result<(), StoreError> {
        self.write(Durability::Process, move |c| {
            queue::renew(c, &ids, until_ms)
        })
        .await
    }

    async fn cancel(&self, id: i64) -> Result<queue::CancelOutcome, StoreError> {
        self.write(Durability::Full, move |c| queue::cancel(c, id, now_ms()))
            .await
    }

    async fn replay(&self, id: i64) -> Result<ReplayOutcome, StoreError> {
        self.write(Durability::Full, move |c| queue::replay(c, id, now_ms()))
            .await
    }

    async fn purge(
        &self,
        state: String,
        before_ms: i64,
        limit: usize,
    ) -> Result<usize, StoreError> {
        self.write(Durability::Full, move |c| {
            queue::purge(c, &state, before_ms, now_ms(), limit)
        })
        .await
    }

    async fn purge_deliveries(
        &self,
        delivered: bool,
        before_ms: i64,
        limit: usize,
    ) -> Result<usize, StoreError> {
        self.write(Durability::Full, move |c| {
            deliveries::purge(c, delivered, before_ms, limit)
        })
        .await
    }

    async fn list(&self, query: InboxQuery) -> Result<Vec<InboxItem>, StoreError> {
        self.read(move |c| inbox::list(c, &query)).await
    }

    async fn get(&self, id: i64) -> Result<Option<InboxItem>, StoreError> {
        self.read(move |c| inbox::get(c, id)).await
    }

    async fn deliveries(&self, query: DeliveryQuery) -> Result<Vec<Delivery>, StoreError> {
        self.read(move |c| deliveries::list(c, &query)).await
    }

    async fn attempts(&self, id: i64) -> Result<Vec<Attempt>, StoreError> {
        self.read(move |c| inbox::attempts(c, id)).await
    }

    async fn events(
        &self,
        query: crate::events::EventQuery,
    ) -> Result<Vec<crate::events::EventSummary>, StoreError> {
        self.read(move |c| crate::events::page(c, &query)).await
    }

    fn keep_search_index(&self) {
        let Some(gate) = &self.gate else {
            return;
        };
        self.indexing.call_once(|| {
            if let Err(e) = crate::search_index::start(&self.path, Arc::downgrade(gate)) {
                tracing::warn!(error = %e, "the search index cannot be kept; searches scan");
            }
        });
    }

    async fn search_index_behind(&self) -> Result<bool, StoreError> {
        self.read(crate::search_index::behind).await
    }

    async fn counts(&self) -> Result<Vec<(String, i64)>, StoreError> {
        self.read(inbox::counts).await
    }

    async fn gauges(&self, now_ms: i64) -> Result<inbox::InboxGauges, StoreError> {
        self.read(move |c| inbox::gauges(c, now_ms)).await
    }

    fn location(&self) -> String {
        self.path.display().to_string()
    }
}

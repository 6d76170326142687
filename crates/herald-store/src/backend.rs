//! The inbox's one interface: what the gateway, the workers, the CLI and the health
//! endpoints ask of it, whichever database keeps it. SQLite in the home
//! ([`crate::SqliteInbox`]) is the embedded default; herald-scale implements the same
//! interface on PostgreSQL for several instances sharing one database.

use crate::StoreError;
use crate::deliveries::{Delivery, DeliveryQuery, NewDelivery};
use crate::events::{EventQuery, EventSummary};
use crate::inbox::{Attempt, EnqueueOutcome, InboxGauges, InboxItem, InboxQuery, NewInboxItem};
use crate::queue::{CancelOutcome, ClaimRequest, ReplayOutcome, Stage};
use crate::sessions::Hold;
use async_trait::async_trait;
use std::sync::Arc;

/// One inbox store. Every write resolves only once it is committed (durably where
/// the method says so); reads see every write that resolved before them.
#[async_trait]
pub trait InboxBackend: Send + Sync {
    /// Stores an accepted event with its dedup key (route, delivery id) in one
    /// transaction; resolves once it is durable. A key seen within the dedup window is
    /// a duplicate and stores nothing.
    async fn enqueue(&self, item: NewInboxItem) -> Result<EnqueueOutcome, StoreError>;
    /// Whether the route saw this delivery id within the dedup window at `now_ms`.
    async fn seen(&self, route: &str, delivery_id: &str, now_ms: i64) -> Result<bool, StoreError>;
    /// Records a delivery; with `mark_seen` its dedup key too, in the same transaction.
    async fn record_delivery(
        &self,
        delivery: NewDelivery,
        mark_seen: bool,
    ) -> Result<i64, StoreError>;
    /// Claims ready entries (oldest first) for this instance's workers under a lease,
    /// with entries whose lease ran out.
    async fn claim(&self, req: ClaimRequest) -> Result<Vec<InboxItem>, StoreError>;
    /// Stores a run's answer; the entry stays claimed for its delivery.
    async fn store_answer(
        &self,
        id: i64,
        answer: String,
        started_ms: i64,
    ) -> Result<(), StoreError>;
    /// A transient failure: the entry waits until `next_ms`.
    async fn retry_later(
        &self,
        id: i64,
        stage: Stage,
        started_ms: i64,
        next_ms: i64,
        error: String,
    ) -> Result<(), StoreError>;
    /// A permanent failure (or retries ran out): `dead`, with its failed delivery.
    async fn mark_dead(
        &self,
        id: i64,
        stage: Stage,
        started_ms: i64,
        error: String,
        delivery: Option<NewDelivery>,
    ) -> Result<(), StoreError>;
    /// The target accepted the answer.
    async fn mark_delivered(
        &self,
        id: i64,
        started_ms: i64,
        delivery: NewDelivery,
    ) -> Result<(), StoreError>;
    /// Gives a claimed entry back unchanged (shutdown).
    async fn release(
        &self,
        id: i64,
        stage: Stage,
        started_ms: i64,
        why: String,
    ) -> Result<(), StoreError>;
    /// At start: the entries this instance held when it stopped wait again at once;
    /// returns how many.
    async fn recover(&self) -> Result<usize, StoreError>;
    /// Extends the leases of entries this instance works on.
    async fn renew_leases(&self, ids: Vec<i64>, until_ms: i64) -> Result<(), StoreError>;
    /// Queues a dead, delivered or cancelled entry again.
    async fn replay(&self, id: i64) -> Result<ReplayOutcome, StoreError>;
    /// Cancels a queued entry: it never runs (it can be replayed).
    async fn cancel(&self, id: i64) -> Result<CancelOutcome, StoreError>;
    /// Deletes at most `limit` entries in `state` last changed before `before_ms`
    /// (oldest first), with their attempts; returns how many. Their dedup keys stay for
    /// the rest of the window.
    async fn purge(&self, state: String, before_ms: i64, limit: usize)
    -> Result<usize, StoreError>;
    /// Deletes at most `limit` delivery records made before `before_ms` (oldest
    /// first): the `delivered` ones, or the others (failed); returns how many.
    async fn purge_deliveries(
        &self,
        delivered: bool,
        before_ms: i64,
        limit: usize,
    ) -> Result<usize, StoreError>;

    /// Entries, newest first.
    async fn list(&self, query: InboxQuery) -> Result<Vec<InboxItem>, StoreError>;
    async fn get(&self, id: i64) -> Result<Option<InboxItem>, StoreError>;
    /// Deliveries, newest first.
    async fn deliveries(&self, query: DeliveryQuery) -> Result<Vec<Delivery>, StoreError>;
    /// An entry's attempts, oldest first.
    async fn attempts(&self, id: i64) -> Result<Vec<Attempt>, StoreError>;
    /// A page of event summaries, newest first (the dashboard).
    async fn events(&self, query: EventQuery) -> Result<Vec<EventSummary>, StoreError>;
    /// Starts keeping the search index up with the inbox in the background, off the
    /// accept path (once; a store whose search needs no index has nothing to start).
    fn keep_search_index(&self) {}
    /// Whether the search index has yet to see some entries (searches scan those).
    async fn search_index_behind(&self) -> Result<bool, StoreError> {
        Ok(false)
    }
    /// How many entries are in each state, by state name.
    async fn counts(&self) -> Result<Vec<(String, i64)>, StoreError>;
    /// The oldest queued entry's arrival and the leases live at `now_ms`.
    async fn gauges(&self, now_ms: i64) -> Result<InboxGauges, StoreError>;

    /// Asks to have `wake` notified whenever another instance queues work (a store
    /// that only this process writes has nothing to add: its callers wake their
    /// workers themselves).
    fn wake_on_remote_work(&self, wake: Arc<tokio::sync::Notify>) {
        let _ = wake;
    }
    /// Where the store is, for messages (a file path, or a database URL without its
    /// password).
    fn location(&self) -> String;

    /// Whether other instances write this store too.
    fn shared(&self) -> bool {
        false
    }

    /// A document every instance shares (the webhook subscriptions), with its
    /// version; `None` when the store keeps none (or is not shared).
    async fn document(&self, name: &str) -> Result<Option<(i64, String)>, StoreError> {
        let _ = name;
        Ok(None)
    }

    /// Replaces the document when its version is still `expected` (`None`: there is
    /// none yet); whether it did. A store that is not shared keeps no documents.
    async fn put_document(
        &self,
        name: &str,
        expected: Option<i64>,
        body: String,
    ) -> Result<bool, StoreError> {
        let _ = (name, expected, body);
        Ok(false)
    }

    /// Holds (route, delivery id) for one direct send against every other instance
    /// sharing the store: resolves once no other instance is sending it (the caller
    /// then looks whether it was delivered meanwhile). A store only this process
    /// writes has nobody to hold it against.
    async fn hold_send(&self, route: &str, delivery_id: &str) -> Result<Hold, StoreError> {
        let _ = (route, delivery_id);
        Ok(Hold::none())
    }

    /// Holds `key` against every other instance sharing the store for as long as the
    /// returned hold lives, when none holds it now (one try, never waiting; a hold
    /// whose instance died runs out within half a minute): a chat bot's poll. A store
    /// only this process writes grants it at once.
    async fn try_hold(&self, key: &str) -> Result<Option<Hold>, StoreError> {
        let _ = key;
        Ok(Some(Hold::none()))
    }
}

//! The session store's one interface, whichever database keeps it: SQLite's
//! `state.db` in the home ([`super::SqliteSessions`]) or herald-scale's PostgreSQL.

use super::{
    Imported, ImportedSession, NewMessage, NewSession, RewindRefused, RewindTarget, RunRecord,
    RunRow, SearchHit, SearchQuery, SessionRow, SessionSummary, SessionUsage, StoredMessage,
    StoredResponse, TitleRefused,
};
use crate::StoreError;
use async_trait::async_trait;

/// One session store. Writes resolve once committed; a detached write is committed
/// in order with the writes of this store made after it.
#[async_trait]
pub trait SessionBackend: Send + Sync {
    /// Creates a session with its (byte-stable) system prompt.
    async fn create_session(&self, session: NewSession) -> Result<(), StoreError>;
    /// Creates a session unless one with its id exists, without waiting.
    fn ensure_session_detached(&self, session: NewSession) -> Result<(), StoreError>;
    /// Appends one message and updates the counters; returns its row id.
    async fn append(&self, session_id: String, m: NewMessage) -> Result<i64, StoreError>;
    /// Appends one message without waiting for its row id.
    fn append_detached(&self, session_id: String, m: NewMessage) -> Result<(), StoreError>;
    /// A finished unattended run: its session unless it exists, then its messages.
    async fn record_run(&self, run: RunRecord) -> Result<Vec<i64>, StoreError>;
    /// Rewinds before a user turn (checks and write in one transaction).
    async fn rewind(
        &self,
        session_id: String,
        target: RewindTarget,
    ) -> Result<Result<Vec<i64>, RewindRefused>, StoreError>;
    /// Branches a session; the new title, or `None` without the parent.
    async fn branch(
        &self,
        parent: String,
        new_id: String,
        name: Option<String>,
    ) -> Result<Option<String>, StoreError>;
    /// A turn's API calls and tokens added to its session, with its run's state
    /// (owned by `owner`) when given.
    async fn finish_turn(
        &self,
        session_id: String,
        usage: (i64, i64, i64),
        run: Option<RunRow>,
        owner: String,
    ) -> Result<(), StoreError>;
    /// Keeps a response, forgetting the least recently used beyond `keep`.
    async fn save_response(&self, r: StoredResponse, keep: usize) -> Result<(), StoreError>;
    async fn touch_response(&self, id: String) -> Result<(), StoreError>;
    async fn delete_response(&self, id: String) -> Result<bool, StoreError>;
    /// Keeps a run's state (inserted or replaced), owned by `owner`.
    async fn save_run(&self, run: RunRow, owner: String) -> Result<(), StoreError>;
    /// [`SessionBackend::save_run`] without waiting: committed before the writes
    /// queued after it (with them, when they come together).
    fn save_run_detached(&self, run: RunRow, owner: String) -> Result<(), StoreError>;
    /// Unfinished runs whose owner is gone are marked `failed` with `why`.
    async fn fail_unfinished_runs(&self, why: String) -> Result<usize, StoreError>;
    /// Ends a session: `ended_at` now and `end_reason`; false without the session.
    async fn end_session(&self, id: String, reason: String) -> Result<bool, StoreError>;
    /// Sets a checked title.
    async fn set_title(
        &self,
        id: String,
        title: String,
    ) -> Result<Result<(), TitleRefused>, StoreError>;
    /// Keeps the session's model and its runtime JSON (`model_config`); false without
    /// the session.
    async fn set_model(
        &self,
        id: String,
        model: String,
        model_config: String,
    ) -> Result<bool, StoreError>;
    async fn delete_session(&self, id: String) -> Result<bool, StoreError>;
    /// Soft-deletes the last user message and what followed it; how many rows.
    async fn undo(&self, id: String) -> Result<usize, StoreError>;
    /// Replaces the live history by `summary` and the last `keep` rows (copied).
    async fn compact(
        &self,
        id: String,
        summary: NewMessage,
        keep: usize,
    ) -> Result<Vec<i64>, StoreError>;

    async fn session(&self, id: String) -> Result<Option<SessionRow>, StoreError>;
    /// The most recently started session of a source.
    async fn latest(&self, source: String) -> Result<Option<String>, StoreError>;
    /// Imports a session from another store (its own id, times and title) with its
    /// messages, in one write; a session whose id is there already is left as it is.
    async fn import_session(&self, session: ImportedSession) -> Result<Imported, StoreError>;
    /// The best-matching message of each session for `q`, best first (`session_search`);
    /// `Err` with why when the query cannot be read.
    async fn search(&self, q: SearchQuery) -> Result<Result<Vec<SearchHit>, String>, StoreError>;
    /// The most recently started session of a chat platform's session key.
    async fn keyed(&self, session_key: String) -> Result<Option<String>, StoreError>;
    /// The live messages of a session, in order.
    async fn history(&self, session_id: String) -> Result<Vec<StoredMessage>, StoreError>;
    async fn response(&self, id: String) -> Result<Option<StoredResponse>, StoreError>;
    async fn latest_response_of(&self, conversation: String) -> Result<Option<String>, StoreError>;
    async fn run(&self, id: String) -> Result<Option<RunRow>, StoreError>;
    /// The newest sessions first (subagents' left out).
    async fn list(&self, limit: usize) -> Result<Vec<SessionSummary>, StoreError>;
    async fn usage(&self, id: String) -> Result<Option<SessionUsage>, StoreError>;
    /// Where the store is, for messages.
    fn location(&self) -> String;

    /// Whether other instances write this store too (then a turn holds its session
    /// and reads its history afresh first).
    fn shared(&self) -> bool {
        false
    }

    /// Holds `session_id` for one turn against every other instance sharing the
    /// store: resolves once no other instance holds it, and lets go when the hold is
    /// dropped. A store only this process writes has nobody to hold it against.
    async fn hold_session(&self, session_id: String) -> Result<Hold, StoreError> {
        let _ = session_id;
        Ok(Hold::none())
    }

    /// Sends `control` to the instance that owns the unfinished run `run_id`.
    async fn relay_run_control(
        &self,
        run_id: String,
        control: RunControl,
    ) -> Result<Relayed, StoreError> {
        let _ = (run_id, control);
        Ok(Relayed::Nobody)
    }

    /// Follows the events of the unfinished run `run_id` another instance owns: each
    /// event as the owner serialised it, in order, the channel closing after the last
    /// (or when the relay lost some, which the caller makes up for from the status).
    async fn follow_run(&self, run_id: String) -> Result<Followed, StoreError> {
        let _ = run_id;
        Ok(Followed::Nobody)
    }

    /// Sends `events` (serialised run events) to the instance that follows them, in
    /// order, until the channel closes; the owner's half of [`SessionBackend::follow_run`].
    fn forward_run_events(&self, follower: Follower, events: RelayedEvents) {
        let _ = (follower, events);
    }

    /// Claims `key` (with its request's `fingerprint`) against the other instances
    /// sharing the store, for `window_ms`. A store only this process writes has
    /// nobody to share keys with: the caller's own memory is enough.
    async fn claim_key(
        &self,
        key: String,
        fingerprint: String,
        window_ms: i64,
    ) -> Result<KeyClaim, StoreError> {
        let _ = (key, fingerprint, window_ms);
        Ok(KeyClaim::Mine)
    }

    /// Keeps the answer of a key this instance claimed.
    async fn keep_answer(
        &self,
        key: String,
        fingerprint: String,
        answer: KeptAnswer,
    ) -> Result<(), StoreError> {
        let _ = (key, fingerprint, answer);
        Ok(())
    }

    /// Gives back a key this instance claimed and will not answer (its client went
    /// away and its run was interrupted): another request with it makes its own.
    async fn release_key(&self, key: String, fingerprint: String) -> Result<(), StoreError> {
        let _ = (key, fingerprint);
        Ok(())
    }

    /// Has `handler` hear the controls other instances relay to this one's runs
    /// (call from within the async runtime).
    fn on_run_control(&self, handler: ControlHandler) {
        let _ = handler;
    }
}

/// What one instance asks of a run another instance owns.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum RunControl {
    /// Interrupt it (`/stop`).
    Stop,
    /// Queue text for its next tool boundary (`/steer`).
    Steer { text: String },
    /// Answer its pending approval (`/approval`): `choice` as the API names it, one
    /// request by id or the oldest, or every pending one with `all`.
    Approve {
        request_id: Option<String>,
        choice: String,
        all: bool,
    },
    /// Send its events to `follower` (`/events`): the owner answers
    /// [`ControlReply::Following`] and forwards them with
    /// [`SessionBackend::forward_run_events`].
    Follow { follower: Follower },
}

/// Who follows a run's relayed events: the instance and its stream there.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Follower {
    pub instance: String,
    pub stream: String,
}

/// A run's events as relayed: each one serialised, in order.
pub type RelayedEvents = tokio::sync::mpsc::Receiver<String>;

/// What became of [`SessionBackend::follow_run`].
#[derive(Debug)]
pub enum Followed {
    /// The owner forwards the events here.
    Events(RelayedEvents),
    /// The owner refused, with the API's error code and message (the events were
    /// taken by another reader).
    Refused { code: String, message: String },
    /// The run is unfinished, but the instance that owns it is gone.
    OwnerGone,
    /// Nobody to follow: the store is not shared, or the run is unknown or finished.
    Nobody,
}

/// What the owning instance answered to a relayed [`RunControl`] that waits for it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum ControlReply {
    /// Done; how many requests it resolved (approvals).
    Done { resolved: usize },
    /// Its events are being forwarded (a [`RunControl::Follow`]).
    Following,
    /// Refused, with the API's error code and message.
    Refused { code: String, message: String },
}

/// What became of a relayed [`RunControl`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relayed {
    /// Sent to the owning instance, which is alive.
    Sent,
    /// Sent, and the owning instance answered.
    Answered(ControlReply),
    /// The run is unfinished, but the instance that owns it is gone.
    OwnerGone,
    /// Nobody to relay to: the store is not shared, or the run is unknown or finished
    /// (its status says which).
    Nobody,
}

/// An answer kept for an `Idempotency-Key` (api-server.md §5.1), as it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

/// Whose turn it is to answer an `Idempotency-Key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyClaim {
    /// This request makes the answer (and keeps it with [`SessionBackend::keep_answer`]).
    Mine,
    /// Another instance answered it within the window: the same answer again.
    Answered(KeptAnswer),
    /// Another instance is making the answer now: ask again shortly.
    Pending,
}

/// What hears the controls relayed to this instance's runs: the run id and the
/// control; its answer goes back to the asking instance when it waits for one.
pub type ControlHandler =
    std::sync::Arc<dyn Fn(String, RunControl) -> Option<ControlReply> + Send + Sync>;

/// A session held for one turn; dropping it lets go.
pub struct Hold {
    _release: Option<Box<dyn Send + Sync>>,
    /// Set when the hold ran out unrenewed (another instance may hold it now).
    lost: Option<tokio::sync::watch::Receiver<bool>>,
}

impl Hold {
    /// A hold that holds nothing.
    pub fn none() -> Hold {
        Hold {
            _release: None,
            lost: None,
        }
    }

    /// A hold that lets go when `release` is dropped.
    pub fn releasing(release: Box<dyn Send + Sync>) -> Hold {
        Hold {
            _release: Some(release),
            lost: None,
        }
    }

    /// A hold that lets go when `release` is dropped, and says through `lost` when
    /// it was lost.
    pub fn watched(
        release: Box<dyn Send + Sync>,
        lost: tokio::sync::watch::Receiver<bool>,
    ) -> Hold {
        Hold {
            _release: Some(release),
            lost: Some(lost),
        }
    }

    /// Resolves when the hold was lost (its renewal found another holder, or none);
    /// never for a hold that cannot be lost.
    pub async fn lost(&mut self) {
        if let Some(rx) = &mut self.lost
            && rx.wait_for(|lost| *lost).await.is_ok()
        {
            return;
        }
        std::future::pending::<()>().await
    }
}

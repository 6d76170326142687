//! The live conversations of one front door, at most `max_live_sessions` of them:
//! opened, resumed and branched only here. At the cap the least recently used idle one
//! is closed (those whose client is gone first); it stays stored and its door reopens
//! it under the same id on its client's next call.

use crate::commands::Door;
use crate::conversation::{Conversation, finalize_later, finalize_session, lock};
use crate::host::{Host, Session};
use crate::{SessionError, SessionOptions};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A conversation live at one front door, with that door's own wire state.
pub struct Live<W> {
    /// The id the door knows it by.
    pub id: String,
    pub conversation: Conversation,
    pub wire: W,
    /// When the door last reached it, in [`next_use`]'s order (for closing the least
    /// recently used at the cap).
    used: AtomicU64,
}

impl<W> Live<W> {
    fn touch(&self) {
        self.used.store(next_use(), Ordering::Relaxed);
    }

    /// Whether it may be closed to make room: no turn runs and none waits.
    fn idle(&self) -> bool {
        self.conversation.idle()
    }
}

/// A number larger than every one given before: the order in which conversations were
/// last used.
fn next_use() -> u64 {
    static USES: AtomicU64 = AtomicU64::new(0);
    USES.fetch_add(1, Ordering::Relaxed)
}

/// Every conversation at the cap is running a turn.
#[derive(Debug, thiserror::Error)]
#[error(
    "too many live sessions (max {0}), every one of them running a turn; try again when one ends"
)]
pub struct CapReached(pub usize);

/// The id a door knows a live conversation by.
#[derive(Debug, Clone)]
pub enum LiveId {
    /// A fresh 8-hex id (the JSON-RPC gateway's).
    Short,
    /// The stored session's own id (ACP's).
    Stored,
    /// The door's own key (a chat platform's session key).
    Given(String),
}

impl LiveId {
    fn of(self, session: &Session) -> Option<String> {
        match self {
            LiveId::Short => None,
            LiveId::Stored => Some(session.id().to_owned()),
            LiveId::Given(id) => Some(id),
        }
    }
}

/// Why no conversation was made live.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error(transparent)]
    Cap(#[from] CapReached),
    #[error(transparent)]
    Session(#[from] SessionError),
}

/// What a front door's wire tells the cap, and keeps of a conversation closed to make
/// room so that the door can reopen it on its client's next call.
pub trait DoorWire: Send + Sync + 'static {
    /// The door: which slash commands its conversations answer.
    const DOOR: Door;
    /// What the door needs to reopen the conversation for the same client.
    type Memo: Clone + Send + Sync + 'static;
    /// Whether the client the conversation answers to is still connected (those whose
    /// client is gone are closed first).
    fn client_present(&self) -> bool {
        true
    }
    /// Whether the door is working with the conversation although no turn runs (it
    /// is not closed to make room then).
    fn in_use(&self) -> bool {
        false
    }
    fn memo(&self) -> Self::Memo;
}

impl DoorWire for () {
    const DOOR: Door = Door::Chat;
    type Memo = ();
    fn memo(&self) {}
}

/// A conversation closed to make room: its stored session and the door's memo (its
/// model is kept with the stored session and restored when it is resumed).
#[derive(Debug, Clone)]
pub struct Closed<M> {
    pub stored: String,
    pub memo: M,
}

/// The conversations closed at the cap, newest last; at most [`MAX_CLOSED`] kept.
struct ClosedSet<M> {
    by_id: std::collections::HashMap<String, Closed<M>>,
    order: VecDeque<String>,
}

/// How many closed conversations are remembered for reopening.
const MAX_CLOSED: usize = 4096;

impl<M> ClosedSet<M> {
    fn insert(&mut self, id: String, closed: Closed<M>) {
        if self.by_id.insert(id.clone(), closed).is_none() {
            self.order.push_back(id);
        }
        while self.order.len() > MAX_CLOSED {
            if let Some(oldest) = self.order.pop_front() {
                self.by_id.remove(&oldest);
            }
        }
    }

    fn remove(&mut self, id: &str) -> Option<Closed<M>> {
        let closed = self.by_id.remove(id)?;
        self.order.retain(|k| k != id);
        Some(closed)
    }
}

/// The live conversations of one front door, at most `max_live_sessions` of them. At
/// the cap the least recently used idle one is closed (those whose client is gone
/// first); it stays stored and its door can reopen it under the same id.
pub struct Conversations<W: DoorWire> {
    host: Arc<Host>,
    cap: usize,
    live: Mutex<std::collections::HashMap<String, Arc<Live<W>>>>,
    closed: Mutex<ClosedSet<W::Memo>>,
}

impl<W: DoorWire> Conversations<W> {
    /// The cap is the host's `max_live_sessions` (16 unless configured).
    pub fn new(host: Arc<Host>) -> Conversations<W> {
        let cap = host.runtime().max_live_sessions;
        Conversations::with_cap(host, cap)
    }

    /// A door's own cap (a chat platform's conversations do not count against the
    /// cap of the RPC and ACP clients').
    pub fn with_cap(host: Arc<Host>, cap: usize) -> Conversations<W> {
        Conversations {
            host,
            cap,
            live: Mutex::new(std::collections::HashMap::new()),
            closed: Mutex::new(ClosedSet {
                by_id: std::collections::HashMap::new(),
                order: VecDeque::new(),
            }),
        }
    }

    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// Refuses a new conversation only when every live one at the cap runs a turn.
    pub fn room(&self) -> Result<(), CapReached> {
        let live = lock(&self.live);
        match live.len() < self.cap || live.values().any(|l| l.idle() && !l.wire.in_use()) {
            true => Ok(()),
            false => Err(CapReached(self.cap)),
        }
    }

    /// Closes the least recently used idle conversation (one whose client is gone
    /// first), remembering it for its door; false when every one runs a turn.
    fn make_room(&self, live: &mut std::collections::HashMap<String, Arc<Live<W>>>) -> bool {
        let victim = live
            .values()
            .filter(|l| l.idle() && !l.wire.in_use())
            .min_by_key(|l| (l.wire.client_present(), l.used.load(Ordering::Relaxed)))
            .map(|l| l.id.clone());
        let Some(entry) = victim.and_then(|id| live.remove(&id)) else {
            return false;
        };
        entry.conversation.close();
        let closed = Closed {
            stored: entry.conversation.session().id().to_owned(),
            memo: entry.wire.memo(),
        };
        tracing::debug!(id = %entry.id, stored = %closed.stored, "closed at the live-session cap; reopened on its next call");
        lock(&self.closed).insert(entry.id.clone(), closed);
        true
    }

    /// A conversation closed to make room, as its door remembers it.
    pub fn closed(&self, id: &str) -> Option<Closed<W::Memo>> {
        lock(&self.closed).by_id.get(id).cloned()
    }

    /// Forgets the closed conversations `forget` picks (their client closed them).
    pub fn forget_closed(&self, forget: impl Fn(&W::Memo) -> bool) {
        let mut closed = lock(&self.closed);
        let gone: Vec<String> = closed
            .by_id
            .iter()
            .filter(|(_, c)| forget(&c.memo))
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            closed.remove(&id);
        }
    }

    /// Opens a new session live, refused before anything is stored when every live
    /// conversation at the cap runs a turn.
    pub async fn open(
        &self,
        id: LiveId,
        options: SessionOptions,
        wire: W,
    ) -> Result<Arc<Live<W>>, LiveError> {
        self.room()?;
        let session = self.host.open_session(options).await?;
        Ok(self.add(id.of(&session), session, wire)?)
    }

    /// Makes the stored session `stored` live again, with the model it last had.
    pub async fn resume(
        &self,
        id: LiveId,
        stored: &str,
        options: SessionOptions,
        wire: W,
    ) -> Result<Arc<Live<W>>, LiveError> {
        self.room()?;
        let session = self.host.resume_session(stored, options).await?;
        Ok(self.add(id.of(&session), session, wire)?)
    }

    /// Branches the stored session `parent` (named `name`) into a new live one; its
    /// title too. A branch of a live conversation keeps its model.
    pub async fn branch(
        &self,
        id: LiveId,
        parent: &str,
        name: Option<String>,
        options: SessionOptions,
        wire: W,
    ) -> Result<(Arc<Live<W>>, String), LiveError> {
        self.room()?;
        let model = self
            .holding(parent)
            .and_then(|l| l.conversation.session().endpoint());
        let (session, title) = self.host.branch_session(parent, name, options).await?;
        if let Some(endpoint) = model {
            session.set_endpoint(endpoint);
        }
        Ok((self.add(id.of(&session), session, wire)?, title))
    }

    /// Reopens a conversation closed to make room, under its id, with `wire` (its model
    /// comes back with its stored session); `Ok(None)` when `id` was not closed here.
    pub async fn reopen(
        &self,
        id: &str,
        options: SessionOptions,
        wire: W,
    ) -> Result<Option<Arc<Live<W>>>, SessionError> {
        let Some(closed) = lock(&self.closed).remove(id) else {
            return Ok(None);
        };
        let session = match self.host.resume_session(&closed.stored, options).await {
            Ok(s) => s,
            // Deleted meanwhile: it is gone for its client too.
            Err(SessionError::NotFound(_)) => return Ok(None),
            Err(e) => {
                lock(&self.closed).insert(id.to_owned(), closed);
                return Err(e);
            }
        };
        let live = self
            .add(Some(id.to_owned()), session, wire)
            .map_err(|e| SessionError::TooManyRuns(e.0))?;
        Ok(Some(live))
    }

    /// Makes `session` live under `id` (a fresh 8-hex id when `None`); at the cap the
    /// least recently used idle conversation is closed first.
    pub(crate) fn add(
        &self,
        id: Option<String>,
        session: Session,
        wire: W,
    ) -> Result<Arc<Live<W>>, CapReached> {
        let mut live = lock(&self.live);
        if live.len() >= self.cap && !self.make_room(&mut live) {
            return Err(CapReached(self.cap));
        }
        let id = id.unwrap_or_else(|| {
            loop {
                let id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
                if !live.contains_key(&id) {
                    break id;
                }
            }
        });
        let entry = Arc::new(Live {
            id: id.clone(),
            conversation: Conversation::new(self.host.clone(), session, W::DOOR),
            wire,
            used: AtomicU64::new(next_use()),
        });
        lock(&self.closed).remove(&id);
        live.insert(id, entry.clone());
        Ok(entry)
    }

    /// The live conversation `id` (its use noted for the cap).
    pub fn get(&self, id: &str) -> Option<Arc<Live<W>>> {
        let found = lock(&self.live).get(id).cloned();
        if let Some(l) = &found {
            l.touch();
        }
        found
    }

    /// Every live conversation, oldest first.
    pub fn all(&self) -> Vec<Arc<Live<W>>> {
        let mut all: Vec<Arc<Live<W>>> = lock(&self.live).values().cloned().collect();
        all.sort_by(|a, b| {
            a.conversation
                .started_at
                .total_cmp(&b.conversation.started_at)
        });
        all
    }

    /// The live conversation holding the stored session `stored`.
    pub fn holding(&self, stored: &str) -> Option<Arc<Live<W>>> {
        lock(&self.live)
            .values()
            .find(|l| l.conversation.session().id() == stored)
            .cloned()
    }

    /// Ends a live conversation (its turn interrupted, its session finalized for the
    /// plugins); false when it was not live.
    pub fn close(&self, id: &str) -> bool {
        lock(&self.closed).remove(id);
        let removed = lock(&self.live).remove(id);
        if let Some(live) = &removed {
            live.conversation.close();
            let session = live.conversation.session().id().to_owned();
            finalize_later(&self.host, session, "close");
        }
        removed.is_some()
    }

    /// At exit: every live conversation's session finalized for the plugins.
    pub async fn finalize_all(&self) {
        let sessions: Vec<String> = self
            .all()
            .iter()
            .map(|l| l.conversation.session().id().to_owned())
            .collect();
        for session in sessions {
            finalize_session(&self.host, &session, "shutdown").await;
        }
    }
}

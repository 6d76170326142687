//! A live conversation: one session a front door holds open, with its current run, the
//! prompts queued behind it, the images waiting for the next prompt, the one `/model`
//! switch and the one slash-command table. Every interactive door (`herald chat`, the
//! JSON-RPC gateway, ACP) holds these, not sessions and runs of its own.

use crate::host::{Host, Session};
use crate::runs::{RunError, RunHandle};
use crate::sessions::SessionError;
use crate::{SelectError, UserInput, now_secs};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A poisoned lock of a conversation still holds usable state (plain values with no
/// invariant across them): the guard is taken back rather than the state emptied.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a steer did.
#[derive(Debug, PartialEq, Eq)]
pub enum Steered {
    /// The running turn takes the text at its next tool result.
    Queued,
    /// Nothing runs that could take it.
    Rejected,
}

/// Why a model switch was refused.
#[derive(Debug, thiserror::Error)]
pub enum SwitchRefused {
    #[error("session busy")]
    Busy,
    #[error(transparent)]
    Select(#[from] SelectError),
}

/// One live session and what runs in it.
pub struct Conversation {
    host: Arc<Host>,
    session: Mutex<Session>,
    run: Mutex<Option<RunHandle>>,
    queued: Mutex<VecDeque<UserInput>>,
    attached: Mutex<Vec<String>>,
    /// When it was made live (seconds since the epoch).
    pub started_at: f64,
}

impl Conversation {
    pub fn new(host: Arc<Host>, session: Session) -> Conversation {
        Conversation {
            host,
            session: Mutex::new(session),
            run: Mutex::new(None),
            queued: Mutex::new(VecDeque::new()),
            attached: Mutex::new(Vec::new()),
            started_at: now_secs(),
        }
    }

    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// The session (a handle onto it: cheap to clone).
    pub fn session(&self) -> Session {
        lock(&self.session).clone()
    }

    /// Holds `session` from now on (`/new`, `/resume`); the queue is dropped, and the
    /// session it held is finalized for the plugins.
    pub fn set_session(&self, session: Session) {
        let before = std::mem::replace(&mut *lock(&self.session), session);
        lock(&self.queued).clear();
        if before.id() != self.session().id() {
            finalize_later(&self.host, before.id().to_owned(), "new_session");
        }
    }

    /// A turn runs now.
    pub fn busy(&self) -> bool {
        self.session().running().is_some()
    }

    /// The run in progress (or the last one).
    pub fn run(&self) -> Option<RunHandle> {
        lock(&self.run).clone()
    }

    /// Starts a turn on `input`, with the images attached since the last turn as image
    /// parts (their files read off the async workers).
    pub async fn start(&self, input: impl Into<UserInput>) -> Result<RunHandle, SessionError> {
        let input = self.with_attachments(input.into()).await;
        let run = self.host.start_run(&self.session(), input)?;
        *lock(&self.run) = Some(run.clone());
        Ok(run)
    }

    /// How many prompts wait.
    pub fn queued(&self) -> usize {
        lock(&self.queued).len()
    }

    /// Queues `input` behind the running turn; how many wait now.
    pub fn queue(&self, input: impl Into<UserInput>) -> usize {
        let mut q = lock(&self.queued);
        q.push_back(input.into());
        q.len()
    }

    /// The next queued prompt, taken off the queue.
    pub fn next_queued(&self) -> Option<UserInput> {
        lock(&self.queued).pop_front()
    }

    /// Interrupts the running turn, if any.
    pub fn interrupt(&self) {
        if let Some(run) = self.run() {
            run.interrupt();
        }
    }

    /// Gives the running turn `text` to take at its next tool result.
    pub fn steer(&self, text: &str) -> Result<Steered, RunError> {
        let run = match self.run() {
            Some(run) if self.busy() => run,
            _ => return Ok(Steered::Rejected),
        };
        match run.steer(text) {
            Ok(()) => Ok(Steered::Queued),
            Err(RunError::NotAcceptingSteer(_)) => Ok(Steered::Rejected),
            Err(e) => Err(e),
        }
    }

    /// The model of the session's later turns (`""` when none resolves).
    pub fn model(&self) -> String {
        self.session()
            .endpoint()
            .map(|e| e.model)
            .unwrap_or_default()
    }

    /// Switches the session's model for its later turns; refused while a turn runs.
    pub fn switch_model(&self, spec: &str) -> Result<String, SwitchRefused> {
        if self.busy() {
            return Err(SwitchRefused::Busy);
        }
        Ok(self.host.switch_model(&self.session(), spec)?)
    }

    /// How many images wait for the next prompt.
    pub fn attached(&self) -> usize {
        lock(&self.attached).len()
    }

    /// Adds an image for the next prompt; how many wait now.
    pub fn attach(&self, path: String) -> usize {
        let mut a = lock(&self.attached);
        a.push(path);
        a.len()
    }

    /// `input` with the attached images (they are used up).
    async fn with_attachments(&self, input: UserInput) -> UserInput {
        let paths = std::mem::take(&mut *lock(&self.attached));
        if paths.is_empty() {
            return input;
        }
        let fallback = input.clone();
        let attach = move || crate::images::attach_files(input, &paths);
        tokio::task::spawn_blocking(attach)
            .await
            .unwrap_or(fallback)
    }
}

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
        !self.conversation.busy() && lock(&self.conversation.queued).is_empty()
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

/// What a front door's wire tells the cap, and keeps of a conversation closed to make
/// room so that the door can reopen it on its client's next call.
pub trait DoorWire: Send + Sync + 'static {
    /// What the door needs to reopen the conversation for the same client.
    type Memo: Clone + Send + Sync + 'static;
    /// Whether the client the conversation answers to is still connected (those whose
    /// client is gone are closed first).
    fn client_present(&self) -> bool {
        true
    }
    fn memo(&self) -> Self::Memo;
}

impl DoorWire for () {
    type Memo = ();
    fn memo(&self) {}
}

/// A conversation closed to make room: its stored session, its model, the door's memo.
#[derive(Debug, Clone)]
pub struct Closed<M> {
    pub stored: String,
    pub model: String,
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
        match live.len() < self.cap || live.values().any(|l| l.idle()) {
            true => Ok(()),
            false => Err(CapReached(self.cap)),
        }
    }

    /// Closes the least recently used idle conversation (one whose client is gone
    /// first), remembering it for its door; false when every one runs a turn.
    fn make_room(&self, live: &mut std::collections::HashMap<String, Arc<Live<W>>>) -> bool {
        let victim = live
            .values()
            .filter(|l| l.idle())
            .min_by_key(|l| (l.wire.client_present(), l.used.load(Ordering::Relaxed)))
            .map(|l| l.id.clone());
        let Some(entry) = victim.and_then(|id| live.remove(&id)) else {
            return false;
        };
        let closed = Closed {
            stored: entry.conversation.session().id().to_owned(),
            model: entry.conversation.model(),
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

    /// Reopens a conversation closed to make room, under its id, with `wire` and the
    /// model it had; `Ok(None)` when `id` was not closed here.
    pub async fn reopen(
        &self,
        id: &str,
        options: crate::SessionOptions,
        wire: W,
    ) -> Result<Option<Arc<Live<W>>>, crate::SessionError> {
        let Some(closed) = lock(&self.closed).remove(id) else {
            return Ok(None);
        };
        let session = match self.host.resume_session(&closed.stored, options).await {
            Ok(s) => s,
            // Deleted meanwhile: it is gone for its client too.
            Err(crate::SessionError::NotFound(_)) => return Ok(None),
            Err(e) => {
                lock(&self.closed).insert(id.to_owned(), closed);
                return Err(e);
            }
        };
        let live = self
            .add(Some(id.to_owned()), session, wire)
            .map_err(|e| crate::SessionError::TooManyRuns(e.0))?;
        if live.conversation.model() != closed.model {
            let _ = live
                .conversation
                .submit(crate::Op::SetModel(closed.model))
                .await;
        }
        Ok(Some(live))
    }

    /// Makes `session` live under `id` (a fresh 8-hex id when `None`); at the cap the
    /// least recently used idle conversation is closed first.
    pub fn add(
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
            conversation: Conversation::new(self.host.clone(), session),
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
            live.conversation.interrupt();
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

/// Tells the plugins a session is over for good (`on_session_finalize`, with Hermes's
/// arguments: the session's id, the platform and why).
pub async fn finalize_session(host: &Host, session_id: &str, reason: &str) {
    let rt = host.runtime();
    let plugins = rt.current_plugins();
    if !plugins.has_observers() {
        return;
    }
    let payload = serde_json::json!({
        "session_id": session_id, "platform": rt.platform.name(), "reason": reason,
    });
    plugins
        .notify(herald_agent::Notice::SessionFinalize, &payload)
        .await;
}

/// [`finalize_session`] in the background (from code that cannot wait).
fn finalize_later(host: &Arc<Host>, session_id: String, reason: &'static str) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let host = host.clone();
    runtime.spawn(async move { finalize_session(&host, &session_id, reason).await });
}

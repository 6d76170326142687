//! A live conversation: one session a front door holds open, with its current turn, the
//! prompts queued behind it, the images waiting for the next prompt and the one event
//! stream ([`Conversation::listen`]) that spans its turns. Every interactive door
//! (`herald chat`, the JSON-RPC gateway, ACP, the chat platforms) holds these and
//! asks everything of them as an [`crate::Op`]; the turn lifecycle (queue order, busy
//! input, what follows an interrupt) lives here and in [`crate::turns`], not in a door.

use crate::commands::Door;
use crate::host::{Host, Session};
use crate::runs::{RunError, RunHandle};
use crate::sessions::SessionError;
use crate::turns::{ConversationEvent, Listener, Turns};
use crate::{SelectError, UserInput, now_secs};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

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

/// How many events wait for a door that reads them late, at most.
const EVENT_ROOM: usize = 256;
/// How many bytes of streamed text wait for a door that reads them late, at most: the
/// turn then waits, and through the run's flow so does the provider.
const STREAM_BYTES: usize = herald_llm::flow::FLOW_LIMIT as usize;

/// One live session and what runs in it.
pub struct Conversation {
    pub(crate) inner: Arc<Inner>,
    /// The door it is live at: which commands it answers.
    door: Door,
    events: tokio::sync::Mutex<mpsc::Receiver<Carried>>,
    /// When it was made live (seconds since the epoch).
    pub started_at: f64,
}

/// What the conversation and the task that carries its turns share.
pub(crate) struct Inner {
    pub(crate) host: Arc<Host>,
    session: Mutex<Session>,
    run: Mutex<Option<RunHandle>>,
    pub(crate) turns: Mutex<Turns>,
    attached: Mutex<Vec<String>>,
    /// The prompt of the last turn that was interrupted, until another turn starts.
    interrupted: Mutex<Option<String>>,
    /// Where the stream's events go; taken when the conversation closes.
    sender: Mutex<Option<Sink>>,
}

/// An event on its way to the door, holding its share of the stream's byte budget.
pub(crate) type Carried = (ConversationEvent, Option<OwnedSemaphorePermit>);

/// The sending side of a conversation's stream.
#[derive(Clone)]
pub(crate) struct Sink {
    tx: mpsc::Sender<Carried>,
    room: Arc<Semaphore>,
}

impl Sink {
    /// Puts `event` on the stream once there is room for its text; a reader that went
    /// away takes nothing (the turn goes on to its end).
    pub(crate) async fn send(&self, event: ConversationEvent) {
        let weight = match &event {
            ConversationEvent::Run(e) => crate::runs::streamed_bytes(&e.kind) as usize,
            _ => 0,
        };
        let wanted = weight.clamp(1, STREAM_BYTES) as u32;
        let Ok(permit) = self.room.clone().acquire_many_owned(wanted).await else {
            return;
        };
        let _ = self.tx.send((event, Some(permit))).await;
    }
}

impl Conversation {
    pub(crate) fn new(host: Arc<Host>, session: Session, door: Door) -> Conversation {
        let (tx, rx) = mpsc::channel(EVENT_ROOM);
        let room = Arc::new(Semaphore::new(STREAM_BYTES));
        let inner = Inner {
            host,
            session: Mutex::new(session),
            run: Mutex::new(None),
            turns: Mutex::new(Turns::default()),
            attached: Mutex::new(Vec::new()),
            interrupted: Mutex::new(None),
            sender: Mutex::new(Some(Sink { tx, room })),
        };
        Conversation {
            inner: Arc::new(inner),
            door,
            events: tokio::sync::Mutex::new(rx),
            started_at: now_secs(),
        }
    }

    /// A conversation of `session` outside any [`crate::Conversations`] set (`herald
    /// chat`'s one conversation).
    pub fn single(host: Arc<Host>, session: Session) -> Conversation {
        Conversation::new(host, session, Door::Chat)
    }

    /// The door it is live at.
    pub fn door(&self) -> Door {
        self.door
    }

    pub fn host(&self) -> &Arc<Host> {
        &self.inner.host
    }

    /// The session (a handle onto it: cheap to clone).
    pub fn session(&self) -> Session {
        self.inner.session()
    }

    /// A turn runs now, or queued prompts are being started.
    pub fn busy(&self) -> bool {
        lock(&self.inner.turns).active
    }

    /// The run in progress (or the last one).
    pub fn run(&self) -> Option<RunHandle> {
        self.inner.run()
    }

    /// How many prompts wait.
    pub fn queued(&self) -> usize {
        lock(&self.inner.turns).queue.len()
    }

    /// How many images wait for the next prompt.
    pub fn attached(&self) -> usize {
        lock(&self.inner.attached).len()
    }

    /// The model of the session's later turns (`""` when none resolves).
    pub fn model(&self) -> String {
        self.session()
            .endpoint()
            .map(|e| e.model)
            .unwrap_or_default()
    }

    /// The conversation's event stream, for one reader at a time: a second caller
    /// waits until the first lets go.
    pub async fn listen(&self) -> Listener<'_> {
        Listener::new(self.events.lock().await)
    }

    /// Whether it may be closed to make room: no turn runs and none waits.
    pub(crate) fn idle(&self) -> bool {
        let turns = lock(&self.inner.turns);
        !turns.active && turns.queue.is_empty()
    }

    /// Ends the event stream once the turn in progress (if any) has ended; no queued
    /// prompt starts from now on.
    pub(crate) fn close(&self) {
        lock(&self.inner.sender).take();
        lock(&self.inner.turns).queue.clear();
        self.inner.interrupt();
    }

    /// Holds `session` from now on (`/new`, `/resume`, `/branch`); the queue is
    /// dropped, and the session it held is finalized for the plugins.
    pub(crate) fn set_session(&self, session: Session) {
        let id = session.id().to_owned();
        let before = std::mem::replace(&mut *lock(&self.inner.session), session);
        lock(&self.inner.turns).queue.clear();
        if before.id() != id {
            finalize_later(self.host(), before.id().to_owned(), "new_session");
        }
    }

    /// Gives the running turn `text` to take at its next tool result.
    pub(crate) fn steer(&self, text: &str) -> Result<Steered, RunError> {
        let run = match self.run() {
            Some(run) if self.session().running().is_some() => run,
            _ => return Ok(Steered::Rejected),
        };
        match run.steer(text) {
            Ok(()) => Ok(Steered::Queued),
            Err(RunError::NotAcceptingSteer(_)) => Ok(Steered::Rejected),
            Err(e) => Err(e),
        }
    }

    /// Switches the session's model for its later turns; refused while a turn runs.
    pub(crate) async fn switch_model(&self, spec: &str) -> Result<String, SwitchRefused> {
        if self.busy() {
            return Err(SwitchRefused::Busy);
        }
        let before = self.session().endpoint();
        let model = self.host().switch_model(&self.session(), spec).await?;
        self.carry_settings(before.as_ref());
        Ok(model)
    }

    /// Adds an image for the next prompt; how many wait now.
    pub(crate) fn attach(&self, path: String) -> usize {
        let mut a = lock(&self.inner.attached);
        a.push(path);
        a.len()
    }
}

impl Inner {
    pub(crate) fn session(&self) -> Session {
        lock(&self.session).clone()
    }

    pub(crate) fn run(&self) -> Option<RunHandle> {
        lock(&self.run).clone()
    }

    /// Interrupts the running turn, if any.
    pub(crate) fn interrupt(&self) {
        if let Some(run) = self.run() {
            run.interrupt();
        }
    }

    pub(crate) fn note_interrupted(&self, text: String) {
        *lock(&self.interrupted) = Some(text);
    }

    /// `guidance` sent with nothing running (an idle `/steer`): with the prompt of the
    /// turn interrupted last, when one was, as Hermes's ACP adapter sends it.
    pub(crate) fn after_interrupt(&self, guidance: String) -> String {
        match lock(&self.interrupted).take() {
            Some(before) => {
                format!("{before}\n\nUser correction/guidance after interrupt: {guidance}")
            }
            None => guidance,
        }
    }

    /// The stream's sender, while the conversation is open.
    pub(crate) fn sender(&self) -> Option<Sink> {
        lock(&self.sender).clone()
    }

    /// Starts a turn on `input`, with the images attached since the last turn as image
    /// parts (their files read off the async workers).
    pub(crate) async fn start_run(&self, input: UserInput) -> Result<RunHandle, SessionError> {
        let input = self.with_attachments(input).await;
        let run = self.host.start_run(&self.session(), input)?;
        lock(&self.interrupted).take();
        *lock(&self.run) = Some(run.clone());
        Ok(run)
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
pub(crate) fn finalize_later(host: &Arc<Host>, session_id: String, reason: &'static str) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let host = host.clone();
    runtime.spawn(async move { finalize_session(&host, &session_id, reason).await });
}

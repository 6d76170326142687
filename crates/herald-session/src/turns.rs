//! The turn lifecycle of a live conversation, the same at every door: a turn starts
//! now or waits in the queue; a prompt sent while one runs follows the busy-input
//! policy; when a turn ends the oldest queued prompt starts; and everything that
//! happens reaches the door as one ordered stream of [`ConversationEvent`]s.
//!
//! What follows an interrupt: after [`crate::Op::Interrupt`] (and a busy prompt in
//! `interrupt` mode) the queue goes on; after [`crate::Op::Cancel`] (ACP's
//! `session/cancel`) the queued prompts wait, and the next prompt runs after them, in
//! their order; after [`crate::Op::Stop`] (`/stop`) the queue is dropped.

use crate::conversation::{Carried, Conversation, Inner, Sink, lock};
use crate::runs::{RunEvent, RunEventKind, RunHandle, RunState};
use crate::sessions::SessionError;
use crate::{Steered, UserInput};
use herald_config::default_config::BusyInputMode;
use std::collections::VecDeque;
use std::sync::Arc;
use tokio::sync::mpsc;

/// One thing that happened in a conversation, in order.
#[derive(Debug)]
pub enum ConversationEvent {
    /// A turn started on `text` (`queued`: taken off the queue, not asked for just
    /// now).
    TurnStarted {
        run: RunHandle,
        text: String,
        queued: bool,
    },
    /// One event of the running turn; a turn's last is [`RunEventKind::Finished`].
    Run(Box<RunEvent>),
    /// A queued prompt could not start: what the client is told. The prompts behind it
    /// wait for the next one.
    TurnFailed(String),
    /// Nothing runs: the queue is empty, or held after a cancel.
    Idle,
}

/// The one reader of a conversation's stream.
pub struct Listener<'a> {
    rx: tokio::sync::MutexGuard<'a, mpsc::Receiver<Carried>>,
}

impl<'a> Listener<'a> {
    pub(crate) fn new(rx: tokio::sync::MutexGuard<'a, mpsc::Receiver<Carried>>) -> Listener<'a> {
        Listener { rx }
    }

    /// The next event; `None` once the conversation is closed and its last turn over.
    /// Its text leaves the stream's byte budget as it is taken.
    pub async fn next_event(&mut self) -> Option<ConversationEvent> {
        self.rx.recv().await.map(|(event, _room)| event)
    }
}

/// Whether a turn runs, and what waits behind it.
#[derive(Default)]
pub(crate) struct Turns {
    /// A turn runs, or the next queued one is being started.
    pub(crate) active: bool,
    pub(crate) queue: VecDeque<UserInput>,
    /// Set by a cancel: the queue waits for the next prompt.
    held: bool,
}

/// How many prompts wait behind a turn at most: a client that sends faster than turns
/// run is refused (busy) rather than held in memory without end.
pub const MAX_QUEUED: usize = 64;

/// What a prompt led to.
pub(crate) enum Placed {
    Started(RunHandle),
    Queued(usize),
    Steered,
}

/// What the queue does once the running turn has ended.
#[derive(Clone, Copy)]
pub(crate) enum AfterTurn {
    GoOn,
    Hold,
    Drop,
}

impl Conversation {
    /// A turn on `input` now; refused as busy while one runs.
    pub(crate) async fn prompt_now(&self, input: UserInput) -> Result<RunHandle, SessionError> {
        {
            let mut turns = lock(&self.inner.turns);
            if turns.active {
                return Err(SessionError::Busy(self.session().id().to_owned()));
            }
            turns.active = true;
            turns.held = false;
        }
        start(&self.inner, input, false).await
    }

    /// `input` after the running turn and those queued before it; at once when
    /// nothing runs (after the queue a cancel held, which runs first).
    pub(crate) async fn enqueue(&self, input: UserInput) -> Result<Placed, SessionError> {
        let first = {
            let mut turns = lock(&self.inner.turns);
            if turns.queue.len() >= MAX_QUEUED {
                return Err(SessionError::QueueFull(MAX_QUEUED));
            }
            if turns.active {
                turns.queue.push_back(input);
                return Ok(Placed::Queued(turns.queue.len()));
            }
            turns.active = true;
            turns.held = false;
            turns.queue.push_back(input);
            turns.queue.pop_front()
        };
        let Some(first) = first else {
            return Err(SessionError::Busy(self.session().id().to_owned()));
        };
        start(&self.inner, first, false).await.map(Placed::Started)
    }

    /// A prompt as its client sent it: a turn now when none runs, else as the
    /// busy-input policy says (`interrupt`: queued and the turn interrupted; `queue`;
    /// `steer`: into the running turn, queued when it cannot take it).
    pub(crate) async fn submit_prompt(&self, input: UserInput) -> Result<Placed, SessionError> {
        let mode = self.host().runtime().busy_input_mode();
        if mode == BusyInputMode::Steer
            && self.busy()
            && let Ok(Steered::Queued) = self.steer(&input.text)
        {
            return Ok(Placed::Steered);
        }
        let placed = self.enqueue(input).await?;
        if matches!(placed, Placed::Queued(_)) && mode == BusyInputMode::Interrupt {
            self.interrupt_then(AfterTurn::GoOn);
        }
        Ok(placed)
    }

    /// Stops the running turn; `after` says what the queue does then.
    pub(crate) fn interrupt_then(&self, after: AfterTurn) {
        {
            let mut turns = lock(&self.inner.turns);
            match after {
                AfterTurn::GoOn => turns.held = false,
                AfterTurn::Hold => turns.held = true,
                AfterTurn::Drop => turns.queue.clear(),
            }
        }
        self.inner.interrupt();
    }
}

/// Starts a turn on `input` (the turn is marked active by the caller) and the task that
/// carries its events, and the queued turns after it, to the stream.
async fn start(
    inner: &Arc<Inner>,
    input: UserInput,
    queued: bool,
) -> Result<RunHandle, SessionError> {
    let text = input.text.clone();
    let run = match inner.start_run(input).await {
        Ok(run) => run,
        Err(e) => {
            let held = lock(&inner.turns).queue.len();
            lock(&inner.turns).active = false;
            if held > 0 {
                tracing::debug!(held, "a turn could not start; the queue waits");
            }
            return Err(e);
        }
    };
    tokio::spawn(carry(
        inner.clone(),
        Turn {
            run: run.clone(),
            text,
            queued,
        },
    ));
    Ok(run)
}

/// A turn as it started.
struct Turn {
    run: RunHandle,
    text: String,
    queued: bool,
}

/// Carries one turn's events to the stream, then starts the oldest queued prompt (and
/// carries that one), until the queue is empty or held.
async fn carry(inner: Arc<Inner>, mut turn: Turn) {
    loop {
        let sender = inner.sender();
        let started = ConversationEvent::TurnStarted {
            run: turn.run.clone(),
            text: turn.text.clone(),
            queued: turn.queued,
        };
        send(&sender, started).await;
        let Some(next) = forward(&sender, &inner, turn).await else {
            send(&sender, ConversationEvent::Idle).await;
            return;
        };
        let text = next.text.clone();
        match inner.start_run(next).await {
            Ok(run) => {
                turn = Turn {
                    run,
                    text,
                    queued: true,
                }
            }
            Err(e) => {
                {
                    let mut turns = lock(&inner.turns);
                    turns.active = false;
                    turns.held = true;
                }
                send(
                    &sender,
                    ConversationEvent::TurnFailed(e.told().into_owned()),
                )
                .await;
                send(&sender, ConversationEvent::Idle).await;
                return;
            }
        }
    }
}

/// The turn's events, in order; before its last (`Finished`) goes out, what follows
/// is decided: the next queued prompt, taken off the queue, or the conversation marked
/// idle, so that a prompt sent on seeing the turn's end is never taken for a busy one.
async fn forward(sender: &Option<Sink>, inner: &Inner, turn: Turn) -> Option<UserInput> {
    let mut events = turn.run.take_events();
    loop {
        let event = match events.as_mut() {
            Some(events) => events.recv().await,
            None => None,
        };
        let event = match event {
            Some(e) if !matches!(e.kind, RunEventKind::Finished(_)) => {
                send(sender, ConversationEvent::Run(Box::new(e))).await;
                continue;
            }
            Some(finished) => finished,
            None => finished_event(&turn.run).await,
        };
        if turn.run.status().state == RunState::Cancelled {
            inner.note_interrupted(turn.text);
        }
        let next = next_turn(inner);
        send(sender, ConversationEvent::Run(Box::new(event))).await;
        return next;
    }
}

/// The `Finished` event of a run whose events were not there to read.
async fn finished_event(run: &RunHandle) -> RunEvent {
    let end = run.finished().await;
    RunEvent {
        run_id: end.run_id.clone(),
        session_id: end.session_id.clone(),
        at: crate::now_secs(),
        kind: RunEventKind::Finished(end),
    }
}

/// The queued prompt to run now, taken off the queue; `None` (and the conversation
/// idle) when none waits, the queue is held, or the conversation closed.
fn next_turn(inner: &Inner) -> Option<UserInput> {
    let mut turns = lock(&inner.turns);
    let next = match turns.held || inner.sender().is_none() {
        true => None,
        false => turns.queue.pop_front(),
    };
    if next.is_none() {
        turns.active = false;
    }
    next
}

/// Puts `event` on the stream; a closed conversation takes nothing.
async fn send(sender: &Option<Sink>, event: ConversationEvent) {
    if let Some(sink) = sender {
        sink.send(event).await;
    }
}

/// Switching the session a conversation holds, with the one carry-over rule: the
/// client's MCP servers stay with the conversation, running, and the model stays too
/// (a resumed session takes the one it last had instead). Refused while a turn runs.
impl Conversation {
    pub(crate) async fn fresh(
        &self,
        options: crate::SessionOptions,
    ) -> Result<crate::Session, SessionError> {
        let old = self.idle_session()?;
        let session = self.host().open_session(carried(&old, options)).await?;
        if let Some(endpoint) = old.endpoint() {
            session.set_endpoint(endpoint);
        }
        self.set_session(session.clone());
        Ok(session)
    }

    pub(crate) async fn resumed(
        &self,
        stored: &str,
        options: crate::SessionOptions,
    ) -> Result<crate::Session, SessionError> {
        let old = self.idle_session()?;
        let session = self
            .host()
            .resume_session(stored, carried(&old, options))
            .await?;
        self.set_session(session.clone());
        Ok(session)
    }

    pub(crate) async fn branched(
        &self,
        name: Option<String>,
        options: crate::SessionOptions,
    ) -> Result<(crate::Session, String), SessionError> {
        let old = self.idle_session()?;
        let options = carried(&old, options);
        let (session, title) = self.host().branch_session(old.id(), name, options).await?;
        if let Some(endpoint) = old.endpoint() {
            session.set_endpoint(endpoint);
        }
        self.set_session(session.clone());
        Ok((session, title))
    }

    /// The session held, when no turn runs.
    fn idle_session(&self) -> Result<crate::Session, SessionError> {
        match self.busy() {
            true => Err(SessionError::Busy(self.session().id().to_owned())),
            false => Ok(self.session()),
        }
    }
}

/// `options` with the client's MCP servers of `old` handed over.
fn carried(old: &crate::Session, mut options: crate::SessionOptions) -> crate::SessionOptions {
    if options.own_mcp_pool.is_none() {
        options.own_mcp_pool = old.own_mcp_pool();
    }
    options
}

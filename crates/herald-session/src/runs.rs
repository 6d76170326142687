//! Runs: one turn started as a task, watched and steered through a [`RunHandle`]. The
//! registry of live and recently finished runs is bounded; every state change is kept
//! in `state.db`, so a client asking after a restart still gets the final answer.

use crate::answers::Pending;
use herald_agent::TurnProgress;
use herald_agent::{AgentHandle, Decision};
use herald_llm::flow::Flow;
use herald_protocol::ChatMessage;
use herald_store::sessions::RunRow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How long a finished run stays in memory (the runs API keeps terminal states 3600 s;
/// `state.db` keeps them after that).
pub const FINISHED_KEPT: Duration = Duration::from_secs(3600);

/// How long a run's events wait for their one consumer after the run's creation;
/// then they are dropped and no longer queued (api-server.md §7.3).
pub const UNCONSUMED_KEPT: Duration = Duration::from_secs(300);

/// How many events of a run wait for their reader at most. A reader that falls this far
/// behind (or never comes) gets the events so far and then the end of the stream; the
/// run goes on, and its status tells how it ended.
pub const EVENT_BACKLOG: usize = 4096;

/// A run's state, with the wire names of the runs API (api-server.md §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Queued,
    Running,
    WaitingForApproval,
    Stopping,
    Completed,
    Failed,
    Cancelled,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::WaitingForApproval => "waiting_for_approval",
            RunState::Stopping => "stopping",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<RunState> {
        [
            RunState::Queued,
            RunState::Running,
            RunState::WaitingForApproval,
            RunState::Stopping,
            RunState::Completed,
            RunState::Failed,
            RunState::Cancelled,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }

    pub fn is_finished(self) -> bool {
        matches!(
            self,
            RunState::Completed | RunState::Failed | RunState::Cancelled
        )
    }
}

/// What a run is and has come to so far.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStatus {
    pub run_id: String,
    pub session_id: String,
    pub state: RunState,
    pub model: String,
    /// Unix seconds.
    pub created_at: f64,
    pub updated_at: f64,
    /// The name of the last event (`message.delta`, `tool.started` ...).
    pub last_event: Option<String>,
    /// The final answer, once completed.
    pub output: Option<String>,
    pub error: Option<String>,
    /// Steer text that found no tool boundary (resend it as the next turn).
    pub pending_steer: Option<String>,
    /// API calls the turn made.
    pub api_calls: u32,
    /// Tokens the provider reported for the turn (prompt, completion).
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// A failure worth trying again later (network, 5xx, 429); not kept in `state.db`.
    pub retryable: bool,
    /// The answer was cut short (e.g. the output limit); not kept in `state.db`.
    pub partial: bool,
}

impl RunStatus {
    /// A run just created, at `now`.
    pub(crate) fn queued(run_id: String, session_id: String, model: String, now: f64) -> RunStatus {
        RunStatus {
            run_id,
            session_id,
            state: RunState::Queued,
            model,
            created_at: now,
            updated_at: now,
            last_event: None,
            output: None,
            error: None,
            pending_steer: None,
            api_calls: 0,
            input_tokens: 0,
            output_tokens: 0,
            retryable: false,
            partial: false,
        }
    }

    pub(crate) fn row(&self) -> RunRow {
        RunRow {
            id: self.run_id.clone(),
            session_id: self.session_id.clone(),
            status: self.state.as_str().to_owned(),
            model: self.model.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            last_event: self.last_event.clone(),
            output: self.output.clone(),
            error: self.error.clone(),
            pending_steer: self.pending_steer.clone(),
            input_tokens: i64::try_from(self.input_tokens).unwrap_or(i64::MAX),
            output_tokens: i64::try_from(self.output_tokens).unwrap_or(i64::MAX),
        }
    }

    pub(crate) fn from_row(r: RunRow) -> RunStatus {
        RunStatus {
            state: RunState::parse(&r.status).unwrap_or(RunState::Failed),
            run_id: r.id,
            session_id: r.session_id,
            model: r.model,
            created_at: r.created_at,
            updated_at: r.updated_at,
            last_event: r.last_event,
            output: r.output,
            error: r.error,
            pending_steer: r.pending_steer,
            api_calls: 0,
            input_tokens: u64::try_from(r.input_tokens).unwrap_or(0),
            output_tokens: u64::try_from(r.output_tokens).unwrap_or(0),
            retryable: false,
            partial: false,
        }
    }
}

/// One thing that happened in a run, tagged with its run and session.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEvent {
    pub run_id: String,
    pub session_id: String,
    /// Unix seconds.
    pub at: f64,
    pub kind: RunEventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEventKind {
    /// The turn's progress as the agent reports it: text and reasoning as they stream,
    /// each API call's message, tool calls, subagents.
    Progress(herald_agent::TurnProgress),
    /// A message was saved, after every transform; `row_id` is its row in `state.db`
    /// (`None` when the store could not keep it).
    MessageSaved {
        row_id: Option<i64>,
        message: ChatMessage,
    },
    /// A command waits for a decision: answer with [`RunHandle::approve`].
    ApprovalRequested {
        request_id: String,
        command: String,
        reason: String,
        /// What a "session" or "always" answer covers.
        pattern_key: String,
    },
    /// A file edit waits for a decision (a session opened with an edit rule): answer
    /// with [`RunHandle::approve`]; only an allow lets it run.
    EditApprovalRequested {
        request_id: String,
        /// The provider's id of the tool call.
        call_id: String,
        tool: String,
        arguments: serde_json::Value,
    },
    ApprovalResponded {
        request_id: String,
        decision: Decision,
    },
    /// The model asks the human: answer with [`RunHandle::clarify`].
    ClarifyRequested {
        request_id: String,
        question: String,
        choices: Vec<String>,
    },
    /// A tool asks the user for a sudo password or a secret: answer with
    /// [`RunHandle::answer_prompt`] (only sessions opened with prompts ask).
    PromptRequested { request_id: String, ask: PromptAsk },
    /// Nobody answered the prompt in time (`sudo`: 120 s, `secret`: 300 s).
    PromptExpired {
        request_id: String,
        kind: &'static str,
    },
    /// Text was queued for the next tool boundary.
    Steered,
    /// Execution middleware changed an API call's answer after its text had streamed:
    /// the text the answer has instead (the streamed deltas carried the provider's).
    MessageCorrected(String),
    /// The last event of every run.
    Finished(RunStatus),
}

/// What a tool asks the user for.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptAsk {
    /// The sudo password of this machine's user.
    Sudo,
    /// A variable a skill needs, kept in `.env` once given.
    Secret {
        env_var: String,
        prompt: String,
        skill_name: String,
        help: Option<String>,
        required_for: Option<String>,
    },
}

impl PromptAsk {
    /// `sudo` or `secret`, as the requests are named.
    pub fn kind(&self) -> &'static str {
        match self {
            PromptAsk::Sudo => "sudo",
            PromptAsk::Secret { .. } => "secret",
        }
    }
}

impl RunEventKind {
    /// The event's name on the runs API's wire.
    pub fn name(&self) -> &'static str {
        match self {
            RunEventKind::Progress(TurnProgress::MessageDelta(_)) => "message.delta",
            RunEventKind::Progress(TurnProgress::ReasoningDelta(_)) => "reasoning.available",
            RunEventKind::Progress(TurnProgress::MessageComplete { .. }) => "message.complete",
            RunEventKind::Progress(TurnProgress::ToolStarted { .. }) => "tool.started",
            RunEventKind::Progress(TurnProgress::ToolCompleted { .. }) => "tool.completed",
            RunEventKind::Progress(TurnProgress::ClientCalls(_)) => "tool.client_calls",
            RunEventKind::MessageSaved { .. } => "message.saved",
            RunEventKind::ApprovalRequested { .. } => "approval.request",
            RunEventKind::EditApprovalRequested { .. } => "approval.edit_request",
            RunEventKind::ApprovalResponded { .. } => "approval.responded",
            RunEventKind::ClarifyRequested { .. } => "clarify.request",
            RunEventKind::PromptRequested { ask, .. } => match ask {
                PromptAsk::Sudo => "sudo.request",
                PromptAsk::Secret { .. } => "secret.request",
            },
            RunEventKind::PromptExpired { kind, .. } => match *kind {
                "sudo" => "sudo.expire",
                _ => "secret.expire",
            },
            RunEventKind::Steered => "run.steered",
            RunEventKind::MessageCorrected(_) => "message.corrected",
            RunEventKind::Progress(TurnProgress::Subagent(e)) => e.kind.name(),
            RunEventKind::Finished(s) => match s.state {
                RunState::Completed => "run.completed",
                RunState::Cancelled => "run.cancelled",
                _ => "run.failed",
            },
        }
    }
}

/// Why a handle refused an operation (the front door maps these to its codes).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error("the run is {0}, not running: steer is accepted only while it runs")]
    NotAcceptingSteer(&'static str),
    #[error("the steer text is empty")]
    EmptySteer,
    #[error("the run did not take the steer: 64 already wait for its next tool boundary")]
    SteerNotAccepted,
    #[error("the run has finished: there is nothing to answer")]
    NotActive,
    #[error("nothing is waiting for an answer")]
    NotPending,
    #[error("no pending request {0}")]
    UnknownRequest(String),
}

/// Shared state of one run: its status (watched), the agent's interrupt and steer,
/// and the questions waiting for an answer.
pub(crate) struct RunCell {
    pub status: watch::Sender<RunStatus>,
    pub agent: AgentHandle,
    pub pending: Arc<Pending>,
    /// Where events go, until the reader is gone or fell [`EVENT_BACKLOG`] behind.
    events: Mutex<Option<mpsc::Sender<RunEvent>>>,
    /// The events' one consumer, until someone takes it.
    receiver: Mutex<Option<mpsc::Receiver<RunEvent>>>,
    /// The streamed text waiting for the reader; past its limit the provider is paused.
    pub flow: Arc<Flow>,
    /// Who watches the events besides their one consumer (the dashboard): each gets
    /// them from when it started watching; one that falls behind misses some. Made by
    /// the first watcher: a run nobody watches pays nothing for it.
    watchers: std::sync::OnceLock<tokio::sync::broadcast::Sender<RunEvent>>,
    /// The command approvals asked and not yet answered, for a watcher that came late.
    asked: Mutex<Vec<PendingApproval>>,
}

/// A command approval waiting for its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingApproval {
    pub request_id: String,
    pub command: String,
    pub reason: String,
}

/// How many events a watcher may fall behind before it misses some.
const WATCH_BACKLOG: usize = 256;

impl RunCell {
    pub fn new(
        status: watch::Sender<RunStatus>,
        agent: AgentHandle,
        pending: Arc<Pending>,
        flow: Arc<Flow>,
    ) -> RunCell {
        let (events, rx) = mpsc::channel(EVENT_BACKLOG);
        RunCell {
            status,
            agent,
            pending,
            events: Mutex::new(Some(events)),
            receiver: Mutex::new(Some(rx)),
            flow,
            watchers: std::sync::OnceLock::new(),
            asked: Mutex::new(Vec::new()),
        }
    }

    /// Keeps the approvals still waiting in step with `kind`.
    fn note_asks(&self, kind: &RunEventKind) {
        if !matches!(
            kind,
            RunEventKind::ApprovalRequested { .. }
                | RunEventKind::ApprovalResponded { .. }
                | RunEventKind::Finished(_)
        ) {
            return;
        }
        let mut asked = crate::conversation::lock(&self.asked);
        match kind {
            RunEventKind::ApprovalRequested {
                request_id,
                command,
                reason,
                ..
            } => asked.push(PendingApproval {
                request_id: request_id.clone(),
                command: command.clone(),
                reason: reason.clone(),
            }),
            RunEventKind::ApprovalResponded { request_id, .. } => {
                asked.retain(|a| &a.request_id != request_id);
            }
            RunEventKind::Finished(_) => asked.clear(),
            _ => {}
        }
    }

    /// Whether nobody reads the events any more (nor can).
    pub fn unread(&self) -> bool {
        crate::conversation::lock(&self.events)
            .as_ref()
            .is_none_or(mpsc::Sender::is_closed)
    }

    pub fn state(&self) -> RunState {
        self.status.borrow().state
    }

    /// The events' receiver, unless taken or past [`UNCONSUMED_KEPT`] (then dropped).
    fn take_receiver(&self, now: f64) -> Option<mpsc::Receiver<RunEvent>> {
        let mut receiver = self.receiver.lock().ok()?;
        let created = self.status.borrow().created_at;
        if now - created > UNCONSUMED_KEPT.as_secs_f64() {
            receiver.take();
            return None;
        }
        receiver.take()
    }

    /// Drops the events nobody took within [`UNCONSUMED_KEPT`].
    fn sweep(&self, now: f64) {
        if self.status.borrow().created_at < now - UNCONSUMED_KEPT.as_secs_f64()
            && let Ok(mut receiver) = self.receiver.lock()
        {
            receiver.take();
        }
    }

    /// Sends an event and records its name as the run's last event.
    pub fn emit(&self, kind: RunEventKind) {
        let name = kind.name();
        if !matches!(kind, RunEventKind::MessageSaved { .. }) {
            // Recorded without waking the watchers: only state changes wake them.
            self.status.send_if_modified(|s| {
                if s.last_event.as_deref() != Some(name) {
                    s.last_event = Some(name.to_owned());
                }
                false
            });
        }
        self.note_asks(&kind);
        let watchers = self.watchers.get().filter(|w| w.receiver_count() > 0);
        let watched = watchers.is_some();
        let mut events = crate::conversation::lock(&self.events);
        let sender = events.as_ref();
        if sender.is_none() && !watched {
            return;
        }
        let (run_id, session_id) = {
            let s = self.status.borrow();
            (s.run_id.clone(), s.session_id.clone())
        };
        let bytes = streamed_bytes(&kind);
        let event = RunEvent {
            run_id,
            session_id,
            at: crate::host::now_secs(),
            kind,
        };
        if let Some(watchers) = watchers {
            let _ = watchers.send(event.clone());
        }
        let Some(sender) = sender else {
            return;
        };
        match sender.try_send(event) {
            Ok(()) => self.flow.hold(bytes),
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::warn!(
                    run = %self.status.borrow().run_id,
                    "the run's event reader fell {EVENT_BACKLOG} events behind: its stream ends here (the run goes on)"
                );
                events.take();
                self.flow.disengage();
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                events.take();
                self.flow.disengage();
            }
        }
    }

    /// Moves the run to `state` unless it has finished (or is stopping and `state` is
    /// not a finish).
    pub fn set_state(&self, state: RunState) {
        self.status.send_modify(|s| {
            let stopping_wins = s.state == RunState::Stopping && !state.is_finished();
            if !s.state.is_finished() && !stopping_wins {
                s.state = state;
                s.updated_at = crate::host::now_secs();
            }
        });
    }
}

/// The bytes of streamed text an event carries (what back-pressure counts).
pub(crate) fn streamed_bytes(kind: &RunEventKind) -> u64 {
    match kind {
        RunEventKind::Progress(TurnProgress::MessageDelta(t))
        | RunEventKind::Progress(TurnProgress::ReasoningDelta(t))
        | RunEventKind::MessageCorrected(t) => t.len() as u64,
        _ => 0,
    }
}

/// A run's events as its one reader gets them, always ending with
/// [`RunEventKind::Finished`]: a reader cut off [`EVENT_BACKLOG`] behind gets the
/// events so far, then the run's end when it comes.
pub struct RunEvents {
    rx: mpsc::Receiver<RunEvent>,
    run: RunHandle,
    ended: bool,
}

impl RunEvents {
    /// The next event; `None` after the end.
    pub async fn recv(&mut self) -> Option<RunEvent> {
        if self.ended {
            return None;
        }
        let event = match self.rx.recv().await {
            Some(event) => {
                self.run.cell.flow.release(streamed_bytes(&event.kind));
                event
            }
            None => {
                let end = self.run.finished().await;
                RunEvent {
                    run_id: end.run_id.clone(),
                    session_id: end.session_id.clone(),
                    at: crate::host::now_secs(),
                    kind: RunEventKind::Finished(end),
                }
            }
        };
        self.ended = matches!(event.kind, RunEventKind::Finished(_));
        Some(event)
    }
}

impl Drop for RunEvents {
    /// The reader is gone: the provider is not paused for it any more.
    fn drop(&mut self) {
        self.run.cell.flow.disengage();
    }
}

/// What a front door holds of a run.
#[derive(Clone)]
pub struct RunHandle {
    pub(crate) cell: Arc<RunCell>,
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle").field("id", &self.id()).finish()
    }
}

impl RunHandle {
    pub fn id(&self) -> String {
        self.cell.status.borrow().run_id.clone()
    }

    pub fn session_id(&self) -> String {
        self.cell.status.borrow().session_id.clone()
    }

    /// The run's events from now on, without taking them from their one consumer (a
    /// watcher that falls [`WATCH_BACKLOG`] behind misses some).
    pub fn watch(&self) -> tokio::sync::broadcast::Receiver<RunEvent> {
        self.cell
            .watchers
            .get_or_init(|| tokio::sync::broadcast::channel(WATCH_BACKLOG).0)
            .subscribe()
    }

    /// The command approvals waiting for an answer now.
    pub fn pending_approvals(&self) -> Vec<PendingApproval> {
        crate::conversation::lock(&self.cell.asked).clone()
    }

    pub fn status(&self) -> RunStatus {
        self.cell.status.borrow().clone()
    }

    /// The run's events from its creation on, ending with [`RunEventKind::Finished`];
    /// one consumer only (`None` once taken, or when nobody took them within
    /// [`UNCONSUMED_KEPT`]).
    pub fn take_events(&self) -> Option<RunEvents> {
        let rx = self.cell.take_receiver(crate::host::now_secs())?;
        self.cell.flow.engage();
        Some(RunEvents {
            rx,
            run: self.clone(),
            ended: false,
        })
    }

    /// Resolves with the final status.
    pub async fn finished(&self) -> RunStatus {
        let mut rx = self.cell.status.subscribe();
        if let Ok(s) = rx.wait_for(|s| s.state.is_finished()).await {
            return s.clone();
        }
        self.status()
    }

    /// Queues text for the next tool boundary (only while the run is `running`).
    pub fn steer(&self, text: &str) -> Result<(), RunError> {
        let state = self.cell.state();
        if state != RunState::Running {
            return Err(RunError::NotAcceptingSteer(state.as_str()));
        }
        let text = text.trim();
        if text.is_empty() {
            return Err(RunError::EmptySteer);
        }
        if !self.cell.agent.steer(text) {
            return Err(RunError::SteerNotAccepted);
        }
        self.cell.emit(RunEventKind::Steered);
        Ok(())
    }

    /// Stops the run cooperatively; questions waiting for an answer are denied.
    pub fn interrupt(&self) {
        if self.cell.state().is_finished() {
            return;
        }
        self.cell.set_state(RunState::Stopping);
        self.cell.agent.interrupt();
        self.cell.pending.cancel_all();
    }

    /// Answers the approval request `request_id` (or, with `None`, the oldest one; with
    /// `all`, every one); returns how many were resolved.
    pub fn approve(
        &self,
        request_id: Option<&str>,
        decision: Decision,
        all: bool,
    ) -> Result<usize, RunError> {
        if self.cell.state().is_finished() {
            return Err(RunError::NotActive);
        }
        let chosen = self.cell.pending.take_approvals(request_id, all)?;
        // Told before the answers go, so the events stay in the order things happened.
        for (id, _) in &chosen {
            self.cell.emit(RunEventKind::ApprovalResponded {
                request_id: id.clone(),
                decision,
            });
        }
        if !self.cell.pending.any_approval() {
            self.cell.set_state(RunState::Running);
        }
        let resolved = chosen.len();
        for (_, answer) in chosen {
            let _ = answer.send(decision);
        }
        Ok(resolved)
    }

    /// Answers the clarify request `request_id`.
    pub fn clarify(&self, request_id: &str, answer: String) -> Result<(), RunError> {
        if self.cell.state().is_finished() {
            return Err(RunError::NotActive);
        }
        self.cell.pending.clarify(request_id, answer)
    }

    /// Answers the sudo or secret prompt `request_id` (`""` skips it).
    pub fn answer_prompt(&self, request_id: &str, answer: String) -> Result<(), RunError> {
        if self.cell.state().is_finished() {
            return Err(RunError::NotActive);
        }
        self.cell.pending.answer_prompt(request_id, answer)
    }
}

/// The live and recently finished runs of a host, at most `cap` of them.
pub(crate) struct RunRegistry {
    runs: Mutex<Runs>,
    cap: usize,
}

#[derive(Default)]
struct Runs {
    by_id: HashMap<String, Arc<RunCell>>,
    /// Ids in the order the runs started (oldest first), for eviction.
    order: std::collections::VecDeque<String>,
    /// When every run's unread events were last looked at (Unix seconds).
    swept_at: f64,
}

impl RunRegistry {
    pub fn new(cap: usize) -> RunRegistry {
        RunRegistry {
            runs: Mutex::new(Runs::default()),
            cap: cap.max(1),
        }
    }

    /// Adds a run. Finished runs leave, oldest first, once past [`FINISHED_KEPT`] or
    /// when the registry is full; refuses when every slot holds a live run.
    pub fn insert(&self, id: String, cell: Arc<RunCell>) -> Result<(), usize> {
        let Ok(mut runs) = self.runs.lock() else {
            return Err(self.cap);
        };
        let now = crate::host::now_secs();
        let expired = |c: &RunCell| {
            let s = c.status.borrow();
            s.state.is_finished() && now - s.updated_at > FINISHED_KEPT.as_secs_f64()
        };
        // Unread events are dropped after minutes: a look each second is enough (not
        // one at every start, which costs as many looks as runs are kept).
        if now - runs.swept_at >= 1.0 {
            runs.swept_at = now;
            for cell in runs.by_id.values() {
                cell.sweep(now);
            }
        }
        // The oldest runs, as long as they have expired.
        while let Some(first) = runs.order.front().cloned() {
            match runs.by_id.get(&first) {
                Some(c) if !expired(c) => break,
                _ => {
                    runs.order.pop_front();
                    runs.by_id.remove(&first);
                }
            }
        }
        if runs.by_id.len() >= self.cap {
            let Some(at) = runs
                .order
                .iter()
                .position(|id| runs.by_id.get(id).is_none_or(|c| c.state().is_finished()))
            else {
                return Err(self.cap);
            };
            if let Some(old) = runs.order.remove(at) {
                runs.by_id.remove(&old);
            }
        }
        runs.order.push_back(id.clone());
        runs.by_id.insert(id, cell);
        Ok(())
    }

    /// Every run kept now (live and recently finished).
    pub fn all(&self) -> Vec<Arc<RunCell>> {
        self.runs
            .lock()
            .map(|r| r.by_id.values().cloned().collect())
            .unwrap_or_default()
    }

    pub fn get(&self, id: &str) -> Option<Arc<RunCell>> {
        self.runs.lock().ok()?.by_id.get(id).cloned()
    }

    /// How many runs are live.
    pub fn live(&self) -> usize {
        self.runs
            .lock()
            .map(|r| {
                r.by_id
                    .values()
                    .filter(|c| !c.state().is_finished())
                    .count()
            })
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(age: f64) -> Arc<RunCell> {
        let now = crate::host::now_secs();
        let mut status = RunStatus::queued(format!("run_{age}"), "s".into(), "m".into(), now - age);
        status.state = RunState::Running;
        let (status, _) = watch::channel(status);
        Arc::new(RunCell::new(
            status,
            AgentHandle::default(),
            Arc::default(),
            Arc::default(),
        ))
    }

    #[tokio::test]
    async fn a_reader_that_falls_the_backlog_behind_gets_what_came_and_then_the_end() {
        let run = RunHandle { cell: cell(1.0) };
        for _ in 0..EVENT_BACKLOG + 10 {
            run.cell
                .emit(RunEventKind::Progress(TurnProgress::MessageDelta(
                    "x".into(),
                )));
        }
        assert!(run.cell.unread(), "the stream was cut off");
        let mut rx = run.take_events().unwrap();
        let mut read = 0;
        while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(50), rx.recv()).await {
            assert!(matches!(
                e.kind,
                RunEventKind::Progress(TurnProgress::MessageDelta(_))
            ));
            read += 1;
        }
        assert_eq!(read, EVENT_BACKLOG);
        run.cell.set_state(RunState::Completed);
        let end = rx.recv().await.unwrap();
        assert!(matches!(end.kind, RunEventKind::Finished(s) if s.state == RunState::Completed));
        assert!(rx.recv().await.is_none());
    }

    #[test]
    fn events_nobody_takes_within_five_minutes_are_dropped() {
        let registry = RunRegistry::new(10);
        let (old, young) = (cell(301.0), cell(10.0));
        registry.insert("old".into(), old.clone()).unwrap();
        old.emit(RunEventKind::Steered);
        assert!(!old.unread(), "queued until a sweep");
        registry.insert("young".into(), young.clone()).unwrap();
        assert!(!old.unread(), "at most one sweep a second");
        registry.runs.lock().unwrap().swept_at -= 1.0;
        registry.insert("other".into(), cell(0.0)).unwrap();
        assert!(
            old.unread(),
            "the next insert a second later swept the old queue"
        );
        old.emit(RunEventKind::Steered);
        assert!(RunHandle { cell: old }.take_events().is_none());
        let late = cell(299.0);
        let mut events = RunHandle { cell: late.clone() }.take_events().unwrap();
        late.emit(RunEventKind::Steered);
        assert!(events.rx.try_recv().is_ok());
        assert!(RunHandle { cell: young }.take_events().is_some());
    }
}

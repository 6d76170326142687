//! Runs parked for a client's tool results. When the model calls a tool the request
//! defined, the answer goes back to the client (OpenAI's `tool_calls` or
//! `function_call` items) and the run waits here: no request and no concurrency
//! permit held, its events kept for whoever resumes it. A later request whose trailing
//! tool results answer every pending call id takes it out and goes on reading it. A
//! run that ends while parked (its client-tool wait ran out, or it was stopped) leaves
//! the lot at once.

use crate::errors::ApiError;
use herald_protocol::ChatMessage;
use herald_session::ClientDesk;
use herald_session::RunHandle;
use herald_session::runs::RunEvents;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

/// What a run's client side is: the request's function names and where their calls
/// wait.
#[derive(Clone)]
pub struct ClientSide {
    pub names: Arc<HashSet<String>>,
    pub desk: Arc<ClientDesk>,
}

impl ClientSide {
    pub fn is_client(&self, tool: &str) -> bool {
        self.names.contains(tool)
    }
}

/// What a Responses API run carries from the response that parked it to the one that
/// resumes it.
#[derive(Clone, Default)]
pub struct Carried {
    pub conversation: Option<String>,
    pub instructions: Option<String>,
    pub store: bool,
    pub model: String,
    /// The conversation before the run's turn, and the turn's messages so far.
    pub history: Vec<ChatMessage>,
    /// The MCP server of each MCP tool, by tool name.
    pub labels: Arc<HashMap<String, String>>,
}

/// One parked run.
pub struct Parked {
    pub run: RunHandle,
    pub events: RunEvents,
    pub client: ClientSide,
    /// The call ids the client must answer, in the model's order.
    pub pending: Vec<String>,
    /// The Responses API's carry-over (`None`: a chat completion's run).
    pub carried: Option<Carried>,
}

/// A run being answered by a request: tied to it until it ends or parks.
pub struct Answering {
    pub tied: crate::tied::Tied,
    /// `None`: the request defined no tools of its own.
    pub client: Option<ClientSide>,
    pub lot: Arc<Lot>,
}

impl Answering {
    /// Whether `tool` is one the client runs (its calls are not herald's to show).
    pub fn is_client(&self, tool: &str) -> bool {
        self.client.as_ref().is_some_and(|c| c.is_client(tool))
    }

    /// Parks the run for the client's results of `calls`, before its answer is sent
    /// (so a client that resumes at once finds it).
    pub fn park(
        self,
        events: RunEvents,
        calls: &[herald_session::ClientCall],
        carried: Option<Carried>,
    ) {
        let Some(client) = self.client else {
            return;
        };
        let run = self.tied.park();
        tracing::debug!(run = %run.id(), calls = calls.len(), "the run waits for the client's tool results");
        self.lot.park(Parked {
            run,
            events,
            client,
            pending: calls.iter().map(|c| c.call_id.clone()).collect(),
            carried,
        });
    }
}

/// The parked runs of this instance.
#[derive(Default)]
pub struct Lot {
    runs: Mutex<HashMap<String, Parked>>,
}

/// Call ids, as a request's trailing tool results name them.
pub type Answers = Vec<(String, String)>;

impl Lot {
    /// Parks `p` until a request resumes it or the run ends.
    pub fn park(self: &Arc<Self>, p: Parked) {
        let run = p.run.clone();
        let id = run.id();
        if let Ok(mut runs) = self.runs.lock() {
            runs.insert(id.clone(), p);
        }
        let lot = Arc::downgrade(self);
        tokio::spawn(async move {
            run.finished().await;
            if let Some(lot) = lot.upgrade()
                && let Ok(mut runs) = lot.runs.lock()
            {
                runs.remove(&id);
            }
        });
    }

    /// Takes out the parked run whose pending calls `answers` answer and hands the
    /// results to it.
    /// `session`: the session the request names or derives, which picks the run when
    /// several wait for calls of the same ids (providers that number their calls).
    pub fn resume(&self, answers: &Answers, session: Option<&str>) -> Result<Parked, ApiError> {
        let parked = self.take(answers, session)?;
        for (id, output) in answers {
            parked.client.desk.answer(id, output.clone());
        }
        Ok(parked)
    }

    /// Takes out the parked run whose pending calls `answers` answer, all of them;
    /// a call id no parked run waits for, or a run's call left unanswered, is a 400.
    fn take(&self, answers: &Answers, session: Option<&str>) -> Result<Parked, ApiError> {
        let stale = |id: &str| {
            ApiError::bad_request(
                format!(
                    "No run waits for the result of tool call '{id}': it is unknown, was answered already, or its run has ended"
                ),
                Some("unknown_tool_call"),
            )
        };
        let mut runs = self
            .runs
            .lock()
            .map_err(|_| ApiError::bad_request("the parked runs cannot be read", None))?;
        let Some(first) = answers.first() else {
            return Err(stale(""));
        };
        let waiting: Vec<(&String, &Parked)> = runs
            .iter()
            .filter(|(_, p)| p.pending.contains(&first.0))
            .collect();
        let run_id = match waiting.as_slice() {
            [] => return Err(stale(&first.0)),
            [(id, _)] => (*id).clone(),
            several => several
                .iter()
                .find(|(_, p)| session.is_some_and(|s| p.run.session_id() == s))
                .map(|(id, _)| (*id).clone())
                .ok_or_else(|| {
                    ApiError::conflict(
                        format!("Several runs wait for a tool call '{}': name the session (X-Hermes-Session-Id) or the previous response", first.0),
                        "ambiguous_tool_call",
                    )
                })?,
        };
        let parked = &runs[&run_id];
        if let Some((id, _)) = answers.iter().find(|(id, _)| !parked.pending.contains(id)) {
            return Err(stale(id));
        }
        if let Some(missing) = parked
            .pending
            .iter()
            .find(|id| !answers.iter().any(|(a, _)| a == *id))
        {
            return Err(ApiError::bad_request(
                format!(
                    "The result of tool call '{missing}' is missing: send every pending call's result together"
                ),
                Some("missing_tool_result"),
            ));
        }
        if parked.run.status().state.is_finished() {
            runs.remove(&run_id);
            return Err(stale(&first.0));
        }
        runs.remove(&run_id).ok_or_else(|| stale(&first.0))
    }
}

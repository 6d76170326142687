//! Runs parked for a client's tool results. When the model calls a tool the request
//! defined, the answer goes back to the client (OpenAI's `tool_calls` or
//! `function_call` items) and the run waits here: no request and no concurrency
//! permit held, its events kept for whoever resumes it. A later request whose trailing
//! tool results answer every pending call id takes it out and goes on reading it. A
//! run that ends while parked (its client-tool wait ran out, or it was stopped) leaves
//! the lot at once.

use crate::errors::ApiError;
use herald_protocol::ChatMessage;
use herald_session::RunHandle;
use herald_session::runs::RunEvents;
use herald_session::{ClientCall, ClientDesk};
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
}

/// One parked run.
pub struct Parked {
    pub run: RunHandle,
    pub events: RunEvents,
    pub client: ClientSide,
    /// The calls the client must answer, in the model's order: (the id the client
    /// was given, the provider's).
    pub pending: Vec<(String, String)>,
    /// The Responses API's carry-over (`None`: a chat completion's run).
    pub carried: Option<Carried>,
    /// Counted as parked (`herald_frontdoor_open{door="parked"}`) while it waits.
    pub _counted: herald_metrics::Open,
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
    /// (so a client that resumes at once finds it); the calls as the client is to see
    /// them. Each gets an id of its own (the provider's and a token of this park):
    /// providers that number their calls (`call_0`) give many runs the same ids, and
    /// one conversation's results must never reach another's run.
    pub fn park(
        self,
        events: RunEvents,
        calls: &[ClientCall],
        carried: Option<Carried>,
    ) -> Vec<ClientCall> {
        let token = &uuid::Uuid::new_v4().simple().to_string()[..12];
        let outward: Vec<ClientCall> = calls
            .iter()
            .map(|c| ClientCall {
                call_id: format!("{}_{token}", c.call_id),
                ..c.clone()
            })
            .collect();
        let Some(client) = self.client else {
            return outward;
        };
        let run = self.tied.park();
        tracing::debug!(run = %run.id(), calls = calls.len(), "the run waits for the client's tool results");
        let pending = outward
            .iter()
            .zip(calls)
            .map(|(o, c)| (o.call_id.clone(), c.call_id.clone()))
            .collect();
        self.lot.park(Parked {
            run,
            events,
            client,
            pending,
            carried,
            _counted: herald_metrics::get().doors.open("parked"),
        });
        outward
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

    /// Whether another run may park (at most `max` wait at once).
    pub fn has_room(&self, max: usize) -> bool {
        self.runs.lock().is_ok_and(|runs| runs.len() < max)
    }

    /// Takes out the run of the API `responses` says (the Responses API's, else a chat
    /// completion's) that waits for the calls `answers` name, and hands it their
    /// results: every pending call must be answered, once. Answers for calls no run
    /// waits for are ignored when they are a replay's history beside the pending ones.
    pub fn resume(&self, answers: &Answers, responses: bool) -> Result<Parked, ApiError> {
        let parked = self.take(answers, responses)?;
        for (outward, internal) in &parked.pending {
            if let Some((_, output)) = answers.iter().find(|(id, _)| id == outward) {
                parked.client.desk.answer(internal, output.clone());
            }
        }
        Ok(parked)
    }

    fn take(&self, answers: &Answers, responses: bool) -> Result<Parked, ApiError> {
        let stale = |id: &str| {
            ApiError::bad_request(
                format!(
                    "No run waits for the result of tool call '{id}': it is unknown, was answered already, or its run has ended"
                ),
                Some("unknown_tool_call"),
            )
        };
        let mut seen = std::collections::HashSet::new();
        if let Some((id, _)) = answers.iter().find(|(id, _)| !seen.insert(id.as_str())) {
            return Err(ApiError::bad_request(
                format!("The result of tool call '{id}' is sent twice"),
                Some("duplicate_tool_result"),
            ));
        }
        let mut runs = self
            .runs
            .lock()
            .map_err(|_| ApiError::bad_request("the parked runs cannot be read", None))?;
        let waits_for = |p: &Parked, id: &str| p.pending.iter().any(|(o, _)| o == id);
        let found = runs.iter().find(|(_, p)| {
            p.carried.is_some() == responses && answers.iter().any(|(id, _)| waits_for(p, id))
        });
        let Some((run_id, parked)) = found else {
            let last = answers.last().map_or("", |(id, _)| id.as_str());
            return Err(stale(last));
        };
        let run_id = run_id.clone();
        if let Some((missing, _)) = parked
            .pending
            .iter()
            .find(|(o, _)| !answers.iter().any(|(a, _)| a == o))
        {
            return Err(ApiError::bad_request(
                format!(
                    "The result of tool call '{missing}' is missing: send every pending call's result together"
                ),
                Some("missing_tool_result"),
            ));
        }
        let parked = runs.remove(&run_id).ok_or_else(|| stale(&run_id))?;
        if parked.run.status().state.is_finished() {
            return Err(stale(
                parked.pending.first().map_or("", |(o, _)| o.as_str()),
            ));
        }
        Ok(parked)
    }
}

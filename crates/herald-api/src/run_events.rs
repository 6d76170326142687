//! `GET /v1/runs/{run_id}/events` (§7.3): a run's events as SSE frames, from its
//! creation on. A run this instance runs is read from memory; one another instance
//! sharing the store runs is followed through the store, its owner serialising the
//! frames (with the same [`Wire`]) and this instance passing them on.

use crate::Api;
use crate::errors::ApiError;
use crate::runs_api::{run_not_active, run_not_found};
use crate::session_pick;
use crate::sse::{self, Frames};
use crate::wire::*;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use herald_session::TurnProgress;
use herald_session::{
    EventRelay, Followed, Host, RelayedEvents, RunEvent, RunEventKind, RunEvents, RunHandle,
    RunState, RunStatus, SubagentEvent, SubagentKind,
};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a subscription waits for its run to appear (§7.3: about a second).
const APPEAR_WITHIN: Duration = Duration::from_secs(1);
/// How often a follower whose relayed events broke off reads the run's stored status.
const STATUS_POLL: Duration = Duration::from_millis(500);
/// A relayed stream this quiet has the run's stored status read.
const QUIET: Duration = Duration::from_secs(1);
/// Relayed frames waiting for the store to carry them to the follower.
const RELAY_QUEUE: usize = 256;

#[utoipa::path(get, path = "/v1/runs/{run_id}/events", tag = "runs", params(("run_id" = String, Path, description = "The run's id")), responses((status = 200, description = "Every event from the run's creation, then the live ones", content((RunEventFrame = "text/event-stream"))), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "run_not_found", body = ErrorEnvelope), (status = 409, description = "run_not_active: the instance that runs it is gone", body = ErrorEnvelope)))]
pub async fn events(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    match subscribe(&api, &id).await {
        Ok(Source::Here(run)) => {
            // One consumer: once taken, the queue is gone.
            match run.take_events() {
                Some(events) => local_stream(events),
                None => run_not_found(&id).into_response(),
            }
        }
        Ok(Source::Relayed(lines)) => relayed_stream(api, id, lines),
        Err(e) => e.into_response(),
    }
}

/// Where a run's events come from.
enum Source {
    Here(RunHandle),
    Relayed(RelayedEvents),
}

/// The run's events, here or relayed from the instance that runs it, waiting up to
/// [`APPEAR_WITHIN`] for the run to appear.
async fn subscribe(api: &Api, id: &str) -> Result<Source, ApiError> {
    let until = Instant::now() + APPEAR_WITHIN;
    loop {
        if let Some(run) = api.host.run(id) {
            return Ok(Source::Here(run));
        }
        match api.host.follow(id).await.map_err(session_pick::run_error)? {
            Followed::Events(lines) => return Ok(Source::Relayed(lines)),
            // The owner refuses only when the events were taken by another reader.
            Followed::Refused { .. } => return Err(run_not_found(id)),
            Followed::OwnerGone => return Err(run_not_active(id)),
            Followed::Nobody => {}
        }
        if Instant::now() >= until {
            return Err(run_not_found(id));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn local_stream(mut events: RunEvents) -> Response {
    let (frames, response) = sse::channel();
    tokio::spawn(async move {
        let mut wire = Wire::default();
        while let Some(e) = events.recv().await {
            let last = matches!(e.kind, RunEventKind::Finished(_));
            if let Some(frame) = wire.frame(e)
                && !frames.data(&frame).await
            {
                return;
            }
            if last {
                break;
            }
        }
        let _ = frames.raw(": stream closed\n\n".into()).await;
    });
    response
}

/// Frames another instance serialised, passed on as they come; when they break off
/// before the run's end (a notification lost on the way, or the owner gone), the end
/// is told from the run's stored status once it is final.
fn relayed_stream(api: Arc<Api>, id: String, lines: RelayedEvents) -> Response {
    let (frames, response) = sse::channel();
    tokio::spawn(async move {
        match pass_on(lines, &frames, &api.host, &id).await {
            Passed::Ended => {}
            Passed::ReaderGone => return,
            Passed::BrokeOff => {
                let Some(status) = final_status(&api.host, &id, &frames).await else {
                    return;
                };
                let end = RunEvent {
                    run_id: id,
                    session_id: status.session_id.clone(),
                    at: herald_session::now_secs(),
                    kind: RunEventKind::Finished(status),
                };
                if let Some(frame) = Wire::default().frame(end)
                    && !frames.data(&frame).await
                {
                    return;
                }
            }
        }
        let _ = frames.raw(": stream closed\n\n".into()).await;
    });
    response
}

/// How a relayed stream ended.
enum Passed {
    /// With the run's last frame.
    Ended,
    /// Before it.
    BrokeOff,
    ReaderGone,
}

/// Passes relayed frames on until the last. Silence longer than [`QUIET`] after the
/// store says the run is over means its end will not come (its owner died).
async fn pass_on(mut lines: RelayedEvents, frames: &Frames, host: &Host, id: &str) -> Passed {
    let mut over_and_quiet = 0;
    loop {
        let line = match tokio::time::timeout(QUIET, lines.recv()).await {
            Ok(Some(line)) => line,
            Ok(None) => return Passed::BrokeOff,
            Err(_) => {
                if frames.gone() {
                    return Passed::ReaderGone;
                }
                let over =
                    matches!(host.run_status(id).await, Ok(Some(s)) if s.state.is_finished());
                over_and_quiet = if over { over_and_quiet + 1 } else { 0 };
                if over_and_quiet > 1 {
                    return Passed::BrokeOff;
                }
                continue;
            }
        };
        if !frames.raw(format!("data: {line}\n\n")).await {
            return Passed::ReaderGone;
        }
        if is_last(&line) {
            return Passed::Ended;
        }
    }
}

/// Whether a relayed frame is the run's last (`run.completed`, `.failed`, `.cancelled`).
fn is_last(line: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Named {
        event: String,
    }
    serde_json::from_str::<Named>(line).is_ok_and(|n| {
        matches!(
            n.event.as_str(),
            "run.completed" | "run.failed" | "run.cancelled"
        )
    })
}

/// The run's status once the store says it is final (an owner that dies has its runs
/// failed by the instance that sees its lease expire); `None` when the reader left.
async fn final_status(host: &Host, id: &str, frames: &Frames) -> Option<RunStatus> {
    loop {
        if frames.gone() {
            return None;
        }
        match host.run_status(id).await {
            Ok(Some(s)) if s.state.is_finished() => return Some(s),
            Ok(_) => {}
            Err(e) => tracing::warn!(run = %id, error = %e, "cannot read a followed run's status"),
        }
        tokio::time::sleep(STATUS_POLL).await;
    }
}

/// What serialises this host's runs' events for another instance that follows them:
/// the frames this instance would send, one JSON object to a line.
pub fn relay_for_others() -> EventRelay {
    Arc::new(|mut events: RunEvents| {
        let (tx, rx) = tokio::sync::mpsc::channel(RELAY_QUEUE);
        tokio::spawn(async move {
            let mut wire = Wire::default();
            while let Some(e) = events.recv().await {
                let last = matches!(e.kind, RunEventKind::Finished(_));
                if let Some(frame) = wire.frame(e) {
                    // Wire types always encode.
                    let line = serde_json::to_string(&frame).unwrap_or_default();
                    if tx.send(line).await.is_err() {
                        return;
                    }
                }
                if last {
                    break;
                }
            }
        });
        rx
    })
}

/// A run's events as the runs API's frames; tool durations are timed from their start.
#[derive(Default)]
struct Wire {
    started: HashMap<String, Instant>,
}

impl Wire {
    /// The frame of `e` (`None`: not part of the runs API's stream).
    fn frame(&mut self, e: RunEvent) -> Option<RunEventFrame> {
        let (event, fields) = event_fields(e.kind, &mut self.started)?;
        Some(RunEventFrame {
            event: event.to_owned(),
            run_id: e.run_id,
            timestamp: e.at,
            fields,
        })
    }
}

fn choices_for(allow_permanent: bool) -> Value {
    if allow_permanent {
        json!(["once", "session", "always", "deny"])
    } else {
        json!(["once", "session", "deny"])
    }
}

/// An event's wire name and its fields (`None`: not part of the runs API's stream).
fn event_fields(
    kind: RunEventKind,
    started: &mut HashMap<String, Instant>,
) -> Option<(&'static str, Map<String, Value>)> {
    if let RunEventKind::Progress(TurnProgress::Subagent(e)) = &kind {
        return subagent_progress(e);
    }
    let name = kind.name();
    let fields = match kind {
        RunEventKind::Progress(TurnProgress::MessageDelta(delta)) => json!({"delta": delta}),
        RunEventKind::Progress(TurnProgress::ReasoningDelta(text)) => json!({"text": text}),
        RunEventKind::Progress(TurnProgress::ToolStarted {
            call_id,
            name,
            arguments,
        }) => {
            started.insert(call_id.clone(), Instant::now());
            let preview =
                herald_session::preview::tool_preview(&name, &arguments, 120).unwrap_or_default();
            json!({"tool": name, "preview": preview, "tool_call_id": call_id})
        }
        RunEventKind::Progress(TurnProgress::ToolCompleted {
            call_id,
            name,
            is_error,
            ..
        }) => {
            let secs = started
                .remove(&call_id)
                .map(|t| t.elapsed().as_secs_f64())
                .unwrap_or(0.0);
            json!({"tool": name, "duration": (secs * 1000.0).round() / 1000.0, "error": is_error, "tool_call_id": call_id})
        }
        RunEventKind::Progress(TurnProgress::ClientCalls(calls)) => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|c| json!({"tool": c.name, "tool_call_id": c.call_id, "arguments": c.arguments}))
                .collect();
            json!({"calls": calls})
        }
        RunEventKind::ApprovalRequested {
            request_id,
            command,
            reason,
            pattern_key,
        } => json!({
            "request_id": request_id, "command": command, "description": reason,
            "pattern_key": pattern_key, "pattern_keys": [pattern_key], "smart_denied": false,
            "allow_permanent": true, "choices": choices_for(true),
        }),
        RunEventKind::ApprovalResponded {
            request_id,
            decision,
        } => {
            json!({"request_id": request_id, "choice": decision.name(), "resolved": 1})
        }
        RunEventKind::ClarifyRequested {
            request_id,
            question,
            choices,
        } => {
            json!({"request_id": request_id, "question": question, "choices": choices})
        }
        // The API opens no session with prompts (Hermes registers no callback there).
        RunEventKind::PromptRequested { request_id, .. }
        | RunEventKind::PromptExpired { request_id, .. } => json!({"request_id": request_id}),
        RunEventKind::Steered => json!({"accepted": true}),
        RunEventKind::Finished(s) => {
            let mut f = match s.state {
                RunState::Completed => {
                    json!({"output": s.output.clone().unwrap_or_default(), "usage": crate::token_usage(&s)})
                }
                RunState::Cancelled => json!({}),
                _ => json!({"error": s.error.clone().unwrap_or_else(|| "the run failed".into())}),
            };
            if let Some(p) = &s.pending_steer {
                f["pending_steer"] = json!(p);
            }
            f
        }
        // `run.completed` carries the corrected output; the API opens no session with
        // an edit rule.
        RunEventKind::Progress(TurnProgress::MessageComplete { .. })
        | RunEventKind::EditApprovalRequested { .. }
        | RunEventKind::MessageSaved { .. }
        | RunEventKind::MessageCorrected(_)
        | RunEventKind::Progress(TurnProgress::Subagent(_)) => return None,
    };
    match fields {
        Value::Object(m) => Some((name, m)),
        _ => None,
    }
}

/// A subagent's start, tool calls and end, as `tool.progress` of the `delegate_task`
/// call that started it (its reasoning and progress lines are left out).
fn subagent_progress(e: &SubagentEvent) -> Option<(&'static str, Map<String, Value>)> {
    let step = match e.kind {
        SubagentKind::Start => "started",
        SubagentKind::Tool => "tool",
        SubagentKind::Complete => "completed",
        SubagentKind::Thinking | SubagentKind::Progress => return None,
    };
    let mut fields = Map::new();
    fields.insert(
        "tool".into(),
        json!(e.tool_name.as_deref().unwrap_or("delegate_task")),
    );
    fields.insert("tool_call_id".into(), json!(e.call_id));
    fields.insert("subagent_id".into(), json!(e.subagent_id));
    fields.insert("task_index".into(), json!(e.task_index));
    fields.insert("step".into(), json!(step));
    fields.insert("preview".into(), json!(e.text));
    if let Some(status) = &e.status {
        fields.insert("status".into(), json!(status));
    }
    Some(("tool.progress", fields))
}

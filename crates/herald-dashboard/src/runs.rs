//! The runs of this process (webhook runs and the API's), live: a list, one run's
//! events as they happen (SSE, from a tap that takes nothing from the run's own
//! reader; a page that takes nothing for [`WRITE_TIMEOUT`] is dropped), its pending
//! approvals answered from the page (once, session or deny: never `always`), and a stop
//! for any running run.

use crate::Dashboard;
use crate::api::error;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use herald_http::Outbox;
use herald_session::TurnProgress;
use herald_session::{Decision, RunEvent, RunEventKind, RunHandle, RunStatus};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

pub(crate) fn router() -> Router<Arc<Dashboard>> {
    Router::new()
        .route("/dashboard/api/runs", get(list))
        .route("/dashboard/api/runs/{id}/events", get(events))
        .route("/dashboard/api/runs/{id}/approval", post(approve))
        .route("/dashboard/api/runs/{id}/stop", post(stop))
}

/// A watching page that takes nothing for this long is dropped (the API's SSE
/// deadline, herald-api's `sse::WRITE_TIMEOUT`).
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of events queued for a watching page before the deadline starts.
const QUEUED_BYTES: usize = 256 * 1024;

/// A choice the page offers: once, session or deny. `always` is not one: an answer
/// given here never becomes a standing rule that unattended runs would use.
fn choice(text: &str) -> Option<Decision> {
    match text.trim().to_ascii_lowercase().as_str() {
        "once" => Some(Decision::Once),
        "session" => Some(Decision::Session),
        "deny" => Some(Decision::Deny),
        _ => None,
    }
}

fn find(dash: &Dashboard, id: &str) -> Option<(RunHandle, &'static str)> {
    dash.hosts
        .iter()
        .find_map(|h| h.run_anywhere(id).map(|r| (r, h.runtime().platform.name())))
}

fn status_json(s: &RunStatus, door: &str, pending: usize) -> Value {
    json!({
        "run_id": s.run_id, "session_id": s.session_id, "state": s.state.as_str(),
        "model": s.model, "created_at": s.created_at, "updated_at": s.updated_at,
        "last_event": s.last_event, "error": s.error, "door": door,
        "input_tokens": s.input_tokens, "output_tokens": s.output_tokens,
        "pending_approvals": pending,
    })
}

async fn list(State(dash): State<Arc<Dashboard>>) -> Response {
    let mut runs: Vec<Value> = Vec::new();
    for host in &dash.hosts {
        let door = host.runtime().platform.name();
        for run in host.runs_now() {
            runs.push(status_json(
                &run.status(),
                door,
                run.pending_approvals().len(),
            ));
        }
    }
    Json(json!({"runs": runs})).into_response()
}

/// One run's events: its status and pending approvals first, then what happens, until
/// it ends.
async fn events(State(dash): State<Arc<Dashboard>>, Path(id): Path<String>) -> Response {
    let Some((run, door)) = find(&dash, &id) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("no run {id} in this process"),
        );
    };
    let mut watch = run.watch();
    let first = json!({
        "event": "status",
        "status": status_json(&run.status(), door, run.pending_approvals().len()),
        "pending": run.pending_approvals().iter().map(|a| json!({
            "request_id": a.request_id, "command": a.command, "reason": a.reason,
        })).collect::<Vec<_>>(),
    });
    let stream = async_stream(move |tx| async move {
        if !deliver(&tx, first).await {
            return;
        }
        if run.status().state.is_finished() {
            return;
        }
        loop {
            // A page that went away ends its watch at once, not at the run's next event.
            let next = tokio::select! {
                next = watch.recv() => next,
                () = tx.closed() => return,
            };
            let event = match next {
                Ok(e) => e,
                Err(RecvError::Lagged(n)) => {
                    if !deliver(&tx, json!({"event": "lagged", "missed": n})).await {
                        return;
                    }
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            let last = matches!(event.kind, RunEventKind::Finished(_));
            if let Some(v) = wire(event, door)
                && !deliver(&tx, v).await
            {
                return;
            }
            if last {
                return;
            }
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// Queues `v` for the page; false when the page is gone, or has taken nothing for
/// [`WRITE_TIMEOUT`] with the queue full: then the watch ends, and with it everything
/// it holds of the run.
async fn deliver(tx: &Outbox<String>, v: Value) -> bool {
    if tx.send(v.to_string()).await {
        return true;
    }
    if !tx.is_closed() {
        tracing::info!("dashboard: a run watch took nothing for 10 s and was dropped");
    }
    false
}

/// Values from a producer task as a stream of SSE events (the producer stops when the
/// page goes away).
fn async_stream<F, Fut>(
    produce: F,
) -> impl futures_util::Stream<Item = Result<Event, std::convert::Infallible>>
where
    F: FnOnce(Outbox<String>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = herald_http::outbox::<String>(QUEUED_BYTES, Some(WRITE_TIMEOUT));
    tokio::spawn(produce(tx));
    futures_util::stream::unfold(rx, |mut rx| async move {
        let v = rx.recv().await?;
        Some((Ok(Event::default().data(v)), rx))
    })
}

/// An event as the page shows it (`None`: not shown).
fn wire(e: RunEvent, door: &str) -> Option<Value> {
    let name = e.kind.name();
    let fields = match e.kind {
        RunEventKind::Progress(TurnProgress::MessageDelta(delta)) => json!({"delta": delta}),
        RunEventKind::Progress(TurnProgress::ToolStarted {
            name, arguments, ..
        }) => {
            let preview: String = arguments.to_string().chars().take(300).collect();
            json!({"tool": name, "arguments": preview})
        }
        RunEventKind::Progress(TurnProgress::ToolCompleted {
            name,
            result,
            is_error,
            ..
        }) => {
            let preview: String = result.chars().take(500).collect();
            json!({"tool": name, "result": preview, "error": is_error})
        }
        RunEventKind::ApprovalRequested {
            request_id,
            command,
            reason,
            ..
        } => {
            json!({"request_id": request_id, "command": command, "reason": reason})
        }
        RunEventKind::ApprovalResponded {
            request_id,
            decision,
        } => {
            json!({"request_id": request_id, "choice": decision.name()})
        }
        RunEventKind::Finished(s) => json!({"status": status_json(&s, door, 0)}),
        _ => return None,
    };
    let mut v = fields;
    v["event"] = json!(name);
    v["at"] = json!(e.at);
    Some(v)
}

#[derive(serde::Deserialize)]
struct Approval {
    request_id: String,
    choice: String,
}

async fn approve(
    State(dash): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    Json(a): Json<Approval>,
) -> Response {
    let Some((run, _)) = find(&dash, &id) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("no run {id} in this process"),
        );
    };
    let Some(decision) = choice(&a.choice) else {
        return error(
            StatusCode::BAD_REQUEST,
            "choice must be once, session or deny (the dashboard gives no `always`)",
        );
    };
    match run.approve(Some(&a.request_id), decision, false) {
        Ok(n) => Json(json!({"resolved": n, "choice": decision.name()})).into_response(),
        Err(e) => error(StatusCode::CONFLICT, e.to_string()),
    }
}

/// `POST /dashboard/api/runs/{id}/stop`: interrupts a running run, whichever door
/// started it; a finished one's status is its answer.
async fn stop(State(dash): State<Arc<Dashboard>>, Path(id): Path<String>) -> Response {
    let Some((run, door)) = find(&dash, &id) else {
        return error(
            StatusCode::NOT_FOUND,
            format!("no run {id} in this process"),
        );
    };
    let status = run.status();
    if status.state.is_finished() {
        return Json(status_json(&status, door, 0)).into_response();
    }
    run.interrupt();
    tracing::info!(run_id = %id, "dashboard: a run was stopped");
    Json(json!({"run_id": id, "status": "stopping"})).into_response()
}

//! `POST /v1/chat/completions` (§5): the body's messages become the session's history
//! and the new input, the turn runs on the session host, and the answer comes back
//! whole or as the OpenAI chunk stream (with `hermes.tool.progress` events).

use crate::errors::ApiError;
use crate::session_pick::{self, Picked};
use crate::tied::Tied;
use crate::wire::*;
use crate::{Api, body, idempotency, media, sse};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_session::TurnProgress;
use herald_session::runs::RunEvents;
use herald_session::{RunEventKind, RunState, RunStatus, SubagentEvent, SubagentKind};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;

/// One completion's ids: the chunk id, its creation time and the echoed model.
struct Ids {
    id: String,
    created: u64,
    model: String,
}

impl Ids {
    fn chunk(&self, delta: Value, finish: Option<&str>) -> ChatCompletionChunk {
        ChatCompletionChunk {
            id: self.id.clone(),
            object: "chat.completion.chunk".into(),
            created: self.created,
            model: self.model.clone(),
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                finish_reason: finish.map(str::to_owned),
            }],
            usage: None,
            error: None,
            hermes: None,
        }
    }
}

/// The run's token counts in chat completion terms.
fn usage(end: &RunStatus) -> Usage {
    let (prompt, completion) = (end.input_tokens, end.output_tokens);
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: prompt + completion,
    }
}

/// How the run ended, as OpenAI's `finish_reason`.
fn finish_reason(end: &RunStatus) -> &'static str {
    match end.state {
        RunState::Completed if end.partial => "length",
        RunState::Completed => "stop",
        _ => "error",
    }
}

/// The `hermes` object of a non-`stop` outcome.
fn hermes_outcome(end: &RunStatus) -> Value {
    let partial = end.partial;
    let error = end.error.clone().unwrap_or_else(|| match end.state {
        RunState::Cancelled => "the run was stopped".to_owned(),
        _ => "the run did not complete".to_owned(),
    });
    json!({
        "completed": end.state == RunState::Completed && !partial,
        "partial": partial,
        "failed": end.state != RunState::Completed,
        "error": error,
        "error_code": if partial { "output_truncated" } else { "agent_error" },
    })
}

#[utoipa::path(post, path = "/v1/chat/completions", tag = "chat", request_body = ChatCompletionRequest, params(("X-Hermes-Session-Id" = Option<String>, Header, description = "Continue this stored session"), ("Idempotency-Key" = Option<String>, Header, description = "Repeat-safe whole requests")), responses((status = 200, description = "The answer, whole or as chunks", headers(("x-herald-run-id" = String, description = "The run that answers (a herald extension): read or stop it at /v1/runs/{run_id}")), content((ChatCompletion = "application/json"), (ChatCompletionChunk = "text/event-stream"))), (status = 400, description = "Bad request", body = ErrorEnvelope), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 502, description = "agent_incomplete", body = ErrorEnvelope), (status = 429, description = "At the concurrency cap (Retry-After)", body = ErrorEnvelope), (status = 503, description = "Draining for shutdown", body = ErrorEnvelope)))]
pub async fn completions(State(api): State<Arc<Api>>, headers: HeaderMap, raw: Body) -> Response {
    match complete(api, headers, raw).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn complete(api: Arc<Api>, headers: HeaderMap, raw: Body) -> Result<Response, ApiError> {
    let admitted = body::admit(&api, &headers, raw).await?;
    let permit = api.permit()?;
    let crate::readers::Read {
        object: request,
        typed,
    } = crate::readers::chat_completion(&admitted.bytes, api.settings.max_messages)?;
    if typed.stream.0 {
        return run_completion(api.clone(), &headers, &typed, true, permit).await;
    }
    let fields = ["model", "messages", "tools", "tool_choice", "stream"];
    let make = || async {
        run_completion(api.clone(), &headers, &typed, false, permit)
            .await
            .unwrap_or_else(IntoResponse::into_response)
    };
    Ok(idempotency::once(
        &api.idempotency,
        &api.host,
        &headers,
        &request,
        &fields,
        make,
    )
    .await)
}

/// One completion's run, answered whole or streamed.
async fn run_completion(
    api: Arc<Api>,
    headers: &HeaderMap,
    request: &ChatCompletionRequest,
    stream: bool,
    permit: Option<OwnedSemaphorePermit>,
) -> Result<Response, ApiError> {
    let model = request
        .model
        .0
        .clone()
        .unwrap_or_else(|| api.model_id.clone());
    let conversation = crate::readers::transcript(request)?;
    let Picked {
        session,
        input,
        key,
    } = session_pick::pick(&api, headers, conversation, &model).await?;
    let run = api
        .host
        .start_run(&session, input)
        .map_err(session_pick::run_error)?;
    let run_id = run.id();
    let tied = Tied::new(run, permit);
    let ids = Ids {
        id: format!(
            "chatcmpl-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..29]
        ),
        created: crate::discovery::now_secs() as u64,
        model,
    };
    let mut response = if stream {
        streamed(tied, ids)
    } else {
        whole(&tied, ids, api.host.runtime().home.root()).await
    };
    let out = response.headers_mut();
    crate::tied::name_run(out, &run_id);
    if let Ok(v) = HeaderValue::from_str(session.id()) {
        out.insert("x-hermes-session-id", v);
    }
    if let Some(v) = key.and_then(|k| HeaderValue::from_str(&k).ok()) {
        out.insert("x-hermes-session-key", v);
    }
    Ok(response)
}

/// The whole answer once the run ends, its image tags inlined. A client that goes away
/// first drops this future, and with it the tied run.
async fn whole(tied: &Tied, ids: Ids, home: &std::path::Path) -> Response {
    let run = tied.run();
    // Only the end is needed: the events are not queued.
    drop(run.take_events());
    let end = run.finished().await;
    let text = media::inline_images(&end.output.clone().unwrap_or_default(), home);
    let reason = finish_reason(&end);
    if reason != "stop" && text.trim().is_empty() {
        let hermes = hermes_outcome(&end);
        let mut error = ApiError::new(
            StatusCode::BAD_GATEWAY,
            end.error
                .clone()
                .unwrap_or_else(|| "the agent produced no answer".into()),
            Some("agent_incomplete"),
        );
        let outcome = json!({"completed": hermes["completed"], "partial": hermes["partial"], "failed": hermes["failed"]});
        error.hermes = Some(Box::new(outcome));
        return error.into_response();
    }
    let mut body = ChatCompletion {
        id: ids.id,
        object: "chat.completion".into(),
        created: ids.created,
        model: ids.model,
        choices: vec![ChatChoice {
            index: 0,
            message: AssistantMessage {
                role: "assistant".into(),
                content: text,
            },
            finish_reason: reason.into(),
        }],
        usage: usage(&end),
        hermes: None,
    };
    let mut response_headers = Vec::new();
    if reason != "stop" {
        let hermes = hermes_outcome(&end);
        let error: String = hermes["error"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .take(200)
            .collect();
        response_headers.push(("x-hermes-completed", "false".to_owned()));
        response_headers.push(("x-hermes-partial", end.partial.to_string()));
        response_headers.push(("x-hermes-error", error));
        body.hermes = Some(hermes);
    }
    let mut response = Json(body).into_response();
    for (name, value) in response_headers {
        if let Ok(v) = HeaderValue::from_str(&value.replace(['\r', '\n'], " ")) {
            response.headers_mut().insert(name, v);
        }
    }
    response
}

/// The chunk stream; a reader that goes away (at once, even while nothing is written)
/// stops the run.
fn streamed(tied: Tied, ids: Ids) -> Response {
    let (frames, response) = sse::channel();
    // Taken before the relay's task runs, so the run is paced from its first delta.
    let events = tied.run().take_events();
    tokio::spawn(async move {
        if let Some(events) = events {
            frames.unless_gone(relay(events, &ids, &frames)).await;
        }
        // Dropped here: interrupts the run unless it has ended.
        drop(tied);
    });
    response
}

/// A subagent's tool calls as `hermes.tool.progress` (each one `running`, then
/// `completed` when its next call starts or it ends); `open` holds each subagent's
/// call shown running. False when the reader went away.
async fn subagent_progress(
    e: &SubagentEvent,
    open: &mut HashMap<String, (String, String)>,
    frames: &sse::Frames,
) -> bool {
    if !matches!(e.kind, SubagentKind::Tool | SubagentKind::Complete) {
        return true;
    }
    if let Some((id, tool)) = open.remove(&e.subagent_id) {
        let done = json!({"tool": tool, "toolCallId": id, "status": "completed"});
        if !frames.event("hermes.tool.progress", &done).await {
            return false;
        }
    }
    let Some(tool) = e
        .tool_name
        .as_deref()
        .filter(|_| e.kind == SubagentKind::Tool)
    else {
        return true;
    };
    let id = format!("{}:{}:{}", e.call_id, e.subagent_id, e.tool_count);
    let label = herald_session::preview::one_line(e.text.as_deref().unwrap_or(""), 80);
    let running = json!({"tool": tool, "emoji": "🔀", "label": format!("[{}] {label}", e.subagent_id), "toolCallId": id, "status": "running"});
    open.insert(e.subagent_id.clone(), (id, tool.to_owned()));
    frames.event("hermes.tool.progress", &running).await
}

/// Passes the run's events on as chunks; false when the reader went away first.
async fn relay(mut events: RunEvents, ids: &Ids, frames: &sse::Frames) -> bool {
    let role = ids.chunk(json!({"role": "assistant"}), None);
    if !frames.data(&role).await {
        return false;
    }
    let mut running: HashSet<String> = HashSet::new();
    let mut children: HashMap<String, (String, String)> = HashMap::new();
    while let Some(event) = events.recv().await {
        let sent = match event.kind {
            RunEventKind::Progress(TurnProgress::MessageDelta(text)) => {
                let chunk = ids.chunk(json!({"content": text}), None);
                frames.data(&chunk).await
            }
            // Deltas cannot be taken back: the middleware's text follows them.
            RunEventKind::MessageCorrected(text) => {
                let chunk = ids.chunk(json!({"content": format!("\n\n{text}")}), None);
                frames.data(&chunk).await
            }
            RunEventKind::Progress(TurnProgress::ToolStarted {
                call_id,
                name,
                arguments,
            }) if !name.starts_with('_') => {
                let label = herald_session::preview::tool_preview(&name, &arguments, 80)
                    .unwrap_or_else(|| name.clone());
                running.insert(call_id.clone());
                let progress = json!({"tool": name, "emoji": "⚙", "label": label, "toolCallId": call_id, "status": "running"});
                frames.event("hermes.tool.progress", &progress).await
            }
            RunEventKind::Progress(TurnProgress::ToolCompleted { call_id, name, .. })
                if running.remove(&call_id) =>
            {
                let progress = json!({"tool": name, "toolCallId": call_id, "status": "completed"});
                frames.event("hermes.tool.progress", &progress).await
            }
            RunEventKind::Progress(TurnProgress::Subagent(e)) => {
                subagent_progress(&e, &mut children, frames).await
            }
            RunEventKind::Finished(end) => return finish(ids, &end, frames).await,
            _ => true,
        };
        if !sent {
            return false;
        }
    }
    true
}

async fn finish(ids: &Ids, end: &RunStatus, frames: &sse::Frames) -> bool {
    let reason = finish_reason(end);
    let mut chunk = ids.chunk(json!({}), Some(reason));
    chunk.usage = Some(usage(end));
    if reason != "stop" {
        let hermes = hermes_outcome(end);
        chunk.error = hermes["error"]
            .as_str()
            .map(|message| json!({"message": message, "type": "server_error"}));
        chunk.hermes = Some(hermes);
    }
    frames.data(&chunk).await && frames.raw("data: [DONE]\n\n".into()).await
}

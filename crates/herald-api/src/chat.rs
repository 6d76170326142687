//! `POST /v1/chat/completions` (§5): the body's messages become the session's history
//! and the new input, the turn runs on the session host, and the answer comes back
//! whole or as the OpenAI chunk stream (with `hermes.tool.progress` events).

use crate::errors::ApiError;
use crate::parked::{Answering, Parked};
use crate::session_pick::{self, Picked};
use crate::tied::Tied;
use crate::wire::*;
use crate::{Api, body, idempotency, media, sse};
use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use herald_session::ClientCall;
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

#[utoipa::path(post, path = "/v1/chat/completions", tag = "chat", request_body = ChatCompletionRequest, params(("X-Hermes-Session-Id" = Option<String>, Header, description = "Continue this stored session"), ("Idempotency-Key" = Option<String>, Header, description = "Repeat-safe whole requests")), responses((status = 200, description = "The answer, whole or as chunks", headers(("x-herald-run-id" = String, description = "The run that answers (a herald extension): read or stop it at /v1/runs/{run_id}")), content((ChatCompletion = "application/json"), (ChatCompletionChunk = "text/event-stream"))), (status = 400, description = "Bad request", body = ErrorEnvelope), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 424, description = "agent_incomplete: the run failed without an answer (x-should-retry: false)", body = ErrorEnvelope), (status = 429, description = "At the concurrency cap (Retry-After)", body = ErrorEnvelope), (status = 503, description = "Draining for shutdown", body = ErrorEnvelope)))]
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
    if let Some(answers) = crate::readers::trailing_tool_results(&typed)? {
        let parked = api.lot.resume(&answers, false)?;
        return Ok(answer_resumed(api.clone(), &headers, &typed, parked, permit).await);
    }
    if typed.stream.0 {
        return run_completion(api.clone(), &headers, &typed, true, permit).await;
    }
    let fields = [
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stream",
    ];
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
    let endpoint = session_pick::model_endpoint(&api, &model).await?;
    let Picked {
        session,
        input,
        key,
    } = session_pick::pick(&api, headers, conversation, endpoint).await?;
    let asked = crate::client_tools::Asked {
        tools: request.tools.as_ref(),
        tool_choice: request.tool_choice.as_ref(),
        parallel_tool_calls: request.parallel_tool_calls.as_ref(),
    };
    let (answering, events) = crate::client_tools::start_run(&api, &session, input, asked, permit)?;
    let mut response = answer(&api, answering, events, model, stream, headers).await;
    if let Some(v) = key.and_then(|k| HeaderValue::from_str(&k).ok()) {
        response.headers_mut().insert("x-hermes-session-key", v);
    }
    Ok(response)
}

/// The answer of a request whose tool results resume a parked run: read on from where
/// the run parked, whole or streamed as this request asks.
async fn answer_resumed(
    api: Arc<Api>,
    headers: &HeaderMap,
    request: &ChatCompletionRequest,
    parked: Parked,
    permit: Option<OwnedSemaphorePermit>,
) -> Response {
    let model = request
        .model
        .0
        .clone()
        .unwrap_or_else(|| api.model_id.clone());
    let answering = Answering {
        tied: Tied::new(parked.run, permit),
        client: Some(parked.client),
        lot: api.lot.clone(),
    };
    let events = Some(parked.events);
    answer(&api, answering, events, model, request.stream.0, headers).await
}

/// A run's answer to its request, whole or streamed, naming the run and its session.
async fn answer(
    api: &Arc<Api>,
    answering: Answering,
    events: Option<RunEvents>,
    model: String,
    stream: bool,
    headers: &HeaderMap,
) -> Response {
    let run_id = answering.tied.run().id();
    let session_id = answering.tied.run().session_id();
    let ids = Ids {
        id: format!(
            "chatcmpl-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..29]
        ),
        created: crate::discovery::now_secs() as u64,
        model,
    };
    let mut response = if stream {
        streamed(answering, events, ids, wants_progress(headers))
    } else {
        whole(answering, events, ids, api.host.runtime().home.root()).await
    };
    let out = response.headers_mut();
    crate::tied::name_run(out, &run_id);
    if let Ok(v) = HeaderValue::from_str(&session_id) {
        out.insert("x-hermes-session-id", v);
    }
    response
}

/// The whole answer once the run ends, its image tags inlined. A client that goes away
/// first drops this future, and with it the tied run.
async fn whole(
    answering: Answering,
    events: Option<RunEvents>,
    ids: Ids,
    home: &std::path::Path,
) -> Response {
    let end = match (events, answering.client.is_some()) {
        (Some(mut events), true) => {
            let mut said = None;
            loop {
                let Some(e) = events.recv().await else {
                    break answering.tied.run().finished().await;
                };
                match e.kind {
                    RunEventKind::Progress(TurnProgress::MessageComplete { content, .. }) => {
                        said = content;
                    }
                    RunEventKind::Progress(TurnProgress::ClientCalls(calls)) => {
                        let outward = answering.park(events, &calls, None);
                        return Json(tool_calls_answer(ids, said, &outward)).into_response();
                    }
                    RunEventKind::Finished(end) => break end,
                    _ => {}
                }
            }
        }
        // Only the end is needed: the events are not queued.
        (events, _) => {
            drop(events);
            answering.tied.run().finished().await
        }
    };
    let text = media::inline_images(&end.output.clone().unwrap_or_default(), home);
    let reason = finish_reason(&end);
    if reason != "stop" && text.trim().is_empty() {
        let hermes = hermes_outcome(&end);
        let outcome = json!({"completed": hermes["completed"], "partial": hermes["partial"],
                             "failed": hermes["failed"], "retryable": end.retryable});
        let message = end
            .error
            .clone()
            .unwrap_or_else(|| "the agent produced no answer".into());
        return ApiError::agent_failed(message, outcome).into_response();
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
                content: Some(text),
                tool_calls: Vec::new(),
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

/// The request header that asks for `hermes.tool.progress` frames in the chunk stream:
/// sent only on request, since OpenAI clients take every frame for a chunk and fail on
/// one without `choices`.
pub const TOOL_PROGRESS_HEADER: &str = "x-hermes-tool-progress";

/// Whether the request carries `X-Hermes-Tool-Progress: 1` (or true/yes/on).
fn wants_progress(headers: &HeaderMap) -> bool {
    headers
        .get(TOOL_PROGRESS_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
}

/// The client's calls in OpenAI's shape: `{id, type, function: {name, arguments}}`.
fn tool_calls_of(calls: &[ClientCall]) -> Vec<Value> {
    calls
        .iter()
        .map(|c| json!({"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments.to_string()}}))
        .collect()
}

/// A whole answer that hands the client its tool calls (the run parked).
fn tool_calls_answer(ids: Ids, said: Option<String>, calls: &[ClientCall]) -> ChatCompletion {
    ChatCompletion {
        id: ids.id,
        object: "chat.completion".into(),
        created: ids.created,
        model: ids.model,
        choices: vec![ChatChoice {
            index: 0,
            message: AssistantMessage {
                role: "assistant".into(),
                content: said.filter(|t| !t.trim().is_empty()),
                tool_calls: tool_calls_of(calls),
            },
            finish_reason: "tool_calls".into(),
        }],
        usage: Usage {
            prompt_tokens: 0,
            completion_tokens: 0,
            total_tokens: 0,
        },
        hermes: None,
    }
}

/// The chunk stream; a reader that goes away (at once, even while nothing is written)
/// stops the run. `progress`: tool progress frames go out too.
fn streamed(answering: Answering, events: Option<RunEvents>, ids: Ids, progress: bool) -> Response {
    let (frames, response) = sse::channel();
    tokio::spawn(async move {
        if let Some(events) = events {
            let relay = Relay {
                ids: &ids,
                frames: &frames,
                progress,
            };
            // Dropped with the relay when the reader goes away: interrupts the run
            // unless it has ended or parked.
            frames.unless_gone(relay.run(events, answering)).await;
        }
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

/// One stream's relay of its run's events as chunks.
struct Relay<'a> {
    ids: &'a Ids,
    frames: &'a sse::Frames,
    progress: bool,
}

impl Relay<'_> {
    /// Passes the run's events on as chunks; false when the reader went away first.
    async fn run(&self, mut events: RunEvents, answering: Answering) -> bool {
        let (ids, frames, progress) = (self.ids, self.frames, self.progress);
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
                }) if progress && !name.starts_with('_') && !answering.is_client(&name) => {
                    let label = herald_session::preview::tool_preview(&name, &arguments, 80)
                        .unwrap_or_else(|| name.clone());
                    running.insert(call_id.clone());
                    let progress = json!({"tool": name, "emoji": "⚙", "label": label, "toolCallId": call_id, "status": "running"});
                    frames.event("hermes.tool.progress", &progress).await
                }
                RunEventKind::Progress(TurnProgress::ToolCompleted { call_id, name, .. })
                    if running.remove(&call_id) =>
                {
                    let progress =
                        json!({"tool": name, "toolCallId": call_id, "status": "completed"});
                    frames.event("hermes.tool.progress", &progress).await
                }
                RunEventKind::Progress(TurnProgress::Subagent(e)) if progress => {
                    subagent_progress(&e, &mut children, frames).await
                }
                RunEventKind::Progress(TurnProgress::ClientCalls(calls)) => {
                    return self.hand_over(events, answering, &calls).await;
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

    /// The client's calls as tool-call deltas and a `tool_calls` finish; the run is
    /// parked before the stream ends.
    async fn hand_over(
        &self,
        events: RunEvents,
        answering: Answering,
        calls: &[ClientCall],
    ) -> bool {
        let outward = answering.park(events, calls, None);
        let deltas: Vec<Value> = tool_calls_of(&outward)
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                c["index"] = json!(i);
                c
            })
            .collect();
        let chunk = self.ids.chunk(json!({"tool_calls": deltas}), None);
        let done = self.ids.chunk(json!({}), Some("tool_calls"));
        self.frames.data(&chunk).await
            && self.frames.data(&done).await
            && self.frames.raw("data: [DONE]\n\n".into()).await
    }
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

//! Hermes's sessions API (`/api/sessions*`, Hermes 0.19.0's `api_server.py`): the
//! stored sessions listed, created, read, retitled or ended, deleted, their messages,
//! forked, and one turn of chat in a session, whole or as Hermes's session SSE events.

use crate::body;
use crate::errors::ApiError;
use crate::session_pick::{self, open_or_resume};
use crate::tied::Tied;
use crate::wire::ErrorEnvelope;
use crate::{Api, content, sse};
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_session::{Answers, NewSession, RunEventKind, RunState, TurnProgress};
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// Most sessions one list answers (Hermes's cap).
const MAX_LIMIT: usize = 200;
/// The furthest a list pages in: the page is cut from the newest sessions.
const MAX_OFFSET: usize = 10_000;

fn answer(r: Result<Response, ApiError>) -> Response {
    r.unwrap_or_else(IntoResponse::into_response)
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(
        format!("Session not found: {id}"),
        Some("session_not_found"),
    )
}

/// A query's `name=value`, as given.
fn query_value<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A non-negative number of the query, else `default`, at most `max`.
fn number(query: &str, name: &str, default: usize, max: usize) -> usize {
    query_value(query, name)
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(default, |n| n.min(max))
}

/// A session as the API shows it: no system prompt, only whether there is one.
async fn session_object(api: &Api, id: &str) -> Result<Value, ApiError> {
    let row = api
        .host
        .session_row(id)
        .await
        .map_err(session_pick::run_error)?
        .ok_or_else(|| not_found(id))?;
    let usage = api
        .host
        .session_usage(id)
        .await
        .map_err(session_pick::run_error)?
        .unwrap_or_default();
    Ok(json!({
        "id": row.id, "source": row.source, "model": row.model, "title": row.title,
        "message_count": row.message_count, "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens, "api_call_count": usage.api_calls,
        "parent_session_id": row.parent_session_id,
        "has_system_prompt": row.system_prompt.as_deref().is_some_and(|s| !s.is_empty()),
        "has_model_config": row.model_config.as_deref().is_some_and(|s| !s.is_empty()),
    }))
}

fn session_answer(session: Value, status: StatusCode) -> Response {
    (
        status,
        Json(json!({"object": "hermes.session", "session": session})),
    )
        .into_response()
}

/// A body that must be a JSON object (an empty body is `{}`).
pub(crate) async fn object_of(
    api: &Api,
    headers: &HeaderMap,
    raw: Body,
) -> Result<Map<String, Value>, ApiError> {
    let admitted = body::admit(api, headers, raw).await?;
    if admitted.bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    body::object(
        &admitted.bytes,
        ApiError::bad_request("Invalid JSON in request body", None),
    )
}

/// A session id a client chose: what `X-Hermes-Session-Id` accepts; a new one when
/// none is given.
fn chosen_id(body: &Map<String, Value>) -> Result<String, ApiError> {
    let raw = body.get("id").or(body.get("session_id"));
    let Some(id) = raw
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
    else {
        let suffix = &uuid::Uuid::new_v4().simple().to_string()[..8];
        return Ok(format!(
            "api_{}_{suffix}",
            crate::discovery::now_secs() as u64
        ));
    };
    let bad = id.contains(['\r', '\n', '\0', '/', '\\']) || id.contains("..");
    if bad || id.chars().count() > 256 {
        return Err(ApiError::bad_request(
            "Invalid session ID",
            Some("invalid_session_id"),
        ));
    }
    Ok(id.to_owned())
}

#[utoipa::path(get, path = "/api/sessions", tag = "sessions", params(("limit" = Option<usize>, Query, description = "At most 200 (50)"), ("offset" = Option<usize>, Query, description = "Sessions skipped, newest first"), ("source" = Option<String>, Query, description = "Only sessions of this source (api_server, cli, telegram ...)")), responses((status = 200, description = "Stored sessions, newest first"), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope)))]
pub async fn list(State(api): State<Arc<Api>>, RawQuery(query): RawQuery) -> Response {
    let query = query.unwrap_or_default();
    let limit = number(&query, "limit", 50, MAX_LIMIT);
    let offset = number(&query, "offset", 0, MAX_OFFSET);
    let source = query_value(&query, "source").filter(|s| !s.is_empty());
    // Filtered by source, the page is cut from the newest MAX_OFFSET + MAX_LIMIT.
    let fetch = if source.is_some() {
        MAX_OFFSET + MAX_LIMIT
    } else {
        offset + limit
    };
    let all = match api.host.list_sessions(fetch).await {
        Ok(all) => all,
        Err(e) => return session_pick::run_error(e).into_response(),
    };
    let data: Vec<Value> = all
        .into_iter()
        .filter(|s| source.is_none_or(|src| s.source.as_deref() == Some(src)))
        .skip(offset)
        .take(limit)
        .map(|s| {
            json!({"id": s.id, "source": s.source, "title": s.title, "started_at": s.started_at,
                   "message_count": s.message_count, "last_active": s.updated_at, "preview": s.preview})
        })
        .collect();
    let more = data.len() == limit;
    Json(
        json!({"object": "list", "data": data, "limit": limit, "offset": offset, "has_more": more}),
    )
    .into_response()
}

#[utoipa::path(post, path = "/api/sessions", tag = "sessions", responses((status = 201, description = "Created: {object: hermes.session, session}"), (status = 400, description = "Bad id, system prompt or title", body = ErrorEnvelope), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 409, description = "session_exists", body = ErrorEnvelope)))]
pub async fn create(State(api): State<Arc<Api>>, headers: HeaderMap, raw: Body) -> Response {
    answer(create_session(&api, &headers, raw).await)
}

async fn create_session(api: &Api, headers: &HeaderMap, raw: Body) -> Result<Response, ApiError> {
    let body = object_of(api, headers, raw).await?;
    let id = chosen_id(&body)?;
    let system_prompt = match body.get("system_prompt") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(ApiError::bad_request(
                "system_prompt must be a string",
                Some("invalid_system_prompt"),
            ));
        }
    };
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .map_or_else(|| api.model_id.clone(), str::to_owned);
    let new = NewSession {
        id: id.clone(),
        source: "api_server".into(),
        model,
        system_prompt,
        ..NewSession::default()
    };
    if !api
        .host
        .create_session(new)
        .await
        .map_err(session_pick::run_error)?
    {
        return Err(ApiError::conflict(
            format!("Session already exists: {id}"),
            "session_exists",
        ));
    }
    if let Some(title) = body.get("title").and_then(Value::as_str) {
        retitle(api, &id, title).await.inspect_err(|_| {
            let (api, id) = (api.host.clone(), id.clone());
            tokio::spawn(async move { api.delete_session(&id).await });
        })?;
    }
    Ok(session_answer(
        session_object(api, &id).await?,
        StatusCode::CREATED,
    ))
}

async fn retitle(api: &Api, id: &str, title: &str) -> Result<(), ApiError> {
    match api
        .host
        .set_session_title(id, title.to_owned())
        .await
        .map_err(session_pick::run_error)?
    {
        Ok(_) => Ok(()),
        Err(refused) => Err(ApiError::bad_request(
            refused.to_string(),
            Some("invalid_title"),
        )),
    }
}

#[utoipa::path(get, path = "/api/sessions/{session_id}", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")), responses((status = 200, description = "{object: hermes.session, session}"), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "session_not_found", body = ErrorEnvelope)))]
pub async fn get(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    answer(
        session_object(&api, &id)
            .await
            .map(|s| session_answer(s, StatusCode::OK)),
    )
}

#[utoipa::path(patch, path = "/api/sessions/{session_id}", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")), responses((status = 200, description = "{object: hermes.session, session}"), (status = 400, description = "unsupported_session_field or invalid_title", body = ErrorEnvelope), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "session_not_found", body = ErrorEnvelope)))]
pub async fn patch(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    raw: Body,
) -> Response {
    answer(patch_session(&api, &id, &headers, raw).await)
}

async fn patch_session(
    api: &Api,
    id: &str,
    headers: &HeaderMap,
    raw: Body,
) -> Result<Response, ApiError> {
    session_object(api, id).await?;
    let body = object_of(api, headers, raw).await?;
    let mut unknown: Vec<&str> = body
        .keys()
        .map(String::as_str)
        .filter(|k| !matches!(*k, "title" | "end_reason"))
        .collect();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        return Err(ApiError::bad_request(
            format!("Unsupported session fields: {}", unknown.join(", ")),
            Some("unsupported_session_field"),
        ));
    }
    if let Some(title) = body.get("title") {
        let title = match title {
            Value::Null => String::new(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        retitle(api, id, &title).await?;
    }
    let reason = body
        .get("end_reason")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty());
    if let Some(reason) = reason {
        api.host
            .end_session(id, reason)
            .await
            .map_err(session_pick::run_error)?;
    }
    Ok(session_answer(
        session_object(api, id).await?,
        StatusCode::OK,
    ))
}

#[utoipa::path(delete, path = "/api/sessions/{session_id}", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")), responses((status = 200, description = "{object: hermes.session.deleted, id, deleted}"), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "session_not_found", body = ErrorEnvelope)))]
pub async fn delete(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    match api.host.delete_session(&id).await {
        Ok(true) => Json(json!({"object": "hermes.session.deleted", "id": id, "deleted": true}))
            .into_response(),
        Ok(false) => not_found(&id).into_response(),
        Err(e) => session_pick::run_error(e).into_response(),
    }
}

#[utoipa::path(get, path = "/api/sessions/{session_id}/messages", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")), responses((status = 200, description = "{object: list, session_id, data: messages}"), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "session_not_found", body = ErrorEnvelope)))]
pub async fn messages(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    answer(session_messages(&api, &id).await)
}

async fn session_messages(api: &Api, id: &str) -> Result<Response, ApiError> {
    session_object(api, id).await?;
    let rows = api
        .host
        .stored_messages(id)
        .await
        .map_err(session_pick::run_error)?;
    let data: Vec<Value> = rows
        .into_iter()
        .map(|m| {
            let calls = m
                .tool_calls
                .as_deref()
                .and_then(|t| serde_json::from_str::<Value>(t).ok());
            json!({"id": m.id, "session_id": id, "role": m.role, "content": m.content,
                   "tool_call_id": m.tool_call_id, "tool_calls": calls, "tool_name": m.tool_name,
                   "reasoning": m.reasoning})
        })
        .collect();
    Ok(Json(json!({"object": "list", "session_id": id, "data": data})).into_response())
}

#[utoipa::path(post, path = "/api/sessions/{session_id}/fork", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")), responses((status = 201, description = "The new session: {object: hermes.session, session}"), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "session_not_found", body = ErrorEnvelope), (status = 409, description = "session_exists", body = ErrorEnvelope)))]
pub async fn fork(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    raw: Body,
) -> Response {
    answer(fork_session(&api, &id, &headers, raw).await)
}

async fn fork_session(
    api: &Api,
    id: &str,
    headers: &HeaderMap,
    raw: Body,
) -> Result<Response, ApiError> {
    session_object(api, id).await?;
    let body = object_of(api, headers, raw).await?;
    let new_id = chosen_id(&body)?;
    if api
        .host
        .has_session(&new_id)
        .await
        .map_err(session_pick::run_error)?
    {
        return Err(ApiError::conflict(
            format!("Session already exists: {new_id}"),
            "session_exists",
        ));
    }
    let title = body.get("title").and_then(Value::as_str).map(str::to_owned);
    api.host
        .fork_session(id, &new_id, title)
        .await
        .map_err(session_pick::run_error)?
        .ok_or_else(|| not_found(id))?;
    Ok(session_answer(
        session_object(api, &new_id).await?,
        StatusCode::CREATED,
    ))
}

/// What a session chat request asks: its message and the system text for the turn.
struct SessionAsk {
    input: herald_protocol::UserInput,
    system: String,
}

fn ask_of(body: &Map<String, Value>) -> Result<SessionAsk, ApiError> {
    let message = body
        .get("message")
        .filter(|v| !v.is_null())
        .or(body.get("input"));
    let input = content::user_content(message).map_err(|e| e.at("message"))?;
    if input.text.trim().is_empty() && input.images.is_empty() {
        return Err(ApiError::bad_request(
            "Missing 'message' field",
            Some("missing_message"),
        ));
    }
    let system = match body.get("system_message").or(body.get("instructions")) {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(ApiError::bad_request(
                "system_message must be a string",
                Some("invalid_system_message"),
            ));
        }
    };
    Ok(SessionAsk { input, system })
}

/// One turn in session `id`, tied to the request.
async fn start_turn(
    api: &Arc<Api>,
    id: &str,
    headers: &HeaderMap,
    raw: Body,
) -> Result<Tied, ApiError> {
    session_object(api, id).await?;
    let body = object_of(api, headers, raw).await?;
    let permit = api.permit()?;
    let ask = ask_of(&body)?;
    let options = session_pick::options(Answers::Nobody, &ask.system, headers)?;
    let (session, _) = open_or_resume(api, id, options).await?;
    let run = api
        .host
        .start_run(&session, ask.input)
        .map_err(session_pick::run_error)?;
    Ok(Tied::new(run, permit))
}

fn session_headers(response: &mut Response, id: &str, headers: &HeaderMap) {
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(id) {
        h.insert("x-hermes-session-id", v);
    }
    if let Some(key) = headers.get("x-hermes-session-key").cloned() {
        h.insert("x-hermes-session-key", key);
    }
}

#[utoipa::path(post, path = "/api/sessions/{session_id}/chat", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")), responses((status = 200, description = "{object: hermes.session.chat.completion, session_id, message, usage}"), (status = 400, description = "missing_message", body = ErrorEnvelope), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "session_not_found", body = ErrorEnvelope), (status = 424, description = "agent_incomplete: the run failed without an answer", body = ErrorEnvelope), (status = 429, description = "At the concurrency cap", body = ErrorEnvelope)))]
pub async fn chat(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    raw: Body,
) -> Response {
    answer(session_chat(&api, &id, &headers, raw).await)
}

async fn session_chat(
    api: &Arc<Api>,
    id: &str,
    headers: &HeaderMap,
    raw: Body,
) -> Result<Response, ApiError> {
    let tied = start_turn(api, id, headers, raw).await?;
    drop(tied.run().take_events());
    // A client that goes away drops this future, and with it the tied run.
    let end = tied.run().finished().await;
    let text = end.output.clone().unwrap_or_default();
    if end.state != RunState::Completed && text.trim().is_empty() {
        let message = end
            .error
            .clone()
            .unwrap_or_else(|| "the agent produced no answer".into());
        let outcome = json!({"completed": false, "partial": end.partial, "failed": true, "retryable": end.retryable});
        return Err(ApiError::agent_failed(message, outcome));
    }
    let home = api.host.runtime().home.root();
    let text = crate::media::inline_images(&text, home);
    let mut response = Json(json!({
        "object": "hermes.session.chat.completion", "session_id": id,
        "message": {"role": "assistant", "content": text}, "usage": crate::token_usage(&end),
    }))
    .into_response();
    crate::tied::name_run(response.headers_mut(), &end.run_id);
    session_headers(&mut response, id, headers);
    Ok(response)
}

#[utoipa::path(post, path = "/api/sessions/{session_id}/chat/stream", tag = "sessions", params(("session_id" = String, Path, description = "The session's id")), responses((status = 200, description = "Hermes's session events: run.started, message.started, assistant.delta, tool.started, tool.completed, assistant.completed, run.completed, done", content_type = "text/event-stream"), (status = 400, description = "missing_message", body = ErrorEnvelope), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "session_not_found", body = ErrorEnvelope)))]
pub async fn chat_stream(
    State(api): State<Arc<Api>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    raw: Body,
) -> Response {
    answer(session_chat_stream(&api, &id, &headers, raw).await)
}

/// The numbered events of one session stream.
struct Told<'a> {
    frames: &'a sse::Frames,
    session_id: String,
    run_id: String,
    seq: u64,
}

impl Told<'_> {
    async fn tell(&mut self, name: &str, fields: Value) -> bool {
        self.seq += 1;
        let mut payload = match fields {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        payload.insert("session_id".into(), json!(self.session_id));
        payload.insert("run_id".into(), json!(self.run_id));
        payload.insert("seq".into(), json!(self.seq));
        payload.insert("ts".into(), json!(crate::discovery::now_secs()));
        self.frames.event(name, &Value::Object(payload)).await
    }
}

async fn session_chat_stream(
    api: &Arc<Api>,
    id: &str,
    headers: &HeaderMap,
    raw: Body,
) -> Result<Response, ApiError> {
    let tied = start_turn(api, id, headers, raw).await?;
    let events = tied.run().take_events();
    let (frames, mut response) = sse::channel();
    let run_id = tied.run().id();
    crate::tied::name_run(response.headers_mut(), &run_id);
    let session_id = id.to_owned();
    tokio::spawn(async move {
        let mut told = Told {
            frames: &frames,
            session_id,
            run_id,
            seq: 0,
        };
        if let Some(events) = events {
            frames.unless_gone(tell_run(&mut told, events)).await;
        }
        // Dropped here: interrupts the run unless it has ended.
        drop(tied);
    });
    session_headers(&mut response, id, headers);
    Ok(response)
}

/// A run's events as Hermes's session events; false when the reader went away.
async fn tell_run(told: &mut Told<'_>, mut events: herald_session::runs::RunEvents) -> bool {
    let message_id = format!("msg_{}", uuid::Uuid::new_v4().simple());
    if !told.tell("run.started", json!({})).await
        || !told
            .tell(
                "message.started",
                json!({"message": {"id": message_id, "role": "assistant"}}),
            )
            .await
    {
        return false;
    }
    let mut turn = Vec::new();
    while let Some(e) = events.recv().await {
        let sent = match e.kind {
            RunEventKind::Progress(TurnProgress::MessageDelta(d)) => {
                told.tell(
                    "assistant.delta",
                    json!({"message_id": message_id, "delta": d}),
                )
                .await
            }
            RunEventKind::Progress(TurnProgress::ToolStarted {
                name, arguments, ..
            }) => {
                let preview = herald_session::preview::tool_preview(&name, &arguments, 80);
                told.tell("tool.started", json!({"message_id": message_id, "tool_name": name, "preview": preview, "args": arguments})).await
            }
            RunEventKind::Progress(TurnProgress::ToolCompleted { name, is_error, .. }) => {
                let kind = if is_error {
                    "tool.failed"
                } else {
                    "tool.completed"
                };
                told.tell(kind, json!({"message_id": message_id, "tool_name": name}))
                    .await
            }
            RunEventKind::MessageSaved { message, .. } => {
                if message.role != herald_protocol::Role::User {
                    turn.push(message);
                }
                true
            }
            RunEventKind::Finished(end) => {
                let completed = end.state == RunState::Completed;
                let text = end.output.clone().or(end.error.clone()).unwrap_or_default();
                return told
                    .tell("assistant.completed", json!({"message_id": message_id, "content": text, "completed": completed, "partial": end.partial, "interrupted": end.state == RunState::Cancelled}))
                    .await
                    && told
                        .tell("run.completed", json!({"message_id": message_id, "completed": completed, "messages": turn, "usage": crate::token_usage(&end)}))
                        .await
                    && told.tell("done", json!({})).await;
            }
            _ => true,
        };
        if !sent {
            return false;
        }
    }
    true
}

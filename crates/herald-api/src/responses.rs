//! `POST /v1/responses` (§6), stateful: a response chains onto a stored one
//! (`previous_response_id`, or a named `conversation`'s latest), its history and
//! session carried on; `GET` and `DELETE /v1/responses/{id}`; and the streaming events
//! the `openai` SDK's `responses.stream()` helper needs, content parts included.

use crate::body;
use crate::content;
use crate::errors::ApiError;
use crate::session_pick::{self, open_or_resume};
use crate::tied::Tied;
use crate::wire::*;
use crate::{Api, idempotency, media, sse};
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use herald_protocol::{ChatMessage, Role, UserInput};
use herald_session::TurnProgress;
use herald_session::runs::RunEvents;
use herald_session::{Answers, RunEventKind, RunHandle, RunState, RunStatus, StoredResponse};
use serde_json::{Map, Value, json};
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;

/// What a request asks for, checked.
struct Ask {
    input: UserInput,
    history: Vec<ChatMessage>,
    instructions: Option<String>,
    conversation: Option<String>,
    session_id: String,
    store: bool,
    stream: bool,
    model: String,
}

/// One `input` item: a string (a user message) or `{role, content}`.
fn history_item(i: usize, v: &Value) -> Result<Option<ChatMessage>, ApiError> {
    match v {
        Value::String(s) => Ok(Some(ChatMessage::user(s.clone()))),
        Value::Object(o) => {
            let (Some(role), Some(c)) = (o.get("role").and_then(Value::as_str), o.get("content"))
            else {
                return Err(ApiError::bad_request(
                    "Each input item needs a role and content",
                    None,
                ));
            };
            content::message(role, Some(c), &format!("input[{i}].content"))
        }
        _ => Err(ApiError::bad_request(
            "Each input item must be a string or {role, content}",
            None,
        )),
    }
}

/// `input`: a string, or an array whose last user item is the new turn.
pub(crate) fn parse_input(v: Option<&Value>) -> Result<(UserInput, Vec<ChatMessage>), ApiError> {
    let mut items = match v {
        None | Some(Value::Null) => {
            return Err(ApiError::bad_request("Missing 'input' field", None));
        }
        Some(Value::String(s)) => vec![ChatMessage::user(s.clone())],
        Some(Value::Array(a)) => {
            let mut out = Vec::new();
            for (i, item) in a.iter().enumerate() {
                out.extend(history_item(i, item)?);
            }
            out
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "'input' must be a string or an array",
                None,
            ));
        }
    };
    match items.pop() {
        Some(m) if m.role == Role::User && content::has_payload(&m) => {
            Ok((content::input_of(m), items))
        }
        _ => Err(ApiError::bad_request(
            "No user message found in input",
            None,
        )),
    }
}

fn stored_history(r: &StoredResponse) -> Vec<ChatMessage> {
    serde_json::from_str(&r.history).unwrap_or_default()
}

async fn ask_of(api: &Api, request: &ResponseRequest) -> Result<Ask, ApiError> {
    let (input, mut history) = parse_input(request.input.as_ref())?;
    let mut instructions = request.instructions.text();
    let conversation = request.conversation.text();
    let mut previous = request.previous_response_id.text();
    if conversation.is_some() && previous.is_some() {
        return Err(ApiError::bad_request(
            "conversation and previous_response_id cannot be combined",
            None,
        ));
    }
    if let Some(c) = &conversation {
        previous = api
            .host
            .latest_response_of(c)
            .await
            .map_err(session_pick::run_error)?;
    }
    let mut session_id = uuid::Uuid::new_v4().to_string();
    if let Some(id) = &previous {
        let Some(prior) = api
            .host
            .response(id)
            .await
            .map_err(session_pick::run_error)?
        else {
            return Err(ApiError::not_found(
                format!("Previous response not found: {id}"),
                None,
            ));
        };
        let mut chained = stored_history(&prior);
        chained.extend(history);
        history = chained;
        session_id = prior.session_id.clone();
        instructions = instructions.or(prior.instructions);
    }
    match &request.conversation_history {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            let mut explicit = Vec::new();
            for (i, item) in items.iter().enumerate() {
                if !item.is_object() {
                    return Err(ApiError::bad_request(
                        "conversation_history entries need a role and content",
                        None,
                    ));
                }
                let m = history_item(i, item).map_err(|e| match e.param {
                    Some(_) => e.at(format!("conversation_history[{i}].content")),
                    None => e,
                })?;
                explicit.extend(m);
            }
            history = explicit;
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "conversation_history must be an array",
                None,
            ));
        }
    }
    if request.truncation.text().as_deref() == Some("auto") && history.len() > 100 {
        history.drain(..history.len() - 100);
    }
    Ok(Ask {
        input,
        history,
        instructions,
        conversation,
        session_id,
        store: request.store.as_ref().is_none_or(|v| body::truthy(Some(v))),
        stream: request.stream.0,
        model: request.model.text().unwrap_or_else(|| api.model_id.clone()),
    })
}

#[utoipa::path(post, path = "/v1/responses", tag = "responses", request_body = ResponseRequest, params(("Idempotency-Key" = Option<String>, Header, description = "Repeat-safe whole requests")), responses((status = 200, description = "The response, whole or as events", headers(("x-herald-run-id" = String, description = "The run that answers (a herald extension): read or stop it at /v1/runs/{run_id}")), content((ResponseObject = "application/json"), ("text/event-stream"))), (status = 400, description = "Bad request", body = ErrorEnvelope), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "Previous response not found", body = ErrorEnvelope), (status = 429, description = "At the concurrency cap (Retry-After)", body = ErrorEnvelope), (status = 503, description = "Draining for shutdown", body = ErrorEnvelope)))]
pub async fn create(State(api): State<Arc<Api>>, headers: HeaderMap, raw: Body) -> Response {
    match respond(api, headers, raw).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn respond(api: Arc<Api>, headers: HeaderMap, raw: Body) -> Result<Response, ApiError> {
    let admitted = body::admit(&api, &headers, raw).await?;
    let permit = api.permit()?;
    let crate::readers::Read {
        object: request,
        typed,
    } = crate::readers::response(&admitted.bytes, api.settings.max_messages)?;
    if typed.stream.0 {
        return run_response(api.clone(), &headers, &typed, permit).await;
    }
    let fields = [
        "input",
        "instructions",
        "previous_response_id",
        "conversation",
        "model",
        "tools",
    ];
    let make = || async {
        run_response(api.clone(), &headers, &typed, permit)
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

/// One response's run, answered whole or streamed.
async fn run_response(
    api: Arc<Api>,
    headers: &HeaderMap,
    request: &ResponseRequest,
    permit: Option<OwnedSemaphorePermit>,
) -> Result<Response, ApiError> {
    let ask = ask_of(&api, request).await?;
    let options = session_pick::options(
        Answers::Nobody,
        ask.instructions.as_deref().unwrap_or_default(),
    );
    let (session, _) = open_or_resume(&api, &ask.session_id, options).await?;
    session.adopt_history(ask.history.clone());
    session_pick::route_model(&api, &session, &ask.model);
    let run = api
        .host
        .start_run(&session, ask.input.clone())
        .map_err(session_pick::run_error)?;
    let run_id = run.id();
    let tied = Tied::new(run, permit);
    let turn = Turn {
        id: format!("resp_{}", &uuid::Uuid::new_v4().simple().to_string()[..28]),
        created_at: crate::discovery::now_secs() as u64,
        ask,
        api: api.clone(),
    };
    let mut response = if turn.ask.stream {
        let (frames, response) = sse::channel();
        // Taken before the task runs, so the run is paced from its first delta.
        let events = tied.run().take_events();
        tokio::spawn(async move {
            frames.unless_gone(turn.stream(events, &frames)).await;
            // Dropped here: interrupts the run unless it has ended.
            drop(tied);
        });
        response
    } else {
        // A client that goes away drops this future, and with it the tied run.
        Json(turn.collect(tied.run()).await).into_response()
    };
    let h = response.headers_mut();
    crate::tied::name_run(h, &run_id);
    if let Ok(v) = HeaderValue::from_str(session.id()) {
        h.insert("x-hermes-session-id", v);
    }
    if let Some(key) = headers.get("x-hermes-session-key").cloned() {
        h.insert("x-hermes-session-key", key);
    }
    Ok(response)
}

/// One response being made.
struct Turn {
    id: String,
    created_at: u64,
    ask: Ask,
    api: Arc<Api>,
}

/// What a run produced, as output items and messages.
#[derive(Default)]
struct Made {
    items: Vec<Value>,
    text: String,
    messages: Vec<ChatMessage>,
}

impl Made {
    /// Takes one event in; the item it adds, if any.
    fn take(&mut self, kind: &RunEventKind) -> Option<Value> {
        match kind {
            RunEventKind::Progress(TurnProgress::MessageDelta(t)) => {
                self.text.push_str(t);
                None
            }
            RunEventKind::Progress(TurnProgress::ToolStarted {
                call_id,
                name,
                arguments,
            }) => {
                let item = json!({"type": "function_call", "id": format!("fc_{call_id}"), "name": name, "arguments": arguments.to_string(), "call_id": call_id, "status": "completed"});
                self.items.push(item.clone());
                Some(item)
            }
            RunEventKind::Progress(TurnProgress::ToolCompleted {
                call_id, result, ..
            }) => {
                let item = json!({"type": "function_call_output", "id": format!("fco_{call_id}"), "call_id": call_id, "output": result, "status": "completed"});
                self.items.push(item.clone());
                Some(item)
            }
            RunEventKind::MessageSaved { message, .. } => {
                self.messages.push(message.clone());
                None
            }
            _ => None,
        }
    }
}

impl Turn {
    fn message_item(&self, text: &str, status: &str) -> Value {
        json!({"type": "message", "id": format!("msg_{}", &self.id[5..]), "status": status, "role": "assistant",
               "content": [{"type": "output_text", "text": text, "annotations": []}]})
    }

    fn object(&self, status: &str, output: Vec<Value>, end: Option<&RunStatus>) -> Value {
        let usage =
            (status == "completed").then(|| end.map(crate::token_usage).unwrap_or_default());
        let error = (status == "failed").then(|| {
            let message = end
                .and_then(|e| e.error.clone())
                .unwrap_or_else(|| "the run failed".into());
            json!({"message": message, "type": "server_error"})
        });
        let object = ResponseObject {
            id: self.id.clone(),
            object: "response".into(),
            status: status.into(),
            created_at: self.created_at,
            model: self.ask.model.clone(),
            output,
            usage,
            error,
        };
        serde_json::to_value(object).unwrap_or_default()
    }

    /// The final object: the current turn's items, the assistant message last.
    fn finish(&self, end: &RunStatus, made: &Made) -> Value {
        let text = match (&end.output, end.state) {
            (Some(t), RunState::Completed) => t.clone(),
            _ if !made.text.trim().is_empty() => made.text.clone(),
            _ => end
                .error
                .clone()
                .unwrap_or_else(|| "(No response generated)".into()),
        };
        let mut output = made.items.clone();
        output.push(self.message_item(&text, "completed"));
        let status = if end.state == RunState::Completed {
            "completed"
        } else {
            "failed"
        };
        self.object(status, output, Some(end))
    }

    async fn keep(&self, object: &Value, made: &Made) {
        if !self.ask.store {
            return;
        }
        let mut history = self.ask.history.clone();
        history.extend(made.messages.iter().cloned());
        let stored = StoredResponse {
            id: self.id.clone(),
            conversation: self.ask.conversation.clone(),
            session_id: self.ask.session_id.clone(),
            instructions: self.ask.instructions.clone(),
            history: serde_json::to_string(&history).unwrap_or_else(|_| "[]".into()),
            response: object.to_string(),
        };
        if let Err(e) = self
            .api
            .host
            .save_response(stored, self.api.settings.max_stored_responses)
            .await
        {
            tracing::warn!(response = %self.id, error = %e, "the response was not stored");
        }
    }

    async fn collect(&self, run: &RunHandle) -> Value {
        let mut made = Made::default();
        let Some(mut events) = run.take_events() else {
            return self.object("failed", Vec::new(), None);
        };
        while let Some(e) = events.recv().await {
            if let RunEventKind::Finished(end) = &e.kind {
                let mut end = end.clone();
                let home = self.api.host.runtime().home.root();
                end.output = end.output.map(|t| media::inline_images(&t, home));
                let object = self.finish(&end, &made);
                self.keep(&object, &made).await;
                return object;
            }
            made.take(&e.kind);
        }
        self.object("failed", Vec::new(), None)
    }

    /// Streams the events; false when the reader went away.
    async fn stream(&self, events: Option<RunEvents>, frames: &sse::Frames) -> bool {
        let mut out = Events { frames, n: 0 };
        let Some(mut events) = events else {
            return true;
        };
        let created = self.object("in_progress", Vec::new(), None);
        if self.ask.store {
            self.keep(&created, &Made::default()).await;
        }
        if !out
            .send("response.created", json!({"response": created}))
            .await
        {
            return false;
        }
        let mut made = Made::default();
        let mut text_open = false;
        let msg_id = format!("msg_{}", &self.id[5..]);
        while let Some(e) = events.recv().await {
            if let RunEventKind::Finished(end) = &e.kind {
                return self.close(&mut out, end, &made, text_open, &msg_id).await;
            }
            if let RunEventKind::Progress(TurnProgress::MessageDelta(t)) = &e.kind {
                let index = made.items.len();
                if !text_open {
                    text_open = true;
                    let item = json!({"id": msg_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []});
                    let part = json!({"type": "output_text", "text": "", "annotations": []});
                    if !out.send("response.output_item.added", json!({"output_index": index, "item": item})).await
                        || !out.send("response.content_part.added", json!({"item_id": msg_id, "output_index": index, "content_index": 0, "part": part})).await
                    {
                        return false;
                    }
                }
                if !out.send("response.output_text.delta", json!({"item_id": msg_id, "output_index": index, "content_index": 0, "delta": t, "logprobs": []})).await {
                    return false;
                }
            }
            let before = made.items.len();
            if let Some(item) = made.take(&e.kind) {
                let sent = match item["type"].as_str() {
                    Some("function_call") => {
                        let mut started = item.clone();
                        started["status"] = json!("in_progress");
                        out.send(
                            "response.output_item.added",
                            json!({"output_index": before, "item": started}),
                        )
                        .await
                    }
                    _ => {
                        let call = made
                            .items
                            .iter()
                            .rev()
                            .find(|i| {
                                i["type"] == "function_call" && i["call_id"] == item["call_id"]
                            })
                            .cloned()
                            .unwrap_or(Value::Null);
                        out.send(
                            "response.output_item.done",
                            json!({"output_index": before.saturating_sub(1), "item": call}),
                        )
                        .await
                            && out
                                .send(
                                    "response.output_item.added",
                                    json!({"output_index": before, "item": item}),
                                )
                                .await
                            && out
                                .send(
                                    "response.output_item.done",
                                    json!({"output_index": before, "item": item}),
                                )
                                .await
                    }
                };
                if !sent {
                    return false;
                }
            }
        }
        true
    }

    async fn close(
        &self,
        out: &mut Events<'_>,
        end: &RunStatus,
        made: &Made,
        text_open: bool,
        msg_id: &str,
    ) -> bool {
        let object = self.finish(end, made);
        let index = made.items.len();
        let text = object["output"][index]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if text_open {
            let part = json!({"type": "output_text", "text": text, "annotations": []});
            let ok = out.send("response.output_text.done", json!({"item_id": msg_id, "output_index": index, "content_index": 0, "text": text, "logprobs": []})).await
                && out.send("response.content_part.done", json!({"item_id": msg_id, "output_index": index, "content_index": 0, "part": part})).await
                && out.send("response.output_item.done", json!({"output_index": index, "item": object["output"][index]})).await;
            if !ok {
                return false;
            }
        }
        self.keep(&object, made).await;
        let kind = if object["status"] == "completed" {
            "response.completed"
        } else {
            "response.failed"
        };
        out.send(kind, json!({"response": object})).await
    }
}

/// The numbered event stream of one response.
struct Events<'a> {
    frames: &'a sse::Frames,
    n: u64,
}

impl Events<'_> {
    async fn send(&mut self, kind: &str, fields: Value) -> bool {
        let mut event = Map::new();
        event.insert("type".into(), json!(kind));
        if let Value::Object(f) = fields {
            event.extend(f);
        }
        event.insert("sequence_number".into(), json!(self.n));
        self.n += 1;
        self.frames.event(kind, &Value::Object(event)).await
    }
}

#[utoipa::path(get, path = "/v1/responses/{id}", tag = "responses", params(("id" = String, Path, description = "The response's id")), responses((status = 200, description = "The stored response", body = ResponseObject), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "Not stored", body = ErrorEnvelope), (status = 503, description = "store_unavailable: the store did not answer in time (Retry-After)", body = ErrorEnvelope)))]
pub async fn get(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    match api.host.response(&id).await {
        Ok(Some(r)) => {
            let object: Value = serde_json::from_str(&r.response).unwrap_or(Value::Null);
            Json(object).into_response()
        }
        Ok(None) => ApiError::not_found(format!("Response not found: {id}"), None).into_response(),
        Err(e) => session_pick::run_error(e).into_response(),
    }
}

#[utoipa::path(delete, path = "/v1/responses/{id}", tag = "responses", params(("id" = String, Path, description = "The response's id")), responses((status = 200, description = "Deleted", body = Deleted), (status = 401, description = "Missing or wrong bearer key", body = ErrorEnvelope), (status = 404, description = "Not stored", body = ErrorEnvelope)))]
pub async fn delete(State(api): State<Arc<Api>>, Path(id): Path<String>) -> Response {
    match api.host.delete_response(&id).await {
        Ok(true) => Json(Deleted {
            id,
            object: "response".into(),
            deleted: true,
        })
        .into_response(),
        Ok(false) => ApiError::not_found(format!("Response not found: {id}"), None).into_response(),
        Err(e) => session_pick::run_error(e).into_response(),
    }
}

//! `POST /v1/responses` (§6), stateful: a response chains onto a stored one
//! (`previous_response_id`, or a named `conversation`'s latest), its history and
//! session carried on; `GET` and `DELETE /v1/responses/{id}`; and the streaming events
//! the `openai` SDK's `responses.stream()` helper needs, content parts included.

use crate::body;
use crate::content;
use crate::errors::ApiError;
use crate::parked::{Answering, Carried, Parked};
use crate::session_pick::{self, open_or_resume};
use crate::tied::Tied;
use crate::wire::*;
use crate::{Api, idempotency, media, sse};
use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use herald_protocol::{ChatMessage, FunctionCall, Role, ToolCall, UserInput};
use herald_session::TurnProgress;
use herald_session::runs::RunEvents;
use herald_session::{Answers, ClientCall, RunEventKind, RunState, RunStatus, StoredResponse};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
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

/// What an `input` array becomes: the conversation, and the tool results its trailing
/// `function_call_output` items carry (a parked run's, to resume it).
struct Items {
    history: Vec<ChatMessage>,
    answers: Vec<(String, String)>,
}

/// A tool call's result text: a string, or output parts whose texts are joined.
fn output_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => String::new(),
        Some(other) => content::text_only(Some(other)),
    }
}

/// Appends a call to the assistant message being replayed (a new one when the last
/// message is not an assistant's).
fn add_call(history: &mut Vec<ChatMessage>, call_id: &str, name: &str, arguments: &Value) {
    let arguments = match arguments {
        Value::String(s) => s.clone(),
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    };
    let call = ToolCall {
        id: call_id.to_owned(),
        kind: "function".to_owned(),
        function: FunctionCall {
            name: name.to_owned(),
            arguments,
        },
    };
    match history.last_mut() {
        Some(m) if m.role == Role::Assistant => m.tool_calls.push(call),
        _ => history.push(ChatMessage {
            role: Role::Assistant,
            content: None,
            tool_calls: vec![call],
            ..ChatMessage::user("")
        }),
    }
}

/// The name of the replayed call `call_id` (its result carries it to the model).
fn call_name(history: &[ChatMessage], call_id: &str) -> String {
    history
        .iter()
        .rev()
        .flat_map(|m| m.tool_calls.iter())
        .find(|c| c.id == call_id)
        .map(|c| c.function.name.clone())
        .unwrap_or_default()
}

/// One `input` item into `items`: a string (a user message), `{role, content}` (a
/// `message`), or an item herald emits, replayed (`function_call`,
/// `function_call_output`, `mcp_call`; `mcp_list_tools` and `reasoning` carry nothing
/// the model needs).
fn take_item(i: usize, v: &Value, items: &mut Items) -> Result<(), ApiError> {
    let o = match v {
        Value::String(s) => {
            items.history.push(ChatMessage::user(s.clone()));
            items.answers.clear();
            return Ok(());
        }
        Value::Object(o) => o,
        _ => {
            return Err(ApiError::bad_request(
                "Each input item must be a string or {role, content}",
                None,
            ));
        }
    };
    let text = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or_default();
    match o.get("type").and_then(Value::as_str).unwrap_or("message") {
        "message" => {
            let (Some(role), Some(c)) = (o.get("role").and_then(Value::as_str), o.get("content"))
            else {
                return Err(ApiError::bad_request(
                    "Each input item needs a role and content",
                    None,
                ));
            };
            let m = content::message(role, Some(c), &format!("input[{i}].content"))?;
            items.history.extend(m);
        }
        "function_call" => {
            let args = o.get("arguments").unwrap_or(&Value::Null);
            add_call(&mut items.history, text("call_id"), text("name"), args);
        }
        "function_call_output" => {
            let (id, out) = (text("call_id").to_owned(), output_text(o.get("output")));
            let name = call_name(&items.history, &id);
            items
                .history
                .push(ChatMessage::tool_result(id.clone(), name, out.clone()));
            items.answers.push((id, out));
        }
        "mcp_call" => {
            // The item's id pairs the replayed call with its result.
            let call_id = text("id");
            let args = o.get("arguments").unwrap_or(&Value::Null);
            add_call(&mut items.history, call_id, text("name"), args);
            let out = match o.get("error") {
                Some(Value::String(e)) if !e.is_empty() => e.clone(),
                _ => output_text(o.get("output")),
            };
            let name = text("name").to_owned();
            items
                .history
                .push(ChatMessage::tool_result(call_id.to_owned(), name, out));
        }
        "mcp_list_tools" | "reasoning" | "item_reference" => {}
        other => {
            return Err(ApiError::bad_request(
                format!("Unsupported input item type '{other}'"),
                None,
            )
            .at(format!("input[{i}].type")));
        }
    }
    // The results after the last message answer a parked run (a replay's earlier
    // rounds among them are history).
    if matches!(
        o.get("type").and_then(Value::as_str),
        None | Some("message")
    ) {
        items.answers.clear();
    }
    Ok(())
}

/// What `input` asks for: a new turn (its user message, and the conversation before
/// it), or tool results for a parked run.
pub(crate) enum Asked {
    Turn(UserInput, Vec<ChatMessage>),
    Results(Vec<(String, String)>),
}

/// `input`: a string, or an array whose last user item is the new turn, or whose
/// trailing `function_call_output` items answer a parked run.
pub(crate) fn parse_input(v: Option<&Value>) -> Result<Asked, ApiError> {
    let mut items = Items {
        history: Vec::new(),
        answers: Vec::new(),
    };
    match v {
        None | Some(Value::Null) => {
            return Err(ApiError::bad_request("Missing 'input' field", None));
        }
        Some(Value::String(s)) => items.history.push(ChatMessage::user(s.clone())),
        Some(Value::Array(a)) => {
            for (i, item) in a.iter().enumerate() {
                take_item(i, item, &mut items)?;
            }
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "'input' must be a string or an array",
                None,
            ));
        }
    };
    if !items.answers.is_empty() {
        return Ok(Asked::Results(items.answers));
    }
    match items.history.pop() {
        Some(m) if m.role == Role::User && content::has_payload(&m) => {
            Ok(Asked::Turn(content::input_of(m), items.history))
        }
        _ => Err(ApiError::bad_request(
            "No user message found in input",
            None,
        )),
    }
}

fn is_reference(item: &Value) -> bool {
    item.get("type").and_then(Value::as_str) == Some("item_reference")
}

/// The stored response an item id of herald's names (`<kind>_<response>_<index>`).
fn response_of(item_id: &str) -> Option<String> {
    let (_, rest) = item_id.split_once('_')?;
    let (response, _) = rest.rsplit_once('_')?;
    Some(format!("resp_{response}"))
}

/// Replaces each `item_reference` in `input` with the item it names, read from the
/// stored response its id carries (clients that keep responses server-side send
/// earlier items by reference); one it cannot find is a 400.
async fn resolve_references(api: &Api, input: &mut Option<Value>) -> Result<(), ApiError> {
    let Some(Value::Array(items)) = input else {
        return Ok(());
    };
    if !items.iter().any(is_reference) {
        return Ok(());
    }
    let mut outputs: HashMap<String, Vec<Value>> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    // What the references bring in counts against the body limit, as if sent whole.
    let mut room = usize::try_from(api.settings.max_body_bytes).unwrap_or(usize::MAX);
    for (i, item) in items.iter_mut().enumerate() {
        if !is_reference(item) {
            continue;
        }
        let id = item
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let missing = || {
            ApiError::bad_request(format!("Item not found: {id}"), Some("item_not_found"))
                .at(format!("input[{i}].id"))
        };
        if !seen.insert(id.clone()) {
            return Err(ApiError::bad_request(
                format!("Duplicate item found with id {id}"),
                Some("duplicate_item"),
            )
            .at(format!("input[{i}].id")));
        }
        let response = response_of(&id).ok_or_else(missing)?;
        if !outputs.contains_key(&response) {
            let stored = api
                .host
                .response(&response)
                .await
                .map_err(session_pick::run_error)?;
            let output = stored
                .and_then(|r| serde_json::from_str::<Value>(&r.response).ok())
                .and_then(|v| v.get("output").and_then(Value::as_array).cloned())
                .unwrap_or_default();
            outputs.insert(response.clone(), output);
        }
        let found = outputs[&response].iter().find(|o| o["id"] == id.as_str());
        let found = found.cloned().ok_or_else(missing)?;
        room = room.checked_sub(found.to_string().len()).ok_or_else(|| {
            ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                "The referenced items are larger than a request body may be",
                Some("body_too_large"),
            )
        })?;
        *item = found;
    }
    Ok(())
}

/// One `conversation_history` entry: `{role, content}`.
fn history_item(i: usize, v: &Value) -> Result<Option<ChatMessage>, ApiError> {
    let (Some(role), Some(c)) = (v.get("role").and_then(Value::as_str), v.get("content")) else {
        return Err(ApiError::bad_request(
            "Each input item needs a role and content",
            None,
        ));
    };
    content::message(role, Some(c), &format!("input[{i}].content"))
}

fn stored_history(r: &StoredResponse) -> Vec<ChatMessage> {
    serde_json::from_str(&r.history).unwrap_or_default()
}

async fn ask_of(
    api: &Api,
    request: &ResponseRequest,
    input: UserInput,
    mut history: Vec<ChatMessage>,
) -> Result<Ask, ApiError> {
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
        mut typed,
    } = crate::readers::response(&admitted.bytes, api.settings.max_messages)?;
    resolve_references(&api, &mut typed.input).await?;
    let (input, history) = match parse_input(typed.input.as_ref())? {
        Asked::Results(answers) => {
            let parked = api.lot.resume(&answers, true)?;
            return Ok(resume(api.clone(), &headers, &typed, parked, permit).await);
        }
        Asked::Turn(input, history) => (input, history),
    };
    let ask = ask_of(&api, &typed, input, history).await?;
    if typed.stream.0 {
        return run_response(api.clone(), &headers, &typed, ask, permit).await;
    }
    let fields = [
        "input",
        "instructions",
        "previous_response_id",
        "conversation",
        "model",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
    ];
    let make = || async {
        run_response(api.clone(), &headers, &typed, ask, permit)
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
    ask: Ask,
    permit: Option<OwnedSemaphorePermit>,
) -> Result<Response, ApiError> {
    let options = session_pick::options(
        Answers::Nobody,
        ask.instructions.as_deref().unwrap_or_default(),
        headers,
    )?;
    let endpoint = session_pick::model_endpoint(&api, &ask.model).await?;
    let (session, _) = open_or_resume(&api, &ask.session_id, options).await?;
    session.adopt_history(ask.history.clone());
    if let Some(endpoint) = endpoint {
        session.set_endpoint(endpoint);
    }
    let asked = crate::client_tools::Asked {
        tools: request.tools.as_ref(),
        tool_choice: request.tool_choice.as_ref(),
        parallel_tool_calls: request.parallel_tool_calls.as_ref(),
    };
    let input = ask.input.clone();
    let (answering, events) = crate::client_tools::start_run(&api, &session, input, asked, permit)?;
    Ok(answer(api, headers, ask, answering, events).await)
}

/// The answer of a request whose `function_call_output` items resume a parked run.
async fn resume(
    api: Arc<Api>,
    headers: &HeaderMap,
    request: &ResponseRequest,
    parked: Parked,
    permit: Option<OwnedSemaphorePermit>,
) -> Response {
    let carried = parked.carried.unwrap_or_default();
    let ask = Ask {
        input: UserInput::default(),
        history: carried.history,
        instructions: carried.instructions,
        conversation: carried.conversation,
        session_id: parked.run.session_id(),
        store: request
            .store
            .as_ref()
            .map_or(carried.store, |v| body::truthy(Some(v))),
        stream: request.stream.0,
        model: request.model.text().unwrap_or(carried.model),
    };
    let answering = Answering {
        tied: Tied::new(parked.run, permit),
        client: Some(parked.client),
        lot: api.lot.clone(),
    };
    answer(api, headers, ask, answering, Some(parked.events)).await
}

/// A run's response, whole or streamed, naming the run and its session.
async fn answer(
    api: Arc<Api>,
    headers: &HeaderMap,
    ask: Ask,
    answering: Answering,
    events: Option<RunEvents>,
) -> Response {
    let run_id = answering.tied.run().id();
    let session_id = answering.tied.run().session_id();
    let turn = Turn {
        id: format!("resp_{}", &uuid::Uuid::new_v4().simple().to_string()[..28]),
        created_at: crate::discovery::now_secs() as u64,
        ask,
        api: api.clone(),
    };
    let mut response = if turn.ask.stream {
        let (frames, response) = sse::channel();
        tokio::spawn(async move {
            // Dropped with the stream when the reader goes away: interrupts the run
            // unless it has ended or parked.
            frames
                .unless_gone(turn.stream(events, answering, &frames))
                .await;
        });
        response
    } else {
        // A client that goes away drops this future, and with it the tied run.
        Json(turn.collect(events, answering).await).into_response()
    };
    let h = response.headers_mut();
    crate::tied::name_run(h, &run_id);
    if let Ok(v) = HeaderValue::from_str(&session_id) {
        h.insert("x-hermes-session-id", v);
    }
    if let Some(key) = headers.get("x-hermes-session-key").cloned() {
        h.insert("x-hermes-session-key", key);
    }
    response
}

/// One response being made.
struct Turn {
    id: String,
    created_at: u64,
    ask: Ask,
    api: Arc<Api>,
}

/// The stream events of one step, in order: (type, fields).
type Steps = Vec<(&'static str, Value)>;

/// What a run produced, as output items and messages.
#[derive(Default)]
struct Made {
    /// The response's id without `resp_`: every item id is `<kind>_<this>_<index>`, so
    /// an `item_reference` finds its response.
    of: String,
    items: Vec<Value>,
    /// herald's own calls in progress: their item's index, by call id.
    calls: HashMap<String, usize>,
    /// The message item open for text: its index in `items`, and its text so far.
    open: Option<(usize, String)>,
    messages: Vec<ChatMessage>,
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({"type": "message", "id": id, "status": status, "role": "assistant",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

impl Made {
    fn new(response_id: &str) -> Made {
        Made {
            of: response_id.trim_start_matches("resp_").to_owned(),
            ..Made::default()
        }
    }

    /// The id of the next item, of `kind` (`msg`, `mcp`, `fc`).
    fn next_id(&self, kind: &str) -> String {
        format!("{kind}_{}_{}", self.of, self.items.len())
    }

    /// Closes the open message item with `text` (its streamed text when `None`).
    fn close_text(&mut self, text: Option<&str>) -> Steps {
        let Some((index, streamed)) = self.open.take() else {
            return Vec::new();
        };
        let text = text.unwrap_or(&streamed);
        let id = self.items[index]["id"].clone();
        let id = id.as_str().unwrap_or_default();
        self.items[index] = message_item(id, text, "completed");
        let part = json!({"type": "output_text", "text": text, "annotations": []});
        vec![
            (
                "response.output_text.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}),
            ),
            (
                "response.content_part.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
            ),
            (
                "response.output_item.done",
                json!({"output_index": index, "item": self.items[index]}),
            ),
        ]
    }

    fn delta(&mut self, t: &str) -> Steps {
        let mut steps = Vec::new();
        let index = match &mut self.open {
            Some((index, text)) => {
                text.push_str(t);
                *index
            }
            None => {
                let index = self.items.len();
                let id = self.next_id("msg");
                let item = json!({"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []});
                self.items.push(item.clone());
                self.open = Some((index, t.to_owned()));
                let part = json!({"type": "output_text", "text": "", "annotations": []});
                steps.push((
                    "response.output_item.added",
                    json!({"output_index": index, "item": item}),
                ));
                steps.push((
                    "response.content_part.added",
                    json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
                ));
                index
            }
        };
        let id = self.items[index]["id"].clone();
        steps.push(("response.output_text.delta", json!({"item_id": id, "output_index": index, "content_index": 0, "delta": t, "logprobs": []})));
        steps
    }

    /// One of herald's own tool calls starts: an `mcp_call` item, in progress.
    fn tool_started(&mut self, call_id: &str, name: &str, arguments: &Value, label: &str) -> Steps {
        let mut steps = self.close_text(None);
        let index = self.items.len();
        let id = self.next_id("mcp");
        self.calls.insert(call_id.to_owned(), index);
        let args = arguments.to_string();
        let item = json!({"type": "mcp_call", "id": id, "server_label": label, "name": name,
                          "arguments": args, "output": null, "error": null, "status": "in_progress"});
        // Added with no arguments yet, as OpenAI does: they follow as deltas.
        let mut added = item.clone();
        added["arguments"] = json!("");
        self.items.push(item);
        steps.push((
            "response.output_item.added",
            json!({"output_index": index, "item": added}),
        ));
        steps.push((
            "response.mcp_call.in_progress",
            json!({"item_id": id, "output_index": index}),
        ));
        steps.push((
            "response.mcp_call_arguments.delta",
            json!({"item_id": id, "output_index": index, "delta": args}),
        ));
        steps.push((
            "response.mcp_call_arguments.done",
            json!({"item_id": id, "output_index": index, "arguments": args}),
        ));
        steps
    }

    /// One of herald's own tool calls ended: its item completed (or failed).
    fn tool_completed(&mut self, call_id: &str, result: &str, is_error: bool) -> Steps {
        let Some(index) = self.calls.remove(call_id) else {
            return Vec::new();
        };
        let id = self.items[index]["id"].clone();
        let item = &mut self.items[index];
        if is_error {
            item["error"] = json!(result);
            item["status"] = json!("failed");
        } else {
            item["output"] = json!(result);
            item["status"] = json!("completed");
        }
        let kind = match is_error {
            true => "response.mcp_call.failed",
            false => "response.mcp_call.completed",
        };
        vec![
            (kind, json!({"item_id": id, "output_index": index})),
            (
                "response.output_item.done",
                json!({"output_index": index, "item": self.items[index]}),
            ),
        ]
    }

    /// The client's calls: `function_call` items, for the client to run.
    fn client_calls(&mut self, calls: &[ClientCall]) -> Steps {
        let mut steps = self.close_text(None);
        for c in calls {
            let index = self.items.len();
            let item = json!({"type": "function_call", "id": self.next_id("fc"), "call_id": c.call_id,
                              "name": c.name, "arguments": c.arguments.to_string(), "status": "completed"});
            self.items.push(item.clone());
            steps.push((
                "response.output_item.added",
                json!({"output_index": index, "item": item}),
            ));
            steps.push((
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            ));
        }
        steps
    }
}

/// How a run's step is shown: its stream events, or that the run parked.
enum Shown {
    Steps(Steps),
    Parked(Vec<ClientCall>),
    Ended(RunStatus),
}

impl Turn {
    /// The `server_label` of a tool: its MCP server's name (as its tool names carry
    /// it, `mcp__<server>__<tool>`), else `herald`.
    fn label_of(tool: &str) -> String {
        tool.strip_prefix("mcp__")
            .and_then(|rest| rest.split_once("__"))
            .map_or_else(|| "herald".to_owned(), |(server, _)| server.to_owned())
    }

    /// Takes one event into `made`.
    fn show(&self, made: &mut Made, kind: RunEventKind, answering: &Answering) -> Shown {
        let steps = match kind {
            RunEventKind::Progress(TurnProgress::MessageDelta(t)) => made.delta(&t),
            RunEventKind::Progress(TurnProgress::ToolStarted {
                call_id,
                name,
                arguments,
            }) if !answering.is_client(&name) => {
                made.tool_started(&call_id, &name, &arguments, &Self::label_of(&name))
            }
            RunEventKind::Progress(TurnProgress::ToolCompleted {
                call_id,
                name,
                result,
                is_error,
            }) if !answering.is_client(&name) => made.tool_completed(&call_id, &result, is_error),
            RunEventKind::Progress(TurnProgress::ClientCalls(calls)) => {
                return Shown::Parked(calls);
            }
            RunEventKind::MessageSaved { message, .. } => {
                made.messages.push(message);
                Vec::new()
            }
            RunEventKind::Finished(end) => return Shown::Ended(end),
            _ => Vec::new(),
        };
        Shown::Steps(steps)
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

    /// The run's end: the open message closed with the final text (or one added), and
    /// the final object.
    fn finish(&self, end: &RunStatus, made: &mut Made) -> (Steps, Value) {
        let home = self.api.host.runtime().home.root();
        let text = match (&end.output, end.state) {
            (Some(t), RunState::Completed) => media::inline_images(t, home),
            _ => match &made.open {
                Some((_, t)) if !t.trim().is_empty() => t.clone(),
                _ => end
                    .error
                    .clone()
                    .unwrap_or_else(|| "(No response generated)".into()),
            },
        };
        let steps = if made.open.is_some() {
            made.close_text(Some(&text))
        } else {
            let id = made.next_id("msg");
            made.items.push(message_item(&id, &text, "completed"));
            Vec::new()
        };
        let status = if end.state == RunState::Completed {
            "completed"
        } else {
            "failed"
        };
        (steps, self.object(status, made.items.clone(), Some(end)))
    }

    /// The object of a response whose run parked for the client's calls.
    fn parked(&self, made: &mut Made, calls: &[ClientCall]) -> (Steps, Value) {
        let steps = made.client_calls(calls);
        (steps, self.object("completed", made.items.clone(), None))
    }

    /// The conversation so far: the history before the turn, and the turn's messages.
    fn history(&self, made: &Made) -> Vec<ChatMessage> {
        let mut history = self.ask.history.clone();
        history.extend(made.messages.iter().cloned());
        history
    }

    fn carried(&self, made: &Made) -> Carried {
        Carried {
            conversation: self.ask.conversation.clone(),
            instructions: self.ask.instructions.clone(),
            store: self.ask.store,
            model: self.ask.model.clone(),
            history: self.history(made),
        }
    }

    async fn keep(&self, object: &Value, made: &Made) {
        if !self.ask.store {
            return;
        }
        let stored = StoredResponse {
            id: self.id.clone(),
            conversation: self.ask.conversation.clone(),
            session_id: self.ask.session_id.clone(),
            instructions: self.ask.instructions.clone(),
            history: serde_json::to_string(&self.history(made)).unwrap_or_else(|_| "[]".into()),
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

    async fn collect(&self, events: Option<RunEvents>, answering: Answering) -> Value {
        let mut made = Made::new(&self.id);
        let Some(mut events) = events else {
            return self.object("failed", Vec::new(), None);
        };
        while let Some(e) = events.recv().await {
            match self.show(&mut made, e.kind, &answering) {
                Shown::Steps(_) => {}
                Shown::Parked(calls) => {
                    let carried = Some(self.carried(&made));
                    let outward = answering.park(events, &calls, carried);
                    let (_, object) = self.parked(&mut made, &outward);
                    self.keep(&object, &made).await;
                    return object;
                }
                Shown::Ended(end) => {
                    let (_, object) = self.finish(&end, &mut made);
                    self.keep(&object, &made).await;
                    return object;
                }
            }
        }
        self.object("failed", Vec::new(), None)
    }

    /// Streams the events; false when the reader went away.
    async fn stream(
        &self,
        events: Option<RunEvents>,
        answering: Answering,
        frames: &sse::Frames,
    ) -> bool {
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
        let mut made = Made::new(&self.id);
        while let Some(e) = events.recv().await {
            let (steps, object, kind) = match self.show(&mut made, e.kind, &answering) {
                Shown::Steps(steps) => {
                    if !out.send_all(steps).await {
                        return false;
                    }
                    continue;
                }
                Shown::Parked(calls) => {
                    let carried = Some(self.carried(&made));
                    let outward = answering.park(events, &calls, carried);
                    let (steps, object) = self.parked(&mut made, &outward);
                    self.keep(&object, &made).await;
                    (steps, object, "response.completed")
                }
                Shown::Ended(end) => {
                    let (steps, object) = self.finish(&end, &mut made);
                    self.keep(&object, &made).await;
                    let kind = match object["status"] == "completed" {
                        true => "response.completed",
                        false => "response.failed",
                    };
                    (steps, object, kind)
                }
            };
            return out.send_all(steps).await && out.send(kind, json!({"response": object})).await;
        }
        true
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

    async fn send_all(&mut self, steps: Steps) -> bool {
        for (kind, fields) in steps {
            if !self.send(kind, fields).await {
                return false;
            }
        }
        true
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_is_labelled_with_its_mcp_server_or_herald() {
        assert_eq!(Turn::label_of("mcp__github__list_issues"), "github");
        assert_eq!(Turn::label_of("read_file"), "herald");
        assert_eq!(Turn::label_of("mcp__broken"), "herald");
    }

    #[test]
    fn replayed_items_become_the_conversation_and_trailing_results_answers() {
        let input = json!([
            {"role": "user", "content": "go"},
            {"type": "mcp_call", "id": "mcp_a_0", "name": "read_file", "arguments": "{}", "output": "x", "error": null, "status": "completed"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "one"},
            {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "two"}]},
        ]);
        let Ok(Asked::Results(answers)) = parse_input(Some(&input)) else {
            panic!("results expected");
        };
        assert_eq!(
            answers,
            vec![
                ("c1".to_owned(), "one".to_owned()),
                ("c2".to_owned(), "two".to_owned())
            ]
        );
        let mut next = input.as_array().unwrap().clone();
        next.push(json!({"role": "user", "content": "and now?"}));
        let Ok(Asked::Turn(turn, history)) = parse_input(Some(&Value::Array(next))) else {
            panic!("a turn expected");
        };
        assert_eq!(turn.text, "and now?");
        let roles: Vec<&str> = history.iter().map(|m| m.role.as_str()).collect();
        assert_eq!(
            roles,
            [
                "user",
                "assistant",
                "tool",
                "assistant",
                "tool",
                "assistant",
                "tool"
            ]
        );
        assert_eq!(
            history[6].name.as_deref(),
            Some("f"),
            "named after its call"
        );
    }
}

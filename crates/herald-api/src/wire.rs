//! The API's wire types: the request bodies the handlers read into and the answers
//! they write, and the OpenAPI document (`/openapi.json`) made from these same types, so
//! the two cannot drift. Each handler names its types in its `#[utoipa::path]`, and the
//! router registers every handler with its path entry (`lib.rs`).
//!
//! Requests are read as Hermes reads them (api-server.md §5): an unknown field is
//! ignored, `"stream": "yes"` is a yes ([`Truthy`]), a field of the wrong type is as
//! if absent ([`Lenient`]), and the fields whose wrong shapes have their own 400s
//! (`messages`, `input`, `conversation_history`, `request_id`) come as JSON values for
//! the handler to check. Reading a request body into these types never fails.

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

/// A request body (a JSON object already) read into its type.
pub fn read<T: DeserializeOwned + Default>(body: &Map<String, Value>) -> T {
    // Every field is lenient, so only a bug could fail here: then nothing was given.
    T::deserialize(body).unwrap_or_default()
}

/// A `stream`-style boolean: JSON booleans and 1/true/yes/on (any case) are yes;
/// anything else, a wrong type included, is no.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Truthy(pub bool);

impl<'de> Deserialize<'de> for Truthy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Truthy, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(Truthy(crate::body::truthy(Some(&v))))
    }
}

/// A field taken when it has its type and ignored otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lenient<T>(pub Option<T>);

impl<T> Default for Lenient<T> {
    fn default() -> Lenient<T> {
        Lenient(None)
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Lenient<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Lenient<T>, D::Error> {
        let v = Value::deserialize(d)?;
        Ok(Lenient(serde_json::from_value(v).ok()))
    }
}

impl Lenient<String> {
    /// The text trimmed, unless it is empty.
    pub fn text(&self) -> Option<String> {
        self.0
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    }

    /// The text as given, or empty.
    pub fn or_empty(&self) -> String {
        self.0.clone().unwrap_or_default()
    }
}

/// The document's frame: title, the bearer scheme every route but health requires.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "herald API",
        description = "The OpenAI-compatible HTTP API of herald (chat completions, responses, runs with live events)."
    ),
    modifiers(&BearerAuth),
    security(("bearer" = []))
)]
pub struct Doc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The OpenAI error envelope every failure answers with (§2).
#[derive(Serialize, ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub message: String,
    /// `invalid_request_error`, `server_error` or `rate_limit_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The field at fault (left out, with `code`, on the short answers Hermes gives
    /// for some 400s; else `null` when there is none).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub param: Option<Option<String>>,
    /// A machine string such as `invalid_api_key` or `run_not_found`, where one exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub code: Option<Option<String>>,
    /// How the run ended, on an `agent_incomplete` answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hermes: Option<Value>,
}

#[derive(Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
    #[schema(example = "hermes-agent")]
    pub platform: String,
    /// The Hermes version herald speaks.
    #[schema(example = "0.19.0")]
    pub version: String,
    /// herald's own version.
    pub herald_version: String,
}

/// `GET /health/detailed`: readiness, drain state and active agents.
#[derive(Serialize, ToSchema)]
pub struct HealthDetailed {
    /// `ok` or `draining`.
    pub status: String,
    /// `{ready, api_server}`.
    pub readiness: Value,
    pub platform: String,
    /// The Hermes version herald speaks.
    pub version: String,
    pub herald_version: String,
    /// `running` or `draining`.
    pub gateway_state: String,
    /// `{api_server: {state}}`.
    pub platforms: Value,
    pub active_agents: usize,
    pub gateway_busy: bool,
    pub gateway_drainable: bool,
    pub exit_reason: Option<String>,
    pub updated_at: f64,
    pub pid: u32,
}

#[derive(Serialize, ToSchema)]
pub struct ModelList {
    #[schema(example = "list")]
    pub object: String,
    pub data: Vec<Model>,
}

#[derive(Serialize, ToSchema)]
pub struct Model {
    pub id: String,
    #[schema(example = "model")]
    pub object: String,
    pub created: u64,
    pub owned_by: String,
    pub permission: Vec<Value>,
    /// The model an alias routes to.
    pub root: String,
    /// The advertised model, for an alias.
    pub parent: Option<String>,
}

/// `GET /v1/capabilities`: what this server offers, for clients that probe.
#[derive(Serialize, ToSchema)]
pub struct Capabilities {
    pub object: String,
    pub platform: String,
    pub model: String,
    pub auth: Value,
    pub runtime: Value,
    pub features: Value,
    /// By name: `{method, path}`.
    pub endpoints: Value,
}

/// `GET /api/model/options`: the providers and models a picker offers, in Hermes's
/// `build_models_payload` shape. The session host builds it for every door (RPC
/// `model.options` too); this type documents it.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ModelOptions {
    /// Each provider: `slug`, `name`, `is_current`, `is_user_defined`, `models` (ids),
    /// `total_models`, `source`, `api_url` (user-defined ones), `authenticated`,
    /// `capabilities`.
    pub providers: Vec<Value>,
    /// The model in use.
    pub model: String,
    /// The provider in use (a row's `slug`).
    pub provider: String,
}

/// One chat message; `content` is a string or an array of content parts. It documents
/// the items of `messages` and `conversation_history`, which the handlers read as JSON
/// to answer each bad item with its own 400.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct ChatMessageIn {
    #[schema(example = "user")]
    pub role: String,
    pub content: Value,
}

/// `POST /v1/chat/completions`.
#[derive(Default, Deserialize, ToSchema)]
pub struct ChatCompletionRequest {
    /// The conversation: history, then the new user message last.
    #[schema(value_type = Vec<ChatMessageIn>)]
    pub messages: Option<Value>,
    /// An advertised model id or a configured alias; the default model otherwise.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub model: Lenient<String>,
    /// Answer as `text/event-stream` chunks ending in `data: [DONE]`.
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    pub stream: Truthy,
    /// Functions the client runs itself, offered to the model beside herald's own
    /// tools; their calls come back with `finish_reason: tool_calls`.
    #[schema(value_type = Option<Vec<Value>>)]
    pub tools: Option<Value>,
    /// `none`, `auto`, `required` or one function (the first provider call only,
    /// except `none`).
    #[schema(value_type = Option<Value>)]
    pub tool_choice: Option<Value>,
    #[schema(value_type = Option<bool>)]
    pub parallel_tool_calls: Option<Value>,
}

#[derive(Serialize, ToSchema)]
pub struct ChatCompletion {
    pub id: String,
    #[schema(example = "chat.completion")]
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChatChoice>,
    pub usage: Usage,
    /// How the run ended, when it did not complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hermes: Option<Value>,
}

#[derive(Serialize, ToSchema)]
pub struct ChatChoice {
    pub index: u32,
    pub message: AssistantMessage,
    /// `stop`, `length` or `error`.
    pub finish_reason: String,
}

#[derive(Serialize, ToSchema)]
pub struct AssistantMessage {
    #[schema(example = "assistant")]
    pub role: String,
    /// The answer's text (`null` beside tool calls with no text).
    pub content: Option<String>,
    /// The calls of the request's own tools the client is to run (`finish_reason:
    /// tool_calls`); herald's own tools never appear here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tool_calls: Vec<Value>,
}

/// One `data:` frame of a streamed completion.
#[derive(Serialize, ToSchema)]
pub struct ChatCompletionChunk {
    pub id: String,
    #[schema(example = "chat.completion.chunk")]
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChunkChoice>,
    /// On the finishing chunk only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// On a finishing chunk that did not complete: `{message, type}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    /// On a finishing chunk that did not complete: how the run ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hermes: Option<Value>,
}

#[derive(Serialize, ToSchema)]
pub struct ChunkChoice {
    pub index: u32,
    /// `{role}`, `{content}`, or empty on the finishing chunk.
    pub delta: Value,
    pub finish_reason: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

/// `POST /v1/responses`: stateful, chained by `previous_response_id` or `conversation`.
#[derive(Default, Deserialize, ToSchema)]
pub struct ResponseRequest {
    /// A string, or items whose last user item is the new turn: `{role, content}`
    /// messages and the items herald emits, replayed (`mcp_call`, `function_call`,
    /// `function_call_output`, `mcp_list_tools`); trailing `function_call_output`
    /// items resume the run that waits for them.
    #[schema(value_type = Value)]
    pub input: Option<Value>,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub instructions: Lenient<String>,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub previous_response_id: Lenient<String>,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub conversation: Lenient<String>,
    #[schema(value_type = Option<Vec<ChatMessageIn>>)]
    pub conversation_history: Option<Value>,
    /// Keep the response for chaining and `GET` (default true).
    #[schema(value_type = Option<bool>)]
    pub store: Option<Value>,
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    pub stream: Truthy,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub model: Lenient<String>,
    /// `auto` keeps the last 100 history items.
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub truncation: Lenient<String>,
    /// Functions the client runs itself (`{type: function, name, parameters}`); their
    /// calls come back as `function_call` items of a completed response.
    #[schema(value_type = Option<Vec<Value>>)]
    pub tools: Option<Value>,
    #[schema(value_type = Option<Value>)]
    pub tool_choice: Option<Value>,
    #[schema(value_type = Option<bool>)]
    pub parallel_tool_calls: Option<Value>,
}

#[derive(Serialize, ToSchema)]
pub struct ResponseObject {
    pub id: String,
    #[schema(example = "response")]
    pub object: String,
    /// `in_progress` (while streaming), `completed` or `failed`.
    pub status: String,
    pub created_at: u64,
    pub model: String,
    /// Message items, `mcp_call` items (herald's own tool calls, run on the server)
    /// and `function_call` items (the calls of the request's own tools, for the client
    /// to run).
    pub output: Vec<Value>,
    /// Once completed: `{input_tokens, output_tokens, total_tokens}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    /// Once failed: `{message, type}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
}

#[derive(Serialize, ToSchema)]
pub struct Deleted {
    pub id: String,
    #[schema(example = "response")]
    pub object: String,
    pub deleted: bool,
}

/// `POST /v1/runs`.
#[derive(Default, Deserialize, ToSchema)]
pub struct RunRequest {
    /// A non-empty string, or items whose last `content` is the user message.
    #[schema(value_type = Value)]
    pub input: Option<Value>,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub instructions: Lenient<String>,
    #[schema(value_type = Option<Vec<ChatMessageIn>>)]
    pub conversation_history: Option<Value>,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub session_id: Lenient<String>,
    #[schema(value_type = Option<String>)]
    #[serde(default)]
    pub model: Lenient<String>,
}

#[derive(Serialize, ToSchema)]
pub struct RunStarted {
    #[schema(example = "run_0123456789abcdef0123456789abcdef")]
    pub run_id: String,
    #[schema(example = "started")]
    pub status: String,
}

/// `GET /v1/runs/{run_id}`.
#[derive(Serialize, ToSchema)]
pub struct RunStatusObject {
    #[schema(example = "hermes.run")]
    pub object: String,
    pub run_id: String,
    /// `queued`, `running`, `waiting_for_approval`, `stopping`, `completed`, `failed`
    /// or `cancelled`.
    pub status: String,
    pub created_at: f64,
    pub updated_at: f64,
    pub session_id: String,
    pub model: String,
    pub last_event: Option<String>,
    /// Once completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// Once completed: `{input_tokens, output_tokens, total_tokens}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_steer: Option<String>,
}

/// One `data:` frame of `GET /v1/runs/{run_id}/events`.
#[derive(Serialize, ToSchema)]
pub struct RunEventFrame {
    /// `message.delta`, `tool.started`, `tool.completed`, `reasoning.available`,
    /// `approval.request`, `approval.responded`, `run.steered`, `run.completed`,
    /// `run.failed` or `run.cancelled`.
    pub event: String,
    pub run_id: String,
    pub timestamp: f64,
    /// The event's own fields (`delta`, `tool`, `request_id`, `output` ...).
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub fields: Map<String, Value>,
}

/// `POST /v1/runs/{run_id}/approval`.
#[derive(Default, Deserialize, ToSchema)]
pub struct ApprovalRequest {
    /// `once`, `session`, `always` or `deny` (`approve`, `approved`, `allow`: once).
    #[schema(value_type = String)]
    #[serde(default)]
    pub choice: Lenient<String>,
    /// Resolve every pending request, not only the oldest.
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    pub all: Truthy,
    /// The same as `all`.
    #[schema(value_type = Option<bool>)]
    #[serde(default)]
    pub resolve_all: Truthy,
    /// Resolve this one request.
    #[schema(value_type = Option<String>)]
    pub request_id: Option<Value>,
}

#[derive(Serialize, ToSchema)]
pub struct ApprovalAnswer {
    #[schema(example = "hermes.run.approval_response")]
    pub object: String,
    pub run_id: String,
    pub choice: String,
    pub resolved: usize,
}

#[derive(Serialize, ToSchema)]
pub struct Stopping {
    pub run_id: String,
    #[schema(example = "stopping")]
    pub status: String,
}

/// `POST /v1/runs/{run_id}/steer`: the first non-empty of `input`, `message`, `text`
/// (each a string or content parts).
#[derive(Default, Deserialize, ToSchema)]
pub struct SteerRequest {
    #[schema(value_type = Option<Value>)]
    pub input: Option<Value>,
    #[schema(value_type = Option<Value>)]
    pub message: Option<Value>,
    #[schema(value_type = Option<Value>)]
    pub text: Option<Value>,
}

#[derive(Serialize, ToSchema)]
pub struct Steered {
    #[schema(example = "hermes.run.steer")]
    pub object: String,
    pub run_id: String,
    pub accepted: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn bodies_are_read_as_hermes_reads_them_and_never_refused_by_their_types() {
        let chat: ChatCompletionRequest = read(&body(json!({
            "stream": "YES", "model": 5, "messages": "not a list", "tools": 1, "extra": true,
        })));
        assert!(chat.stream.0, "the strings 1/true/yes/on are yes");
        assert_eq!(
            chat.model.0, None,
            "a model that is no string is as if absent"
        );
        assert_eq!(
            chat.messages,
            Some(json!("not a list")),
            "checked by the handler"
        );
        for no in [json!("off"), json!({"a": 1}), json!(2), json!(null)] {
            let r: ChatCompletionRequest = read(&body(json!({"stream": no})));
            assert!(!r.stream.0, "{no}");
        }
        let responses: ResponseRequest = read(&body(json!({
            "store": null, "instructions": "  be brief ", "conversation": ["x"], "truncation": "auto",
        })));
        assert_eq!(
            responses.store, None,
            "a null store keeps the default (true)"
        );
        assert_eq!(responses.instructions.text().as_deref(), Some("be brief"));
        assert_eq!(responses.conversation.text(), None);
        let approval: ApprovalRequest = read(&body(
            json!({"choice": 1, "resolve_all": "on", "request_id": 7}),
        ));
        assert_eq!(approval.choice.0, None);
        assert!(approval.resolve_all.0 && !approval.all.0);
        assert_eq!(
            approval.request_id,
            Some(json!(7)),
            "answered with its own 400"
        );
        let run: RunRequest = read(&body(json!({"session_id": "  ", "model": "m"})));
        assert_eq!(
            (run.session_id.text(), run.model.or_empty()),
            (None, "m".to_owned())
        );
    }

    #[test]
    fn answers_are_written_in_the_documented_shape() {
        let frame = RunEventFrame {
            event: "message.delta".into(),
            run_id: "run_1".into(),
            timestamp: 1.5,
            fields: body(json!({"delta": "hi"})),
        };
        assert_eq!(
            serde_json::to_string(&frame).unwrap(),
            r#"{"event":"message.delta","run_id":"run_1","timestamp":1.5,"delta":"hi"}"#
        );
        let short = ErrorBody {
            message: "m".into(),
            kind: "invalid_request_error".into(),
            param: None,
            code: None,
            hermes: None,
        };
        assert_eq!(
            serde_json::to_value(&short).unwrap(),
            json!({"message": "m", "type": "invalid_request_error"})
        );
    }
}

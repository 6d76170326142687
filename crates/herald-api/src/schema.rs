//! The wire shapes of the API for its OpenAPI document (`/openapi.json`).
//!
//! The handlers read bodies field by field, as Hermes does (`"stream": "yes"` is a
//! yes, an unknown field is ignored), so these types describe the wire rather than
//! being parsed into; each handler names them in its `#[utoipa::path]`, and the
//! router registers every handler and its path entry together (`lib.rs`), so the
//! document lists exactly the routes served.
#![allow(dead_code)]

use serde_json::Value;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi, ToSchema};

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
#[derive(ToSchema)]
pub struct ErrorEnvelope {
    pub error: ErrorBody,
}

#[derive(ToSchema)]
pub struct ErrorBody {
    pub message: String,
    /// `invalid_request_error`, `server_error` or `rate_limit_error`.
    #[schema(rename = "type")]
    pub kind: String,
    pub param: Option<String>,
    /// A machine string such as `invalid_api_key` or `run_not_found`, where one exists.
    pub code: Option<String>,
}

#[derive(ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
    #[schema(example = "hermes-agent")]
    pub platform: String,
    pub version: String,
}

/// `GET /health/detailed`: readiness, drain state and active agents.
#[derive(ToSchema)]
pub struct HealthDetailed {
    pub status: String,
    pub gateway_state: String,
    pub active_agents: u64,
    pub gateway_busy: bool,
    pub pid: u32,
}

#[derive(ToSchema)]
pub struct ModelList {
    #[schema(example = "list")]
    pub object: String,
    pub data: Vec<Model>,
}

#[derive(ToSchema)]
pub struct Model {
    pub id: String,
    #[schema(example = "model")]
    pub object: String,
    pub created: u64,
    pub owned_by: String,
}

/// `GET /v1/capabilities`: what this server offers, for clients that probe.
#[derive(ToSchema)]
pub struct Capabilities {
    pub object: String,
    pub platform: String,
    pub features: Value,
    pub endpoints: Value,
}

/// `GET /api/model/options`: the providers and models a picker offers.
#[derive(ToSchema)]
pub struct ModelOptions {
    pub current: Value,
    pub providers: Vec<Value>,
}

/// One chat message; `content` is a string or an array of content parts.
#[derive(ToSchema)]
pub struct ChatMessageIn {
    #[schema(example = "user")]
    pub role: String,
    pub content: Value,
}

/// `POST /v1/chat/completions`.
#[derive(ToSchema)]
pub struct ChatCompletionRequest {
    /// The conversation: history, then the new user message last.
    pub messages: Vec<ChatMessageIn>,
    /// An advertised model id or a configured alias; the default model otherwise.
    pub model: Option<String>,
    /// Answer as `text/event-stream` chunks ending in `data: [DONE]`.
    pub stream: Option<bool>,
    pub tools: Option<Vec<Value>>,
    pub tool_choice: Option<Value>,
}

#[derive(ToSchema)]
pub struct ChatCompletion {
    pub id: String,
    #[schema(example = "chat.completion")]
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChatChoice>,
    pub usage: Usage,
}

#[derive(ToSchema)]
pub struct ChatChoice {
    pub index: u32,
    pub message: ChatMessageIn,
    /// `stop`, `length` or `error`.
    pub finish_reason: String,
}

/// One `data:` frame of a streamed completion.
#[derive(ToSchema)]
pub struct ChatCompletionChunk {
    pub id: String,
    #[schema(example = "chat.completion.chunk")]
    pub object: String,
    pub created: u64,
    pub model: String,
    pub choices: Vec<Value>,
    /// On the finishing chunk only.
    pub usage: Option<Usage>,
}

#[derive(ToSchema)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
}

/// `POST /v1/responses`: stateful, chained by `previous_response_id` or `conversation`.
#[derive(ToSchema)]
pub struct ResponseRequest {
    /// A string, or items of `{role, content}` whose last user item is the new turn.
    pub input: Value,
    pub instructions: Option<String>,
    pub previous_response_id: Option<String>,
    pub conversation: Option<String>,
    pub conversation_history: Option<Vec<ChatMessageIn>>,
    /// Keep the response for chaining and `GET` (default true).
    pub store: Option<bool>,
    pub stream: Option<bool>,
    pub model: Option<String>,
    /// `auto` keeps the last 100 history items.
    pub truncation: Option<String>,
}

#[derive(ToSchema)]
pub struct ResponseObject {
    pub id: String,
    #[schema(example = "response")]
    pub object: String,
    /// `completed`, `incomplete` or `failed`.
    pub status: String,
    pub created_at: u64,
    pub model: String,
    /// Message, function call and function call output items.
    pub output: Vec<Value>,
    pub usage: Value,
}

#[derive(ToSchema)]
pub struct Deleted {
    pub id: String,
    #[schema(example = "response")]
    pub object: String,
    pub deleted: bool,
}

/// `POST /v1/runs`.
#[derive(ToSchema)]
pub struct RunRequest {
    /// A non-empty string, or items whose last `content` is the user message.
    pub input: Value,
    pub instructions: Option<String>,
    pub previous_response_id: Option<String>,
    pub conversation_history: Option<Vec<ChatMessageIn>>,
    pub session_id: Option<String>,
    pub model: Option<String>,
}

#[derive(ToSchema)]
pub struct RunStarted {
    #[schema(example = "run_0123456789abcdef0123456789abcdef")]
    pub run_id: String,
    #[schema(example = "started")]
    pub status: String,
}

/// `GET /v1/runs/{run_id}`.
#[derive(ToSchema)]
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
    pub output: Option<String>,
    pub usage: Option<Value>,
    pub error: Option<String>,
    pub pending_steer: Option<String>,
}

/// One `data:` frame of `GET /v1/runs/{run_id}/events`.
#[derive(ToSchema)]
pub struct RunEventFrame {
    /// `message.delta`, `tool.started`, `tool.completed`, `reasoning.available`,
    /// `approval.request`, `approval.responded`, `run.steered`, `run.completed`,
    /// `run.failed` or `run.cancelled`.
    pub event: String,
    pub run_id: String,
    pub timestamp: f64,
}

/// `POST /v1/runs/{run_id}/approval`.
#[derive(ToSchema)]
pub struct ApprovalRequest {
    /// `once`, `session`, `always` or `deny` (`approve`, `approved`, `allow`: once).
    pub choice: String,
    /// Resolve every pending request, not only the oldest (`resolve_all` too).
    pub all: Option<bool>,
    /// Resolve this one request.
    pub request_id: Option<String>,
}

#[derive(ToSchema)]
pub struct ApprovalAnswer {
    #[schema(example = "hermes.run.approval_response")]
    pub object: String,
    pub run_id: String,
    pub choice: String,
    pub resolved: u32,
}

#[derive(ToSchema)]
pub struct Stopping {
    pub run_id: String,
    #[schema(example = "stopping")]
    pub status: String,
}

/// `POST /v1/runs/{run_id}/steer`: the first non-empty of `input`, `message`, `text`.
#[derive(ToSchema)]
pub struct SteerRequest {
    pub input: Option<Value>,
    pub message: Option<Value>,
    pub text: Option<Value>,
}

#[derive(ToSchema)]
pub struct Steered {
    #[schema(example = "hermes.run.steer")]
    pub object: String,
    pub run_id: String,
    pub accepted: bool,
}

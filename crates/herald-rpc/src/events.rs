//! The payloads of the gateway's `event` notifications (rpc-gateway.md §6) as typed
//! structs, in Hermes's field names.

use serde::Serialize;
use serde_json::{Map, Value};

/// `gateway.ready`.
#[derive(Debug, Serialize)]
pub struct Ready {
    pub skin: Skin,
}

#[derive(Debug, Serialize)]
pub struct Skin {
    pub name: &'static str,
}

/// `session.info`, also part of a session made live.
#[derive(Debug, Clone, Serialize)]
pub struct Info {
    pub model: Option<String>,
    pub provider: String,
    pub tools: Tools,
    /// Installed skill → its description.
    pub skills: Map<String, Value>,
    pub cwd: String,
    pub branch: &'static str,
    pub project: Option<String>,
    pub lazy: bool,
    pub desktop_contract: u32,
    pub profile_name: &'static str,
}

/// The session's tools, under the toolset Hermes's TUI shows them in.
#[derive(Debug, Clone, Serialize)]
pub struct Tools {
    #[serde(rename = "hermes-cli")]
    pub hermes_cli: Vec<String>,
}

/// `tool.start`.
#[derive(Debug, Serialize)]
pub struct ToolStart {
    pub tool_id: String,
    pub name: String,
    pub context: String,
    pub args_text: String,
}

/// `tool.complete`.
#[derive(Debug, Serialize)]
pub struct ToolComplete {
    pub tool_id: String,
    pub name: String,
    pub args: Value,
    /// The result as JSON when it is JSON, else its text.
    pub result: Value,
    pub duration_s: f64,
    pub error: bool,
}

/// `approval.request`.
#[derive(Debug, Serialize)]
pub struct ApprovalRequest {
    pub request_id: String,
    pub command: String,
    pub description: String,
    /// The danger's key (what an `always` answer allows from then on).
    pub pattern_key: String,
    pub pattern_keys: [String; 1],
    pub allow_permanent: bool,
    pub smart_denied: bool,
    pub choices: [&'static str; 4],
}

/// `clarify.request`.
#[derive(Debug, Serialize)]
pub struct ClarifyRequest {
    pub request_id: String,
    pub question: String,
    pub choices: Option<Vec<String>>,
}

/// A turn's token counters.
#[derive(Debug, Serialize)]
pub struct TurnUsage {
    pub input: u64,
    pub output: u64,
    pub total: u64,
    pub calls: u32,
}

/// `message.complete`.
#[derive(Debug, Serialize)]
pub struct MessageComplete {
    pub text: String,
    pub usage: TurnUsage,
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_steer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
}

/// `message.interim`: the text of a step that goes on to call tools.
#[derive(Debug, Serialize)]
pub struct Interim {
    pub text: String,
    pub already_streamed: bool,
}

/// `{text}`: `message.delta`, `reasoning.delta`, `reasoning.available`.
#[derive(Debug, Serialize)]
pub struct Text<'a> {
    pub text: &'a str,
}

/// `error`.
#[derive(Debug, Serialize)]
pub struct Failed {
    pub message: String,
}

/// `status.update`.
#[derive(Debug, Serialize)]
pub struct StatusUpdate {
    pub kind: &'static str,
    pub text: String,
}

/// `background.complete`.
#[derive(Debug, Serialize)]
pub struct BackgroundComplete {
    pub task_id: String,
    pub text: String,
}

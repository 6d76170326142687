//! The payloads of the gateway's `event` notifications (rpc-gateway.md §6) as typed
//! structs, in Hermes's field names.

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// `gateway.ready`.
#[derive(Debug, Serialize)]
pub struct Ready {
    pub skin: Skin,
}

#[derive(Debug, Serialize)]
pub struct Skin {
    pub name: &'static str,
}

/// `session.info`, also part of a session made live, in Hermes's fields (herald's
/// values where herald has the feature; the off values where it has not).
#[derive(Debug, Clone, Serialize)]
pub struct Info {
    pub model: String,
    pub provider: String,
    pub reasoning_effort: String,
    pub service_tier: &'static str,
    pub fast: bool,
    pub yolo: bool,
    /// `approvals.mode`: `manual`, `smart` or `off`.
    pub approval_mode: String,
    /// Toolset → its tools this session offers.
    pub tools: BTreeMap<String, Vec<String>>,
    /// Category → installed skills.
    pub skills: BTreeMap<String, Vec<String>>,
    pub cwd: String,
    /// The git branch of `cwd`, or "".
    pub branch: String,
    pub project: Option<String>,
    pub personality: &'static str,
    pub running: bool,
    pub title: String,
    pub stored_session_id: String,
    pub desktop_contract: u32,
    pub version: &'static str,
    pub release_date: &'static str,
    pub update_behind: Option<i64>,
    pub update_command: &'static str,
    pub usage: crate::results::Usage,
    pub profile_name: &'static str,
    pub mcp_servers: [(); 0],
    pub system_prompt: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credential_warning: Option<String>,
}

/// `tool.start`.
#[derive(Debug, Serialize)]
pub struct ToolStart {
    pub tool_id: String,
    pub name: String,
    pub context: String,
    pub args_text: String,
}

/// `tool.progress`: a running tool's line (a long-running tool's time, a child's step).
#[derive(Debug, Serialize)]
pub struct ToolProgress {
    pub tool_id: String,
    pub name: String,
    pub preview: String,
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

/// `sudo.request`, `sudo.expire` and `secret.expire`: the request's id alone.
#[derive(Debug, Serialize)]
pub struct Expired {
    pub request_id: String,
}

/// `secret.request`.
#[derive(Debug, Serialize)]
pub struct SecretAsk {
    pub prompt: String,
    pub env_var: String,
    pub metadata: SecretMetadata,
    pub request_id: String,
}

#[derive(Debug, Serialize)]
pub struct SecretMetadata {
    pub skill_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_for: Option<String>,
}

/// `subagent.start`, `.thinking`, `.tool`, `.progress` and `.complete`: the fields
/// Hermes's TUI draws its spawn tree from (the optional ones left out when unset).
#[derive(Debug, Serialize)]
pub struct Subagent {
    pub goal: String,
    pub task_count: usize,
    pub task_index: usize,
    pub subagent_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    pub child_session_id: String,
    pub depth: u32,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub model: String,
    pub tool_count: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub toolsets: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_preview: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_calls: Option<u32>,
}

impl From<herald_session::SubagentEvent> for Subagent {
    fn from(e: herald_session::SubagentEvent) -> Subagent {
        let tool_preview = match e.kind {
            herald_session::SubagentKind::Tool => e.text.clone(),
            _ => None,
        };
        Subagent {
            goal: e.goal,
            task_count: e.task_count,
            task_index: e.task_index,
            subagent_id: e.subagent_id,
            parent_id: e.parent_id,
            child_session_id: e.child_session_id,
            depth: e.depth,
            model: e.model,
            tool_count: e.tool_count,
            toolsets: e.toolsets,
            tool_name: e.tool_name,
            text: e.text,
            tool_preview,
            status: e.status,
            summary: e.summary,
            duration_seconds: e.duration_seconds,
            input_tokens: e.input_tokens,
            output_tokens: e.output_tokens,
            api_calls: e.api_calls,
        }
    }
}

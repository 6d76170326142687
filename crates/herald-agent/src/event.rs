//! The one typed stream of what the agent does; every front door maps it to its wire.

use serde_json::Value;

/// Something that happened during a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// The turn's progress, as front doors show it.
    Progress(TurnProgress),
    /// The model asked the human a question (`clarify`).
    ClarifyRequested {
        call_id: String,
        question: String,
    },
    /// A guarded action waits for a human decision.
    ApprovalRequested {
        call_id: String,
        command: String,
        reason: String,
    },
    /// A message was added to the conversation (user, assistant or tool): front doors
    /// persist it as it happens.
    MessageAppended(herald_protocol::ChatMessage),
    TurnCompleted {
        final_response: String,
    },
    TurnFailed {
        error: String,
    },
}

/// What a turn shows as it goes: passed through the session host to every front door
/// unchanged (inside its run events).
#[derive(Debug, Clone, PartialEq)]
pub enum TurnProgress {
    /// Assistant text as it streams.
    MessageDelta(String),
    /// Reasoning text as it streams.
    ReasoningDelta(String),
    /// The assistant message of one API call is complete.
    MessageComplete {
        content: Option<String>,
        tool_calls: usize,
    },
    ToolStarted {
        call_id: String,
        name: String,
        arguments: Value,
    },
    ToolCompleted {
        call_id: String,
        name: String,
        result: String,
        is_error: bool,
    },
    /// The answer's calls of client tools, after herald's own calls of it ran: the run
    /// waits for their results (sent back through the front door).
    ClientCalls(Vec<crate::client_tool::ClientCall>),
    /// A child agent of `delegate_task` started, worked or finished.
    Subagent(Box<SubagentEvent>),
}

/// What a child agent did, with the fields Hermes's TUI draws its spawn tree from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SubagentEvent {
    pub kind: SubagentKind,
    /// The id of the `delegate_task` call that started it.
    pub call_id: String,
    pub subagent_id: String,
    /// The subagent that delegated (`None`: the session's own agent).
    pub parent_id: Option<String>,
    pub child_session_id: String,
    /// 1 for a child of the session's agent, 2 for a grandchild...
    pub depth: u32,
    pub goal: String,
    /// Its place in the call's batch (from 0) and the batch's size.
    pub task_index: usize,
    pub task_count: usize,
    pub model: String,
    pub toolsets: Vec<String>,
    pub tool_count: usize,
    /// The tool it called (`Tool`).
    pub tool_name: Option<String>,
    /// The text shown: the tool's preview, the reasoning, the goal at the start.
    pub text: Option<String>,
    /// Its end: `completed`, `failed`, `interrupted`, `timeout` (`Complete`).
    pub status: Option<String>,
    pub summary: Option<String>,
    pub duration_seconds: Option<f64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub api_calls: Option<u32>,
}

/// Which step of a child agent a [`SubagentEvent`] tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubagentKind {
    #[default]
    Start,
    /// It reasons (the text so far).
    Thinking,
    /// It calls a tool.
    Tool,
    /// Other progress (steered).
    Progress,
    Complete,
}

impl SubagentKind {
    /// The event's name on the gateway's wire (`subagent.start` ...).
    pub fn name(self) -> &'static str {
        match self {
            SubagentKind::Start => "subagent.start",
            SubagentKind::Thinking => "subagent.thinking",
            SubagentKind::Tool => "subagent.tool",
            SubagentKind::Progress => "subagent.progress",
            SubagentKind::Complete => "subagent.complete",
        }
    }
}

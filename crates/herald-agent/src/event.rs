//! The one typed stream of what the agent does; every front door maps it to its wire.

use serde_json::Value;

/// Something that happened during a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
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
    /// A guarded action waits for a human decision.
    /// The model asked the human a question (`clarify`).
    ClarifyRequested {
        call_id: String,
        question: String,
    },
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

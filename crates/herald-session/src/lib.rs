//! The session host: the layer every front door (webhook runs, `herald chat`, the HTTP
//! API, the JSON-RPC gateway and ACP) goes through to reach the agent core.
//!
//! It owns what a front door must not build for itself:
//! - the [`Runtime`] of a profile: the model chosen from the `model` blocks, the tool
//!   registry with the configured terminal, web and vision tools, the skills library,
//!   SOUL.md, the middleware and observers, the limits and retries, and one
//!   [`ApprovalPolicy`] (`approvals.*`, `command_allowlist`, the hard-line floor)
//!   applied the same way on every surface;
//! - [`Session`]s, through the [`Host`]: opened, resumed, branched and rewound (the
//!   confirmation rules of the gateway protocol), the system prompt built in one place,
//!   every message saved as it happens through the store's writer with its row id
//!   reported back, errors as a typed [`SessionError`];
//! - runs: a turn started as a task with a [`RunHandle`] (steer, interrupt, approve and
//!   clarify by request id), its [`RunEvent`]s tagged with run and session ids, a
//!   bounded registry whose states carry the runs API's wire names, the final status
//!   kept in `state.db`;
//! - live [`Conversation`]s, which the interactive doors hold ([`Conversations`], at
//!   most `max_live_sessions` of them): the current run, the prompt queue, attached
//!   images, the one `/model` switch and the one slash-command table ([`Reply`]);
//! - one way to build a host from a home and a [`Platform`] ([`HostBuilder`]): `.env`,
//!   bundled skills, config, runtime, store, Python plugins, SIGHUP reload, recovery.
//!
//! It must not speak any wire format, print, or know which front door calls it; the
//! codes each wire gives an error are mapped at that front door.

mod answers;
pub mod approvals;
pub mod builder;
pub mod bundled_skills;
pub mod commands;
pub mod conversation;
pub mod conversations;
pub mod delegation;
pub mod edit_approvals;
pub mod host;
pub mod images;
pub mod mcp_sampling;
pub mod model_options;
pub mod model_select;
pub mod ops;
pub mod preview;
pub mod prompt;
pub mod prompt_files;
pub mod reload;
pub mod runs;
pub mod runtime;
pub mod session_search;
pub mod sessions;
pub mod settings;
pub mod slash;
pub mod stopping;
pub mod turns;

pub use approvals::{ApprovalPolicy, Attendance};
pub use builder::{BuildError, Built, HostBuilder, start_together};
pub use commands::{CommandDef, Door};
pub use conversation::{Conversation, Steered, SwitchRefused, finalize_session};
pub use conversations::{CapReached, Closed, Conversations, DoorWire, Live, LiveError, LiveId};
pub use delegation::{DelegationStatus, SubagentError, SubagentInfo};
pub use edit_approvals::{EditRule, is_edit};
/// What a front door needs of the agent core, so that it depends on the host alone: the
/// answer types of approvals and `clarify`, toolset names, and the skills library.
pub use herald_agent::client_tool::{ClientCall, ClientDesk, ClientTool, ToolPolicy};
pub use herald_agent::tool::{Clarifier, ClarifyRequest, Tool};
pub use herald_agent::{
    ApprovalRequest, Approver, Decision, Observer, SubagentEvent, SubagentKind, ToolDirective,
    TurnProgress, approval, skills, string_list, toolsets,
};
/// The provider client, for hosts that share one (and its connection pool).
pub use herald_llm::{Endpoint, LlmClient};
pub use herald_mcp::{self as mcp, McpGrant, McpPool};
/// The home's Python plugins (listing, switching), for the doors' plugin hubs.
pub use herald_plugins as python_plugins;
pub use herald_protocol::{ImageUrl, UserInput};
pub use herald_store::now_secs;
pub use herald_store::sessions::{
    ControlReply, Followed, KeptAnswer, KeyClaim, NewSession, Relayed, RelayedEvents, RunControl,
    SessionRow, SessionSummary, SessionUsage, StoredMessage, StoredResponse, TitleRefused,
};
pub use host::{
    Answers, Compressed, EventRelay, Host, RewindRequest, RunExtras, Saved, Session, SessionOptions,
};
pub use model_select::SelectError;
pub use ops::{Op, OpError, Opening, Outcome};
pub use reload::{reload_env, reload_mcp, reload_on_sighup, reload_python_plugins};
pub use runs::{
    PendingApproval, PromptAsk, RunError, RunEvent, RunEventKind, RunEvents, RunHandle, RunState,
    RunStatus,
};
pub use runtime::{ModelChoice, Platform, Runtime, RuntimeError, start_python_plugins};
pub use sessions::{FAILED_INSIDE, SessionError};
pub use settings::{Setting, SettingRefused};
pub use slash::Reply;
pub use turns::{ConversationEvent, Listener};

#[cfg(test)]
mod host_tests;

/// Hermes's scheduled jobs (the job file, schedules, job operations), for the fronts.
pub use herald_tools::schedule;

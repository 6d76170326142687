//! The agent core every front door drives: the turn loop, the tool registry and
//! toolsets, command approval, steer and interrupt. Its output is one typed stream of
//! [`AgentEvent`]s; no front door reaches into the loop.

pub mod approval;
pub mod budget;
pub mod client_tool;
pub mod coerce;
pub mod event;
pub mod guardrails;
pub mod history_repair;
mod hook_fields;
pub mod middleware;
pub mod plugins;
pub mod shell_line;
pub mod skill_setup;
pub mod skills;
pub mod tool;
mod tool_call;
pub mod toolsets;
pub mod turn;

pub use approval::{ApprovalRequest, Approvals, Approver, DEFAULT_TIMEOUT, Decision, Verdict};
pub use budget::TreeBudget;
pub use client_tool::{ClientCall, ClientDesk, ClientTool};
pub use event::{AgentEvent, SubagentEvent, SubagentKind, TurnProgress};
pub use plugins::{Ask, Notice, Observer, Plugins, ToolDirective};
pub use tool::{Tool, ToolContext, ToolRegistry, string_list};
pub use turn::{Agent, AgentConfig, AgentHandle, TurnResult};

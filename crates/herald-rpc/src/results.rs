//! Each method's result (rpc-gateway.md §2–§5) as a typed struct, in Hermes's field
//! names. Event payloads are in `events`.

use crate::events::Info;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// `{status}`: `ok`, `expired`, `interrupted`.
#[derive(Debug, Serialize)]
pub struct Status {
    pub status: &'static str,
}

/// `approval.respond`: how many requests were answered.
#[derive(Debug, Serialize)]
pub struct Resolved {
    pub resolved: usize,
}

/// One message as `session.history` and a session made live show it.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum Shown {
    Tool {
        role: &'static str,
        name: Option<String>,
        context: String,
    },
    Text {
        role: &'static str,
        text: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        /// A user message's row id (`null` when it has none yet).
        #[serde(skip_serializing_if = "Option::is_none")]
        row_id: Option<Option<i64>>,
    },
}

/// `session.create`, `session.resume`: a session made live.
#[derive(Debug, Serialize)]
pub struct Opened {
    pub session_id: String,
    pub stored_session_id: String,
    pub message_count: usize,
    pub messages: Vec<Shown>,
    pub info: Option<Info>,
}

/// A stored session as `session.list` shows it.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub id: String,
    pub title: Option<String>,
    pub preview: String,
    pub started_at: f64,
    pub message_count: i64,
    pub source: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct Sessions<T> {
    pub sessions: Vec<T>,
}

/// `session.most_recent`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum MostRecent {
    Found {
        session_id: String,
        title: Option<String>,
        started_at: f64,
        source: Option<String>,
    },
    /// `{session_id: null}`.
    Nothing { session_id: () },
}

/// A live session as `session.active_list` shows it.
#[derive(Debug, Serialize)]
pub struct LiveEntry {
    pub session_id: String,
    pub session_key: String,
    pub status: &'static str,
    pub running: bool,
    pub started_at: f64,
    pub message_count: usize,
}

/// `session.activate`: the entry with its messages and info.
#[derive(Debug, Serialize)]
pub struct Activated {
    #[serde(flatten)]
    pub entry: LiveEntry,
    pub messages: Vec<Shown>,
    pub info: Info,
}

#[derive(Debug, Serialize)]
pub struct Closed {
    pub closed: bool,
}

#[derive(Debug, Serialize)]
pub struct Deleted {
    pub deleted: String,
}

/// `session.history`.
#[derive(Debug, Serialize)]
pub struct History {
    pub count: usize,
    pub messages: Vec<Shown>,
}

/// `session.title`, got or set: with the stored session's id, as Hermes's reading
/// names it (rpc-gateway.md §2).
#[derive(Debug, Serialize)]
pub struct Titled {
    pub session_key: String,
    pub title: String,
    pub pending: bool,
}

/// `session.usage`.
#[derive(Debug, Clone, Serialize)]
pub struct Usage {
    pub model: String,
    pub input: i64,
    pub output: i64,
    pub prompt: i64,
    pub completion: i64,
    pub total: i64,
    pub calls: i64,
    pub reasoning: i64,
    /// What the next request would weigh (estimated), of `context_max`.
    pub context_used: u64,
    pub context_max: u64,
    pub context_percent: u64,
    pub compressions: u32,
    pub active_subagents: u32,
    /// USD the provider reported for this live session's turns, its subagents'
    /// included (left out when none was reported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// `{output}`: `session.status`.
#[derive(Debug, Serialize)]
pub struct Output {
    pub output: String,
}

/// `session.steer`.
#[derive(Debug, Serialize)]
pub struct Steer {
    pub status: &'static str,
    pub text: String,
}

/// `session.branch`.
#[derive(Debug, Serialize)]
pub struct Branched {
    pub session_id: String,
    pub title: String,
    pub parent: String,
}

/// `session.undo`.
#[derive(Debug, Serialize)]
pub struct Removed {
    pub removed: usize,
}

/// `session.compress`.
#[derive(Debug, Serialize)]
pub struct Compressed {
    pub status: &'static str,
    pub removed: usize,
    pub kept: usize,
    pub summary: String,
}

/// `prompt.submit`: streaming, or queued behind the running turn.
#[derive(Debug, Serialize)]
pub struct Submitted {
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub survivor_user_row_ids: Option<Vec<i64>>,
}

/// `prompt.background`.
#[derive(Debug, Serialize)]
pub struct Task {
    pub task_id: String,
}

/// `commands.catalog`, in Hermes's shape.
#[derive(Debug, Serialize)]
pub struct Catalog {
    /// `[name, description]`: every command, the TUI's own, then the skills.
    pub pairs: Vec<(String, String)>,
    /// A command's subcommands.
    pub sub: BTreeMap<String, Vec<&'static str>>,
    /// Every command and alias (lowercase) → the command it stands for.
    pub canon: BTreeMap<String, String>,
    pub categories: Vec<Category>,
    pub skill_count: usize,
    pub warning: String,
}

/// One `/help` section.
#[derive(Debug, Serialize)]
pub struct Category {
    pub name: &'static str,
    pub pairs: Vec<(String, String)>,
}

/// `command.resolve`.
#[derive(Debug, Serialize)]
pub struct CommandInfo {
    pub name: String,
    pub usage: String,
    pub description: String,
    pub category: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill: Option<String>,
}

/// `command.dispatch`, `slash.exec`: run here, or text to send as the prompt.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Slash {
    Exec {
        output: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<String>,
    },
    Send {
        message: String,
    },
}

/// `config.get`, by key.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ConfigValue {
    Value {
        value: String,
    },
    Home {
        home: String,
        display: String,
    },
    Cwd {
        cwd: Option<String>,
        branch: Option<String>,
    },
    Config {
        config: ConfigShown,
    },
    /// When config.yaml last changed (epoch seconds; 0 without the file): the TUI polls
    /// it and reloads on a change.
    Mtime {
        mtime: f64,
    },
    /// `reasoning`: the session's effort and how the TUI shows thinking.
    Reasoning {
        value: String,
        display: &'static str,
    },
}

/// `config.get config`: what a client shows of the configuration.
#[derive(Debug, Serialize)]
pub struct ConfigShown {
    pub model: ModelShown,
    pub agent: AgentShown,
}

#[derive(Debug, Serialize)]
pub struct ModelShown {
    pub default: String,
    pub provider: String,
    pub base_url: String,
}

#[derive(Debug, Serialize)]
pub struct AgentShown {
    pub max_turns: u32,
}

/// `config.set`.
#[derive(Debug, Serialize)]
pub struct ConfigSet {
    pub key: String,
    pub value: String,
    /// Where a `yolo` applies (`session`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<&'static str>,
}

/// `cli.exec`.
#[derive(Debug, Serialize)]
pub struct CliRun {
    pub blocked: bool,
    pub code: Option<i32>,
    pub output: String,
}

/// `image.attach`.
#[derive(Debug, Serialize)]
pub struct Attached {
    pub attached: bool,
    pub path: String,
    pub name: Option<String>,
    pub count: usize,
}

/// `delegation.status`.
#[derive(Debug, Serialize)]
pub struct Delegation {
    pub active: Vec<SubagentView>,
    pub paused: bool,
    pub max_spawn_depth: u32,
    pub max_concurrent_children: usize,
}

/// One running subagent in `delegation.status`.
#[derive(Debug, Serialize)]
pub struct SubagentView {
    pub subagent_id: String,
    pub parent_id: Option<String>,
    pub session_id: String,
    pub child_session_id: String,
    pub depth: u32,
    pub goal: String,
    pub model: String,
    pub started_at: f64,
    pub status: &'static str,
    pub tool_count: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_tool: Option<String>,
}

impl From<herald_session::SubagentInfo> for SubagentView {
    fn from(s: herald_session::SubagentInfo) -> SubagentView {
        SubagentView {
            subagent_id: s.subagent_id,
            parent_id: s.parent_id,
            session_id: s.session_id,
            child_session_id: s.child_session_id,
            depth: s.depth,
            goal: s.goal,
            model: s.model,
            started_at: s.started_at,
            status: "running",
            tool_count: s.tool_count,
            last_tool: s.last_tool,
        }
    }
}

/// `delegation.pause`.
#[derive(Debug, Serialize)]
pub struct Paused {
    pub paused: bool,
}

/// `subagent.steer`.
#[derive(Debug, Serialize)]
pub struct SubagentSteer {
    pub status: &'static str,
    pub text: String,
    pub subagent_id: String,
    pub found: bool,
}

/// `subagent.interrupt`.
#[derive(Debug, Serialize)]
pub struct SubagentFound {
    pub found: bool,
    pub subagent_id: String,
}

/// `reload.env`: how many variables changed.
#[derive(Debug, Serialize)]
pub struct Updated {
    pub updated: usize,
}

/// `reload.mcp`: `reloaded`, or `confirm_required` with the question.
#[derive(Debug, Serialize)]
pub struct McpReloaded {
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'static str>,
}

/// `process.stop`.
#[derive(Debug, Serialize)]
pub struct Killed {
    pub killed: usize,
}

/// `terminal.resize`: the width as sent.
#[derive(Debug, Serialize)]
pub struct Resized {
    pub cols: Value,
}

/// `spawn_tree.save`.
#[derive(Debug, Serialize)]
pub struct TreeSaved {
    pub path: String,
    pub session_id: String,
}

/// `spawn_tree.list`.
#[derive(Debug, Serialize)]
pub struct TreeList<T> {
    pub entries: Vec<T>,
}

//! `delegate_task`: the arguments read as Hermes reads them, the limits checked, the
//! children run together, and their entries returned as one result.

use super::child::{self, Entry, Task};
use super::prompt;
use crate::host::{Host, Session, SessionInner};
use herald_agent::plugins::Notice;
use herald_agent::tool::{Tool, ToolContext, ToolFuture};
use serde_json::{Value, json};
use std::sync::{Arc, Weak};
use std::time::Instant;

/// `delegate_task`, bound to the session that offers it.
pub(crate) struct DelegateTool {
    host: Weak<Host>,
    parent: Weak<SessionInner>,
    description: String,
    parameters: Value,
}

impl DelegateTool {
    pub fn offered(host: Weak<Host>, parent: &Arc<SessionInner>) -> Arc<dyn Tool> {
        let d = host
            .upgrade()
            .map(|h| h.runtime().delegation.clone())
            .unwrap_or_default();
        Arc::new(DelegateTool {
            host,
            parent: Arc::downgrade(parent),
            description: prompt::description(&d),
            parameters: parameters(&d),
        })
    }
}

fn parameters(d: &herald_config::DelegationSettings) -> Value {
    let role = json!({"type": "string", "enum": ["leaf", "orchestrator"]});
    json!({
        "type": "object",
        "properties": {
            "goal": {"type": "string", "description": "What the subagent must achieve, self-contained: it knows nothing of this conversation."},
            "context": {"type": "string", "description": "What it needs to know: paths, errors, the project's layout, constraints."},
            "tasks": {
                "type": "array",
                "description": prompt::tasks_description(d),
                "items": {
                    "type": "object",
                    "properties": {
                        "goal": {"type": "string", "description": "The task's goal"},
                        "context": {"type": "string", "description": "The task's own context"},
                        "role": {"type": "string", "enum": role["enum"], "description": "This task's role (wins over the top-level role)."},
                    },
                    "required": ["goal"],
                },
            },
            "role": {"type": "string", "enum": role["enum"], "description": prompt::role_description(d)},
            "background": {"type": "boolean", "description": "Ignored: herald returns the children's results within this call."},
        },
        "required": [],
    })
}

/// A result the model reads as a refusal.
fn refusal(message: impl Into<String>) -> String {
    json!({"error": message.into()}).to_string()
}

impl Tool for DelegateTool {
    fn name(&self) -> &str {
        super::TOOL_NAME
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> Value {
        self.parameters.clone()
    }
    fn toolset(&self) -> Option<String> {
        Some("delegation".to_owned())
    }
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let (Some(host), Some(parent)) = (self.host.upgrade(), self.parent.upgrade()) else {
                return refusal("delegate_task needs a live session");
            };
            let parent = Session(parent);
            let tasks = match plan(&host, &parent, &args) {
                Ok(tasks) => tasks,
                Err(message) => return refusal(message),
            };
            let count = u32::try_from(tasks.len()).unwrap_or(u32::MAX);
            match ctx.budget.take_children(count) {
                Ok(()) => delegate(&host, &parent, tasks, ctx).await,
                Err(spent) => refusal(format!(
                    "Not started: this run's subagents are spent ({} started of delegation.max_total_children {}, for the whole run with every subagent's own). Do the work yourself, or with at most {} more subagents.",
                    spent.started,
                    spent.max,
                    spent.max.saturating_sub(spent.started)
                )),
            }
        })
    }
}

/// The tasks to run, or why the call is refused (Hermes's messages).
fn plan(host: &Host, parent: &Session, args: &Value) -> Result<Vec<Task>, String> {
    if host.delegations.paused() {
        return Err("Delegation is paused: new subagents start again once the `delegation.pause` RPC clears the pause (or `p` in the TUI's /agents).".into());
    }
    let d = &host.runtime().delegation;
    let depth = parent.0.delegation.depth;
    if depth >= d.max_spawn_depth {
        return Err(format!(
            "Delegation depth limit reached (depth={depth}, max_spawn_depth={}). Raise delegation.max_spawn_depth in config.yaml to nest deeper; each level multiplies the cost.",
            d.max_spawn_depth
        ));
    }
    let role = match args.get("role") {
        None | Some(Value::Null) => None,
        Some(Value::String(r)) => Some(r.as_str()),
        Some(_) => return Err("'role' must be \"leaf\" or \"orchestrator\".".into()),
    };
    let tasks = match args.get("tasks") {
        Some(Value::String(text)) => Some(serde_json::from_str::<Value>(text).map_err(|e| {
            format!(
                "tasks must be a JSON array of task objects; the string given is not JSON ({e})."
            )
        })?),
        Some(Value::Null) | None => None,
        Some(other) => Some(other.clone()),
    };
    let list = match tasks {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) => return Err("No tasks provided.".into()),
        Some(other) => {
            return Err(format!(
                "tasks must be a JSON array of task objects, not {}.",
                kind(&other)
            ));
        }
        None => match args.get("goal").and_then(Value::as_str) {
            Some(goal) if !goal.trim().is_empty() => vec![json!({
                "goal": goal,
                "context": args.get("context"),
                "role": role,
            })],
            _ => return Err("Provide either 'goal' (single task) or 'tasks' (batch).".into()),
        },
    };
    if list.len() > d.max_concurrent_children {
        return Err(format!(
            "Too many tasks: {} provided, but max_concurrent_children is {}. Send fewer, split them over several delegate_task calls, or raise delegation.max_concurrent_children in config.yaml.",
            list.len(),
            d.max_concurrent_children
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, t)| Task::read(i, t, role))
        .collect()
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Runs every task at once, then tells the plugins, adds the children's cost to the
/// parent's, and returns the entries in task order.
async fn delegate(
    host: &Arc<Host>,
    parent: &Session,
    tasks: Vec<Task>,
    ctx: &ToolContext,
) -> String {
    let started = Instant::now();
    let count = tasks.len();
    let runs = tasks
        .into_iter()
        .enumerate()
        .map(|(index, task)| child::run(host, parent, task, index, count, ctx));
    let entries: Vec<Entry> = futures_util::future::join_all(runs).await;
    let plugins = host.runtime().current_plugins();
    let mut cost = 0.0;
    for entry in &entries {
        cost += entry.cost_usd;
        if plugins.has_observers() {
            plugins
                .notify(Notice::SubagentStop, &entry.stop_hook(parent, ctx))
                .await;
        }
    }
    parent.add_cost(cost);
    json!({
        "results": entries.iter().map(|e| &e.result).collect::<Vec<_>>(),
        "total_duration_seconds": round2(started.elapsed().as_secs_f64()),
    })
    .to_string()
}

/// Seconds to two decimals, as Hermes reports them.
pub(super) fn round2(secs: f64) -> f64 {
    (secs * 100.0).round() / 100.0
}

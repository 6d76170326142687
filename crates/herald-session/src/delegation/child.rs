//! One child agent: built from its parent (tools narrowed, approvals shared, model
//! chosen), run as a run of the host, watched (its steps relayed to the parent's front
//! door as `subagent.*` events), stopped with its parent or on its own timeout, and
//! reported as one entry of the tool's result.

use super::prompt::{ChildBrief, child_note};
use super::tool::round2;
use super::{Active, BLOCKED_TOOLS, ChildParts, SubagentInfo};
use crate::host::{Answers, Host, Session, SessionOptions};
use crate::runs::{RunEventKind, RunHandle, RunState, RunStatus};
use herald_agent::TurnProgress;
use herald_agent::plugins::Notice;
use herald_agent::tool::{Tool, ToolContext};
use herald_agent::{AgentEvent, Approvals, SubagentEvent, SubagentKind};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The characters of a goal shown in events and `delegation.status`.
const SHOWN_GOAL: usize = 500;

/// One task of a call.
pub(crate) struct Task {
    pub goal: String,
    pub context: Option<String>,
    /// Asked for `role: orchestrator`.
    pub orchestrator: bool,
}

impl Task {
    /// Task `i` as the model wrote it; the top-level `role` applies unless it names
    /// its own.
    pub fn read(i: usize, task: &Value, role: Option<&str>) -> Result<Task, String> {
        let Value::Object(t) = task else {
            return Err(format!("Task {i} must be an object."));
        };
        let goal = t.get("goal").and_then(Value::as_str).unwrap_or("").trim();
        if goal.is_empty() {
            return Err(format!("Task {i} is missing a 'goal'."));
        }
        let text = |key: &str| match t.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(_) => Err(format!("Task {i}: '{key}' must be a string.")),
        };
        let context = text("context")?;
        let role = text("role")?.or(role);
        Ok(Task {
            goal: goal.to_owned(),
            context: context.map(str::to_owned),
            orchestrator: role.map(str::trim) == Some("orchestrator"),
        })
    }
}

/// A finished child: its entry in the result, and what the parent takes from it.
pub(crate) struct Entry {
    pub result: Value,
    pub cost_usd: f64,
    child_session_id: String,
    role: &'static str,
    status: String,
    summary: Option<String>,
    duration_ms: u64,
}

impl Entry {
    /// The `subagent_stop` hook's arguments, as Hermes passes them.
    pub fn stop_hook(&self, parent: &Session, ctx: &ToolContext) -> Value {
        json!({
            "parent_session_id": parent.id(),
            "parent_turn_id": ctx.turn_id,
            "child_session_id": self.child_session_id,
            "child_role": self.role,
            "child_summary": self.summary,
            "child_status": self.status,
            "duration_ms": self.duration_ms,
            "telemetry_schema_version": herald_agent::middleware::TELEMETRY_SCHEMA_VERSION,
        })
    }
}

/// Who a child is and where it stands, for its events and its entry.
#[derive(Clone)]
struct Identity {
    call_id: String,
    subagent_id: String,
    parent_id: Option<String>,
    child_session_id: String,
    depth: u32,
    goal: String,
    index: usize,
    count: usize,
    model: String,
    toolsets: Vec<String>,
}

impl Identity {
    fn event(&self, kind: SubagentKind, tool_count: usize) -> SubagentEvent {
        SubagentEvent {
            kind,
            call_id: self.call_id.clone(),
            subagent_id: self.subagent_id.clone(),
            parent_id: self.parent_id.clone(),
            child_session_id: self.child_session_id.clone(),
            depth: self.depth,
            goal: self.goal.clone(),
            task_index: self.index,
            task_count: self.count,
            model: self.model.clone(),
            toolsets: self.toolsets.clone(),
            tool_count,
            ..SubagentEvent::default()
        }
    }
}

/// Runs task `index` of `count` to its end.
pub(crate) async fn run(
    host: &Arc<Host>,
    parent: &Session,
    task: Task,
    index: usize,
    count: usize,
    ctx: &ToolContext,
) -> Entry {
    let started = Instant::now();
    let subagent_id = format!(
        "sa-{index}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let d = host.runtime().delegation.clone();
    let depth = parent.0.delegation.depth + 1;
    let orchestrator = task.orchestrator && d.orchestrator_enabled && depth < d.max_spawn_depth;
    let role = if orchestrator { "orchestrator" } else { "leaf" };
    let child = match open(
        host,
        parent,
        &task,
        &subagent_id,
        (depth, orchestrator),
        ctx,
    )
    .await
    {
        Ok(child) => child,
        Err(error) => return failed_to_start(index, &error, started),
    };
    let me = Identity {
        call_id: ctx.call_id.clone(),
        subagent_id: subagent_id.clone(),
        parent_id: parent.0.delegation.subagent_id.clone(),
        child_session_id: child.id().to_owned(),
        depth: depth - 1,
        // What the front doors show of it (the child has the whole goal).
        goal: task.goal.chars().take(SHOWN_GOAL).collect(),
        index,
        count,
        model: child.endpoint().map(|e| e.model).unwrap_or_default(),
        toolsets: child.tools_by_toolset().into_keys().collect(),
    };
    start_hook(host, parent, ctx, &me, role).await;
    let run = match host.start_run(&child, task.goal.as_str()) {
        Ok(run) => run,
        Err(e) => return failed_to_start(index, &e.to_string(), started),
    };
    let active = Arc::new(Active {
        info: Mutex::new(SubagentInfo {
            subagent_id: subagent_id.clone(),
            parent_id: me.parent_id.clone(),
            session_id: root_session(host, parent),
            child_session_id: me.child_session_id.clone(),
            depth: me.depth,
            goal: me.goal.clone(),
            model: me.model.clone(),
            started_at: crate::host::now_secs(),
            tool_count: 0,
            last_tool: None,
        }),
        run: run.clone(),
    });
    host.delegations.add(active.clone());
    let _listed = Listed {
        host,
        subagent_id: &subagent_id,
        run: &run,
    };
    let mut start = me.event(SubagentKind::Start, 0);
    start.text = Some(me.goal.clone());
    tell(ctx, start);
    let relayed = relay(run.clone(), active.clone(), me.clone(), ctx.clone());
    let ((end, timed_out), ()) = tokio::join!(watch(&run, ctx, d.child_timeout), relayed);
    let entry = entry(
        &child,
        &end,
        timed_out,
        d.max_summary_chars,
        started,
        index,
        role,
    );
    let mut done = me.event(SubagentKind::Complete, tool_count(&active));
    done.status = Some(entry.status.clone());
    done.summary = Some(
        entry
            .summary
            .clone()
            .unwrap_or_default()
            .chars()
            .take(500)
            .collect(),
    );
    done.text = Some(
        entry
            .summary
            .clone()
            .unwrap_or_default()
            .chars()
            .take(160)
            .collect(),
    );
    done.duration_seconds = Some(round2(started.elapsed().as_secs_f64()));
    done.input_tokens = Some(end.input_tokens);
    done.output_tokens = Some(end.output_tokens);
    done.api_calls = Some(end.api_calls);
    tell(ctx, done);
    entry
}

/// A child listed in `delegation.status`: taken off the list however its call ends,
/// and interrupted when the call is dropped before the child finished (the parent's
/// task went away).
struct Listed<'a> {
    host: &'a Host,
    subagent_id: &'a str,
    run: &'a RunHandle,
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        self.host.delegations.remove(self.subagent_id);
        self.run.interrupt();
    }
}

/// The session at the root of `parent`'s tree (where `delegation.status` says the
/// subagents belong).
fn root_session(host: &Host, parent: &Session) -> String {
    match &parent.0.delegation.subagent_id {
        Some(id) => host
            .delegations
            .find(id)
            .map(|a| crate::conversation::lock(&a.info).session_id.clone())
            .unwrap_or_else(|| parent.id().to_owned()),
        None => parent.id().to_owned(),
    }
}

fn tool_count(active: &Active) -> usize {
    crate::conversation::lock(&active.info).tool_count
}

fn tell(ctx: &ToolContext, event: SubagentEvent) {
    ctx.notify(AgentEvent::Progress(TurnProgress::Subagent(Box::new(
        event,
    ))));
}

/// The child's session: the parent's tools less the blocked ones, the parent's
/// approvals (or auto-approval), `delegation.model` or the parent's model, its own
/// budget and the task's note.
async fn open(
    host: &Arc<Host>,
    parent: &Session,
    task: &Task,
    subagent_id: &str,
    (depth, orchestrator): (u32, bool),
    ctx: &ToolContext,
) -> Result<Session, String> {
    let rt = host.runtime();
    let d = &rt.delegation;
    let tools: Vec<Arc<dyn Tool>> = parent
        .tools_now()
        .into_iter()
        .filter(|t| !BLOCKED_TOOLS.contains(&t.name()))
        .collect();
    let endpoint = match (&d.model, &d.provider) {
        (None, None) => parent.endpoint().unwrap_or_else(|| rt.endpoint()),
        (model, provider) => {
            let parents = parent.endpoint().map(|e| e.model).unwrap_or_default();
            let model = model.clone().unwrap_or(parents);
            let spec = match provider {
                Some(p) => format!("{model} --provider {p}"),
                None => model,
            };
            rt.switch_model(spec.trim())
                .map_err(|e| format!("delegation.model / delegation.provider: {e}"))?
        }
    };
    // Auto-approval never gives a child what its parent lacks: under a parent nobody
    // can answer for (a webhook run), the child's commands are denied as its are.
    let parents = &parent.0.approvals;
    // Auto-approval covers commands; a plugin's request for approval stays denied in
    // the child unless the parent runs in yolo.
    let commands_unasked = parents.in_yolo() || parents.mode_off;
    let approvals =
        match d.subagent_auto_approve && (parents.approver.is_some() || commands_unasked) {
            true => {
                let mut child = Approvals::new(parents.in_yolo(), parents.deny.clone(), None);
                child.mode_off = true;
                Arc::new(child)
            }
            false => parents.clone(),
        };
    let note = child_note(&ChildBrief {
        goal: &task.goal,
        context: task.context.as_deref(),
        cwd: parent.cwd(),
        orchestrator: orchestrator.then_some((depth, d.max_spawn_depth)),
    });
    let mut opts = SessionOptions::new(
        "subagent",
        tools.iter().map(|t| t.name().to_owned()).collect(),
        Answers::Nobody,
    );
    opts.cwd = Some(parent.cwd().to_path_buf());
    opts.max_iterations = Some(d.max_iterations);
    opts.ephemeral_system = Some(note);
    opts.keep_runs = false;
    opts.sender_id = parent.0.sender_id.clone();
    // The parent's own observers (an ACP session's edit gate) watch the child too.
    opts.observers = parent.0.observers.clone();
    opts.mcp = Some(herald_mcp::McpGrant::Nothing);
    opts.child = Some(ChildParts {
        approvals,
        tools,
        endpoint,
        depth,
        subagent_id: subagent_id.to_owned(),
        orchestrator,
        parent_session: parent.id().to_owned(),
        budget: ctx.budget.clone(),
    });
    host.open_session(opts).await.map_err(|e| e.to_string())
}

/// `subagent_start`, with Hermes's arguments.
async fn start_hook(host: &Host, parent: &Session, ctx: &ToolContext, me: &Identity, role: &str) {
    let plugins = host.runtime().current_plugins();
    if !plugins.has_observers() {
        return;
    }
    let payload = json!({
        "parent_session_id": parent.id(),
        "parent_turn_id": ctx.turn_id,
        "parent_subagent_id": me.parent_id,
        "child_session_id": me.child_session_id,
        "child_subagent_id": me.subagent_id,
        "child_role": role,
        "child_goal": me.goal,
        "telemetry_schema_version": herald_agent::middleware::TELEMETRY_SCHEMA_VERSION,
    });
    plugins.notify(Notice::SubagentStart, &payload).await;
}

/// Passes the child's steps on as `subagent.*` events: each tool it calls, its
/// reasoning (once per API call), and every fifth tool a progress line.
async fn relay(run: RunHandle, active: Arc<Active>, me: Identity, ctx: ToolContext) {
    let Some(mut events) = run.take_events() else {
        return;
    };
    let mut thinking = String::new();
    let mut recent: Vec<String> = Vec::new();
    while let Some(event) = events.recv().await {
        match event.kind {
            RunEventKind::Progress(TurnProgress::ToolStarted {
                name, arguments, ..
            }) => {
                let count = {
                    let mut info = crate::conversation::lock(&active.info);
                    info.tool_count += 1;
                    info.last_tool = Some(name.clone());
                    info.tool_count
                };
                let mut e = me.event(SubagentKind::Tool, count);
                e.tool_name = Some(name.clone());
                e.text = crate::preview::tool_preview(&name, &arguments, 120);
                tell(&ctx, e);
                recent.push(name);
                if recent.len() == 5 {
                    tell(&ctx, progress(&me, count, &mut recent));
                }
            }
            RunEventKind::Progress(TurnProgress::ReasoningDelta(t)) if thinking.len() < 4096 => {
                thinking.push_str(&t)
            }
            RunEventKind::Progress(TurnProgress::MessageComplete { .. })
                if !thinking.trim().is_empty() =>
            {
                let mut e = me.event(SubagentKind::Thinking, tool_count(&active));
                e.text = Some(std::mem::take(&mut thinking).chars().take(500).collect());
                tell(&ctx, e);
            }
            // A grandchild's events, passed up as they are (they name their parent).
            RunEventKind::Progress(TurnProgress::Subagent(e)) => {
                ctx.notify(AgentEvent::Progress(TurnProgress::Subagent(e)))
            }
            RunEventKind::Finished(_) => break,
            _ => {}
        }
    }
    if !recent.is_empty() {
        tell(&ctx, progress(&me, tool_count(&active), &mut recent));
    }
}

/// `🔀 [n] tool, tool …` of the tools since the last progress line.
fn progress(me: &Identity, count: usize, recent: &mut Vec<String>) -> SubagentEvent {
    let mut e = me.event(SubagentKind::Progress, count);
    let prefix = match me.count > 1 {
        true => format!("[{}] ", me.index + 1),
        false => String::new(),
    };
    e.text = Some(format!("🔀 {prefix}{}", recent.join(", ")));
    recent.clear();
    e
}

/// How long an interrupted child gets to end before its call stops waiting for it.
const END_GRACE: Duration = Duration::from_secs(15);

/// Waits for the run's end; interrupts it when the parent is interrupted or the
/// timeout passes (then `true`), and waits at most [`END_GRACE`] more after that.
async fn watch(run: &RunHandle, ctx: &ToolContext, timeout: Option<Duration>) -> (RunStatus, bool) {
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let finished = run.finished();
    tokio::pin!(finished);
    let mut timed_out = false;
    let mut given_up_at: Option<tokio::time::Instant> = None;
    loop {
        let tick = tokio::time::sleep(Duration::from_millis(100));
        tokio::select! {
            end = &mut finished => return (end, timed_out),
            () = tick => {
                let now = tokio::time::Instant::now();
                let late = deadline.is_some_and(|d| now >= d);
                if (late && !timed_out) || (ctx.is_interrupted() && given_up_at.is_none()) {
                    timed_out |= late;
                    given_up_at = Some(now);
                    run.interrupt();
                }
                if given_up_at.is_some_and(|at| now - at > END_GRACE) {
                    let mut status = run.status();
                    status.state = cancelled_unless_finished(status.state);
                    return (status, timed_out);
                }
            }
        }
    }
}

/// A run still going when its call stopped waiting reads as interrupted.
fn cancelled_unless_finished(state: RunState) -> RunState {
    match state.is_finished() {
        true => state,
        false => RunState::Cancelled,
    }
}

/// The child's entry, as Hermes reports one.
fn entry(
    child: &Session,
    end: &RunStatus,
    timed_out: bool,
    max_summary_chars: usize,
    started: Instant,
    index: usize,
    role: &'static str,
) -> Entry {
    let duration = round2(started.elapsed().as_secs_f64());
    let summary = end.output.clone().unwrap_or_default();
    let (status, exit_reason) = match (timed_out, end.state) {
        (true, _) => ("timeout", "timeout"),
        (false, RunState::Cancelled) => ("interrupted", "interrupted"),
        (false, _) if !summary.trim().is_empty() && summary.trim() != "(empty)" => {
            ("completed", "completed")
        }
        (false, _) => ("failed", failed_reason(end)),
    };
    let (summary, truncated) = capped(summary, max_summary_chars);
    let mut result = json!({
        "task_index": index,
        "status": status,
        "summary": summary,
        "api_calls": end.api_calls,
        "duration_seconds": duration,
        "model": end.model,
        "exit_reason": exit_reason,
        "tokens": {"input": end.input_tokens, "output": end.output_tokens},
        "tool_trace": tool_trace(child),
    });
    if truncated {
        result["summary_truncated"] = json!(true);
    }
    let error = match status {
        "timeout" => Some(format!(
            "Subagent timed out after {duration}s with {} API call(s) completed.",
            end.api_calls
        )),
        "failed" => Some(
            end.error
                .clone()
                .unwrap_or_else(|| "Subagent did not produce a response.".into()),
        ),
        _ => None,
    };
    if let Some(error) = &error {
        result["error"] = json!(error);
    }
    if status == "timeout" {
        result["summary"] = Value::Null;
    }
    let summary = (status == "completed").then_some(summary).or(error);
    Entry {
        result,
        cost_usd: child.cost_usd(),
        child_session_id: child.id().to_owned(),
        role,
        status: status.to_owned(),
        summary,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }
}

fn failed_reason(end: &RunStatus) -> &'static str {
    match end.error.as_deref() {
        Some(e) if e.contains("iteration") || e.contains("max_turns") => "max_iterations",
        _ => "error",
    }
}

/// `summary` within `max` characters (0: no cap): its head and tail around a marker.
fn capped(summary: String, max: usize) -> (String, bool) {
    let count = summary.chars().count();
    if max == 0 || count <= max {
        return (summary, false);
    }
    let head: String = summary.chars().take(max * 3 / 4).collect();
    let tail: String = summary.chars().skip(count - max / 4).collect();
    let cut = count - head.chars().count() - tail.chars().count();
    (
        format!("{head}\n\n[… {cut} characters of the summary left out …]\n\n{tail}"),
        true,
    )
}

/// Each tool the child called, with the sizes of its arguments and result.
fn tool_trace(child: &Session) -> Vec<Value> {
    child.with_history(|history| {
        let mut trace: Vec<(String, Value)> = Vec::new();
        for saved in history {
            let m = &saved.message;
            for call in &m.tool_calls {
                trace.push((
                    call.id.clone(),
                    json!({"tool": call.function.name, "args_bytes": call.function.arguments.len()}),
                ));
            }
            if let Some(id) = &m.tool_call_id
                && let Some((_, t)) = trace.iter_mut().find(|(i, _)| i == id)
            {
                let content = m.content.as_deref().unwrap_or("");
                let error = looks_failed(content);
                t["result_bytes"] = json!(content.len());
                t["status"] = json!(if error { "error" } else { "ok" });
            }
        }
        trace.into_iter().map(|(_, t)| t).collect()
    })
}

/// Whether a tool result reads as a failure: an `error` field with something in
/// it, or text that starts with an error.
fn looks_failed(content: &str) -> bool {
    match serde_json::from_str::<Value>(content) {
        Ok(Value::Object(o)) => o
            .get("error")
            .is_some_and(|e| !e.is_null() && e.as_str() != Some("")),
        _ => {
            let start = content.trim_start();
            start.starts_with("Error") || start.starts_with("error:")
        }
    }
}

/// The entry of a child that never ran.
fn failed_to_start(index: usize, error: &str, started: Instant) -> Entry {
    Entry {
        result: json!({
            "task_index": index,
            "status": "error",
            "summary": null,
            "error": error,
            "api_calls": 0,
            "duration_seconds": round2(started.elapsed().as_secs_f64()),
        }),
        cost_usd: 0.0,
        child_session_id: String::new(),
        role: "leaf",
        status: "error".into(),
        summary: Some(error.to_owned()),
        duration_ms: 0,
    }
}

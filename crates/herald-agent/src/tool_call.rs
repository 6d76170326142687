//! One tool call through the pipeline, in the middleware seed's order (middleware.md A9
//! and A10.2, agent.md §8): the model's arguments parsed and aligned to the tool's
//! schema; `tool_request`; then, on what it returned, the plugins' verdict (a block, or
//! the approval gate), the loop guardrails and `tool.started` ([`prepare`]); then the
//! `tool_execution` chain around the tool, `post_tool_call`, `transform_tool_result`,
//! the size cap and the untrusted-output wrapping ([`execute`]). A dangerous command's
//! approval stays inside the terminal tool, so it judges the arguments the execution
//! middleware passed on.

use crate::approval::{Approvals, Verdict};
use crate::event::AgentEvent;
use crate::event::TurnProgress;
use crate::guardrails::LoopGuard;
use crate::middleware::{Kind, MiddlewareError, Terminal, run_execution_chain, run_request_chain};
use crate::plugins::{Ask, Notice, Plugins, ToolDirective};
use crate::tool::{MAX_RESULT_CHARS, Tool, ToolContext, cap_result, wrap_untrusted};
use herald_protocol::ToolCall;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A call that passed everything before its execution.
#[derive(Clone)]
pub(crate) struct Prepared {
    pub tool: Arc<dyn Tool>,
    /// The arguments `tool_request` returned: what the guardrails, `tool.started`,
    /// the approval prompt and the tool see.
    pub args: Value,
    /// The arguments before `tool_request` (parsed and aligned).
    pub original: Value,
    pub trace: Value,
    /// The hook fields of the call (tool name, ids, platform).
    pub fields: Map<String, Value>,
}

/// A call ready to run, or its result when it never runs.
pub(crate) type Planned = Result<Prepared, String>;

/// What the preparing of one call reads from its turn.
pub(crate) struct Turnside<'a> {
    pub tools: &'a [Arc<dyn Tool>],
    pub plugins: &'a Plugins,
    pub approvals: &'a Approvals,
    pub interrupted: &'a AtomicBool,
    /// The hook fields every call of the turn shares (ids, session, platform).
    pub fields: Map<String, Value>,
}

/// Takes one call as far as its execution: finds the tool, parses and aligns its
/// arguments, runs `tool_request`, asks the plugins and, when one asks for it, a
/// human; then the guardrails; and tells the door it starts.
pub(crate) async fn prepare(
    side: &Turnside<'_>,
    call: &ToolCall,
    guard: &mut LoopGuard,
    events: &mut (dyn FnMut(AgentEvent) + Send),
) -> Planned {
    let name = call.function.name.as_str();
    let Some(tool) = side.tools.iter().find(|t| t.name() == name).cloned() else {
        return Err(unknown_tool(side.tools, name));
    };
    let args = parse_args(&call.function.arguments).map_err(|e| {
        json!({"error": format!("Invalid JSON arguments ({e}); use {{}} for no-argument tools")})
            .to_string()
    })?;
    let args = crate::coerce::coerce_args(args, &tool.parameters());
    let mut fields = side.fields.clone();
    fields.insert("tool_name".into(), json!(name));
    fields.insert("tool_call_id".into(), json!(call.id));
    let pass = run_request_chain(
        Kind::ToolRequest,
        &side.plugins.tool_request,
        args,
        &fields,
        &side.plugins.reporter,
    )
    .await;
    let prepared = Prepared {
        tool,
        original: pass.original_payload().clone(),
        args: pass.effective,
        trace: Value::Array(pass.trace),
        fields,
    };
    if !prepared.tool.available() {
        return Err(
            json!({"error": format!("The tool `{name}` is not available now.")}).to_string(),
        );
    }
    if let Some(blocked) = verdict(side, &prepared, call, events).await {
        let out = json!({ "error": blocked }).to_string();
        report_blocked(side.plugins, &prepared, &out, "plugin_block", blocked).await;
        return Err(out);
    }
    if let Some(blocked) = guard.before_call(name, &prepared.args.to_string()) {
        let out = json!({ "error": blocked }).to_string();
        report_blocked(side.plugins, &prepared, &out, "guardrail_block", blocked).await;
        return Err(out);
    }
    events(AgentEvent::Progress(TurnProgress::ToolStarted {
        call_id: call.id.clone(),
        name: name.to_owned(),
        arguments: prepared.args.clone(),
    }));
    Ok(prepared)
}

/// The plugins' verdict on a prepared call: why it may not run, if it may not. An
/// approval request goes to the approval gate (the door's human, or a denial when
/// nobody can answer); a wait for the answer ends with an interrupt.
async fn verdict(
    side: &Turnside<'_>,
    prepared: &Prepared,
    call: &ToolCall,
    events: &mut (dyn FnMut(AgentEvent) + Send),
) -> Option<String> {
    let observed = Value::Object(observed(prepared));
    let (message, rule_key) = match side.plugins.tool_directive(&observed).await? {
        ToolDirective::Block(message) => return Some(message),
        ToolDirective::Approve { message, rule_key } => (message, rule_key),
    };
    let tool = prepared.tool.name();
    let on_ask = |shown: &str, reason: &str| {
        events(AgentEvent::ApprovalRequested {
            call_id: call.id.clone(),
            command: shown.to_owned(),
            reason: reason.to_owned(),
        })
    };
    let gate = side.approvals.check_plugin_rule(
        &call.id,
        tool,
        message.as_deref(),
        rule_key.as_deref(),
        on_ask,
    );
    let interrupted = async {
        while !side.interrupted.load(Ordering::SeqCst) {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    let verdict = tokio::select! {
        v = gate => v,
        () = interrupted => Verdict::Blocked(
            "cancelled: the turn was interrupted while the call waited for approval".into(),
        ),
    };
    match verdict {
        Verdict::Allowed => None,
        Verdict::Blocked(why) => {
            tracing::info!(
                tool,
                "a plugin asked for approval of a tool call and it was not given"
            );
            Some(why)
        }
    }
}

/// The hook fields with the call's arguments and middleware trace, as `pre_tool_call`
/// and `post_tool_call` get them.
fn observed(prepared: &Prepared) -> Map<String, Value> {
    let mut observed = prepared.fields.clone();
    observed.insert("args".into(), prepared.args.clone());
    observed.insert("middleware_trace".into(), prepared.trace.clone());
    observed
}

/// `post_tool_call`'s arguments (Hermes's: `error_type` and `error_message` always
/// there).
fn post_payload(
    prepared: &Prepared,
    status: &str,
    result: &str,
    duration_ms: u64,
    error: Option<(&str, String)>,
) -> Map<String, Value> {
    let mut p = observed(prepared);
    let (error_type, error_message) = error.unzip();
    p.insert("status".into(), json!(status));
    p.insert("result".into(), json!(result));
    p.insert("duration_ms".into(), json!(duration_ms));
    p.insert("error_type".into(), json!(error_type));
    p.insert("error_message".into(), json!(error_message));
    p
}

async fn report_blocked(
    plugins: &Plugins,
    prepared: &Prepared,
    out: &str,
    error_type: &str,
    why: String,
) {
    let p = post_payload(prepared, "blocked", out, 0, Some((error_type, why)));
    plugins
        .notify(Notice::PostToolCall, &Value::Object(p))
        .await;
}

/// Runs a prepared call: the `tool_execution` chain around the tool, `post_tool_call`,
/// `transform_tool_result`, the size cap and the wrapping of untrusted output. The
/// result and whether it is an error.
pub(crate) async fn execute(
    prepared: Prepared,
    ctx: ToolContext,
    plugins: Plugins,
) -> (String, bool) {
    let started = std::time::Instant::now();
    let tool = prepared.tool.clone();
    let out = if plugins.tool_execution.is_empty() {
        Ok(tool.run(prepared.args.clone(), &ctx).await)
    } else {
        let (t, c) = (tool.clone(), ctx.clone());
        let terminal: Terminal<String> = Arc::new(move |payload: Value| {
            let (t, c) = (t.clone(), c.clone());
            Box::pin(async move { Ok(Value::String(t.run(payload, &c).await)) })
        });
        let mut exec_fields = prepared.fields.clone();
        exec_fields.insert("original_args".into(), prepared.original.clone());
        exec_fields.insert("middleware_trace".into(), prepared.trace.clone());
        run_execution_chain(
            Kind::ToolExecution,
            Arc::new(plugins.tool_execution.clone()),
            0,
            prepared.args.clone(),
            Arc::new(exec_fields),
            terminal,
            plugins.reporter.clone(),
        )
        .await
        .map(|v| match v {
            Value::String(s) => s,
            other => other.to_string(),
        })
    };
    let (out, status, error) = outcome(out);
    let is_error = status != "ok";
    let took = started.elapsed().as_millis() as u64;
    let mut p = post_payload(&prepared, status, &out, took, error);
    plugins
        .notify(Notice::PostToolCall, &Value::Object(p.clone()))
        .await;
    // transform_tool_result: the same arguments without the middleware trace.
    p.remove("middleware_trace");
    let out = plugins
        .answers(Ask::TransformToolResult, &Value::Object(p))
        .await
        .into_iter()
        .next()
        .unwrap_or(out);
    let out = cap_result(out, MAX_RESULT_CHARS);
    let out = if tool.untrusted_output() {
        wrap_untrusted(tool.name(), out)
    } else {
        out
    };
    (out, is_error)
}

/// A call's result text, its status (`ok`, `error`, `blocked`) and its error for
/// `post_tool_call`. A result whose `error` is truthy, as Hermes reads it, failed.
fn outcome(
    out: Result<String, MiddlewareError<String>>,
) -> (String, &'static str, Option<(&'static str, String)>) {
    let (out, status) = match out {
        Ok(s) => (s, "ok"),
        Err(MiddlewareError::Block { reason, .. }) => {
            let out = json!({ "error": reason }).to_string();
            return (out, "blocked", Some(("middleware_block", reason)));
        }
        Err(MiddlewareError::Downstream(e) | MiddlewareError::Failed(e)) => {
            (json!({ "error": e }).to_string(), "error")
        }
        Err(MiddlewareError::NextAlreadyUsed) => (
            json!({ "error": "next_call may be used only once per frame" }).to_string(),
            "error",
        ),
    };
    let failure = serde_json::from_str::<Value>(&out)
        .ok()
        .and_then(|v| v.get("error").filter(|e| truthy(e)).cloned())
        .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_owned));
    match failure {
        Some(message) => (out, "error", Some(("tool_error", message))),
        None => (out, status, None),
    }
}

fn truthy(e: &Value) -> bool {
    match e {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(t) => !t.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn unknown_tool(tools: &[Arc<dyn Tool>], name: &str) -> String {
    if name.trim().is_empty() {
        return "error: the tool call has an empty name".into();
    }
    let available: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    json!({
        "error": format!("Unknown tool `{name}`. Available tools: {}", available.join(", "))
    })
    .to_string()
}

/// Tool arguments: a JSON object (empty text means `{}`).
pub(crate) fn parse_args(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("arguments must be a JSON object".into()),
        Err(e) => Err(e.to_string()),
    }
}

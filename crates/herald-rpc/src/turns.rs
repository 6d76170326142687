//! Turns of live sessions: started on the session host, their run events passed on as
//! the gateway's events (rpc-gateway.md §3.1, §6), queued prompts run after.

use crate::errors::RpcError;
use crate::events::{
    ApprovalRequest, ClarifyRequest, Expired, Failed, Interim, MessageComplete, SecretAsk,
    SecretMetadata, Text, ToolComplete, ToolProgress, ToolStart, TurnUsage,
};
use crate::frame;
use crate::gateway::Live;
use crate::outbox::Out;
use herald_session::TurnProgress;
use herald_session::{ConversationEvent, Outcome, PromptAsk, RunEventKind, RunState, RunStatus};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The choices an approval request offers.
const CHOICES: [&str; 4] = ["once", "session", "always", "deny"];

/// An outcome an operation does not have (a bug in the mapping, answered as one).
pub fn unreachable_outcome<T>(outcome: Outcome) -> Result<T, RpcError> {
    tracing::error!(?outcome, "an operation answered with another's outcome");
    Err(RpcError::new(
        RpcError::HANDLER,
        "handler error: unexpected outcome",
    ))
}

fn event(live: &Live, kind: &str, payload: impl Serialize) -> Out {
    Out::Frame(frame::event(kind, Some(&live.id), Some(payload)))
}

/// The one-line view of a tool call the TUI shows (the session's one rule).
pub fn preview(tool: &str, arguments: &Value) -> String {
    herald_session::preview::tool_preview(tool, arguments, PREVIEW_CHARS).unwrap_or_default()
}

/// How long a tool call's one-line view is at most.
pub const PREVIEW_CHARS: usize = 120;

/// The token counters of a finished turn.
pub fn usage(end: &RunStatus) -> TurnUsage {
    let (input, output) = (end.input_tokens, end.output_tokens);
    TurnUsage {
        input,
        output,
        total: input + output,
        calls: end.api_calls,
    }
}

/// `message.complete`'s payload.
fn complete(end: &RunStatus, streamed: &str, reasoning: &str) -> MessageComplete {
    let (status, text) = match end.state {
        RunState::Completed => ("complete", end.output.clone().unwrap_or_default()),
        RunState::Cancelled => ("interrupted", streamed.to_owned()),
        _ if streamed.trim().is_empty() => (
            "error",
            format!(
                "Error: {}",
                end.error
                    .clone()
                    .unwrap_or_else(|| "the turn failed".into())
            ),
        ),
        _ => ("error", streamed.to_owned()),
    };
    MessageComplete {
        text,
        usage: usage(end),
        status,
        pending_steer: end.pending_steer.clone(),
        reasoning: (!reasoning.is_empty()).then(|| reasoning.to_owned()),
    }
}

/// A tool started and not yet complete.
struct Running {
    at: Instant,
    name: String,
    arguments: Value,
    /// Its `tool.start` context, which its progress lines extend.
    context: String,
    /// When its last `tool.progress` went out (seconds it had run then).
    told_at: u64,
}

/// The tools started and not yet complete, by call id.
type Started = HashMap<String, Running>;

/// How long a tool runs before its first `tool.progress`, and between two.
const PROGRESS_EVERY: u64 = 5;

fn tool_event(live: &Live, kind: RunEventKind, started: &mut Started) -> Option<Out> {
    // The event's name as the run names it (`sudo.expire`, `secret.expire` ...).
    let name = kind.name();
    Some(match kind {
        RunEventKind::Progress(TurnProgress::ToolStarted {
            call_id,
            name,
            arguments,
        }) => {
            let context = preview(&name, &arguments);
            let payload = ToolStart {
                tool_id: call_id.clone(),
                name: name.clone(),
                context: context.clone(),
                args_text: arguments.to_string(),
            };
            let running = Running {
                at: Instant::now(),
                name,
                arguments,
                context,
                told_at: 0,
            };
            started.insert(call_id, running);
            event(live, "tool.start", payload)
        }
        RunEventKind::Progress(TurnProgress::ToolCompleted {
            call_id,
            name,
            result,
            is_error,
        }) => {
            let (at, args) = started
                .remove(&call_id)
                .map_or((Instant::now(), Value::Null), |r| (r.at, r.arguments));
            let parsed = serde_json::from_str::<Value>(&result).unwrap_or(Value::String(result));
            let duration = (at.elapsed().as_secs_f64() * 1000.0).round() / 1000.0;
            let payload = ToolComplete {
                tool_id: call_id,
                name,
                args,
                result: parsed,
                duration_s: duration,
                error: is_error,
            };
            event(live, "tool.complete", payload)
        }
        RunEventKind::ApprovalRequested {
            request_id,
            command,
            reason,
            pattern_key,
        } => event(
            live,
            "approval.request",
            ApprovalRequest {
                request_id,
                command,
                description: reason,
                pattern_key: pattern_key.clone(),
                pattern_keys: [pattern_key],
                allow_permanent: true,
                smart_denied: false,
                choices: CHOICES,
            },
        ),
        RunEventKind::ClarifyRequested {
            request_id,
            question,
            choices,
        } => {
            let choices = (!choices.is_empty()).then_some(choices);
            event(
                live,
                "clarify.request",
                ClarifyRequest {
                    request_id,
                    question,
                    choices,
                },
            )
        }
        RunEventKind::PromptRequested { request_id, ask } => {
            prompt_event(live, name, request_id, ask)
        }
        RunEventKind::PromptExpired { request_id, .. } => event(live, name, Expired { request_id }),
        _ => return None,
    })
}

/// Carries a live session's stream to its client for as long as it is live: each
/// turn's events as the gateway's events (`message.start` ... `message.complete`,
/// then `session.info`), a queued prompt that could not start as `error`.
pub async fn pump(live: Arc<Live>) {
    let mut stream = live.conversation.listen().await;
    let mut turn = Turn::default();
    let mut ticks = tokio::time::interval(Duration::from_secs(1));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let next = tokio::select! {
            next = stream.next_event() => next,
            _ = ticks.tick(), if !turn.started.is_empty() => {
                turn.long_running(&live).await;
                continue;
            }
        };
        let Some(next) = next else {
            return;
        };
        match next {
            ConversationEvent::TurnStarted { .. } => {
                turn = Turn::default();
                let start = frame::bare_event("message.start", Some(&live.id));
                live.wire.emit(Out::Frame(start)).await;
            }
            ConversationEvent::Run(e) => turn.relay(&live, e.kind).await,
            ConversationEvent::TurnFailed(message) => {
                live.wire
                    .emit(event(&live, "error", Failed { message }))
                    .await;
            }
            ConversationEvent::Idle => {}
        }
    }
}

/// `tool.progress`: what a running tool shows in its line.
fn progress(live: &Live, tool_id: &str, name: &str, preview: String) -> Out {
    let payload = ToolProgress {
        tool_id: tool_id.to_owned(),
        name: name.to_owned(),
        preview,
    };
    event(live, "tool.progress", payload)
}

/// What one turn has streamed so far.
#[derive(Default)]
struct Turn {
    streamed: String,
    reasoning: String,
    started: Started,
}

impl Turn {
    /// Passes one of the turn's events on.
    async fn relay(&mut self, live: &Live, kind: RunEventKind) {
        let out = match kind {
            RunEventKind::Progress(TurnProgress::MessageDelta(text)) => {
                self.streamed.push_str(&text);
                Out::Delta {
                    kind: "message.delta",
                    session_id: live.id.clone(),
                    text,
                }
            }
            RunEventKind::Progress(TurnProgress::ReasoningDelta(text)) => {
                self.reasoning.push_str(&text);
                Out::Delta {
                    kind: "reasoning.delta",
                    session_id: live.id.clone(),
                    text,
                }
            }
            RunEventKind::Progress(TurnProgress::MessageComplete {
                content: Some(text),
                tool_calls,
            }) if tool_calls > 0 && !text.trim().is_empty() => {
                let already = self.streamed.contains(text.as_str());
                let payload = Interim {
                    text,
                    already_streamed: already,
                };
                event(live, "message.interim", payload)
            }
            RunEventKind::Finished(end) => return self.finish(live, &end).await,
            RunEventKind::Progress(TurnProgress::Subagent(e)) => {
                return self.subagent(live, *e).await;
            }
            other => match tool_event(live, other, &mut self.started) {
                Some(out) => out,
                None => return,
            },
        };
        live.wire.emit(out).await;
    }

    /// A child's step as `subagent.*`, and a child's tool call also as the
    /// `tool.progress` of the `delegate_task` call that started it.
    async fn subagent(&mut self, live: &Live, e: herald_session::SubagentEvent) {
        let line = match (&e.kind, &e.tool_name) {
            (herald_session::SubagentKind::Tool, Some(tool)) => Some(format!(
                "[{}] {tool} {}",
                e.task_index + 1,
                e.text.as_deref().unwrap_or_default()
            )),
            _ => None,
        };
        let parent = self.started.get(&e.call_id).map(|r| r.name.clone());
        let call_id = e.call_id.clone();
        let sub = event(live, e.kind.name(), crate::events::Subagent::from(e));
        live.wire.emit(sub).await;
        if let (Some(line), Some(parent)) = (line, parent) {
            let line = herald_session::preview::one_line(&line, PREVIEW_CHARS);
            live.wire
                .emit(progress(live, &call_id, &parent, line))
                .await;
        }
    }

    /// `tool.progress` for each tool running longer than [`PROGRESS_EVERY`]: its
    /// context and how long it has run.
    async fn long_running(&mut self, live: &Live) {
        for (id, r) in &mut self.started {
            let secs = r.at.elapsed().as_secs();
            if secs < r.told_at + PROGRESS_EVERY {
                continue;
            }
            r.told_at = secs;
            let shown = format!("{} ({secs}s)", r.context).trim().to_owned();
            live.wire.emit(progress(live, id, &r.name, shown)).await;
        }
    }

    /// `reasoning.available` when there was reasoning, `message.complete`, and as
    /// Hermes does after every turn, `session.info` (running false, the usage after it).
    async fn finish(&mut self, live: &Live, end: &RunStatus) {
        if !self.reasoning.is_empty() {
            let text = Text {
                text: &self.reasoning,
            };
            live.wire
                .emit(event(live, "reasoning.available", text))
                .await;
        }
        let payload = complete(end, &self.streamed, &self.reasoning);
        live.wire
            .emit(event(live, "message.complete", payload))
            .await;
        crate::info::announce_turn_end(live).await;
    }
}

/// `sudo.request {request_id}` or `secret.request {prompt, env_var, metadata,
/// request_id}`, as Hermes's TUI gateway sends them.
fn prompt_event(live: &Live, name: &str, request_id: String, ask: PromptAsk) -> Out {
    match ask {
        PromptAsk::Sudo => event(live, name, Expired { request_id }),
        PromptAsk::Secret {
            env_var,
            prompt,
            skill_name,
            help,
            required_for,
        } => {
            let metadata = SecretMetadata {
                skill_name,
                help,
                required_for,
            };
            let payload = SecretAsk {
                prompt,
                env_var,
                metadata,
                request_id,
            };
            event(live, name, payload)
        }
    }
}

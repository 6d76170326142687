//! Turns of live sessions: started on the session host, their run events passed on as
//! the gateway's events (rpc-gateway.md §3.1, §6), queued prompts run after.

use crate::errors::RpcError;
use crate::events::{
    ApprovalRequest, ClarifyRequest, Expired, Failed, Interim, MessageComplete, SecretAsk,
    SecretMetadata, Text, ToolComplete, ToolStart, TurnUsage,
};
use crate::frame;
use crate::gateway::Live;
use crate::outbox::Out;
use herald_session::{ConversationEvent, Outcome, PromptAsk, RunEventKind, RunState, RunStatus};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

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

/// The tools started and not yet complete: when, and with what arguments.
type Started = HashMap<String, (Instant, Value)>;

fn tool_event(live: &Live, kind: RunEventKind, started: &mut Started) -> Option<Out> {
    // The event's name as the run names it (`sudo.expire`, `secret.expire` ...).
    let name = kind.name();
    Some(match kind {
        RunEventKind::ToolStarted {
            call_id,
            name,
            arguments,
        } => {
            let context = preview(&name, &arguments);
            let payload = ToolStart {
                tool_id: call_id.clone(),
                name,
                context,
                args_text: arguments.to_string(),
            };
            started.insert(call_id, (Instant::now(), arguments));
            event(live, "tool.start", payload)
        }
        RunEventKind::ToolCompleted {
            call_id,
            name,
            result,
            is_error,
        } => {
            let (at, args) = started
                .remove(&call_id)
                .unwrap_or((Instant::now(), Value::Null));
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
        RunEventKind::Subagent(e) => event(live, name, crate::events::Subagent::from(*e)),
        _ => return None,
    })
}

/// Carries a live session's stream to its client for as long as it is live: each
/// turn's events as the gateway's events (`message.start` ... `message.complete`,
/// then `session.info`), a queued prompt that could not start as `error`.
pub async fn pump(live: Arc<Live>) {
    let mut stream = live.conversation.listen().await;
    let mut turn = Turn::default();
    while let Some(next) = stream.next_event().await {
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
            RunEventKind::MessageDelta(text) => {
                self.streamed.push_str(&text);
                Out::Delta {
                    kind: "message.delta",
                    session_id: live.id.clone(),
                    text,
                }
            }
            RunEventKind::ReasoningDelta(text) => {
                self.reasoning.push_str(&text);
                Out::Delta {
                    kind: "reasoning.delta",
                    session_id: live.id.clone(),
                    text,
                }
            }
            RunEventKind::MessageComplete {
                content: Some(text),
                tool_calls,
            } if tool_calls > 0 && !text.trim().is_empty() => {
                let already = self.streamed.contains(text.as_str());
                let payload = Interim {
                    text,
                    already_streamed: already,
                };
                event(live, "message.interim", payload)
            }
            RunEventKind::Finished(end) => return self.finish(live, &end).await,
            other => match tool_event(live, other, &mut self.started) {
                Some(out) => out,
                None => return,
            },
        };
        live.wire.emit(out).await;
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

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
use herald_session::{
    Op, Outcome, PromptAsk, RunEventKind, RunHandle, RunState, RunStatus, UserInput,
};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// The choices an approval request offers.
const CHOICES: [&str; 4] = ["once", "session", "always", "deny"];

/// Starts a turn of `live` on `input`; its events follow on the session's client.
pub async fn start(live: &Arc<Live>, input: UserInput) -> Result<RunHandle, RpcError> {
    let run = match live.conversation.submit(Op::Prompt(input)).await {
        Ok(Outcome::Started(run)) => run,
        Ok(other) => unreachable_outcome(other)?,
        Err(e) => return Err(RpcError::op(e, RpcError::FAILED)),
    };
    tokio::spawn(relay(live.clone(), run.clone()));
    Ok(run)
}

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

/// A one-line preview of a tool call's arguments.
pub fn preview(arguments: &Value) -> String {
    let first = match arguments {
        Value::Object(m) => ["command", "path", "query", "url", "name"]
            .iter()
            .find_map(|k| m.get(*k).and_then(Value::as_str).map(str::to_owned)),
        _ => None,
    };
    let text = first.unwrap_or_else(|| arguments.to_string());
    let line = text.lines().next().unwrap_or_default();
    line.chars().take(120).collect()
}

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
            let payload = ToolStart {
                tool_id: call_id.clone(),
                name,
                context: preview(&arguments),
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

/// Passes one run's events on, then starts the next queued prompt.
pub async fn relay(live: Arc<Live>, mut run: RunHandle) {
    loop {
        relay_one(&live, &run).await;
        let Some(next) = live.conversation.next_queued() else {
            return;
        };
        match live.conversation.start(next).await {
            Ok(started) => run = started,
            Err(e) => {
                let e = RpcError::session(e, RpcError::FAILED);
                let payload = Failed { message: e.message };
                live.wire.emit(event(&live, "error", payload)).await;
                return;
            }
        }
    }
}

/// Passes one run's events on.
async fn relay_one(live: &Live, run: &RunHandle) {
    let Some(mut events) = run.take_events() else {
        return;
    };
    live.wire
        .emit(Out::Frame(frame::bare_event(
            "message.start",
            Some(&live.id),
        )))
        .await;
    let mut streamed = String::new();
    let mut reasoning = String::new();
    let mut started = Started::new();
    while let Some(e) = events.recv().await {
        let out = match e.kind {
            RunEventKind::MessageDelta(text) => {
                streamed.push_str(&text);
                Out::Delta {
                    kind: "message.delta",
                    session_id: live.id.clone(),
                    text,
                }
            }
            RunEventKind::ReasoningDelta(text) => {
                reasoning.push_str(&text);
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
                let already = streamed.contains(text.as_str());
                let payload = Interim {
                    text,
                    already_streamed: already,
                };
                event(live, "message.interim", payload)
            }
            RunEventKind::Finished(end) => {
                if !reasoning.is_empty() {
                    let text = Text { text: &reasoning };
                    live.wire
                        .emit(event(live, "reasoning.available", text))
                        .await;
                }
                let payload = complete(&end, &streamed, &reasoning);
                live.wire
                    .emit(event(live, "message.complete", payload))
                    .await;
                // As Hermes does after every turn: running false, the usage after it.
                crate::info::announce(live).await;
                break;
            }
            other => match tool_event(live, other, &mut started) {
                Some(out) => out,
                None => continue,
            },
        };
        live.wire.emit(out).await;
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

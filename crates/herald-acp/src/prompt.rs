//! `session/prompt` (acp.md §3): the prompt's blocks as text, a run of the session,
//! its events as `session/update` notifications, then the stop reason.

use crate::{AcpServer, AcpSession, lock, permission, slash, tools};
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandsUpdate, ContentBlock, ContentChunk,
    EmbeddedResourceResource, PromptRequest, PromptResponse, SessionNotification, SessionUpdate,
    StopReason, TextContent, ToolCall, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields,
};
use herald_protocol::Role;
use herald_session::{RunEventKind, RunState};
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// The prompt's text: text blocks, resource links and embedded text resources.
fn prompt_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.clone()),
            ContentBlock::ResourceLink(l) => Some(format!("[{}]({})", l.name, l.uri)),
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    Some(format!("{}:\n{}", t.uri, t.text))
                }
                _ => None,
            },
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn update(cx: &ConnectionTo<Client>, session_id: &str, u: SessionUpdate) {
    let _ = cx.send_notification(SessionNotification::new(session_id.to_owned(), u));
}

fn chunk(text: impl Into<String>) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

/// A minted tool call id (`tc-<12 hex>`), not the provider's.
fn tool_call_id() -> String {
    format!("tc-{}", &uuid::Uuid::new_v4().simple().to_string()[..12])
}

/// Runs one prompt to its end: a slash command answered here, a prompt queued behind
/// a running turn, or a turn (then the queued ones).
pub async fn run(
    server: &AcpServer,
    request: PromptRequest,
    cx: &ConnectionTo<Client>,
) -> PromptResponse {
    let id = request.session_id.to_string();
    let Some(live) = server.session(&id) else {
        return PromptResponse::new(StopReason::Refusal);
    };
    let text = prompt_text(&request.prompt);
    if text.trim().is_empty() {
        return PromptResponse::new(StopReason::EndTurn);
    }
    if let Some(reply) = slash::answer(server, &live, text.trim()).await {
        update(cx, &id, SessionUpdate::AgentMessageChunk(chunk(reply)));
        return PromptResponse::new(StopReason::EndTurn);
    }
    if live.busy() {
        let n = {
            let mut q = lock(&live.queued);
            q.push_back(text);
            q.len()
        };
        let note = format!("Queued for the next turn. ({n} queued)");
        update(cx, &id, SessionUpdate::AgentMessageChunk(chunk(note)));
        return PromptResponse::new(StopReason::EndTurn);
    }
    live.cancelled.store(false, Ordering::SeqCst);
    let mut next = Some(text);
    let mut reason = StopReason::EndTurn;
    while let Some(text) = next {
        reason = turn(server, &live, text, cx).await;
        next = if reason == StopReason::Cancelled {
            None
        } else {
            lock(&live.queued).pop_front()
        };
    }
    PromptResponse::new(reason)
}

/// One turn of `live` on `text`, its events streamed; how it stopped.
async fn turn(
    server: &AcpServer,
    live: &AcpSession,
    text: String,
    cx: &ConnectionTo<Client>,
) -> StopReason {
    let id = live.id.clone();
    let run = match server.host.start_run(&live.session(), text) {
        Ok(run) => run,
        Err(e) => {
            update(
                cx,
                &id,
                SessionUpdate::AgentMessageChunk(chunk(format!("herald: {e}"))),
            );
            return StopReason::EndTurn;
        }
    };
    *lock(&live.run) = Some(run.clone());
    let Some(mut events) = run.take_events() else {
        return StopReason::EndTurn;
    };
    let mut streamed = false;
    let mut calls: HashMap<String, String> = HashMap::new();
    while let Some(e) = events.recv().await {
        match e.kind {
            RunEventKind::MessageDelta(t) => {
                streamed = true;
                update(cx, &id, SessionUpdate::AgentMessageChunk(chunk(t)));
            }
            RunEventKind::ReasoningDelta(t) => {
                update(cx, &id, SessionUpdate::AgentThoughtChunk(chunk(t)))
            }
            RunEventKind::ToolStarted {
                call_id,
                name,
                arguments,
            } => {
                let minted = tool_call_id();
                let call = ToolCall::new(minted.clone(), tools::title(&name, &arguments))
                    .kind(tools::kind(&name))
                    .status(ToolCallStatus::Pending)
                    .content(tools::start_content(&name, &arguments))
                    .locations(tools::locations(&arguments))
                    .raw_input(Some(arguments));
                calls.insert(call_id, minted);
                update(cx, &id, SessionUpdate::ToolCall(call));
            }
            RunEventKind::ToolCompleted {
                call_id,
                name,
                result,
                is_error,
            } => {
                let minted = calls.remove(&call_id).unwrap_or_else(tool_call_id);
                let status = if tools::failed(&result, is_error) {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                };
                let fields = ToolCallUpdateFields::new()
                    .kind(tools::kind(&name))
                    .status(status)
                    .content(tools::end_content(&result))
                    .raw_output(Some(serde_json::Value::String(result)));
                update(
                    cx,
                    &id,
                    SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(minted, fields)),
                );
            }
            RunEventKind::ApprovalRequested {
                request_id,
                command,
                reason,
            } => {
                let decision = permission::ask(cx, &id, &command, &reason).await;
                let _ = run.approve(Some(&request_id), decision, false);
            }
            RunEventKind::ClarifyRequested { request_id, .. } => {
                // ACP has no question-and-answer request: the model hears nobody answered.
                let _ = run.clarify(&request_id, String::new());
            }
            RunEventKind::Finished(end) => {
                if !streamed && let Some(text) = end.output.clone().filter(|t| !t.is_empty()) {
                    update(cx, &id, SessionUpdate::AgentMessageChunk(chunk(text)));
                }
                let cancelled =
                    live.cancelled.load(Ordering::SeqCst) || end.state == RunState::Cancelled;
                return if cancelled {
                    StopReason::Cancelled
                } else {
                    StopReason::EndTurn
                };
            }
            _ => {}
        }
    }
    StopReason::EndTurn
}

/// Tells the IDE which slash commands this agent answers.
pub fn offer_commands(session_id: &str, cx: &ConnectionTo<Client>) {
    let commands = slash::COMMANDS
        .iter()
        .map(|(name, what)| AvailableCommand::new(*name, *what))
        .collect();
    update(
        cx,
        session_id,
        SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
    );
}

/// Sends a loaded session's transcript as updates: user and assistant text, reasoning.
pub fn replay(live: &AcpSession, cx: &ConnectionTo<Client>) {
    let id = live.id.clone();
    for saved in live.session().history() {
        let m = saved.message;
        if let Some(r) = m.reasoning.filter(|r| !r.is_empty()) {
            update(cx, &id, SessionUpdate::AgentThoughtChunk(chunk(r)));
        }
        let Some(text) = m.content.filter(|t| !t.is_empty()) else {
            continue;
        };
        match m.role {
            Role::User => update(cx, &id, SessionUpdate::UserMessageChunk(chunk(text))),
            Role::Assistant => update(cx, &id, SessionUpdate::AgentMessageChunk(chunk(text))),
            _ => {}
        }
    }
}

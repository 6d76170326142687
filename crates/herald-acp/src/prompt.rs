//! `session/prompt` (acp.md §3): the prompt's blocks as text, a run of the session,
//! its events as `session/update` notifications, then the stop reason.

use crate::{AcpServer, AcpSession, edits, permission, slash, tools};
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandsUpdate, ContentBlock, ContentChunk,
    EmbeddedResourceResource, PromptRequest, PromptResponse, SessionInfoUpdate,
    SessionNotification, SessionUpdate, StopReason, TextContent, ToolCall, ToolCallContent,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, Usage, UsageUpdate,
};
use herald_protocol::Role;
use herald_session::TurnProgress;
use herald_session::{
    ConversationEvent, Decision, ImageUrl, Op, Outcome, RunEventKind, RunState, UserInput,
};
use serde_json::Value;
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

/// The prompt's image blocks as image parts: a `data:` URL of the block's base64
/// data, else its http(s) URI. A block that gives neither is logged, not sent.
fn prompt_images(blocks: &[ContentBlock]) -> Vec<ImageUrl> {
    let images = blocks.iter().filter_map(|b| match b {
        ContentBlock::Image(i) => Some(i),
        _ => None,
    });
    images
        .filter_map(|i| {
            let url = match i.data.is_empty() {
                false => format!("data:{};base64,{}", i.mime_type, i.data),
                true => i.uri.clone().unwrap_or_default(),
            };
            match herald_session::images::checked_url(&url) {
                Ok(url) => Some(ImageUrl { url, detail: None }),
                Err(e) => {
                    tracing::warn!(mime = %i.mime_type, "an image block is not sent: {e}");
                    None
                }
            }
        })
        .collect()
}

pub(crate) fn update(cx: &ConnectionTo<Client>, session_id: &str, u: SessionUpdate) {
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
/// a running turn, or a turn (then the queued ones), its events streamed.
pub async fn run(
    server: &AcpServer,
    request: PromptRequest,
    cx: &ConnectionTo<Client>,
) -> PromptResponse {
    let id = request.session_id.to_string();
    let Some(live) = server.session_or_reopen(&id, cx).await else {
        return PromptResponse::new(StopReason::Refusal);
    };
    let mut text = prompt_text(&request.prompt);
    let images = prompt_images(&request.prompt);
    if text.trim().is_empty() && images.is_empty() {
        return PromptResponse::new(StopReason::EndTurn);
    }
    match slash::answer(server, &live, text.trim()).await {
        Some(slash::Answered::Said(reply)) => {
            update(cx, &id, SessionUpdate::AgentMessageChunk(chunk(reply)));
            return PromptResponse::new(StopReason::EndTurn);
        }
        Some(slash::Answered::Send(message)) => text = message,
        None => {}
    }
    // ACP queues a prompt sent while a turn runs (its client waits for each answer);
    // the prompts a cancel held run first, in their order.
    let input = UserInput { text, images };
    let ours = match live.conversation.submit(Op::Queue(input)).await {
        Ok(Outcome::Started(run)) => run.id(),
        Ok(Outcome::Queued(n)) => {
            let note = format!("Queued for the next turn. ({n} queued)");
            update(cx, &id, SessionUpdate::AgentMessageChunk(chunk(note)));
            return PromptResponse::new(StopReason::EndTurn);
        }
        Ok(_) => return PromptResponse::new(StopReason::EndTurn),
        Err(e) => {
            let said = chunk(format!("herald: {}", e.told()));
            update(cx, &id, SessionUpdate::AgentMessageChunk(said));
            return PromptResponse::new(StopReason::EndTurn);
        }
    };
    live.wire.cancelled.store(false, Ordering::SeqCst);
    follow_turns(server, &live, &ours, cx).await
}

/// Streams the turns from the one `ours` names until the conversation is idle; how the
/// last one stopped.
async fn follow_turns(
    server: &AcpServer,
    live: &AcpSession,
    ours: &str,
    cx: &ConnectionTo<Client>,
) -> PromptResponse {
    let id = live.id.clone();
    let mut stream = live.conversation.listen().await;
    let mut answer = PromptResponse::new(StopReason::EndTurn);
    let mut turn = Turn::default();
    // What an earlier reader left unread is not this prompt's.
    let mut reached = false;
    while let Some(event) = stream.next_event().await {
        match event {
            ConversationEvent::TurnStarted { run, .. } => {
                reached |= run.id() == ours;
                turn = Turn::default();
            }
            _ if !reached => {}
            ConversationEvent::Run(e) => {
                if let Some(end) = turn.follow(server, live, e.kind, cx).await {
                    answer = end;
                }
            }
            ConversationEvent::TurnFailed(message) => {
                let said = chunk(format!("herald: {message}"));
                update(cx, &id, SessionUpdate::AgentMessageChunk(said));
            }
            ConversationEvent::Idle => break,
        }
    }
    answer
}

/// What one turn has shown so far.
#[derive(Default)]
struct Turn {
    streamed: bool,
    calls: HashMap<String, Started>,
    /// The subagents' steps so far, by the `delegate_task` call that started them.
    progress: HashMap<String, Vec<String>>,
}

impl Turn {
    /// Shows one of the turn's events; how the turn stopped, at its end.
    async fn follow(
        &mut self,
        server: &AcpServer,
        live: &AcpSession,
        kind: RunEventKind,
        cx: &ConnectionTo<Client>,
    ) -> Option<PromptResponse> {
        let id = live.id.clone();
        match kind {
            RunEventKind::Progress(TurnProgress::MessageDelta(t)) => {
                self.streamed = true;
                update(cx, &id, SessionUpdate::AgentMessageChunk(chunk(t)));
            }
            // Chunks cannot be taken back: the middleware's text follows them.
            RunEventKind::MessageCorrected(t) => {
                let text = format!("\n\n{t}");
                update(cx, &id, SessionUpdate::AgentMessageChunk(chunk(text)));
            }
            RunEventKind::Progress(TurnProgress::ReasoningDelta(t)) => {
                update(cx, &id, SessionUpdate::AgentThoughtChunk(chunk(t)))
            }
            RunEventKind::Progress(TurnProgress::ToolStarted {
                call_id,
                name,
                arguments,
            }) => {
                let (call, started) =
                    start_call(live, &tool_call_id(), &call_id, &name, &arguments);
                self.calls.insert(call_id, started);
                update(cx, &id, SessionUpdate::ToolCall(call));
            }
            RunEventKind::Progress(TurnProgress::ToolCompleted {
                call_id,
                name,
                result,
                is_error,
            }) => {
                let started = self.calls.remove(&call_id);
                let call = end_call(live, &call_id, started, &name, result, is_error);
                update(cx, &id, SessionUpdate::ToolCallUpdate(call));
            }
            RunEventKind::ApprovalRequested {
                request_id,
                command,
                reason,
                ..
            } => {
                let within = server.host.runtime().approvals.answer_within();
                if let Some(decision) = permission::ask(cx, &id, &command, &reason, within).await {
                    answer(live, request_id, decision).await;
                }
            }
            RunEventKind::EditApprovalRequested {
                request_id,
                call_id,
                tool,
                arguments,
            } => {
                if let Some(allowed) = live.wire.gate.ask(&call_id, &tool, &arguments).await {
                    let decision = match allowed {
                        true => Decision::Once,
                        false => Decision::Deny,
                    };
                    answer(live, request_id, decision).await;
                }
            }
            RunEventKind::Progress(TurnProgress::Subagent(e)) => self.subagent(live, &e, cx),
            RunEventKind::ClarifyRequested { request_id, .. } => {
                // ACP has no question-and-answer request: the model hears nobody answered.
                let op = Op::Clarify {
                    request_id,
                    answer: String::new(),
                };
                let _ = live.conversation.submit(op).await;
            }
            RunEventKind::Finished(end) => return Some(self.finish(server, live, &end, cx).await),
            _ => {}
        }
        None
    }

    /// A subagent's step, shown under its `delegate_task` call.
    fn subagent(
        &mut self,
        live: &AcpSession,
        e: &herald_session::SubagentEvent,
        cx: &ConnectionTo<Client>,
    ) {
        let (Some(call), Some(line)) = (self.calls.get(&e.call_id), subagent_line(e)) else {
            return;
        };
        let log = self.progress.entry(e.call_id.clone()).or_default();
        if log.len() >= 20 {
            log.remove(0);
        }
        log.push(line);
        let update_call = subagent_update(&call.minted, log);
        update(cx, &live.id, SessionUpdate::ToolCallUpdate(update_call));
    }

    /// The turn's end: its answer when nothing streamed, and how it stopped.
    async fn finish(
        &mut self,
        server: &AcpServer,
        live: &AcpSession,
        end: &herald_session::RunStatus,
        cx: &ConnectionTo<Client>,
    ) -> PromptResponse {
        live.wire.gate.forget_all();
        if !self.streamed
            && let Some(text) = end.output.clone().filter(|t| !t.is_empty())
        {
            update(cx, &live.id, SessionUpdate::AgentMessageChunk(chunk(text)));
        }
        let cancelled =
            live.wire.cancelled.load(Ordering::SeqCst) || end.state == RunState::Cancelled;
        if cancelled {
            return PromptResponse::new(StopReason::Cancelled);
        }
        after_turn(server, live, cx).await;
        PromptResponse::new(StopReason::EndTurn).usage(Some(usage(end)))
    }
}

/// Answers a pending approval of the running turn.
async fn answer(live: &AcpSession, request_id: String, decision: Decision) {
    let op = Op::Approve {
        request_id: Some(request_id),
        decision,
        all: false,
    };
    let _ = live.conversation.submit(op).await;
}

/// One line of a subagent's progress under its `delegate_task` call (its start, each
/// tool it calls, its end).
fn subagent_line(e: &herald_session::SubagentEvent) -> Option<String> {
    use herald_session::SubagentKind;
    let who = format!("[{}]", e.task_index + 1);
    match e.kind {
        SubagentKind::Start => Some(format!("{who} started: {}", e.goal)),
        SubagentKind::Tool => Some(format!(
            "{who} {} {}",
            e.tool_name.as_deref().unwrap_or("tool"),
            e.text.as_deref().unwrap_or("")
        )),
        SubagentKind::Complete => Some(format!(
            "{who} {}",
            e.status.as_deref().unwrap_or("finished")
        )),
        SubagentKind::Thinking | SubagentKind::Progress => None,
    }
}

/// The `delegate_task` call in progress, showing its subagents' last steps.
fn subagent_update(minted: &str, log: &[String]) -> ToolCallUpdate {
    let shown = log[log.len().saturating_sub(20)..].join("\n");
    let fields = ToolCallUpdateFields::new()
        .status(ToolCallStatus::InProgress)
        .content(vec![tools::text(shown)]);
    ToolCallUpdate::new(minted.to_owned(), fields)
}

/// A tool call as it started: the id shown, and for an edit the path shown and the
/// file's path.
struct Started {
    minted: String,
    edit: Option<(String, std::path::PathBuf)>,
}

/// The `tool_call` of a starting tool: an edit shows its diff when the session's mode
/// lets it through, else a note that the approval prompt will.
fn start_call(
    live: &AcpSession,
    minted: &str,
    call_id: &str,
    tool: &str,
    args: &Value,
) -> (ToolCall, Started) {
    let edit = edits::is_edit(tool).then(|| {
        let shown = args.get("path").and_then(Value::as_str).unwrap_or_default();
        (shown.to_owned(), edits::target(args, &live.wire.gate.cwd()))
    });
    let content = match edit.is_some() {
        true if live.wire.gate.approves(args) => {
            let before = live.wire.gate.snapshot(call_id, args);
            vec![ToolCallContent::Diff(edits::proposed(tool, args, before))]
        }
        true => vec![tools::text(
            "The approval prompt shows the diff of this edit.",
        )],
        false => tools::start_content(tool, args),
    };
    let call = ToolCall::new(minted.to_owned(), tools::title(tool, args))
        .kind(tools::kind(tool))
        .status(ToolCallStatus::Pending)
        .content(content)
        .locations(tools::locations(args))
        .raw_input(Some(args.clone()));
    let started = Started {
        minted: minted.to_owned(),
        edit,
    };
    (call, started)
}

/// The `tool_call_update` of a finished tool: an edit made shows the diff from the
/// snapshot to the file now; anything else its output.
fn end_call(
    live: &AcpSession,
    call_id: &str,
    started: Option<Started>,
    tool: &str,
    result: String,
    is_error: bool,
) -> ToolCallUpdate {
    let failed = tools::failed(&result, is_error);
    let (minted, edit) = match started {
        Some(s) => (s.minted, s.edit),
        None => (tool_call_id(), None),
    };
    let before = live.wire.gate.forget(call_id);
    let diff = match (edit, before) {
        (Some((shown, path)), Some(before)) if !failed => edits::made(&shown, before, &path),
        _ => None,
    };
    let content = match diff {
        Some(d) => vec![ToolCallContent::Diff(d)],
        None => tools::end_content(&result),
    };
    let status = match failed {
        true => ToolCallStatus::Failed,
        false => ToolCallStatus::Completed,
    };
    let fields = ToolCallUpdateFields::new()
        .kind(tools::kind(tool))
        .status(status)
        .content(content)
        .raw_output(Some(Value::String(result)));
    ToolCallUpdate::new(minted, fields)
}

/// The tokens a finished turn used, as the provider counted them.
fn usage(end: &herald_session::RunStatus) -> Usage {
    let (i, o) = (end.input_tokens, end.output_tokens);
    Usage::new(i + o, i, o)
}

/// After a turn: how full the context is, and the session's title and time.
async fn after_turn(server: &AcpServer, live: &AcpSession, cx: &ConnectionTo<Client>) {
    let session = live.conversation.session();
    let used = session.context_tokens();
    let size = server.host.runtime().context_window().max(used);
    update(
        cx,
        &live.id,
        SessionUpdate::UsageUpdate(UsageUpdate::new(used, size)),
    );
    let title = server.host.session_title(session.id()).await.ok().flatten();
    let info = SessionInfoUpdate::new()
        .title(title)
        .updated_at(jiff::Timestamp::now().to_string());
    update(cx, &live.id, SessionUpdate::SessionInfoUpdate(info));
}

/// Tells the IDE which slash commands this agent answers.
pub fn offer_commands(session_id: &str, cx: &ConnectionTo<Client>) {
    let commands = herald_session::commands::offered(herald_session::Door::Acp)
        .map(|c| AvailableCommand::new(c.name, c.described()))
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
    for saved in live.conversation.session().history() {
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

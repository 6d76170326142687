//! One conversation's event stream mapped onto its chat: typing while a turn works,
//! questions asked, and each turn's answer stored, sent and its entry finished.

use super::asks::{clarify_text, decided};
use super::bubble::{Bubble, Left, Rhythm};
use super::outcome::Answer;
use super::wire::ChatWire;
use super::{ChatDoor, ChatRef, Mark, Platform};
use herald_config::chat_display::ToolProgress;
use herald_session::{ConversationEvent, Live, RunEventKind, RunState, RunStatus, TurnProgress};
use std::sync::Arc;

/// What a chat shows of the turn that runs: typing, the answer as it streams, the
/// tools it calls.
struct TurnView {
    typing: Typing,
    /// The answer so far, in the message it is shown in (`streaming.enabled`).
    stream: Option<Bubble>,
    /// Tool lines and the message they are shown in (`tool_progress`).
    progress: Option<Bubble>,
    last_tool: String,
}

impl TurnView {
    /// The turn ended: the tool lines stay, the streamed answer's message is handed
    /// back (the answer replaces it).
    async fn close(&mut self) -> Option<Left> {
        self.typing.stop();
        self.last_tool.clear();
        if let Some(p) = self.progress.take() {
            p.close(true).await;
        }
        match self.stream.take() {
            Some(b) => Some(b.close(false).await),
            None => None,
        }
    }
}

/// The typing indicator of a running turn: refreshed until dropped.
struct Typing(Option<tokio::task::JoinHandle<()>>);

impl Typing {
    fn stop(&mut self) {
        if let Some(t) = self.0.take() {
            t.abort();
        }
    }
}

impl Drop for Typing {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How often the typing indicator is sent again (Telegram's lasts about 5 s).
const TYPING_EVERY: std::time::Duration = std::time::Duration::from_secs(4);

/// A tool call's arguments in a line (at most 80 characters).
fn preview(arguments: &serde_json::Value) -> String {
    let text = match arguments {
        serde_json::Value::Object(m) if m.len() == 1 => m
            .values()
            .next()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
            .unwrap_or_default(),
        other => other.to_string(),
    };
    let line = text.replace('\n', " ");
    match line.chars().count() > 80 {
        true => format!("{}…", line.chars().take(79).collect::<String>()),
        false => line,
    }
}

impl<P: Platform> ChatDoor<P> {
    /// Maps one conversation's events to its chat until the conversation closes.
    pub(crate) async fn pump(self: Arc<Self>, live: Arc<Live<ChatWire>>) {
        let mut stream = live.conversation.listen().await;
        let mut view = TurnView {
            typing: Typing(None),
            stream: None,
            progress: None,
            last_tool: String::new(),
        };
        while let Some(event) = stream.next_event().await {
            match event {
                ConversationEvent::TurnStarted { run, text, .. } => {
                    if let Some(m) = live.wire.start(run.id(), &text) {
                        self.platform
                            .react(&live.wire.chat, &m, Mark::Working)
                            .await;
                    }
                    self.type_on(&mut view.typing, &live.wire.chat);
                }
                ConversationEvent::Run(e) => match e.kind {
                    RunEventKind::Progress(p) => self.progress(&live.wire.chat, &mut view, p).await,
                    kind => self.run_event(&live, &mut view, e.run_id, kind).await,
                },
                ConversationEvent::TurnFailed(why) => {
                    let preview = view.close().await;
                    self.drop_preview(&live.wire.chat, preview).await;
                    self.tell(&live.wire.chat, &format!("⚠️ {why}")).await;
                    if let Some(t) = live.wire.fail_next() {
                        self.fail(t.inbox_id, t.started_ms, &why).await;
                    }
                }
                ConversationEvent::Idle => view.typing.stop(),
            }
        }
    }

    /// The answer as it streams, and the tools called, when the chat shows them.
    async fn progress(&self, chat: &ChatRef, view: &mut TurnView, p: TurnProgress) {
        let display = &self.display;
        match p {
            TurnProgress::MessageDelta(d) if display.streaming.enabled => {
                let bubble = view
                    .stream
                    .get_or_insert_with(|| self.bubble(chat, display.streaming.buffer_threshold));
                bubble.append(&d);
            }
            // A message that calls tools: its text stays as it is, the next one
            // streams into a message of its own.
            TurnProgress::MessageComplete { tool_calls, .. } if tool_calls > 0 => {
                if let Some(b) = view.stream.take() {
                    b.close(true).await;
                }
            }
            TurnProgress::ToolStarted {
                name, arguments, ..
            } => {
                let line = match display.tool_progress {
                    ToolProgress::Off => return,
                    ToolProgress::New if name == view.last_tool => return,
                    ToolProgress::Verbose => format!("⚙️ {name}: {}", preview(&arguments)),
                    _ => format!("⚙️ {name}"),
                };
                view.last_tool = name;
                let bubble = view.progress.get_or_insert_with(|| self.bubble(chat, 1));
                let text = match bubble.text() {
                    t if t.is_empty() => line,
                    t => format!("{t}\n{line}"),
                };
                bubble.show(text);
            }
            _ => {}
        }
    }

    fn bubble(&self, chat: &ChatRef, threshold: usize) -> Bubble {
        let s = &self.display.streaming;
        let rhythm = Rhythm {
            interval: s.edit_interval,
            threshold,
            cursor: match threshold > 1 {
                true => s.cursor.clone(),
                false => String::new(),
            },
        };
        Bubble::start(self.platform.clone(), chat.clone(), rhythm)
    }

    async fn run_event(
        &self,
        live: &Live<ChatWire>,
        view: &mut TurnView,
        run_id: String,
        kind: RunEventKind,
    ) {
        let chat = &live.wire.chat;
        let typing = &mut view.typing;
        match kind {
            RunEventKind::Finished(status) => {
                let preview = view.close().await;
                live.wire.set_clarify(None);
                self.expire_asks(live).await;
                self.finished(live, &run_id, status, preview).await;
            }
            RunEventKind::ApprovalRequested {
                request_id,
                command,
                reason,
                ..
            } => {
                typing.stop();
                self.ask_approval(live, request_id, &command, &reason).await;
            }
            RunEventKind::ApprovalResponded {
                request_id,
                decision,
            } => {
                if let Some(asked) = live.wire.take_request(&request_id) {
                    self.close_prompt(chat, &asked, &decided(decision, None))
                        .await;
                }
                if !live.wire.awaiting_approval() {
                    self.type_on(typing, chat);
                }
            }
            RunEventKind::ClarifyRequested {
                request_id,
                question,
                choices,
            } => {
                typing.stop();
                live.wire.set_clarify(Some((request_id, choices.clone())));
                self.tell(chat, &clarify_text(&question, &choices)).await;
            }
            _ => {}
        }
    }

    /// A turn ended: its answer stored, then sent; a failure told and kept as one. A
    /// turn no entry asked for (a `/queue` line) has its answer sent all the same.
    async fn finished(
        &self,
        live: &Live<ChatWire>,
        run_id: &str,
        status: RunStatus,
        preview: Option<Left>,
    ) {
        let chat = &live.wire.chat;
        let ticket = live.wire.finish(run_id);
        let answer = status.output.filter(|a| !a.trim().is_empty());
        let session = live.conversation.session().id().to_owned();
        let Some(t) = ticket else {
            // A turn no entry asked for (a `/queue` line): its answer is sent all the
            // same (its text and files), once, with nothing to record.
            match (status.state, answer) {
                (RunState::Completed, Some(answer)) => {
                    let sent = self
                        .send_whole(chat, &answer, None, preview, Some(&session), None)
                        .await;
                    if let Err(e) = sent {
                        tracing::warn!(error = %e.message, "cannot send a queued turn's answer");
                    }
                }
                _ => self.drop_preview(chat, preview).await,
            }
            return;
        };
        let mark = match status.state {
            RunState::Completed => Mark::Done,
            RunState::Cancelled => Mark::Clear,
            _ => Mark::Failed,
        };
        let answered = t.reply_to.clone();
        match (status.state, answer) {
            (RunState::Completed, Some(answer)) => {
                if let Err(e) = self
                    .store
                    .store_answer(t.inbox_id, answer.clone(), t.started_ms)
                    .await
                {
                    tracing::error!(error = %e, inbox_id = t.inbox_id, "cannot store a chat answer");
                }
                self.deliver(Answer {
                    inbox_id: t.inbox_id,
                    started_ms: t.started_ms,
                    attempts: 1,
                    chat,
                    text: &answer,
                    reply_to: t.reply_to.as_deref(),
                    preview,
                    session: Some(session),
                })
                .await;
            }
            (RunState::Completed, None) => {
                self.drop_preview(chat, preview).await;
                self.finish(t.inbox_id, t.started_ms, "delivered", "empty answer")
                    .await
            }
            (RunState::Cancelled, _) => {
                self.drop_preview(chat, preview).await;
                self.finish(t.inbox_id, t.started_ms, "interrupted", "interrupted")
                    .await
            }
            (_, _) => {
                self.drop_preview(chat, preview).await;
                let why = status.error.unwrap_or_else(|| "the run failed".to_owned());
                self.tell(chat, &format!("⚠️ {why}")).await;
                self.fail(t.inbox_id, t.started_ms, &why).await;
            }
        }
        if let Some(m) = answered {
            self.platform.react(chat, &m, mark).await;
        }
    }

    /// Shows typing until the turn ends or asks something (one indicator at a time).
    fn type_on(&self, typing: &mut Typing, chat: &ChatRef) {
        typing.stop();
        let platform = self.platform.clone();
        let chat = chat.clone();
        typing.0 = Some(tokio::spawn(async move {
            loop {
                platform.typing(&chat).await;
                tokio::time::sleep(TYPING_EVERY).await;
            }
        }));
    }
}

//! One conversation's event stream mapped onto its chat: typing while a turn works,
//! questions asked, and each turn's answer stored, sent and its entry finished.

use super::asks::{clarify_text, decided};
use super::wire::ChatWire;
use super::{ChatDoor, ChatRef, Platform};
use herald_session::{ConversationEvent, Live, RunEventKind, RunState, RunStatus};
use std::sync::Arc;

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

impl<P: Platform> ChatDoor<P> {
    /// Maps one conversation's events to its chat until the conversation closes.
    pub(crate) async fn pump(self: Arc<Self>, live: Arc<Live<ChatWire>>) {
        let mut stream = live.conversation.listen().await;
        let mut typing = Typing(None);
        while let Some(event) = stream.next_event().await {
            match event {
                ConversationEvent::TurnStarted { run, text, .. } => {
                    live.wire.start(run.id(), &text);
                    self.type_on(&mut typing, &live.wire.chat);
                }
                ConversationEvent::Run(e) => {
                    self.run_event(&live, &mut typing, e.run_id, e.kind).await
                }
                ConversationEvent::TurnFailed(why) => {
                    typing.stop();
                    self.tell(&live.wire.chat, &format!("⚠️ {why}")).await;
                    if let Some(t) = live.wire.fail_next() {
                        self.fail(t.inbox_id, t.started_ms, &why).await;
                    }
                }
                ConversationEvent::Idle => typing.stop(),
            }
        }
    }

    async fn run_event(
        &self,
        live: &Live<ChatWire>,
        typing: &mut Typing,
        run_id: String,
        kind: RunEventKind,
    ) {
        let chat = &live.wire.chat;
        match kind {
            RunEventKind::Finished(status) => {
                typing.stop();
                live.wire.set_clarify(None);
                self.expire_asks(live).await;
                self.finished(live, &run_id, status).await;
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
    async fn finished(&self, live: &Live<ChatWire>, run_id: &str, status: RunStatus) {
        let chat = &live.wire.chat;
        let ticket = live.wire.finish(run_id);
        let answer = status.output.filter(|a| !a.trim().is_empty());
        let Some(t) = ticket else {
            if let (RunState::Completed, Some(answer)) = (status.state, answer) {
                self.tell(chat, &answer).await;
            }
            return;
        };
        match (status.state, answer) {
            (RunState::Completed, Some(answer)) => {
                if let Err(e) = self
                    .store
                    .store_answer(t.inbox_id, answer.clone(), t.started_ms)
                    .await
                {
                    tracing::error!(error = %e, inbox_id = t.inbox_id, "cannot store a chat answer");
                }
                self.deliver(t.inbox_id, t.started_ms, 1, chat, &answer, t.reply_to)
                    .await;
            }
            (RunState::Completed, None) => {
                self.finish(t.inbox_id, t.started_ms, "delivered", "empty answer")
                    .await
            }
            (RunState::Cancelled, _) => {
                self.finish(t.inbox_id, t.started_ms, "interrupted", "interrupted")
                    .await
            }
            (_, _) => {
                let why = status.error.unwrap_or_else(|| "the run failed".to_owned());
                self.tell(chat, &format!("⚠️ {why}")).await;
                self.fail(t.inbox_id, t.started_ms, &why).await;
            }
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

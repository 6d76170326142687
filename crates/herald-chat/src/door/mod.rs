//! The chat-platform door: a message stored in the inbox becomes an operation on the
//! conversation of its session key, and that conversation's events become messages in
//! its chat. The lifecycle (turns, queue, busy policy, commands) is herald-session's;
//! a platform only says how a message reads ([`Inbound`]) and how text is sent
//! ([`Platform`]).
//!
//! An entry is done only once its turn's answer was sent (or the turn failed and the
//! chat was told): an entry whose instance died is claimed again, and one whose answer
//! was stored before the crash is sent without running again.

mod asks;
mod bubble;
mod commands;
mod files;
mod media;
mod outcome;
mod platform;
mod pump;
mod wire;

pub use files::{KEEP_FILES_FOR, MAX_FILE_BYTES, session_folder, sweep};
pub use outcome::SendFailure;
pub use platform::{
    Attachment, AttachmentKind, ChatRef, Click, Downloaded, Inbound, Mark, OutFile, OutKind,
    Platform,
};
pub use wire::ChatWire;

use crate::key::{KeyRules, session_key};
use crate::pairing::PairingStore;
use herald_config::chat_display::ChatDisplay;
use herald_config::default_config::BusyInputMode;
use herald_session::{
    Conversations, Host, Live, LiveError, LiveId, Op, OpError, Outcome, SessionError,
    SessionOptions, UserInput,
};
use herald_store::{InboxItem, Stage, Store, now_ms};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use wire::{Ticket, lock};

/// Conversations of one chat door live at once; the least recently used idle one is
/// closed (and reopened from its stored session) to make room.
pub const LIVE_CONVERSATIONS: usize = 512;

/// The least time between two busy acknowledgements in one conversation.
const ACK_COOLDOWN: std::time::Duration = std::time::Duration::from_secs(30);

/// One platform's door.
pub struct ChatDoor<P: Platform> {
    pub platform: Arc<P>,
    pub store: Store,
    /// Unknown users in private chats get a pairing code (`unauthorized_dm_behavior:
    /// pair`); `None`: they are ignored.
    pub pairing: Option<PairingStore>,
    /// The entries being worked on here (their leases renewed).
    pub(crate) held: crate::dispatch::Held,
    conversations: Conversations<ChatWire>,
    /// Approval buttons' tokens and the conversation that asked (a press by another
    /// member of a group reaches it).
    tokens: Mutex<HashMap<String, String>>,
    tools: Vec<String>,
    rules: KeyRules,
    /// Streaming, tool progress, the folders answers may send files from.
    display: ChatDisplay,
    /// When this door started: messages received before it are a backlog, queued in
    /// order rather than interrupting each other.
    started_ms: i64,
}

/// Why no conversation could be had for a message.
enum NoConversation {
    /// Every live conversation runs a turn: try again later.
    Full(String),
    Failed(String),
}

impl<P: Platform> ChatDoor<P> {
    pub fn new(
        platform: Arc<P>,
        store: Store,
        host: Arc<Host>,
        tools: Vec<String>,
        rules: KeyRules,
        pairing: Option<PairingStore>,
        display: ChatDisplay,
    ) -> Arc<ChatDoor<P>> {
        Arc::new(ChatDoor {
            platform,
            store,
            pairing,
            held: Default::default(),
            conversations: Conversations::with_cap(host, LIVE_CONVERSATIONS),
            tokens: Mutex::default(),
            tools,
            rules,
            display,
            started_ms: now_ms(),
        })
    }

    /// How many conversations are live.
    pub fn live(&self) -> usize {
        self.conversations.all().len()
    }

    /// Acts on one claimed entry: its stored answer is sent; else its message is put
    /// to its conversation (the entry is finished when its turn is).
    pub async fn take(self: &Arc<Self>, item: InboxItem) {
        let started = now_ms();
        let inbound = match self.platform.read(&item).await {
            Ok(i) => i,
            Err(why) => return self.finish(item.id, started, "ignored", &why).await,
        };
        if let Some(name) = inbound.stranger.clone() {
            return self.pair(item.id, started, &inbound, &name).await;
        }
        if let Some(answer) = item.answer.clone() {
            let key = session_key(&inbound.source, self.rules);
            let host = self.conversations.host();
            let session = host.keyed_session(&key).await.ok().flatten();
            return self
                .deliver(outcome::Answer {
                    inbox_id: item.id,
                    started_ms: started,
                    attempts: item.delivery_attempts,
                    chat: &inbound.chat,
                    text: &answer,
                    reply_to: inbound.message_id.as_deref(),
                    preview: None,
                    session,
                })
                .await;
        }
        if let Some(click) = &inbound.click {
            let live = self.asker(&click.data);
            self.clicked(live.as_deref(), &inbound.chat, click).await;
            return self.finish(item.id, started, "delivered", "button").await;
        }
        let key = session_key(&inbound.source, self.rules);
        let live = match self.conversation(&key, &inbound.chat).await {
            Ok(l) => l,
            Err(NoConversation::Full(why)) => {
                return self
                    .retry(item.id, started, item.attempts, Stage::Run, &why)
                    .await;
            }
            Err(NoConversation::Failed(why)) => {
                self.tell(&inbound.chat, &format!("⚠️ {why}")).await;
                return self.fail(item.id, started, &why).await;
            }
        };
        let _taking = live.wire.taking();
        self.act(&live, &item, started, &inbound).await;
    }

    /// A message to a live conversation: an answer to its question, a command, or a
    /// prompt.
    async fn act(&self, live: &Live<ChatWire>, item: &InboxItem, started: i64, inbound: &Inbound) {
        let text = inbound.text.trim();
        let command = text.starts_with('/');
        if !command && let Some((request_id, choices)) = live.wire.take_clarify() {
            let answer = asks::clarify_answer(text, &choices);
            self.clarified(live, request_id, &answer).await;
            return self
                .finish(item.id, started, "delivered", "clarify answered")
                .await;
        }
        if let Some(decision) = asks::bare_answer(text).filter(|_| live.wire.awaiting_approval()) {
            self.approve_by_word(live, decision).await;
            return self
                .finish(item.id, started, "delivered", "approval answered")
                .await;
        }
        if command {
            return self.command(live, item, started, text).await;
        }
        let session = live.conversation.session();
        let input = self
            .input(&inbound.text, &inbound.files, session.id(), item.id)
            .await;
        let backlog = item.received_at_ms < self.started_ms;
        self.prompt(
            live,
            item.id,
            started,
            input,
            backlog,
            inbound.message_id.clone(),
        )
        .await;
    }

    /// The conversation that asked the approval a button's data names, if it is live.
    fn asker(&self, data: &str) -> Option<Arc<Live<ChatWire>>> {
        let (token, _) = asks::parse_button(data)?;
        let key = lock(&self.tokens).remove(token)?;
        self.conversations.get(&key)
    }

    pub(crate) fn remember_token(&self, token: &str, key: &str) {
        let mut tokens = lock(&self.tokens);
        // Tokens of runs long gone are forgotten rather than kept without end.
        if tokens.len() >= 10_000 {
            tokens.clear();
        }
        tokens.insert(token.to_owned(), key.to_owned());
    }

    /// The live conversation of `key`: the one live, else its newest stored session
    /// resumed, else a new one.
    async fn conversation(
        self: &Arc<Self>,
        key: &str,
        chat: &ChatRef,
    ) -> Result<Arc<Live<ChatWire>>, NoConversation> {
        if let Some(live) = self.conversations.get(key) {
            return Ok(live);
        }
        let host = self.conversations.host().clone();
        let stored = host
            .keyed_session(key)
            .await
            .map_err(|e| NoConversation::Failed(e.told().into_owned()))?;
        let id = LiveId::Given(key.to_owned());
        let (options, wire) = (self.options(key), ChatWire::new(chat.clone()));
        let opened = match stored {
            Some(s) => self.conversations.resume(id, &s, options, wire).await,
            None => self.conversations.open(id, options, wire).await,
        };
        let live = opened.map_err(|e| match e {
            LiveError::Cap(c) => NoConversation::Full(c.to_string()),
            LiveError::Session(s) => NoConversation::Failed(s.told().into_owned()),
        })?;
        let door = self.clone();
        let pumped = live.clone();
        tokio::spawn(async move { door.pump(pumped).await });
        Ok(live)
    }

    pub(crate) fn options(&self, key: &str) -> SessionOptions {
        let mut o = SessionOptions::new(
            P::NAME,
            self.tools.clone(),
            herald_session::Answers::ByRequest,
        );
        o.session_key = Some(key.to_owned());
        o
    }

    /// A prompt: now, or as the busy-input policy says (a backlog is queued in order).
    pub(crate) async fn prompt(
        &self,
        live: &Live<ChatWire>,
        id: i64,
        started: i64,
        input: UserInput,
        queued: bool,
        reply_to: Option<String>,
    ) {
        let c = &live.conversation;
        live.wire.wait(Ticket {
            inbox_id: id,
            started_ms: started,
            text: input.text.clone(),
            reply_to,
        });
        let op = match queued {
            true => Op::Queue(input),
            false => Op::Submit(input),
        };
        match c.submit(op).await {
            Ok(Outcome::Queued(n)) if n > 0 && !queued => {
                let interrupting = c.host().runtime().busy_input_mode() == BusyInputMode::Interrupt;
                let note = match interrupting {
                    true => "⚡ Interrupting current task. I'll respond to your message shortly.",
                    false => {
                        "⏳ Queued for the next turn. I'll respond once the current task finishes."
                    }
                };
                self.ack(&live.wire, note).await;
            }
            Ok(Outcome::Steered(_)) => {
                live.wire.withdraw(id);
                let note =
                    "⏩ Steered into current run. Your message arrives after the next tool call.";
                self.ack(&live.wire, note).await;
                self.finish(id, started, "steered", "steered into the running turn")
                    .await;
            }
            Ok(_) => {}
            // The host keeps as many runs as it may: the message waits its turn.
            Err(OpError::Session(SessionError::TooManyRuns(_))) => {
                live.wire.withdraw(id);
                self.retry(id, started, 0, Stage::Run, "too many runs at once")
                    .await;
            }
            Err(e) => {
                live.wire.withdraw(id);
                self.tell(&live.wire.chat, &format!("⚠️ {}", e.told()))
                    .await;
                self.fail(id, started, &e.told()).await;
            }
        }
    }

    /// A busy acknowledgement, at most one per [`ACK_COOLDOWN`] per conversation (as
    /// Hermes).
    async fn ack(&self, wire: &ChatWire, text: &str) {
        {
            let mut last = lock(&wire.last_ack);
            let now = std::time::Instant::now();
            if last.is_some_and(|t| now.duration_since(t) < ACK_COOLDOWN) {
                return;
            }
            *last = Some(now);
        }
        self.tell(&wire.chat, text).await;
    }

    /// A stranger in a private chat: a pairing code (at most one per 10 minutes), or
    /// nothing when pairing is off.
    async fn pair(&self, id: i64, started: i64, inbound: &Inbound, name: &str) {
        let Some(pairing) = self.pairing.clone() else {
            return self.finish(id, started, "ignored", "not allowed").await;
        };
        let user = inbound.source.user_id.clone().unwrap_or_default();
        let platform = P::NAME;
        let (who, named) = (user.clone(), name.to_owned());
        let code =
            tokio::task::spawn_blocking(move || pairing.request(platform, &who, &named)).await;
        let said = match code {
            Ok(Ok(crate::pairing::Requested::Code(code))) => format!(
                "Hi~ I don't recognize you yet!\n\nHere's your pairing code: `{code}`\n\nAsk the bot owner to run:\n`herald pairing approve {platform} {code}`"
            ),
            Ok(Ok(crate::pairing::Requested::TooMany)) => {
                "Too many pairing requests right now~ Please try again later!".to_owned()
            }
            Ok(Ok(crate::pairing::Requested::TooSoon)) => {
                return self
                    .finish(id, started, "ignored", "pairing asked again too soon")
                    .await;
            }
            Ok(Err(e)) => return self.fail(id, started, &e.to_string()).await,
            Err(e) => return self.fail(id, started, &e.to_string()).await,
        };
        tracing::warn!(user = %user, platform, "an unknown user asked to pair");
        self.tell(&inbound.chat, &said).await;
        self.finish(id, started, "delivered", "pairing reply sent")
            .await;
    }
}

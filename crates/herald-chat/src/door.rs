//! The chat-platform door: a message stored in the inbox becomes an operation on the
//! conversation of its session key, and that conversation's events become messages in
//! its chat. The lifecycle (turns, queue, busy policy, commands) is herald-session's;
//! a platform only says how a message reads ([`Inbound`]) and how text is sent
//! ([`Platform`]).
//!
//! An entry is done only once its turn's answer was sent (or the turn failed and the
//! chat was told): an entry whose instance died is claimed again, and one whose answer
//! was stored before the crash is sent without running again.

use crate::key::{KeyRules, Source, session_key};
use crate::pairing::PairingStore;
use herald_session::{
    ConversationEvent, Conversations, DoorWire, Host, Live, LiveId, Op, Opening, Outcome, Reply,
    RunEventKind, RunState, RunStatus, SessionOptions,
};
use herald_store::{InboxItem, NewDelivery, Stage, Store, now_ms};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};

/// Where a message goes: a chat (and a topic in it), replying to a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatRef {
    pub chat_id: i64,
    pub thread_id: Option<i64>,
    /// A group (its own, slower send limit).
    pub group: bool,
}

/// A message the door acts on.
#[derive(Debug, Clone)]
pub struct Inbound {
    pub source: Source,
    pub chat: ChatRef,
    pub text: String,
    /// The sender is on no allow-list and wrote in private: their name (for pairing).
    pub stranger: Option<String>,
    /// A button pressed under one of the bot's messages.
    pub click: Option<Click>,
}

/// A button pressed: its platform id (to answer), its data, the message it is under
/// and who pressed it.
#[derive(Debug, Clone)]
pub struct Click {
    pub id: String,
    pub data: String,
    pub message_id: String,
    pub by: String,
}

/// An approval asked with buttons: the request and the message holding them.
#[derive(Debug, Clone)]
struct Asked {
    request_id: String,
    message_id: Option<String>,
}

/// What a platform does for the door.
pub trait Platform: Send + Sync + 'static {
    /// The platform's name (`telegram`), as sessions' `source`.
    const NAME: &'static str;
    /// Sends `text` (Markdown as the model writes it) to `chat`: the ids of the
    /// messages it became.
    fn send(
        &self,
        chat: &ChatRef,
        text: &str,
    ) -> impl Future<Output = Result<Vec<String>, String>> + Send;
    /// Shows that an answer is being written (refreshed while a turn runs).
    fn typing(&self, chat: &ChatRef) -> impl Future<Output = ()> + Send;
    /// The message an inbox entry holds, or why the door leaves it alone.
    fn read(&self, item: &InboxItem) -> Result<Inbound, String>;
    /// The chat an entry is from, cheaply (entries of one chat are taken in order).
    fn chat_of(&self, item: &InboxItem) -> Option<i64>;
    /// Sends an approval request with Allow once / Session / Always / Deny buttons
    /// whose data is `ap:<token>:<o|s|a|d>`: the id of the message.
    fn send_approval(
        &self,
        chat: &ChatRef,
        token: &str,
        text: &str,
    ) -> impl Future<Output = Result<Option<String>, String>> + Send;
    /// Replaces a message's text (and takes its buttons away).
    fn edit(&self, chat: &ChatRef, message_id: &str, text: &str)
    -> impl Future<Output = ()> + Send;
    /// Answers a button press (the client stops its spinner).
    fn answer_click(&self, click_id: &str, text: &str) -> impl Future<Output = ()> + Send;
}

/// An inbox entry whose turn the conversation owes.
#[derive(Debug)]
struct Ticket {
    inbox_id: i64,
    started_ms: i64,
}

/// A chat conversation's wire: its chat and the entries it owes, oldest first.
pub struct ChatWire {
    chat: ChatRef,
    tickets: Mutex<VecDeque<Ticket>>,
    /// Approvals asked with buttons, by the token in the buttons' data.
    asked: Mutex<HashMap<String, Asked>>,
}

impl DoorWire for ChatWire {
    const DOOR: herald_session::Door = herald_session::Door::Platform;
    type Memo = ();
    fn memo(&self) {}
}

impl ChatWire {
    fn push(&self, t: Ticket) {
        lock(&self.tickets).push_back(t);
    }
    fn pop(&self) -> Option<Ticket> {
        lock(&self.tickets).pop_front()
    }
    fn remove(&self, inbox_id: i64) -> Option<Ticket> {
        let mut q = lock(&self.tickets);
        let at = q.iter().position(|t| t.inbox_id == inbox_id)?;
        q.remove(at)
    }
    /// The approval asked under `token`, taken (it is answered once).
    fn take_asked(&self, token: &str) -> Option<Asked> {
        lock(&self.asked).remove(token)
    }
    /// The approval asked for `request_id`, taken.
    fn take_request(&self, request_id: &str) -> Option<Asked> {
        let mut asked = lock(&self.asked);
        let token = asked
            .iter()
            .find(|(_, a)| a.request_id == request_id)?
            .0
            .clone();
        asked.remove(&token)
    }
    fn awaiting_approval(&self) -> bool {
        !lock(&self.asked).is_empty()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

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
    tools: Vec<String>,
    rules: KeyRules,
}

impl<P: Platform> ChatDoor<P> {
    pub fn new(
        platform: Arc<P>,
        store: Store,
        host: Arc<Host>,
        tools: Vec<String>,
        rules: KeyRules,
        pairing: Option<PairingStore>,
    ) -> Arc<ChatDoor<P>> {
        Arc::new(ChatDoor {
            platform,
            store,
            pairing,
            held: Default::default(),
            conversations: Conversations::new(host),
            tools,
            rules,
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
        let inbound = match self.platform.read(&item) {
            Ok(i) => i,
            Err(why) => return self.finish(item.id, started, "ignored", &why).await,
        };
        if let Some(name) = inbound.stranger.clone() {
            return self.pair(item.id, started, &inbound, &name).await;
        }
        if let Some(answer) = item.answer.clone() {
            return self.deliver(item.id, started, &inbound.chat, &answer).await;
        }
        let key = session_key(&inbound.source, self.rules);
        let live = match self.conversation(&key, &inbound.chat).await {
            Ok(l) => l,
            Err(e) => {
                let told = format!("⚠️ {e}");
                self.tell(&inbound.chat, &told).await;
                return self.fail(item.id, started, &e).await;
            }
        };
        if let Some(click) = &inbound.click {
            return self.clicked(&live, item.id, started, click).await;
        }
        let text = inbound.text.trim();
        if let Some(decision) = bare_answer(text).filter(|_| live.wire.awaiting_approval()) {
            return self
                .approve_by_word(&live, item.id, started, decision)
                .await;
        }
        if text.starts_with('/') {
            self.command(&live, item.id, started, text).await;
        } else {
            self.prompt(&live, item.id, started, text.to_owned()).await;
        }
    }

    /// A stranger in a private chat: a pairing code (at most one per 10 minutes), or
    /// nothing when pairing is off.
    async fn pair(&self, id: i64, started: i64, inbound: &Inbound, name: &str) {
        let user = inbound.source.user_id.clone().unwrap_or_default();
        let Some(pairing) = self.pairing.clone() else {
            return self.finish(id, started, "ignored", "not allowed").await;
        };
        let platform = P::NAME;
        let (who, named) = (user.clone(), name.to_owned());
        let code =
            tokio::task::spawn_blocking(move || match pairing.rate_limited(platform, &who) {
                true => Ok(None),
                false => pairing.generate_code(platform, &who, &named).map(Some),
            })
            .await;
        let said = match code {
            Ok(Ok(Some(Some(code)))) => format!(
                "Hi~ I don't recognize you yet!\n\nHere's your pairing code: `{code}`\n\nAsk the bot owner to run:\n`herald pairing approve {platform} {code}`"
            ),
            Ok(Ok(Some(None))) => {
                "Too many pairing requests right now~ Please try again later!".to_owned()
            }
            Ok(Ok(None)) => {
                return self
                    .finish(id, started, "ignored", "pairing asked again too soon")
                    .await;
            }
            Ok(Err(e)) => {
                tracing::error!(error = %e, "cannot keep a pairing request");
                return self.fail(id, started, &e.to_string()).await;
            }
            Err(e) => return self.fail(id, started, &e.to_string()).await,
        };
        tracing::warn!(user = %user, platform, "an unknown user asked to pair");
        self.tell(&inbound.chat, &said).await;
        self.finish(id, started, "delivered", "pairing code sent")
            .await;
    }

    /// The live conversation of `key`: the one live, else its newest stored session
    /// resumed, else a new one.
    async fn conversation(
        self: &Arc<Self>,
        key: &str,
        chat: &ChatRef,
    ) -> Result<Arc<Live<ChatWire>>, String> {
        if let Some(live) = self.conversations.get(key) {
            return Ok(live);
        }
        let host = self.conversations.host().clone();
        let wire = ChatWire {
            chat: chat.clone(),
            tickets: Mutex::new(VecDeque::new()),
            asked: Mutex::new(HashMap::new()),
        };
        let id = LiveId::Given(key.to_owned());
        let options = self.options(key);
        let stored = host
            .keyed_session(key)
            .await
            .map_err(|e| e.told().into_owned())?;
        let opened = match stored {
            Some(s) => self.conversations.resume(id, &s, options, wire).await,
            None => self.conversations.open(id, options, wire).await,
        };
        let live = opened.map_err(|e| e.to_string())?;
        let door = self.clone();
        let pumped = live.clone();
        tokio::spawn(async move { door.pump(pumped).await });
        Ok(live)
    }

    fn options(&self, key: &str) -> SessionOptions {
        let mut o = SessionOptions::new(
            P::NAME,
            self.tools.clone(),
            herald_session::Answers::ByRequest,
        );
        o.session_key = Some(key.to_owned());
        o
    }

    /// A prompt: now, or as the busy-input policy says.
    async fn prompt(&self, live: &Live<ChatWire>, id: i64, started: i64, text: String) {
        let c = &live.conversation;
        live.wire.push(Ticket {
            inbox_id: id,
            started_ms: started,
        });
        match c.submit(Op::Submit(text.into())).await {
            Ok(Outcome::Queued(n)) if n > 0 => {
                let note = format!("⏳ Queued for the next turn. ({n} queued)");
                self.tell(&live.wire.chat, &note).await;
            }
            Ok(Outcome::Steered(_)) => {
                live.wire.remove(id);
                self.tell(&live.wire.chat, "⏩ Steered into the current run.")
                    .await;
                self.finish(id, started, "steered", "steered into the running turn")
                    .await;
            }
            Ok(_) => {}
            Err(e) => {
                live.wire.remove(id);
                self.tell(&live.wire.chat, &format!("⚠️ {}", e.told()))
                    .await;
                self.fail(id, started, &e.told()).await;
            }
        }
    }

    /// A slash command from the one command table.
    async fn command(&self, live: &Live<ChatWire>, id: i64, started: i64, line: &str) {
        let c = &live.conversation;
        let reply = match c.submit(Op::Command(line.to_owned())).await {
            Ok(Outcome::Reply(r)) => r,
            Ok(_) => Reply::NotACommand,
            Err(e) => Reply::Output(format!("⚠️ {}", e.told())),
        };
        let said = match reply {
            Reply::Output(text) => text,
            Reply::ModelSwitched(model) => format!("Model switched to {model}."),
            Reply::New => match c.submit(Op::New(Opening(self.options(&live.id)))).await {
                Ok(_) => "✨ New session started.".to_owned(),
                Err(e) => format!("⚠️ {}", e.told()),
            },
            Reply::Resume(stored) => match c
                .submit(Op::Resume(stored, Opening(self.options(&live.id))))
                .await
            {
                Ok(Outcome::Switched { id, messages }) => {
                    format!("Resumed session {id} ({messages} messages).")
                }
                Ok(_) => "Resumed.".to_owned(),
                Err(e) => format!("⚠️ {}", e.told()),
            },
            Reply::SetHome => self.set_home(&live.wire.chat),
            Reply::Send(text) => return self.prompt(live, id, started, text).await,
            Reply::NotACommand | Reply::Unknown { .. } | Reply::Quit => {
                return self.prompt(live, id, started, line.to_owned()).await;
            }
        };
        self.tell(&live.wire.chat, &said).await;
        self.finish(id, started, "delivered", "command").await;
    }

    /// Asks for an approval with buttons (their token kept with the request), or in
    /// words when the buttons cannot be sent.
    async fn ask_approval(&self, wire: &ChatWire, request_id: String, command: &str, reason: &str) {
        let token = new_token();
        let shown: String = command.chars().take(3800).collect();
        let text =
            format!("⚠️ **Command Approval Required**\n\n```\n{shown}\n```\nReason: {reason}");
        match self.platform.send_approval(&wire.chat, &token, &text).await {
            Ok(message_id) => {
                lock(&wire.asked).insert(
                    token,
                    Asked {
                        request_id,
                        message_id,
                    },
                );
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot send approval buttons; asking in words");
                self.tell(&wire.chat, &approval_text(command, reason)).await;
            }
        }
    }

    /// A button pressed: the decision goes to the run when its request still waits;
    /// else the message says the approval expired.
    async fn clicked(&self, live: &Live<ChatWire>, id: i64, started: i64, click: &Click) {
        let parsed = parse_button(&click.data);
        let asked = parsed.and_then(|(token, _)| live.wire.take_asked(token));
        let answered = match (parsed, &asked) {
            (Some((_, decision)), Some(a)) => live
                .conversation
                .submit(Op::Approve {
                    request_id: Some(a.request_id.clone()),
                    decision,
                    all: false,
                })
                .await
                .ok()
                .map(|_| decision),
            _ => None,
        };
        let text = match answered {
            Some(decision) => decided(decision, Some(&click.by)),
            None => EXPIRED.to_owned(),
        };
        self.platform
            .answer_click(&click.id, if answered.is_some() { "" } else { EXPIRED })
            .await;
        self.platform
            .edit(&live.wire.chat, &click.message_id, &text)
            .await;
        self.finish(id, started, "delivered", "button").await;
    }

    /// A bare "yes", "no", "always" ... while an approval waits answers the oldest.
    async fn approve_by_word(
        &self,
        live: &Live<ChatWire>,
        id: i64,
        started: i64,
        decision: herald_session::Decision,
    ) {
        let op = Op::Approve {
            request_id: None,
            decision,
            all: false,
        };
        if let Err(e) = live.conversation.submit(op).await {
            self.tell(&live.wire.chat, &format!("⚠️ {}", e.told()))
                .await;
        }
        self.finish(id, started, "delivered", "approval answered")
            .await;
    }

    /// Edits an approval's message to say how it ended (its buttons go).
    async fn close_prompt(&self, chat: &ChatRef, asked: &Asked, text: &str) {
        if let Some(m) = &asked.message_id {
            self.platform.edit(chat, m, text).await;
        }
    }

    /// `/sethome`: this chat (and topic) is the platform's home channel, kept in `.env`
    /// as Hermes keeps it (`<PLATFORM>_HOME_CHANNEL`, `_THREAD_ID`).
    fn set_home(&self, chat: &ChatRef) -> String {
        let prefix = P::NAME.to_uppercase();
        let env = self.conversations.host().runtime().home.env_file();
        let chat_id = chat.chat_id.to_string();
        let thread = chat.thread_id.map(|t| t.to_string()).unwrap_or_default();
        let keys = [
            (format!("{prefix}_HOME_CHANNEL"), chat_id.clone()),
            (format!("{prefix}_HOME_CHANNEL_THREAD_ID"), thread),
        ];
        for (key, value) in &keys {
            if let Err(e) = herald_config::env_file::set_value(&env, key, value) {
                return format!("Failed to save home channel: {e}");
            }
        }
        format!(
            "✅ Home channel set to **{chat_id}** (ID: {chat_id}).\nCron jobs and cross-platform messages will be delivered here."
        )
    }

    /// Maps one conversation's events to its chat until the conversation closes.
    async fn pump(self: Arc<Self>, live: Arc<Live<ChatWire>>) {
        let mut stream = live.conversation.listen().await;
        let mut current: Option<Ticket> = None;
        let mut typing: Option<tokio::task::JoinHandle<()>> = None;
        while let Some(event) = stream.next_event().await {
            match event {
                ConversationEvent::TurnStarted { .. } => {
                    current = live.wire.pop();
                    typing = Some(self.keep_typing(live.wire.chat.clone()));
                }
                ConversationEvent::Run(e) => match e.kind {
                    RunEventKind::Finished(status) => {
                        stop(&mut typing);
                        let left: Vec<Asked> =
                            lock(&live.wire.asked).drain().map(|(_, a)| a).collect();
                        for asked in left {
                            self.close_prompt(&live.wire.chat, &asked, EXPIRED).await;
                        }
                        if let Some(t) = current.take() {
                            self.finished(&live.wire.chat, t, status).await;
                        }
                    }
                    RunEventKind::ApprovalRequested {
                        request_id,
                        command,
                        reason,
                        ..
                    } => {
                        stop(&mut typing);
                        self.ask_approval(&live.wire, request_id, &command, &reason)
                            .await;
                    }
                    RunEventKind::ApprovalResponded {
                        request_id,
                        decision,
                    } => {
                        if let Some(asked) = live.wire.take_request(&request_id) {
                            self.close_prompt(&live.wire.chat, &asked, &decided(decision, None))
                                .await;
                        }
                        typing = Some(self.keep_typing(live.wire.chat.clone()));
                    }
                    RunEventKind::ClarifyRequested {
                        question, choices, ..
                    } => {
                        stop(&mut typing);
                        self.tell(&live.wire.chat, &clarify_text(&question, &choices))
                            .await;
                    }
                    _ => {}
                },
                ConversationEvent::TurnFailed(why) => {
                    stop(&mut typing);
                    if let Some(t) = live.wire.pop() {
                        self.tell(&live.wire.chat, &format!("⚠️ {why}")).await;
                        self.fail(t.inbox_id, t.started_ms, &why).await;
                    }
                }
                ConversationEvent::Idle => {
                    stop(&mut typing);
                    // Prompts a `/stop` dropped never start.
                    while let Some(t) = live.wire.pop() {
                        self.finish(t.inbox_id, t.started_ms, "dropped", "dropped by /stop")
                            .await;
                    }
                }
            }
        }
        stop(&mut typing);
    }

    /// A turn ended: its answer stored, then sent; a failure told and kept as one.
    async fn finished(&self, chat: &ChatRef, t: Ticket, status: RunStatus) {
        match (status.state, status.output) {
            (RunState::Completed, Some(answer)) if !answer.trim().is_empty() => {
                if let Err(e) = self
                    .store
                    .store_answer(t.inbox_id, answer.clone(), t.started_ms)
                    .await
                {
                    tracing::error!(error = %e, inbox_id = t.inbox_id, "cannot store a chat answer");
                }
                self.deliver(t.inbox_id, t.started_ms, chat, &answer).await;
            }
            (RunState::Completed, _) => {
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

    /// Sends a stored answer and marks its entry delivered (or dead, said why).
    async fn deliver(&self, id: i64, started: i64, chat: &ChatRef, answer: &str) {
        match self.platform.send(chat, answer).await {
            Ok(ids) => self.finish(id, started, "delivered", &ids.join(",")).await,
            Err(e) => self.fail(id, started, &e).await,
        }
    }

    /// Sends a note; a failure is logged (the entry's own outcome is what counts).
    async fn tell(&self, chat: &ChatRef, text: &str) {
        if let Err(e) = self.platform.send(chat, text).await {
            tracing::warn!(error = %e, chat = chat.chat_id, "cannot send a note to a chat");
        }
    }

    fn keep_typing(&self, chat: ChatRef) -> tokio::task::JoinHandle<()> {
        let platform = self.platform.clone();
        tokio::spawn(async move {
            loop {
                platform.typing(&chat).await;
                tokio::time::sleep(std::time::Duration::from_secs(4)).await;
            }
        })
    }

    async fn finish(&self, id: i64, started: i64, status: &str, message: &str) {
        let delivery = self.delivery(id, status, None, message);
        if let Err(e) = self.store.mark_delivered(id, started, delivery).await {
            tracing::error!(error = %e, inbox_id = id, "cannot mark a chat message done");
        }
        self.held.release(id);
    }

    async fn fail(&self, id: i64, started: i64, why: &str) {
        let delivery = self.delivery(id, "failed", Some(why.to_owned()), why);
        if let Err(e) = self
            .store
            .mark_dead(id, Stage::Run, started, why.to_owned(), Some(delivery))
            .await
        {
            tracing::error!(error = %e, inbox_id = id, "cannot mark a chat message failed");
        }
        self.held.release(id);
    }

    fn delivery(&self, id: i64, status: &str, error: Option<String>, message: &str) -> NewDelivery {
        NewDelivery {
            kind: "chat".into(),
            route: format!("chat:{}", P::NAME),
            delivery_id: id.to_string(),
            target: P::NAME.into(),
            status: status.into(),
            attempts: 1,
            latency_ms: 0,
            error,
            message: message.chars().take(200).collect(),
            created_at_ms: now_ms(),
        }
    }
}

fn stop(typing: &mut Option<tokio::task::JoinHandle<()>>) {
    if let Some(t) = typing.take() {
        t.abort();
    }
}

/// Hermes's text form of an approval request (`_format_exec_approval_fallback`).
fn approval_text(command: &str, reason: &str) -> String {
    let shown: String = command.chars().take(3800).collect();
    format!(
        "⚠️ Dangerous command requires approval:\n```\n{shown}\n```\nReason: {reason}\n\nReply /approve to execute, /approve session to approve this pattern for the session, /approve always to approve permanently, or /deny to cancel."
    )
}

/// What an approval's message says once it expired.
const EXPIRED: &str = "⌛ This approval expired; nothing was run.";

/// What an approval's message says once decided (by whom, when a button said it).
fn decided(decision: herald_session::Decision, by: Option<&str>) -> String {
    use herald_session::Decision;
    let what = match decision {
        Decision::Once => "✅ Approved once",
        Decision::Session => "✅ Approved for this session",
        Decision::Always => "✅ Approved always",
        Decision::Deny => "❌ Denied",
    };
    match by {
        Some(name) => format!("{what} by {name}"),
        None => what.to_owned(),
    }
}

/// `ap:<token>:<o|s|a|d>`.
fn parse_button(data: &str) -> Option<(&str, herald_session::Decision)> {
    use herald_session::Decision;
    let rest = data.strip_prefix("ap:")?;
    let (token, choice) = rest.rsplit_once(':')?;
    let decision = match choice {
        "o" => Decision::Once,
        "s" => Decision::Session,
        "a" => Decision::Always,
        "d" => Decision::Deny,
        _ => return None,
    };
    Some((token, decision))
}

/// The words Hermes takes as an answer while an approval waits.
fn bare_answer(text: &str) -> Option<herald_session::Decision> {
    use herald_session::Decision;
    let word = text.trim().trim_end_matches(['.', '!']).to_lowercase();
    match word.as_str() {
        "yes" | "y" | "ok" | "okay" | "approve" | "confirm" | "👍" => Some(Decision::Once),
        "session" => Some(Decision::Session),
        "always" => Some(Decision::Always),
        "no" | "n" | "deny" | "reject" | "cancel" | "👎" => Some(Decision::Deny),
        _ => None,
    }
}

/// A short random token for a button's data (Telegram allows 64 bytes).
fn new_token() -> String {
    format!("{:016x}", rand::random::<u64>())
}

fn clarify_text(question: &str, choices: &[String]) -> String {
    let mut text = format!("❓ {question}");
    for (i, c) in choices.iter().enumerate() {
        text.push_str(&format!("\n{}. {c}", i + 1));
    }
    text
}

//! Slack: events arrive over Socket Mode ([`socket`]) or the Events API ([`events`]),
//! each committed to the inbox before Slack is told; messages are read and gated as
//! Hermes reads them ([`access`], [`read`]); answers go out as mrkdwn through the
//! send governor (a message a second per channel) and the Web API client, which
//! honours each method's 429.

pub mod access;
pub mod api;
pub mod backfill;
pub mod events;
pub mod intake;
mod read;
pub mod socket;
pub mod wire;

use crate::door::{ChatRef, Downloaded, Inbound, Mark, OutFile, Platform, SendFailure};
use crate::key::KeyRules;
use crate::outbox::{Governor, Limits};
use crate::pairing::PairingStore;
use access::Access;
use api::{ApiError, WebApi};
use herald_deliver::slack_mrkdwn::markdown_to_mrkdwn;
use herald_deliver::split::{char_len, split_message};
use herald_store::InboxItem;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the start and `config check` say of a configured app: how it receives, and
/// that Hermes's own Slack adapter must be off.
pub fn serving_note(settings: &herald_config::slack_settings::SlackSettings) -> String {
    let how = match (&settings.app_token, &settings.signing_secret) {
        (Some(_), Some(_)) => format!(
            "by Socket Mode and the Events API at {}",
            settings.events_path
        ),
        (Some(_), None) => "by Socket Mode".to_owned(),
        (None, Some(_)) => format!("by the Events API at {}", settings.events_path),
        (None, None) => "by nothing (set SLACK_APP_TOKEN or SLACK_SIGNING_SECRET)".to_owned(),
    };
    format!(
        "slack: herald answers people who write to the app ({how}); turn Hermes's own Slack adapter off (or stop Hermes): two gateways on one app split its events"
    )
}

/// The longest message sent (Hermes's `MAX_MESSAGE_LENGTH`; Slack takes 40,000).
pub const MAX_MESSAGE_CHARS: usize = 39_000;
/// A section block's text limit (longer texts are sent without blocks).
const SECTION_MAX: usize = 3_000;
/// Rate-limit answers in a row a send waits out before it gives up.
const MAX_FLOODS: u32 = 3;
/// How long a status line is kept before it is set again (Slack clears it when the
/// app replies, or after two minutes).
const STATUS_EVERY: Duration = Duration::from_secs(60);

/// Slack's limits: `chat.postMessage` about one a second per channel (a burst is
/// allowed, a run is not); each method's workspace limit is the Web API client's.
pub const LIMITS: Limits = Limits {
    per_chat: Duration::from_millis(1050),
    per_group: Duration::from_millis(1050),
    per_bot: 50,
};

/// What a Slack bot does, as Hermes's settings say.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// `reply_in_thread` (true): a top-level channel message is answered in its thread,
    /// its own session.
    pub reply_in_thread: bool,
    /// `dm_top_level_threads_as_sessions` (true): each top-level DM is its own session.
    pub dm_threads: bool,
    /// `SLACK_REACTIONS` (true): `eyes` while a turn runs, then `white_check_mark` or
    /// `x`.
    pub reactions: bool,
    /// `typing_indicator` (true): the assistant status line while a turn runs.
    pub status_line: bool,
    /// `typing_status_text` (`is thinking...`).
    pub status_text: String,
    pub rules: KeyRules,
}

/// One Slack app (its bot token), as the door's platform.
pub struct Slack {
    pub api: WebApi,
    pub governor: Arc<Governor>,
    pub access: Access,
    /// Users approved by pairing are allowed too.
    pub pairing: PairingStore,
    pub behaviour: Behaviour,
    /// Whether a thread has a stored session (a reply without a mention in it is
    /// answered).
    pub host: Arc<herald_session::Host>,
    /// Messages whose turn shows reactions (a DM or a mention, as Hermes).
    marked: Mutex<std::collections::HashSet<String>>,
    /// When each thread's status line was last set.
    status: Mutex<HashMap<String, tokio::time::Instant>>,
    /// Reactions' share of Slack's limit for `reactions.add` / `.remove` (Tier 3,
    /// about fifty a minute each).
    reactions_left: Mutex<Budget>,
}

/// A token bucket: reactions are decoration, so a turn that finds it empty has none.
#[derive(Debug)]
struct Budget {
    tokens: f64,
    at: tokio::time::Instant,
}

/// Reaction calls a minute, and the most saved up.
const REACTIONS_PER_MINUTE: f64 = 45.0;
const REACTIONS_BURST: f64 = 15.0;

impl Budget {
    /// Takes `n` tokens when there are that many.
    fn take(&mut self, n: f64) -> bool {
        let now = tokio::time::Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * REACTIONS_PER_MINUTE / 60.0;
        self.tokens = (self.tokens + refill).min(REACTIONS_BURST);
        self.at = now;
        if self.tokens < n {
            return false;
        }
        self.tokens -= n;
        true
    }
}

impl Slack {
    pub fn new(
        api: WebApi,
        governor: Arc<Governor>,
        access: Access,
        pairing: PairingStore,
        behaviour: Behaviour,
        host: Arc<herald_session::Host>,
    ) -> Slack {
        Slack {
            api,
            governor,
            access,
            pairing,
            behaviour,
            host,
            marked: Mutex::default(),
            status: Mutex::default(),
            reactions_left: Mutex::new(Budget {
                tokens: REACTIONS_BURST,
                at: tokio::time::Instant::now(),
            }),
        }
    }

    /// A `chat.postMessage`, waiting for the channel's slot; a 429 pauses the channel
    /// and is tried again.
    async fn post(&self, chat: &ChatRef, mut body: Value) -> Result<String, ApiError> {
        body["channel"] = json!(chat.chat_id);
        if let Some(t) = &chat.thread_id {
            body["thread_ts"] = json!(t);
        }
        let mut floods = 0;
        loop {
            self.governor.slot(&chat.chat_id, chat.group).await;
            match self.api.call("chat.postMessage", &body).await {
                Ok(v) => {
                    let ts = v["ts"].as_str().unwrap_or_default().to_owned();
                    let thread = chat.thread_id.as_deref().unwrap_or(&ts);
                    self.access.threads.add(&chat.chat_id, thread);
                    return Ok(ts);
                }
                Err(ApiError::RateLimited(wait)) if floods < MAX_FLOODS => {
                    floods += 1;
                    tracing::warn!(channel = %chat.chat_id, wait_s = wait.as_secs(), "slack: rate limited; the channel waits");
                    self.governor.flooded(&chat.chat_id, wait);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Remembers that `ts` shows reactions (bounded: the oldest are forgotten).
    fn mark(&self, ts: &str) {
        let mut m = herald_session::conversation::lock(&self.marked);
        if m.len() >= 10_000 {
            m.clear();
        }
        m.insert(ts.to_owned());
    }

    async fn reaction(&self, chat: &ChatRef, ts: &str, method: &str, name: &str) {
        let body = json!({"channel": chat.chat_id, "timestamp": ts, "name": name});
        self.governor.side_slot(&chat.chat_id).await;
        if let Err(e) = self.api.call(method, &body).await {
            tracing::debug!(error = %e, "slack: {method} failed");
        }
    }
}

/// A failed call as the door judges it.
fn failure(e: ApiError) -> SendFailure {
    SendFailure {
        flood: matches!(e, ApiError::RateLimited(_)),
        transient: e.transient(),
        message: e.to_string(),
    }
}

/// A section block of `text` when it fits one (else none: the text alone).
fn section(text: &str) -> Option<Value> {
    (char_len(text) <= SECTION_MAX)
        .then(|| json!([{"type": "section", "text": {"type": "mrkdwn", "text": text}}]))
}

impl Platform for Slack {
    const NAME: &'static str = "slack";

    async fn send(
        &self,
        chat: &ChatRef,
        text: &str,
        _reply_to: Option<&str>,
    ) -> Result<Vec<String>, SendFailure> {
        let mut ids = Vec::new();
        for part in split_message(&markdown_to_mrkdwn(text), MAX_MESSAGE_CHARS, char_len) {
            if part.trim().is_empty() {
                continue;
            }
            let ts = self
                .post(chat, json!({"text": part, "mrkdwn": true}))
                .await
                .map_err(failure)?;
            ids.push(ts);
        }
        Ok(ids)
    }

    async fn send_plain(&self, chat: &ChatRef, text: &str) -> Result<String, SendFailure> {
        let body = json!({"text": herald_deliver::slack_mrkdwn::escape(text), "mrkdwn": false});
        self.post(chat, body).await.map_err(failure)
    }

    async fn typing(&self, chat: &ChatRef) {
        let Some(thread) = chat
            .thread_id
            .as_deref()
            .filter(|_| self.behaviour.status_line)
        else {
            return;
        };
        let key = format!("{}:{thread}", chat.chat_id);
        {
            let mut status = herald_session::conversation::lock(&self.status);
            let now = tokio::time::Instant::now();
            if status
                .get(&key)
                .is_some_and(|t| now.duration_since(*t) < STATUS_EVERY)
            {
                return;
            }
            if status.len() >= 10_000 {
                status.clear();
            }
            status.insert(key, now);
        }
        let body = json!({"channel_id": chat.chat_id, "thread_ts": thread, "status": self.behaviour.status_text});
        if let Err(e) = self.api.call("assistant.threads.setStatus", &body).await {
            // Without the assistant:write scope there is no status line (as Hermes).
            tracing::debug!(error = %e, "slack: assistant.threads.setStatus failed");
        }
    }

    async fn read(&self, item: &InboxItem) -> Result<Inbound, String> {
        read::read(self, item).await
    }

    fn chat_of(&self, item: &InboxItem) -> Option<String> {
        let chat = wire::chat_of(item.payload.text())?;
        // Without a thread per message, a channel's messages share sessions: they are
        // taken in the channel's order.
        let b = &self.behaviour;
        match b.reply_in_thread && b.dm_threads {
            true => Some(chat),
            false => chat.split(':').next().map(str::to_owned),
        }
    }

    async fn send_approval(
        &self,
        chat: &ChatRef,
        token: &str,
        text: &str,
    ) -> Result<Option<String>, SendFailure> {
        let shown: String = markdown_to_mrkdwn(text)
            .chars()
            .take(SECTION_MAX - 10)
            .collect();
        let buttons: Vec<Value> = wire::APPROVAL_ACTIONS
            .iter()
            .map(|(action, label, choice)| {
                let mut b = json!({
                    "type": "button",
                    "action_id": action,
                    "text": {"type": "plain_text", "text": label},
                    "value": format!("ap:{token}:{choice}"),
                });
                match *choice {
                    "o" => b["style"] = json!("primary"),
                    "d" => b["style"] = json!("danger"),
                    _ => {}
                }
                b
            })
            .collect();
        let body = json!({
            "text": shown.chars().take(150).collect::<String>(),
            "blocks": [
                {"type": "section", "text": {"type": "mrkdwn", "text": shown}},
                {"type": "actions", "elements": buttons},
            ],
        });
        self.post(chat, body).await.map(Some).map_err(failure)
    }

    async fn edit(
        &self,
        chat: &ChatRef,
        message_id: &str,
        text: &str,
        formatted: bool,
    ) -> Result<(), SendFailure> {
        let shown = match formatted {
            true => markdown_to_mrkdwn(text),
            false => herald_deliver::slack_mrkdwn::escape(text),
        };
        let mut body = json!({"channel": chat.chat_id, "ts": message_id, "text": shown});
        // A message's buttons go with its blocks.
        if let Some(blocks) = section(&shown) {
            body["blocks"] = blocks;
        }
        self.governor.side_slot(&chat.chat_id).await;
        match self.api.call("chat.update", &body).await {
            Ok(_) => Ok(()),
            Err(ApiError::Refused(e)) if e == "msg_too_long" => Err(SendFailure {
                message: "slack: msg_too_long".into(),
                transient: false,
                flood: false,
            }),
            Err(e) => Err(failure(e)),
        }
    }

    async fn delete(&self, chat: &ChatRef, message_id: &str) {
        let body = json!({"channel": chat.chat_id, "ts": message_id});
        self.governor.side_slot(&chat.chat_id).await;
        if let Err(e) = self.api.call("chat.delete", &body).await {
            tracing::debug!(error = %e, "slack: chat.delete failed");
        }
    }

    async fn download(&self, file_id: &str, max: u64) -> Result<Downloaded, String> {
        let info = self
            .api
            .form("files.info", &[("file", file_id)])
            .await
            .map_err(|e| e.to_string())?;
        let file = &info["file"];
        if file["size"].as_u64().is_some_and(|s| s > max) {
            return Err(format!("the file is larger than {max} bytes"));
        }
        let url = file["url_private_download"]
            .as_str()
            .or_else(|| file["url_private"].as_str())
            .ok_or("slack: files.info gave no download URL")?;
        let cap = usize::try_from(max).unwrap_or(usize::MAX);
        let bytes = self
            .api
            .download(url, cap)
            .await
            .map_err(|e| e.to_string())?;
        let name = file["name"].as_str().unwrap_or(file_id).to_owned();
        Ok(Downloaded { bytes, path: name })
    }

    async fn send_file(&self, chat: &ChatRef, file: OutFile) -> Result<String, SendFailure> {
        let length = file.bytes.len().to_string();
        let at = self
            .api
            .form(
                "files.getUploadURLExternal",
                &[
                    ("filename", file.name.as_str()),
                    ("length", length.as_str()),
                ],
            )
            .await
            .map_err(failure)?;
        let (Some(url), Some(id)) = (at["upload_url"].as_str(), at["file_id"].as_str()) else {
            return Err(failure(ApiError::Refused(
                "files.getUploadURLExternal gave no upload_url".into(),
            )));
        };
        self.api
            .upload(url, &file.name, file.bytes)
            .await
            .map_err(failure)?;
        let mut body =
            json!({"files": [{"id": id, "title": file.name}], "channel_id": chat.chat_id});
        if let Some(t) = &chat.thread_id {
            body["thread_ts"] = json!(t);
        }
        self.governor.slot(&chat.chat_id, chat.group).await;
        self.api
            .call("files.completeUploadExternal", &body)
            .await
            .map_err(failure)?;
        Ok(id.to_owned())
    }

    async fn react(&self, chat: &ChatRef, message_id: &str, mark: Mark) {
        if !self.behaviour.reactions {
            return;
        }
        let marked = match mark {
            // A turn's three calls (eyes on, eyes off, its end) are taken at its start:
            // when Slack's limit leaves none, the turn has no reactions at all.
            Mark::Working => {
                let mut marked = herald_session::conversation::lock(&self.marked);
                let afforded = marked.contains(message_id)
                    && herald_session::conversation::lock(&self.reactions_left).take(3.0);
                if !afforded {
                    marked.remove(message_id);
                }
                afforded
            }
            _ => herald_session::conversation::lock(&self.marked).remove(message_id),
        };
        if !marked {
            return;
        }
        if mark != Mark::Working {
            self.reaction(chat, message_id, "reactions.remove", "eyes")
                .await;
        }
        let name = match mark {
            Mark::Working => "eyes",
            Mark::Done => "white_check_mark",
            Mark::Failed => "x",
            Mark::Clear => return,
        };
        self.reaction(chat, message_id, "reactions.add", name).await;
    }

    async fn answer_click(&self, _click_id: &str, _text: &str) {
        // Slack's acknowledgement of the button press is the envelope's (or the HTTP
        // request's) answer, given when it was stored.
    }
}

//! Discord: the gateway WebSocket ([`gateway`]) commits each message and button press
//! to the inbox; messages are read and gated as Hermes reads them ([`access`],
//! [`read`]); answers go out through the send governor and the REST client, which
//! keeps Discord's per-route buckets and global limit ([`api`]).

pub mod access;
pub mod api;
pub mod backfill;
pub mod commands;
pub mod gateway;
mod read;
pub mod wire;

use crate::door::{ChatRef, Downloaded, Inbound, Mark, OutFile, Platform, SendFailure};
use crate::key::KeyRules;
use crate::outbox::{Governor, Limits};
use crate::pairing::PairingStore;
use access::{Access, Place};
use api::{ApiError, Body, RestApi};
use herald_config::telegram_settings::ReplyToMode;
use herald_deliver::split::{DISCORD_MAX_CHARS, char_len, split_message};
use herald_store::InboxItem;
use reqwest::Method;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the start and `config check` say of a configured bot.
pub const SERVING_NOTE: &str = "discord: herald answers people who write to the bot (by the gateway); turn Hermes's own Discord adapter off (or stop Hermes): two gateways on one token answer twice";

/// The webhook routes with `source: discord`: an Interactions Endpoint URL at one of
/// them hands the chat door's button presses to it.
pub fn discord_routes(config: &herald_config::Config) -> Vec<String> {
    use herald_webhook::sender::Sender;
    config
        .routes
        .iter()
        .filter(|r| {
            r.sender
                .as_ref()
                .is_some_and(|s| s.sender == Sender::Discord)
        })
        .map(|r| r.name.clone())
        .collect()
}

/// What the application's Interactions Endpoint URL (where Discord posts button
/// presses instead of the gateway) is to herald.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// None: presses come over the gateway.
    Gateway,
    /// A `source: discord` route: it hands presses to the door.
    Route(String),
    /// A URL herald does not serve: approval buttons go unanswered.
    Unserved(String),
}

impl Endpoint {
    pub fn of(url: Option<&str>, routes: &[String]) -> Endpoint {
        let Some(url) = url.filter(|u| !u.is_empty()) else {
            return Endpoint::Gateway;
        };
        let path = reqwest::Url::parse(url)
            .map(|u| u.path().to_owned())
            .unwrap_or_default();
        match routes.iter().find(|r| path == format!("/webhooks/{r}")) {
            Some(route) => Endpoint::Route(route.clone()),
            None => Endpoint::Unserved(url.to_owned()),
        }
    }

    /// What `config check` and the start say of an endpoint herald does not serve.
    pub fn finding(&self) -> Option<String> {
        match self {
            Endpoint::Unserved(url) => Some(format!(
                "discord: the application's Interactions Endpoint URL {url} is not one herald serves (no `source: discord` route at its path), so Discord posts button presses there and not to the gateway: approval buttons go unanswered; point it at a `source: discord` route (https://<host>/webhooks/<route>) or clear it on the General Information page of the Developer Portal"
            )),
            _ => None,
        }
    }
}

/// The application (`GET /applications/@me`): its id and what its Interactions
/// Endpoint URL is to herald (said in the log).
pub async fn application(api: &RestApi, routes: &[String]) -> Option<String> {
    let app = api
        .call(Method::GET, "/applications/@me", Body::None)
        .await
        .ok()?;
    let endpoint = Endpoint::of(app["interactions_endpoint_url"].as_str(), routes);
    match &endpoint {
        Endpoint::Gateway => {}
        Endpoint::Route(route) => tracing::info!(
            route = %route,
            "discord: button presses come through the application's Interactions Endpoint URL, the `source: discord` route, to this door"
        ),
        Endpoint::Unserved(_) => {
            if let Some(f) = endpoint.finding() {
                tracing::error!("{f}");
            }
        }
    }
    app["id"].as_str().map(str::to_owned)
}

/// `config check`'s question to Discord: the finding for an Interactions Endpoint URL
/// herald does not serve (none when Discord cannot be asked within a few seconds).
pub async fn endpoint_finding(
    settings: &herald_config::discord_settings::DiscordSettings,
    routes: &[String],
) -> Option<String> {
    let api = RestApi::new(
        herald_deliver::http_client(),
        &settings.base_url,
        &settings.token,
        Duration::from_secs(5),
    );
    let asked = api.call(Method::GET, "/applications/@me", Body::None);
    let app = tokio::time::timeout(Duration::from_secs(8), asked)
        .await
        .ok()?
        .ok()?;
    Endpoint::of(app["interactions_endpoint_url"].as_str(), routes).finding()
}

/// Discord's limits: five messages per five seconds per channel, fifty requests a
/// second per bot (45 used).
pub const LIMITS: Limits = Limits {
    per_chat: Duration::from_millis(1_000),
    per_group: Duration::from_millis(1_000),
    per_bot: 45,
};
/// How long a typing indicator shows (Discord: about ten seconds).
const TYPING_EVERY: Duration = Duration::from_secs(8);
/// Channels remembered (their kind and parent).
const PLACES_KEPT: usize = 10_000;

/// What a Discord bot does, as Hermes's settings say.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// `DISCORD_AUTO_THREAD` (true): a mention in a channel opens a thread.
    pub auto_thread: bool,
    /// `DISCORD_NO_THREAD_CHANNELS`.
    pub no_thread_channels: std::collections::BTreeSet<String>,
    /// `DISCORD_REACTIONS` (true): 👀 while a turn runs, then ✅ or ❌.
    pub reactions: bool,
    /// `DISCORD_REPLY_TO_MODE` (`first`).
    pub reply_mode: ReplyToMode,
    pub rules: KeyRules,
}

/// One bot, as the door's platform.
pub struct Discord {
    pub api: Arc<RestApi>,
    pub governor: Arc<Governor>,
    pub access: Access,
    pub pairing: PairingStore,
    pub behaviour: Behaviour,
    pub host: Arc<herald_session::Host>,
    /// Guild channels' places (a thread's parent), learnt once each.
    places: Mutex<HashMap<String, Place>>,
    /// Threads the bot opened or answered in.
    threads: Mutex<HashSet<String>>,
    /// When each channel last showed typing.
    typing: Mutex<HashMap<String, tokio::time::Instant>>,
}

impl Discord {
    pub fn new(
        api: Arc<RestApi>,
        governor: Arc<Governor>,
        access: Access,
        pairing: PairingStore,
        behaviour: Behaviour,
        host: Arc<herald_session::Host>,
    ) -> Discord {
        Discord {
            api,
            governor,
            access,
            pairing,
            behaviour,
            host,
            places: Mutex::default(),
            threads: Mutex::default(),
            typing: Mutex::default(),
        }
    }

    /// A guild channel's place: a thread's parent from `GET /channels/{id}` (learnt
    /// once; a channel that cannot be read is taken as no thread).
    async fn place(&self, channel: &str) -> Place {
        if let Some(p) = herald_session::conversation::lock(&self.places).get(channel) {
            return p.clone();
        }
        let path = format!("/channels/{channel}");
        let parent = match self.api.call(Method::GET, &path, Body::None).await {
            Ok(c) if matches!(c["type"].as_u64(), Some(10..=12)) => {
                c["parent_id"].as_str().map(str::to_owned)
            }
            Ok(_) => None,
            Err(e) => {
                // Not remembered: the next message asks again.
                tracing::debug!(error = %e, "discord: cannot read a channel");
                return Place {
                    channel: channel.to_owned(),
                    parent: None,
                };
            }
        };
        let place = Place {
            channel: channel.to_owned(),
            parent,
        };
        let mut places = herald_session::conversation::lock(&self.places);
        if places.len() >= PLACES_KEPT {
            places.clear();
        }
        places.insert(channel.to_owned(), place.clone());
        place
    }

    fn bot_thread(&self, thread: &str) -> bool {
        herald_session::conversation::lock(&self.threads).contains(thread)
    }

    fn mark_thread(&self, thread: &str) {
        let mut t = herald_session::conversation::lock(&self.threads);
        if t.len() >= PLACES_KEPT {
            t.clear();
        }
        t.insert(thread.to_owned());
    }

    /// One message in the channel's slot; a 429 the REST client could not wait out
    /// pauses the channel.
    async fn post(&self, chat: &ChatRef, body: Body) -> Result<String, ApiError> {
        self.governor.slot(&chat.chat_id, chat.group).await;
        let path = format!("/channels/{}/messages", chat.chat_id);
        match self.api.call(Method::POST, &path, body).await {
            Ok(v) => Ok(v["id"].as_str().unwrap_or_default().to_owned()),
            Err(ApiError::RateLimited(wait)) => {
                self.governor.flooded(&chat.chat_id, wait);
                Err(ApiError::RateLimited(wait))
            }
            Err(e) => Err(e),
        }
    }

    async fn reaction(&self, chat: &ChatRef, message: &str, emoji: &str, method: Method) {
        let Some((channel, id)) = message.split_once('/') else {
            return;
        };
        let emoji: String = form_urlencoded::byte_serialize(emoji.as_bytes()).collect();
        let path = format!("/channels/{channel}/messages/{id}/reactions/{emoji}/@me");
        self.governor.side_slot(&chat.chat_id).await;
        if let Err(e) = self.api.call(method, &path, Body::None).await {
            tracing::debug!(error = %e, "discord: a reaction failed");
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

/// Mentions an answer may make: users (never `@everyone` or roles), as Hermes's
/// defaults.
fn allowed_mentions() -> Value {
    json!({"parse": ["users"], "replied_user": true})
}

impl Platform for Discord {
    const NAME: &'static str = "discord";

    async fn send(
        &self,
        chat: &ChatRef,
        text: &str,
        reply_to: Option<&str>,
    ) -> Result<Vec<String>, SendFailure> {
        // A reply is to a message of this channel (`<channel>/<id>`).
        let reply = reply_to
            .and_then(|r| r.split_once('/'))
            .filter(|(c, _)| *c == chat.chat_id)
            .map(|(_, id)| id.to_owned());
        let mut ids = Vec::new();
        for (i, part) in split_message(text, DISCORD_MAX_CHARS, char_len)
            .iter()
            .enumerate()
        {
            if part.trim().is_empty() {
                continue;
            }
            let mut body = json!({"content": part, "allowed_mentions": allowed_mentions()});
            let referenced = match self.behaviour.reply_mode {
                ReplyToMode::Off => None,
                ReplyToMode::First => reply.as_ref().filter(|_| i == 0),
                ReplyToMode::All => reply.as_ref(),
            };
            if let Some(id) = referenced {
                body["message_reference"] = json!({"message_id": id, "fail_if_not_exists": false});
            }
            ids.push(self.post(chat, Body::Json(body)).await.map_err(failure)?);
        }
        if chat.thread_id.is_some() {
            self.mark_thread(&chat.chat_id);
        }
        Ok(ids)
    }

    async fn send_plain(&self, chat: &ChatRef, text: &str) -> Result<String, SendFailure> {
        let content: String = text.chars().take(DISCORD_MAX_CHARS).collect();
        let body = json!({"content": content, "allowed_mentions": {"parse": []}});
        self.post(chat, Body::Json(body)).await.map_err(failure)
    }

    async fn typing(&self, chat: &ChatRef) {
        {
            let mut typing = herald_session::conversation::lock(&self.typing);
            let now = tokio::time::Instant::now();
            if typing
                .get(&chat.chat_id)
                .is_some_and(|t| now.duration_since(*t) < TYPING_EVERY)
            {
                return;
            }
            if typing.len() >= PLACES_KEPT {
                typing.clear();
            }
            typing.insert(chat.chat_id.clone(), now);
        }
        if !self.governor.spare_slot(&chat.chat_id) {
            return;
        }
        let path = format!("/channels/{}/typing", chat.chat_id);
        if let Err(e) = self.api.call(Method::POST, &path, Body::None).await {
            tracing::debug!(error = %e, "discord: typing failed");
        }
    }

    async fn read(&self, item: &InboxItem) -> Result<Inbound, String> {
        read::read(self, item).await
    }

    fn chat_of(&self, item: &InboxItem) -> Option<String> {
        wire::chat_of(item.payload.text())
    }

    async fn send_approval(
        &self,
        chat: &ChatRef,
        token: &str,
        text: &str,
    ) -> Result<Option<String>, SendFailure> {
        let content: String = text.chars().take(DISCORD_MAX_CHARS).collect();
        let button = |label: &str, style: u8, choice: &str| json!({"type": 2, "style": style, "label": label, "custom_id": format!("ap:{token}:{choice}")});
        let body = json!({
            "content": content,
            "allowed_mentions": {"parse": []},
            "components": [{"type": 1, "components": [
                button("Allow Once", 3, "o"),
                button("Allow Session", 2, "s"),
                button("Always Allow", 1, "a"),
                button("Deny", 4, "d"),
            ]}],
        });
        self.post(chat, Body::Json(body))
            .await
            .map(Some)
            .map_err(failure)
    }

    async fn edit(
        &self,
        chat: &ChatRef,
        message_id: &str,
        text: &str,
        _formatted: bool,
    ) -> Result<(), SendFailure> {
        if char_len(text) > DISCORD_MAX_CHARS {
            return Err(SendFailure {
                message: "discord: the text is longer than a message holds".into(),
                transient: false,
                flood: false,
            });
        }
        let path = format!("/channels/{}/messages/{message_id}", chat.chat_id);
        // The buttons go with the edit.
        let body = json!({"content": text, "components": [], "allowed_mentions": {"parse": []}});
        self.governor.side_slot(&chat.chat_id).await;
        self.api
            .call(Method::PATCH, &path, Body::Json(body))
            .await
            .map(|_| ())
            .map_err(failure)
    }

    async fn delete(&self, chat: &ChatRef, message_id: &str) {
        let path = format!("/channels/{}/messages/{message_id}", chat.chat_id);
        self.governor.side_slot(&chat.chat_id).await;
        if let Err(e) = self.api.call(Method::DELETE, &path, Body::None).await {
            tracing::debug!(error = %e, "discord: deleting a message failed");
        }
    }

    async fn download(&self, file_id: &str, max: u64) -> Result<Downloaded, String> {
        let cap = usize::try_from(max).unwrap_or(usize::MAX);
        let bytes = self
            .api
            .download(file_id, cap)
            .await
            .map_err(|e| e.to_string())?;
        let name = file_id
            .split('?')
            .next()
            .and_then(|u| u.rsplit('/').next())
            .unwrap_or("file")
            .to_owned();
        Ok(Downloaded { bytes, path: name })
    }

    async fn send_file(&self, chat: &ChatRef, file: OutFile) -> Result<String, SendFailure> {
        let body = Body::File {
            payload: json!({"content": "", "allowed_mentions": {"parse": []}}),
            name: file.name,
            bytes: file.bytes,
        };
        self.post(chat, body).await.map_err(failure)
    }

    async fn react(&self, chat: &ChatRef, message_id: &str, mark: Mark) {
        if !self.behaviour.reactions {
            return;
        }
        if mark != Mark::Working {
            self.reaction(chat, message_id, "👀", Method::DELETE).await;
        }
        let emoji = match mark {
            Mark::Working => "👀",
            Mark::Done => "✅",
            Mark::Failed => "❌",
            Mark::Clear => return,
        };
        self.reaction(chat, message_id, emoji, Method::PUT).await;
    }

    async fn answer_click(&self, _click_id: &str, _text: &str) {
        // Answered (a deferred update) when the gateway committed the press, within
        // Discord's three seconds.
    }
}

#[cfg(test)]
mod tests {
    use super::Endpoint;

    #[test]
    fn an_endpoint_is_a_route_herald_serves_or_a_finding() {
        let routes = vec!["presses".to_owned()];
        assert_eq!(Endpoint::of(None, &routes), Endpoint::Gateway);
        assert_eq!(Endpoint::of(Some(""), &routes), Endpoint::Gateway);
        assert_eq!(
            Endpoint::of(Some("https://h.example/webhooks/presses"), &routes),
            Endpoint::Route("presses".into())
        );
        let other = Endpoint::of(Some("https://h.example/other"), &routes);
        assert!(other.finding().unwrap().contains("https://h.example/other"));
        assert!(Endpoint::Gateway.finding().is_none());
    }
}

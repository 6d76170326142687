//! Sender presets (`source:` on a route): for one named sender, the signature check,
//! where the event type comes from and which id is the delivery id. A route without a
//! preset keeps the header detection of [`crate::verify`] and [`crate::event`].

mod check;
mod fields;
pub mod sample;
pub mod sign;

pub use check::{SignedRequest, verify};
pub use fields::{delivery_id, event_type, header_event_type, kept_headers, payload_paths};

use serde_json::{Map, Value, json};

/// A sender herald has a preset for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sender {
    Stripe,
    Jira,
    Shopify,
    Slack,
    Linear,
    Pagerduty,
    Sentry,
    Paddle,
    Bitbucket,
    Gitea,
    Forgejo,
    Twilio,
    Discord,
    Token,
    StandardWebhooks,
    Svix,
}

impl Sender {
    /// Every preset, in the order the docs list them.
    pub const ALL: [Sender; 16] = [
        Sender::Stripe,
        Sender::Jira,
        Sender::Shopify,
        Sender::Slack,
        Sender::Linear,
        Sender::Pagerduty,
        Sender::Sentry,
        Sender::Paddle,
        Sender::Bitbucket,
        Sender::Gitea,
        Sender::Forgejo,
        Sender::Twilio,
        Sender::Discord,
        Sender::Token,
        Sender::StandardWebhooks,
        Sender::Svix,
    ];

    /// The name `source:` takes.
    pub fn name(self) -> &'static str {
        match self {
            Sender::Stripe => "stripe",
            Sender::Jira => "jira",
            Sender::Shopify => "shopify",
            Sender::Slack => "slack",
            Sender::Linear => "linear",
            Sender::Pagerduty => "pagerduty",
            Sender::Sentry => "sentry",
            Sender::Paddle => "paddle",
            Sender::Bitbucket => "bitbucket",
            Sender::Gitea => "gitea",
            Sender::Forgejo => "forgejo",
            Sender::Twilio => "twilio",
            Sender::Discord => "discord",
            Sender::Token => "token",
            Sender::StandardWebhooks => "standard-webhooks",
            Sender::Svix => "svix",
        }
    }

    /// The preset a `source:` value names (exact, lower-case).
    pub fn parse(name: &str) -> Option<Sender> {
        Sender::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Every name, for messages and did-you-mean.
    pub fn names() -> Vec<&'static str> {
        Sender::ALL.iter().map(|s| s.name()).collect()
    }

    /// Whether the route needs a `secret:` (Discord verifies with a public key).
    pub fn needs_secret(self) -> bool {
        self != Sender::Discord
    }

    /// Whether the sender generates the signing secret (it cannot be typed in its
    /// settings): a secret herald generates would never match.
    pub fn makes_secret(self) -> bool {
        matches!(
            self,
            Sender::Stripe
                | Sender::Shopify
                | Sender::Slack
                | Sender::Linear
                | Sender::Pagerduty
                | Sender::Sentry
                | Sender::Paddle
                | Sender::Twilio
                | Sender::StandardWebhooks
                | Sender::Svix
        )
    }

    /// The route keys this preset reads besides `secret:`, and whether each is required.
    pub fn settings(self) -> &'static [(&'static str, bool)] {
        match self {
            Sender::Discord => &[("public_key", true)],
            Sender::Twilio => &[("public_url", true)],
            Sender::Token => &[("header", false)],
            Sender::Paddle => &[("tolerance_seconds", false)],
            _ => &[],
        }
    }
}

impl std::fmt::Display for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Every route key a preset may read (besides `source:` and `secret:`).
pub const SETTING_KEYS: [&str; 4] = ["public_key", "public_url", "header", "tolerance_seconds"];

/// Paddle's SDKs accept a `Paddle-Signature` this many seconds old by default.
pub const PADDLE_DEFAULT_TOLERANCE_SECS: i64 = 5;

/// A route's preset: the sender and the settings its check needs, checked when the
/// route is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SenderPreset {
    pub sender: Sender,
    /// Discord: the application's Ed25519 public key.
    pub public_key: Option<[u8; 32]>,
    /// Twilio: the URL as configured in Twilio (what it signs).
    pub public_url: Option<String>,
    /// Token: the header holding the bare secret (`None`: `Authorization: Bearer`).
    pub header: Option<http::HeaderName>,
    /// Paddle: the timestamp window.
    pub tolerance_secs: i64,
}

impl SenderPreset {
    /// A preset with no settings (enough for every sender but Discord and Twilio).
    pub fn new(sender: Sender) -> Self {
        SenderPreset {
            sender,
            public_key: None,
            public_url: None,
            header: None,
            tolerance_secs: PADDLE_DEFAULT_TOLERANCE_SECS,
        }
    }
}

/// Reads a Discord public key: 64 hex digits.
pub fn parse_public_key(text: &str) -> Option<[u8; 32]> {
    let bytes = hex::decode(text.trim()).ok()?;
    bytes.try_into().ok()
}

/// A sender's verification handshake, answered inline (never enqueued).
#[derive(Debug, Clone, PartialEq)]
pub struct Handshake {
    /// The JSON body of the 200 answer.
    pub answer: Value,
    /// What it was, for the log.
    pub kind: &'static str,
}

/// The handshake this verified payload is, if any: Slack's `url_verification` (answered
/// with its challenge), Discord's PING (answered `{"type": 1}`) and autocomplete.
pub fn handshake(sender: Sender, payload: &Map<String, Value>) -> Option<Handshake> {
    match sender {
        Sender::Slack if payload.get("type")? == "url_verification" => {
            let challenge = payload.get("challenge").cloned().unwrap_or(Value::Null);
            Some(Handshake {
                answer: json!({ "challenge": challenge }),
                kind: "slack url_verification",
            })
        }
        Sender::Discord => match payload.get("type")?.as_i64()? {
            DISCORD_PING => Some(Handshake {
                answer: json!({ "type": 1 }),
                kind: "discord ping",
            }),
            // Autocomplete fires on every keystroke and takes only choices: none are
            // offered, and nothing reaches the agent.
            DISCORD_AUTOCOMPLETE => Some(Handshake {
                answer: json!({ "type": 8, "data": { "choices": [] } }),
                kind: "discord autocomplete",
            }),
            _ => None,
        },
        _ => None,
    }
}

/// Discord's interaction types PING and APPLICATION_COMMAND_AUTOCOMPLETE.
const DISCORD_PING: i64 = 1;
const DISCORD_AUTOCOMPLETE: i64 = 4;

/// Whether the sender documents `200` as its only success answer (herald's accepted
/// answer is otherwise `202`).
pub fn wants_200(sender: Sender) -> bool {
    matches!(sender, Sender::Linear | Sender::Paddle)
}

/// Discord's answer to an interaction herald committed: a deferred channel message
/// (the agent's answer follows by editing it).
pub fn discord_deferred_answer() -> Value {
    json!({ "type": 5 })
}

/// Discord's answer carrying a message at once (a direct route's rendered prompt), cut
/// to Discord's 2,000 characters.
pub fn discord_message_answer(text: &str) -> Value {
    let content: String = text.chars().take(DISCORD_MAX_CHARS).collect();
    json!({ "type": 4, "data": { "content": content } })
}

/// The most characters a Discord message holds.
const DISCORD_MAX_CHARS: usize = 2000;

/// Discord's answer to a verified interaction the route does not take (another
/// `events:` type, a filter or script): a message only the user sees, since Discord
/// shows "This interaction failed" for any answer that is not an interaction response.
pub fn discord_not_handled_answer() -> Value {
    json!({ "type": 4, "data": { "content": "This command is not handled here.", "flags": 64 } })
}

/// What herald needs to send an interaction's follow-up: the application id and the
/// interaction token (valid 15 minutes), read from a committed Discord interaction.
pub fn discord_followup(payload: &Map<String, Value>) -> Option<(String, String)> {
    let app = payload.get("application_id")?.as_str()?;
    let token = payload.get("token")?.as_str()?;
    (!app.is_empty() && !token.is_empty()).then(|| (app.to_owned(), token.to_owned()))
}

#[cfg(test)]
mod tests;

/// The Discord chat door's inbox route (`herald-chat`), where its bot's messages and
/// button presses wait.
pub const DISCORD_CHAT_ROUTE: &str = "chat:discord:bot";

/// How the Discord chat door names a gateway event in its inbox: its kind and dedup key
/// (a message by its id, live, replayed or read back; an interaction by its id, from
/// the gateway or from the application's Interactions Endpoint URL).
pub fn discord_chat_key(t: &str, id: &str) -> Option<(&'static str, String)> {
    match t {
        "MESSAGE_CREATE" => Some(("message", format!("msg:{id}"))),
        "INTERACTION_CREATE" => Some(("interaction", format!("int:{id}"))),
        _ => None,
    }
}

/// A press of one of the chat door's approval buttons (custom id `ap:<token>:<choice>`)
/// posted to a `source: discord` route (the application's Interactions Endpoint URL):
/// the payload as the chat door stores it (a gateway INTERACTION_CREATE) and its dedup
/// key. The route answers it with [`discord_deferred_update`]; the chat door edits the
/// message when it takes the press.
pub fn discord_chat_press(body: &[u8]) -> Option<(Value, String)> {
    // Most interactions are no such press: they are not parsed a second time.
    memchr::memmem::find(body, b"\"ap:")?;
    let payload: Map<String, Value> = serde_json::from_slice(body).ok()?;
    if payload.get("type")?.as_i64()? != 3 {
        return None;
    }
    let custom = payload.get("data")?.get("custom_id")?.as_str()?;
    if !custom.starts_with("ap:") {
        return None;
    }
    let id = payload.get("id")?.as_str()?;
    let (_, key) = discord_chat_key("INTERACTION_CREATE", id)?;
    Some((json!({"t": "INTERACTION_CREATE", "d": payload}), key))
}

/// Discord's answer to a button press taken later: a deferred update of its message.
pub fn discord_deferred_update() -> Value {
    json!({ "type": 6 })
}

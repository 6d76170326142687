//! The chat platforms `herald gateway run` serves: the Telegram bot when a token is
//! configured, on the inbox the webhook listener uses (or its own when there is none).

use super::ServeError;
use herald_chat::key::KeyRules;
use herald_chat::pairing::PairingStore;
use herald_chat::telegram::access::Access;
use herald_chat::{ChatBot, TelegramStart, WebhookMode};
use herald_config::Config;
use herald_config::slack_settings::SlackSettings;
use herald_config::telegram_settings::{TelegramSettings, UnauthorizedDm};
use herald_gateway::Gateway;
use herald_session::{Host, Platform};
use std::sync::Arc;
use std::time::Duration;

/// How long one `getUpdates` waits for an update.
const LONG_POLL: Duration = Duration::from_secs(25);

/// The chat bots' conversation hosts (each `None` when its bot is off).
pub(super) struct ChatHosts {
    pub telegram: Option<Arc<Host>>,
    pub slack: Option<Arc<Host>>,
    pub discord: Option<Arc<Host>>,
}

/// Starts the configured chat bots. `recovered`: the webhook workers started first and
/// gave back what an earlier stop left running (else this does).
pub(super) async fn start(
    config: &Config,
    hosts: ChatHosts,
    gateway: Option<&Arc<Gateway>>,
    recovered: bool,
) -> Result<Vec<ChatBot>, ServeError> {
    if hosts.telegram.is_none() && hosts.slack.is_none() && hosts.discord.is_none() {
        return Ok(Vec::new());
    }
    let store = match gateway {
        Some(g) => g.store.clone(),
        None => crate::stores::open_for_gateway(config).await?,
    };
    if !recovered {
        let n = store.recover().await?;
        if n > 0 {
            tracing::warn!(
                entries = n,
                "chat messages an earlier stop cut off are taken again"
            );
        }
    }
    let mut bots = Vec::new();
    if let (Some(settings), Some(host)) = (config.telegram.as_ref(), hosts.telegram) {
        bots.push(start_telegram(config, settings, host, store.clone())?);
    }
    if let (Some(settings), Some(host)) = (config.slack.as_ref(), hosts.slack) {
        bots.push(start_slack(config, settings, host, store.clone(), &bots)?);
    }
    if let (Some(settings), Some(host)) = (config.discord.as_ref(), hosts.discord) {
        bots.push(start_discord(config, settings, host, store)?);
    }
    Ok(bots)
}

fn start_telegram(
    config: &Config,
    settings: &TelegramSettings,
    host: Arc<Host>,
    store: herald_store::Store,
) -> Result<ChatBot, ServeError> {
    let tools = herald_agent::toolsets::resolve(&Platform::Telegram.default_toolsets(config)).0;
    let client = herald_deliver::http_client_via(settings.proxy.as_deref())
        .map_err(|e| ServeError::Refused(format!("telegram: TELEGRAM_PROXY: {e}")))?;
    let webhook = webhook_mode(config, settings)?;
    let start = TelegramStart {
        token: settings.token.clone(),
        base_url: settings.base_url.clone(),
        access: access(settings),
        rules: KeyRules {
            group_per_user: settings.group_sessions_per_user,
            thread_per_user: settings.thread_sessions_per_user,
        },
        long_poll: LONG_POLL,
        client,
        pairing: PairingStore::of_home(config.home.root()),
        pair_strangers: settings.unauthorized_dm == UnauthorizedDm::Pair,
        webhook,
        reply_mode: settings.reply_to_mode,
        display: settings.display.clone(),
        reactions: settings.reactions,
    };
    herald_chat::start_telegram(start, host, tools, store, config.store.lease)
        .map_err(|e| ServeError::Refused(e.to_string()))
}

/// The routes the bots serve on the webhook listener, together.
pub(super) fn routes(bots: &[ChatBot]) -> Option<axum::Router> {
    bots.iter()
        .filter_map(|b| b.webhook.as_ref().map(|(_, r)| r.clone()))
        .reduce(|a, b| a.merge(b))
}

/// Each bot's platform and how it receives, in words.
pub(super) fn serving(bots: &[ChatBot]) -> Vec<(&'static str, String)> {
    bots.iter()
        .map(|b| (b.status.platform(), b.status.receiving().to_owned()))
        .collect()
}

/// How often `gateway.json` is refreshed with the bots' state.
const STATE_EVERY: Duration = Duration::from_secs(5);

/// Keeps the bots' state in `gateway.json` (for `herald gateway status`) while the
/// gateway serves.
pub(super) fn keep_state(state: Arc<crate::gateway_state::StateGuard>, bots: &[ChatBot]) {
    if bots.is_empty() {
        return;
    }
    let statuses: Vec<Arc<herald_chat::BotStatus>> =
        bots.iter().map(|b| b.status.clone()).collect();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(STATE_EVERY);
        loop {
            tick.tick().await;
            let shown = statuses.iter().map(|status| {
                let last = status.last_poll_ms().and_then(|ms| {
                    jiff::Timestamp::from_millisecond(ms)
                        .ok()
                        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                });
                crate::gateway_state::BotState {
                    platform: status.platform().into(),
                    receiving: status.receiving().to_owned(),
                    last_update_check: last,
                    received: status.received_count(),
                    failure: status.failure(),
                }
            });
            state.set_bots(shown.collect());
        }
    });
}

/// Paths of herald's own on the webhook listener, never a bot's.
const OWN_PATHS: &[&str] = &[
    "/webhooks",
    "/p/",
    "/health",
    "/metrics",
    "/dashboard",
    "/v1",
];

/// Webhook mode, checked: it needs herald's webhook listener and a path of its own.
fn webhook_mode(
    config: &Config,
    settings: &TelegramSettings,
) -> Result<Option<WebhookMode>, ServeError> {
    let Some(hook) = &settings.webhook else {
        return Ok(None);
    };
    let mode = WebhookMode {
        url: hook.url.clone(),
        secret: hook.secret.clone(),
    };
    let path = mode
        .path()
        .map_err(|e| ServeError::Refused(e.to_string()))?;
    if !config.webhook.enabled {
        return Err(ServeError::Refused(
            "telegram: TELEGRAM_WEBHOOK_URL is set, but herald's webhook listener is off: Telegram's updates arrive there (platforms.webhook.enabled: true), or unset TELEGRAM_WEBHOOK_URL to poll".into(),
        ));
    }
    if let Some(own) = OWN_PATHS.iter().find(|p| path.starts_with(*p)) {
        return Err(ServeError::Refused(format!(
            "telegram: TELEGRAM_WEBHOOK_URL's path {path} is under {own}, which herald serves itself; use another path (/telegram)"
        )));
    }
    Ok(Some(mode))
}

fn access(s: &TelegramSettings) -> Access {
    Access {
        users: herald_chat::allow::Users {
            allowed: s.allowed_users.iter().cloned().collect(),
            allow_all: s.allow_all_users,
            gateway_allowed: s.gateway_allowed_users.iter().cloned().collect(),
            gateway_allow_all: s.gateway_allow_all_users,
        },
        group_allowed_users: s.group_allowed_users.iter().cloned().collect(),
        group_allowed_chats: s.group_allowed_chats.iter().cloned().collect(),
        allowed_chats: s.allowed_chats.iter().cloned().collect(),
        require_mention: s.require_mention,
        free_response_chats: s.free_response_chats.iter().cloned().collect(),
        free_response_topics: s.free_response_topics.iter().cloned().collect(),
        allowed_topics: s.allowed_topics.iter().cloned().collect(),
        ignored_threads: s.ignored_threads.iter().copied().collect(),
        exclusive_bot_mentions: s.exclusive_bot_mentions,
        mention_patterns: s
            .mention_patterns
            .iter()
            .filter_map(|p| {
                regex::RegexBuilder::new(p)
                    .case_insensitive(true)
                    .build()
                    .ok()
            })
            .collect(),
        bot_username: String::new(),
        bot_id: 0,
        allow_bots: s.allow_bots,
    }
}

fn start_slack(
    config: &Config,
    settings: &SlackSettings,
    host: Arc<Host>,
    store: herald_store::Store,
    started: &[ChatBot],
) -> Result<ChatBot, ServeError> {
    let tools = herald_agent::toolsets::resolve(&Platform::Slack.default_toolsets(config)).0;
    let events = slack_events(config, settings, started)?;
    let start = herald_chat::SlackStart {
        bot_token: settings.bot_token.clone(),
        app_token: settings.app_token.clone(),
        events,
        base_url: settings.base_url.clone(),
        access: slack_access(settings),
        behaviour: herald_chat::slack::Behaviour {
            reply_in_thread: settings.reply_in_thread,
            dm_threads: settings.dm_threads,
            reactions: settings.reactions,
            status_line: settings.status_line,
            status_text: settings.status_text.clone(),
            rules: KeyRules {
                group_per_user: settings.group_sessions_per_user,
                thread_per_user: settings.thread_sessions_per_user,
            },
        },
        pairing: PairingStore::of_home(config.home.root()),
        pair_strangers: settings.unauthorized_dm == UnauthorizedDm::Pair,
        display: settings.display.clone(),
        client: herald_deliver::http_client(),
        ping_every: settings.ping_every,
        pong_within: settings.ping_every * 4,
    };
    herald_chat::start_slack(start, host, tools, store, config.store.lease)
        .map_err(|e| ServeError::Refused(e.to_string()))
}

/// The Events API when `SLACK_SIGNING_SECRET` is set, checked: it needs herald's webhook
/// listener and a path no one else serves.
fn slack_events(
    config: &Config,
    settings: &SlackSettings,
    started: &[ChatBot],
) -> Result<Option<herald_chat::SlackEvents>, ServeError> {
    let Some(secret) = &settings.signing_secret else {
        return Ok(None);
    };
    let path = settings.events_path.clone();
    if !config.webhook.enabled {
        return Err(ServeError::Refused(
            "slack: SLACK_SIGNING_SECRET is set, but herald's webhook listener is off: Slack's Events API requests arrive there (platforms.webhook.enabled: true), or unset SLACK_SIGNING_SECRET to use Socket Mode alone".into(),
        ));
    }
    if let Some(own) = OWN_PATHS.iter().find(|p| path.starts_with(*p)) {
        return Err(ServeError::Refused(format!(
            "slack: the Events API path {path} (SLACK_EVENTS_PATH) is under {own}, which herald serves itself; use another path (/slack/events)"
        )));
    }
    if let Some(other) = started
        .iter()
        .find(|b| b.webhook.as_ref().is_some_and(|(p, _)| *p == path))
    {
        return Err(ServeError::Refused(format!(
            "slack: the Events API path {path} is the {} bot's webhook path; give one of them another path (SLACK_EVENTS_PATH)",
            other.status.platform()
        )));
    }
    Ok(Some(herald_chat::SlackEvents {
        secret: secret.clone(),
        path,
    }))
}

fn slack_access(s: &SlackSettings) -> herald_chat::slack::access::Access {
    herald_chat::slack::access::Access {
        users: herald_chat::allow::Users {
            allowed: s.allowed_users.clone(),
            allow_all: s.allow_all_users,
            gateway_allowed: s.gateway_allowed_users.clone(),
            gateway_allow_all: s.gateway_allow_all_users,
        },
        allowed_channels: s.allowed_channels.clone(),
        require_mention: s.require_mention,
        strict_mention: s.strict_mention,
        free_response_channels: s.free_response_channels.clone(),
        mention_patterns: s
            .mention_patterns
            .iter()
            .filter_map(|p| {
                regex::RegexBuilder::new(p)
                    .case_insensitive(true)
                    .build()
                    .ok()
            })
            .collect(),
        allow_bots: s.allow_bots,
        bot_user: String::new(),
        threads: Default::default(),
    }
}

fn start_discord(
    config: &Config,
    settings: &herald_config::discord_settings::DiscordSettings,
    host: Arc<Host>,
    store: herald_store::Store,
) -> Result<ChatBot, ServeError> {
    let tools = herald_agent::toolsets::resolve(&Platform::Discord.default_toolsets(config)).0;
    let b = &settings.backfill;
    let start = herald_chat::DiscordStart {
        token: settings.token.clone(),
        base_url: settings.base_url.clone(),
        access: herald_chat::discord::access::Access {
            users: herald_chat::allow::Users {
                allowed: settings.allowed_users.clone(),
                allow_all: settings.allow_all_users,
                gateway_allowed: settings.gateway_allowed_users.clone(),
                gateway_allow_all: settings.gateway_allow_all_users,
            },
            roles: settings.allowed_roles.clone(),
            allowed_channels: settings.allowed_channels.clone(),
            ignored_channels: settings.ignored_channels.clone(),
            free_channels: settings.free_response_channels.clone(),
            require_mention: settings.require_mention,
            thread_require_mention: settings.thread_require_mention,
            allow_bots: settings.allow_bots,
            bot_id: String::new(),
        },
        behaviour: herald_chat::discord::Behaviour {
            auto_thread: settings.auto_thread,
            no_thread_channels: settings.no_thread_channels.clone(),
            reactions: settings.reactions,
            reply_mode: settings.reply_to_mode,
            rules: KeyRules {
                group_per_user: settings.group_sessions_per_user,
                thread_per_user: settings.thread_sessions_per_user,
            },
        },
        members_intent: settings.members_intent(),
        backfill: herald_chat::discord::backfill::Backfill {
            enabled: b.enabled,
            channels: b.channels.clone(),
            window_secs: b.window_secs,
            limit: b.limit,
        },
        pairing: PairingStore::of_home(config.home.root()),
        pair_strangers: settings.unauthorized_dm == UnauthorizedDm::Pair,
        display: settings.display.clone(),
        client: herald_deliver::http_client(),
        discord_routes: herald_chat::discord::discord_routes(config),
    };
    herald_chat::start_discord(start, host, tools, store, config.store.lease)
        .map_err(|e| ServeError::Refused(e.to_string()))
}

//! The chat platforms `herald gateway run` serves: the Telegram bot when a token is
//! configured, on the inbox the webhook listener uses (or its own when there is none).

use super::ServeError;
use herald_chat::key::KeyRules;
use herald_chat::pairing::PairingStore;
use herald_chat::telegram::access::Access;
use herald_chat::{ChatBot, TelegramStart, WebhookMode};
use herald_config::Config;
use herald_config::telegram_settings::{TelegramSettings, UnauthorizedDm};
use herald_gateway::Gateway;
use herald_session::{Host, Platform};
use std::sync::Arc;
use std::time::Duration;

/// How long one `getUpdates` waits for an update.
const LONG_POLL: Duration = Duration::from_secs(25);

/// Starts the Telegram bot when one is configured. `recovered`: the webhook workers
/// started first and gave back what an earlier stop left running (else this does).
pub(super) async fn start(
    config: &Config,
    host: Option<Arc<Host>>,
    gateway: Option<&Arc<Gateway>>,
    recovered: bool,
) -> Result<Option<ChatBot>, ServeError> {
    let (Some(settings), Some(host)) = (config.telegram.as_ref(), host) else {
        return Ok(None);
    };
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
    let bot = herald_chat::start_telegram(start, host, tools, store, config.store.lease)
        .map_err(|e| ServeError::Refused(e.to_string()))?;
    Ok(Some(bot))
}

/// How often `gateway.json` is refreshed with the bot's state.
const STATE_EVERY: Duration = Duration::from_secs(5);

/// Keeps the bot's state in `gateway.json` (for `herald gateway status`) while the
/// gateway serves.
pub(super) fn keep_state(
    state: Arc<crate::gateway_state::StateGuard>,
    status: Arc<herald_chat::BotStatus>,
    receiving: String,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(STATE_EVERY);
        loop {
            tick.tick().await;
            let last = status.last_poll_ms().and_then(|ms| {
                jiff::Timestamp::from_millisecond(ms)
                    .ok()
                    .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            });
            state.set_bots(vec![crate::gateway_state::BotState {
                platform: "telegram".into(),
                receiving: receiving.clone(),
                last_update_check: last,
                received: status.received_count(),
                failure: status.failure(),
            }]);
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

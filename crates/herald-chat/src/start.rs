//! Starting a bot inside `herald gateway run`: its door, its poller and its dispatcher,
//! stopped together.

use crate::BotStatus;
use crate::door::ChatDoor;
use crate::key::KeyRules;
use crate::pairing::PairingStore;
use crate::telegram::Telegram;
use crate::telegram::access::Access;
use crate::telegram::api::BotApi;
use crate::telegram::poll::Poller;
use crate::telegram::wire::Me;
use herald_session::Host;
use herald_store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, watch};

/// What a Telegram bot is started with.
pub struct TelegramStart {
    pub token: String,
    /// `extra.base_url` (`https://api.telegram.org/bot`).
    pub base_url: String,
    pub access: Access,
    pub rules: KeyRules,
    /// How long one `getUpdates` waits.
    pub long_poll: Duration,
    /// The home's pairing files.
    pub pairing: PairingStore,
    /// Unknown users in private chats get a pairing code (else they are ignored).
    pub pair_strangers: bool,
    /// Webhook mode (`TELEGRAM_WEBHOOK_URL`): Telegram posts updates to herald's
    /// listener; else herald polls.
    pub webhook: Option<WebhookMode>,
    /// `TELEGRAM_REPLY_TO_MODE`.
    pub reply_mode: herald_config::telegram_settings::ReplyToMode,
    /// Streaming, tool progress, the folders answers may send files from.
    pub display: herald_config::chat_display::ChatDisplay,
    /// `TELEGRAM_REACTIONS`.
    pub reactions: bool,
    pub client: reqwest::Client,
}

/// Where Telegram posts updates in webhook mode.
#[derive(Debug, Clone)]
pub struct WebhookMode {
    /// The public HTTPS URL (`TELEGRAM_WEBHOOK_URL`).
    pub url: String,
    /// `TELEGRAM_WEBHOOK_SECRET`, sent back in `X-Telegram-Bot-Api-Secret-Token`.
    pub secret: String,
}

impl WebhookMode {
    /// The path herald serves: the URL's (`/telegram` when it has none).
    pub fn path(&self) -> Result<String, StartError> {
        let url =
            reqwest::Url::parse(&self.url).map_err(|e| StartError::WebhookUrl(e.to_string()))?;
        let path = match url.path() {
            "" | "/" => "/telegram",
            p => p,
        };
        match servable(path) {
            true => Ok(path.to_owned()),
            false => Err(StartError::WebhookUrl(format!(
                "its path {path} is not one herald can serve: use letters, digits and - _ . ~ between slashes (/telegram)"
            ))),
        }
    }
}

/// A path the router takes as it is: segments of plain characters (no route syntax
/// such as `:name`, `*rest` or `{x}`, no empty segment).
pub(crate) fn servable(path: &str) -> bool {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.~%".contains(c);
    path.strip_prefix('/').is_some_and(|rest| {
        rest.split('/')
            .all(|seg| !seg.is_empty() && seg.chars().all(plain))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_path_is_served_only_when_the_router_takes_it_as_it_is() {
        let path = |url: &str| {
            WebhookMode {
                url: url.into(),
                secret: "s".into(),
            }
            .path()
            .ok()
        };
        assert_eq!(
            path("https://bot.example.com").as_deref(),
            Some("/telegram")
        );
        assert_eq!(
            path("https://bot.example.com/tg/hook").as_deref(),
            Some("/tg/hook")
        );
        assert_eq!(path("https://bot.example.com/:id"), None);
        assert_eq!(path("https://bot.example.com/*all"), None);
        assert_eq!(path("https://bot.example.com/a//b"), None);
        // Braces arrive encoded, and are served as such.
        assert_eq!(
            path("https://bot.example.com/{x}").as_deref(),
            Some("/%7Bx%7D")
        );
        assert_eq!(path("not a url"), None);
    }
}

/// Why a bot did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("telegram: the bot token is not `<bot id>:<secret>` as BotFather gives it")]
    Token,
    #[error("telegram: TELEGRAM_WEBHOOK_URL is not a URL: {0}")]
    WebhookUrl(String),
    #[error("slack: {0}")]
    Slack(String),
    #[error("discord: {0}")]
    Discord(String),
}

/// A running bot.
pub struct ChatBot {
    pub status: Arc<BotStatus>,
    /// Keeps the bot on the operator's board while it runs.
    _reporting: Arc<dyn herald_metrics::bots::ReportsBot>,
    /// In webhook mode: the route to serve on herald's webhook listener.
    pub webhook: Option<(String, axum::Router)>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ChatBot {
    pub(crate) fn new(
        status: Arc<BotStatus>,
        webhook: Option<(String, axum::Router)>,
        stop: watch::Sender<bool>,
        tasks: Vec<tokio::task::JoinHandle<()>>,
    ) -> ChatBot {
        let reporting: Arc<dyn herald_metrics::bots::ReportsBot> = status.clone();
        herald_metrics::bots::register(&reporting);
        ChatBot {
            status,
            _reporting: reporting,
            webhook,
            stop,
            tasks,
        }
    }

    /// Stops polling and claiming; turns that run go on until the process ends, and
    /// their entries are taken again at the next start if they do not finish.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Starts a Telegram bot on `host` (its conversations) and `store` (its inbox).
pub fn start_telegram(
    mut start: TelegramStart,
    host: Arc<Host>,
    tools: Vec<String>,
    store: Store,
    lease: Duration,
) -> Result<ChatBot, StartError> {
    let bot_id = start
        .token
        .split_once(':')
        .and_then(|(id, _)| id.parse::<i64>().ok())
        .ok_or(StartError::Token)?;
    let api = BotApi::new(
        start.client.clone(),
        &start.base_url,
        &start.token,
        Duration::from_secs(20),
    );
    let receiving = match &start.webhook {
        Some(mode) => format!("webhook at {} on the webhook listener", mode.path()?),
        None => "long polling".to_owned(),
    };
    let status = Arc::new(BotStatus::new("telegram", receiving));
    let reporting: Arc<dyn herald_metrics::bots::ReportsBot> = status.clone();
    herald_metrics::bots::register(&reporting);
    let (stop, stopped) = watch::channel(false);
    let wake = Arc::new(Notify::new());
    let route = format!("{}telegram:{bot_id}", herald_store::CHAT_ROUTE_PREFIX);
    let (intake, webhook) = match start.webhook.clone() {
        None => {
            let poller = Poller {
                api: api.clone(),
                store: store.clone(),
                route,
                wake: wake.clone(),
                status: status.clone(),
                long_poll: start.long_poll,
            };
            let stop = stopped.clone();
            (
                tokio::spawn(crate::telegram::poll::poll_while_held(poller, stop)),
                None,
            )
        }
        Some(mode) => {
            let path = mode.path()?;
            let receiver = crate::telegram::webhook::Receiver {
                store: store.clone(),
                route,
                secret: mode.secret.clone().into(),
                wake: wake.clone(),
                status: status.clone(),
            };
            let router = crate::telegram::webhook::router(&path, receiver);
            let api = api.clone();
            let stop = stopped.clone();
            (
                tokio::spawn(register_webhook(api, mode, stop)),
                Some((path, router)),
            )
        }
    };
    let governor = status.governor.clone();
    let sweeping = tokio::spawn(sweep_files(
        host.runtime().home.root().to_owned(),
        stopped.clone(),
    ));
    let serving = tokio::spawn(async move {
        let Some(me) = introduce(&api, stopped.clone()).await else {
            return;
        };
        register_commands(&api, &host).await;
        start.access.bot_id = me.id;
        start.access.bot_username = me.username.clone().unwrap_or_default();
        let pairing = start.pair_strangers.then(|| start.pairing.clone());
        let platform = Arc::new(Telegram {
            api,
            governor: governor.clone(),
            access: start.access,
            pairing: start.pairing,
            reply_mode: start.reply_mode,
            reactions: start.reactions,
        });
        let door = ChatDoor::new(
            platform,
            store,
            host,
            tools,
            start.rules,
            pairing,
            start.display,
        );
        crate::dispatch::dispatch(door, wake, lease, stopped).await;
    });
    Ok(ChatBot {
        status,
        _reporting: reporting,
        webhook,
        stop,
        tasks: vec![intake, serving, sweeping],
    })
}

/// Every hour, removes the files people sent that are older than
/// [`crate::door::KEEP_FILES_FOR`] (as Hermes sweeps its document cache).
pub(crate) async fn sweep_files(home: std::path::PathBuf, mut stop: watch::Receiver<bool>) {
    let mut every = tokio::time::interval(Duration::from_secs(3600));
    loop {
        tokio::select! {
            _ = crate::stopped(&mut stop) => return,
            _ = every.tick() => {}
        }
        let root = home.clone();
        let removed = tokio::task::spawn_blocking(move || {
            crate::door::sweep(&root, crate::door::KEEP_FILES_FOR)
        })
        .await
        .unwrap_or(0);
        if removed > 0 {
            tracing::info!(removed, "chat files older than a day removed");
        }
    }
}

/// The command menu: the door's commands and the installed skills.
async fn register_commands(api: &BotApi, host: &Host) {
    let library = host.runtime().skills.clone();
    let skills = tokio::task::spawn_blocking(move || library.discover())
        .await
        .unwrap_or_default();
    let named: Vec<(String, String)> = skills
        .into_iter()
        .map(|s| (s.name, s.description))
        .collect();
    let body = serde_json::json!({"commands": crate::telegram::menu::menu(&named)});
    if let Err(e) = api
        .call::<serde_json::Value>("setMyCommands", &body, Duration::ZERO)
        .await
    {
        tracing::warn!(error = %e, "telegram: setMyCommands failed; the command menu is unchanged");
    }
}

/// `setWebhook` with the secret, tried until Telegram takes it; pending updates are
/// kept (never dropped).
async fn register_webhook(api: BotApi, mode: WebhookMode, stop: watch::Receiver<bool>) {
    let body = serde_json::json!({
        "url": mode.url,
        "secret_token": mode.secret,
        "allowed_updates": ["message", "callback_query"],
        "drop_pending_updates": false,
    });
    let set = until_answered("telegram: setWebhook", None, stop, || async {
        api.call::<serde_json::Value>("setWebhook", &body, Duration::ZERO)
            .await
            .map_err(|e| e.to_string())
    })
    .await;
    if set.is_some() {
        tracing::info!("telegram: webhook set; updates arrive at the webhook listener");
    }
}

/// `getMe`, tried until it answers (or the bot stops): who the bot is, and whether
/// its privacy mode hides group messages.
async fn introduce(api: &BotApi, stop: watch::Receiver<bool>) -> Option<Me> {
    let me = until_answered("telegram: getMe", None, stop, || async {
        api.call::<Me>("getMe", &serde_json::json!({}), Duration::ZERO)
            .await
            .map_err(|e| e.to_string())
    })
    .await?;
    let name = me.username.clone().unwrap_or_default();
    tracing::info!(bot = %name, "telegram: connected");
    if !me.can_read_all_group_messages {
        tracing::info!(
            bot = %name,
            "telegram: privacy mode is on: in groups the bot sees only commands, replies to it and mentions (BotFather /setprivacy turns it off)"
        );
    }
    Some(me)
}

/// Calls `call` until it answers (1 s between tries, doubling to a minute), or until
/// `stop`: what it answered. Each failure is logged (and kept in `status`) as `what`'s.
pub(crate) async fn until_answered<T, F, Fut>(
    what: &str,
    status: Option<&BotStatus>,
    mut stop: watch::Receiver<bool>,
    call: F,
) -> Option<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let mut wait = Duration::from_secs(1);
    loop {
        match call().await {
            Ok(answer) => return Some(answer),
            Err(e) => {
                if let Some(s) = status {
                    s.failed(format!("{what}: {e}"));
                }
                tracing::warn!(error = %e, "{what} failed; trying again");
            }
        }
        tokio::select! {
            _ = crate::stopped(&mut stop) => return None,
            _ = tokio::time::sleep(wait) => {}
        }
        wait = (wait * 2).min(Duration::from_secs(60));
    }
}

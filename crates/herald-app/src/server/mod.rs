//! `herald gateway run` below the binary: the webhook listener with its inbox workers,
//! the OpenAI-compatible API and the dashboard, assembled on one config and served until
//! `stop` resolves, with trace export, metrics and systemd's notify protocol. The binary
//! only loads the config and says what it is told ([`Notice`]); a test can serve a
//! gateway in its own process the same way.

mod chat;
mod fronts;
mod hosts;
pub(crate) mod wiring;

use crate::stores::OpenError;
use fronts::{ApiFront, WebhookFront};
use herald_config::Config;
use herald_gateway::{RunTemplate, Workers, router};
use herald_http::BindError;
use herald_session::{Host, LlmClient, Platform, start_together};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use wiring::Mount;

/// What a serving gateway tells its operator as it starts.
#[derive(Debug, Clone, Copy)]
pub enum Notice<'a> {
    /// The webhook listener accepts on `url` with this many routes.
    WebhookListening { url: &'a str, routes: usize },
    /// The API accepts on `url` (its routes under `/v1`).
    ApiListening { url: &'a str },
    /// A chat bot answers people (`how`: by long polling, or the webhook path).
    BotServing { platform: &'a str, how: &'a str },
    /// The configuration mistakes the gateway serves through.
    Findings(&'a [String]),
}

/// Where [`serve`] says its [`Notice`]s.
pub type Notices<'a> = &'a (dyn Fn(Notice<'_>) + Sync);

/// Why the gateway did not serve, or stopped early.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A store could not be opened.
    #[error(transparent)]
    Store(#[from] OpenError),
    /// The API cannot start as configured (its key, its port).
    #[error("{0}")]
    Refused(String),
    /// The webhook port could not be bound; `from_env` when `WEBHOOK_PORT` chose it.
    #[error("{error}")]
    WebhookBind {
        error: BindError,
        port: u16,
        from_env: bool,
    },
    /// The inbox could not be read to start its workers.
    #[error("cannot start the inbox workers: {0}")]
    Workers(#[from] herald_store::StoreError),
    /// `gateway.json` could not be written, or a listener failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Serves the gateway `config` describes until `stop` resolves (then drains within the
/// grace period), exporting traces while it runs.
pub async fn serve(
    config: Config,
    notices: Notices<'_>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let traces = crate::traces::start(&config.tracing);
    let served = serve_fronts(config, notices, stop).await;
    if let Some(t) = traces {
        t.finish().await;
    }
    served
}

/// The started hosts: the webhook runs' (as their template) and the API's.
struct Hosts {
    webhook: Option<RunTemplate>,
    api: Option<Arc<Host>>,
    /// The Telegram bot's conversations' host.
    telegram: Option<Arc<Host>>,
    /// The Slack app's conversations' host.
    slack: Option<Arc<Host>>,
    /// The Discord bot's conversations' host.
    discord: Option<Arc<Host>>,
    client: LlmClient,
}

impl Hosts {
    /// The hosts whose runs the dashboard shows.
    fn shown(&self) -> Vec<Arc<Host>> {
        let webhook = self.webhook.iter().map(|t| t.host.clone());
        let api = self.api.iter().cloned();
        webhook
            .chain(api)
            .chain(self.telegram.iter().cloned())
            .chain(self.slack.iter().cloned())
            .chain(self.discord.iter().cloned())
            .collect()
    }
}

/// Builds and starts the hosts together: they share one provider client, one session
/// store, one plugin host and its reload.
async fn start_hosts(config: &Config) -> Result<Hosts, ServeError> {
    let client = LlmClient::new();
    let home = &config.home;
    let sessions = crate::stores::open_sessions(&config.store, home, home, None).await?;
    let webhook = hosts::webhook_host(config, &client, sessions.clone());
    let api = match config.api_server.enabled {
        true => Some(
            hosts::build_host(home, Platform::Api, config, &client, sessions.clone())
                .map_err(|e| ServeError::Refused(e.to_string()))?,
        ),
        false => None,
    };
    let telegram = hosts::chat_host(config, Platform::Telegram, &client, sessions.clone());
    let slack = hosts::chat_host(config, Platform::Slack, &client, sessions.clone());
    let discord = hosts::chat_host(config, Platform::Discord, &client, sessions);
    let (has_webhook, has_api) = (webhook.is_some(), api.is_some());
    let (has_telegram, has_slack) = (telegram.is_some(), slack.is_some());
    let built = webhook
        .into_iter()
        .chain(api)
        .chain(telegram)
        .chain(slack)
        .chain(discord)
        .collect();
    let mut started = start_together(built).await.into_iter();
    let webhook = match has_webhook {
        true => started.next().map(|h| hosts::run_template(config, h)),
        false => None,
    };
    let api = match has_api {
        true => started.next(),
        false => None,
    };
    Ok(Hosts {
        webhook,
        api,
        telegram: match has_telegram {
            true => started.next(),
            false => None,
        },
        slack: match has_slack {
            true => started.next(),
            false => None,
        },
        discord: started.next(),
        client,
    })
}

async fn serve_fronts(
    config: Config,
    notices: Notices<'_>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    // One signal starts every drain at once, so the grace period bounds the whole stop.
    // Listened for first: a SIGTERM while the fronts start is a stop, never a kill.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        stop.await;
        crate::systemd::stopping();
        let _ = stop_tx.send(true);
    });
    let hosts = start_hosts(&config).await?;
    let shown = hosts.shown();
    let api = match &hosts.api {
        Some(host) => Some(fronts::api(&config, host.clone(), notices).await?),
        None => None,
    };
    let webhook = match config.webhook.enabled {
        true => Some(fronts::webhook(&config, notices).await?),
        false => None,
    };
    let webhook_urls = webhook.as_ref().map(|w| w.urls.clone()).unwrap_or_default();
    let webhook_base = webhook_urls
        .first()
        .cloned()
        .unwrap_or_else(|| format!("http://localhost:{}", config.webhook.port));
    let gateway = webhook.as_ref().map(|w| w.gateway.clone());
    let mount = wiring::dashboard(&config, gateway.clone(), shown, webhook_base);
    let api_urls = api.as_ref().map(|a| a.urls.clone()).unwrap_or_default();
    let state = Arc::new(crate::gateway_state::record(
        &config.home,
        webhook_urls,
        api_urls,
    )?);
    let chat_hosts = chat::ChatHosts {
        telegram: hosts.telegram.clone(),
        slack: hosts.slack.clone(),
        discord: hosts.discord.clone(),
    };
    let workers = start_workers(&config, webhook.as_ref(), hosts).await?;
    let bots = chat::start(&config, chat_hosts, gateway.as_ref(), workers.is_some()).await?;
    let bot_hook = chat::routes(&bots);
    for (platform, how) in chat::serving(&bots) {
        notices(Notice::BotServing {
            platform,
            how: &how,
        });
    }
    chat::keep_state(state.clone(), &bots);
    crate::systemd::ready(gateway.clone());
    crate::start_pages::release_once_serving();
    if let Some(gw) = &gateway {
        herald_gateway::retention::spawn(gw.store.clone(), config.inbox.retention.clone());
        herald_gateway::schedule::spawn(
            config.home.root().to_path_buf(),
            &config.schedules,
            gw.store.clone(),
            gw.work_notify.clone(),
        );
    }
    if config.metrics.enabled {
        herald_metrics::enable();
        if let Some(gw) = &gateway {
            gw.measure_inbox();
        }
    }
    let drain_workers = {
        let rx = stop_rx.clone();
        async move {
            stopped(rx).await;
            for bot in bots {
                bot.shutdown().await;
            }
            if let Some(workers) = workers {
                workers.shutdown().await;
            }
        }
    };
    let (on_api, on_webhook) = Mount::split(mount);
    let (webhook_served, api_served, ()) = tokio::join!(
        serve_webhook(&config, webhook, on_webhook, bot_hook, stop_rx.clone()),
        serve_api(&config, api, on_api, stop_rx),
        drain_workers
    );
    webhook_served?;
    api_served?;
    tracing::info!("gateway stopped");
    Ok(())
}

/// The inbox workers, when there is a webhook listener and a host for its runs.
async fn start_workers(
    config: &Config,
    webhook: Option<&WebhookFront>,
    hosts: Hosts,
) -> Result<Option<Workers>, ServeError> {
    let (Some(w), Some(template)) = (webhook, hosts.webhook) else {
        return Ok(None);
    };
    let profiles = hosts::profile_templates(
        config.home.clone(),
        hosts.client.clone(),
        config.store.clone(),
    );
    let workers = Workers::start(
        w.gateway.clone(),
        template,
        Some(profiles),
        &config.webhook.workers,
        config.store.lease,
    )
    .await?;
    Ok(Some(workers))
}

fn shutdown_grace(config: &Config) -> Duration {
    Duration::from_secs(config.webhook.workers.shutdown_grace_secs)
}

async fn serve_webhook(
    config: &Config,
    webhook: Option<WebhookFront>,
    dashboard: Option<axum::Router>,
    bot_hook: Option<axum::Router>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    let Some(w) = webhook else {
        return Ok(());
    };
    let limits = wiring::connection_limits(
        &config.webhook.connections,
        shutdown_grace(config),
        "webhook",
    );
    let loopback = config
        .webhook
        .host
        .as_deref()
        .is_some_and(herald_config::is_loopback_name);
    let gateway = match bot_hook {
        Some(hook) => router(w.gateway).merge(hook),
        None => router(w.gateway),
    };
    let app = wiring::beside(gateway, &config.metrics, loopback, dashboard);
    herald_http::serve(w.listeners, app, limits, stopped(stop)).await
}

async fn serve_api(
    config: &Config,
    api: Option<ApiFront>,
    dashboard: Option<axum::Router>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<()> {
    let Some(a) = api else {
        return Ok(());
    };
    let grace = shutdown_grace(config);
    let limits = wiring::connection_limits(&config.api_server.connections, grace, "api");
    let draining = {
        let api = a.api.clone();
        async move {
            stopped(stop).await;
            // Half the grace for the runs to end, the rest for their answers.
            api.stop(grace / 2).await;
        }
    };
    let loopback = herald_config::is_loopback_name(&config.api_server.host);
    let app = herald_trace::traced(herald_api::router(a.api), "api");
    let app = herald_metrics::counted(app, "api");
    let app = wiring::beside(app, &config.metrics, loopback, dashboard);
    herald_http::serve(a.listeners, app, limits, draining).await
}

async fn stopped(mut rx: tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

//! The two listening front doors of `herald gateway run`, bound: the webhook listener
//! with its gateway, and the OpenAI-compatible API.

use super::{Notice, Notices, ServeError};
use herald_config::{Config, process_env};
use herald_deliver::{TargetSet, TargetSettings};
use herald_gateway::Gateway;
use herald_http::bind;
use herald_session::Host;
use herald_webhook::SystemClock;
use std::sync::Arc;

/// The webhook front door, bound.
pub(super) struct WebhookFront {
    pub gateway: Arc<Gateway>,
    pub listeners: Vec<tokio::net::TcpListener>,
    pub urls: Vec<String>,
}

/// Opens the inbox, builds the gateway and binds the webhook listener.
pub(super) async fn webhook(
    config: &Config,
    notices: Notices<'_>,
) -> Result<WebhookFront, ServeError> {
    let store = crate::stores::open_for_gateway(config).await?;
    if store.shared() {
        // The subscriptions every instance shares, in this home's file before the
        // route table is built from it.
        let path = config.home.subscriptions_file();
        if let Err(e) = herald_admin::shared_subscriptions::pull(&store, &path).await {
            tracing::warn!(error = %e, "the shared subscriptions could not be read");
        }
        herald_admin::shared_subscriptions::keep_in_step(store.clone(), path);
    }
    let targets = TargetSet::build(&TargetSettings {
        platforms: &config.platforms,
        env: &process_env,
    });
    tracing::info!(targets = ?targets.names(), "delivery targets ready");
    let findings = herald_gateway::findings::gather(config, &targets);
    let gateway = Arc::new(Gateway::new(config, store, targets, Arc::new(SystemClock)));
    herald_gateway::live_targets::reload_on_sighup(gateway.targets.clone(), config.home.clone());
    let from_env = herald_config::config::webhook_port_from_env(&process_env).is_some();
    let setting = match from_env {
        true => "WEBHOOK_PORT",
        false => "platforms.webhook.extra.port",
    };
    let listeners = bind(config.webhook.host.as_deref(), config.webhook.port, setting)
        .await
        .map_err(|error| ServeError::WebhookBind {
            error,
            port: config.webhook.port,
            from_env,
        })?;
    let routes = gateway.registry.current();
    let urls = urls_of(&listeners);
    for url in &urls {
        notices(Notice::WebhookListening {
            url,
            routes: routes.len(),
        });
    }
    tracing::info!(routes = ?routes.names(), "gateway started");
    drop(routes);
    notices(Notice::Findings(&findings));
    Ok(WebhookFront {
        gateway,
        listeners,
        urls,
    })
}

/// The API front door, bound.
pub(super) struct ApiFront {
    pub api: Arc<herald_api::Api>,
    pub listeners: Vec<tokio::net::TcpListener>,
    pub urls: Vec<String>,
}

/// The API on its started host, with its listener bound.
pub(super) async fn api(
    config: &Config,
    host: Arc<Host>,
    notices: Notices<'_>,
) -> Result<ApiFront, ServeError> {
    let settings = config.api_server.clone();
    let api = herald_api::Api::new(host, settings.clone(), None)
        .map_err(|e| ServeError::Refused(e.to_string()))?;
    let listeners = bind(
        Some(&settings.host),
        settings.port,
        "platforms.api_server.extra.port",
    )
    .await
    .map_err(|e| ServeError::Refused(e.to_string()))?;
    let urls = urls_of(&listeners);
    for url in &urls {
        notices(Notice::ApiListening { url });
    }
    Ok(ApiFront {
        api,
        listeners,
        urls,
    })
}

fn urls_of(listeners: &[tokio::net::TcpListener]) -> Vec<String> {
    listeners
        .iter()
        .filter_map(|l| l.local_addr().ok())
        .map(|addr| format!("http://{addr}"))
        .collect()
}

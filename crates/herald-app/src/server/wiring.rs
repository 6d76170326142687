//! What a listener serves beside its door's own routes: `/metrics`, the dashboard, the
//! loopback guard on `/health/detailed`; and its connection bounds.

use herald_config::metrics_settings::MetricsSettings;
use herald_config::{Config, ConnectionSettings};
use herald_dashboard::{Credentials, Dashboard, DashboardParts};
use herald_gateway::Gateway;
use herald_http::ConnectionLimits;
use herald_http::loopback_host::{Checked, loopback_names_only};
use herald_session::Host;
use std::sync::Arc;
use std::time::Duration;

/// `app` with `/metrics` when `metrics.enabled`. On a listener bound to loopback,
/// `/metrics` answers only to loopback host names: a page of another site whose name
/// points at 127.0.0.1 (DNS rebinding) is refused, as the dashboard refuses it.
pub(crate) fn with_metrics(
    app: axum::Router,
    settings: &MetricsSettings,
    loopback: bool,
) -> axum::Router {
    if !settings.enabled {
        return app;
    }
    let metrics = herald_metrics::router(settings.token.clone());
    match loopback {
        true => app.merge(loopback_names_only(metrics, Checked::All)),
        false => app.merge(metrics),
    }
}

/// `app` whose `/health/detailed` answers only to loopback host names when the
/// listener is bound to loopback (as `/metrics` and the dashboard do).
fn health_guarded(app: axum::Router, loopback: bool) -> axum::Router {
    match loopback {
        true => loopback_names_only(app, Checked::Paths(&["/health/detailed"])),
        false => app,
    }
}

/// A port's connection bounds (`platforms.webhook.extra` or
/// `platforms.api_server.extra`), within the descriptor limit.
pub(super) fn connection_limits(
    c: &ConnectionSettings,
    shutdown_grace: Duration,
    door: &'static str,
) -> ConnectionLimits {
    ConnectionLimits {
        door,
        max_connections: usize::try_from(c.max_connections).unwrap_or(usize::MAX),
        header_timeout: Duration::from_secs(c.header_timeout_secs),
        idle_timeout: Duration::from_secs(c.idle_timeout_secs),
        shutdown_grace,
    }
    .within_fd_limit()
}

/// Which listener serves the dashboard.
pub(super) enum Mount {
    Api(axum::Router),
    Webhook(axum::Router),
}

impl Mount {
    /// The dashboard's routes for the API listener and for the webhook listener.
    pub(super) fn split(mount: Option<Mount>) -> (Option<axum::Router>, Option<axum::Router>) {
        match mount {
            Some(Mount::Api(r)) => (Some(r), None),
            Some(Mount::Webhook(r)) => (None, Some(r)),
            None => (None, None),
        }
    }
}

/// The dashboard's routes and where they go (the API listener, else the webhook
/// listener), or `None` (said once) when it cannot be served safely: never without a
/// credential on an address others can reach.
pub(super) fn dashboard(
    config: &Config,
    gateway: Option<Arc<Gateway>>,
    hosts: Vec<Arc<Host>>,
    webhook_base: String,
) -> Option<Mount> {
    let api = config.api_server.enabled;
    let host = match api {
        true => Some(config.api_server.host.as_str()),
        false => config.webhook.host.as_deref(),
    };
    let loopback = host.is_some_and(herald_config::is_loopback_name);
    let credentials = Credentials {
        api_key: api.then(|| config.api_server.key.clone()).flatten(),
        home: config.home.root().to_path_buf(),
    };
    if !api && !loopback && !credentials.any() {
        tracing::warn!(
            "the dashboard is not served: the webhook listener binds an address others can reach and there is no dashboard token (run `herald dashboard token`, then restart)"
        );
        return None;
    }
    let parts = DashboardParts {
        inbox: gateway.map(|g| g.inbox_view()),
        hosts,
        subscriptions_file: config.home.subscriptions_file(),
        config_routes: config.routes.iter().map(|r| r.name.clone()).collect(),
        webhook_base,
        credentials,
        loopback,
    };
    let router = herald_dashboard::router(Dashboard::start(parts));
    Some(match api {
        true => Mount::Api(router),
        false => Mount::Webhook(router),
    })
}

/// A listening door's `app` with what every listener serves beside it: the loopback
/// guard on `/health/detailed`, `/metrics`, and the dashboard when it is served here.
pub(super) fn beside(
    app: axum::Router,
    metrics: &MetricsSettings,
    loopback: bool,
    dashboard: Option<axum::Router>,
) -> axum::Router {
    let app = with_metrics(health_guarded(app, loopback), metrics, loopback);
    match dashboard {
        Some(d) => app.merge(d),
        None => app,
    }
}

//! `herald rpc --ws`: the JSON-RPC gateway served on a WebSocket listener, with its
//! connection bounds, `/metrics` and the stop that ends every run.

use herald_config::metrics_settings::MetricsSettings;
use herald_http::{BindError, ConnectionLimits};
use herald_rpc::Gateway;
use herald_rpc::ws::Origins;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// How long runs get to end once `herald rpc` or `herald acp` is told to stop (their
/// clients are local: the whole exit stays within 2 s of the signal).
pub const STOP_WITHIN: Duration = Duration::from_secs(1);

/// Where and how the WebSocket listener serves.
pub struct WsListen<'a> {
    pub host: &'a str,
    pub port: u16,
    /// The bearer token every client sends.
    pub token: &'a str,
    pub origins: Origins,
    pub metrics: MetricsSettings,
}

/// Why the listener did not serve.
#[derive(Debug, thiserror::Error)]
pub enum WsError {
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Serves `gw` at `ws://HOST:PORT/api/ws` until `stop` resolves, then stops every run
/// within [`STOP_WITHIN`]; `say` hears each listening URL.
pub async fn serve_ws(
    gw: Arc<Gateway>,
    listen: WsListen<'_>,
    say: &(dyn Fn(&str) + Sync),
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), WsError> {
    let listeners = herald_http::bind(Some(listen.host), listen.port, "--ws").await?;
    for l in &listeners {
        if let Ok(a) = l.local_addr() {
            say(&format!("ws://{a}/api/ws"));
        }
    }
    let limits = ConnectionLimits {
        max_connections: 1024,
        header_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
        shutdown_grace: Duration::from_millis(500),
        door: "rpc",
    }
    .within_fd_limit();
    let loopback = herald_config::is_loopback_name(listen.host);
    let host = gw.host.clone();
    let app = herald_rpc::ws::router(gw, listen.token.to_owned(), listen.origins);
    let mut metrics = listen.metrics;
    if metrics.enabled {
        herald_metrics::enable();
        // The socket's own token guards `/metrics` when `metrics.token` sets none: a
        // local listener is never open to every page and process.
        metrics.token = metrics.token.or(Some(listen.token.to_owned()));
    }
    let app = crate::server::wiring::with_metrics(app, &metrics, loopback);
    let stop = async move {
        stop.await;
        host.stop_all(STOP_WITHIN).await;
    };
    herald_http::serve(listeners, app, limits, stop).await?;
    Ok(())
}

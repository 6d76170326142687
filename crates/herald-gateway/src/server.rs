//! The HTTP surface (spec §3): the axum router, binding, serving and graceful shutdown.

use crate::answer::Answer;
use crate::pipeline::Gateway;
use axum::Router;
use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Builds the router over a shared gateway.
pub fn router(gateway: Arc<Gateway>) -> Router {
    Router::new()
        .route("/health", get(health).head(health))
        .route("/health/detailed", get(health_detailed))
        .route("/webhooks/{route}", post(webhook))
        .route("/p/{profile}/webhooks/{route}", post(profiled_webhook))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(gateway)
}

async fn health() -> Answer {
    Answer::health()
}

/// The inbox's counts per state (the same as `herald inbox list` shows).
async fn health_detailed(State(gw): State<Arc<Gateway>>) -> Answer {
    let counts = tokio::task::spawn_blocking(move || gw.inbox_counts()).await;
    match counts {
        Ok(Ok(counts)) => Answer::health_detailed(&counts),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "health: cannot read the inbox");
            Answer::health_degraded()
        }
        Err(_) => Answer::health_degraded(),
    }
}

async fn not_found() -> Answer {
    Answer::not_found()
}

async fn method_not_allowed() -> Answer {
    Answer::method_not_allowed()
}

async fn webhook(
    State(gw): State<Arc<Gateway>>,
    route: Result<Path<String>, PathRejection>,
    request: Request,
) -> Response {
    let Ok(Path(route)) = route else {
        // A segment that does not percent-decode to UTF-8 cannot name a route.
        return Answer::not_found().into_response();
    };
    let (parts, body): (_, Body) = request.into_parts();
    gw.handle(&route, None, &parts.headers, body)
        .await
        .into_response()
}

async fn profiled_webhook(
    State(gw): State<Arc<Gateway>>,
    params: Result<Path<(String, String)>, PathRejection>,
    request: Request,
) -> Response {
    let Ok(Path((profile, route))) = params else {
        return Answer::not_found().into_response();
    };
    let (parts, body): (_, Body) = request.into_parts();
    let profile = gw.multiplex_profiles.then_some(profile.as_str());
    gw.handle(&route, profile, &parts.headers, body)
        .await
        .into_response()
}

/// Why the listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("cannot resolve bind host {host:?}: {source}")]
    Resolve {
        host: String,
        source: std::io::Error,
    },
    #[error(
        "cannot listen on {addr}: {source} (is another process using the port? set `platforms.webhook.extra.port`)"
    )]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// Binds the listening sockets: the given host (every address it resolves to), or all
/// interfaces on IPv4 and IPv6 when no host is set.
pub async fn bind(host: Option<&str>, port: u16) -> Result<Vec<TcpListener>, BindError> {
    let addrs: Vec<SocketAddr> = match host {
        None => vec![
            SocketAddr::from(([0, 0, 0, 0], port)),
            SocketAddr::from(([0u16; 8], port)),
        ],
        Some(h) => {
            let h = h.trim();
            let h = h
                .strip_prefix('[')
                .and_then(|x| x.strip_suffix(']'))
                .unwrap_or(h);
            let mut found: Vec<SocketAddr> = tokio::net::lookup_host((h, port))
                .await
                .map_err(|source| BindError::Resolve {
                    host: h.to_owned(),
                    source,
                })?
                .collect();
            found.dedup();
            found
        }
    };
    let mut listeners = Vec::new();
    let mut chosen_port = port;
    for (i, mut addr) in addrs.iter().copied().enumerate() {
        if chosen_port != 0 {
            addr.set_port(chosen_port);
        }
        match bind_one(addr) {
            Ok(l) => {
                if let Ok(local) = l.local_addr() {
                    chosen_port = local.port();
                }
                listeners.push(l);
            }
            // With no host, an IPv6 stack that is missing is not fatal.
            Err(e) if host.is_none() && i > 0 => {
                tracing::debug!(%addr, error = %e, "IPv6 listener not started");
            }
            Err(source) => return Err(BindError::Bind { addr, source }),
        }
    }
    Ok(listeners)
}

fn bind_one(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let domain = if addr.is_ipv6() {
        socket2::Domain::IPV6
    } else {
        socket2::Domain::IPV4
    };
    let socket = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}

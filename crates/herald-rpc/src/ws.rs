//! `herald rpc --ws HOST:PORT`: the same dispatcher over WebSocket at `/api/ws`, one
//! frame per text message. Every upgrade needs the bearer token (on loopback too, as
//! Jupyter and VS Code's server do), and one that carries an `Origin` header (a web
//! page in a browser) is refused unless that origin is allowed: a page the user opens
//! cannot drive the gateway. High-rate deltas are coalesced into ~33 ms batches (§1).

use crate::connection::{Client, MAX_FRAME, ready};
use crate::gateway::Gateway;
use crate::outbox::{Out, Outgoing};
use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;

/// How long deltas are gathered before they leave.
const BATCH: Duration = Duration::from_millis(33);
/// A client that takes nothing for this long is treated as gone (Hermes's write timeout).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// Open sockets at most; more are answered 503 before the upgrade.
pub const MAX_SOCKETS: usize = 256;

struct Server {
    gw: Arc<Gateway>,
    token: String,
    origins: Origins,
    sockets: Arc<tokio::sync::Semaphore>,
}

/// The web origins allowed to open a socket (`--allow-origin`); none by default.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origins(Vec<String>);

impl Origins {
    /// Reads `scheme://host[:port]` origins; the text of the first bad one.
    pub fn parse(given: &[String]) -> Result<Origins, String> {
        let mut origins = Vec::new();
        for origin in given {
            let o = normalized(origin);
            let host = o
                .strip_prefix("http://")
                .or_else(|| o.strip_prefix("https://"));
            match host {
                Some(h) if !h.is_empty() && !h.contains('/') => origins.push(o),
                _ => {
                    return Err(format!(
                        "{origin:?} is not an origin such as http://localhost:3000"
                    ));
                }
            }
        }
        Ok(Origins(origins))
    }

    fn allows(&self, origin: &str) -> bool {
        let origin = normalized(origin);
        self.0.contains(&origin)
    }
}

fn normalized(origin: &str) -> String {
    origin.trim().trim_end_matches('/').to_ascii_lowercase()
}

/// The WebSocket route: `token` must come as `Authorization: Bearer` or `?token=`, and
/// an `Origin` header must name one of `origins`.
pub fn router(gw: Arc<Gateway>, token: String, origins: Origins) -> Router {
    Router::new()
        .route("/api/ws", get(upgrade))
        .with_state(Arc::new(Server {
            gw,
            token,
            origins,
            sockets: Arc::new(tokio::sync::Semaphore::new(MAX_SOCKETS)),
        }))
}

/// Whether the upgrade comes from an allowed page, or from no page at all.
fn origin_allowed(server: &Server, headers: &HeaderMap) -> bool {
    match headers.get("origin") {
        None => true,
        Some(v) => v.to_str().is_ok_and(|o| server.origins.allows(o)),
    }
}

fn authorized(server: &Server, headers: &HeaderMap, query: &HashMap<String, String>) -> bool {
    let want = &server.token;
    let given = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or(query.get("token").map(String::as_str))
        .unwrap_or_default();
    bool::from(given.as_bytes().ct_eq(want.as_bytes()))
}

async fn upgrade(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    ws: WebSocketUpgrade,
) -> Response {
    if !origin_allowed(&server, &headers) {
        let refused = "this origin may not open a socket (herald rpc --allow-origin)\n";
        return (StatusCode::FORBIDDEN, refused).into_response();
    }
    if !authorized(&server, &headers, &query) {
        return (StatusCode::UNAUTHORIZED, "a bearer token is required\n").into_response();
    }
    let Ok(slot) = server.sockets.clone().try_acquire_owned() else {
        let busy = format!("too many open sockets (max {MAX_SOCKETS})\n");
        return (StatusCode::SERVICE_UNAVAILABLE, busy).into_response();
    };
    let gw = server.gw.clone();
    ws.max_message_size(MAX_FRAME)
        .on_upgrade(move |socket| async move {
            serve(gw, socket).await;
            drop(slot);
        })
}

async fn serve(gw: Arc<Gateway>, socket: WebSocket) {
    let _open = herald_metrics::get().doors.open("websocket");
    let (sink, mut stream) = socket.split();
    let (outbox, rx) = gw.connect();
    let writer = tokio::spawn(write_frames(rx, sink));
    outbox.frame(ready()).await;
    let mut client = Client::new(gw, outbox);
    let mut writer = std::pin::pin!(writer);
    loop {
        let message = tokio::select! {
            m = stream.next() => m,
            // The writer gave up on a client that takes nothing: the connection ends.
            _ = &mut writer => break,
        };
        match message {
            Some(Ok(Message::Text(text))) => client.take(text.as_str().as_bytes()).await,
            Some(Ok(Message::Binary(bytes))) => client.take(&bytes).await,
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Close(_)) | Err(_)) | None => break,
        }
    }
    client.finish().await;
    writer.abort();
}

/// Sends one message, unless the client takes nothing for [`WRITE_TIMEOUT`]; false
/// when the connection is gone or stalled.
async fn send_within(sink: &mut (impl futures_util::Sink<Message> + Unpin), text: String) -> bool {
    matches!(
        tokio::time::timeout(WRITE_TIMEOUT, sink.send(Message::Text(text.into()))).await,
        Ok(Ok(()))
    )
}

/// Sends items as text messages, gathering deltas for up to [`BATCH`]; stops when the
/// client is gone or takes nothing for [`WRITE_TIMEOUT`].
async fn write_frames(mut rx: Outgoing, mut sink: impl futures_util::Sink<Message> + Unpin) {
    let mut held: Option<Out> = None;
    loop {
        let next = match &held {
            Some(_) => match tokio::time::timeout(BATCH, rx.recv()).await {
                Ok(n) => n,
                Err(_) => {
                    if let Some(out) = held.take()
                        && !send_within(&mut sink, out.render()).await
                    {
                        return;
                    }
                    continue;
                }
            },
            None => rx.recv().await,
        };
        let Some(out) = next else {
            if let Some(out) = held.take() {
                send_within(&mut sink, out.render()).await;
            }
            return;
        };
        if let Some(h) = held.as_mut()
            && h.absorb(&out)
        {
            continue;
        }
        if let Some(previous) = held.take()
            && !send_within(&mut sink, previous.render()).await
        {
            return;
        }
        match out {
            Out::Delta { .. } => held = Some(out),
            Out::Frame(f) => {
                if !send_within(&mut sink, f).await {
                    return;
                }
            }
        }
    }
}

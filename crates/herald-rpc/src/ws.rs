//! `herald rpc --ws HOST:PORT`: the same dispatcher over WebSocket at `/api/ws`, one
//! frame per text message. A bearer token is required on any bind that is not
//! loopback. High-rate deltas are coalesced into ~33 ms batches (§1).

use crate::connection::{Client, MAX_FRAME, ready};
use crate::gateway::Gateway;
use crate::outbox::Out;
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
use tokio::sync::mpsc;

/// How long deltas are gathered before they leave.
const BATCH: Duration = Duration::from_millis(33);
/// Open sockets at most; more are answered 503 before the upgrade.
pub const MAX_SOCKETS: usize = 256;

struct Server {
    gw: Arc<Gateway>,
    token: Option<String>,
    sockets: Arc<tokio::sync::Semaphore>,
}

/// The WebSocket route; `token`, when set, must come as `Authorization: Bearer` or
/// `?token=`.
pub fn router(gw: Arc<Gateway>, token: Option<String>) -> Router {
    Router::new()
        .route("/api/ws", get(upgrade))
        .with_state(Arc::new(Server {
            gw,
            token,
            sockets: Arc::new(tokio::sync::Semaphore::new(MAX_SOCKETS)),
        }))
}

fn authorized(server: &Server, headers: &HeaderMap, query: &HashMap<String, String>) -> bool {
    let Some(want) = &server.token else {
        return true;
    };
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
    let (sink, mut stream) = socket.split();
    let (outbox, rx) = gw.connect();
    let writer = tokio::spawn(write_frames(rx, sink));
    outbox.frame(ready()).await;
    let mut client = Client::new(gw, outbox);
    while let Some(Ok(message)) = stream.next().await {
        match message {
            Message::Text(text) => client.take(text.as_str().as_bytes()).await,
            Message::Binary(bytes) => client.take(&bytes).await,
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => {}
        }
    }
    client.finish().await;
    writer.abort();
}

/// Sends items as text messages, gathering deltas for up to [`BATCH`].
async fn write_frames(
    mut rx: mpsc::Receiver<Out>,
    mut sink: impl futures_util::Sink<Message> + Unpin,
) {
    let mut held: Option<Out> = None;
    loop {
        let next = match &held {
            Some(_) => match tokio::time::timeout(BATCH, rx.recv()).await {
                Ok(n) => n,
                Err(_) => {
                    if let Some(out) = held.take()
                        && sink.send(Message::Text(out.render().into())).await.is_err()
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
                let _ = sink.send(Message::Text(out.render().into())).await;
            }
            return;
        };
        if let Some(h) = held.as_mut()
            && h.absorb(&out)
        {
            continue;
        }
        if let Some(previous) = held.take()
            && sink
                .send(Message::Text(previous.render().into()))
                .await
                .is_err()
        {
            return;
        }
        match out {
            Out::Delta { .. } => held = Some(out),
            Out::Frame(f) => {
                if sink.send(Message::Text(f.into())).await.is_err() {
                    return;
                }
            }
        }
    }
}

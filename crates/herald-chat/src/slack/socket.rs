//! Socket Mode, as Hermes connects (`apps.connections.open` with the app token), and
//! better where its users lose messages:
//!
//! - an envelope is acknowledged only once its payload is committed to the inbox, so
//!   Slack delivers again what herald did not keep;
//! - a `disconnect` asking for a refresh (`refresh_requested`, `warning`) opens the
//!   next socket first and closes the old one once the new one said `hello`;
//! - each socket is pinged; one that stops answering is replaced, logged and counted;
//! - `link_disabled` (Socket Mode turned off in the app) is reported, not retried.

use super::api::WebApi;
use super::intake::Intake;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite::Message;

/// The longest pause between connection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The largest frame read (Slack's envelopes are a few KiB).
const MAX_FRAME: usize = 1 << 20;

/// One app's Socket Mode connection.
pub struct SocketMode {
    /// The Web API with the app token (`xapp-`).
    pub app: Arc<WebApi>,
    pub intake: Intake,
    pub ping_every: Duration,
    pub pong_within: Duration,
}

/// What a socket tells the manager.
#[derive(Debug)]
enum Signal {
    Hello(u64),
    /// A `disconnect` with its reason.
    Disconnect(u64, String),
    /// The socket ended: why.
    Died(u64, String),
}

/// A socket the manager runs: its number and how to close it.
struct Socket {
    id: u64,
    close: oneshot::Sender<()>,
}

impl SocketMode {
    /// Keeps a socket open until `stop` (or until Slack turns Socket Mode off).
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        let this = Arc::new(self);
        let (tx, mut rx) = mpsc::channel::<Signal>(16);
        let mut current: Option<Socket> = None;
        let mut next: Option<Socket> = None;
        let mut serial = 0u64;
        let mut failures = 0u32;
        loop {
            if current.is_none() && next.is_none() {
                serial += 1;
                let opened = tokio::select! {
                    _ = crate::stopped(&mut stop) => return,
                    o = this.open(serial, tx.clone()) => o,
                };
                match opened {
                    Ok(s) => next = Some(s),
                    Err(why) => {
                        failures += 1;
                        this.intake.status.failed(why.clone());
                        tracing::warn!(error = %why, "slack: cannot open a Socket Mode connection; trying again");
                        tokio::select! {
                            _ = crate::stopped(&mut stop) => return,
                            _ = tokio::time::sleep(backoff(failures)) => continue,
                        }
                    }
                }
            }
            let signal = tokio::select! {
                _ = crate::stopped(&mut stop) => return,
                s = rx.recv() => s,
            };
            let Some(signal) = signal else { return };
            match signal {
                Signal::Hello(id) if next.as_ref().is_some_and(|s| s.id == id) => {
                    failures = 0;
                    if let Some(old) = current.take() {
                        let _ = old.close.send(());
                        tracing::info!("slack: the new socket is open; the old one is closed");
                    }
                    current = next.take();
                    this.intake.status.polled(herald_store::now_ms());
                }
                // On any socket, new or old: Socket Mode is off; retrying cannot mend it.
                Signal::Disconnect(_, reason) if reason == "link_disabled" => {
                    let why = "Socket Mode is turned off for this app (disconnect: link_disabled); turn it on in the app's settings, or use the Events API (SLACK_SIGNING_SECRET)";
                    tracing::error!("slack: {why}");
                    this.intake.status.failed(why.to_owned());
                    return;
                }
                Signal::Disconnect(id, reason) if current.as_ref().is_some_and(|s| s.id == id) => {
                    tracing::info!(reason = %reason, "slack: Slack asks for a new socket; it is opened before the old one closes");
                    if next.is_none() {
                        serial += 1;
                        let opened = tokio::select! {
                            _ = crate::stopped(&mut stop) => return,
                            o = this.open(serial, tx.clone()) => o,
                        };
                        match opened {
                            Ok(s) => next = Some(s),
                            Err(why) => {
                                tracing::warn!(error = %why, "slack: cannot open the next socket; the old one serves meanwhile")
                            }
                        }
                    }
                }
                Signal::Died(id, why) => {
                    if current.as_ref().is_some_and(|s| s.id == id) {
                        current = None;
                        this.intake.status.restarted();
                        this.intake
                            .status
                            .failed(format!("the socket ended: {why}"));
                        tracing::warn!(error = %why, "slack: the socket ended; a new one is opened");
                        // Sockets that die again before a hello wait longer each time.
                        failures += 1;
                        if failures > 1 {
                            tokio::select! {
                                _ = crate::stopped(&mut stop) => return,
                                _ = tokio::time::sleep(backoff(failures - 1)) => {}
                            }
                        }
                    }
                    if next.as_ref().is_some_and(|s| s.id == id) {
                        next = None;
                        failures += 1;
                        tracing::warn!(error = %why, "slack: a new socket failed before hello");
                        if current.is_none() {
                            tokio::select! {
                                _ = crate::stopped(&mut stop) => return,
                                _ = tokio::time::sleep(backoff(failures)) => {}
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Asks Slack for a socket URL and starts a socket on it.
    async fn open(self: &Arc<Self>, id: u64, tx: mpsc::Sender<Signal>) -> Result<Socket, String> {
        let opened = self
            .app
            .form("apps.connections.open", &[])
            .await
            .map_err(|e| format!("apps.connections.open: {e}"))?;
        let url = opened["url"]
            .as_str()
            .ok_or("apps.connections.open gave no url")?
            .to_owned();
        let (close, closing) = oneshot::channel();
        let this = self.clone();
        tokio::spawn(async move {
            let why = this.socket(id, &url, &tx, closing).await;
            let _ = tx.send(Signal::Died(id, why)).await;
        });
        Ok(Socket { id, close })
    }

    /// One socket: reads envelopes, commits and acknowledges them, pings; ends with
    /// why.
    async fn socket(
        &self,
        id: u64,
        url: &str,
        tx: &mpsc::Sender<Signal>,
        mut closing: oneshot::Receiver<()>,
    ) -> String {
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(MAX_FRAME))
            .max_frame_size(Some(MAX_FRAME));
        let connect = tokio_tungstenite::connect_async_with_config(url, Some(config), false);
        let within = self.pong_within.max(std::time::Duration::from_secs(10));
        let mut ws = match tokio::time::timeout(within, connect).await {
            Ok(Ok((ws, _))) => ws,
            Ok(Err(e)) => return format!("cannot connect: {e}"),
            Err(_) => return "cannot connect: timed out".into(),
        };
        let mut ping = tokio::time::interval(self.ping_every);
        let mut last_pong = tokio::time::Instant::now();
        loop {
            let frame = tokio::select! {
                _ = &mut closing => {
                    let _ = tokio::time::timeout(Duration::from_secs(2), ws.close(None)).await;
                    return "closed".into();
                }
                _ = ping.tick() => {
                    if last_pong.elapsed() > self.pong_within {
                        return format!("no pong for {}s", self.pong_within.as_secs());
                    }
                    if ws.send(Message::Ping(Vec::new().into())).await.is_err() {
                        return "cannot ping".into();
                    }
                    continue;
                }
                f = ws.next() => f,
            };
            let text = match frame {
                Some(Ok(Message::Text(t))) => t,
                Some(Ok(Message::Pong(_))) => {
                    last_pong = tokio::time::Instant::now();
                    continue;
                }
                Some(Ok(Message::Close(c))) => return format!("closed by Slack: {c:?}"),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return e.to_string(),
                None => return "the connection ended".into(),
            };
            // Any frame shows the socket alive.
            last_pong = tokio::time::Instant::now();
            let Ok(envelope) = serde_json::from_str::<Value>(text.as_str()) else {
                tracing::debug!("slack: a frame that is not JSON; ignored");
                continue;
            };
            match envelope["type"].as_str().unwrap_or_default() {
                "hello" => {
                    let _ = tx.send(Signal::Hello(id)).await;
                }
                "disconnect" => {
                    let reason = envelope["reason"].as_str().unwrap_or_default().to_owned();
                    let _ = tx.send(Signal::Disconnect(id, reason)).await;
                }
                _ => {
                    if let Err(why) = self.envelope(&mut ws, &envelope).await {
                        return why;
                    }
                }
            }
        }
    }

    /// An envelope: its payload committed, then acknowledged (not acknowledged when it
    /// cannot be kept: Slack delivers it again).
    async fn envelope<S>(&self, ws: &mut S, envelope: &Value) -> Result<(), String>
    where
        S: futures_util::Sink<Message> + Unpin,
    {
        let Some(envelope_id) = envelope["envelope_id"].as_str() else {
            return Ok(());
        };
        let mut payload = envelope["payload"].clone();
        if envelope["type"] == "slash_commands" {
            payload["type"] = json!("slash_command");
        }
        if let Err(e) = self.intake.commit(&payload).await {
            tracing::error!(error = %e, "slack: cannot store an event; it is not acknowledged, so Slack delivers it again");
            return Ok(());
        }
        let ack = json!({"envelope_id": envelope_id}).to_string();
        ws.send(Message::Text(ack.into()))
            .await
            .map_err(|_| "cannot acknowledge an envelope".to_owned())
    }
}

/// 1 s, doubling, at most [`MAX_BACKOFF`].
fn backoff(failures: u32) -> Duration {
    let secs = 1u64 << failures.saturating_sub(1).min(6);
    Duration::from_secs(secs).min(MAX_BACKOFF)
}

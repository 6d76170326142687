//! A fake Slack on 127.0.0.1: the Web API (`POST /api/<method>`, JSON or form bodies,
//! `{"ok": ...}` answers, 429 with `Retry-After` on demand, a record of every call)
//! and Socket Mode (`apps.connections.open` names a WebSocket here that says `hello`,
//! delivers envelopes, takes acknowledgements, answers pings, and can say
//! `disconnect`, fall silent, or hold envelopes while no socket is open and deliver
//! them again, as Slack does, until they are acknowledged). Events API requests are
//! signed as Slack signs them ([`sign`]).

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// The tokens the fake accepts.
pub const BOT_TOKEN: &str = "xoxb-1-2-test";
pub const APP_TOKEN: &str = "xapp-1-A1-test";
/// The bot's user id.
pub const BOT_USER: &str = "UBOT";

#[derive(Default)]
struct Inner {
    /// Every Web API call: (method, arguments).
    calls: Vec<(String, Value)>,
    next_ts: u64,
    next_envelope: u64,
    /// Envelopes sent and not acknowledged (delivered again on a new socket).
    unacked: Vec<Value>,
    acked: Vec<String>,
    /// The sockets open, newest last: their id and sender.
    sockets: Vec<(u64, mpsc::UnboundedSender<Message>)>,
    next_socket: u64,
    /// Sockets that stop reading (and so answering pings).
    silent: Vec<u64>,
    /// The next this many `chat.postMessage` calls answer 429 with this wait.
    floods: (u32, u64),
    opened: u64,
    /// Files `files.info` names: (id, name, bytes).
    files: Vec<(String, String, Vec<u8>)>,
    uploads: Vec<(String, Vec<u8>)>,
    /// Messages a channel holds for `conversations.history`: (channel, message).
    history: Vec<(String, Value)>,
}

#[derive(Clone, Default)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    base: Arc<Mutex<String>>,
}

/// The fake; point herald at [`FakeSlack::base_url`] (`SLACK_BASE_URL`).
pub struct FakeSlack {
    pub base_url: String,
    shared: Shared,
    _thread: std::thread::JoinHandle<()>,
}

impl FakeSlack {
    pub fn start() -> FakeSlack {
        let shared = Shared::default();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        shared.inner.lock().unwrap().next_ts = now;
        let app = Router::new()
            .route("/api/{method}", axum::routing::post(call))
            .route("/link", axum::routing::get(link))
            .route("/files/{id}", axum::routing::get(file))
            .route("/upload/{id}", axum::routing::post(upload))
            .with_state(shared.clone());
        let (addr, thread) = crate::listen_in_thread(move |listener| async move {
            axum::serve(listener, app).await.unwrap();
        });
        *shared.base.lock().unwrap() = format!("{addr}");
        FakeSlack {
            base_url: format!("http://{addr}/api/"),
            shared,
            _thread: thread,
        }
    }

    fn ts(&self) -> String {
        let mut inner = self.shared.inner.lock().unwrap();
        inner.next_ts += 1;
        format!("{}.000100", inner.next_ts)
    }

    /// A user writes `text` in a DM (`D…`); the message's `ts`.
    pub fn dm(&self, channel: &str, user: &str, text: &str) -> String {
        self.message(channel, "im", user, text, None)
    }

    /// A user writes `text` in channel `C…` (a thread reply when `thread` is given);
    /// the message's `ts`.
    pub fn channel(&self, channel: &str, user: &str, text: &str, thread: Option<&str>) -> String {
        self.message(channel, "channel", user, text, thread)
    }

    fn message(
        &self,
        channel: &str,
        kind: &str,
        user: &str,
        text: &str,
        thread: Option<&str>,
    ) -> String {
        let ts = self.ts();
        let mut event = json!({
            "type": "message", "channel": channel, "channel_type": kind, "user": user,
            "text": text, "ts": ts, "team": "T1",
        });
        if let Some(t) = thread {
            event["thread_ts"] = json!(t);
        }
        self.shared
            .inner
            .lock()
            .unwrap()
            .history
            .push((channel.to_owned(), event.clone()));
        self.event(event);
        ts
    }

    /// A user writes `text` in a DM while Slack cannot reach herald for longer than it
    /// retries: the message is in the channel's history, no envelope comes; its `ts`.
    pub fn missed(&self, channel: &str, user: &str, text: &str) -> String {
        let ts = self.ts();
        let event = json!({"type": "message", "user": user, "text": text, "ts": ts, "team": "T1"});
        self.shared
            .inner
            .lock()
            .unwrap()
            .history
            .push((channel.to_owned(), event));
        ts
    }

    /// Sends an `events_api` envelope carrying `event` (to the newest socket, or held
    /// until one opens).
    pub fn event(&self, event: Value) -> Value {
        let id = self.shared.inner.lock().unwrap().next_envelope + 1;
        let payload = json!({
            "type": "event_callback", "team_id": "T1", "api_app_id": "A1",
            "event": event, "event_id": format!("Ev{id}"), "event_time": 1_700_000_000,
        });
        self.envelope("events_api", payload)
    }

    /// The same event again as a new envelope (a retry after no acknowledgement).
    pub fn envelope(&self, kind: &str, payload: Value) -> Value {
        let mut inner = self.shared.inner.lock().unwrap();
        inner.next_envelope += 1;
        let envelope = json!({
            "envelope_id": format!("env{}", inner.next_envelope),
            "type": kind,
            "payload": payload,
            "accepts_response_payload": false,
            "retry_attempt": 0,
            "retry_reason": "",
        });
        inner.unacked.push(envelope.clone());
        if let Some((_, tx)) = inner.sockets.last() {
            let _ = tx.send(Message::Text(envelope.to_string().into()));
        }
        envelope
    }

    /// `user` presses a button (`action_id`, `value`) under the bot's message `ts` in
    /// `channel` (thread `thread`).
    pub fn click(
        &self,
        channel: &str,
        thread: Option<&str>,
        ts: &str,
        user: &str,
        action: &str,
        value: &str,
    ) {
        let payload = json!({
            "type": "block_actions",
            "user": {"id": user, "username": "ann", "name": "ann", "team_id": "T1"},
            "api_app_id": "A1",
            "container": {"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": false, "thread_ts": thread},
            "trigger_id": format!("trig{ts}{user}"),
            "channel": {"id": channel, "name": "c"},
            "message": {"type": "message", "ts": ts, "text": "approval"},
            "actions": [{"action_id": action, "block_id": "b", "type": "button", "value": value, "action_ts": format!("{}.9", self.ts())}],
        });
        self.envelope("interactive", payload);
    }

    /// Sends `disconnect` with `reason` on the newest socket.
    pub fn disconnect(&self, reason: &str) {
        let inner = self.shared.inner.lock().unwrap();
        if let Some((_, tx)) = inner.sockets.last() {
            let frame =
                json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake"}});
            let _ = tx.send(Message::Text(frame.to_string().into()));
        }
    }

    /// The newest socket stops reading (no pongs, no acknowledgements), as a socket
    /// that died without closing.
    pub fn silence(&self) {
        let mut inner = self.shared.inner.lock().unwrap();
        if let Some(id) = inner.sockets.last().map(|s| s.0) {
            inner.silent.push(id);
        }
    }

    /// How many sockets are open, and how many were ever opened.
    pub fn sockets(&self) -> (usize, u64) {
        let inner = self.shared.inner.lock().unwrap();
        (inner.sockets.len(), inner.opened)
    }

    /// The envelope ids acknowledged.
    pub fn acked(&self) -> Vec<String> {
        self.shared.inner.lock().unwrap().acked.clone()
    }

    /// The next `n` `chat.postMessage` calls answer 429 with `Retry-After: secs`.
    pub fn flood(&self, n: u32, secs: u64) {
        self.shared.inner.lock().unwrap().floods = (n, secs);
    }

    /// A file users can share: its id.
    pub fn add_file(&self, id: &str, name: &str, bytes: &[u8]) {
        self.shared.inner.lock().unwrap().files.push((
            id.to_owned(),
            name.to_owned(),
            bytes.to_vec(),
        ));
    }

    /// Files uploaded: (name, bytes).
    pub fn uploads(&self) -> Vec<(String, Vec<u8>)> {
        self.shared.inner.lock().unwrap().uploads.clone()
    }

    /// Every Web API call, in order.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.shared.inner.lock().unwrap().calls.clone()
    }

    /// The texts posted to `channel` (thread `thread` when given), in order.
    pub fn posted(&self, channel: &str, thread: Option<&str>) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|(m, b)| {
                m == "chat.postMessage"
                    && b["channel"] == channel
                    && thread.is_none_or(|t| b["thread_ts"] == t)
                    && b.get("_refused").is_none()
            })
            .map(|(_, b)| b["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Waits until `channel` (thread `thread`) got `n` messages: their texts.
    pub fn wait_posted(
        &self,
        channel: &str,
        thread: Option<&str>,
        n: usize,
        within: Duration,
    ) -> Vec<String> {
        let end = std::time::Instant::now() + within;
        loop {
            let got = self.posted(channel, thread);
            if got.len() >= n {
                return got;
            }
            assert!(
                std::time::Instant::now() < end,
                "{channel} got {} of {n} messages: {got:?}; calls: {:?}",
                got.len(),
                self.calls()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits for a call of `method` matching `pred`.
    pub fn wait_call(
        &self,
        method: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let end = std::time::Instant::now() + within;
        loop {
            if let Some((_, b)) = self
                .calls()
                .into_iter()
                .find(|(m, b)| m == method && pred(b))
            {
                return b;
            }
            assert!(
                std::time::Instant::now() < end,
                "no {method} call; calls: {:?}",
                self.calls()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

/// `v0=<hex HMAC-SHA256 of "v0:<ts>:<body>">`, as Slack signs a request.
pub fn sign(secret: &str, ts: &str, body: &[u8]) -> String {
    let mut signed = format!("v0:{ts}:").into_bytes();
    signed.extend_from_slice(body);
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&signed);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// Reads a call's arguments: a JSON body, else a form.
fn arguments(headers: &HeaderMap, body: &[u8]) -> Value {
    let json = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("application/json"));
    if json {
        return serde_json::from_slice(body).unwrap_or(Value::Null);
    }
    let map: Map<String, Value> = form_urlencoded::parse(body)
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect();
    Value::Object(map)
}

async fn call(
    State(s): State<Shared>,
    Path(method): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut args = arguments(&headers, &body);
    let app_call = method == "apps.connections.open";
    let token = if app_call { APP_TOKEN } else { BOT_TOKEN };
    if auth != format!("Bearer {token}") {
        return axum::Json(json!({"ok": false, "error": "invalid_auth"})).into_response();
    }
    let base = s.base.lock().unwrap().clone();
    let mut inner = s.inner.lock().unwrap();
    if method == "chat.postMessage" && inner.floods.0 > 0 {
        inner.floods.0 -= 1;
        let wait = inner.floods.1;
        args["_refused"] = json!(true);
        inner.calls.push((method, args));
        let mut resp = (
            StatusCode::TOO_MANY_REQUESTS,
            axum::Json(json!({"ok": false, "error": "ratelimited"})),
        )
            .into_response();
        resp.headers_mut()
            .insert("retry-after", HeaderValue::from(wait));
        return resp;
    }
    inner.calls.push((method.clone(), args.clone()));
    let answer = match method.as_str() {
        "auth.test" => {
            json!({"ok": true, "user_id": BOT_USER, "user": "herald", "team_id": "T1", "team": "Test", "bot_id": "B1"})
        }
        "apps.connections.open" => {
            inner.opened += 1;
            json!({"ok": true, "url": format!("ws://{base}/link?n={}", inner.opened)})
        }
        "chat.postMessage" => {
            inner.next_ts += 1;
            let ts = format!("{}.000200", inner.next_ts);
            if let Some(last) = inner.calls.last_mut() {
                last.1["_ts"] = json!(ts);
            }
            json!({"ok": true, "channel": args["channel"], "ts": ts})
        }
        "files.info" => {
            let id = args["file"].as_str().unwrap_or_default();
            match inner.files.iter().find(|f| f.0 == id) {
                Some((id, name, bytes)) => json!({"ok": true, "file": {
                    "id": id, "name": name, "size": bytes.len(), "mimetype": "text/plain",
                    "url_private_download": format!("http://{base}/files/{id}"),
                }}),
                None => json!({"ok": false, "error": "file_not_found"}),
            }
        }
        "files.getUploadURLExternal" => {
            let name = args["filename"].as_str().unwrap_or("f").to_owned();
            json!({"ok": true, "upload_url": format!("http://{base}/upload/{name}"), "file_id": format!("F{}", inner.calls.len())})
        }
        "conversations.history" => {
            let channel = args["channel"].as_str().unwrap_or_default();
            let oldest: f64 = args["oldest"]
                .as_str()
                .and_then(|o| o.parse().ok())
                .unwrap_or(0.0);
            let mut messages: Vec<Value> = inner
                .history
                .iter()
                .filter(|(c, m)| {
                    c == channel
                        && m["ts"]
                            .as_str()
                            .and_then(|t| t.parse::<f64>().ok())
                            .unwrap_or(0.0)
                            > oldest
                })
                .map(|(_, m)| m.clone())
                .collect();
            messages.reverse();
            json!({"ok": true, "messages": messages, "has_more": false})
        }
        _ => json!({"ok": true}),
    };
    axum::Json(answer).into_response()
}

async fn file(State(s): State<Shared>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    if headers.get("authorization").and_then(|v| v.to_str().ok())
        != Some(&format!("Bearer {BOT_TOKEN}"))
    {
        return StatusCode::FORBIDDEN.into_response();
    }
    let inner = s.inner.lock().unwrap();
    match inner.files.iter().find(|f| f.0 == id) {
        Some((_, _, bytes)) => bytes.clone().into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn upload(
    State(s): State<Shared>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> StatusCode {
    s.inner.lock().unwrap().uploads.push((name, body.to_vec()));
    StatusCode::OK
}

async fn link(State(s): State<Shared>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| serve_socket(s, socket))
}

async fn serve_socket(s: Shared, mut socket: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let id = {
        let mut inner = s.inner.lock().unwrap();
        inner.next_socket += 1;
        let id = inner.next_socket;
        inner.sockets.push((id, tx.clone()));
        let _ = tx.send(Message::Text(
            json!({"type": "hello", "num_connections": inner.sockets.len()})
                .to_string()
                .into(),
        ));
        // What was not acknowledged is delivered again.
        for e in inner.unacked.clone() {
            let mut again = e;
            again["retry_attempt"] = json!(1);
            again["retry_reason"] = json!("timeout");
            let _ = tx.send(Message::Text(again.to_string().into()));
        }
        id
    };
    loop {
        let silent = s.inner.lock().unwrap().silent.contains(&id);
        if silent {
            // A dead peer: neither reads nor writes (no pongs, no acknowledgements)
            // until it is long gone.
            tokio::time::sleep(Duration::from_secs(60)).await;
            break;
        }
        tokio::select! {
            out = rx.recv() => match out {
                Some(m) => if socket.send(m).await.is_err() { break },
                None => break,
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(t))) => {
                    if let Ok(ack) = serde_json::from_str::<Value>(t.as_str())
                        && let Some(env) = ack["envelope_id"].as_str() {
                        let mut inner = s.inner.lock().unwrap();
                        inner.acked.push(env.to_owned());
                        inner.unacked.retain(|e| e["envelope_id"] != env);
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
    s.inner.lock().unwrap().sockets.retain(|(i, _)| *i != id);
}

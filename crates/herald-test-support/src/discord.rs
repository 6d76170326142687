//! A fake Discord on 127.0.0.1: the REST API (`/api/v10/...`, `Authorization: Bot
//! <token>`, 429 with `retry_after` on demand, a record of every call) and the gateway
//! WebSocket (Hello, Identify → READY, Heartbeat → ACK, Resume → the missed events
//! replayed then RESUMED, Reconnect and Invalid Session on demand, a zombie that stops
//! acknowledging heartbeats, close 4014 for a refused intent). Every dispatch is kept
//! in the session's log with its sequence number, so a resume replays what the bot
//! did not see; a session can be expired (a stop longer than Discord keeps it).

use axum::Router;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

pub const TOKEN: &str = "MTIz.fake.discord-token";
pub const BOT_ID: &str = "900000000000000001";
pub const GUILD: &str = "700000000000000001";

#[derive(Default)]
struct Inner {
    calls: Vec<(String, String, Value)>,
    next_id: u64,
    /// The session's dispatches: (seq, frame).
    log: Vec<(u64, Value)>,
    seq: u64,
    session: Option<String>,
    /// The open connection's sender (one at a time is what a bot should keep).
    live: Vec<(u64, mpsc::UnboundedSender<Message>)>,
    next_conn: u64,
    most_live: usize,
    identifies: u64,
    resumes: u64,
    /// Connections that stop acknowledging heartbeats.
    silent: Vec<u64>,
    /// The next this many message posts answer 429 with this wait (seconds).
    floods: (u32, f64),
    /// Identify is refused with close 4014.
    refuse_intents: bool,
    /// Channels: id → (type, parent).
    channels: HashMap<String, (u64, Option<String>)>,
    /// Messages in channels, for history reads: (channel, message).
    history: Vec<(String, Value)>,
    heartbeat_ms: u64,
    /// The application's Interactions Endpoint URL (`GET /applications/@me`).
    endpoint: Option<String>,
}

#[derive(Clone, Default)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    addr: Arc<Mutex<String>>,
}

/// The fake; point herald at [`FakeDiscord::base_url`] (`DISCORD_BASE_URL`).
pub struct FakeDiscord {
    pub base_url: String,
    shared: Shared,
    _thread: std::thread::JoinHandle<()>,
}

impl FakeDiscord {
    pub fn start() -> FakeDiscord {
        let shared = Shared::default();
        {
            let mut inner = shared.inner.lock().unwrap();
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64;
            inner.next_id = (now_ms - 1_420_070_400_000) << 22;
            inner.heartbeat_ms = 400;
        }
        let app = Router::new()
            .route("/gw", axum::routing::get(gateway))
            .route("/gw/", axum::routing::get(gateway))
            .route("/api/v10/{*path}", axum::routing::any(rest))
            .route("/cdn/{name}", axum::routing::get(cdn))
            .with_state(shared.clone());
        let (addr, thread) = crate::listen_in_thread(move |listener| async move {
            axum::serve(listener, app).await.unwrap();
        });
        *shared.addr.lock().unwrap() = addr.to_string();
        FakeDiscord {
            base_url: format!("http://{addr}/api/v10"),
            shared,
            _thread: thread,
        }
    }

    fn id(&self) -> String {
        next_id(&mut self.shared.inner.lock().unwrap())
    }

    /// Declares a server text channel (type 0).
    pub fn text_channel(&self, id: &str) {
        self.shared
            .inner
            .lock()
            .unwrap()
            .channels
            .insert(id.into(), (0, None));
    }

    /// A user writes `content` in DM channel `channel`; the message's id.
    pub fn dm(&self, channel: &str, user: &str, content: &str) -> String {
        self.shared
            .inner
            .lock()
            .unwrap()
            .channels
            .insert(channel.into(), (1, None));
        self.message(channel, user, content, None)
    }

    /// A user writes `content` in DM channel `channel` with a file (served by the fake
    /// CDN, its contents `contents of <name>`); the message's id.
    pub fn dm_with_file(
        &self,
        channel: &str,
        user: &str,
        content: &str,
        name: &str,
        mime: &str,
    ) -> String {
        self.shared
            .inner
            .lock()
            .unwrap()
            .channels
            .insert(channel.into(), (1, None));
        let id = self.id();
        let addr = self.shared.addr.lock().unwrap().clone();
        let d = json!({
            "id": id, "channel_id": channel, "type": 0, "content": content,
            "author": {"id": user, "username": format!("user{user}")},
            "mentions": [],
            "attachments": [{"id": "1", "filename": name, "size": 20, "content_type": mime,
                             "url": format!("http://{addr}/cdn/{name}")}],
        });
        self.dispatch("MESSAGE_CREATE", d);
        id
    }

    /// A user writes `content` in server channel `channel` (mentions of the bot as
    /// `<@id>` are listed in `mentions`); the message's id.
    pub fn guild(&self, channel: &str, user: &str, content: &str) -> String {
        self.message(channel, user, content, Some(GUILD))
    }

    fn message(&self, channel: &str, user: &str, content: &str, guild: Option<&str>) -> String {
        let id = self.id();
        let mentions: Vec<Value> = match content.contains(&format!("<@{BOT_ID}>")) {
            true => vec![json!({"id": BOT_ID, "username": "herald", "bot": true})],
            false => vec![],
        };
        let mut d = json!({
            "id": id, "channel_id": channel, "type": 0, "content": content,
            "author": {"id": user, "username": format!("user{user}"), "global_name": "Ann"},
            "mentions": mentions, "attachments": [],
            "timestamp": "2026-12-07T00:00:00+00:00",
        });
        if let Some(g) = guild {
            d["guild_id"] = json!(g);
            d["member"] = json!({"roles": []});
        }
        self.shared
            .inner
            .lock()
            .unwrap()
            .history
            .push((channel.to_owned(), d.clone()));
        self.dispatch("MESSAGE_CREATE", d);
        id
    }

    /// A message Discord neither sends nor replays (sent while the bot's session was
    /// gone): only in the channel's history; its id.
    pub fn missed(&self, channel: &str, user: &str, content: &str) -> String {
        let id = self.id();
        let d = json!({
            "id": id, "channel_id": channel, "type": 0, "content": content,
            "author": {"id": user, "username": format!("user{user}")},
            "mentions": [], "attachments": [],
        });
        self.shared
            .inner
            .lock()
            .unwrap()
            .history
            .push((channel.to_owned(), d));
        id
    }

    /// `user` presses the button `custom_id` under the bot's message `message` in
    /// `channel` (a DM when `guild` is false).
    pub fn press(&self, channel: &str, message: &str, user: &str, custom_id: &str, guild: bool) {
        let id = self.id();
        let person = json!({"id": user, "username": format!("user{user}"), "global_name": "Ann"});
        let mut d = json!({
            "id": id, "application_id": "1", "type": 3, "token": format!("tok{id}"),
            "channel_id": channel, "message": {"id": message, "channel_id": channel},
            "data": {"custom_id": custom_id, "component_type": 2}, "version": 1,
        });
        match guild {
            true => {
                d["guild_id"] = json!(GUILD);
                d["member"] = json!({"roles": [], "user": person});
            }
            false => d["user"] = person,
        }
        self.dispatch("INTERACTION_CREATE", d);
    }

    /// `user` runs the slash command `/name args` in DM channel `channel`.
    pub fn command(&self, channel: &str, user: &str, name: &str, args: &str) {
        let id = self.id();
        let d = json!({
            "id": id, "application_id": "1", "type": 2, "token": format!("tok{id}"),
            "channel_id": channel, "user": {"id": user, "username": format!("user{user}")},
            "data": {"id": "9", "name": name, "type": 1,
                     "options": [{"name": "args", "type": 3, "value": args}]},
            "version": 1,
        });
        self.dispatch("INTERACTION_CREATE", d);
    }

    /// Appends a dispatch to the session's log and sends it on the open connection.
    fn dispatch(&self, t: &str, d: Value) {
        let mut inner = self.shared.inner.lock().unwrap();
        inner.seq += 1;
        let frame = json!({"op": 0, "t": t, "s": inner.seq, "d": d});
        let seq = inner.seq;
        inner.log.push((seq, frame.clone()));
        if let Some((_, tx)) = inner.live.last() {
            let _ = tx.send(Message::Text(frame.to_string().into()));
        }
    }

    /// Sends Reconnect (op 7) on the open connection.
    pub fn reconnect(&self) {
        self.send_op(json!({"op": 7, "d": null}));
    }

    fn send_op(&self, frame: Value) {
        let inner = self.shared.inner.lock().unwrap();
        if let Some((_, tx)) = inner.live.last() {
            let _ = tx.send(Message::Text(frame.to_string().into()));
        }
    }

    /// The open connection stops acknowledging heartbeats (a zombie).
    pub fn silence(&self) {
        let mut inner = self.shared.inner.lock().unwrap();
        if let Some(id) = inner.live.last().map(|l| l.0) {
            inner.silent.push(id);
        }
    }

    /// Sets the application's Interactions Endpoint URL.
    pub fn set_interactions_endpoint(&self, url: &str) {
        self.shared.inner.lock().unwrap().endpoint = Some(url.to_owned());
    }

    /// The session is gone (a stop longer than Discord keeps it): a resume is refused.
    pub fn expire_session(&self) {
        self.shared.inner.lock().unwrap().session = None;
    }

    /// Identify is refused with close 4014 (an intent not enabled in the portal).
    pub fn refuse_intents(&self, on: bool) {
        self.shared.inner.lock().unwrap().refuse_intents = on;
    }

    /// The next `n` message posts answer 429 with `retry_after: secs`.
    pub fn flood(&self, n: u32, secs: f64) {
        self.shared.inner.lock().unwrap().floods = (n, secs);
    }

    /// (connections open now, most ever open at once, identifies, resumes).
    pub fn connections(&self) -> (usize, usize, u64, u64) {
        let inner = self.shared.inner.lock().unwrap();
        (
            inner.live.len(),
            inner.most_live,
            inner.identifies,
            inner.resumes,
        )
    }

    /// Every REST call: (method, path, body).
    pub fn calls(&self) -> Vec<(String, String, Value)> {
        self.shared.inner.lock().unwrap().calls.clone()
    }

    /// The message texts posted to `channel`, in order.
    pub fn posted(&self, channel: &str) -> Vec<String> {
        let path = format!("/channels/{channel}/messages");
        self.calls()
            .into_iter()
            .filter(|(m, p, b)| m == "POST" && *p == path && b.get("_refused").is_none())
            .map(|(_, _, b)| b["content"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Waits until `channel` got `n` messages: their texts.
    pub fn wait_posted(&self, channel: &str, n: usize, within: Duration) -> Vec<String> {
        let end = std::time::Instant::now() + within;
        loop {
            let got = self.posted(channel);
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

    /// Waits for a REST call `method path…` whose body matches `pred`.
    pub fn wait_call(
        &self,
        method: &str,
        path_start: &str,
        within: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> (String, Value) {
        let end = std::time::Instant::now() + within;
        loop {
            let found = self
                .calls()
                .into_iter()
                .find(|(m, p, b)| m == method && p.starts_with(path_start) && pred(b));
            if let Some((_, p, b)) = found {
                return (p, b);
            }
            assert!(
                std::time::Instant::now() < end,
                "no {method} {path_start}; calls: {:?}",
                self.calls()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

fn next_id(inner: &mut Inner) -> String {
    inner.next_id += 1 << 22;
    inner.next_id.to_string()
}

async fn cdn(Path(name): Path<String>) -> Vec<u8> {
    format!("contents of {name}").into_bytes()
}

async fn rest(
    State(s): State<Shared>,
    method: axum::http::Method,
    Path(path): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(&format!("Bot {TOKEN}")) {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"message": "401: Unauthorized", "code": 0})),
        )
            .into_response();
    }
    let path = format!("/{path}");
    let mut args: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if args.is_null() && !body.is_empty() {
        // A multipart message with a file: its bytes as text.
        args = json!({"multipart": String::from_utf8_lossy(&body)});
    }
    let addr = s.addr.lock().unwrap().clone();
    let mut inner = s.inner.lock().unwrap();
    let method = method.as_str().to_owned();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let posting =
        method == "POST" && parts.len() == 3 && parts[0] == "channels" && parts[2] == "messages";
    if posting && inner.floods.0 > 0 {
        inner.floods.0 -= 1;
        let wait = inner.floods.1;
        args["_refused"] = json!(true);
        inner.calls.push((method, path, args));
        let mut resp = (
            StatusCode::TOO_MANY_REQUESTS,
            axum::Json(json!({"message": "You are being rate limited.", "retry_after": wait, "global": false})),
        )
            .into_response();
        let h = resp.headers_mut();
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert("x-ratelimit-reset-after", wait.to_string().parse().unwrap());
        return resp;
    }
    inner
        .calls
        .push((method.clone(), path.clone(), args.clone()));
    let answer = match (method.as_str(), parts.as_slice()) {
        ("GET", ["gateway", "bot"]) => json!({"url": format!("ws://{addr}/gw"), "shards": 1}),
        ("GET", ["users", "@me"]) => json!({"id": BOT_ID, "username": "herald", "bot": true}),
        ("GET", ["applications", "@me"]) => {
            json!({"id": "1", "interactions_endpoint_url": inner.endpoint})
        }
        ("GET", ["channels", id]) => match inner.channels.get(*id) {
            Some((kind, parent)) => {
                json!({"id": id, "type": kind, "guild_id": if *kind == 1 { Value::Null } else { json!(GUILD) }, "parent_id": parent})
            }
            None => {
                return (
                    StatusCode::NOT_FOUND,
                    axum::Json(json!({"message": "Unknown Channel", "code": 10003})),
                )
                    .into_response();
            }
        },
        ("GET", ["channels", id, "messages"]) => {
            let after: u64 = query.get("after").and_then(|a| a.parse().ok()).unwrap_or(0);
            let mut found: Vec<Value> = inner
                .history
                .iter()
                .filter(|(c, m)| {
                    c == id
                        && m["id"]
                            .as_str()
                            .and_then(|i| i.parse::<u64>().ok())
                            .unwrap_or(0)
                            > after
                })
                .map(|(_, m)| {
                    let mut m = m.clone();
                    // REST messages carry no guild_id.
                    if let Some(o) = m.as_object_mut() {
                        o.remove("guild_id");
                        o.remove("member");
                    }
                    m
                })
                .collect();
            found.reverse();
            json!(found)
        }
        ("POST", ["channels", c, "messages"]) => {
            let id = next_id(&mut inner);
            if let Some(last) = inner.calls.last_mut() {
                last.2["_id"] = json!(id);
            }
            json!({"id": id, "channel_id": c})
        }
        ("POST", ["channels", c, "messages", m, "threads"]) => {
            inner
                .channels
                .insert((*m).to_owned(), (11, Some((*c).to_owned())));
            json!({"id": m, "type": 11, "parent_id": c, "guild_id": GUILD})
        }
        ("PATCH", ["channels", c, "messages", m]) => json!({"id": m, "channel_id": c}),
        ("PUT", ["applications", _, "commands"]) => args.clone(),
        _ => return StatusCode::NO_CONTENT.into_response(),
    };
    axum::Json(answer).into_response()
}

async fn gateway(State(s): State<Shared>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| serve_gateway(s, socket))
}

async fn serve_gateway(s: Shared, mut socket: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
    let (id, heartbeat) = {
        let mut inner = s.inner.lock().unwrap();
        inner.next_conn += 1;
        let id = inner.next_conn;
        inner.live.push((id, tx.clone()));
        inner.most_live = inner.most_live.max(inner.live.len());
        (id, inner.heartbeat_ms)
    };
    let hello = json!({"op": 10, "d": {"heartbeat_interval": heartbeat}});
    let _ = socket.send(Message::Text(hello.to_string().into())).await;
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(Message::Close(c)) => { let _ = socket.send(Message::Close(c)).await; break; }
                Some(m) => if socket.send(m).await.is_err() { break },
                None => break,
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(t))) => {
                    let Ok(frame) = serde_json::from_str::<Value>(t.as_str()) else { continue };
                    if let Some(reply) = answer(&s, id, &frame) {
                        for m in reply {
                            let _ = tx.send(m);
                        }
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    s.inner.lock().unwrap().live.retain(|(i, _)| *i != id);
}

/// The gateway's answers to a frame from the bot.
fn answer(s: &Shared, conn: u64, frame: &Value) -> Option<Vec<Message>> {
    let mut inner = s.inner.lock().unwrap();
    let text = |v: Value| Message::Text(v.to_string().into());
    match frame["op"].as_u64()? {
        1 if inner.silent.contains(&conn) => None,
        1 => Some(vec![text(json!({"op": 11}))]),
        2 => {
            if inner.refuse_intents {
                return Some(vec![Message::Close(Some(CloseFrame {
                    code: 4014,
                    reason: "Disallowed intent(s).".into(),
                }))]);
            }
            inner.identifies += 1;
            let session = format!("sess{}", inner.identifies);
            inner.session = Some(session.clone());
            // A new session: only what comes from now on.
            inner.log.clear();
            inner.seq += 1;
            let addr = s.addr.lock().unwrap().clone();
            let ready = json!({"op": 0, "t": "READY", "s": inner.seq, "d": {
                "v": 10, "session_id": session, "resume_gateway_url": format!("ws://{addr}/gw"),
                "user": {"id": BOT_ID, "username": "herald", "bot": true}, "guilds": [],
            }});
            Some(vec![text(ready)])
        }
        6 => {
            let asked = frame["d"]["session_id"].as_str().unwrap_or_default();
            if inner.session.as_deref() != Some(asked) {
                return Some(vec![text(json!({"op": 9, "d": false}))]);
            }
            inner.resumes += 1;
            let from = frame["d"]["seq"].as_u64().unwrap_or(0);
            let mut out: Vec<Message> = inner
                .log
                .iter()
                .filter(|(seq, _)| *seq > from)
                .map(|(_, f)| text(f.clone()))
                .collect();
            inner.seq += 1;
            out.push(text(
                json!({"op": 0, "t": "RESUMED", "s": inner.seq, "d": {}}),
            ));
            Some(out)
        }
        _ => None,
    }
}

//! A fake Telegram Bot API on 127.0.0.1: `POST /bot<token>/<method>` with JSON bodies
//! answered in the Bot API's envelope, `getUpdates` with its offset (confirming what is
//! below it) and long-poll timeout, 429 with `retry_after` on demand, and a record of
//! every call.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The token the fake accepts.
pub const TOKEN: &str = "123456:TEST-token";

#[derive(Default)]
struct Inner {
    /// Updates not yet confirmed by an offset.
    pending: Vec<Value>,
    next_update: i64,
    next_message: i64,
    /// Every call but `getUpdates`: (method, body).
    calls: Vec<(String, Value)>,
    /// The next this many `sendMessage` calls answer 429 with this wait.
    floods: (u32, u64),
    /// `getUpdates` answers 409 (another poller) while set.
    conflict: bool,
    polls: u64,
    /// Files `getFile` names, by path.
    files: std::collections::HashMap<String, Vec<u8>>,
    /// Paths of files by id (a photo's is `photos/<id>.jpg` when not here).
    file_paths: std::collections::HashMap<String, String>,
    /// The next this many `editMessageText` calls answer 429 with this wait.
    edit_floods: (u32, u64),
}

#[derive(Clone, Default)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    arrived: Arc<tokio::sync::Notify>,
}

/// The fake; point herald at [`FakeTelegram::base_url`] (`extra.base_url`).
pub struct FakeTelegram {
    pub base_url: String,
    shared: Shared,
    _thread: std::thread::JoinHandle<()>,
}

impl FakeTelegram {
    pub fn start() -> FakeTelegram {
        let shared = Shared::default();
        shared.inner.lock().unwrap().next_update = 1000;
        let app = Router::new()
            .route("/{bot}/{method}", axum::routing::post(call))
            .route("/file/{bot}/{*path}", axum::routing::get(serve_file))
            .with_state(shared.clone());
        let (addr, thread) = crate::listen_in_thread(move |listener| async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeTelegram {
            base_url: format!("http://{addr}/bot"),
            shared,
            _thread: thread,
        }
    }

    /// A user writes `text` in a private chat; its update id.
    pub fn dm(&self, user: i64, text: &str) -> i64 {
        self.message(
            json!({"id": user, "type": "private", "first_name": "U"}),
            user,
            text,
        )
    }

    /// A user writes `text` in group `chat`; its update id.
    pub fn group(&self, chat: i64, user: i64, text: &str) -> i64 {
        self.message(
            json!({"id": chat, "type": "supergroup", "title": "G"}),
            user,
            text,
        )
    }

    fn message(&self, chat: Value, user: i64, text: &str) -> i64 {
        let mut entities = Vec::new();
        for (at, word) in text.split(' ').scan(0usize, |pos, w| {
            let at = *pos;
            *pos += w.encode_utf16().count() + 1;
            Some((at, w))
        }) {
            let kind = match word.chars().next() {
                Some('@') => "mention",
                Some('/') if at == 0 => "bot_command",
                _ => continue,
            };
            entities
                .push(json!({"type": kind, "offset": at, "length": word.encode_utf16().count()}));
        }
        let mut inner = self.shared.inner.lock().unwrap();
        inner.next_message += 1;
        let message = json!({
            "message_id": inner.next_message,
            "date": 1_700_000_000,
            "chat": chat,
            "from": {"id": user, "is_bot": false, "first_name": "U", "username": format!("u{user}")},
            "text": text,
            "entities": entities,
        });
        drop(inner);
        self.push_update(json!({"message": message}))
    }

    /// A user sends a photo (`bytes`, a JPEG) with `caption` in private; its update id.
    pub fn photo(&self, user: i64, bytes: &[u8], caption: &str) -> i64 {
        let mut inner = self.shared.inner.lock().unwrap();
        inner.next_message += 1;
        let file_id = format!("photo{}", inner.next_message);
        inner
            .files
            .insert(format!("photos/{file_id}.jpg"), bytes.to_vec());
        let message = json!({
            "message_id": inner.next_message,
            "date": 1_700_000_000,
            "chat": {"id": user, "type": "private"},
            "from": {"id": user, "is_bot": false, "first_name": "U"},
            "caption": caption,
            "photo": [
                {"file_id": format!("{file_id}-small"), "file_unique_id": "s", "width": 90, "height": 90, "file_size": 10},
                {"file_id": file_id, "file_unique_id": "b", "width": 800, "height": 600, "file_size": bytes.len()},
            ],
        });
        drop(inner);
        self.push_update(json!({"message": message}))
    }

    /// `user` presses a button whose data is `data` under the bot's message
    /// `message_id` in private chat `user`; the update's id.
    pub fn click(&self, user: i64, message_id: i64, data: &str) -> i64 {
        let query = json!({
            "id": format!("cq{message_id}{user}"),
            "from": {"id": user, "is_bot": false, "first_name": "U"},
            "message": {
                "message_id": message_id,
                "date": 1_700_000_000,
                "chat": {"id": user, "type": "private"},
                "from": {"id": 123456, "is_bot": true, "first_name": "Herald"},
                "text": "approval",
            },
            "chat_instance": "1",
            "data": data,
        });
        self.push_update(json!({"callback_query": query}))
    }

    /// The sendMessage calls to `chat` with buttons: (message id, the buttons' data).
    pub fn button_messages(&self, chat: i64) -> Vec<(i64, Vec<String>)> {
        self.calls()
            .into_iter()
            .filter(|(m, b)| {
                m == "sendMessage" && b["chat_id"] == json!(chat) && b.get("reply_markup").is_some()
            })
            .map(|(_, b)| {
                let data = b["reply_markup"]["inline_keyboard"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|row| row.as_array().cloned().unwrap_or_default())
                    .filter_map(|button| button["callback_data"].as_str().map(str::to_owned))
                    .collect();
                (b["_message_id"].as_i64().unwrap_or(0), data)
            })
            .collect()
    }

    /// Adds an update (its `update_id` set here); its id.
    pub fn push_update(&self, mut update: Value) -> i64 {
        let mut inner = self.shared.inner.lock().unwrap();
        inner.next_update += 1;
        let id = inner.next_update;
        update["update_id"] = json!(id);
        inner.pending.push(update);
        drop(inner);
        self.shared.arrived.notify_waiters();
        id
    }

    /// The same update again (a duplicate delivery).
    pub fn repeat(&self, update_id: i64, update: Value) {
        let mut update = update;
        update["update_id"] = json!(update_id);
        self.shared.inner.lock().unwrap().pending.push(update);
        self.shared.arrived.notify_waiters();
    }

    /// A user sends a document (`name`, `mime`, `bytes`) with `caption` in private;
    /// its update id. `kind`: `document`, `voice`, `audio` or `video`.
    pub fn file(
        &self,
        user: i64,
        kind: &str,
        name: &str,
        mime: &str,
        bytes: &[u8],
        caption: &str,
    ) -> i64 {
        let mut inner = self.shared.inner.lock().unwrap();
        inner.next_message += 1;
        let file_id = format!("{kind}{}", inner.next_message);
        let ext = name.rsplit('.').next().unwrap_or("bin");
        let path = format!("{kind}s/file_{}.{ext}", inner.next_message);
        inner.files.insert(path.clone(), bytes.to_vec());
        inner.file_paths.insert(file_id.clone(), path);
        let mut meta = json!({"file_id": file_id, "file_unique_id": "d", "mime_type": mime, "file_size": bytes.len()});
        if kind == "document" || kind == "audio" {
            meta["file_name"] = json!(name);
        }
        let mut message = json!({
            "message_id": inner.next_message,
            "date": 1_700_000_000,
            "chat": {"id": user, "type": "private"},
            "from": {"id": user, "is_bot": false, "first_name": "U"},
            "caption": caption,
        });
        message[kind] = meta;
        drop(inner);
        self.push_update(json!({"message": message}))
    }

    /// The next `n` editMessageText calls answer 429 with `retry_after: secs`.
    pub fn flood_edits(&self, n: u32, secs: u64) {
        self.shared.inner.lock().unwrap().edit_floods = (n, secs);
    }

    /// The next `n` sendMessage calls answer 429 with `retry_after: secs`.
    pub fn flood(&self, n: u32, secs: u64) {
        self.shared.inner.lock().unwrap().floods = (n, secs);
    }

    /// Whether `getUpdates` answers 409 Conflict.
    pub fn conflict(&self, on: bool) {
        self.shared.inner.lock().unwrap().conflict = on;
    }

    /// Every call but `getUpdates`, in order.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.shared.inner.lock().unwrap().calls.clone()
    }

    /// The texts sent to `chat`, in order.
    pub fn texts_to(&self, chat: i64) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter(|(m, b)| m == "sendMessage" && b["chat_id"] == json!(chat))
            .filter_map(|(_, b)| b["text"].as_str().map(str::to_owned))
            .collect()
    }

    /// Updates not yet confirmed.
    pub fn pending(&self) -> usize {
        self.shared.inner.lock().unwrap().pending.len()
    }

    /// `getUpdates` calls answered.
    pub fn polls(&self) -> u64 {
        self.shared.inner.lock().unwrap().polls
    }

    /// Waits until `chat` got `n` texts (panics after `within`).
    pub fn wait_texts(&self, chat: i64, n: usize, within: Duration) -> Vec<String> {
        let until = std::time::Instant::now() + within;
        loop {
            let texts = self.texts_to(chat);
            if texts.len() >= n {
                return texts;
            }
            assert!(
                std::time::Instant::now() < until,
                "chat {chat} got {texts:?}, waited for {n}; calls: {:?}",
                self.calls()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn ok(result: Value) -> (StatusCode, axum::Json<Value>) {
    (
        StatusCode::OK,
        axum::Json(json!({"ok": true, "result": result})),
    )
}

fn refused(code: u16, description: &str, params: Option<Value>) -> (StatusCode, axum::Json<Value>) {
    let mut body = json!({"ok": false, "error_code": code, "description": description});
    if let Some(p) = params {
        body["parameters"] = p;
    }
    (StatusCode::from_u16(code).unwrap(), axum::Json(body))
}

async fn call(
    State(shared): State<Shared>,
    Path((bot, method)): Path<(String, String)>,
    request: axum::extract::Request,
) -> (StatusCode, axum::Json<Value>) {
    if bot != format!("bot{TOKEN}") {
        return refused(401, "Unauthorized", None);
    }
    let multipart = request
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("multipart/form-data"));
    let body = match multipart {
        true => match form_body(request).await {
            Ok(b) => b,
            Err(why) => return refused(400, &format!("Bad Request: {why}"), None),
        },
        false => {
            let bytes = axum::body::to_bytes(request.into_body(), 64 << 20)
                .await
                .unwrap_or_default();
            serde_json::from_slice(&bytes).unwrap_or(json!({}))
        }
    };
    if method == "getUpdates" {
        return get_updates(&shared, &body).await;
    }
    let mut inner = shared.inner.lock().unwrap();
    inner.calls.push((method.clone(), body.clone()));
    match method.as_str() {
        "getFile" => {
            let id = body["file_id"].as_str().unwrap_or("");
            let path = inner
                .file_paths
                .get(id)
                .cloned()
                .unwrap_or_else(|| format!("photos/{id}.jpg"));
            match inner.files.get(&path) {
                Some(bytes) => ok(
                    json!({"file_id": id, "file_unique_id": "u", "file_size": bytes.len(), "file_path": path}),
                ),
                None => refused(
                    400,
                    "Bad Request: wrong file_id or the file is temporarily unavailable",
                    None,
                ),
            }
        }
        "getMe" => ok(
            json!({"id": 123456, "is_bot": true, "first_name": "Herald", "username": "herald_test_bot", "can_read_all_group_messages": false}),
        ),
        "sendMessage" | "editMessageText" => {
            let floods = match method.as_str() {
                "sendMessage" => &mut inner.floods,
                _ => &mut inner.edit_floods,
            };
            if floods.0 > 0 {
                floods.0 -= 1;
                let secs = floods.1;
                return refused(
                    429,
                    &format!("Too Many Requests: retry after {secs}"),
                    Some(json!({"retry_after": secs})),
                );
            }
            let text = body["text"].as_str().unwrap_or("");
            let shown = match body["parse_mode"].as_str() {
                Some("HTML") => visible_html(text),
                _ => text.to_owned(),
            };
            if shown.encode_utf16().count() > 4096 {
                return refused(400, "Bad Request: message is too long", None);
            }
            let id = match body["message_id"].as_i64() {
                Some(edited) => edited,
                None => {
                    inner.next_message += 1;
                    inner.next_message
                }
            };
            if let Some((_, recorded)) = inner.calls.last_mut() {
                recorded["_message_id"] = json!(id);
            }
            ok(json!({"message_id": id, "chat": {"id": body["chat_id"]}, "text": text}))
        }
        "sendPhoto" | "sendDocument" | "sendVoice" | "sendAudio" | "sendVideo" => {
            inner.next_message += 1;
            let id = inner.next_message;
            if let Some((_, recorded)) = inner.calls.last_mut() {
                recorded["_message_id"] = json!(id);
            }
            ok(json!({"message_id": id, "chat": {"id": body["chat_id"]}}))
        }
        _ => ok(json!(true)),
    }
}

/// A multipart form as a JSON body: text fields as strings, a file as
/// `{"file_name", "len", "text"}` (its content as text, lossily).
async fn form_body(request: axum::extract::Request) -> Result<Value, String> {
    use axum::extract::FromRequest;
    let mut form = axum::extract::Multipart::from_request(request, &())
        .await
        .map_err(|e| e.to_string())?;
    let mut body = json!({});
    while let Some(field) = form.next_field().await.map_err(|e| e.to_string())? {
        let name = field.name().unwrap_or("").to_owned();
        let file_name = field.file_name().map(str::to_owned);
        let bytes = field.bytes().await.map_err(|e| e.to_string())?;
        body[&name] = match file_name {
            Some(f) => {
                json!({"file_name": f, "len": bytes.len(), "text": String::from_utf8_lossy(&bytes)})
            }
            None => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                text.parse::<i64>().map_or(json!(text), |n| json!(n))
            }
        };
    }
    Ok(body)
}

/// The text of an HTML-formatted message as Telegram counts it: tags take no room and
/// an entity (`&amp;`) is one character.
fn visible_html(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(c) = rest.chars().next() {
        match c {
            '<' => rest = rest.find('>').map_or("", |end| &rest[end + 1..]),
            '&' => {
                let end = rest.find(';').filter(|e| *e < 12).unwrap_or(0);
                out.push('&');
                rest = &rest[end + 1..];
            }
            _ => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

async fn serve_file(
    State(shared): State<Shared>,
    Path((bot, path)): Path<(String, String)>,
) -> (StatusCode, Vec<u8>) {
    if bot != format!("bot{TOKEN}") {
        return (StatusCode::UNAUTHORIZED, Vec::new());
    }
    match shared.inner.lock().unwrap().files.get(&path) {
        Some(bytes) => (StatusCode::OK, bytes.clone()),
        None => (StatusCode::NOT_FOUND, Vec::new()),
    }
}

/// Confirms updates below `offset`, then answers those left, waiting up to `timeout`
/// seconds for one when there are none.
async fn get_updates(shared: &Shared, body: &Value) -> (StatusCode, axum::Json<Value>) {
    let timeout = body["timeout"].as_u64().unwrap_or(0).min(50);
    let until = tokio::time::Instant::now() + Duration::from_secs(timeout);
    loop {
        let arrived = shared.arrived.notified();
        {
            let mut inner = shared.inner.lock().unwrap();
            if inner.conflict {
                return refused(
                    409,
                    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
                    None,
                );
            }
            if let Some(offset) = body["offset"].as_i64() {
                inner
                    .pending
                    .retain(|u| u["update_id"].as_i64().unwrap_or(0) >= offset);
            }
            if !inner.pending.is_empty() || tokio::time::Instant::now() >= until {
                inner.polls += 1;
                return ok(Value::Array(inner.pending.clone()));
            }
        }
        let _ = tokio::time::timeout_at(until, arrived).await;
    }
}

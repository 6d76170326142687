//! The JSON-RPC gateway: `herald rpc` over a real pipe and over a real WebSocket,
//! against the fake provider.

use herald_test_support::{FakeProvider, Scripted};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

use super::support::BIN;

type Waiting = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

/// A home whose model is on `provider`.
pub fn rpc_home(provider: &str, extra: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "model:\n  default: fake-model\n  base_url: {provider}\nagent:\n  api_max_retries: 1\n{extra}"
    );
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    home
}

/// A client of the gateway: requests matched to answers by id, events in order.
pub struct Client {
    send: mpsc::UnboundedSender<Vec<u8>>,
    waiting: Waiting,
    events: mpsc::UnboundedReceiver<Value>,
    next_id: u64,
}

impl Client {
    /// A client over a frame channel pair (lines of a pipe, messages of a socket).
    fn over(
        send: mpsc::UnboundedSender<Vec<u8>>,
        mut frames: mpsc::UnboundedReceiver<String>,
    ) -> Client {
        let waiting: Waiting = Arc::default();
        let (event_tx, events) = mpsc::unbounded_channel();
        let w = waiting.clone();
        tokio::spawn(async move {
            while let Some(frame) = frames.recv().await {
                let v: Value =
                    serde_json::from_str(&frame).unwrap_or_else(|_| panic!("not JSON: {frame}"));
                if v["method"] == "event" {
                    let _ = event_tx.send(v["params"].clone());
                    continue;
                }
                let id = v["id"].to_string();
                let found = w.lock().unwrap().remove(&id);
                match found {
                    Some(tx) => {
                        let _ = tx.send(v);
                    }
                    None => {
                        let _ = event_tx.send(json!({"type": "unmatched", "payload": v}));
                    }
                }
            }
        });
        Client {
            send,
            waiting,
            events,
            next_id: 1,
        }
    }

    /// Sends a raw frame.
    pub fn raw(&self, frame: &str) {
        self.raw_bytes(frame.as_bytes());
    }

    /// Sends a frame of any bytes.
    pub fn raw_bytes(&self, frame: &[u8]) {
        self.send.send(frame.to_vec()).unwrap();
    }

    /// Sends a request without waiting; the answer's receiver.
    pub fn request(&mut self, method: &str, params: Value) -> oneshot::Receiver<Value> {
        let id = self.next_id;
        self.next_id += 1;
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().unwrap().insert(id.to_string(), tx);
        self.raw(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        rx
    }

    /// The whole answer frame of one request.
    pub async fn answer(&mut self, method: &str, params: Value) -> Value {
        let rx = self.request(method, params);
        tokio::time::timeout(Duration::from_secs(20), rx)
            .await
            .unwrap_or_else(|_| panic!("no answer to {method}"))
            .unwrap()
    }

    /// The result of a request that must succeed.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let a = self.answer(method, params).await;
        assert!(a.get("error").is_none(), "{method}: {a}");
        a["result"].clone()
    }

    /// The error code of a request that must fail.
    pub async fn code(&mut self, method: &str, params: Value) -> i64 {
        let a = self.answer(method, params).await;
        a["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{method} did not fail: {a}"))
    }

    /// The next event (any type).
    pub async fn event(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(20), self.events.recv())
            .await
            .expect("no event")
            .expect("the stream ended")
    }

    /// Events up to and including the first of type `kind`. After `message.complete`
    /// the `session.info` that follows every turn (as in Hermes) is read too, checked
    /// (`running: false`, the usage) and left out.
    pub async fn until(&mut self, kind: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let e = self.event().await;
            let done = e["type"] == kind;
            seen.push(e);
            if done {
                break;
            }
        }
        if kind == "message.complete" {
            let sid = seen.last().unwrap()["session_id"].clone();
            let info = self.event().await;
            assert_eq!(info["type"], "session.info", "after a turn: {info}");
            assert_eq!(info["session_id"], sid, "{info}");
            assert_eq!(info["payload"]["running"], false, "{info}");
            assert!(
                info["payload"]["usage"]["context_max"].as_u64() > Some(0),
                "{info}"
            );
        }
        seen
    }

    /// Creates a session; its live id.
    pub async fn session(&mut self) -> String {
        let r = self.call("session.create", json!({})).await;
        let e = self.until("session.info").await;
        assert_eq!(e.last().unwrap()["session_id"], r["session_id"]);
        r["session_id"].as_str().unwrap().to_owned()
    }

    /// Submits `text` and waits for the turn's `message.complete`; all its events.
    pub async fn turn(&mut self, session: &str, text: &str) -> Vec<Value> {
        let r = self
            .call(
                "prompt.submit",
                json!({"session_id": session, "text": text}),
            )
            .await;
        assert_eq!(r["status"], "streaming", "{r}");
        self.until("message.complete").await
    }
}

/// A WebSocket handshake request to `url` with a bearer `token`.
fn with_token(
    url: &str,
    token: &str,
) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let mut request =
        tokio_tungstenite::tungstenite::client::IntoClientRequest::into_client_request(url)
            .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    request
}

/// `herald rpc` on a pipe.
pub struct Piped {
    pub child: tokio::process::Child,
    pub client: Client,
}

impl Piped {
    pub fn start(home: &std::path::Path) -> Piped {
        Piped::start_with(home, &[])
    }

    /// [`Piped::start`] with more environment.
    pub fn start_with(home: &std::path::Path, env: &[(&str, &str)]) -> Piped {
        let mut child = tokio::process::Command::new(BIN)
            .arg("rpc")
            .env("HERALD_HOME", home)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(home.join("rpc.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, mut to_send) = mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(mut bytes) = to_send.recv().await {
                bytes.push(b'\n');
                if stdin.write_all(&bytes).await.is_err() {
                    return;
                }
            }
        });
        let (frames_tx, frames) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if frames_tx.send(line).is_err() {
                    return;
                }
            }
        });
        Piped {
            child,
            client: Client::over(send, frames),
        }
    }
}

#[tokio::test]
async fn stdio_protocol_errors_a_turn_and_the_session_methods() {
    let provider = FakeProvider::start(vec![
        Scripted::Events(Scripted::text_events(&["Hel", "lo."])),
        Scripted::text("Again."),
    ]);
    let home = rpc_home(&provider.base_url, "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let ready = c.event().await;
    assert_eq!(ready["type"], "gateway.ready", "the first frame: {ready}");
    assert!(ready.get("session_id").is_none());
    // Protocol-level errors, the connection kept.
    c.raw("{not json");
    let e = c.event().await;
    assert_eq!(
        (
            e["payload"]["id"].clone(),
            e["payload"]["error"]["code"].clone()
        ),
        (Value::Null, json!(-32700)),
        "{e}"
    );
    assert_eq!(e["payload"]["error"]["message"], "parse error");
    c.raw("");
    c.raw("[1, 2]");
    assert_eq!(c.event().await["payload"]["error"]["code"], -32600);
    c.raw(r#"{"jsonrpc":"2.0","id":"p","method":"session.list","params":[1]}"#);
    let e = c.event().await;
    assert_eq!(
        (
            e["payload"]["id"].clone(),
            e["payload"]["error"]["code"].clone()
        ),
        (json!("p"), json!(-32602))
    );
    let a = c.answer("no.such.method", json!({})).await;
    assert_eq!(
        a["error"],
        json!({"code": -32601, "message": "unknown method: no.such.method"})
    );
    assert_eq!(
        c.code("session.history", json!({"session_id": "nope"}))
            .await,
        4001
    );
    assert_eq!(c.code("session.resume", json!({})).await, 4006);
    assert_eq!(
        c.code("session.resume", json!({"session_id": "missing"}))
            .await,
        4007
    );
    // A turn.
    let sid = c.session().await;
    let events = c.turn(&sid, "hi").await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"message.start"), "{types:?}");
    let deltas: String = events
        .iter()
        .filter(|e| e["type"] == "message.delta")
        .map(|e| e["payload"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "Hello.");
    let done = &events.last().unwrap()["payload"];
    assert_eq!(
        (done["text"].as_str(), done["status"].as_str()),
        (Some("Hello."), Some("complete")),
        "{done}"
    );
    assert_eq!(done["usage"]["calls"], 1, "{done}");
    assert!(events.iter().all(|e| e["session_id"] == sid.as_str()));
    // Idle before message.complete: the next submit is not queued.
    let events = c.turn(&sid, "more").await;
    assert_eq!(events.last().unwrap()["payload"]["text"], "Again.");
    assert_eq!(
        events.last().unwrap()["payload"]["usage"]["total"],
        5,
        "the provider's counts"
    );
    let h = c.call("session.history", json!({"session_id": sid})).await;
    assert_eq!(h["count"], 4, "{h}");
    assert_eq!(h["messages"][0]["role"], "user");
    assert!(
        h["messages"][0]["row_id"].is_i64(),
        "user rows carry row_id: {h}"
    );
    assert_eq!(h["messages"][3]["text"], "Again.");
    let usage = c.call("session.usage", json!({"session_id": sid})).await;
    assert_eq!(
        (usage["total"].clone(), usage["calls"].clone()),
        (json!(5), json!(2)),
        "{usage}"
    );
    assert_eq!(
        c.code("session.title", json!({"session_id": sid, "title": "  "}))
            .await,
        4021
    );
    assert_eq!(
        c.code("session.title", json!({"session_id": sid, "title": "a\nb"}))
            .await,
        4022
    );
    let t = c
        .call(
            "session.title",
            json!({"session_id": sid, "title": "Greeting"}),
        )
        .await;
    assert_eq!(t["title"], "Greeting");
    assert_eq!(t["pending"], json!(false));
    let key = t["session_key"].clone();
    let t = c.call("session.title", json!({"session_id": sid})).await;
    assert_eq!(t["title"], "Greeting");
    // Hermes's reading also names the stored session; the spec's `pending` is kept.
    assert!(key.as_str().is_some_and(|k| !k.is_empty()), "{t}");
    assert_eq!(t["session_key"], key);
    assert_eq!(t["pending"], json!(false));
    let status = c.call("session.status", json!({"session_id": sid})).await;
    assert!(
        status["output"].as_str().unwrap().contains("fake-model"),
        "{status}"
    );
    let created = c.call("session.most_recent", json!({})).await;
    let stored = created["session_id"].as_str().unwrap().to_owned();
    assert_eq!(created["title"], "Greeting");
    let list = c.call("session.list", json!({"limit": 5})).await;
    assert_eq!(list["sessions"][0]["preview"], "hi", "{list}");
    let active = c.call("session.active_list", json!({})).await;
    assert_eq!(active["sessions"][0]["session_key"], stored.as_str());
    assert_eq!(
        c.code("session.delete", json!({"session_id": stored}))
            .await,
        4023,
        "a live session"
    );
    let undone = c.call("session.undo", json!({"session_id": sid})).await;
    assert_eq!(undone["removed"], 2);
    assert_eq!(
        c.call("session.history", json!({"session_id": sid})).await["count"],
        2
    );
    // Resume makes a second live session of the same stored one, with its messages.
    let resumed = c
        .call("session.resume", json!({"session_id": stored}))
        .await;
    assert_eq!(resumed["message_count"], 2, "{resumed}");
    assert_ne!(resumed["session_id"], sid.as_str());
    assert_eq!(
        c.call("session.close", json!({"session_id": sid})).await,
        json!({"closed": true})
    );
    assert_eq!(
        c.code("session.history", json!({"session_id": sid})).await,
        4001
    );
    let other = resumed["session_id"].as_str().unwrap();
    assert_eq!(
        c.call("session.close", json!({"session_id": other})).await,
        json!({"closed": true})
    );
    let deleted = c
        .call("session.delete", json!({"session_id": stored}))
        .await;
    assert_eq!(deleted, json!({"deleted": stored}));
    // EOF on stdin ends the server.
    drop(rpc.client);
    let status = tokio::time::timeout(Duration::from_secs(10), rpc.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn rewind_checks_in_order_and_nothing_is_written_when_refused() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::text("ok"));
    let home = rpc_home(&provider.base_url, "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    for q in ["one", "two", "three"] {
        c.turn(&sid, q).await;
    }
    let rows = |h: &Value| -> Vec<i64> {
        h["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["row_id"].as_i64().unwrap())
            .collect()
    };
    let h = c.call("session.history", json!({"session_id": sid})).await;
    let users = rows(&h);
    assert_eq!(users.len(), 3);
    let submit = |extra: Value| {
        let mut p = json!({"session_id": sid, "text": "again"});
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };
    let refusals = [
        (
            json!({"truncate_before_user_ordinal": true, "confirm_truncate": true}),
            4004,
        ),
        (
            json!({"truncate_before_user_ordinal": "1", "confirm_truncate": true}),
            4004,
        ),
        (json!({"confirm_truncate": true}), 4004),
        (json!({"truncate_before_row_id": users[1]}), 4029),
        (
            json!({"truncate_before_row_id": 999_999, "confirm_truncate": true}),
            4018,
        ),
        (
            json!({"truncate_before_row_id": users[1], "truncate_before_user_ordinal": 2, "confirm_truncate": true}),
            4030,
        ),
        (
            json!({"truncate_before_user_ordinal": 1, "confirm_truncate": true}),
            4004,
        ),
        (
            json!({"truncate_before_row_id": users[0], "confirm_truncate": true}),
            4028,
        ),
        // The message id is the row id: the same rules.
        (json!({"truncate_before_message_id": users[1]}), 4029),
        (
            json!({"truncate_before_message_id": "msg_nope", "confirm_truncate": true}),
            4018,
        ),
        (
            json!({"truncate_before_message_id": users[2], "truncate_before_row_id": users[1], "confirm_truncate": true}),
            4030,
        ),
    ];
    for (params, code) in refusals {
        assert_eq!(
            c.code("prompt.submit", submit(params.clone())).await,
            code,
            "{params}"
        );
    }
    assert_eq!(
        rows(&c.call("session.history", json!({"session_id": sid})).await),
        users,
        "nothing written"
    );
    assert_eq!(provider.requests().len(), 3, "no turn ran");
    let r = c
        .call("prompt.submit", submit(json!({"truncate_before_message_id": users[1].to_string(), "truncate_before_user_ordinal": 1, "confirm_truncate": true})))
        .await;
    assert_eq!(r["status"], "streaming");
    assert_eq!(r["survivor_user_row_ids"], json!([users[0]]), "{r}");
    c.until("message.complete").await;
    let h = c.call("session.history", json!({"session_id": sid})).await;
    let texts: Vec<&str> = h["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["one", "ok", "again", "ok"]);
    // The stale id of the cut turn is refused now.
    let stale = submit(json!({"truncate_before_row_id": users[2], "confirm_truncate": true}));
    assert_eq!(c.code("prompt.submit", stale).await, 4018);
    // Emptying needs its own confirmation.
    let first = rows(&h)[0];
    let r = c
        .call("prompt.submit", submit(json!({"truncate_before_row_id": first, "confirm_truncate": true, "confirm_empty_truncate": true})))
        .await;
    assert_eq!(r["survivor_user_row_ids"], json!([]));
    c.until("message.complete").await;
    // Branch then history: the branch has the transcript, the parent is unchanged.
    let b = c
        .call("session.branch", json!({"session_id": sid, "name": "side"}))
        .await;
    assert_eq!(b["title"], "side");
    let branched = b["session_id"].as_str().unwrap().to_owned();
    let bh = c
        .call("session.history", json!({"session_id": branched}))
        .await;
    assert_eq!(bh["count"], 2, "{bh}");
    c.turn(&branched, "only here").await;
    assert_eq!(
        c.call("session.history", json!({"session_id": branched}))
            .await["count"],
        4
    );
    assert_eq!(
        c.call("session.history", json!({"session_id": sid})).await["count"],
        2
    );
    let empty = c.session().await;
    assert_eq!(
        c.code("session.branch", json!({"session_id": empty})).await,
        4008
    );
}

#[tokio::test]
async fn approvals_clarify_interrupt_steer_and_model_switching() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "terminal", r#"{"command": "rm -f rpc-doomed.txt"}"#)]),
        Scripted::text("Removed."),
        Scripted::tool_calls(&[("c2", "terminal", r#"{"command": "rm -f rpc-kept.txt"}"#)]),
        Scripted::text("Not removed."),
        Scripted::tool_calls(&[("c3", "terminal", r#"{"command": "sleep 30"}"#)]),
        Scripted::tool_calls(&[(
            "c4",
            "clarify",
            r#"{"question": "Which one?", "choices": ["a", "b"]}"#,
        )]),
        Scripted::text("Took b."),
        Scripted::text("On the large model."),
        Scripted::tool_calls(&[(
            "c5",
            "terminal",
            r#"{"command": "sleep 60", "background": true}"#,
        )]),
        Scripted::text("Started."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let home = rpc_home(
        &provider.base_url,
        &format!("terminal:\n  cwd: {}\n", dir.path().display()),
    );
    std::fs::write(dir.path().join("rpc-doomed.txt"), "x").unwrap();
    std::fs::write(dir.path().join("rpc-kept.txt"), "x").unwrap();
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    // Approved.
    c.call("prompt.submit", json!({"session_id": sid, "text": "clean"}))
        .await;
    let asked = c.until("approval.request").await;
    let request = &asked.last().unwrap()["payload"];
    assert!(
        request["command"].as_str().unwrap().contains("rm -f"),
        "{request}"
    );
    assert_eq!(
        request["choices"],
        json!(["once", "session", "always", "deny"])
    );
    // The danger's key, alone and in the list, as Hermes's TUI reads them.
    let key = request["pattern_key"].as_str().unwrap_or_default();
    assert!(!key.is_empty(), "{request}");
    assert_eq!(request["pattern_keys"], json!([key]));
    assert_eq!(request["description"], json!(key));
    let r = c
        .call(
            "approval.respond",
            json!({"session_id": sid, "choice": "once"}),
        )
        .await;
    assert_eq!(r, json!({"resolved": 1}));
    let rest = c.until("message.complete").await;
    assert!(
        rest.iter().any(|e| e["type"] == "tool.complete"),
        "{rest:?}"
    );
    assert_eq!(rest.last().unwrap()["payload"]["text"], "Removed.");
    assert!(!dir.path().join("rpc-doomed.txt").exists());
    // Denied (by a choice it does not know).
    c.call(
        "prompt.submit",
        json!({"session_id": sid, "text": "clean more"}),
    )
    .await;
    c.until("approval.request").await;
    // A choice RPC does not know denies, as Hermes's gateway resolves it.
    let r = c
        .call(
            "approval.respond",
            json!({"session_id": sid, "choice": "maybe"}),
        )
        .await;
    assert_eq!(r, json!({"resolved": 1}));
    let rest = c.until("message.complete").await;
    assert_eq!(rest.last().unwrap()["payload"]["text"], "Not removed.");
    assert!(dir.path().join("rpc-kept.txt").exists());
    // Interrupt mid-tool.
    c.call("prompt.submit", json!({"session_id": sid, "text": "wait"}))
        .await;
    c.until("tool.start").await;
    let steer = c
        .call("session.steer", json!({"session_id": sid, "text": "hurry"}))
        .await;
    assert_eq!(steer, json!({"status": "queued", "text": "hurry"}));
    assert_eq!(
        c.code("session.steer", json!({"session_id": sid, "text": " "}))
            .await,
        4002
    );
    let started = std::time::Instant::now();
    assert_eq!(
        c.call("session.interrupt", json!({"session_id": sid}))
            .await,
        json!({"status": "interrupted"})
    );
    let rest = c.until("message.complete").await;
    assert_eq!(
        rest.last().unwrap()["payload"]["status"],
        "interrupted",
        "{rest:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the sleep was killed"
    );
    // Clarify, answered by request id.
    c.call("prompt.submit", json!({"session_id": sid, "text": "pick"}))
        .await;
    let asked = c.until("clarify.request").await;
    let request_id = asked.last().unwrap()["payload"]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        asked.last().unwrap()["payload"]["choices"],
        json!(["a", "b"])
    );
    assert_eq!(
        c.code(
            "clarify.respond",
            json!({"request_id": "nope", "answer": "a"})
        )
        .await,
        4009
    );
    let r = c
        .call(
            "clarify.respond",
            json!({"request_id": request_id, "answer": "b"}),
        )
        .await;
    assert_eq!(r, json!({"status": "ok"}));
    assert_eq!(
        c.until("message.complete").await.last().unwrap()["payload"]["text"],
        "Took b."
    );
    assert_eq!(c.code("sudo.respond", json!({})).await, 4009);
    assert_eq!(
        c.call("secret.respond", json!({"request_id": "x", "value": "v"}))
            .await,
        json!({"status": "expired"})
    );
    // /model via command.dispatch, then a turn on the new model; it stays.
    let r = c
        .call(
            "command.dispatch",
            json!({"session_id": sid, "name": "model", "arg": "fake-large"}),
        )
        .await;
    assert_eq!(
        (r["type"].as_str(), r["model"].as_str()),
        (Some("exec"), Some("fake-large")),
        "{r}"
    );
    let shown = c
        .call(
            "command.dispatch",
            json!({"session_id": sid, "command": "/model"}),
        )
        .await;
    assert!(
        shown["output"].as_str().unwrap().contains("fake-large"),
        "{shown}"
    );
    c.turn(&sid, "which model?").await;
    let last = provider.requests().last().unwrap().body.clone();
    assert_eq!(last["model"], "fake-large");
    let got = c
        .call("config.get", json!({"key": "model", "session_id": sid}))
        .await;
    assert_eq!(got["value"], "fake-large");
    assert_eq!(
        c.code(
            "command.dispatch",
            json!({"session_id": sid, "name": "new"})
        )
        .await,
        4018
    );
    assert_eq!(
        c.code("command.resolve", json!({"name": "frobnicate"}))
            .await,
        4011
    );
    let resolved = c.call("command.resolve", json!({"name": "exit"})).await;
    assert_eq!(resolved["name"], "/quit");
    let catalog = c.call("commands.catalog", json!({})).await;
    assert!(
        catalog["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p[0] == "/model"),
        "{catalog}"
    );
    // The same builder as GET /api/model/options, and a pick as the TUI sends it.
    let options = c.call("model.options", json!({"session_id": sid})).await;
    assert_eq!(options["model"], "fake-model", "{options}");
    let slug = options["providers"][0]["slug"].as_str().unwrap().to_owned();
    assert_eq!(options["providers"][0]["is_current"], true, "{options}");
    let picked = c
        .call(
            "config.set",
            json!({"session_id": sid, "key": "model", "value": format!("fake-large --provider {slug} --tui-session")}),
        )
        .await;
    assert_eq!(picked["value"], "fake-large", "{picked}");
    c.call(
        "config.set",
        json!({"session_id": sid, "key": "model", "value": "fake-model"}),
    )
    .await;
    assert_eq!(c.code("config.get", json!({"key": "nonsense"})).await, 4002);
    // process.stop kills the background jobs the tools started.
    let started = c.turn(&sid, "start a job").await;
    assert_eq!(started.last().unwrap()["payload"]["text"], "Started.");
    assert_eq!(
        c.call("process.stop", json!({})).await,
        json!({"killed": 1})
    );
}

/// `herald rpc --ws` on an ephemeral loopback port; its `ws://` URL and the token
/// (given, or the one it made and printed).
pub struct WsServer {
    /// Killed when the server is dropped.
    pub child: tokio::process::Child,
    pub url: String,
    pub token: String,
}

impl WsServer {
    pub async fn start(home: &std::path::Path, bind: &str, token: Option<&str>) -> WsServer {
        let args: Vec<&str> = token.map(|t| vec!["--token", t]).unwrap_or_default();
        WsServer::start_with(home, bind, &args, token).await
    }

    /// Started with `args`; `known` is the token they give (else it is read from the
    /// URL herald prints).
    pub async fn start_with(
        home: &std::path::Path,
        bind: &str,
        args: &[&str],
        known: Option<&str>,
    ) -> WsServer {
        let token = known;
        let mut cmd = tokio::process::Command::new(BIN);
        cmd.args(["rpc", "--ws", bind])
            .env("HERALD_HOME", home)
            .env_remove("RUST_LOG")
            .env_remove("HERALD_RPC_TOKEN")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(home.join("rpc-ws.log")).unwrap())
            .kill_on_drop(true);
        cmd.args(args);
        let mut child = cmd.spawn().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut next = async || {
            let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line());
            line.await
                .unwrap()
                .unwrap()
                .expect("herald rpc --ws exited before listening")
        };
        let listening = next().await;
        let url = listening
            .strip_prefix("herald: JSON-RPC gateway listening on ")
            .unwrap_or_else(|| panic!("{listening}"))
            .to_owned();
        let token = match token {
            Some(t) => t.to_owned(),
            None => {
                let said = next().await;
                let ready = format!("herald: connect with {url}?token=");
                said.strip_prefix(&ready)
                    .unwrap_or_else(|| panic!("no token printed: {said}"))
                    .to_owned()
            }
        };
        WsServer { child, url, token }
    }

    /// A connected client, with `token` as its bearer (the server's when `None`).
    pub async fn client(&self, token: Option<&str>) -> Client {
        self.client_with(token.unwrap_or(&self.token), None).await
    }

    /// A connected client sending `origin`, as a browser does.
    pub async fn client_with(&self, token: &str, origin: Option<&str>) -> Client {
        use futures_util::{SinkExt, StreamExt};
        use tokio_tungstenite::tungstenite::Message;
        let request = self.request(token, origin);
        let (socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
        let (mut sink, mut stream) = socket.split();
        let (send, mut to_send) = mpsc::unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(frame) = to_send.recv().await {
                let message = match String::from_utf8(frame) {
                    Ok(text) => Message::Text(text.into()),
                    Err(e) => Message::Binary(e.into_bytes().into()),
                };
                if sink.send(message).await.is_err() {
                    return;
                }
            }
            let _ = sink.close().await;
        });
        let (frames_tx, frames) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(Ok(m)) = stream.next().await {
                if let Message::Text(t) = m
                    && frames_tx.send(t.to_string()).is_err()
                {
                    return;
                }
            }
        });
        Client::over(send, frames)
    }

    /// The upgrade request, with the bearer and the `Origin` header when given.
    pub fn request(
        &self,
        token: &str,
        origin: Option<&str>,
    ) -> tokio_tungstenite::tungstenite::handshake::client::Request {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut request = self.url.as_str().into_client_request().unwrap();
        let headers = request.headers_mut();
        if !token.is_empty() {
            headers.insert("authorization", format!("Bearer {token}").parse().unwrap());
        }
        if let Some(o) = origin {
            headers.insert("origin", o.parse().unwrap());
        }
        request
    }
}

#[tokio::test]
async fn websocket_two_clients_two_sessions_at_once_and_a_disconnect_mid_turn() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::Events(Scripted::text_events(&[
        "one ", "two ", "three",
    ])));
    let home = rpc_home(&provider.base_url, "");
    let server = WsServer::start(home.path(), "127.0.0.1:0", None).await;
    let (mut a, mut b) = (server.client(None).await, server.client(None).await);
    for c in [&mut a, &mut b] {
        assert_eq!(c.event().await["type"], "gateway.ready");
    }
    let (sa, sb) = (a.session().await, b.session().await);
    let ra = a.request("prompt.submit", json!({"session_id": sa, "text": "from a"}));
    let rb = b.request("prompt.submit", json!({"session_id": sb, "text": "from b"}));
    let (ra, rb) = (ra.await.unwrap(), rb.await.unwrap());
    assert_eq!(
        (
            ra["result"]["status"].as_str(),
            rb["result"]["status"].as_str()
        ),
        (Some("streaming"), Some("streaming"))
    );
    let (ea, eb) = tokio::join!(a.until("message.complete"), b.until("message.complete"));
    for (events, sid) in [(&ea, &sa), (&eb, &sb)] {
        assert!(
            events.iter().all(|e| e["session_id"] == sid.as_str()),
            "each client sees only its session: {events:?}"
        );
        let text: String = events
            .iter()
            .filter(|e| e["type"] == "message.delta")
            .map(|e| e["payload"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(text, "one two three", "coalesced or not, the text is whole");
        assert_eq!(events.last().unwrap()["payload"]["text"], "one two three");
    }
    // A live session belongs to its connection: another one cannot touch it, nor
    // tell it from one that does not exist, nor see it listed.
    let kept = a
        .call("session.create", json!({"close_on_disconnect": false}))
        .await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (method, params) in [
        (
            "approval.respond",
            json!({"session_id": sa, "choice": "once"}),
        ),
        ("session.interrupt", json!({"session_id": sa})),
        (
            "session.steer",
            json!({"session_id": sa, "text": "mine now"}),
        ),
        ("prompt.submit", json!({"session_id": sa, "text": "hijack"})),
        ("session.history", json!({"session_id": sa})),
        ("session.close", json!({"session_id": kept})),
        ("session.activate", json!({"session_id": kept})),
        ("session.activate", json!({"session_id": "00000000"})),
    ] {
        assert_eq!(b.code(method, params).await, 4001, "{method}");
    }
    // The id is matched as sent by the owner check and by the close alike: padded, it
    // names no session (it was trimmed before the close, past the check).
    let padded = b
        .call("session.close", json!({"session_id": format!(" {kept} ")}))
        .await;
    assert_eq!(padded["closed"], json!(false));
    let listed = a.call("session.active_list", json!({})).await;
    assert!(listed.to_string().contains(&kept), "still live: {listed}");
    let listed = b.call("session.active_list", json!({})).await;
    let ids: Vec<&str> = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![sb.as_str()], "only its own");
    // A client that goes away mid-turn: its session closes and the turn stops; the one
    // it kept may then be taken over.
    provider.set_fallback(Scripted::Delayed(
        Duration::from_secs(30),
        Box::new(Scripted::text("late")),
    ));
    a.call("prompt.submit", json!({"session_id": sa, "text": "slow"}))
        .await;
    a.until("message.start").await;
    drop(a);
    let started = std::time::Instant::now();
    loop {
        let taken = b
            .answer("session.activate", json!({"session_id": kept}))
            .await;
        if taken.get("result").is_some() {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{taken}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        b.code("session.activate", json!({"session_id": sa})).await,
        4001,
        "the session that closed with its connection is gone"
    );
    // The other client is unaffected.
    provider.set_fallback(Scripted::text("still here"));
    let done = b.turn(&sb, "you there?").await;
    assert_eq!(done.last().unwrap()["payload"]["text"], "still here");
}

/// The HTTP status a refused upgrade got.
async fn refused_with(request: tokio_tungstenite::tungstenite::handshake::client::Request) -> u16 {
    use tokio_tungstenite::tungstenite::Error;
    match tokio_tungstenite::connect_async(request).await {
        Err(Error::Http(r)) => r.status().as_u16(),
        Err(e) => panic!("refused otherwise: {e}"),
        Ok(_) => panic!("the upgrade was served"),
    }
}

#[tokio::test]
async fn websocket_needs_a_token_everywhere_and_refuses_web_pages_it_was_not_told_of() {
    let provider = FakeProvider::start(vec![]);
    let home = rpc_home(&provider.base_url, "");
    let short = tokio::process::Command::new(BIN)
        .args(["rpc", "--ws", "127.0.0.1:0", "--token", "short"])
        .env("HERALD_HOME", home.path())
        .output()
        .await
        .unwrap();
    assert_eq!(short.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&short.stderr).contains("at least 16"));
    // On loopback with no token given, one is made and printed once with its URL.
    let made = WsServer::start(home.path(), "127.0.0.1:0", None).await;
    assert!(made.token.len() >= 16, "{}", made.token);
    assert_eq!(
        refused_with(made.request("", None)).await,
        401,
        "no token, no socket"
    );
    let ready = format!("{}?token={}", made.url, made.token);
    let (mut socket, _) = tokio_tungstenite::connect_async(ready).await.unwrap();
    let _ = futures_util::SinkExt::close(&mut socket).await;
    // A web page the user opens cannot drive it, with the token or without.
    let evil = Some("http://evil.example");
    assert_eq!(refused_with(made.request(&made.token, evil)).await, 403);
    assert_eq!(refused_with(made.request("", evil)).await, 403);
    // An origin it was told of may, with the token; the token may come from a file.
    let file = home.path().join("rpc-token");
    std::fs::write(&file, "from-a-file-0123456789\n").unwrap();
    let path = file.display().to_string();
    let args = [
        "--token-file",
        path.as_str(),
        "--allow-origin",
        "http://localhost:3000/",
    ];
    let told = WsServer::start_with(
        home.path(),
        "127.0.0.1:0",
        &args,
        Some("from-a-file-0123456789"),
    )
    .await;
    let mut page = told
        .client_with(&told.token, Some("http://LOCALHOST:3000"))
        .await;
    assert_eq!(page.event().await["type"], "gateway.ready");
    assert_eq!(refused_with(told.request(&told.token, evil)).await, 403);
    assert_eq!(
        refused_with(told.request("wrong-token-0123456789", None)).await,
        401
    );
    let server = WsServer::start(home.path(), "127.0.0.1:0", Some("s3cret-token-0123")).await;
    let refused = tokio_tungstenite::connect_async(server.url.as_str()).await;
    assert!(refused.is_err(), "no token, no socket");
    let mut c = server.client(Some("s3cret-token-0123")).await;
    assert_eq!(c.event().await["type"], "gateway.ready");
    assert!(c.call("session.list", json!({})).await["sessions"].is_array());
    // Open sockets are bounded: past the cap a connection is refused, the others live.
    let mut open = Vec::new();
    for _ in 1..256 {
        open.push(server.client(Some("s3cret-token-0123")).await);
    }
    assert!(
        tokio_tungstenite::connect_async(with_token(&server.url, "s3cret-token-0123"))
            .await
            .is_err(),
        "the 257th socket"
    );
    assert!(
        c.call("session.list", json!({})).await["sessions"].is_array(),
        "the first still served"
    );
    drop(open);
    let started = std::time::Instant::now();
    loop {
        if tokio_tungstenite::connect_async(with_token(&server.url, "s3cret-token-0123"))
            .await
            .is_ok()
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "closed sockets free their slots"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn bad_input_gets_the_documented_error_and_the_connection_stays() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::text("fine"));
    let home = rpc_home(&provider.base_url, "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    c.event().await;
    // Invalid UTF-8 on the pipe: a parse error, the connection kept.
    c.raw_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.list\",\"params\":{\"x\":\"\xff\xfe\"}}");
    assert_eq!(c.event().await["payload"]["error"]["code"], -32700);
    // A frame over the limit: -32600, and the next request still works.
    let huge = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"method\":\"session.list\",\"params\":{{\"x\":\"{}\"}}}}",
        "y".repeat(17 * 1024 * 1024)
    );
    c.raw(&huge);
    let e = c.event().await;
    assert_eq!(
        e["payload"]["error"]["code"],
        -32600,
        "{}",
        e.to_string().chars().take(300).collect::<String>()
    );
    // 1,000 requests in flight at once, each answered, matched by id.
    let pending: Vec<_> = (0..1000)
        .map(|_| c.request("session.list", json!({"limit": 1})))
        .collect();
    for rx in pending {
        let a = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .unwrap()
            .unwrap();
        assert!(a["result"]["sessions"].is_array(), "{a}");
    }
    // Wrong types in params.
    assert_eq!(
        c.code("prompt.submit", json!({"session_id": 5, "text": "x"}))
            .await,
        4001
    );
    let sid = c.session().await;
    assert_eq!(
        c.code("prompt.submit", json!({"session_id": sid, "text": 7}))
            .await,
        4002
    );
    assert_eq!(c.code("prompt.submit", json!({"session_id": sid, "text": "x", "truncate_before_row_id": "1", "confirm_truncate": true})).await, 4004);
    assert_eq!(
        c.code("session.create", json!({"cwd": "/no/such/folder"}))
            .await,
        4002
    );
    assert_eq!(
        c.code("prompt.background", json!({"session_id": sid, "text": ""}))
            .await,
        4012
    );
    let task = c
        .call(
            "prompt.background",
            json!({"session_id": sid, "text": "later"}),
        )
        .await;
    let done = c.until("background.complete").await;
    assert_eq!(
        done.last().unwrap()["payload"],
        json!({"task_id": task["task_id"], "text": "fine"})
    );
    assert!(c.turn(&sid, "still fine?").await.last().unwrap()["payload"]["text"] == "fine");
}

#[tokio::test]
async fn the_rest_of_the_catalogue_cli_exec_attachments_reasoning_and_info() {
    let provider = FakeProvider::start(vec![Scripted::Events(vec![
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "reasoning_content": "Thinking it over."}}]}),
        json!({"choices": [{"index": 0, "delta": {"content": "Seen."}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ])]);
    let home = rpc_home(&provider.base_url, "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    // cli.exec runs herald on this home; serving commands are refused.
    let r = c
        .call("cli.exec", json!({"argv": ["gateway", "status"]}))
        .await;
    assert_eq!(
        (r["blocked"].as_bool(), r["code"].as_i64()),
        (Some(false), Some(3)),
        "{r}"
    );
    assert!(
        r["output"]
            .as_str()
            .unwrap()
            .contains("Gateway: not running"),
        "{r}"
    );
    let r = c
        .call("cli.exec", json!({"argv": ["rpc", "--ws", "0.0.0.0:1"]}))
        .await;
    assert_eq!(r["blocked"], true);
    assert_eq!(
        c.code("cli.exec", json!({"argv": "gateway status"})).await,
        4003
    );
    assert_eq!(c.code("cli.exec", json!({"argv": [1]})).await, 4003);
    // An image goes with the next prompt.
    let dir = tempfile::tempdir().unwrap();
    let pic = dir.path().join("shot.png");
    std::fs::write(&pic, b"\x89PNG").unwrap();
    assert_eq!(
        c.code(
            "image.attach",
            json!({"session_id": sid, "path": "shot.png"})
        )
        .await,
        4015
    );
    let missing = dir.path().join("gone.png");
    assert_eq!(
        c.code("image.attach", json!({"session_id": sid, "path": missing}))
            .await,
        4016
    );
    let a = c
        .call("image.attach", json!({"session_id": sid, "path": pic}))
        .await;
    assert_eq!(
        (a["attached"].as_bool(), a["name"].as_str()),
        (Some(true), Some("shot.png"))
    );
    let events = c.turn(&sid, "what is in it?").await;
    // It reaches the provider as an image part, its path named in the text.
    let sent = provider.requests()[0].body["messages"][1]["content"].clone();
    let text = sent[0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("what is in it?") && text.contains("[Image attached at: "),
        "{sent}"
    );
    assert_eq!(
        sent[1],
        json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}})
    );
    // At most 16 images go with one prompt (each is read whole when it is sent).
    let other = c.call("session.create", json!({})).await["session_id"].clone();
    c.until("session.info").await;
    for _ in 0..16 {
        c.call("image.attach", json!({"session_id": other, "path": pic}))
            .await;
    }
    assert_eq!(
        c.code("image.attach", json!({"session_id": other, "path": pic}))
            .await,
        4015
    );
    c.call("session.close", json!({"session_id": other})).await;
    // Reasoning: streamed, then available, then on message.complete.
    assert!(
        events.iter().any(|e| e["type"] == "reasoning.delta"),
        "{events:?}"
    );
    let available = events
        .iter()
        .find(|e| e["type"] == "reasoning.available")
        .unwrap();
    assert_eq!(available["payload"]["text"], "Thinking it over.");
    assert_eq!(
        events.last().unwrap()["payload"]["reasoning"],
        "Thinking it over."
    );
    // A model switch is announced as session.info.
    c.call(
        "slash.exec",
        json!({"session_id": sid, "command": "/model fake-large"}),
    )
    .await;
    let info = c.until("session.info").await;
    let info = &info.last().unwrap()["payload"];
    assert_eq!(info["model"], "fake-large");
    // The fields Hermes's TUI reads, tools by toolset and skills by category.
    for field in [
        "title",
        "running",
        "version",
        "yolo",
        "approval_mode",
        "system_prompt",
        "stored_session_id",
        "usage",
        "branch",
        "reasoning_effort",
    ] {
        assert!(info.get(field).is_some(), "{field}: {info}");
    }
    assert_eq!(info["approval_mode"], "manual", "{info}");
    assert!(
        info["tools"]["terminal"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("terminal"))),
        "{info}"
    );
    assert!(
        info["skills"].is_object() && info.get("lazy").is_none(),
        "{info}"
    );
    assert!(
        info["system_prompt"]
            .as_str()
            .is_some_and(|p| !p.is_empty())
    );
    let usage = c.call("session.usage", json!({"session_id": sid})).await;
    for field in [
        "context_used",
        "context_max",
        "context_percent",
        "compressions",
    ] {
        assert!(usage[field].is_u64(), "{field}: {usage}");
    }
    assert!(usage["context_used"].as_u64() > Some(0), "{usage}");
    assert_eq!(usage["context_max"], 256_000, "{usage}");
    assert_eq!(usage["compressions"], 0, "{usage}");
    // A compression is counted.
    provider.push(Scripted::text("Fine."));
    provider.push(Scripted::text("They talked."));
    c.turn(&sid, "and again").await;
    let done = c.call("session.compress", json!({"session_id": sid})).await;
    assert_eq!(done["status"], "compressed", "{done}");
    let usage = c.call("session.usage", json!({"session_id": sid})).await;
    assert_eq!(usage["compressions"], 1, "{usage}");
    let here = c.call("session.create", json!({"cwd": dir.path()})).await;
    assert_eq!(
        here["info"]["cwd"],
        dir.path().display().to_string(),
        "{here}"
    );
    assert_eq!(
        c.call("delegation.status", json!({})).await["active"],
        json!([])
    );
    assert_eq!(c.code("subagent.interrupt", json!({})).await, 4000);
    assert_eq!(
        c.code("clipboard.paste", json!({"session_id": sid})).await,
        5027
    );
}

#[tokio::test]
async fn reloads_spawn_trees_interim_text_and_process_notices() {
    let Scripted::Events(mut call) = Scripted::tool_calls(&[(
        "bg",
        "terminal",
        r#"{"command": "sleep 0.3; echo done", "background": true}"#,
    )]) else {
        unreachable!()
    };
    call.insert(
        0,
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Let me start it."}}]}),
    );
    let provider = FakeProvider::start(vec![Scripted::Events(call), Scripted::text("Started.")]);
    let home = rpc_home(&provider.base_url, "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    // Text beside a tool call is interim; the process's end is a status line.
    let events = c.turn(&sid, "start it").await;
    let interim = events
        .iter()
        .find(|e| e["type"] == "message.interim")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(
        interim["payload"],
        json!({"text": "Let me start it.", "already_streamed": true})
    );
    let status = c.until("status.update").await;
    let status = status.last().unwrap();
    assert_eq!(status["session_id"], sid.as_str());
    assert_eq!(status["payload"]["kind"], "process");
    let line = status["payload"]["text"].as_str().unwrap();
    assert!(line.contains("exited with code 0"), "{line}");
    // reload.env counts what changed; reload.mcp asks first (approvals.mcp_reload_confirm).
    std::fs::write(home.path().join(".env"), "HERALD_RELOAD_PROBE=one\n").unwrap();
    assert_eq!(c.call("reload.env", json!({})).await["updated"], 1);
    assert_eq!(c.call("reload.env", json!({})).await["updated"], 0);
    assert_eq!(
        c.call("reload.mcp", json!({})).await["status"],
        "confirm_required"
    );
    assert_eq!(
        c.call("reload.mcp", json!({"confirm": true})).await["status"],
        "reloaded"
    );
    // Spawn trees: saved under the home, listed, loaded; nothing outside is read.
    assert_eq!(
        c.code("spawn_tree.save", json!({"session_id": sid})).await,
        4000
    );
    let tree = json!([{"id": "sub-1", "goal": "look around", "children": []}]);
    let saved = c
        .call(
            "spawn_tree.save",
            json!({"session_id": sid, "subagents": tree, "label": "first"}),
        )
        .await;
    let path = saved["path"].as_str().unwrap().to_owned();
    assert!(path.starts_with(&home.path().join("spawn-trees").display().to_string()));
    let listed = c.call("spawn_tree.list", json!({"session_id": sid})).await;
    assert_eq!(listed["entries"][0]["path"], path.as_str());
    assert_eq!(listed["entries"][0]["count"], 1);
    assert_eq!(listed["entries"][0]["label"], "first");
    let other = c
        .call("spawn_tree.list", json!({"session_id": "someone-else"}))
        .await;
    assert_eq!(other["entries"], json!([]));
    let all = c
        .call("spawn_tree.list", json!({"cross_session": true}))
        .await;
    assert_eq!(all["entries"].as_array().unwrap().len(), 1);
    let loaded = c.call("spawn_tree.load", json!({"path": path})).await;
    assert_eq!(loaded["subagents"], tree);
    assert_eq!(
        c.code("spawn_tree.load", json!({"path": "/etc/passwd"}))
            .await,
        4030
    );
    let sneaky = format!(
        "{}/../config.yaml",
        home.path().join("spawn-trees").display()
    );
    assert_eq!(
        c.code("spawn_tree.load", json!({"path": sneaky})).await,
        4030
    );
    assert_eq!(c.code("spawn_tree.load", json!({})).await, 4000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_client_that_stops_reading_pauses_the_provider_and_is_let_go() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    // 160 MB of answer from a provider as fast as the socket lets it be.
    let part = "z".repeat(64 * 1024);
    let parts: Vec<&str> = std::iter::repeat_n(part.as_str(), 2500).collect();
    let provider = FakeProvider::start(vec![Scripted::Events(Scripted::text_events(&parts))]);
    let home = rpc_home(&provider.base_url, "");
    let cwd = tempfile::tempdir().unwrap();
    let server = WsServer::start(home.path(), "127.0.0.1:0", None).await;
    let pid = server.child.id().unwrap();
    let before = super::support::peak_rss_kb(pid);
    // A stalled client's small window: the kernel takes little of what herald writes, so
    // herald's writes stall at once (not after tens of MB of kernel buffers).
    let addr: std::net::SocketAddr = server.url["ws://".len()..]
        .split('/')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let tcp = tokio::net::TcpSocket::new_v4().unwrap();
    tcp.set_recv_buffer_size(64 * 1024).unwrap();
    let tcp = tcp.connect(addr).await.unwrap();
    let (server_port, client_port) = (addr.port(), tcp.local_addr().unwrap().port());
    let (mut socket, _) = tokio_tungstenite::client_async(server.request(&server.token, None), tcp)
        .await
        .unwrap();
    let call = |id: u64, method: &str, params: Value| {
        let text = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        Message::Text(text.to_string().into())
    };
    socket
        .send(call(1, "session.create", json!({"cwd": cwd.path()})))
        .await
        .unwrap();
    let session_id = loop {
        let Some(Ok(Message::Text(t))) = socket.next().await else {
            panic!("the socket ended");
        };
        let v: Value = serde_json::from_str(t.as_str()).unwrap();
        if v["id"] == 1 {
            break v["result"]["session_id"].as_str().unwrap().to_owned();
        }
    };
    let submit = json!({"session_id": session_id, "text": "talk"});
    socket.send(call(2, "prompt.submit", submit)).await.unwrap();
    // Read nothing until herald's writes stall (the kernel's buffers, 4 MB on loopback,
    // full: several seconds in on a busy machine), then 12 s more (past the 10 s write
    // timeout).
    let started = std::time::Instant::now();
    let mut stalled: Option<(std::time::Instant, u64)> = None;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let grown = super::support::peak_rss_kb(pid).saturating_sub(before);
        // The kernel holds several MB the client never read, and the run's partial answer
        // is stored (a few copies of it) when it stops; nothing grows past that.
        assert!(
            grown < 192 * 1024,
            "herald grew {grown} kB for a client that reads nothing"
        );
        let unsent = super::support::unsent_bytes(server_port, client_port);
        stalled = match stalled {
            Some((since, was)) if was == unsent => Some((since, was)),
            _ => Some((std::time::Instant::now(), unsent)),
        };
        if stalled
            .is_some_and(|(since, unsent)| unsent > 0 && since.elapsed() > Duration::from_secs(12))
        {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "herald's writes to a client that reads nothing never stalled"
        );
    }
    eprintln!(
        "peak RSS grew {} kB while a WebSocket client read nothing",
        super::support::peak_rss_kb(pid).saturating_sub(before)
    );
    // What was written is there to read, then the connection ends: herald let it go.
    let drained = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(Ok(m)) = socket.next().await {
            if m.is_close() {
                break;
            }
        }
    })
    .await;
    assert!(drained.is_ok(), "herald kept a client that read nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_sent_during_a_turn_follows_display_busy_input_mode() {
    let slow =
        |text: &str| Scripted::Delayed(Duration::from_millis(1500), Box::new(Scripted::text(text)));
    let provider = FakeProvider::start(vec![
        // interrupt (the default): the first turn is cut short, the second runs.
        slow("never seen"),
        Scripted::text("Second."),
        // queue: the first turn finishes, then the queued one runs.
        slow("First."),
        Scripted::text("Queued one."),
        // steer: the text joins the running turn at its tool result.
        Scripted::tool_calls(&[("s1", "terminal", r#"{"command": "sleep 1"}"#)]),
        Scripted::text("Steered."),
    ]);
    let home = rpc_home(&provider.base_url, "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    let submit = |text: &str| json!({"session_id": sid, "text": text});
    let complete_texts = |events: &[Value]| -> Vec<(String, String)> {
        events
            .iter()
            .filter(|e| e["type"] == "message.complete")
            .map(|e| {
                let p = &e["payload"];
                (
                    p["status"].as_str().unwrap_or_default().to_owned(),
                    p["text"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    };
    assert_eq!(
        c.call("config.get", json!({"key": "busy"})).await["value"],
        "interrupt"
    );
    let asked = |n: usize| {
        let started = std::time::Instant::now();
        while provider.requests().len() < n {
            assert!(started.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    c.call("prompt.submit", submit("one")).await;
    asked(1);
    let r = c.call("prompt.submit", submit("two")).await;
    assert_eq!(r["status"], "queued", "{r}");
    let mut events = c.until("message.complete").await;
    events.extend(c.until("message.complete").await);
    let done = complete_texts(&events);
    assert_eq!(done[0].0, "interrupted", "{done:?}");
    assert_eq!(done[1], ("complete".into(), "Second.".into()));
    // queue, set as the TUI's /busy sets it.
    let set = c
        .call("config.set", json!({"key": "busy", "value": "queue"}))
        .await;
    assert_eq!(set["value"], "queue");
    let saved = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(saved.contains("busy_input_mode: queue"), "{saved}");
    c.call("prompt.submit", submit("three")).await;
    asked(3);
    let r = c.call("prompt.submit", submit("four")).await;
    assert_eq!(r["status"], "queued", "{r}");
    let mut events = c.until("message.complete").await;
    events.extend(c.until("message.complete").await);
    let done = complete_texts(&events);
    assert_eq!(
        done,
        [
            ("complete".to_owned(), "First.".to_owned()),
            ("complete".to_owned(), "Queued one.".to_owned())
        ]
    );
    // steer, written by hand in config.yaml: read at the next reload (`reload.env`,
    // as SIGHUP), never parsed per prompt.
    let text = saved.replace("busy_input_mode: queue", "busy_input_mode: steer");
    std::fs::write(home.path().join("config.yaml"), text).unwrap();
    assert_eq!(
        c.call("config.get", json!({"key": "busy"})).await["value"],
        "queue"
    );
    c.call("reload.env", json!({})).await;
    c.call("prompt.submit", submit("five")).await;
    asked(5);
    let r = c.call("prompt.submit", submit("also this")).await;
    assert_eq!(r["status"], "steered", "{r}");
    let events = c.until("message.complete").await;
    assert_eq!(
        complete_texts(&events),
        [("complete".to_owned(), "Steered.".to_owned())]
    );
    let last = provider.requests().pop().unwrap().body["messages"].to_string();
    assert!(
        last.contains("also this"),
        "the steer reached the tool result: {last}"
    );
    assert_eq!(
        c.code("config.set", json!({"key": "busy", "value": "sometimes"}))
            .await,
        4002
    );
}

/// A stand-in for sudo on this machine (tests run as root, where sudo never asks): `-n`
/// fails as when a password is needed; `-S -p ''` reads one line and runs the command
/// only for the password `hunter2`.
const FAKE_SUDO: &str = "#!/bin/sh\nif [ \"$1\" = -n ]; then exit 1; fi\nif [ \"$1\" = -S ]; then shift 3; read -r pw; if [ \"$pw\" = hunter2 ]; then exec \"$@\"; fi; echo 'Sorry, try again.' >&2; exit 1; fi\necho 'sudo: a terminal is required to read the password' >&2; exit 1\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sudo_and_a_skills_secret_are_asked_through_the_tui_prompts() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("s1", "terminal", r#"{"command": "sudo echo elevated"}"#)]),
        Scripted::text("Ran it."),
        Scripted::tool_calls(&[("s2", "terminal", r#"{"command": "sudo echo again"}"#)]),
        Scripted::text("Again."),
        Scripted::tool_calls(&[("k1", "skill_view", r#"{"name": "weather"}"#)]),
        Scripted::text("Loaded."),
    ]);
    let home = rpc_home(&provider.base_url, "approvals:\n  mode: \"off\"\n");
    let bin = home.path().join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("sudo"), FAKE_SUDO).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("sudo"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let skill = home.path().join("skills/weather");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: weather\ndescription: forecasts\nrequired_environment_variables:\n  - name: WEATHER_KEY\n    prompt: Weather API key\n    help: https://weather.example/keys\n---\nUse $WEATHER_KEY.\n",
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut rpc = Piped::start_with(home.path(), &[("PATH", &path)]);
    let c = &mut rpc.client;
    let sid = c.session().await;
    c.call(
        "prompt.submit",
        json!({"session_id": sid, "text": "use sudo"}),
    )
    .await;
    let asked = c.until("sudo.request").await;
    let request = asked.last().unwrap()["payload"].clone();
    let id = request["request_id"].as_str().unwrap().to_owned();
    assert_eq!(id.len(), 8, "{request}");
    assert_eq!(
        request.as_object().unwrap().len(),
        1,
        "only the id: {request}"
    );
    let r = c
        .call(
            "sudo.respond",
            json!({"request_id": id, "password": "hunter2"}),
        )
        .await;
    assert_eq!(r["status"], "ok");
    c.until("message.complete").await;
    let sent = provider.requests()[1].body["messages"].to_string();
    assert!(
        sent.contains("elevated") && !sent.contains("hunter2"),
        "{sent}"
    );
    // Answered once: the session keeps it, and the next sudo asks nothing.
    let events = c.turn(&sid, "again").await;
    assert!(
        events.iter().all(|e| e["type"] != "sudo.request"),
        "{events:?}"
    );
    assert!(
        provider.requests()[3].body["messages"]
            .to_string()
            .contains("again")
    );
    // A skill whose variable is missing asks for it; the answer goes to .env (0600).
    c.call(
        "prompt.submit",
        json!({"session_id": sid, "text": "weather"}),
    )
    .await;
    let asked = c.until("secret.request").await;
    let request = asked.last().unwrap()["payload"].clone();
    assert_eq!(request["env_var"], "WEATHER_KEY", "{request}");
    assert_eq!(request["prompt"], "Weather API key");
    assert_eq!(request["metadata"]["skill_name"], "weather");
    assert_eq!(request["metadata"]["help"], "https://weather.example/keys");
    let id = request["request_id"].as_str().unwrap().to_owned();
    let r = c
        .call(
            "secret.respond",
            json!({"request_id": id, "value": "abc 123"}),
        )
        .await;
    assert_eq!(r["status"], "ok");
    c.until("message.complete").await;
    let env = std::fs::read_to_string(home.path().join(".env")).unwrap();
    assert!(env.contains("WEATHER_KEY='abc 123'"), "{env}");
    let mode = std::fs::metadata(home.path().join(".env"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let result = provider.requests()[5].body["messages"].to_string();
    assert!(
        result.contains("available") && !result.contains("abc 123"),
        "{result}"
    );
    // Answering again: it waits no more.
    let late = c
        .call("secret.respond", json!({"request_id": id, "value": "x"}))
        .await;
    assert_eq!(late["status"], "expired");
    let log = std::fs::read_to_string(home.path().join("rpc.log")).unwrap();
    assert!(
        !log.contains("hunter2") && !log.contains("abc 123"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tui_hub_methods_answer_in_hermess_shapes() {
    let provider = FakeProvider::start(vec![Scripted::text("Hi.")]);
    let home = rpc_home(
        &provider.base_url,
        "providers:\n  spare:\n    base_url: http://127.0.0.1:9/v1\n    key_env: SPARE_KEY\n",
    );
    super::plugins::install_plugins(home.path(), &["context-demo"]);
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("src")).unwrap();
    std::fs::write(work.path().join("notes.txt"), "n").unwrap();
    let shot = work.path().join("shot.png");
    std::fs::write(&shot, b"\x89PNG\r\n\x1a\n").unwrap();
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let r = c.call("session.create", json!({"cwd": work.path()})).await;
    let sid = r["session_id"].as_str().unwrap().to_owned();
    c.until("session.info").await;
    c.turn(&sid, "hello").await;
    assert_eq!(
        c.call("setup.status", json!({})).await,
        json!({"provider_configured": true})
    );
    // session.save: the transcript as JSON under the home, only its owner's.
    let saved = c.call("session.save", json!({"session_id": sid})).await;
    let file = std::path::PathBuf::from(saved["file"].as_str().unwrap());
    assert!(
        file.starts_with(home.path().join("sessions/saved")),
        "{saved}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["messages"][0]["content"], "hello", "{doc}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // Completion.
    let slash = c.call("complete.slash", json!({"text": "/he"})).await;
    assert_eq!(
        slash["items"][0],
        json!({"text": "help", "display": "/help", "meta": "Show available commands"})
    );
    assert_eq!(slash["replace_from"], 1);
    let sub = c.call("complete.slash", json!({"text": "/busy st"})).await;
    assert_eq!(sub["replace_from"], 6, "{sub}");
    let path = c
        .call("complete.path", json!({"word": "s", "session_id": sid}))
        .await;
    let texts: Vec<&str> = path["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["shot.png", "src/"], "{path}");
    // A dropped image is attached; pastes are kept.
    let dropped = c
        .call(
            "input.detect_drop",
            json!({"session_id": sid, "text": format!("{} what is it", shot.display())}),
        )
        .await;
    assert_eq!(
        (dropped["matched"].clone(), dropped["is_image"].clone()),
        (json!(true), json!(true)),
        "{dropped}"
    );
    assert_eq!(dropped["text"], "what is it");
    let plain = c
        .call(
            "input.detect_drop",
            json!({"session_id": sid, "text": "just words"}),
        )
        .await;
    assert_eq!(plain, json!({"matched": false}));
    let paste = c.call("paste.collapse", json!({"text": "a\nb\nc"})).await;
    assert_eq!(paste["lines"], 3);
    assert!(
        paste["placeholder"]
            .as_str()
            .unwrap()
            .starts_with("[Pasted text #"),
        "{paste}"
    );
    assert_eq!(c.code("paste.collapse", json!({"text": ""})).await, 4004);
    // shell.exec: the TUI's !command; dangerous ones go to the agent.
    let shell = c.call("shell.exec", json!({"command": "echo hi"})).await;
    assert_eq!(
        (shell["stdout"].clone(), shell["code"].clone()),
        (json!("hi\n"), json!(0))
    );
    assert_eq!(
        c.code("shell.exec", json!({"command": "rm -rf /"})).await,
        4005
    );
    // Skills and plugins hubs.
    let skills = c.call("skills.manage", json!({"action": "list"})).await;
    assert!(
        skills["skills"]
            .to_string()
            .contains("webhook-subscriptions"),
        "{skills}"
    );
    let found = c
        .call(
            "skills.manage",
            json!({"action": "search", "query": "review"}),
        )
        .await;
    assert!(
        found["results"].to_string().contains("github-code-review"),
        "{found}"
    );
    assert_eq!(
        c.code("skills.manage", json!({"action": "install", "query": "x"}))
            .await,
        5024
    );
    let reload = c.call("skills.reload", json!({})).await;
    assert!(
        reload["output"]
            .as_str()
            .unwrap()
            .ends_with("skill(s) available"),
        "{reload}"
    );
    let plugins = c.call("plugins.manage", json!({"action": "list"})).await;
    assert_eq!(plugins["plugins"][0]["name"], "context-demo", "{plugins}");
    assert_eq!(plugins["plugins"][0]["status"], "enabled");
    let off = c
        .call(
            "plugins.manage",
            json!({"action": "toggle", "name": "context-demo", "enable": false}),
        )
        .await;
    assert_eq!(
        (off["ok"].clone(), off["plugin"]["status"].clone()),
        (json!(true), json!("not enabled")),
        "{off}"
    );
    // Checkpoints: none kept.
    assert_eq!(
        c.call("rollback.list", json!({"session_id": sid})).await,
        json!({"enabled": false, "checkpoints": []})
    );
    assert_eq!(
        c.code("rollback.diff", json!({"session_id": sid})).await,
        4014
    );
    let restore = c
        .call(
            "rollback.restore",
            json!({"session_id": sid, "hash": "abc"}),
        )
        .await;
    assert_eq!(restore["success"], false);
    // /tools disable web: platform_toolsets.cli in config.yaml.
    let tools = c
        .call(
            "tools.configure",
            json!({"action": "disable", "names": ["web", "nope"]}),
        )
        .await;
    assert_eq!(tools["unknown"], json!(["nope"]), "{tools}");
    assert!(
        !tools["enabled_toolsets"].to_string().contains("\"web\""),
        "{tools}"
    );
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(config.contains("platform_toolsets"), "{config}");
    // The picker's key entry: written to .env, and taken out again.
    let saved = c
        .call(
            "model.save_key",
            json!({"slug": "spare", "api_key": "sk-spare-1"}),
        )
        .await;
    assert_eq!(saved["provider"]["authenticated"], true, "{saved}");
    let env = std::fs::read_to_string(home.path().join(".env")).unwrap();
    assert!(env.contains("SPARE_KEY=sk-spare-1"), "{env}");
    assert_eq!(
        c.code("model.save_key", json!({"slug": "nope", "api_key": "k"}))
            .await,
        4002
    );
    let gone = c.call("model.disconnect", json!({"slug": "spare"})).await;
    assert_eq!(gone["disconnected"], true);
    assert_eq!(
        c.code("model.disconnect", json!({"slug": "spare"})).await,
        4005
    );
    // Features herald does not have answer as Hermes does when they are off.
    assert_eq!(
        c.call("pet.cells", json!({})).await,
        json!({"enabled": false})
    );
    assert_eq!(c.call("billing.state", json!({})).await["logged_in"], false);
    assert_eq!(
        c.call("browser.manage", json!({"action": "status"})).await["connected"],
        false
    );
    assert_eq!(
        c.call("voice.toggle", json!({"action": "status"})).await["enabled"],
        false
    );
    assert_eq!(c.call("learning.frames", json!({})).await["count"], 0);
}

#[tokio::test]
async fn a_store_failure_reaches_rpc_and_acp_clients_as_a_generic_error_its_detail_in_the_log() {
    use super::acp::RawAcp;
    let home = rpc_home("http://127.0.0.1:9/v1", "");
    let mut rpc = Piped::start(home.path());
    let listed = rpc.client.call("session.list", json!({})).await;
    assert!(listed.is_object(), "{listed}");
    // The store breaks under herald: a table it reads is gone.
    let db = rusqlite::Connection::open(home.path().join("state.db")).unwrap();
    db.execute_batch("ALTER TABLE messages RENAME TO messages_gone;")
        .unwrap();
    let stored = "20261206_000000_abcdef";
    db.execute(
        "INSERT INTO sessions (id, source, started_at) VALUES (?1, 'cli', 1.0)",
        [stored],
    )
    .unwrap();
    drop(db);
    let answer = rpc
        .client
        .answer("session.resume", json!({"session_id": stored}))
        .await;
    let message = answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(message.contains("the reason is in its log"), "{answer}");
    assert!(!message.contains("messages"), "{answer}");
    let answer = rpc.client.answer("session.list", json!({})).await;
    let listed = answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(listed.contains("the reason is in its log"), "{answer}");
    drop(rpc);
    let log = std::fs::read_to_string(home.path().join("rpc.log")).unwrap();
    assert!(log.contains("no such table"), "the detail is logged: {log}");

    let mut acp = RawAcp::start(home.path()).await;
    acp.send(1, "initialize", json!({"protocolVersion": 1}))
        .await;
    acp.answer(1).await;
    let load = json!({"sessionId": stored, "cwd": home.path(), "mcpServers": []});
    acp.send(2, "session/load", load).await;
    let answer = loop {
        let m = acp.message().await;
        if m["id"] == 2 {
            break m;
        }
    };
    let text = answer["error"].to_string();
    assert!(text.contains("the reason is in its log"), "{answer}");
    assert!(!text.contains("no such table"), "{answer}");
}

/// A client that opens sessions without closing them (as IDEs and Hermes's clients do
/// over a day) is never refused: at the cap the least recently used idle session is
/// closed, stays stored, and comes back under its id on the client's next call.
#[tokio::test]
async fn the_live_session_cap_closes_idle_sessions_and_reopens_them_on_use() {
    let provider = FakeProvider::start(vec![Scripted::text("First answer.")]);
    provider.set_fallback(Scripted::text("Later answer."));
    let home = rpc_home(&provider.base_url, "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    c.event().await;
    let first = c.session().await;
    c.turn(&first, "hello").await;
    let mut ids = vec![first.clone()];
    for _ in 0..40 {
        ids.push(c.session().await);
    }
    let live = c.call("session.active_list", json!({})).await;
    let shown = live["sessions"].as_array().map_or(0, Vec::len);
    assert_eq!(shown, 16, "{live}");
    // The first was closed long ago; its client still holds the id and uses it.
    let history = c
        .call("session.history", json!({"session_id": first}))
        .await;
    let said: Vec<&str> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["text"].as_str())
        .collect();
    assert_eq!(said, vec!["hello", "First answer."], "{history}");
    let events = c.turn(&first, "again").await;
    assert_eq!(events.last().unwrap()["session_id"], first);
}

/// A session closed at the cap is reopened only for the connection that owned it:
/// another one gets 4001 as for any id it cannot see, and may take it over with
/// `session.activate` only once that connection is gone.
#[tokio::test]
async fn a_session_closed_at_the_cap_reopens_only_for_its_own_client() {
    let provider = FakeProvider::start(vec![]);
    let home = rpc_home(&provider.base_url, "");
    let server = WsServer::start(home.path(), "127.0.0.1:0", None).await;
    let (mut a, mut b) = (server.client(None).await, server.client(None).await);
    for c in [&mut a, &mut b] {
        assert_eq!(c.event().await["type"], "gateway.ready");
    }
    let first = a
        .call("session.create", json!({"close_on_disconnect": false}))
        .await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    a.until("session.info").await;
    for _ in 0..16 {
        b.session().await;
    }
    let listed = a.call("session.active_list", json!({})).await;
    assert_eq!(
        listed["sessions"],
        json!([]),
        "a's session was closed: {listed}"
    );
    let history = json!({"session_id": first});
    assert_eq!(b.code("session.history", history.clone()).await, 4001);
    assert_eq!(b.code("session.activate", history.clone()).await, 4001);
    a.call("session.history", history.clone()).await;
    // Closed again at the cap (16 newer sessions), then its client goes: the other may
    // take it over.
    for _ in 0..16 {
        b.session().await;
    }
    drop(a);
    let gone = json!({"session_id": first});
    let mut activated = None;
    for _ in 0..100 {
        let answer = b.answer("session.activate", gone.clone()).await;
        if answer.get("error").is_none() {
            activated = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let activated = activated.expect("session.activate never took the closed session over");
    assert_eq!(activated["result"]["session_id"], first, "{activated}");
}

/// `/status` and `/stop` come from the session's one command table over `slash.exec`:
/// the state of a running turn, then the turn stopped with its queue dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_status_and_stop_act_on_the_running_turn() {
    let provider = FakeProvider::start(vec![Scripted::Delayed(
        Duration::from_millis(3000),
        Box::new(Scripted::text("never seen")),
    )]);
    let home = rpc_home(&provider.base_url, "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    c.call("config.set", json!({"key": "busy", "value": "queue"}))
        .await;
    c.call("prompt.submit", json!({"session_id": sid, "text": "slow"}))
        .await;
    let started = std::time::Instant::now();
    while provider.requests().is_empty() {
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let queued = c
        .call("prompt.submit", json!({"session_id": sid, "text": "later"}))
        .await;
    assert_eq!(queued["status"], "queued", "{queued}");
    let slash = |line: &str| json!({"session_id": sid, "command": line});
    let status = c.call("slash.exec", slash("/status")).await;
    let shown = status["output"].as_str().unwrap_or_default();
    assert!(
        shown.contains("Running: yes") && shown.contains("Queued: 1"),
        "{status}"
    );
    let stop = c.call("slash.exec", slash("/stop")).await;
    assert_eq!(stop["output"], "⚡ Stopped. You can continue this session.");
    let events = c.until("message.complete").await;
    assert_eq!(events.last().unwrap()["payload"]["status"], "interrupted");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        provider.requests().len(),
        1,
        "the queued prompt was dropped"
    );
}

/// A tool that runs long tells so: `tool.progress` with its context and time, every
/// few seconds until it completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_running_tool_sends_tool_progress() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("long", "terminal", r#"{"command": "sleep 6"}"#)]),
        Scripted::text("Slept."),
    ]);
    let home = rpc_home(&provider.base_url, "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    c.call("prompt.submit", json!({"session_id": sid, "text": "wait"}))
        .await;
    let events = c.until("message.complete").await;
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let progress = events
        .iter()
        .find(|e| e["type"] == "tool.progress")
        .unwrap_or_else(|| panic!("no tool.progress: {kinds:?}"));
    let p = &progress["payload"];
    assert_eq!(
        (p["tool_id"].as_str(), p["name"].as_str()),
        (Some("long"), Some("terminal"))
    );
    let shown = p["preview"].as_str().unwrap();
    assert!(
        shown.starts_with("sleep 6 (") && shown.ends_with("s)"),
        "{shown}"
    );
    let at = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
    assert!(at("tool.start") < at("tool.progress") && at("tool.progress") < at("tool.complete"));
}

/// The settings Hermes's TUI toggles, answered as Hermes answers them: `fast` and the
/// reasoning effort kept with the session and sent with its requests, the session's
/// `yolo`, and the display toggles kept in config.yaml.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_get_and_set_serve_the_tuis_toggles() {
    let provider = FakeProvider::start(vec![Scripted::text("Quick.")]);
    let home = rpc_home(&provider.base_url, "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    let set = |key: &str, value: Value| json!({"session_id": sid, "key": key, "value": value});
    let get = |key: &str| json!({"session_id": sid, "key": key});
    assert_eq!(
        c.code("config.set", set("fast", json!("on"))).await,
        4002,
        "fake-model has no fast mode"
    );
    c.call("config.set", set("model", json!("gpt-5-mini")))
        .await;
    assert_eq!(
        c.call("config.set", set("fast", json!(""))).await["value"],
        "fast"
    );
    assert_eq!(c.call("config.get", get("fast")).await["value"], "fast");
    assert_eq!(
        c.call("config.set", set("reasoning", json!("high"))).await["value"],
        "high"
    );
    assert_eq!(
        c.code("config.set", set("reasoning", json!("loud"))).await,
        4002
    );
    let yolo = c.call("config.set", set("yolo", json!(true))).await;
    assert_eq!(
        (yolo["value"].as_str(), yolo["scope"].as_str()),
        (Some("1"), Some("session"))
    );
    c.call("prompt.submit", json!({"session_id": sid, "text": "go"}))
        .await;
    c.until("message.complete").await;
    let body = &provider.requests()[0].body;
    assert_eq!(
        (
            body["service_tier"].as_str(),
            body["reasoning_effort"].as_str()
        ),
        (Some("priority"), Some("high")),
        "{body}"
    );
    assert_eq!(body["model"], "gpt-5-mini");
    let info = c.call("session.status", json!({"session_id": sid})).await;
    assert!(info.to_string().contains("gpt-5-mini"), "{info}");
    // The display toggles: written to config.yaml and read back.
    assert_eq!(
        c.call("config.set", set("reasoning", json!("hide"))).await["value"],
        "hide"
    );
    let r = c.call("config.get", get("reasoning")).await;
    assert_eq!(
        (r["value"].as_str(), r["display"].as_str()),
        (Some("high"), Some("hide")),
        "{r}"
    );
    for (key, value, answer) in [
        ("skin", json!("mono"), "mono"),
        ("compact", json!(""), "on"),
        ("statusbar", json!("bottom"), "bottom"),
        ("mouse", json!(false), "off"),
        ("indicator", json!("emoji"), "emoji"),
        ("details_mode", json!("expanded"), "expanded"),
        ("thinking_mode", json!("truncated"), "truncated"),
        ("verbose", json!("new"), "new"),
    ] {
        assert_eq!(
            c.call("config.set", set(key, value)).await["value"],
            answer,
            "{key}"
        );
        assert_eq!(
            c.call("config.get", get(key)).await["value"],
            answer,
            "{key} read back"
        );
    }
    assert_eq!(
        c.call("config.set", set("details_mode.tools", json!("hidden")))
            .await["value"],
        "hidden"
    );
    let saved = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(
        saved.contains("skin: mono") && saved.contains("tools: hidden"),
        "{saved}"
    );
    assert_eq!(
        c.code("config.set", set("indicator", json!("blink"))).await,
        4002
    );
    assert_eq!(c.code("config.set", set("pets", json!("on"))).await, 4002);
    assert_eq!(c.code("config.get", get("pets")).await, 4002);
}

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
    send: mpsc::UnboundedSender<String>,
    waiting: Waiting,
    events: mpsc::UnboundedReceiver<Value>,
    next_id: u64,
}

impl Client {
    /// A client over a frame channel pair (lines of a pipe, messages of a socket).
    fn over(
        send: mpsc::UnboundedSender<String>,
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
        self.send.send(frame.to_owned()).unwrap();
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

    /// Events up to and including the first of type `kind`.
    pub async fn until(&mut self, kind: &str) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let e = self.event().await;
            let done = e["type"] == kind;
            seen.push(e);
            if done {
                return seen;
            }
        }
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

/// `herald rpc` on a pipe.
pub struct Piped {
    pub child: tokio::process::Child,
    pub client: Client,
}

impl Piped {
    pub fn start(home: &std::path::Path) -> Piped {
        let mut child = tokio::process::Command::new(BIN)
            .arg("rpc")
            .env("HERALD_HOME", home)
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(home.join("rpc.log")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, mut to_send) = mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            while let Some(frame) = to_send.recv().await {
                let mut bytes = frame.into_bytes();
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
    assert_eq!(t, json!({"title": "Greeting", "pending": false}));
    let t = c.call("session.title", json!({"session_id": sid})).await;
    assert_eq!(t["title"], "Greeting");
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

//! Fake platform servers on 127.0.0.1 that record what herald sent and answer from a
//! script (then a default answer), speaking each platform's wire format.

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: String,
    pub delay: Duration,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply {
            status,
            headers: vec![],
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }
    pub fn with_header(mut self, k: &'static str, v: &str) -> Reply {
        self.headers.push((k, v.to_owned()));
        self
    }
}

#[derive(Clone)]
struct State {
    recorded: Arc<Mutex<Vec<Recorded>>>,
    script: Arc<Mutex<VecDeque<Reply>>>,
    default: Arc<Mutex<Reply>>,
}

pub struct Fake {
    pub base: String,
    state: State,
    _runtime: std::thread::JoinHandle<()>,
}

impl Fake {
    /// Starts a fake answering `default` unless a scripted reply is queued.
    pub fn start(default: Reply) -> Fake {
        let state = State {
            recorded: Arc::default(),
            script: Arc::default(),
            default: Arc::new(Mutex::new(default)),
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let st = state.clone();
        let handle = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                let app = Router::new().fallback(handle).with_state(st);
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        Fake {
            base: format!("http://{addr}"),
            state,
            _runtime: handle,
        }
    }

    pub fn push(&self, reply: Reply) {
        self.state.script.lock().unwrap().push_back(reply);
    }

    pub fn set_default(&self, reply: Reply) {
        *self.state.default.lock().unwrap() = reply;
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.recorded.lock().unwrap().clone()
    }
}

async fn handle(
    axum::extract::State(st): axum::extract::State<State>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let raw = String::from_utf8_lossy(&body).into_owned();
    st.recorded.lock().unwrap().push(Recorded {
        method: method.to_string(),
        path: uri.to_string(),
        headers,
        body: serde_json::from_str(&raw).unwrap_or(Value::Null),
    });
    let reply = st
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| st.default.lock().unwrap().clone());
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut resp = (StatusCode::from_u16(reply.status).unwrap(), reply.body).into_response();
    resp.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    for (k, v) in reply.headers {
        resp.headers_mut().insert(k, v.parse().unwrap());
    }
    resp
}

pub fn telegram_ok() -> Reply {
    Reply::json(
        200,
        serde_json::json!({"ok": true, "result": {"message_id": 1}}),
    )
}

//! Dev-only test support: a fake OpenAI-compatible provider on 127.0.0.1 that answers
//! from a script in the real SSE wire format and records every request it got, so tests
//! assert what herald sent (messages, tools, model, headers).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

pub mod discord;
pub mod otlp;
pub mod postgres;
pub mod slack;
pub mod telegram;

/// Binds 127.0.0.1:0 and runs `serve(listener)` on a thread with its own runtime
/// (usable from sync and async tests); returns the address once it is listening.
pub fn listen_in_thread<F, Fut>(serve: F) -> (std::net::SocketAddr, std::thread::JoinHandle<()>)
where
    F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    listen_in_thread_on("127.0.0.1:0".into(), serve)
}

/// [`listen_in_thread`] on a given address (a test that needs a server to come up on
/// a port herald already knows).
pub fn listen_in_thread_on<F, Fut>(
    addr: String,
    serve: F,
) -> (std::net::SocketAddr, std::thread::JoinHandle<()>)
where
    F: FnOnce(tokio::net::TcpListener) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let (tx, rx) = std::sync::mpsc::channel();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            serve(listener).await;
        });
    });
    (rx.recv().unwrap(), thread)
}

/// Serves an axum app on 127.0.0.1 from a thread of its own.
pub fn serve_in_thread(app: Router) -> (std::net::SocketAddr, std::thread::JoinHandle<()>) {
    listen_in_thread(move |listener| async move {
        axum::serve(listener, app).await.unwrap();
    })
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Scripted {
    /// `data:` events, then `data: [DONE]`.
    Events(Vec<Value>),
    Status(u16, String),
    /// A whole (non-streamed) JSON completion, `content-type: application/json`, as some
    /// proxies answer even a `stream: true` request.
    Json(Value),
    /// `data:` events sent `gap` apart (a slow model), then `data: [DONE]`.
    Trickle(Vec<Value>, std::time::Duration),
    /// Waits this long, then answers as the inner script says.
    Delayed(std::time::Duration, Box<Scripted>),
}

impl Scripted {
    /// A text answer in `parts`, each its own delta event (for [`Scripted::Trickle`]).
    pub fn text_events(parts: &[&str]) -> Vec<Value> {
        let mut events: Vec<Value> = parts
            .iter()
            .map(|p| json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": p}}]}))
            .collect();
        events.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
        events
    }

    /// A plain text answer.
    pub fn text(text: &str) -> Scripted {
        Scripted::Events(vec![
            json!({"id": "r", "model": "fake", "created": 1, "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}),
        ])
    }

    /// Tool calls: (id, name, arguments JSON text), split into fragments like real servers.
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Scripted {
        let mut events = Vec::new();
        for (i, (id, name, args)) in calls.iter().enumerate() {
            events.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}}]}));
            let mid = args.len() / 2;
            let (a, b) = args.split_at(
                args.char_indices()
                    .map(|(i, _)| i)
                    .find(|i| *i >= mid)
                    .unwrap_or(0),
            );
            for part in [a, b] {
                events.push(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": part}}]}}]}));
            }
        }
        events.push(json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}));
        Scripted::Events(events)
    }
}

/// A recorded request.
#[derive(Debug, Clone)]
pub struct Request {
    pub headers: HeaderMap,
    pub body: Value,
}

/// Answers kept for the requests whose system message holds the text.
type Keyed = (String, VecDeque<Scripted>);

#[derive(Clone, Default)]
struct State {
    script: Arc<Mutex<VecDeque<Scripted>>>,
    /// Answers for requests whose system message holds the text (several agents
    /// talking to one provider at once: a parent and its subagents).
    keyed: Arc<Mutex<Vec<Keyed>>>,
    fallback: Arc<Mutex<Option<Scripted>>>,
    requests: Arc<Mutex<Vec<Request>>>,
}

/// The fake provider; its base URL ends in `/v1`.
pub struct FakeProvider {
    pub base_url: String,
    state: State,
    _thread: std::thread::JoinHandle<()>,
}

impl FakeProvider {
    /// Starts on its own thread and runtime (usable from sync and async tests).
    pub fn start(script: Vec<Scripted>) -> FakeProvider {
        Self::start_on("127.0.0.1:0", script)
    }

    /// Starts on a given address (e.g. a port herald was told about while it was down).
    pub fn start_on(addr: &str, script: Vec<Scripted>) -> FakeProvider {
        let state = State {
            script: Arc::new(Mutex::new(script.into())),
            ..Default::default()
        };
        let app = Router::new()
            .route("/v1/chat/completions", axum::routing::post(handle))
            .route(
                "/v1/models",
                axum::routing::get(|| async {
                    axum::Json(json!({"object": "list", "data": [{"id": "fake-model", "object": "model"}, {"id": "fake-large", "object": "model"}]}))
                }),
            )
            // Real providers take long transcripts; axum's default is 2 MB.
            .layer(axum::extract::DefaultBodyLimit::max(64 << 20))
            .with_state(state.clone());
        let (addr, thread) = listen_in_thread_on(addr.to_owned(), move |listener| async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeProvider {
            base_url: format!("http://{addr}/v1"),
            state,
            _thread: thread,
        }
    }

    /// Queues another answer.
    pub fn push(&self, s: Scripted) {
        self.state.script.lock().unwrap().push_back(s);
    }

    /// Queues an answer for the next request whose system message contains `needle`
    /// (checked before the plain script, in the order the needles were first given).
    pub fn push_when(&self, needle: &str, s: Scripted) {
        let mut keyed = self.state.keyed.lock().unwrap();
        match keyed.iter_mut().find(|(n, _)| n == needle) {
            Some((_, queue)) => queue.push_back(s),
            None => keyed.push((needle.to_owned(), VecDeque::from([s]))),
        }
    }

    /// The answer given when the script is used up.
    pub fn set_fallback(&self, s: Scripted) {
        *self.state.fallback.lock().unwrap() = Some(s);
    }

    pub fn requests(&self) -> Vec<Request> {
        self.state.requests.lock().unwrap().clone()
    }
}

async fn handle(
    axum::extract::State(st): axum::extract::State<State>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let system = body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    st.requests.lock().unwrap().push(Request { headers, body });
    let keyed = st
        .keyed
        .lock()
        .unwrap()
        .iter_mut()
        .find(|(needle, queue)| system.contains(needle.as_str()) && !queue.is_empty())
        .and_then(|(_, queue)| queue.pop_front());
    let next = keyed
        .or_else(|| st.script.lock().unwrap().pop_front())
        .or_else(|| st.fallback.lock().unwrap().clone());
    answer(next).await
}

async fn answer(next: Option<Scripted>) -> Response {
    match next {
        Some(Scripted::Delayed(wait, inner)) => {
            tokio::time::sleep(wait).await;
            Box::pin(answer(Some(*inner))).await
        }
        Some(Scripted::Events(events)) => {
            let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
            text.push_str("data: [DONE]\n\n");
            ([("content-type", "text/event-stream")], text).into_response()
        }
        Some(Scripted::Json(body)) => axum::Json(body).into_response(),
        Some(Scripted::Trickle(events, gap)) => {
            let mut frames: Vec<String> = events.iter().map(|e| format!("data: {e}\n\n")).collect();
            frames.push("data: [DONE]\n\n".to_owned());
            let stream = futures_util::stream::unfold(
                (frames.into_iter(), true),
                move |(mut rest, first)| async move {
                    if !first {
                        tokio::time::sleep(gap).await;
                    }
                    let frame = rest.next()?;
                    Some((Ok::<_, std::convert::Infallible>(frame), (rest, false)))
                },
            );
            (
                [("content-type", "text/event-stream")],
                axum::body::Body::from_stream(stream),
            )
                .into_response()
        }
        Some(Scripted::Status(code, body)) => {
            (StatusCode::from_u16(code).unwrap(), body).into_response()
        }
        None => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "fake provider: script exhausted",
        )
            .into_response(),
    }
}

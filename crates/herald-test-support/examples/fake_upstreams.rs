//! Instant fake upstreams for `bench/inbox_load.py`: an OpenAI-compatible provider that
//! streams `done: <the user's message>` (real SSE), and a Telegram Bot API that accepts
//! every `sendMessage` and counts the texts it got, so the load script can check that
//! every event was delivered exactly once (`GET /stats`).
//!
//! A user message `flood N` instead gets an answer of N MiB (64 KiB deltas, made as the
//! socket takes them), for `bench/hostile.py`'s clients that never read.
//!
//! Usage: fake_upstreams [ADDR]   (default 127.0.0.1:0; prints `listening on ADDR`)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Counts {
    provider_calls: u64,
    texts: HashMap<String, u64>,
}

type Shared = Arc<Mutex<Counts>>;

async fn completions(State(st): State<Shared>, body: Bytes) -> Response {
    st.lock().unwrap().provider_calls += 1;
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let last_user = req["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned();
    if let Some(mib) = last_user
        .strip_prefix("flood ")
        .and_then(|n| n.parse::<usize>().ok())
    {
        return flood(mib);
    }
    let events = [
        json!({"id": "r", "model": "fake", "created": 1, "choices": [{"index": 0, "delta": {"role": "assistant", "content": format!("done: {last_user}")}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ];
    let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    text.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], text).into_response()
}

/// An answer of `mib` MiB streamed lazily: memory stays flat however much is asked.
fn flood(mib: usize) -> Response {
    let delta = |text: &str| {
        let e = json!({"choices": [{"index": 0, "delta": {"content": text}}]});
        Bytes::from(format!("data: {e}\n\n"))
    };
    let part = delta(&"z".repeat(64 * 1024));
    let parts = std::iter::repeat_n(part, mib * 16);
    let end = [
        delta(""),
        Bytes::from_static(b"data: {\"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"stop\"}]}\n\n"),
        Bytes::from_static(b"data: [DONE]\n\n"),
    ];
    let frames = parts.chain(end).map(Ok::<_, std::convert::Infallible>);
    let body = axum::body::Body::from_stream(futures_util::stream::iter(frames));
    ([("content-type", "text/event-stream")], body).into_response()
}

async fn telegram(State(st): State<Shared>, uri: axum::http::Uri, body: Bytes) -> Response {
    if !uri.path().ends_with("/sendMessage") {
        return (axum::http::StatusCode::NOT_FOUND, "not found").into_response();
    }
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let text = req["text"].as_str().unwrap_or("").to_owned();
    *st.lock().unwrap().texts.entry(text).or_insert(0) += 1;
    (
        [("content-type", "application/json")],
        json!({"ok": true, "result": {"message_id": 1}}).to_string(),
    )
        .into_response()
}

async fn stats(State(st): State<Shared>) -> Response {
    let c = st.lock().unwrap();
    let messages: u64 = c.texts.values().sum();
    let duplicates = c.texts.values().filter(|n| **n > 1).count();
    (
        [("content-type", "application/json")],
        json!({
            "provider_calls": c.provider_calls,
            "messages": messages,
            "unique": c.texts.len(),
            "duplicated_texts": duplicates,
        })
        .to_string(),
    )
        .into_response()
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let state: Shared = Arc::default();
    let app = Router::new()
        .route("/v1/chat/completions", post(completions))
        .route("/stats", get(stats))
        // `/bot<token>/sendMessage`
        .fallback(telegram)
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
    println!("listening on {}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.unwrap();
}

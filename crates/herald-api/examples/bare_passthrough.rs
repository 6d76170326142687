//! The API load script's floor: a bare pass-through server that parses a chat
//! completion request, forwards it to the provider over one pooled client, and returns
//! the provider's answer (streamed through as it comes). No auth, no sessions, no agent.
//!
//! Usage: bare_passthrough LISTEN_ADDR PROVIDER_BASE_URL
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use serde_json::Value;

#[derive(Clone)]
struct Upstream {
    client: reqwest::Client,
    url: String,
}

async fn forward(State(up): State<Upstream>, body: Bytes) -> Response {
    let mut request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    request["stream"] = Value::Bool(true);
    let answer = up.client.post(&up.url).json(&request).send().await.unwrap();
    let stream = answer.bytes_stream();
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:18650".into());
    let base = args.next().expect("the provider's base URL");
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async move {
            let up = Upstream {
                client: reqwest::Client::new(),
                url: format!("{base}/chat/completions"),
            };
            let app = Router::new()
                .route("/v1/chat/completions", post(forward))
                .with_state(up);
            let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
            println!("bare passthrough listening on http://{addr}");
            axum::serve(listener, app).await.unwrap();
        });
}

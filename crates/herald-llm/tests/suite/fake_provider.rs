//! The client against a local fake provider that speaks SSE and records what it got.

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald_llm::{DeltaEvent, Endpoint, ErrorClass, LlmClient, RetryConfig};
use herald_protocol::{ChatMessage, FunctionSpec, ToolSpec};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone)]
enum Answer {
    Sse(Vec<String>),
    Raw(String),
    Status(u16, String),
    Stall(Vec<String>, Duration),
}

#[derive(Clone, Default)]
struct Fake {
    answers: Arc<Mutex<VecDeque<Answer>>>,
    seen: Arc<Mutex<Vec<(HeaderMap, Value)>>>,
}

async fn handler(
    axum::extract::State(f): axum::extract::State<Fake>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    f.seen.lock().unwrap().push((
        headers,
        serde_json::from_slice(&body).unwrap_or(Value::Null),
    ));
    let answer = f
        .answers
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Answer::Status(500, "no scripted answer".into()));
    let sse = |events: Vec<String>| {
        events
            .into_iter()
            .map(|e| format!("data: {e}\n\n"))
            .collect::<String>()
    };
    match answer {
        Answer::Sse(events) => {
            ([("content-type", "text/event-stream")], sse(events)).into_response()
        }
        Answer::Raw(text) => ([("content-type", "text/event-stream")], text).into_response(),
        Answer::Status(code, body) => (StatusCode::from_u16(code).unwrap(), body).into_response(),
        Answer::Stall(events, wait) => {
            let first = sse(events);
            let stream = futures_util::stream::unfold(0u8, move |state| {
                let first = first.clone();
                async move {
                    match state {
                        0 => Some((Ok::<_, std::io::Error>(Bytes::from(first)), 1)),
                        1 => {
                            tokio::time::sleep(wait).await;
                            Some((Ok(Bytes::from_static(b"data: [DONE]\n\n")), 2))
                        }
                        _ => None,
                    }
                }
            });
            (
                [("content-type", "text/event-stream")],
                axum::body::Body::from_stream(stream),
            )
                .into_response()
        }
    }
}

async fn start(answers: Vec<Answer>) -> (Fake, String) {
    let fake = Fake {
        answers: Arc::new(Mutex::new(answers.into())),
        ..Default::default()
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new()
        .route("/v1/chat/completions", axum::routing::post(handler))
        .with_state(fake.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (fake, format!("http://{addr}/v1"))
}

fn text_chunk(text: &str) -> String {
    json!({"id": "c1", "model": "m", "created": 1, "choices": [{"index": 0, "delta": {"content": text}}]}).to_string()
}

fn finish_chunk(reason: &str) -> String {
    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}).to_string()
}

fn usage_chunk() -> String {
    json!({"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}).to_string()
}

fn fast_retry() -> RetryConfig {
    RetryConfig {
        max_attempts: 3,
        base: Duration::from_millis(10),
        cap: Duration::from_millis(50),
    }
}

fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        kind: "function".into(),
        function: FunctionSpec {
            name: "terminal".into(),
            description: "Run a command".into(),
            parameters: json!({"type": "object"}),
        },
    }]
}

#[tokio::test]
async fn plain_answer_with_usage_and_what_was_sent() {
    let (fake, base) = start(vec![Answer::Sse(vec![
        text_chunk("Hel"),
        json!({"choices": [{"index": 0, "delta": {"reasoning": "think"}}]}).to_string(),
        text_chunk("lo"),
        finish_chunk("stop"),
        usage_chunk(),
        "[DONE]".into(),
    ])])
    .await;
    let mut endpoint = Endpoint::new(&base, "sk-test", "my-model");
    endpoint.max_tokens = Some(100);
    endpoint
        .extra_headers
        .push(("X-Title".into(), "herald".into()));
    endpoint.extra_body.insert("temperature".into(), json!(0.5));
    let mut deltas = Vec::new();
    let out = LlmClient::new()
        .chat(
            &endpoint,
            &[ChatMessage::system("sys"), ChatMessage::user("hi")],
            &tools(),
            &fast_retry(),
            &mut |d| deltas.push(d),
        )
        .await
        .unwrap();
    let msg = &out.completion.choices[0].message;
    assert_eq!(msg.content.as_deref(), Some("Hello"));
    assert_eq!(msg.reasoning.as_deref(), Some("think"));
    assert_eq!(out.completion.usage.total_tokens, 18);
    assert_eq!(
        out.completion.choices[0].finish_reason.as_deref(),
        Some("stop")
    );
    assert_eq!(
        deltas,
        vec![
            DeltaEvent::Text("Hel".into()),
            DeltaEvent::Reasoning("think".into()),
            DeltaEvent::Text("lo".into())
        ]
    );
    let seen = fake.seen.lock().unwrap();
    let (headers, body) = &seen[0];
    assert_eq!(headers["authorization"], "Bearer sk-test");
    assert_eq!(headers["x-title"], "herald");
    assert_eq!(
        body,
        &json!({
            "model": "my-model",
            "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": [{"type": "function", "function": {"name": "terminal", "description": "Run a command", "parameters": {"type": "object"}}}],
            "max_tokens": 100,
            "temperature": 0.5
        })
    );
}

#[tokio::test]
async fn parallel_tool_calls_assemble_by_index() {
    let tc = |index: u32, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut f = json!({"arguments": args});
        if let Some(n) = name {
            f["name"] = json!(n);
        }
        let mut call = json!({"index": index, "type": "function", "function": f});
        if let Some(i) = id {
            call["id"] = json!(i);
        }
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}).to_string()
    };
    let (_, base) = start(vec![Answer::Sse(vec![
        tc(0, Some("call_1"), Some("terminal"), ""),
        tc(1, Some("call_2"), Some("read_file"), "{\"pa"),
        tc(0, None, None, "{\"command\":"),
        tc(1, None, None, "th\": \"x\"}"),
        tc(0, None, None, " \"true\"}"),
        finish_chunk("tool_calls"),
        "[DONE]".into(),
    ])])
    .await;
    let mut started = Vec::new();
    let out = LlmClient::new()
        .chat(
            &Endpoint::new(&base, "k", "m"),
            &[ChatMessage::user("go")],
            &tools(),
            &fast_retry(),
            &mut |d| {
                if let DeltaEvent::ToolCallStarted { name, .. } = d {
                    started.push(name)
                }
            },
        )
        .await
        .unwrap();
    let calls = &out.completion.choices[0].message.tool_calls;
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (
            calls[0].id.as_str(),
            calls[0].function.name.as_str(),
            calls[0].function.arguments.as_str()
        ),
        ("call_1", "terminal", "{\"command\": \"true\"}")
    );
    assert_eq!(
        (calls[1].id.as_str(), calls[1].function.arguments.as_str()),
        ("call_2", "{\"path\": \"x\"}")
    );
    assert_eq!(out.completion.choices[0].message.content, None);
    assert_eq!(started, vec!["terminal", "read_file"]);
}

#[tokio::test]
async fn rate_limit_and_server_errors_are_retried() {
    let ok = Answer::Sse(vec![
        text_chunk("ok"),
        finish_chunk("stop"),
        "[DONE]".into(),
    ]);
    let (fake, base) = start(vec![
        Answer::Status(
            429,
            json!({"error": {"message": "slow down", "type": "rate_limit"}}).to_string(),
        ),
        Answer::Status(502, "bad gateway".into()),
        ok,
    ])
    .await;
    let out = LlmClient::new()
        .chat(
            &Endpoint::new(&base, "k", "m"),
            &[ChatMessage::user("x")],
            &[],
            &fast_retry(),
            &mut |_| {},
        )
        .await
        .unwrap();
    assert_eq!(out.attempts, 3);
    assert_eq!(fake.seen.lock().unwrap().len(), 3);
    // Exhausted retries keep the last error's class.
    let (_, base) = start(vec![
        Answer::Status(500, "a".into()),
        Answer::Status(500, "b".into()),
        Answer::Status(503, "c".into()),
    ])
    .await;
    let err = LlmClient::new()
        .chat(
            &Endpoint::new(&base, "k", "m"),
            &[ChatMessage::user("x")],
            &[],
            &fast_retry(),
            &mut |_| {},
        )
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Overloaded);
}

#[tokio::test]
async fn permanent_errors_are_not_retried() {
    let (fake, base) = start(vec![Answer::Status(
        401,
        json!({"error": {"message": "invalid api key"}}).to_string(),
    )])
    .await;
    let err = LlmClient::new()
        .chat(
            &Endpoint::new(&base, "k", "m"),
            &[ChatMessage::user("x")],
            &[],
            &fast_retry(),
            &mut |_| {},
        )
        .await
        .unwrap_err();
    assert_eq!((err.class, err.status), (ErrorClass::Auth, Some(401)));
    assert!(err.message.contains("invalid api key"));
    assert_eq!(fake.seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn malformed_truncated_and_empty_streams_are_invalid_responses() {
    for answer in [
        Answer::Sse(vec!["{not json".into()]),
        Answer::Raw(format!("data: {}\n\n", text_chunk("cut off"))),
        Answer::Sse(vec![usage_chunk(), "[DONE]".into()]),
        Answer::Sse(vec![
            json!({"error": {"message": "upstream overloaded", "code": 503}}).to_string(),
        ]),
    ] {
        let (_, base) = start(vec![answer.clone(), answer.clone(), answer]).await;
        let err = LlmClient::new()
            .chat(
                &Endpoint::new(&base, "k", "m"),
                &[ChatMessage::user("x")],
                &[],
                &fast_retry(),
                &mut |_| {},
            )
            .await
            .unwrap_err();
        assert!(err.retryable(), "{err:?}");
    }
    // A stream that ends without [DONE] but with a finish reason is complete.
    let (_, base) = start(vec![Answer::Raw(format!(
        "data: {}\n\ndata: {}\n\n",
        text_chunk("fine"),
        finish_chunk("stop")
    ))])
    .await;
    let out = LlmClient::new()
        .chat(
            &Endpoint::new(&base, "k", "m"),
            &[ChatMessage::user("x")],
            &[],
            &fast_retry(),
            &mut |_| {},
        )
        .await
        .unwrap();
    assert_eq!(
        out.completion.choices[0].message.content.as_deref(),
        Some("fine")
    );
}

#[tokio::test]
async fn a_stalled_stream_times_out_and_is_retried() {
    let (_, base) = start(vec![
        Answer::Stall(vec![text_chunk("partial")], Duration::from_secs(5)),
        Answer::Sse(vec![
            text_chunk("whole"),
            finish_chunk("stop"),
            "[DONE]".into(),
        ]),
    ])
    .await;
    let mut endpoint = Endpoint::new(&base, "k", "m");
    endpoint.stale_timeout = Duration::from_millis(300);
    let started = std::time::Instant::now();
    let out = LlmClient::new()
        .chat(
            &endpoint,
            &[ChatMessage::user("x")],
            &[],
            &fast_retry(),
            &mut |_| {},
        )
        .await
        .unwrap();
    assert_eq!(
        out.completion.choices[0].message.content.as_deref(),
        Some("whole")
    );
    assert_eq!(out.attempts, 2);
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn provider_down_is_a_network_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = LlmClient::new()
        .chat(
            &Endpoint::new(format!("http://127.0.0.1:{port}/v1"), "k", "m"),
            &[ChatMessage::user("x")],
            &[],
            &fast_retry(),
            &mut |_| {},
        )
        .await
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Network);
}

#[test]
fn the_request_bytes_are_the_request_body_serialized() {
    let tool = ToolSpec {
        kind: "function".into(),
        function: FunctionSpec {
            name: "terminal".into(),
            description: "Run a command \"quoted\" \u{2713}".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
        },
    };
    let messages = vec![
        ChatMessage::system("be brief"),
        ChatMessage::user("hi \u{1F600} \\ \"x\""),
    ];
    let mut endpoint = Endpoint::new("http://x/v1", "k", "m");
    let same = |e: &Endpoint, tools: &[ToolSpec]| {
        let tree = serde_json::to_vec(&LlmClient::request_body(e, &messages, tools)).unwrap();
        assert_eq!(
            String::from_utf8(LlmClient::request_bytes(e, &messages, tools)).unwrap(),
            String::from_utf8(tree).unwrap()
        );
    };
    same(&endpoint, &[]);
    same(&endpoint, std::slice::from_ref(&tool));
    endpoint.max_tokens = Some(99);
    endpoint.extra_body.insert("temperature".into(), json!(0.2));
    same(&endpoint, std::slice::from_ref(&tool));
    endpoint.extra_body.insert("model".into(), json!("other"));
    endpoint.extra_body.insert("stream".into(), json!(false));
    same(&endpoint, &[tool]);
}

#[tokio::test]
async fn a_configured_key_alone_authenticates_and_url_credentials_only_stand_in_for_none() {
    let answer = || {
        Answer::Sse(vec![
            text_chunk("ok"),
            finish_chunk("stop"),
            "[DONE]".into(),
        ])
    };
    let (fake, base) = start(vec![answer(), answer()]).await;
    let with_userinfo = base.replacen("http://", "http://alice:hunter2@", 1);
    let messages = [ChatMessage::user("hi")];
    for key in ["sk-configured", ""] {
        let endpoint = Endpoint::new(&with_userinfo, key, "m");
        LlmClient::new()
            .chat(&endpoint, &messages, &[], &fast_retry(), &mut |_| {})
            .await
            .unwrap();
    }
    let seen = fake.seen.lock().unwrap();
    let auth = |i: usize| -> Vec<String> {
        seen[i]
            .0
            .get_all("authorization")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(auth(0), ["Bearer sk-configured"], "one header: the key's");
    // Basic base64("alice:hunter2").
    assert_eq!(auth(1), ["Basic YWxpY2U6aHVudGVyMg=="]);
}

//! The OpenAI-compatible API: the real binary on an ephemeral port, a fake provider
//! speaking the real SSE format, raw HTTP for exact bytes, headers and codes.

use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

pub const KEY: &str = "test-api-key-0123456789";

/// A config with only the API server, on an ephemeral port, and a model on `provider`.
pub fn api_config(provider: &str, extra: &str) -> String {
    format!(
        "model:\n  default: fake-model\n  base_url: {provider}\nagent:\n  api_max_retries: 1\nplatforms:\n  api_server:\n    enabled: true\n    extra:\n      port: 0\n      key: {KEY}\n{extra}"
    )
}

fn client() -> reqwest::Client {
    http_client(Duration::from_secs(30))
}

/// Sends `method path` with the key, `body` as JSON and `headers`.
pub(super) async fn call(
    h: &Herald,
    method: &str,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = client()
        .request(method.parse().unwrap(), h.url(path))
        .header("Authorization", format!("Bearer {KEY}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    req.send().await.unwrap()
}

/// POSTs `body` with the key; the status and JSON answer.
pub(super) async fn post_json(h: &Herald, path: &str, body: Value) -> (StatusCode, Value) {
    json_of(call(h, "POST", path, Some(body), &[]).await).await
}

/// GETs `path` with the key; the status and JSON answer.
pub(super) async fn get_json(h: &Herald, path: &str) -> (StatusCode, Value) {
    json_of(call(h, "GET", path, None, &[]).await).await
}

async fn json_of(r: reqwest::Response) -> (StatusCode, Value) {
    let status = r.status();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[test]
fn the_api_refuses_to_start_without_a_good_key_or_on_a_busy_port() {
    for (key, why) in [
        ("", "no API key"),
        ("short-key", "shorter than 16"),
        ("changeme", "placeholder"),
    ] {
        let config = format!(
            "platforms:\n  api_server:\n    enabled: true\n    extra:\n      port: 0\n      key: '{key}'\nmodel:\n  default: m\n  base_url: http://127.0.0.1:9/v1\n"
        );
        let (code, err) = start_expect_failure(&config);
        assert_ne!(code, 0);
        assert!(err.contains(why), "{key}: {err}");
    }
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let config =
        api_config("http://127.0.0.1:9/v1", "").replace("port: 0", &format!("port: {port}"));
    let (code, err) = start_expect_failure(&config);
    assert_ne!(code, 0);
    assert!(err.contains("platforms.api_server.extra.port"), "{err}");
}

#[tokio::test]
async fn health_auth_cors_and_the_security_headers() {
    let provider = FakeProvider::start(vec![]);
    let extra = "      cors_origins: 'https://ui.example'\n      model_routes:\n        fast: {model: small}\n";
    let h = Herald::start(&api_config(&provider.base_url, extra));
    let r = client().get(h.url("/health")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    assert_eq!(
        r.headers()["content-security-policy"],
        "default-src 'none'; frame-ancestors 'none'"
    );
    assert_eq!(r.json::<Value>().await.unwrap()["status"], "ok");
    for auth in [
        None,
        Some("Basic x"),
        Some(KEY),
        Some("bearer test-api-key-0123456789"),
        Some("Bearer wrong"),
    ] {
        let mut req = client().get(h.url("/v1/models"));
        if let Some(a) = auth {
            req = req.header("Authorization", a);
        }
        let (status, body) = json_of(req.send().await.unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{auth:?}");
        assert_eq!(
            body,
            json!({"error": {"message": "Invalid API key", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}})
        );
    }
    let (status, models) = get_json(&h, "/v1/models").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(models["data"][0]["id"], "hermes-agent");
    assert_eq!(
        (
            models["data"][1]["id"].as_str(),
            models["data"][1]["root"].as_str()
        ),
        (Some("fast"), Some("small"))
    );
    let (_, caps) = get_json(&h, "/v1/capabilities").await;
    assert_eq!(
        caps["endpoints"]["run_steer"]["path"],
        "/v1/runs/{run_id}/steer"
    );
    // CORS: a foreign origin is refused with an empty 403; an allowed preflight passes.
    let r = client()
        .get(h.url("/v1/models"))
        .header("Origin", "https://evil.example")
        .header("Authorization", format!("Bearer {KEY}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(r.text().await.unwrap().is_empty());
    let r = client()
        .request(reqwest::Method::OPTIONS, h.url("/v1/chat/completions"))
        .header("Origin", "https://ui.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.headers()["access-control-allow-origin"],
        "https://ui.example"
    );
    assert_eq!(
        r.headers()["access-control-allow-headers"],
        "Authorization, Content-Type, Idempotency-Key"
    );
    assert_eq!(r.headers()["vary"], "Origin");
    let (status, body) = get_json(&h, "/v1/nope").await;
    assert_eq!(
        (status, body["error"]["type"].as_str()),
        (StatusCode::NOT_FOUND, Some("invalid_request_error"))
    );
}

#[tokio::test]
async fn chat_completions_whole_and_streamed() {
    let provider = FakeProvider::start(vec![Scripted::text("Hello there.")]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let messages =
        json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]);
    let r = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(json!({"model": "fake-large", "messages": messages})),
        &[],
    )
    .await;
    let session = r.headers()["x-hermes-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let (status, body) = json_of(r).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "fake-large", "the model is echoed");
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(
        body["choices"][0]["message"],
        json!({"role": "assistant", "content": "Hello there."})
    );
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}),
        "the provider's counts"
    );
    assert!(
        session.starts_with("api-") && session.len() == 20,
        "{session}"
    );
    let sent = &provider.requests()[0].body;
    assert!(
        sent["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Be brief."),
        "the client's system text reaches the model: {sent}"
    );

    // Streamed: the role chunk first, one id for all, the finish chunk with usage, [DONE].
    provider.push(Scripted::tool_calls(&[(
        "t1",
        "terminal",
        r#"{"command": "true"}"#,
    )]));
    provider.push(Scripted::text("Done."));
    let more = json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello there."}, {"role": "user", "content": "run it"}]);
    let r = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(json!({"model": "fake-model", "messages": more, "stream": "true"})),
        &[("X-Hermes-Tool-Progress", "1")],
    )
    .await;
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    assert_eq!(
        r.headers()["x-hermes-session-id"].to_str().unwrap(),
        session,
        "the same transcript lands in the same session"
    );
    let text = r.text().await.unwrap();
    let frames: Vec<&str> = text.split("\n\n").filter(|f| !f.is_empty()).collect();
    let data: Vec<Value> = frames
        .iter()
        .filter_map(|f| f.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(
        data[0]["choices"][0]["delta"],
        json!({"role": "assistant"}),
        "{text}"
    );
    let id = data[0]["id"].clone();
    assert!(data.iter().all(|d| d["id"] == id
        && d["model"] == "fake-model"
        && d["object"] == "chat.completion.chunk"));
    let content: String = data
        .iter()
        .filter_map(|d| d["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, "Done.");
    let last = data.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["usage"]["total_tokens"], 5, "{last}");
    assert_eq!(frames.last(), Some(&"data: [DONE]"));
    let progress: Vec<&&str> = frames
        .iter()
        .filter(|f| f.starts_with("event: hermes.tool.progress\n"))
        .collect();
    assert_eq!(progress.len(), 2, "{text}");
    assert!(
        progress[0].contains(r#""status":"running""#)
            && progress[0].contains(r#""toolCallId":"t1""#)
    );
    assert!(progress[1].contains(r#""status":"completed""#));
    // The body's history reached the model.
    let sent = provider.requests()[1].body["messages"].to_string();
    assert!(
        sent.contains("Hello there.") && sent.contains("run it"),
        "{sent}"
    );
}

#[tokio::test]
async fn chat_completion_errors_have_the_documented_codes() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::Delayed(
        Duration::from_millis(1500),
        Box::new(Scripted::text("slow")),
    ));
    let h = Herald::start(&api_config(&provider.base_url, "").replace(
        "agent:\n",
        "gateway:\n  api_server:\n    max_concurrent_runs: 1\nagent:\n",
    ));
    let raw = |body: &'static str| post_raw(&h, "/v1/chat/completions", body.into());
    let (s, b) = raw("{not json").await;
    assert_eq!(
        (s, b["error"]["message"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("Invalid JSON in request body")
        )
    );
    let (s, b) = raw("{\"messages\": []}").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    assert_eq!(
        b,
        json!({"error": {"message": "Missing or invalid 'messages' field", "type": "invalid_request_error"}})
    );
    let (s, b) = raw("{\"messages\": [{\"role\": \"user\", \"content\": \"\"}]}").await;
    assert_eq!(
        (s, b["error"]["message"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("No user message found in messages")
        )
    );
    let (s, _) = raw("\u{00ff}\u{00fe}").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // A declared size over the limit is refused before the body is read.
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: 10000001\r\n\r\n"
    );
    let answer = raw_request(&h.addr(), head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("body_too_large"), "{answer}");
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Length: lots\r\n\r\n"
    );
    let answer = raw_request(&h.addr(), head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    let bad_session = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(json!({"messages": [{"role": "user", "content": "x"}]})),
        &[("X-Hermes-Session-Id", "../etc/passwd")],
    )
    .await;
    assert_eq!(bad_session.status(), StatusCode::BAD_REQUEST);
    // The cap: one slow run at a time, the second gets 429 with Retry-After.
    let first = {
        let url = h.url("/v1/chat/completions");
        tokio::spawn(async move {
            client()
                .post(url)
                .header("Authorization", format!("Bearer {KEY}"))
                .json(&json!({"messages": [{"role": "user", "content": "one"}]}))
                .send()
                .await
                .unwrap()
                .status()
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(json!({"messages": [{"role": "user", "content": "two"}]})),
        &[],
    )
    .await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "1");
    let (_, b) = json_of(r).await;
    assert_eq!(
        b["error"],
        json!({"message": "Too many concurrent runs (max 1)", "type": "rate_limit_error", "param": null, "code": "rate_limit_exceeded"})
    );
    assert_eq!(first.await.unwrap(), StatusCode::OK);
}

/// The events of a run as JSON objects, until the stream closes.
pub(super) async fn run_events(h: &Herald, run_id: &str) -> (Vec<Value>, String) {
    let r = call(h, "GET", &format!("/v1/runs/{run_id}/events"), None, &[]).await;
    assert_eq!(r.status(), StatusCode::OK);
    let text = r.text().await.unwrap();
    let events = text
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    (events, text)
}

#[tokio::test]
async fn a_run_status_names_the_model_as_requested() {
    let provider = FakeProvider::start(vec![Scripted::text("one"), Scripted::text("two")]);
    let extra = "      model_routes:\n        fast: {model: small}\n";
    let h = Herald::start(&api_config(&provider.base_url, extra));
    for (asked, named, sent) in [
        (Some("fast"), "fast", "small"),
        (None, "hermes-agent", "fake-model"),
    ] {
        let mut body = json!({"input": "hi"});
        if let Some(m) = asked {
            body["model"] = json!(m);
        }
        let (s, b) = json_of(call(&h, "POST", "/v1/runs", Some(body), &[]).await).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{b}");
        let run_id = b["run_id"].as_str().unwrap().to_owned();
        let (events, text) = run_events(&h, &run_id).await;
        assert!(
            events.iter().any(|e| e["event"] == "run.completed"),
            "{text}"
        );
        let (_, st) = get_json(&h, &format!("/v1/runs/{run_id}")).await;
        assert_eq!(st["model"], named, "{st}");
        let last = provider.requests().pop().unwrap();
        assert_eq!(last.body["model"], sent);
    }
}

#[tokio::test]
async fn runs_with_approval_late_events_stop_and_steer() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "terminal", r#"{"command": "rm -f doomed.txt"}"#)]),
        Scripted::text("Removed."),
    ]);
    let h = Herald::start(&api_config(&provider.base_url, "").replace(
        "agent:\n",
        &format!(
            "terminal:\n  cwd: {}\nagent:\n",
            std::env::temp_dir().display()
        ),
    ));
    let doomed = std::env::temp_dir().join("doomed.txt");
    std::fs::write(&doomed, "x").unwrap();
    let (s, b) = json_of(
        call(
            &h,
            "POST",
            "/v1/runs",
            Some(json!({"input": "clean up"})),
            &[("X-Hermes-Session-Key", "k1")],
        )
        .await,
    )
    .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    assert_eq!(b["status"], "started");
    let run_id = b["run_id"].as_str().unwrap().to_owned();
    assert!(run_id.starts_with("run_") && run_id.len() == 36);
    // Wait for the approval, then answer it.
    let started = Instant::now();
    loop {
        let (_, st) = get_json(&h, &format!("/v1/runs/{run_id}")).await;
        if st["status"] == "waiting_for_approval" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{st}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (s, b) = post_json(
        &h,
        &format!("/v1/runs/{run_id}/steer"),
        json!({"input": "hurry"}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("run_not_accepting_steer"))
    );
    let (s, b) = post_json(
        &h,
        &format!("/v1/runs/{run_id}/approval"),
        json!({"choice": "maybe"}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_approval_choice"))
    );
    let (s, b) = post_json(
        &h,
        &format!("/v1/runs/{run_id}/approval"),
        json!({"choice": " Approve "}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        (b["choice"].as_str(), b["resolved"].as_u64()),
        (Some("once"), Some(1))
    );
    // A late subscriber gets everything from the run's creation, ending with the end.
    let (events, text) = run_events(&h, &run_id).await;
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"approval.request")
            && names.contains(&"approval.responded")
            && names.contains(&"tool.started"),
        "{names:?}"
    );
    assert_eq!(names.last(), Some(&"run.completed"), "{names:?}");
    assert_eq!(events.last().unwrap()["output"], "Removed.");
    assert_eq!(
        events.last().unwrap()["usage"],
        json!({"input_tokens": 3, "output_tokens": 2, "total_tokens": 5}),
        "the provider's counts over the run's calls"
    );
    assert!(
        events
            .iter()
            .all(|e| e["run_id"] == run_id.as_str() && e["timestamp"].is_number())
    );
    assert!(text.ends_with(": stream closed\n\n"), "{text}");
    assert!(!doomed.exists(), "the approved command ran");
    let (_, st) = get_json(&h, &format!("/v1/runs/{run_id}")).await;
    assert_eq!(
        (
            st["status"].as_str(),
            st["output"].as_str(),
            st["object"].as_str()
        ),
        (Some("completed"), Some("Removed."), Some("hermes.run"))
    );
    assert_eq!(st["usage"]["total_tokens"], 5, "{st}");
    let (s, b) = post_json(
        &h,
        &format!("/v1/runs/{run_id}/approval"),
        json!({"choice": "once"}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("approval_not_active"))
    );
    let (s, b) = get_json(&h, "/v1/runs/run_nope").await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("run_not_found"))
    );

    // Stop mid-tool: the run ends cancelled at once.
    provider.push(Scripted::tool_calls(&[(
        "s1",
        "terminal",
        r#"{"command": "sleep 30"}"#,
    )]));
    let (_, b) = post_json(&h, "/v1/runs", json!({"input": [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "wait"}]})).await;
    let slow = b["run_id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(800)).await;
    let (s, b) = json_of(call(&h, "POST", &format!("/v1/runs/{slow}/stop"), None, &[]).await).await;
    assert_eq!(
        (s, b["status"].as_str()),
        (StatusCode::OK, Some("stopping"))
    );
    let (events, _) = run_events(&h, &slow).await;
    assert_eq!(events.last().unwrap()["event"], "run.cancelled");

    // Steer during a long answer comes back as pending_steer.
    provider.push(Scripted::Trickle(
        Scripted::text_events(&["a", "b", "c", "d"]),
        Duration::from_millis(300),
    ));
    let (_, b) = post_json(&h, "/v1/runs", json!({"input": "talk"})).await;
    let talk = b["run_id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (s, b) = post_json(
        &h,
        &format!("/v1/runs/{talk}/steer"),
        json!({"message": "  "}),
    )
    .await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("invalid_steer_input"))
    );
    let (s, b) = post_json(
        &h,
        &format!("/v1/runs/{talk}/steer"),
        json!({"text": "and also this"}),
    )
    .await;
    assert_eq!(
        (s, b["accepted"].as_bool()),
        (StatusCode::OK, Some(true)),
        "{b}"
    );
    let (events, _) = run_events(&h, &talk).await;
    let end = events.last().unwrap();
    assert_eq!(
        (end["event"].as_str(), end["pending_steer"].as_str()),
        (Some("run.completed"), Some("and also this"))
    );
    assert!(events.iter().any(|e| e["event"] == "run.steered"));
}

#[tokio::test]
async fn a_run_cut_off_by_kill_9_reads_as_failed_after_the_restart() {
    let provider = FakeProvider::start(vec![
        Scripted::text("first"),
        Scripted::Delayed(Duration::from_secs(30), Box::new(Scripted::text("never"))),
    ]);
    let mut h = Herald::start(&api_config(&provider.base_url, ""));
    let (_, b) = post_json(&h, "/v1/runs", json!({"input": "one"})).await;
    let done = b["run_id"].as_str().unwrap().to_owned();
    let (events, _) = run_events(&h, &done).await;
    assert_eq!(events.last().unwrap()["event"], "run.completed");
    let (_, b) = post_json(&h, "/v1/runs", json!({"input": "two"})).await;
    let cut = b["run_id"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(500)).await;
    h.kill9();
    let h = Herald::start_in(h.into_home(), &[]);
    let (s, st) = get_json(&h, &format!("/v1/runs/{done}")).await;
    assert_eq!(
        (s, st["status"].as_str(), st["output"].as_str()),
        (StatusCode::OK, Some("completed"), Some("first"))
    );
    let (_, st) = get_json(&h, &format!("/v1/runs/{cut}")).await;
    assert_eq!(st["status"], "failed", "{st}");
}

#[tokio::test]
async fn the_official_openai_python_client_works() {
    let has_sdk = std::process::Command::new("python3")
        .args(["-c", "import openai"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_sdk,
        "the openai package is needed (`scripts/test` installs it: pip install openai==1.109.1)"
    );
    let provider = FakeProvider::start(vec![
        Scripted::text("Hello from herald."),
        Scripted::text("Streamed answer."),
        Scripted::text("Noted."),
        Scripted::text("42."),
        Scripted::Events(Scripted::text_events(&["Streamed ", "response."])),
    ]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/openai_sdk.py");
    let base = h.base.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .args([script, &base, KEY])
            .env("HTTPS_PROXY", "")
            .env("HTTP_PROXY", "")
            .env("NO_PROXY", "*")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    for check in [
        "models ok",
        "chat ok",
        "stream ok",
        "auth error ok",
        "bad request ok",
        "responses ok",
        "responses stream ok",
        "responses delete ok",
    ] {
        assert!(text.contains(check), "{text}");
    }
    // The chained response carried the first one's conversation to the model.
    let sent = provider.requests()[3].body["messages"].to_string();
    assert!(
        sent.contains("remember 42") && sent.contains("Noted.") && sent.contains("Be brief."),
        "{sent}"
    );
}

#[tokio::test]
async fn a_client_that_goes_away_mid_stream_stops_its_run() {
    let parts: Vec<String> = (1..=30).map(|i| format!("part {i}. ")).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let provider = FakeProvider::start(vec![Scripted::Trickle(
        Scripted::text_events(&parts),
        Duration::from_millis(200),
    )]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let mut r = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(json!({"stream": true, "messages": [{"role": "user", "content": "talk"}]})),
        &[],
    )
    .await;
    let session = r.headers()["x-hermes-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut seen = String::new();
    while !seen.contains("part 2.") {
        seen.push_str(&String::from_utf8_lossy(&r.chunk().await.unwrap().unwrap()));
    }
    drop(r);
    // The interrupted answer is kept, marked, well before the stream would have ended.
    let db = herald_store::SessionStore::open(&h.home().join("state.db")).unwrap();
    let started = Instant::now();
    let answer = loop {
        let rows = db.history(session.clone()).await.unwrap();
        if let Some(a) = rows.iter().find(|m| m.role == "assistant") {
            break a.content.clone().unwrap_or_default();
        }
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "the run was not stopped"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        answer.contains("interrupted") && !answer.contains("part 30."),
        "{answer}"
    );
}

#[tokio::test]
async fn idle_connections_and_a_slow_reader_slow_nothing_else() {
    let parts: Vec<String> = (1..=2000)
        .map(|i| format!("chunk {i} of a long answer. "))
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let provider = FakeProvider::start(vec![Scripted::Events(Scripted::text_events(&parts))]);
    provider.set_fallback(Scripted::text("quick"));
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let mut idle = Vec::new();
    for _ in 0..1000 {
        idle.push(tokio::net::TcpStream::connect(h.addr()).await.unwrap());
    }
    // A streaming client that never reads.
    let mut slow = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let body =
        json!({"stream": true, "messages": [{"role": "user", "content": "long"}]}).to_string();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut slow, head.as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = Instant::now();
    let r = client().get(h.url("/health")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (s, b) = post_json(
        &h,
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(
        (s, b["choices"][0]["message"]["content"].as_str()),
        (StatusCode::OK, Some("quick")),
        "{b}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    drop(idle);
}

#[tokio::test]
async fn the_default_cap_is_ten_runs_and_a_raised_cap_serves_a_hundred() {
    let provider = FakeProvider::start(vec![]);
    // The first ten hold their slots for as long as the test needs, however slowly the
    // machine posts them.
    provider.set_fallback(Scripted::Delayed(
        Duration::from_secs(60),
        Box::new(Scripted::text("done")),
    ));
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let mut ids = Vec::new();
    for i in 0..10 {
        let (s, b) = post_json(&h, "/v1/runs", json!({"input": format!("run {i}")})).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{b}");
        ids.push(b["run_id"].as_str().unwrap().to_owned());
    }
    let r = call(
        &h,
        "POST",
        "/v1/runs",
        Some(json!({"input": "one too many"})),
        &[],
    )
    .await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    drop(h);

    provider.set_fallback(Scripted::Delayed(
        Duration::from_millis(1500),
        Box::new(Scripted::text("done")),
    ));
    let raised = api_config(&provider.base_url, "").replace(
        "agent:\n",
        "gateway:\n  api_server:\n    max_concurrent_runs: 100\nagent:\n",
    );
    let h = Herald::start(&raised);
    let mut ids = Vec::new();
    for i in 0..100 {
        let (s, b) = post_json(&h, "/v1/runs", json!({"input": format!("run {i}")})).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{b}");
        ids.push(b["run_id"].as_str().unwrap().to_owned());
    }
    let started = Instant::now();
    for id in &ids {
        loop {
            let (_, st) = get_json(&h, &format!("/v1/runs/{id}")).await;
            if st["status"] == "completed" {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(20), "{st}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the hundred ran at once: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_unanswered_approval_times_out_as_denied_and_deny_refuses() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "terminal", r#"{"command": "rm -f kept-1.txt"}"#)]),
        Scripted::text("Gave up."),
        Scripted::tool_calls(&[("c2", "terminal", r#"{"command": "rm -f kept-2.txt"}"#)]),
        Scripted::text("Denied."),
    ]);
    let dir = tempfile::tempdir().unwrap();
    for f in ["kept-1.txt", "kept-2.txt"] {
        std::fs::write(dir.path().join(f), "x").unwrap();
    }
    let config = api_config(&provider.base_url, "").replace(
        "agent:\n",
        &format!(
            "approvals:\n  timeout: 1\nterminal:\n  cwd: {}\nagent:\n",
            dir.path().display()
        ),
    );
    let h = Herald::start(&config);
    let (_, b) = post_json(&h, "/v1/runs", json!({"input": "clean"})).await;
    let id = b["run_id"].as_str().unwrap().to_owned();
    let (events, _) = run_events(&h, &id).await;
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"approval.request") && !names.contains(&"approval.responded"),
        "{names:?}"
    );
    assert_eq!(events.last().unwrap()["output"], "Gave up.");
    let done = events
        .iter()
        .find(|e| e["event"] == "tool.completed")
        .unwrap();
    assert_eq!(done["error"], true, "{done}");
    assert!(dir.path().join("kept-1.txt").exists(), "timed out: not run");

    let (_, b) = post_json(&h, "/v1/runs", json!({"input": "clean again"})).await;
    let id = b["run_id"].as_str().unwrap().to_owned();
    let started = Instant::now();
    loop {
        let (s, b) = post_json(
            &h,
            &format!("/v1/runs/{id}/approval"),
            json!({"choice": "deny"}),
        )
        .await;
        if s == StatusCode::OK {
            assert_eq!(b["choice"], "deny");
            break;
        }
        assert_eq!(b["error"]["code"], "approval_not_pending", "{b}");
        assert!(started.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    let (events, _) = run_events(&h, &id).await;
    assert_eq!(events.last().unwrap()["output"], "Denied.");
    assert!(dir.path().join("kept-2.txt").exists(), "denied: not run");
}

#[tokio::test]
async fn model_options_list_the_configured_providers_and_what_they_serve() {
    let provider = FakeProvider::start(vec![]);
    let extra = "custom_providers:\n  - name: away\n    base_url: http://alice:hunter2@127.0.0.1:9/v1\n    model: remote-model\n";
    let h = Herald::start(&format!("{extra}{}", api_config(&provider.base_url, "")));
    let r = client()
        .get(h.url("/api/model/options"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let (s, b) = get_json(&h, "/api/model/options").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // Hermes's build_models_payload shape, as its TUI's picker reads it.
    assert_eq!(b["model"], "fake-model");
    assert_eq!(b["provider"], b["providers"][0]["slug"], "{b}");
    let first = &b["providers"][0];
    assert_eq!(first["is_current"], true);
    assert_eq!(first["authenticated"], true, "a local server needs no key");
    assert_eq!(first["models"], json!(["fake-model", "fake-large"]), "{b}");
    assert_eq!(first["total_models"], 2);
    assert!(first["name"].is_string() && first["capabilities"].is_object());
    let away = b["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["slug"] == "custom:away")
        .unwrap();
    assert_eq!(
        away["models"],
        json!(["remote-model"]),
        "the saved model, not probed: {away}"
    );
    assert_eq!(away["name"], "away");
    assert_eq!(away["is_current"], false);
    assert_eq!(away["is_user_defined"], true);
    assert_eq!(away["source"], "user-config");
    assert_eq!(
        away["api_url"], "http://127.0.0.1:9/v1",
        "no credentials shown"
    );
    assert!(!b.to_string().contains("hunter2"), "{b}");
    let started = Instant::now();
    let (s, _) = get_json(&h, "/api/model/options?refresh=1").await;
    assert_eq!(s, StatusCode::OK);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn an_idempotency_key_repeats_the_first_answer_and_shares_one_run() {
    let chat_text = |v: &Value| v["choices"][0]["message"]["content"].clone();
    let chat = |q: &str| json!({"messages": [{"role": "user", "content": q}]});
    idempotent("/v1/chat/completions", &chat, &chat_text).await;
    let response_text = |v: &Value| v["output"][0]["content"][0]["text"].clone();
    let response = |q: &str| json!({"input": q});
    idempotent("/v1/responses", &response, &response_text).await;
}

/// Two duplicates at once and a third later share one run and one answer on `path`;
/// another question is run anew.
async fn idempotent(path: &str, body: &dyn Fn(&str) -> Value, text: &dyn Fn(&Value) -> Value) {
    let provider = FakeProvider::start(vec![
        Scripted::Delayed(
            Duration::from_millis(500),
            Box::new(Scripted::text("only once")),
        ),
        Scripted::text("a different question"),
    ]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let send = |b: Value| {
        let url = h.url(path);
        async move {
            let r = client()
                .post(url)
                .header("Authorization", format!("Bearer {KEY}"))
                .header("Idempotency-Key", "k-1")
                .json(&b)
                .send()
                .await
                .unwrap();
            json_of(r).await
        }
    };
    let (a, b) = tokio::join!(send(body("once?")), send(body("once?")));
    let c = send(body("once?")).await;
    for (s, v) in [&a, &b, &c] {
        assert_eq!(*s, StatusCode::OK, "{path}: {v}");
        assert_eq!(text(v), "only once", "{path}: {v}");
    }
    assert_eq!(a.1["id"], c.1["id"], "{path}: the same answer");
    assert_eq!(
        provider.requests().len(),
        1,
        "{path}: one run for all three"
    );
    let (_, other) = send(body("something else")).await;
    assert_eq!(text(&other), "a different question", "{path}: {other}");
    let tokens = other["usage"]["total_tokens"].clone();
    assert_eq!(tokens, 5, "{path}: the provider's counts: {other}");
}

#[tokio::test]
async fn the_openapi_document_lists_exactly_the_routes_served_behind_the_key() {
    let provider = FakeProvider::start(vec![]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let anonymous = client().get(h.url("/openapi.json")).send().await.unwrap();
    let (s, v) = json_of(anonymous).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
    assert_eq!(v["error"]["code"], "invalid_api_key");
    let (s, doc) = get_json(&h, "/openapi.json").await;
    assert_eq!(s, StatusCode::OK, "{doc}");
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{doc}");
    assert_eq!(doc["security"], json!([{"bearer": []}]));
    let mut listed = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let open = op["security"] == json!([{}]);
            listed.push((method.to_uppercase(), path.clone(), open));
        }
    }
    listed.sort();
    let mut want: Vec<(String, String, bool)> = [
        ("GET", "/health", true),
        ("GET", "/v1/health", true),
        ("GET", "/health/detailed", false),
        ("GET", "/v1/models", false),
        ("GET", "/v1/capabilities", false),
        ("GET", "/api/model/options", false),
        ("GET", "/openapi.json", false),
        ("POST", "/v1/chat/completions", false),
        ("POST", "/v1/responses", false),
        ("GET", "/v1/responses/{id}", false),
        ("DELETE", "/v1/responses/{id}", false),
        ("POST", "/v1/runs", false),
        ("GET", "/v1/runs/{run_id}", false),
        ("GET", "/v1/runs/{run_id}/events", false),
        ("POST", "/v1/runs/{run_id}/approval", false),
        ("POST", "/v1/runs/{run_id}/stop", false),
        ("POST", "/v1/runs/{run_id}/steer", false),
        ("GET", "/v1/skills", false),
        ("GET", "/v1/toolsets", false),
        ("GET", "/api/sessions", false),
        ("POST", "/api/sessions", false),
        ("GET", "/api/sessions/{session_id}", false),
        ("PATCH", "/api/sessions/{session_id}", false),
        ("DELETE", "/api/sessions/{session_id}", false),
        ("GET", "/api/sessions/{session_id}/messages", false),
        ("POST", "/api/sessions/{session_id}/fork", false),
        ("POST", "/api/sessions/{session_id}/chat", false),
        ("POST", "/api/sessions/{session_id}/chat/stream", false),
        ("GET", "/api/jobs", false),
        ("POST", "/api/jobs", false),
        ("GET", "/api/jobs/{job_id}", false),
        ("PATCH", "/api/jobs/{job_id}", false),
        ("DELETE", "/api/jobs/{job_id}", false),
        ("POST", "/api/jobs/{job_id}/pause", false),
        ("POST", "/api/jobs/{job_id}/resume", false),
        ("POST", "/api/jobs/{job_id}/run", false),
    ]
    .iter()
    .map(|(m, p, o)| (m.to_string(), p.to_string(), *o))
    .collect();
    want.sort();
    assert_eq!(listed, want);
    // Each listed operation reaches a handler: neither the fallback's 404 nor a 405.
    for (method, path, _) in &listed {
        let path = path
            .replace("{id}", "resp_none")
            .replace("{run_id}", "run_none")
            .replace("{session_id}", "session_none");
        let body = (method == "POST").then(|| json!({}));
        let (s, v) = json_of(call(&h, method, &path, body, &[]).await).await;
        assert_ne!(s, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        assert!(
            v["error"]["message"] != "Not found",
            "{method} {path} fell through to the fallback: {v}"
        );
    }
    let (code, out, err) = h.cli(&["gateway", "status"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(&format!("API: {}/v1", h.base)), "{out}");
    assert!(!out.contains("Webhook:"), "only the API listens: {out}");
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for name in [
        "ChatCompletionRequest",
        "ResponseRequest",
        "RunRequest",
        "ErrorEnvelope",
        "ChatCompletionChunk",
        "RunStatusObject",
        "RunEventFrame",
        "HealthDetailed",
    ] {
        assert!(schemas.contains_key(name), "{name} in {schemas:?}");
    }
    assert!(schemas["ErrorBody"]["properties"].get("type").is_some());
    // The document is made from the types the answers are written with.
    let detailed = &schemas["HealthDetailed"]["properties"];
    assert!(detailed.get("readiness").is_some() && detailed.get("gateway_drainable").is_some());
}

/// Sends `body` as it is (any bytes) to `path` with the key.
async fn post_raw(h: &Herald, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let r = client()
        .post(h.url(path))
        .header("Authorization", format!("Bearer {KEY}"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    json_of(r).await
}

#[tokio::test]
async fn bad_input_on_every_route_gets_a_clear_answer_and_slows_nothing() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::text("fine"));
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("/v1/chat/completions", b"[1, 2]".to_vec(), 400),
        ("/v1/chat/completions", deep.clone().into_bytes(), 400),
        (
            "/v1/chat/completions",
            b"{\"messages\": \"hi\"}".to_vec(),
            400,
        ),
        (
            "/v1/chat/completions",
            b"{\"messages\": [42, null]}".to_vec(),
            400,
        ),
        (
            "/v1/chat/completions",
            br#"{"messages": [{"role": 5, "content": {"a": 1}}]}"#.to_vec(),
            400,
        ),
        (
            "/v1/chat/completions",
            b"{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}".to_vec(),
            400,
        ),
        (
            "/v1/chat/completions",
            br#"{"model": 7, "stream": {}, "messages": [{"role": "user", "content": "ok"}]}"#
                .to_vec(),
            200,
        ),
        ("/v1/responses", b"\xff\xfe\xfd".to_vec(), 400),
        ("/v1/responses", deep.into_bytes(), 400),
        ("/v1/responses", b"{\"input\": 42}".to_vec(), 400),
        (
            "/v1/responses",
            br#"{"input": [{"role": "user"}]}"#.to_vec(),
            400,
        ),
        (
            "/v1/responses",
            br#"{"input": "x", "conversation_history": "no"}"#.to_vec(),
            400,
        ),
        (
            "/v1/responses",
            br#"{"input": "x", "previous_response_id": 12}"#.to_vec(),
            200,
        ),
        ("/v1/runs", b"{\"input\": {\"a\": 1}}".to_vec(), 400),
        ("/v1/runs", b"{\"input\": \"\"}".to_vec(), 400),
        ("/v1/runs", b"null".to_vec(), 400),
        (
            "/v1/runs/run_none/approval",
            b"{\"choice\": 5}".to_vec(),
            404,
        ),
        ("/v1/runs/run_none/steer", b"\xff".to_vec(), 404),
    ];
    for (path, body, want) in cases {
        let shown = String::from_utf8_lossy(&body)
            .chars()
            .take(60)
            .collect::<String>();
        let (s, v) = post_raw(&h, path, body).await;
        assert_eq!(s.as_u16(), want, "{path} {shown}: {v}");
        if want != 200 {
            let message = v["error"]["message"].as_str().unwrap_or_default();
            assert!(!message.is_empty(), "{path} {shown}: a message: {v}");
        }
    }
    // A transcript of 9,000 messages (under max_messages) near the body limit is answered,
    // and health stays quick meanwhile.
    let messages: Vec<Value> = (0..9_000)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("message {i} {}", "x".repeat(920))})
        })
        .collect();
    let body = serde_json::to_vec(&json!({"messages": messages})).unwrap();
    assert!(
        body.len() > 8_000_000 && body.len() < 10_000_000,
        "{}",
        body.len()
    );
    // How slow health is on this machine right now, with nothing big in flight: a loaded
    // machine's scheduling delays are not herald's.
    let mut calm = Duration::ZERO;
    for _ in 0..40 {
        let started = Instant::now();
        let (s, _) = get_json(&h, "/health").await;
        assert_eq!(s, StatusCode::OK);
        calm = calm.max(started.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let done = std::sync::atomic::AtomicBool::new(false);
    let big = async {
        let answer = post_raw(&h, "/v1/chat/completions", body).await;
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        answer
    };
    let health = async {
        let mut slowest = Duration::ZERO;
        while !done.load(std::sync::atomic::Ordering::SeqCst) {
            let started = Instant::now();
            let (s, _) = get_json(&h, "/health").await;
            assert_eq!(s, StatusCode::OK);
            slowest = slowest.max(started.elapsed());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        slowest
    };
    let ((status, answer), slowest) = tokio::join!(big, health);
    assert_eq!(
        status,
        StatusCode::OK,
        "the long transcript is answered: {answer}"
    );
    // 1 s floor: under the whole suite on two cores, health once took 0.59 s here with a
    // calm of 41 ms (a blocked worker would hold it for the whole multi-second request).
    assert!(
        slowest < Duration::from_millis(1000).max(calm * 4),
        "health took {slowest:?} (at most {calm:?} with nothing in flight)"
    );
    let sent = provider.requests().last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .len();
    assert!(
        sent > 9_000,
        "the whole transcript reached the provider: {sent}"
    );
}

#[tokio::test]
async fn media_image_tags_in_whole_answers_are_inlined_when_safe() {
    let dir = tempfile::tempdir().unwrap();
    let pic = dir.path().join("chart.png");
    std::fs::write(&pic, b"\x89PNG").unwrap();
    let answer = format!(
        "Here it is: MEDIA:{} (and MEDIA:/etc/passwd.png)",
        pic.display()
    );
    let provider = FakeProvider::start(vec![
        Scripted::text(&answer),
        Scripted::text(&answer),
        Scripted::text(&answer),
    ]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let inlined =
        "Here it is: ![image](data:image/png;base64,iVBORw==) (and MEDIA:/etc/passwd.png)";
    let (_, chat) = post_json(
        &h,
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "chart?"}]}),
    )
    .await;
    assert_eq!(chat["choices"][0]["message"]["content"], inlined, "{chat}");
    let (_, response) = post_json(&h, "/v1/responses", json!({"input": "chart?"})).await;
    assert_eq!(
        response["output"][0]["content"][0]["text"], inlined,
        "{response}"
    );
    // A stream passes the deltas on as the model wrote them.
    let streamed = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(json!({"stream": true, "messages": [{"role": "user", "content": "again"}]})),
        &[],
    )
    .await
    .text()
    .await
    .unwrap();
    assert!(streamed.contains("MEDIA:"), "{streamed}");
}

#[tokio::test]
async fn a_provider_that_echoes_its_key_shows_the_caller_none() {
    const PROVIDER_KEY: &str = "prov-secret-key-98765";
    let echo = format!(
        r#"{{"error": {{"message": "bad request; you sent Authorization: Bearer {PROVIDER_KEY} and x-api-key: other-secret-000"}}}}"#
    );
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::Status(400, echo));
    let config = api_config(&provider.base_url, "").replace(
        "  base_url:",
        &format!("  api_key: {PROVIDER_KEY}\n  base_url:"),
    );
    let h = Herald::start(&config);
    let (s, b) = post_json(
        &h,
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert!(s.is_server_error() || s.is_client_error(), "{s} {b}");
    let message = b["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("bad request"),
        "the provider's words stay: {b}"
    );
    let (_, run) = post_json(&h, "/v1/runs", json!({"input": "hi"})).await;
    let run_id = run["run_id"].as_str().unwrap().to_owned();
    let (events, text) = run_events(&h, &run_id).await;
    assert!(events.iter().any(|e| e["event"] == "run.failed"), "{text}");
    for shown in [b.to_string(), text, h.log()] {
        assert!(!shown.contains(PROVIDER_KEY), "{shown}");
        assert!(!shown.contains("other-secret-000"), "{shown}");
    }
    assert_eq!(
        provider.requests()[0]
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok()),
        Some(format!("Bearer {PROVIDER_KEY}").as_str()),
        "the key was sent"
    );
}

/// An authenticated request head for `path` declaring `length` body bytes.
fn head_declaring(path: &str, length: usize) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_port_bounds_slow_and_stalled_bodies_and_long_message_lists() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::text("ok"));
    let h = Herald::start(&api_config(
        &provider.base_url,
        "      body_timeout_seconds: 4\n      max_body_bytes_in_flight: 2000000\n      max_messages: 50\n",
    ));
    // A body still on its way after the body timeout: 408, and the connection closes.
    let mut slow = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let started = Instant::now();
    slow.write_all(head_declaring("/v1/chat/completions", 1000).as_bytes())
        .await
        .unwrap();
    slow.write_all(b"{\"messages\":").await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_timeout"), "{answer}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(7),
        "{took:?}"
    );
    // A stalled big body holds its room in the budget (until its own body timeout): the
    // next big one waits, then gets 503.
    let mut stalled = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    stalled
        .write_all(head_declaring("/v1/chat/completions", 1_500_000).as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let mut second = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    second
        .write_all(head_declaring("/v1/runs", 1_000_000).as_bytes())
        .await
        .unwrap();
    let mut first_bytes = [0u8; 512];
    let n = tokio::time::timeout(Duration::from_secs(10), second.read(&mut first_bytes))
        .await
        .unwrap()
        .unwrap();
    let busy = String::from_utf8_lossy(&first_bytes[..n]).to_lowercase();
    assert!(busy.starts_with("http/1.1 503"), "{busy}");
    assert!(busy.contains("retry-after: 1"), "{busy}");
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(h.get("/health").await.0, StatusCode::OK);
    drop(stalled);
    // More messages than max_messages: 400 in the OpenAI envelope, nothing run.
    let many: Vec<Value> = (0..51)
        .map(|_| json!({"role": "user", "content": "x"}))
        .collect();
    let (s, b) = post_json(&h, "/v1/chat/completions", json!({"messages": many})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert_eq!(b["error"]["type"], "invalid_request_error");
    assert_eq!(b["error"]["param"], "messages");
    let (s, b) = post_json(&h, "/v1/responses", json!({"input": many})).await;
    assert_eq!(
        (s, b["error"]["param"].as_str()),
        (StatusCode::BAD_REQUEST, Some("input"))
    );
    assert!(provider.requests().is_empty());
    let (s, b) = post_json(
        &h,
        "/v1/chat/completions",
        json!({"messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

#[tokio::test]
async fn one_big_body_of_tiny_messages_costs_a_few_times_its_size() {
    let provider = FakeProvider::start(vec![]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let messages: Vec<String> = (0..100_000)
        .map(|i| format!("{{\"role\":\"user\",\"content\":\"m{i:07}\"}}"))
        .collect();
    let body = format!(
        "{{\"messages\":[{}],\"pad\":\"{}\"}}",
        messages.join(","),
        "x".repeat(5_500_000)
    );
    assert!(body.len() > 9_000_000 && body.len() < 10_000_000);
    let before = peak_rss_kb(h.child.id());
    let (s, b) = post_raw(&h, "/v1/chat/completions", body.clone().into_bytes()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert_eq!(b["error"]["param"], "messages");
    let grown = (peak_rss_kb(h.child.id()) - before) * 1024;
    eprintln!("peak RSS grew {grown} bytes for a {} byte body", body.len());
    assert!(
        grown <= 8 * body.len() as u64,
        "peak grew {grown} bytes for a {} byte body",
        body.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_client_that_never_reads_pauses_the_provider_and_then_stops_its_run() {
    use tokio::io::AsyncWriteExt;
    // 160 MB of answer from a provider as fast as the socket lets it be.
    let part = "y".repeat(64 * 1024);
    let parts: Vec<&str> = std::iter::repeat_n(part.as_str(), 2500).collect();
    let provider = FakeProvider::start(vec![Scripted::Events(Scripted::text_events(&parts))]);
    provider.set_fallback(Scripted::text("ok"));
    let h = Herald::start(&api_config(&provider.base_url, "").replace(
        "agent:\n",
        "gateway:\n  api_server:\n    max_concurrent_runs: 1\nagent:\n",
    ));
    let before = peak_rss_kb(h.child.id());
    let body = r#"{"stream": true, "messages": [{"role": "user", "content": "talk"}]}"#;
    let request = format!(
        "{}{body}",
        head_declaring("/v1/chat/completions", body.len())
    );
    let mut stalled = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    stalled.write_all(request.as_bytes()).await.unwrap();
    let server_port = stalled.peer_addr().unwrap().port();
    let client_port = stalled.local_addr().unwrap().port();
    // Never read: once the kernel's buffers are full, herald's writes stall, and after
    // its write timeout (10 s) the run is interrupted. Filling the buffers takes a few
    // seconds, longer on a loaded machine, so the stall is timed from when the bytes
    // queued to this client stop changing.
    let started = Instant::now();
    let mut stall: Option<(Instant, u64)> = None;
    let mut freed = false;
    while !freed {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let grown = peak_rss_kb(h.child.id()).saturating_sub(before);
        // The kernel holds several MB the client never read, and the run's partial answer
        // is stored (a few copies of it) when it stops; nothing grows past that.
        assert!(
            grown < 192 * 1024,
            "herald grew {grown} kB for a client that reads nothing"
        );
        let unsent = unsent_bytes(server_port, client_port);
        stall = match stall {
            Some((since, was)) if was == unsent => Some((since, was)),
            _ => Some((Instant::now(), unsent)),
        };
        let stalled_for = stall
            .filter(|(_, unsent)| *unsent > 0)
            .map_or(Duration::ZERO, |(since, _)| since.elapsed());
        if started.elapsed() >= Duration::from_secs(9) {
            // The one run slot comes back once the stalled run is stopped.
            let (s, _) = post_json(
                &h,
                "/v1/chat/completions",
                json!({"messages": [{"role": "user", "content": "x"}], "stream": false}),
            )
            .await;
            freed = s != StatusCode::TOO_MANY_REQUESTS;
        }
        assert!(
            freed
                || (stalled_for < Duration::from_secs(25)
                    && started.elapsed() < Duration::from_secs(120)),
            "the stalled run still holds its slot (writes stalled for {stalled_for:?})"
        );
    }
    assert!(started.elapsed() >= Duration::from_secs(9));
    eprintln!(
        "peak RSS grew {} kB while a client read nothing",
        peak_rss_kb(h.child.id()).saturating_sub(before)
    );
    drop(stalled);
}

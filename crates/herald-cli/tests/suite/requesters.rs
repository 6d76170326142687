//! Runs end with whoever asked for them: a chat completion's or response's client that
//! goes away interrupts its run (whole or streamed, even while nothing is written), the
//! run's permit is held until the run has ended, and the run is named in a header so
//! that the runs API reads and stops it.

use super::api::{KEY, api_config, call, get_json, post_json};
use super::plugins::install_plugins;
use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends a whole (non-streamed) POST of `body` to `path` and leaves the connection open.
async fn send_whole(h: &Herald, path: &str, body: &Value) -> TcpStream {
    let body = body.to_string();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut socket = TcpStream::connect(h.addr()).await.unwrap();
    socket.write_all(head.as_bytes()).await.unwrap();
    socket
}

/// The status line's code, if an answer starts within `wait`.
async fn status_within(socket: &mut TcpStream, wait: Duration) -> Option<u16> {
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(wait, socket.read(&mut buf))
        .await
        .ok()?
        .ok()?;
    let line = String::from_utf8_lossy(&buf[..n]).into_owned();
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A run's status as the runs API reads it.
async fn run_state(h: &Herald, id: &str) -> String {
    let (_, s) = get_json(h, &format!("/v1/runs/{id}")).await;
    s["status"].as_str().unwrap_or_default().to_owned()
}

/// Waits until the run's last event is `name`.
async fn wait_event(h: &Herald, id: &str, name: &str) {
    let started = Instant::now();
    loop {
        let (_, s) = get_json(h, &format!("/v1/runs/{id}")).await;
        if s["last_event"] == name {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{s}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_state(h: &Herald, id: &str, want: &str, limit: Duration) {
    let started = Instant::now();
    loop {
        let state = run_state(h, id).await;
        if state == want {
            return;
        }
        assert!(started.elapsed() < limit, "run {id} is {state}, not {want}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_whole_answer_whose_client_leaves_is_interrupted_with_its_tool() {
    let marks = tempfile::tempdir().unwrap();
    let marker = marks.path().join("ran.txt");
    let command = format!("sleep 4 && echo ran >> {}", marker.display());
    let args = json!({ "command": command }).to_string();
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::tool_calls(&[("c1", "terminal", &args)]));
    let h = Herald::start(&api_config(&provider.base_url, ""));

    for path in ["/v1/chat/completions", "/v1/responses"] {
        let body = match path {
            "/v1/responses" => json!({"input": "work"}),
            _ => json!({"messages": [{"role": "user", "content": "work"}]}),
        };
        let asked = provider.requests().len();
        let socket = send_whole(&h, path, &body).await;
        wait_for(Duration::from_secs(10), "the first provider call", || {
            (provider.requests().len() > asked).then_some(())
        })
        .await;
        // The command is running (it sleeps); the client goes away.
        tokio::time::sleep(Duration::from_millis(800)).await;
        drop(socket);
        let log = h.log_once_it_has("the client went away before the answer");
        assert!(
            log.contains("the client went away before the answer"),
            "{log}"
        );
        // Well past the command's 4 s: it was killed, and the model was not asked again.
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!marker.exists(), "{path}: the command ran to its end");
        assert_eq!(
            provider.requests().len(),
            asked + 1,
            "{path}: the run went on after its client left"
        );
    }
}

#[tokio::test]
async fn a_streamed_answer_whose_client_leaves_while_subagents_work_silently_is_interrupted() {
    let marks = tempfile::tempdir().unwrap();
    let provider = FakeProvider::start(vec![Scripted::tool_calls(&[(
        "d1",
        "delegate_task",
        r#"{"tasks": [{"goal": "alpha: wait"}, {"goal": "beta: wait"}, {"goal": "gamma: wait"}]}"#,
    )])]);
    provider.set_fallback(Scripted::text("Done."));
    for name in ["alpha", "beta", "gamma"] {
        let file = marks.path().join(name);
        let args = json!({"command": format!("sleep 6 && touch {}", file.display())});
        provider.push_when(
            &format!("YOUR TASK:\n{name}"),
            Scripted::tool_calls(&[("t1", "terminal", &args.to_string())]),
        );
    }
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let body = json!({"stream": true, "messages": [{"role": "user", "content": "split"}]});
    let r = call(&h, "POST", "/v1/chat/completions", Some(body), &[]).await;
    assert_eq!(r.status(), 200);
    let run = r.headers()["x-herald-run-id"].to_str().unwrap().to_owned();
    assert_eq!(run_state(&h, &run).await, "running");
    // The parent and its three children have asked the model: the children sleep.
    wait_for(Duration::from_secs(10), "the children's calls", || {
        (provider.requests().len() >= 4).then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop(r);
    wait_state(&h, &run, "cancelled", Duration::from_secs(3)).await;
    tokio::time::sleep(Duration::from_secs(7)).await;
    for name in ["alpha", "beta", "gamma"] {
        assert!(
            !marks.path().join(name).exists(),
            "{name}'s command ran to its end after the client left"
        );
    }
}

#[tokio::test]
async fn clients_that_connect_and_leave_never_run_more_than_the_cap() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::tool_calls(&[("s1", "slow_step", "{}")]));
    let capped = api_config(&provider.base_url, "").replace(
        "agent:\n",
        "gateway:\n  api_server:\n    max_concurrent_runs: 2\nagent:\n",
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), capped).unwrap();
    install_plugins(home.path(), &["slow-tool"]);
    let ended = home.path().join("slow-ended.txt");
    let h = Herald::start_in(home, &[("SLOW_TOOL_LOG", ended.to_str().unwrap())]);

    // Each client asks, and leaves once it is clear its run has started. A left run
    // stays in its slow tool (which cannot be interrupted) for 3 s, holding its slot.
    let body = json!({"messages": [{"role": "user", "content": "step"}]});
    let started = Instant::now();
    let (mut accepted, mut refused) = (0, 0);
    while started.elapsed() < Duration::from_millis(2000) {
        let mut socket = send_whole(&h, "/v1/chat/completions", &body).await;
        match status_within(&mut socket, Duration::from_millis(300)).await {
            Some(429) => refused += 1,
            None => accepted += 1,
            other => panic!("unexpected answer {other:?}"),
        }
        drop(socket);
    }
    assert_eq!(
        accepted, 2,
        "only the cap's two runs started ({refused} refused)"
    );
    assert!(refused >= 2, "{refused}");
    // The left runs end when their tool returns, and free their slots then.
    wait_for(Duration::from_secs(10), "the slow tools' ends", || {
        let n = std::fs::read_to_string(&ended)
            .unwrap_or_default()
            .lines()
            .count();
        (n >= 2).then_some(())
    })
    .await;
    provider.set_fallback(Scripted::text("free again"));
    let answer = wait_for_answer(&h).await;
    assert_eq!(answer["choices"][0]["message"]["content"], "free again");
    let calls = provider
        .requests()
        .iter()
        .filter(|r| r.body.to_string().contains("stepped"))
        .count();
    assert_eq!(
        calls, 0,
        "an interrupted run asked the model again: {calls}"
    );
}

/// A whole chat completion, asked until the cap lets it in.
async fn wait_for_answer(h: &Herald) -> Value {
    let started = Instant::now();
    loop {
        let (s, b) = post_json(
            h,
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "anything"}]}),
        )
        .await;
        if s == 200 {
            return b;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "{s} {b}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn chat_and_response_runs_are_named_read_and_stopped_through_the_runs_api() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::tool_calls(&[(
        "c1",
        "terminal",
        r#"{"command": "sleep 30"}"#,
    )]));
    let h = Herald::start(&api_config(&provider.base_url, ""));
    for (path, body) in [
        (
            "/v1/chat/completions",
            json!({"stream": true, "messages": [{"role": "user", "content": "wait"}]}),
        ),
        ("/v1/responses", json!({"stream": true, "input": "wait"})),
    ] {
        let mut r = call(&h, "POST", path, Some(body), &[]).await;
        let run = r.headers()["x-herald-run-id"].to_str().unwrap().to_owned();
        assert!(run.starts_with("run_"), "{run}");
        wait_event(&h, &run, "tool.started").await;
        let (s, stopping) = post_json(&h, &format!("/v1/runs/{run}/stop"), json!({})).await;
        assert_eq!((s.as_u16(), &stopping["status"]), (200, &json!("stopping")));
        wait_state(&h, &run, "cancelled", Duration::from_secs(3)).await;
        // The stream ends, its last frame saying how.
        let mut text = String::new();
        while let Some(chunk) = tokio::time::timeout(Duration::from_secs(5), r.chunk())
            .await
            .unwrap()
            .unwrap()
        {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        assert!(
            text.contains("\"finish_reason\":\"error\"") || text.contains("response.failed"),
            "{path}: {text}"
        );
    }
    // A whole answer names its run too, and the run reads as it ended.
    provider.set_fallback(Scripted::text("named"));
    let r = call(
        &h,
        "POST",
        "/v1/chat/completions",
        Some(json!({"messages": [{"role": "user", "content": "hi"}]})),
        &[],
    )
    .await;
    let run = r.headers()["x-herald-run-id"].to_str().unwrap().to_owned();
    let (_, status) = get_json(&h, &format!("/v1/runs/{run}")).await;
    assert_eq!(
        (&status["status"], &status["output"]),
        (&json!("completed"), &json!("named")),
        "{status}"
    );
}

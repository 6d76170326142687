//! Hostile and slow clients: header, body and idle timeouts, the connection cap, and a
//! shutdown that the grace period bounds whatever clients do.

use crate::suite::support::*;

use serde_json::Value;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn config(extra: &str) -> String {
    let routes = "        hook:\n          deliver: log\n        slack:\n          source: slack\n          secret: signing-secret\n";
    let base = config_with_routes(routes);
    base.replace(
        "      rate_limit: 100000\n",
        &format!("      rate_limit: 100000\n{extra}"),
    )
}

/// Reads until the server closes the connection (or `limit` passes); returns what came
/// and how long it took.
async fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> (String, Duration) {
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(limit, stream.read_to_end(&mut buf)).await;
    (
        String::from_utf8_lossy(&buf).into_owned(),
        started.elapsed(),
    )
}

#[tokio::test]
async fn slow_headers_are_cut_off_by_the_header_timeout() {
    let herald = InProcess::start(&config("      header_timeout_seconds: 1\n"));
    let mut stream = TcpStream::connect(herald.addr()).await.unwrap();
    let started = Instant::now();
    stream
        .write_all(b"POST /webhooks/hook HTTP/1.1\r\n")
        .await
        .unwrap();
    // A byte every 200 ms: never a whole head.
    let mut closed_after = None;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if stream.write_all(b"X").await.is_err() {
            closed_after = Some(started.elapsed());
            break;
        }
        let mut probe = [0u8; 64];
        if let Ok(Ok(0)) =
            tokio::time::timeout(Duration::from_millis(1), stream.read(&mut probe)).await
        {
            closed_after = Some(started.elapsed());
            break;
        }
    }
    let closed_after = closed_after.expect("a slowloris connection must be closed");
    assert!(closed_after < Duration::from_secs(4), "{closed_after:?}");
    // herald still answers others.
    assert_eq!(herald.get("/health").await.0, 200);
}

#[tokio::test]
async fn bodies_that_never_finish_are_answered_within_the_body_timeout() {
    let herald = InProcess::start(&config("      body_timeout_seconds: 1\n"));
    // The same for a route with a sender preset: its check comes after the read.
    let requests = ["hook", "slack"].map(|route| {
        [
            // A Content-Length larger than what is sent.
            format!("POST /webhooks/{route} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{{\"a\":"),
            // A chunked body that never ends.
            format!("POST /webhooks/{route} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{{\"a\":\r\n"),
        ]
    });
    for request in requests.into_iter().flatten() {
        let mut stream = TcpStream::connect(herald.addr()).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let (answer, took) = read_until_closed(&mut stream, Duration::from_secs(10)).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(answer.contains(r#"{"error":"Bad request"}"#), "{answer}");
        assert!(took < Duration::from_secs(4), "{took:?}");
    }
}

#[tokio::test]
async fn idle_keep_alive_connections_are_closed() {
    let herald = InProcess::start(&config(
        "      idle_timeout_seconds: 1\n      header_timeout_seconds: 30\n",
    ));
    let mut stream = TcpStream::connect(herald.addr()).await.unwrap();
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let (answer, took) = read_until_closed(&mut stream, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(4),
        "{took:?}"
    );
}

#[tokio::test]
async fn connections_over_the_cap_are_closed_at_once_and_the_rest_are_served() {
    let mut herald = Herald::start(&config(
        "      max_connections: 8\n      header_timeout_seconds: 30\n      idle_timeout_seconds: 30\n",
    ));
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(TcpStream::connect(herald.addr()).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The ninth is closed as soon as it is accepted.
    let mut extra = TcpStream::connect(herald.addr()).await.unwrap();
    let (got, took) = read_until_closed(&mut extra, Duration::from_secs(5)).await;
    assert!(
        got.is_empty() && took < Duration::from_secs(1),
        "{got:?} {took:?}"
    );
    // Those already open are unaffected.
    for stream in &mut held {
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let (answer, _) = read_until_closed(stream, Duration::from_secs(5)).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    drop(held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(herald.get("/health").await.0, 200);
    assert_eq!(herald.terminate(), Some(0));
    let log = herald.log();
    assert!(
        log.contains("connections dropped while serving (totals)"),
        "{log}"
    );
    assert!(log.contains("refused_over_cap=1"), "{log}");
}

#[tokio::test]
async fn sigterm_is_bounded_by_the_grace_period_whatever_clients_do() {
    let mut herald = Herald::start(&config(
        "      shutdown_grace_seconds: 1\n      header_timeout_seconds: 60\n      body_timeout_seconds: 60\n",
    ));
    // One client holds a half-sent request, another a half-sent head.
    let mut body = TcpStream::connect(herald.addr()).await.unwrap();
    body.write_all(b"POST /webhooks/hook HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    let mut head = TcpStream::connect(herald.addr()).await.unwrap();
    head.write_all(b"POST /webhooks/hook HTTP/1.1\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let code = herald.terminate();
    let took = started.elapsed();
    assert_eq!(code, Some(0), "{}", herald.log());
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test]
async fn a_flood_of_forged_requests_writes_one_line_not_one_each() {
    let h = Herald::start(&config(""));
    for i in 0..300 {
        let (s, _) = h
            .post(
                "/webhooks/hook",
                format!("{{\"n\":{i}}}"),
                &[("x-hub-signature-256", "sha256=00".to_owned())],
            )
            .await;
        assert_eq!(s, 401);
    }
    let long_route = "x".repeat(5000);
    for _ in 0..50 {
        let (s, _) = h.post(&format!("/webhooks/{long_route}"), "{}", &[]).await;
        assert_eq!(s, 404);
    }
    let log = h.log();
    assert_eq!(
        log.matches("rejected: invalid signature").count(),
        1,
        "{log}"
    );
    assert_eq!(log.matches("rejected: unknown route").count(), 1, "{log}");
    assert!(log.lines().all(|l| l.len() < 1000), "{log}");
}

/// About 1 MB of `[[[...1...]]]` chains side by side: a tree of it would be ~40 MB.
fn nested_body() -> String {
    let unit = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    let units = vec![unit; 5000].join(",");
    format!("{{\"n\": 7, \"a\": [{units}]}}")
}

#[tokio::test]
async fn a_big_body_of_nested_arrays_costs_about_its_size() {
    let h = Herald::start(&config_with_routes(
        "        whole:\n          deliver: log\n        field:\n          prompt: 'n={n}'\n",
    ));
    let body = nested_body();
    let before = peak_rss_kb(h.child.id());
    for route in ["whole", "field"] {
        let (s, b) = h
            .post(
                &format!("/webhooks/{route}"),
                body.clone(),
                &[(
                    "x-hub-signature-256",
                    herald_webhook::verify::sign::github(SECRET, body.as_bytes()),
                )],
            )
            .await;
        assert_eq!(s, 202, "{b}");
    }
    let grew_mb = (peak_rss_kb(h.child.id()) - before) / 1024;
    assert!(
        grew_mb < 25,
        "peak RSS grew {grew_mb} MB for two 1 MB bodies"
    );
    let inbox = h.inbox();
    let whole = inbox.iter().find(|i| i["route"] == "whole").unwrap();
    let prompt = whole["prompt"].as_str().unwrap();
    assert!(prompt.starts_with("Webhook event 'unknown' on route 'whole':\n\n```json\n{\n  \"n\": 7,\n  \"a\": [\n    [\n"), "{prompt:.200}");
    assert_eq!(
        inbox.iter().find(|i| i["route"] == "field").unwrap()["prompt"],
        "n=7"
    );
}

#[tokio::test]
async fn bodies_beyond_the_in_flight_budget_wait_then_get_503_with_retry_after() {
    let config = config_with_routes("        slow:\n          script: slow.sh\n").replace(
        "      rate_limit: 100000\n",
        "      rate_limit: 100000\n      max_body_bytes_in_flight: 4096\n",
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    std::fs::create_dir_all(home.path().join("scripts")).unwrap();
    std::fs::write(home.path().join("scripts/slow.sh"), "sleep 4\necho '{}'\n").unwrap();
    let h = Herald::start_in(home, &[]);
    let body = format!("{{\"pad\": \"{}\"}}", "x".repeat(3000));
    let sig = herald_webhook::verify::sign::github(SECRET, body.as_bytes());
    let first_headers = [("x-hub-signature-256", sig.clone())];
    let first = h.post("/webhooks/slow", body.clone(), &first_headers);
    let second = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let client = http_client(Duration::from_secs(30));
        let started = Instant::now();
        let resp = client
            .post(h.url("/webhooks/slow"))
            .header("x-hub-signature-256", &sig)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let retry_after = resp
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        (
            resp.status(),
            retry_after,
            resp.text().await.unwrap(),
            started.elapsed(),
        )
    };
    let ((first_status, _), (status, retry_after, text, waited)) = tokio::join!(first, second);
    assert_eq!(first_status, 202);
    assert_eq!(status, 503, "{text}");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert!(
        waited >= Duration::from_millis(1900) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
    // Once the first is answered there is room again.
    let (s, _) = h
        .post(
            "/webhooks/slow",
            body.clone(),
            &[("x-hub-signature-256", sig)],
        )
        .await;
    assert_eq!(s, 202);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_big_bodies_whose_prompt_reads_a_nested_value_stay_small() {
    let h = Herald::start(&config_with_routes(
        "        nested:\n          prompt: 'a={a}'\n",
    ));
    let body = nested_body();
    let sig = herald_webhook::verify::sign::github(SECRET, body.as_bytes());
    let before = peak_rss_kb(h.child.id());
    let headers = [("x-hub-signature-256", sig)];
    let posts = (0..16).map(|_| h.post("/webhooks/nested", body.clone(), &headers));
    for (s, b) in futures_util::future::join_all(posts).await {
        assert_eq!(s, 202, "{b}");
    }
    let peak_mb = peak_rss_kb(h.child.id()) / 1024;
    let grew_mb = peak_mb - before / 1024;
    assert!(
        peak_mb < 256,
        "peak RSS {peak_mb} MB for 16 nested 1 MB bodies"
    );
    eprintln!(
        "16 bodies of nested arrays shown through {{a}}: peak {peak_mb} MB (grew {grew_mb} MB)"
    );
    // The prompt shows the value as Python's json.dumps(indent=2) does, cut.
    let (code, out, err) = h.cli(&["inbox", "list", "--json", "--limit", "1"]);
    assert_eq!(code, 0, "{err}");
    let listed: Vec<Value> = serde_json::from_str(&out).unwrap();
    let prompt = listed[0]["prompt"].as_str().unwrap().to_owned();
    assert!(prompt.starts_with("a=[\n  [\n    [\n"), "{prompt:.100}");
    assert_eq!(prompt.chars().count(), "a=".len() + 2000);
}

#[tokio::test]
async fn sixteen_big_nested_bodies_stay_small_while_the_worker_runs_them() {
    // The worker claims each entry and runs the agent on its prompt; the payload it
    // carries is never built as a tree (16 of these at once peaked at 671 MB).
    let provider = herald_test_support::FakeProvider::start(vec![]);
    provider.set_fallback(herald_test_support::Scripted::text("seen"));
    let model = format!(
        "model:\n  default: fake\n  base_url: {}\n",
        provider.base_url
    );
    let h = Herald::start(&format!(
        "{model}{}",
        config_with_routes("        whole:\n          deliver: log\n")
    ));
    let body = nested_body();
    let sig = herald_webhook::verify::sign::github(SECRET, body.as_bytes());
    let headers = [("x-hub-signature-256", sig)];
    let posts = (0..16).map(|_| h.post("/webhooks/whole", body.clone(), &headers));
    for (s, b) in futures_util::future::join_all(posts).await {
        assert_eq!(s, 202, "{b}");
    }
    wait_for(Duration::from_secs(60), "16 runs", || {
        (provider.requests().len() >= 16).then_some(())
    })
    .await;
    let done = |i: &Value| i["state"] == "delivered";
    wait_for(Duration::from_secs(60), "16 entries delivered", || {
        (h.inbox().iter().filter(|i| done(i)).count() == 16).then_some(())
    })
    .await;
    let peak_mb = peak_rss_kb(h.child.id()) / 1024;
    eprintln!("16 nested 1 MB bodies accepted and run: peak {peak_mb} MB");
    assert!(peak_mb < 256, "peak RSS {peak_mb} MB");
    // Listed, the payload is still the JSON object it came as.
    assert_eq!(h.inbox()[0]["payload"]["n"], 7);
}

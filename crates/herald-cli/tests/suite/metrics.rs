//! Prometheus metrics at `/metrics`: for each family of series, a known sequence of
//! requests to the real binary, then the scraped values.

use super::api::{KEY, api_config, call, post_json};
use super::fakes::*;
use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

const TOKEN: &str = "scrape-token-123";
const METRICS: &str = "metrics:\n  enabled: true\n  token: scrape-token-123\n";

/// The scraped text, with the token.
async fn scrape(h: &Herald) -> String {
    scrape_at(&h.url("/metrics"), TOKEN).await
}

async fn scrape_at(url: &str, token: &str) -> String {
    let r = http_client(Duration::from_secs(10))
        .get(url)
        .header("Authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text"),
        "{:?}",
        r.headers()
    );
    r.text().await.unwrap()
}

/// The value of one series (its name with labels exactly as written), 0 when absent.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0.0)
}

/// Scrapes until `series` reads `want` (some are recorded just after the answer).
async fn until(h: &Herald, series: &str, want: f64) -> String {
    let started = std::time::Instant::now();
    loop {
        let text = scrape(h).await;
        if value(&text, series) == want {
            return text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "{series} is not {want}:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn requests(route: &str, outcome: &str) -> String {
    format!("herald_webhook_requests_total{{route=\"{route}\",outcome=\"{outcome}\"}}")
}

#[tokio::test]
async fn webhook_requests_verification_failures_and_body_bytes() {
    let routes = "        gh:\n          events: [push, issues]\n          filters: {field: action, equals: opened}\n";
    let h = Herald::start(&format!("{}{METRICS}", config_with_routes(routes)));
    // Off unless scraped with the token.
    let refused = http_client(Duration::from_secs(10))
        .get(h.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
    let opened = r#"{"action": "opened"}"#;
    assert_eq!(
        h.github("gh", "issues", opened, Some("m-1")).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        h.github("gh", "issues", opened, Some("m-1")).await.0,
        StatusCode::OK
    );
    h.github("gh", "issues", r#"{"action": "closed"}"#, Some("m-2"))
        .await;
    h.github("gh", "pull_request", opened, Some("m-3")).await;
    let forged = [
        ("x-github-event", "issues".to_owned()),
        ("x-hub-signature-256", "sha256=00".to_owned()),
    ];
    h.post("/webhooks/gh", opened, &forged).await;
    h.post("/webhooks/gh", opened, &[]).await;
    // A name herald does not know never becomes a label.
    h.post("/webhooks/not-a-route-4f2a", opened, &[]).await;
    let text = scrape(&h).await;
    for (outcome, n) in [
        ("accepted", 1.0),
        ("duplicate", 1.0),
        ("filtered", 1.0),
        ("ignored", 1.0),
        ("invalid_signature", 2.0),
    ] {
        assert_eq!(
            value(&text, &requests("gh", outcome)),
            n,
            "{outcome}:\n{text}"
        );
    }
    assert_eq!(
        value(&text, &requests("unknown", "unknown_route")),
        1.0,
        "{text}"
    );
    assert!(!text.contains("not-a-route-4f2a"), "{text}");
    let failures = |scheme: &str, reason: &str| {
        format!(
            "herald_webhook_verification_failures_total{{scheme=\"{scheme}\",reason=\"{reason}\"}}"
        )
    };
    assert_eq!(value(&text, &failures("github", "mismatch")), 1.0, "{text}");
    assert_eq!(value(&text, &failures("none", "no_signature_header")), 1.0);
    let bytes = value(&text, "herald_webhook_body_bytes_total{route=\"gh\"}");
    let sent = 5 * opened.len() + r#"{"action": "closed"}"#.len();
    assert_eq!(bytes, sent as f64, "{text}");
}

#[tokio::test]
async fn inbox_depth_age_and_leases() {
    // No model: accepted events wait in the inbox.
    let h = Herald::start(&format!(
        "{}{METRICS}",
        config_with_routes("        q: {}\n")
    ));
    for n in 0..3 {
        let d = format!("q-{n}");
        let (s, _) = h.github("q", "push", "{}", Some(&d)).await;
        assert_eq!(s, StatusCode::ACCEPTED);
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let text = scrape(&h).await;
    assert_eq!(
        value(&text, "herald_inbox_events{state=\"queued\"}"),
        3.0,
        "{text}"
    );
    assert_eq!(value(&text, "herald_inbox_events{state=\"dead\"}"), 0.0);
    assert!(
        text.contains("herald_inbox_events{state=\"delivered\"} 0"),
        "every state is shown: {text}"
    );
    let age = value(&text, "herald_inbox_oldest_queued_age_seconds");
    assert!((1.0..60.0).contains(&age), "{text}");
    assert_eq!(value(&text, "herald_inbox_leases_held"), 0.0);
    assert_eq!(value(&text, "herald_store_shared"), 0.0);
}

#[tokio::test]
async fn delivery_attempts_and_their_duration() {
    let fake = Fake::start(telegram_ok());
    let routes = "        tg:\n          deliver_only: true\n          deliver: telegram\n          prompt: 'hello'\n          deliver_extra: {chat_id: '1'}\n";
    let base = format!("{}/bot", fake.base);
    let h = Herald::start_with(
        &format!("{}{METRICS}", config_with_routes(routes)),
        &[
            ("TELEGRAM_BOT_TOKEN", "123:tg"),
            ("TELEGRAM_BASE_URL", base.as_str()),
        ],
    );
    assert_eq!(
        h.github("tg", "push", "{}", Some("d-1")).await.0,
        StatusCode::OK
    );
    // A refused send (400): permanent.
    fake.push(Reply::json(
        400,
        json!({"ok": false, "description": "chat not found"}),
    ));
    assert_eq!(
        h.github("tg", "push", "{}", Some("d-2")).await.0,
        StatusCode::BAD_GATEWAY
    );
    let text = scrape(&h).await;
    let attempts = |outcome: &str| {
        format!("herald_delivery_attempts_total{{target=\"telegram\",outcome=\"{outcome}\"}}")
    };
    assert_eq!(value(&text, &attempts("delivered")), 1.0, "{text}");
    assert_eq!(value(&text, &attempts("permanent_error")), 1.0, "{text}");
    assert_eq!(
        value(
            &text,
            "herald_delivery_duration_seconds_count{target=\"telegram\"}"
        ),
        2.0,
        "{text}"
    );
    assert_eq!(value(&text, &requests("tg", "delivered")), 1.0);
    assert_eq!(value(&text, &requests("tg", "delivery_failed")), 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_provider_calls_tokens_tool_calls_and_approvals() {
    let work = tempfile::tempdir().unwrap();
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "terminal", r#"{"command": "rm -f nothing.txt"}"#)]),
        Scripted::text("Removed."),
        Scripted::Status(401, r#"{"error": {"message": "bad key"}}"#.into()),
    ]);
    let extra = format!("terminal:\n  cwd: {}\n{METRICS}", work.path().display());
    let config =
        api_config(&provider.base_url, "").replace("agent:\n", &format!("{extra}agent:\n"));
    let h = Herald::start(&config);
    let (s, b) = post_json(&h, "/v1/runs", json!({"input": "clean up"})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let run = b["run_id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    loop {
        let path = format!("/v1/runs/{run}/approval");
        let (s, _) = post_json(&h, &path, json!({"choice": "once"})).await;
        if s == StatusCode::OK {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (s, b) = post_json(&h, "/v1/runs", json!({"input": "again"})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let runs = |outcome: &str| {
        format!("herald_agent_runs_total{{door=\"api_server\",outcome=\"{outcome}\"}}")
    };
    let text = until(&h, &runs("failed"), 1.0).await;
    assert_eq!(value(&text, &runs("completed")), 1.0, "{text}");
    assert_eq!(
        value(
            &text,
            "herald_agent_turn_duration_seconds_count{door=\"api_server\"}"
        ),
        2.0
    );
    assert_eq!(
        value(
            &text,
            "herald_provider_request_duration_seconds_count{provider=\"auto\"}"
        ),
        3.0,
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "herald_provider_errors_total{provider=\"auto\",class=\"auth\"}"
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "herald_provider_tokens_total{provider=\"auto\",direction=\"input\"}"
        ),
        3.0,
        "the text answer's usage: {text}"
    );
    assert_eq!(
        value(
            &text,
            "herald_tool_calls_total{tool=\"terminal\",outcome=\"ok\"}"
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(&text, "herald_approvals_total{outcome=\"once\"}"),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_requests_open_connections_and_sse_streams() {
    let provider = FakeProvider::start(vec![Scripted::Delayed(
        Duration::from_secs(2),
        Box::new(Scripted::text("late")),
    )]);
    let config = format!("{}{METRICS}", api_config(&provider.base_url, ""));
    let h = Herald::start(&config);
    assert_eq!(
        call(&h, "GET", "/v1/models", None, &[]).await.status(),
        StatusCode::OK
    );
    let missing = call(&h, "GET", "/v1/no/such/thing-9c1", None, &[]).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let (s, b) = post_json(&h, "/v1/runs", json!({"input": "slow"})).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let run = b["run_id"].as_str().unwrap().to_owned();
    // An SSE stream open while the scrape reads.
    let stream = call(&h, "GET", &format!("/v1/runs/{run}/events"), None, &[]).await;
    assert_eq!(stream.status(), StatusCode::OK);
    let text = until(&h, "herald_frontdoor_open{door=\"sse\"}", 1.0).await;
    assert!(
        value(&text, "herald_frontdoor_open{door=\"api\"}") >= 2.0,
        "{text}"
    );
    let req = |endpoint: &str, code: &str| {
        format!(
            "herald_frontdoor_requests_total{{door=\"api\",endpoint=\"{endpoint}\",code=\"{code}\"}}"
        )
    };
    assert_eq!(value(&text, &req("/v1/models", "2xx")), 1.0, "{text}");
    assert_eq!(value(&text, &req("unmatched", "4xx")), 1.0, "{text}");
    assert_eq!(value(&text, &req("/v1/runs", "2xx")), 1.0, "{text}");
    assert!(!text.contains("thing-9c1"), "{text}");
    // The stream ends with the run: no stream is open after it.
    let body = stream.text().await.unwrap();
    assert!(body.contains("run.completed"), "{body}");
    until(&h, "herald_frontdoor_open{door=\"sse\"}", 0.0).await;
    // The API key does not open /metrics; the metrics token does.
    let r = call(&h, "GET", "/metrics", None, &[]).await;
    assert_eq!(
        r.status(),
        StatusCode::UNAUTHORIZED,
        "{KEY} is not the token"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_host_restarts_callback_failures_mcp_servers_and_websockets() {
    let provider = FakeProvider::start(vec![Scripted::text("First."), Scripted::text("Second.")]);
    let servers = super::mcp::stdio_server("files", "", "");
    let extra = format!("mcp_servers:\n{servers}metrics:\n  enabled: true\n");
    let home = super::rpc::rpc_home(&provider.base_url, &extra);
    // The server writes its pid into the home, not into the working folder.
    let config = home.path().join("config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    let pids = home.path().join("pids").display().to_string();
    std::fs::write(&config, text.replace("${MCP_TEST_PID_FILE}", &pids)).unwrap();
    super::plugins::install_plugins(home.path(), &["hostile-exit", "hostile-raise-after"]);
    let server = super::rpc::WsServer::start(home.path(), "127.0.0.1:0", None).await;
    let base = server
        .url
        .replace("ws://", "http://")
        .replace("/api/ws", "");
    let metrics = format!("{base}/metrics");
    // Without metrics.token, the socket's own token guards /metrics.
    let r = http_client(Duration::from_secs(10))
        .get(&metrics)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let mut c = server.client(None).await;
    let sid = c.session().await;
    c.turn(&sid, "one").await;
    let started = std::time::Instant::now();
    let text = loop {
        let text = scrape_at(&metrics, &server.token).await;
        if value(&text, "herald_plugin_host_restarts_total") == 1.0
            && value(&text, "herald_mcp_server_up{server=\"files\"}") == 1.0
        {
            break text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no restart or no server up:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        value(
            &text,
            "herald_plugin_callback_failures_total{method=\"middleware.execute\"}"
        ) >= 1.0,
        "{text}"
    );
    assert_eq!(
        value(&text, "herald_frontdoor_open{door=\"websocket\"}"),
        1.0,
        "{text}"
    );
    assert_eq!(
        value(
            &text,
            "herald_frontdoor_requests_total{door=\"rpc\",endpoint=\"session.create\",code=\"2xx\"}"
        ),
        1.0,
        "{text}"
    );
    assert!(
        value(&text, "herald_frontdoor_open{door=\"rpc\"}") >= 1.0,
        "{text}"
    );
}

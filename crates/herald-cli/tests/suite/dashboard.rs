//! The dashboard in a real browser (headless Chromium over WebDriver): log in, find an
//! event by its delivery id, open it and replay it; watch a run stream and approve its
//! command; a payload carrying `<script>` shows as text. Screenshots of each page go to
//! `target/dashboard-screenshots/`. Plus what a browser is not needed for: the login's
//! and the API's refusals, and the token command.

use super::api::{KEY, api_config, post_json};
use super::browser::Browser;
use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use reqwest::StatusCode;
use std::time::Duration;

/// A gateway with the webhook route `gh` (the agent answers, the log delivers) and
/// the API (whose key logs in).
fn gateway(provider: &FakeProvider, top: &str) -> Herald {
    let routes = "        gh:\n          events: [issues]\n          prompt: 'Issue: {issue.title}'\n          deliver: log\n";
    let webhook = config_with_routes(routes);
    let webhook = webhook.trim_start_matches("platforms:\n");
    let api = api_config(&provider.base_url, "").replace("agent:\n", &format!("{top}agent:\n"));
    Herald::start(&format!("{api}{webhook}"))
}

/// A client that keeps the dashboard's cookie by hand, and follows no redirect.
pub struct Session {
    client: reqwest::Client,
    cookie: Option<String>,
}

impl Session {
    pub fn new() -> Session {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        Session {
            client,
            cookie: None,
        }
    }

    pub async fn log_in(&mut self, h: &Herald, token: &str) -> reqwest::Response {
        let r = self
            .client
            .post(h.url("/dashboard/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={}", token))
            .send()
            .await
            .unwrap();
        if let Some(c) = r.headers().get("set-cookie") {
            let c = c.to_str().unwrap();
            self.cookie = Some(c.split(';').next().unwrap().to_owned());
        }
        r
    }

    pub fn get(&self, h: &Herald, path: &str) -> reqwest::RequestBuilder {
        self.with_cookie(self.client.get(h.url(path)))
    }

    fn post(&self, h: &Herald, path: &str) -> reqwest::RequestBuilder {
        self.with_cookie(self.client.post(h.url(path)))
    }

    fn with_cookie(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.cookie {
            Some(c) => r.header("cookie", c),
            None => r,
        }
    }
}

/// POSTs a GitHub-signed event to the webhook listener (the gateway records where it
/// listens in its home; `h.url` is the API's).
async fn event(h: &Herald, body: &str, delivery: &str) -> StatusCode {
    let file = h.home().join("gateway.json");
    let state: serde_json::Value = wait_for(Duration::from_secs(10), "gateway.json", || {
        serde_json::from_str(&std::fs::read_to_string(&file).ok()?).ok()
    })
    .await;
    let base = state["webhook"][0].as_str().unwrap();
    http_client(Duration::from_secs(10))
        .post(format!("{base}/webhooks/gh"))
        .header("x-github-event", "issues")
        .header("x-github-delivery", delivery)
        .header(
            "x-hub-signature-256",
            herald_webhook::verify::sign::github(SECRET, body.as_bytes()),
        )
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
        .status()
}

async fn log_in(b: &Browser, h: &Herald) {
    b.client.goto(&h.url("/dashboard/")).await.unwrap();
    b.find("#token").await.send_keys(KEY).await.unwrap();
    b.find("#login button").await.click().await.unwrap();
    b.find("nav a[data-page=events]").await;
}

const HOSTILE: &str = r#"{"action": "opened", "issue": {"title": "<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">"}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_is_found_opened_and_replayed_and_what_senders_wrote_stays_text() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::text("Looked at it."));
    let h = gateway(&provider, "");
    for n in 0..5 {
        let d = format!("other-{n}");
        let s = event(&h, r#"{"issue": {"title": "fine"}}"#, &d).await;
        assert_eq!(s, StatusCode::ACCEPTED);
    }
    assert_eq!(event(&h, HOSTILE, "find-me-42").await, StatusCode::ACCEPTED);
    wait_for(Duration::from_secs(30), "six delivered", || {
        (h.inbox()
            .iter()
            .filter(|i| i["state"] == "delivered")
            .count()
            == 6)
            .then_some(())
    })
    .await;
    let b = Browser::start().await;
    // Logged out, the dashboard is its login page, and a wrong key is said.
    b.client.goto(&h.url("/dashboard/")).await.unwrap();
    b.find("#token")
        .await
        .send_keys("not-the-key")
        .await
        .unwrap();
    b.find("#login button").await.click().await.unwrap();
    b.until("document.querySelector('#message') && !document.querySelector('#message').hidden")
        .await;
    b.screenshot("login").await;
    log_in(&b, &h).await;
    b.find("#events tbody tr").await;
    b.screenshot("events").await;
    b.find("#event-filters input[name=q]")
        .await
        .send_keys("find-me-42")
        .await
        .unwrap();
    b.find("#event-filters button").await.click().await.unwrap();
    b.until("document.querySelectorAll('#events tbody tr').length === 1")
        .await;
    b.find("#events tbody tr a").await.click().await.unwrap();
    let payload = b.find("pre.payload").await.text().await.unwrap();
    assert!(
        payload.contains("<script>window.pwned = 1</script>"),
        "{payload}"
    );
    let prompt = b.find("pre.prompt").await.text().await.unwrap();
    assert!(prompt.contains("<img src=x onerror="), "{prompt}");
    let pwned = b
        .client
        .execute("return [window.pwned === undefined, document.querySelectorAll('#page script, #page img').length];", vec![])
        .await
        .unwrap();
    assert_eq!(
        pwned,
        serde_json::json!([true, 0]),
        "nothing the sender wrote ran"
    );
    b.screenshot("event").await;
    // Replayed, with confirmation: the agent runs it again.
    b.find("#replay").await.click().await.unwrap();
    b.find("#confirm-yes").await.click().await.unwrap();
    b.until("document.querySelector('.notice') && document.querySelector('.notice').textContent.includes('again')")
        .await;
    let id = h
        .inbox()
        .iter()
        .find(|i| i["delivery_id"] == "find-me-42")
        .unwrap()["id"]
        .to_string();
    wait_for(Duration::from_secs(30), "the replay ran", || {
        let (_, out, _) = h.cli(&["inbox", "show", &id, "--json"]);
        let shown: serde_json::Value = serde_json::from_str(&out).ok()?;
        let outcomes: Vec<String> = shown["attempt_log"]
            .as_array()?
            .iter()
            .filter_map(|a| a["outcome"].as_str().map(str::to_owned))
            .collect();
        (outcomes.contains(&"replayed".to_owned()) && shown["state"] == "delivered").then_some(())
    })
    .await;
    for page in ["deliveries", "routes", "health", "runs"] {
        b.client
            .goto(&h.url(&format!("/dashboard/#/{page}")))
            .await
            .unwrap();
        b.find(&format!("nav a.active[data-page={page}]")).await;
        b.find("#page h1").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.screenshot(page).await;
    }
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_streams_and_its_command_is_approved_from_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let doomed = dir.path().join("doomed.txt");
    std::fs::write(&doomed, "x").unwrap();
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "terminal", r#"{"command": "rm -f doomed.txt"}"#)]),
        Scripted::text("Removed it."),
    ]);
    let h = gateway(
        &provider,
        &format!("terminal:\n  cwd: {}\n", dir.path().display()),
    );
    let (s, b) = post_json(&h, "/v1/runs", serde_json::json!({"input": "clean up"})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let run = b["run_id"].as_str().unwrap().to_owned();
    let b = Browser::start().await;
    log_in(&b, &h).await;
    b.client.goto(&h.url("/dashboard/#/runs")).await.unwrap();
    let link = b.find(&format!("#runs a[href='#/runs/{run}']")).await;
    b.screenshot("runs").await;
    link.click().await.unwrap();
    let command = b.find(".approval pre.command").await.text().await.unwrap();
    assert_eq!(command, "rm -f doomed.txt");
    b.screenshot("run-waiting").await;
    b.find(".approval button[data-choice=once]")
        .await
        .click()
        .await
        .unwrap();
    b.until("document.querySelector('#run-log') && document.querySelector('#run-log').textContent.includes('run.completed')")
        .await;
    let log = b.find("#run-log").await.text().await.unwrap();
    assert!(
        log.contains("approval.responded") && log.contains("Removed it."),
        "{log}"
    );
    b.screenshot("run-done").await;
    assert!(!doomed.exists(), "the approved command ran");
    b.close().await;
}

/// A page that opens a run's watch and never reads it holds up neither the run nor its
/// own reader, and costs herald a bounded amount of memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_that_is_never_read_holds_up_neither_the_run_nor_its_reader() {
    use tokio::io::AsyncWriteExt;
    // Two runs of 32 MB of answer each, as fast as the sockets take it: the first with
    // nobody watching, the second beside a watch that is never read.
    let part = "y".repeat(64 * 1024);
    let parts: Vec<&str> = std::iter::repeat_n(part.as_str(), 500).collect();
    let answer = || {
        Scripted::Delayed(
            Duration::from_secs(2),
            Box::new(Scripted::Events(Scripted::text_events(&parts))),
        )
    };
    let provider = FakeProvider::start(vec![answer(), answer()]);
    let h = gateway(&provider, "");
    let mut session = Session::new();
    session.log_in(&h, KEY).await;
    let mut peaks = Vec::new();
    let mut stalled = Vec::new();
    for watched in [false, true] {
        let (s, b) = post_json(&h, "/v1/runs", serde_json::json!({"input": "talk"})).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{b}");
        let run = b["run_id"].as_str().unwrap().to_owned();
        if watched {
            let mut watch = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
            let head = format!(
                "GET /dashboard/api/runs/{run}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {}\r\n\r\n",
                session.cookie.as_deref().unwrap()
            );
            watch.write_all(head.as_bytes()).await.unwrap();
            stalled.push(watch);
        }
        let started = std::time::Instant::now();
        let (events, _) = super::api::run_events(&h, &run).await;
        let last = events.last().unwrap();
        assert_eq!(last["event"], "run.completed", "{last}");
        assert_eq!(last["output"].as_str().map(str::len), Some(500 * 64 * 1024));
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{:?}",
            started.elapsed()
        );
        peaks.push(peak_rss_kb(h.child.id()));
    }
    // Measured: about 33 MB more for the second run with nobody watching, 180 MB beside
    // the stalled watch (a debug build); the bound says it stays a few answers' worth.
    let grown = peaks[1].saturating_sub(peaks[0]);
    eprintln!("peak RSS grew {grown} kB beside a watch nobody reads");
    assert!(
        grown < 384 * 1024,
        "herald grew {grown} kB beside a watch nobody reads"
    );
    drop(stalled);
}

#[tokio::test]
async fn the_login_and_the_api_refuse_what_they_should() {
    let provider = FakeProvider::start(vec![]);
    let h = gateway(&provider, "");
    let client = http_client(Duration::from_secs(10));
    // Not logged in: the API answers 401, the page is the login.
    let r = client
        .get(h.url("/dashboard/api/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let page = client.get(h.url("/dashboard/")).send().await.unwrap();
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    for (name, value) in [
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
    ] {
        assert_eq!(page.headers()[name], value, "{name}");
    }
    let powers = page.headers()["permissions-policy"].to_str().unwrap();
    assert!(
        powers.contains("camera=()") && powers.contains("clipboard-read=()"),
        "{powers}"
    );
    assert!(page.text().await.unwrap().contains("name=\"token\""));
    // A login from another site is refused, whatever the key.
    let cross = client
        .post(h.url("/dashboard/login"))
        .header("origin", "http://evil.example")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", KEY))
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), StatusCode::FORBIDDEN);
    // Logged in, a change without the CSRF token is refused.
    let mut session = Session::new();
    let login = session.log_in(&h, KEY).await;
    assert_eq!(login.status(), StatusCode::SEE_OTHER);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    // From the login on, each route's requests are counted per minute for its chart.
    let body = r#"{"action": "opened", "issue": {"title": "counted"}}"#;
    assert_eq!(event(&h, body, "traffic-1").await, StatusCode::ACCEPTED);
    assert_eq!(event(&h, body, "traffic-1").await, StatusCode::OK);
    let r = session
        .get(&h, "/dashboard/api/routes")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let routes: serde_json::Value = r.json().await.unwrap();
    let gh = routes["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "gh")
        .unwrap();
    let total = |column: &str| -> u64 {
        gh["traffic"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m[column].as_u64().unwrap())
            .sum()
    };
    assert_eq!(
        (total("accepted"), total("ignored"), total("failed")),
        (1, 1, 0),
        "{gh}"
    );
    let r = session
        .post(&h, "/dashboard/api/events/1/replay")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    // A wrong key is answered after a second, four at a time; the right key still
    // logs in (nobody can lock the others out).
    let started = std::time::Instant::now();
    let guesser = Session::new().client;
    let guesses = (0..8).map(|_| {
        guesser
            .post(h.url("/dashboard/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("token=wrong-wrong-wrong")
            .send()
    });
    let answers = futures_util::future::join_all(guesses).await;
    assert!(
        answers
            .iter()
            .all(|a| a.as_ref().unwrap().headers()["location"] == "/dashboard/?login=failed")
    );
    assert!(
        started.elapsed() >= Duration::from_millis(1900),
        "{:?}",
        started.elapsed()
    );
    let late = Session::new().log_in(&h, KEY).await;
    assert_eq!(late.headers()["location"], "/dashboard/");
    // Another host name on a loopback listener (DNS rebinding) is refused.
    let rebound = client
        .get(h.url("/dashboard/"))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), StatusCode::FORBIDDEN);
    // A body that never ends is let go (408), a huge one refused (413).
    let slow = async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
        let head = "POST /dashboard/login HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: 1000\r\n\r\ntoken=";
        tcp.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 512];
        let n = tokio::time::timeout(Duration::from_secs(20), tcp.read(&mut answer))
            .await
            .expect("answered within 20 s")
            .unwrap();
        String::from_utf8_lossy(&answer[..n]).into_owned()
    };
    let started = std::time::Instant::now();
    let answer = slow.await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(started.elapsed() < Duration::from_secs(15));
    let huge = client
        .post(h.url("/dashboard/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", "x".repeat(100_000)))
        .send()
        .await
        .unwrap();
    assert_eq!(huge.status(), StatusCode::PAYLOAD_TOO_LARGE);
    // Under /dashboard, anything unknown is the dashboard's own 404, with its policy.
    let missing = client.get(h.url("/dashboard/nope")).send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert!(missing.headers().contains_key("content-security-policy"));
}

#[tokio::test]
async fn the_webhook_listener_serves_it_with_the_token_and_never_open_to_others() {
    // API off, loopback: the token command makes the login.
    let h = Herald::start(&config_with_routes("        r: {}\n"));
    let (code, token, _) = h.cli(&["dashboard", "token"]);
    assert_eq!(code, 0);
    let token = token.trim().to_owned();
    assert_eq!(token.len(), 64);
    let mut session = Session::new();
    let login = session.log_in(&h, &token).await;
    assert_eq!(login.headers()["location"], "/dashboard/");
    let r = session
        .get(&h, "/dashboard/api/health")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // No model here: an accepted event waits, and is cancelled from the dashboard
    // (with the page's CSRF token), once.
    let (status, _) = h.github("r", "push", "{}", Some("wait-1")).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let page = session
        .get(&h, "/dashboard/")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = page
        .split("name=\"csrf-token\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let id = h.inbox()[0]["id"].to_string();
    let cancel = format!("/dashboard/api/events/{id}/cancel");
    let r = session
        .post(&h, &cancel)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(h.inbox()[0]["state"], "cancelled");
    let again = session
        .post(&h, &cancel)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), StatusCode::CONFLICT);
    // A new token ends the sessions the old one opened.
    let (code, renewed, _) = h.cli(&["dashboard", "token", "--new"]);
    assert_eq!(code, 0);
    assert_ne!(renewed.trim(), token);
    let r = session
        .get(&h, "/dashboard/api/health")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // A public bind with no token: not served at all.
    let public = config_with_routes("        r: {}\n").replace("host: 127.0.0.1", "host: 0.0.0.0");
    let h = Herald::start(&public);
    let (status, _) = h.get("/dashboard/").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(
        h.log().contains("the dashboard is not served"),
        "{}",
        h.log()
    );
}

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
    gateway_with_route(provider, top, "")
}

/// [`gateway`] with more settings of the route `gh` (`more`: YAML lines indented by 10).
fn gateway_with_route(provider: &FakeProvider, top: &str, more: &str) -> Herald {
    let routes = format!(
        "        gh:\n          events: [issues]\n          prompt: 'Issue: {{issue.title}}'\n          deliver: log\n{more}"
    );
    let webhook = config_with_routes(&routes);
    let webhook = webhook.trim_start_matches("platforms:\n");
    let api = api_config(&provider.base_url, "").replace("agent:\n", &format!("{top}agent:\n"));
    Herald::start(&format!("{api}{webhook}"))
}

/// A client that keeps the dashboard's cookie and session secret by hand, as the page
/// does, and follows no redirect.
pub struct Session {
    client: reqwest::Client,
    cookie: Option<String>,
    secret: Option<String>,
}

impl Session {
    fn new() -> Session {
        Session::from(None)
    }

    /// A client whose connections come from `source` (another loopback address).
    fn from(source: Option<std::net::IpAddr>) -> Session {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(60))
            .local_address(source)
            .build()
            .unwrap();
        Session {
            client,
            cookie: None,
            secret: None,
        }
    }

    async fn log_in(&mut self, h: &Herald, token: &str) -> reqwest::Response {
        let r = self.login_request(h, token).send().await.unwrap();
        if let Some(c) = r.headers().get("set-cookie") {
            let c = c.to_str().unwrap();
            self.cookie = Some(c.split(';').next().unwrap().to_owned());
        }
        r
    }

    /// Logs in, asserting it worked, and keeps the secret the answer gives.
    pub async fn logged_in(h: &Herald, token: &str) -> Session {
        let mut s = Session::new();
        let r = s.log_in(h, token).await;
        assert_eq!(r.status(), StatusCode::OK);
        let body: serde_json::Value = r.json().await.unwrap();
        s.secret = Some(body["secret"].as_str().unwrap().to_owned());
        assert_eq!(s.secret.as_deref().map(str::len), Some(64), "{body}");
        s
    }

    fn login_request(&self, h: &Herald, token: &str) -> reqwest::RequestBuilder {
        self.with_cookie(self.client.post(h.url("/dashboard/login")))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={token}"))
    }

    pub fn get(&self, h: &Herald, path: &str) -> reqwest::RequestBuilder {
        self.with_secret(self.with_cookie(self.client.get(h.url(path))))
    }

    fn post(&self, h: &Herald, path: &str) -> reqwest::RequestBuilder {
        self.with_secret(self.with_cookie(self.client.post(h.url(path))))
    }

    fn with_cookie(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.cookie {
            Some(c) => r.header("cookie", c),
            None => r,
        }
    }

    fn with_secret(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.secret {
            Some(s) => r.header("x-dashboard-secret", s),
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
    // The session's secret is in this tab's sessionStorage, never in the page: a
    // reload keeps working; a new tab has none and shows the login (logging in there
    // shares the session).
    let kept = b
        .client
        .execute("return [sessionStorage.getItem('herald-dashboard-secret') || '', document.documentElement.outerHTML];", vec![])
        .await
        .unwrap();
    let secret = kept[0].as_str().unwrap();
    assert_eq!(secret.len(), 64, "{kept}");
    assert!(!kept[1].as_str().unwrap().contains(secret));
    b.client.refresh().await.unwrap();
    b.find("nav a[data-page=events]").await;
    b.find("#events tbody").await;
    let first_tab = b.client.window().await.unwrap();
    let tab = b.client.new_window(true).await.unwrap();
    b.client.switch_to_window(tab.handle).await.unwrap();
    b.client.goto(&h.url("/dashboard/#/runs")).await.unwrap();
    b.find("#token").await;
    b.find("#token").await.send_keys(KEY).await.unwrap();
    b.find("#login button").await.click().await.unwrap();
    b.find("nav a.active[data-page=runs]").await;
    b.client.close_window().await.unwrap();
    b.client.switch_to_window(first_tab).await.unwrap();
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
    let session = Session::logged_in(&h, KEY).await;
    let mut peaks = Vec::new();
    let mut stalled = Vec::new();
    for watched in [false, true] {
        let (s, b) = post_json(&h, "/v1/runs", serde_json::json!({"input": "talk"})).await;
        assert_eq!(s, StatusCode::ACCEPTED, "{b}");
        let run = b["run_id"].as_str().unwrap().to_owned();
        if watched {
            let mut watch = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
            let head = format!(
                "GET /dashboard/api/runs/{run}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {}\r\nX-Dashboard-Secret: {}\r\n\r\n",
                session.cookie.as_deref().unwrap(),
                session.secret.as_deref().unwrap(),
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
    // A login answers the session's secret in its body, beside an HttpOnly cookie.
    let mut session = Session::new();
    let login = session.log_in(&h, KEY).await;
    assert_eq!(login.status(), StatusCode::OK);
    let cookie = login.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let body: serde_json::Value = login.json().await.unwrap();
    session.secret = body["secret"].as_str().map(str::to_owned);
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
    // A change from a page of another site is refused, secret or not.
    let r = session
        .post(&h, "/dashboard/api/events/1/replay")
        .header("sec-fetch-site", "cross-site")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let wrong = Session::new().log_in(&h, "wrong-wrong-wrong").await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let said: serde_json::Value = wrong.json().await.unwrap();
    assert_eq!(said["code"], "login_failed", "{said}");
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
    let session = Session::logged_in(&h, &token).await;
    let r = session
        .get(&h, "/dashboard/api/health")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    // No model here: an accepted event waits, and is cancelled from the dashboard
    // (with the session's secret), once.
    let (status, _) = h.github("r", "push", "{}", Some("wait-1")).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let id = h.inbox()[0]["id"].to_string();
    let cancel = format!("/dashboard/api/events/{id}/cancel");
    let r = session.post(&h, &cancel).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(h.inbox()[0]["state"], "cancelled");
    let again = session.post(&h, &cancel).send().await.unwrap();
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

/// A login's request, written whole on its own connection; the answer is read later.
async fn login_in_flight(h: &Herald, token: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let mut tcp = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let body = format!("token={token}");
    let request = format!(
        "POST /dashboard/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    tcp
}

/// The status and `Retry-After` of an answer read to its end.
async fn status_and_retry(mut tcp: tokio::net::TcpStream) -> (u16, Option<u64>) {
    use tokio::io::AsyncReadExt;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(150), tcp.read_to_end(&mut answer))
        .await
        .expect("answered")
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    let status = text.split(' ').nth(1).unwrap().parse().unwrap();
    let retry = text
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("retry-after: ")
                .map(str::to_owned)
        })
        .map(|v| v.trim().parse().unwrap());
    (status, retry)
}

/// Finding 6: failed logins are counted per client address and hold nothing another
/// client waits for. With 400 wrong logins in flight from 127.0.0.1, the right key from
/// 127.0.0.2 (another client address on Linux's loopback) logs in at once; 127.0.0.1
/// gets ten answers of "wrong key", then 429 with Retry-After, the right key included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_logins_from_one_address_never_hold_up_the_right_key_from_another() {
    let provider = FakeProvider::start(vec![]);
    let h = gateway(&provider, "");
    let mut guesses = Vec::new();
    for n in 0..400 {
        guesses.push(login_in_flight(&h, &format!("wrong-guess-{n}")).await);
    }
    let other = Session::from(Some("127.0.0.2".parse().unwrap()));
    let started = std::time::Instant::now();
    let r = other.login_request(&h, KEY).send().await.unwrap();
    let took = started.elapsed();
    eprintln!(
        "the right key from 127.0.0.2 logged in in {took:?} beside 400 wrong logins in flight"
    );
    assert_eq!(r.status(), StatusCode::OK);
    assert!(took < Duration::from_secs(5), "{took:?}");
    let answers = futures_util::future::join_all(guesses.into_iter().map(status_and_retry)).await;
    let wrong = answers.iter().filter(|(s, _)| *s == 401).count();
    let over: Vec<u64> = answers
        .iter()
        .filter(|(s, _)| *s == 429)
        .map(|(_, retry)| retry.expect("a 429 says when to retry"))
        .collect();
    assert_eq!((wrong, over.len()), (10, 390), "{answers:?}");
    assert!(over.iter().all(|s| (1..=60).contains(s)), "{over:?}");
    // Over its budget, the guessing address is not even let in with the right key.
    let right_from_guesser = Session::new().log_in(&h, KEY).await;
    assert_eq!(right_from_guesser.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(right_from_guesser.headers().contains_key("retry-after"));
    let said: serde_json::Value = right_from_guesser.json().await.unwrap();
    assert_eq!(said["code"], "too_many_failed_logins", "{said}");
    assert!(
        said["error"]
            .as_str()
            .unwrap()
            .starts_with("Too many failed logins"),
        "{said}"
    );
    let again = other.login_request(&h, KEY).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
}

/// Finding 10: the session cookie (which browsers send to every port of the host)
/// opens nothing without the session's secret, reads included, and no page holds it.
#[tokio::test]
async fn the_cookie_alone_opens_nothing_and_no_page_holds_the_secret() {
    let provider = FakeProvider::start(vec![]);
    let h = gateway(&provider, "");
    let session = Session::logged_in(&h, KEY).await;
    let secret = session.secret.clone().unwrap();
    let cookie_only = Session {
        client: session.client.clone(),
        cookie: session.cookie.clone(),
        secret: None,
    };
    let page = cookie_only.get(&h, "/dashboard/").send().await.unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let html = page.text().await.unwrap();
    assert!(html.contains("app.js"), "the app's shell: {html}");
    assert!(!html.contains(&secret), "{html}");
    assert!(!html.to_ascii_lowercase().contains("csrf"), "{html}");
    let wrong_secret = Session {
        secret: Some("0".repeat(64)),
        ..Session {
            client: session.client.clone(),
            cookie: session.cookie.clone(),
            secret: None,
        }
    };
    let routes = [
        ("GET", "/dashboard/api/events"),
        ("GET", "/dashboard/api/events/1"),
        ("GET", "/dashboard/api/deliveries"),
        ("GET", "/dashboard/api/routes"),
        ("GET", "/dashboard/api/sessions"),
        ("GET", "/dashboard/api/health"),
        ("GET", "/dashboard/api/runs"),
        ("GET", "/dashboard/api/runs/run_1/events"),
        ("POST", "/dashboard/api/events/1/replay"),
        ("POST", "/dashboard/api/events/1/cancel"),
        ("POST", "/dashboard/api/routes"),
        ("DELETE", "/dashboard/api/routes/gh"),
        ("POST", "/dashboard/api/runs/run_1/approval"),
        ("POST", "/dashboard/api/runs/run_1/stop"),
        ("POST", "/dashboard/logout"),
    ];
    for (method, path) in routes {
        for (who, client) in [
            ("cookie alone", &cookie_only),
            ("wrong secret", &wrong_secret),
        ] {
            let request = client
                .with_secret(
                    client.with_cookie(client.client.request(method.parse().unwrap(), h.url(path))),
                )
                .json(&serde_json::json!({"name": "made", "request_id": "x", "choice": "once"}));
            let r = request.send().await.unwrap();
            assert_eq!(
                r.status(),
                StatusCode::UNAUTHORIZED,
                "{who}: {method} {path}"
            );
            let body: serde_json::Value = r.json().await.unwrap();
            assert_eq!(body["code"], "secret_required", "{who}: {method} {path}");
        }
    }
    // Nothing was changed: the subscription was not made, and the route is there.
    let routes = session
        .get(&h, "/dashboard/api/routes")
        .send()
        .await
        .unwrap();
    assert_eq!(routes.status(), StatusCode::OK);
    let names: Vec<String> = routes.json::<serde_json::Value>().await.unwrap()["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["gh"]);
    // The secret without the cookie is nothing either.
    let secret_only = Session {
        client: session.client.clone(),
        cookie: None,
        secret: Some(secret.clone()),
    };
    let r = secret_only
        .get(&h, "/dashboard/api/health")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    // A second login from the same browser (a new tab) shares the session.
    let mut tab = Session {
        client: session.client.clone(),
        cookie: session.cookie.clone(),
        secret: None,
    };
    let r = tab.log_in(&h, KEY).await;
    assert_eq!(r.status(), StatusCode::OK);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["secret"], secret.as_str());
    // Logged out, the pair opens nothing.
    let r = session.post(&h, "/dashboard/logout").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = session
        .get(&h, "/dashboard/api/health")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}

/// Finding 4: the dashboard answers an approval once, for the session, or no; never
/// `always`, which would become a rule unattended runs use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_refuses_an_always_answer() {
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
    let config_before = std::fs::read_to_string(h.home().join("config.yaml")).unwrap();
    let (s, b) = post_json(&h, "/v1/runs", serde_json::json!({"input": "clean up"})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let run = b["run_id"].as_str().unwrap().to_owned();
    let session = Session::logged_in(&h, KEY).await;
    let pending = pending_approval(&session, &h, &run).await;
    for choice in ["always", "ALWAYS", " always "] {
        let r = session
            .post(&h, &format!("/dashboard/api/runs/{run}/approval"))
            .json(&serde_json::json!({"request_id": pending, "choice": choice}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{choice}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("once, session or deny"),
            "{body}"
        );
    }
    assert!(doomed.exists(), "refused answers approve nothing");
    let r = session
        .post(&h, &format!("/dashboard/api/runs/{run}/approval"))
        .json(&serde_json::json!({"request_id": pending, "choice": "once"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (events, _) = super::api::run_events(&h, &run).await;
    assert_eq!(events.last().unwrap()["event"], "run.completed");
    assert!(!doomed.exists());
    let config_after = std::fs::read_to_string(h.home().join("config.yaml")).unwrap();
    assert_eq!(config_before, config_after, "no allowlist was written");
}

/// The request id of the run's first pending approval, once the dashboard lists it
/// (read from the run's watch).
async fn pending_approval(session: &Session, h: &Herald, run: &str) -> String {
    let started = std::time::Instant::now();
    loop {
        let list: serde_json::Value = session
            .get(h, "/dashboard/api/runs")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let waiting = list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["run_id"] == run && r["pending_approvals"] == 1);
        if waiting {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut watch = session
        .get(h, &format!("/dashboard/api/runs/{run}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(watch.status(), StatusCode::OK);
    let first = watch.chunk().await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&first);
    let data = text.trim().strip_prefix("data: ").unwrap();
    let status: serde_json::Value = serde_json::from_str(data).unwrap();
    status["pending"][0]["request_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The dashboard's listing of a run once `pick` finds it running its tool.
async fn listed_running(
    session: &Session,
    h: &Herald,
    pick: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let started = std::time::Instant::now();
    loop {
        let r = session.get(h, "/dashboard/api/runs").send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let list: serde_json::Value = r.json().await.unwrap();
        let found = list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| pick(r) && r["state"] == "running" && r["last_event"] == "tool.started");
        if let Some(run) = found {
            return run.clone();
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{list}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Stops `run` from the dashboard; how long it took to end, and how it ended (as the
/// run's watch on the dashboard tells).
async fn stopped(session: &Session, h: &Herald, run: &str) -> (Duration, String) {
    let mut watch = session
        .get(h, &format!("/dashboard/api/runs/{run}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(watch.status(), StatusCode::OK);
    let started = std::time::Instant::now();
    let r = session
        .post(h, &format!("/dashboard/api/runs/{run}/stop"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["status"], "stopping", "{body}");
    let mut text = String::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(30), watch.chunk())
            .await
            .expect("the run ended within 30 s")
            .unwrap();
        let Some(chunk) = chunk else {
            panic!("the watch ended before the run: {text}");
        };
        text.push_str(&String::from_utf8_lossy(&chunk));
        let end = text
            .split("\n\n")
            .filter_map(|f| {
                serde_json::from_str::<serde_json::Value>(f.strip_prefix("data: ")?).ok()
            })
            .find(|e| e["event"].as_str().is_some_and(|n| n.starts_with("run.")));
        if let Some(end) = end {
            return (
                started.elapsed(),
                end["status"]["state"].as_str().unwrap().to_owned(),
            );
        }
    }
}

/// Finding 1 (the dashboard's part): every running run of the process is listed and
/// stopped from the dashboard, whichever door started it (the runs API, a chat
/// completion, a webhook event); each ends cancelled at once though its tool sleeps
/// 30 s. An unknown run is 404; a finished one answers its status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_running_run_is_listed_and_stopped_from_the_dashboard() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::tool_calls(&[(
        "c1",
        "terminal",
        r#"{"command": "sleep 30"}"#,
    )]));
    let h = gateway_with_route(&provider, "", "          toolsets: [terminal]\n");
    let session = Session::logged_in(&h, KEY).await;
    // A run of the runs API.
    let (s, b) = post_json(&h, "/v1/runs", serde_json::json!({"input": "wait"})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let run = b["run_id"].as_str().unwrap().to_owned();
    let listed = listed_running(&session, &h, |r| r["run_id"] == run.as_str()).await;
    assert_eq!(listed["door"], "api_server", "{listed}");
    let (took, state) = stopped(&session, &h, &run).await;
    eprintln!("a runs API run stopped from the dashboard in {took:?}");
    assert_eq!(state, "cancelled");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let (s, status) = super::api::get_json(&h, &format!("/v1/runs/{run}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(status["status"], "cancelled", "{status}");
    // Stopped again, a finished run answers its status.
    let r = session
        .post(&h, &format!("/dashboard/api/runs/{run}/stop"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let again: serde_json::Value = r.json().await.unwrap();
    assert_eq!(again["state"], "cancelled", "{again}");
    // A chat completion's run, while its client waits for the answer.
    let chat = tokio::spawn({
        let url = h.url("/v1/chat/completions");
        async move {
            http_client(Duration::from_secs(60))
                .post(url)
                .header("authorization", format!("Bearer {KEY}"))
                .json(&serde_json::json!({"model": "hermes-agent", "messages": [{"role": "user", "content": "wait"}]}))
                .send()
                .await
                .map(|r| r.status())
        }
    });
    let listed = listed_running(&session, &h, |r| r["run_id"] != run.as_str()).await;
    let chat_run = listed["run_id"].as_str().unwrap().to_owned();
    let (took, state) = stopped(&session, &h, &chat_run).await;
    eprintln!("a chat completion's run stopped from the dashboard in {took:?}");
    assert_eq!(state, "cancelled");
    assert!(took < Duration::from_secs(5), "{took:?}");
    let answered = tokio::time::timeout(Duration::from_secs(10), chat).await;
    assert!(answered.is_ok(), "the chat client got its answer");
    // A webhook event's run.
    let body = r#"{"action": "opened", "issue": {"title": "wait"}}"#;
    assert_eq!(event(&h, body, "stop-me").await, StatusCode::ACCEPTED);
    let listed = listed_running(&session, &h, |r| r["door"] == "webhook").await;
    let hook_run = listed["run_id"].as_str().unwrap().to_owned();
    let (took, state) = stopped(&session, &h, &hook_run).await;
    eprintln!("a webhook run stopped from the dashboard in {took:?}");
    assert_eq!(state, "cancelled");
    assert!(took < Duration::from_secs(5), "{took:?}");
    // Unknown: 404; the cookie alone stops nothing.
    let r = session
        .post(&h, "/dashboard/api/runs/run_nope/stop")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // The stopped webhook event does not run again by itself: it is dead, with why.
    let entry = wait_for(Duration::from_secs(10), "the event dead", || {
        let inbox = h.inbox();
        (inbox[0]["state"] == "dead").then(|| inbox[0].clone())
    })
    .await;
    assert_eq!(entry["attempts"], 1, "{entry}");
    assert!(
        entry["last_error"]
            .as_str()
            .unwrap()
            .contains("stopped by an operator"),
        "{entry}"
    );
}

/// Finding 13: a search holding U+0000 is refused at the edge (400), and the searches
/// after it are answered as before.
#[tokio::test]
async fn a_query_holding_nul_is_refused_and_searches_go_on() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::text("Looked at it."));
    let h = gateway(&provider, "");
    let body = r#"{"action": "opened", "issue": {"title": "needle in it"}}"#;
    assert_eq!(event(&h, body, "nul-1").await, StatusCode::ACCEPTED);
    let session = Session::logged_in(&h, KEY).await;
    for path in [
        "/dashboard/api/events?q=%00",
        "/dashboard/api/events?q=nee%00dle",
        "/dashboard/api/events?delivery_id=%00",
        "/dashboard/api/events?route=gh%00",
        "/dashboard/api/deliveries?delivery_id=%00",
    ] {
        let r = session.get(&h, path).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{path}");
        let said: serde_json::Value = r.json().await.unwrap();
        assert!(said["error"].as_str().unwrap().contains("NUL"), "{said}");
    }
    for _ in 0..3 {
        let r = session
            .get(&h, "/dashboard/api/events?q=needle")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let found: serde_json::Value = r.json().await.unwrap();
        assert_eq!(found["events"].as_array().unwrap().len(), 1, "{found}");
    }
}

/// Finding 13: on loopback listeners, `/metrics` (with no token) and `/health/detailed`
/// answer only to loopback host names, as the dashboard does (DNS rebinding), on the
/// webhook listener and on the API's.
#[tokio::test]
async fn metrics_and_detailed_health_answer_only_loopback_host_names() {
    let provider = FakeProvider::start(vec![]);
    let h = gateway(&provider, "metrics:\n  enabled: true\n");
    let file = h.home().join("gateway.json");
    let state: serde_json::Value = wait_for(Duration::from_secs(10), "gateway.json", || {
        serde_json::from_str(&std::fs::read_to_string(&file).ok()?).ok()
    })
    .await;
    let webhook = state["webhook"][0].as_str().unwrap().to_owned();
    let api = h.url("");
    let client = http_client(Duration::from_secs(10));
    for (base, path) in [
        (&webhook, "/metrics"),
        (&webhook, "/health/detailed"),
        (&api, "/metrics"),
        (&api, "/health/detailed"),
    ] {
        let port = base.rsplit(':').next().unwrap();
        for (host, want) in [
            (format!("127.0.0.1:{port}"), StatusCode::OK),
            (format!("localhost:{port}"), StatusCode::OK),
            (format!("evil.example:{port}"), StatusCode::FORBIDDEN),
            ("evil.example".to_owned(), StatusCode::FORBIDDEN),
        ] {
            let r = client
                .get(format!("{base}{path}"))
                .header("host", &host)
                .header("authorization", format!("Bearer {KEY}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), want, "{base}{path} as {host}");
        }
    }
    // The webhook's own routes take any host name (senders come through proxies).
    let r = client
        .get(format!("{webhook}/health"))
        .header("host", "hooks.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

/// Finding 13: a page that opens a run's watch and reads nothing is dropped after 10 s
/// without reading; the run goes on. Read afterwards, the watch ends after what was
/// queued (before, it went on with the run's events for as long as the run lasted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_watch_that_reads_nothing_for_ten_seconds_is_dropped() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // 32 MB of answer (more than the sockets and the watch's queue hold), then a tool
    // that sleeps a minute.
    let part = "y".repeat(64 * 1024);
    let parts: Vec<&str> = std::iter::repeat_n(part.as_str(), 500).collect();
    let mut events = Scripted::text_events(&parts);
    events.pop();
    if let Scripted::Events(call) =
        Scripted::tool_calls(&[("c1", "terminal", r#"{"command": "sleep 60"}"#)])
    {
        events.extend(call);
    }
    let provider = FakeProvider::start(vec![Scripted::Delayed(
        Duration::from_secs(1),
        Box::new(Scripted::Events(events)),
    )]);
    let h = gateway(&provider, "");
    let session = Session::logged_in(&h, KEY).await;
    let (s, b) = post_json(&h, "/v1/runs", serde_json::json!({"input": "talk"})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let run = b["run_id"].as_str().unwrap().to_owned();
    let mut watch = tokio::net::TcpStream::connect(h.addr()).await.unwrap();
    let head = format!(
        "GET /dashboard/api/runs/{run}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {}\r\nX-Dashboard-Secret: {}\r\n\r\n",
        session.cookie.as_deref().unwrap(),
        session.secret.as_deref().unwrap(),
    );
    watch.write_all(head.as_bytes()).await.unwrap();
    // The run's own reader takes everything, and the run reaches its tool.
    let reader = tokio::spawn({
        let url = h.url(&format!("/v1/runs/{run}/events"));
        async move {
            let mut r = http_client(Duration::from_secs(120))
                .get(url)
                .header("authorization", format!("Bearer {KEY}"))
                .send()
                .await
                .unwrap();
            while let Ok(Some(_)) = r.chunk().await {}
        }
    });
    listed_running(&session, &h, |r| r["run_id"] == run.as_str()).await;
    tokio::time::sleep(Duration::from_secs(12)).await;
    // Read now: what was queued, then the end of the stream, while the run sleeps on.
    let started = std::time::Instant::now();
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    let ended = loop {
        let n = match tokio::time::timeout(Duration::from_secs(10), watch.read(&mut buf)).await {
            Ok(n) => n.unwrap(),
            Err(_) => break false,
        };
        if n == 0 {
            break true;
        }
        seen.extend_from_slice(&buf[..n]);
        if seen.ends_with(b"\r\n0\r\n\r\n") {
            break true;
        }
    };
    eprintln!(
        "read {} bytes of the stalled watch in {:?}; ended: {ended}",
        seen.len(),
        started.elapsed()
    );
    assert!(ended, "the stalled watch was dropped");
    let tail = String::from_utf8_lossy(&seen[seen.len().saturating_sub(2000)..]).into_owned();
    assert!(
        !tail.contains("run.cancelled") && !tail.contains("run.completed"),
        "{tail}"
    );
    let (_, status) = super::api::get_json(&h, &format!("/v1/runs/{run}")).await;
    assert_eq!(status["status"], "running", "the run went on: {status}");
    let (_, state) = stopped(&session, &h, &run).await;
    assert_eq!(state, "cancelled");
    reader.abort();
}

/// The subscribe form takes a sender preset and its settings; an unknown source or a
/// preset's missing secret is a 400 with the reason, and the routes list names each
/// route's sender.
#[tokio::test]
async fn the_subscribe_form_takes_a_sender_preset() {
    let provider = FakeProvider::start(vec![]);
    let h = gateway(&provider, "");
    let session = Session::logged_in(&h, KEY).await;
    let subscribe =
        |body: serde_json::Value| session.post(&h, "/dashboard/api/routes").json(&body).send();
    let r = subscribe(serde_json::json!({"name": "pay", "source": "strpe"}))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("did you mean `stripe`"));
    let r = subscribe(serde_json::json!({"name": "pay", "source": "stripe"}))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("stripe makes the signing secret itself")
    );
    let r = subscribe(serde_json::json!({
        "name": "pay", "source": "stripe", "secret": "whsec_from_stripe",
        "events": ["payment_intent.succeeded"],
    }))
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let made: serde_json::Value = r.json().await.unwrap();
    assert_eq!(made["secret"], "whsec_from_stripe");
    let stored: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(h.home().join("webhook_subscriptions.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stored["pay"]["source"], "stripe");
    let routes: serde_json::Value = session
        .get(&h, "/dashboard/api/routes")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sender = |name: &str| {
        routes["routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["sender"].clone())
    };
    assert_eq!(sender("pay"), Some(serde_json::json!("stripe")));
    assert_eq!(sender("gh"), Some(serde_json::Value::Null));
}

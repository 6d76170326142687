//! People talking to the Slack app, against a fake Slack speaking the real wire formats
//! (the Web API, Socket Mode's WebSocket, Events API requests signed as Slack signs
//! them), with herald's own clients, store and conversations in the path.

use super::agent_runs::agent_config;
use super::support::*;
use herald_test_support::slack::{APP_TOKEN, BOT_TOKEN, BOT_USER, FakeSlack, sign};
use herald_test_support::{FakeProvider, Scripted};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// A config with the agent and Slack's socket pinged every 200 ms (dead after 800 ms).
fn config(provider: &FakeProvider) -> String {
    agent_config(&provider.base_url, "", "        r: {prompt: 'x'}\n").replace(
        "platforms:\n",
        "platforms:\n  slack:\n    extra:\n      ping_interval_seconds: 0.2\n",
    )
}

fn env(slack: &FakeSlack) -> Vec<(&'static str, String)> {
    vec![
        ("SLACK_BOT_TOKEN", BOT_TOKEN.into()),
        ("SLACK_APP_TOKEN", APP_TOKEN.into()),
        ("SLACK_BASE_URL", slack.base_url.clone()),
        ("SLACK_ALLOWED_USERS", "U1".into()),
    ]
}

fn start(config: &str, vars: &[(&'static str, String)]) -> Herald {
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Herald::start_with(config, &vars)
}

fn start_in(home: tempfile::TempDir, vars: &[(&'static str, String)]) -> Herald {
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Herald::start_in(home, &vars)
}

/// Waits until the app's socket said hello (herald is listening).
async fn connected(slack: &FakeSlack) {
    wait_for(WAIT, "the Socket Mode connection", || {
        (slack.sockets().0 > 0).then_some(())
    })
    .await;
}

fn reactions(slack: &FakeSlack, ts: &str) -> Vec<String> {
    slack
        .calls()
        .into_iter()
        .filter(|(m, b)| m.starts_with("reactions.") && b["timestamp"] == ts)
        .map(|(m, b)| format!("{m}:{}", b["name"].as_str().unwrap_or_default()))
        .collect()
}

fn session_keys(h: &Herald) -> Vec<String> {
    let db = rusqlite::Connection::open(h.home().join("state.db")).unwrap();
    let mut keys: Vec<String> = db
        .prepare("SELECT session_key FROM sessions WHERE source = 'slack'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    keys.sort();
    keys
}

/// A DM is answered in its thread with Hermes's reactions; in a channel a message
/// without a mention is left alone, a mention is answered in its thread (once, though
/// Slack sends it as `message` and `app_mention`), and a later reply in that thread
/// needs no mention. Every envelope is acknowledged; sessions have Hermes's keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dms_and_mentions_are_answered_in_their_threads() {
    let provider = FakeProvider::start(vec![
        Scripted::text("hello in private"),
        Scripted::text("*at* your **service**"),
        Scripted::text("still here"),
    ]);
    let slack = FakeSlack::start();
    let h = start(&config(&provider), &env(&slack));
    connected(&slack).await;
    let dm = slack.dm("D1", "U1", "hi there");
    assert_eq!(
        slack.wait_posted("D1", Some(&dm), 1, WAIT),
        ["hello in private"]
    );
    let marks = wait_for(WAIT, "the reactions", || {
        let r = reactions(&slack, &dm);
        (r.len() >= 3).then_some(r)
    })
    .await;
    assert_eq!(
        marks,
        [
            "reactions.add:eyes",
            "reactions.remove:eyes",
            "reactions.add:white_check_mark"
        ]
    );
    slack.channel("C1", "U1", "just chatting", None);
    let root = slack.channel("C1", "U1", &format!("<@{BOT_USER}> help me"), None);
    // Slack sends a mention as `app_mention` too: the same post, answered once.
    slack.event(json!({
        "type": "app_mention", "channel": "C1", "user": "U1",
        "text": format!("<@{BOT_USER}> help me"), "ts": root, "team": "T1",
    }));
    assert_eq!(
        slack.wait_posted("C1", Some(&root), 1, WAIT),
        ["_at_ your *service*"]
    );
    slack.channel("C1", "U1", "and more", Some(&root));
    assert_eq!(
        slack.wait_posted("C1", Some(&root), 2, WAIT)[1],
        "still here"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(slack.posted("C1", None).len(), 2, "{:?}", slack.calls());
    assert_eq!(provider.requests().len(), 3);
    let asked = provider.requests()[1].body.to_string();
    assert!(
        asked.contains("help me") && !asked.contains("UBOT"),
        "{asked}"
    );
    assert!(!asked.contains("chatting"), "{asked}");
    assert_eq!(
        session_keys(&h),
        [
            format!("agent:main:slack:dm:D1:{dm}"),
            format!("agent:main:slack:group:C1:{root}")
        ]
    );
    assert_eq!(slack.acked().len(), 5, "{:?}", slack.acked());
}

fn rm(call: &str, file: &std::path::Path) -> Scripted {
    let args = json!({"command": format!("rm -f {}", file.display())}).to_string();
    Scripted::tool_calls(&[(call, "terminal", args.as_str())])
}

/// A command that needs approval is asked with Block Kit buttons (Hermes's action
/// ids); a stranger's press does nothing; "Allow Once" lets it run and the message is
/// updated without its buttons. A long answer is split at 39,000 characters; a 429 is
/// waited out and the answer sent once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_by_button_long_answers_and_rate_limits() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("one.txt");
    std::fs::write(&file, "x").unwrap();
    let long = "word ".repeat(9_000);
    let provider = FakeProvider::start(vec![
        rm("c1", &file),
        Scripted::text("removed"),
        Scripted::text(&long),
        Scripted::text("after the wait"),
    ]);
    let slack = FakeSlack::start();
    let _h = start(&config(&provider), &env(&slack));
    connected(&slack).await;
    let dm = slack.dm("D1", "U1", "clean up");
    let asked = slack.wait_call("chat.postMessage", WAIT, |b| b.get("blocks").is_some());
    let buttons = asked["blocks"][1]["elements"].as_array().unwrap().clone();
    let actions: Vec<&str> = buttons
        .iter()
        .map(|b| b["action_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "hermes_approve_once",
            "hermes_approve_session",
            "hermes_approve_always",
            "hermes_deny"
        ]
    );
    let once = buttons[0]["value"].as_str().unwrap();
    let approval_ts = asked["_ts"].as_str().unwrap().to_owned();
    // A stranger's press is left alone.
    slack.click(
        "D1",
        Some(&dm),
        &approval_ts,
        "U9",
        "hermes_approve_once",
        once,
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(file.exists());
    slack.click(
        "D1",
        Some(&dm),
        &approval_ts,
        "U1",
        "hermes_approve_once",
        once,
    );
    assert_eq!(slack.wait_posted("D1", Some(&dm), 2, WAIT)[1], "removed");
    assert!(!file.exists());
    let updated = slack.wait_call("chat.update", WAIT, |b| {
        b["text"].as_str().unwrap_or("").contains("ann")
    });
    assert!(
        updated["blocks"].as_array().unwrap().len() == 1,
        "{updated}"
    );
    let second = slack.dm("D1", "U1", "say a lot");
    let parts = slack.wait_posted("D1", Some(&second), 2, WAIT);
    assert!(parts.iter().all(|p| p.chars().count() <= 39_000));
    assert_eq!(parts.join("").matches("word").count(), 9_000);
    slack.flood(1, 2);
    let third = slack.dm("D1", "U1", "once more");
    let started = std::time::Instant::now();
    assert_eq!(
        slack.wait_posted("D1", Some(&third), 1, WAIT),
        ["after the wait"]
    );
    assert!(started.elapsed() >= Duration::from_secs(2));
}

/// The socket is replaced without losing or repeating a message: `refresh_requested`
/// opens the next socket before the old one closes; a socket that stops answering
/// pings is replaced (logged, counted) and the event it swallowed is delivered again
/// and answered once; `link_disabled` is reported and not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sockets_are_replaced_without_a_lost_or_double_answer() {
    let provider = FakeProvider::start(vec![
        Scripted::text("one"),
        Scripted::text("two"),
        Scripted::text("three"),
    ]);
    let slack = FakeSlack::start();
    let h = start(&config(&provider), &env(&slack));
    connected(&slack).await;
    slack.disconnect("refresh_requested");
    wait_for(WAIT, "the second socket", || {
        (slack.sockets().1 >= 2 && slack.sockets().0 == 1).then_some(())
    })
    .await;
    let a = slack.dm("D1", "U1", "after the refresh");
    assert_eq!(slack.wait_posted("D1", Some(&a), 1, WAIT), ["one"]);
    slack.silence();
    let b = slack.dm("D1", "U1", "into the void");
    assert_eq!(slack.wait_posted("D1", Some(&b), 1, WAIT), ["two"]);
    assert!(slack.sockets().1 >= 3, "{:?}", slack.sockets());
    let log = h.log_once_it_has("no pong");
    assert!(log.contains("the socket ended"), "{log}");
    let c = slack.dm("D1", "U1", "still there?");
    assert_eq!(slack.wait_posted("D1", Some(&c), 1, WAIT), ["three"]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(slack.posted("D1", None).len(), 3);
    let (_, health) = h.get("/health/detailed").await;
    assert!(health.contains("\"platform\":\"slack\""), "{health}");
    assert!(!health.contains("\"poll_restarts\":0"), "{health}");
    let opened = slack.sockets().1;
    slack.disconnect("link_disabled");
    h.log_once_it_has("link_disabled");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        slack.sockets().1,
        opened,
        "no reconnect after link_disabled"
    );
    wait_for(WAIT, "the failure in gateway status", || {
        let (_, status, _) = h.cli(&["gateway", "status"]);
        (status.contains("Bot: slack (Socket Mode)")
            && status.contains("failing: Socket Mode is turned off"))
        .then_some(())
    })
    .await;
}

/// Messages sent while herald was stopped are delivered again by Slack when it
/// reconnects and answered once; kill -9 mid-turn: answered once after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_sent_while_down_and_turns_cut_by_kill_9_are_answered_once() {
    let provider = FakeProvider::start(vec![
        Scripted::text("welcome back"),
        Scripted::Delayed(
            Duration::from_secs(30),
            Box::new(Scripted::text("too late")),
        ),
        Scripted::text("after the crash"),
    ]);
    let slack = FakeSlack::start();
    let h = start(&config(&provider), &env(&slack));
    connected(&slack).await;
    let home = h.into_home();
    wait_for(WAIT, "the socket to close", || {
        (slack.sockets().0 == 0).then_some(())
    })
    .await;
    let a = slack.dm("D1", "U1", "are you there?");
    let mut h = start_in(home, &env(&slack));
    assert_eq!(slack.wait_posted("D1", Some(&a), 1, WAIT), ["welcome back"]);
    let b = slack.dm("D1", "U1", "long question");
    wait_for(WAIT, "the turn to reach the provider", || {
        (provider.requests().len() >= 2).then_some(())
    })
    .await;
    h.kill9();
    let home = h.into_home();
    let _h = start_in(home, &env(&slack));
    assert_eq!(
        slack.wait_posted("D1", Some(&b), 1, WAIT),
        ["after the crash"]
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(slack.posted("D1", None).len(), 2, "{:?}", slack.calls());
}

/// A stop longer than Slack's redelivery: the messages it never delivered are read
/// back with `conversations.history` at start and answered once; what was answered
/// before is not answered again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_slack_gave_up_on_are_read_back_at_start() {
    let provider = FakeProvider::start(vec![
        Scripted::text("first answer"),
        Scripted::text("read back"),
    ]);
    let slack = FakeSlack::start();
    let h = start(&config(&provider), &env(&slack));
    connected(&slack).await;
    let a = slack.dm("D1", "U1", "hello");
    assert_eq!(slack.wait_posted("D1", Some(&a), 1, WAIT), ["first answer"]);
    let home = h.into_home();
    wait_for(WAIT, "the socket to close", || {
        (slack.sockets().0 == 0).then_some(())
    })
    .await;
    let missed = slack.missed("D1", "U1", "did you miss me?");
    let _h = start_in(home, &env(&slack));
    assert_eq!(
        slack.wait_posted("D1", Some(&missed), 1, WAIT),
        ["read back"]
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(slack.posted("D1", None).len(), 2, "{:?}", slack.calls());
    assert_eq!(provider.requests().len(), 2);
    let history = slack.wait_call("conversations.history", WAIT, |b| b["channel"] == "D1");
    assert_eq!(history["oldest"], a.as_str());
}

fn signed(body: &str, secret: &str) -> Vec<(&'static str, String)> {
    let ts = now().to_string();
    vec![
        ("x-slack-request-timestamp", ts.clone()),
        ("x-slack-signature", sign(secret, &ts, body.as_bytes())),
        ("content-type", "application/json".into()),
    ]
}

async fn post(
    h: &Herald,
    path: &str,
    body: &str,
    headers: &[(&'static str, String)],
) -> (u16, String) {
    let client = http_client(Duration::from_secs(10));
    let mut req = client.post(h.url(path)).body(body.to_owned());
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The Events API, which Hermes lacks: `url_verification` answered with its
/// challenge; a request not signed with the secret refused (401) and not stored; a
/// signed event committed before the 200 and answered; Slack's retry of it
/// (`X-Slack-Retry-Num`) answered once. A path that another bot serves is refused at
/// start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_api_takes_signed_events_and_answers_each_once() {
    let provider = FakeProvider::start(vec![Scripted::text("over http")]);
    let slack = FakeSlack::start();
    let mut vars = env(&slack);
    vars.retain(|(k, _)| *k != "SLACK_APP_TOKEN");
    vars.push(("SLACK_SIGNING_SECRET", SIGNING_SECRET.into()));
    let h = start(&config(&provider), &vars);
    let challenge = r#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#;
    let (status, body) = post(
        &h,
        "/slack/events",
        challenge,
        &signed(challenge, SIGNING_SECRET),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        body.contains("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"),
        "{body}"
    );
    let event = json!({
        "type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": "Ev42",
        "event": {"type": "message", "channel": "D7", "channel_type": "im", "user": "U1",
                  "text": "over the web", "ts": "1700000100.000100"},
    })
    .to_string();
    let (status, _) = post(&h, "/slack/events", &event, &signed(&event, "wrong secret")).await;
    assert_eq!(status, 401);
    // No signature at all, and a body over the limit (refused before it is read whole).
    let json_only = vec![("content-type", "application/json".to_owned())];
    let (status, _) = post(&h, "/slack/events", &event, &json_only).await;
    assert_eq!(status, 401);
    let huge = "x".repeat(2 << 20);
    let (status, _) = post(&h, "/slack/events", &huge, &signed(&huge, SIGNING_SECRET)).await;
    assert_eq!(status, 413);
    assert!(h.inbox().is_empty());
    let (status, _) = post(&h, "/slack/events", &event, &signed(&event, SIGNING_SECRET)).await;
    assert_eq!(status, 200);
    let mut retry = signed(&event, SIGNING_SECRET);
    retry.push(("x-slack-retry-num", "1".into()));
    retry.push(("x-slack-retry-reason", "http_timeout".into()));
    let (status, _) = post(&h, "/slack/events", &event, &retry).await;
    assert_eq!(status, 200);
    assert_eq!(
        slack.wait_posted("D7", Some("1700000100.000100"), 1, WAIT),
        ["over http"]
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(provider.requests().len(), 1);
    // A Telegram bot in webhook mode on the same path: refused at start.
    let mut clash = vars.clone();
    clash.push(("SLACK_EVENTS_PATH", "/hooks/chat".into()));
    clash.push(("TELEGRAM_BOT_TOKEN", "123456:TEST-token".into()));
    clash.push((
        "TELEGRAM_WEBHOOK_URL",
        "https://bot.example.com/hooks/chat".into(),
    ));
    clash.push(("TELEGRAM_WEBHOOK_SECRET", "s3cret".into()));
    clash.push(("TELEGRAM_BASE_URL", slack.base_url.clone()));
    let clash: Vec<(&str, &str)> = clash.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (code, out) = start_expect_failure_with(&config(&provider), &clash);
    assert_ne!(code, 0);
    assert!(out.contains("/hooks/chat"), "{out}");
}

/// A shared text file is fetched (`files.info`, then its private URL with the bot
/// token), saved and inlined; an answer's `MEDIA:` line is uploaded the way Slack asks
/// (`files.getUploadURLExternal`, the bytes, `files.completeUploadExternal` into the
/// thread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_come_in_through_files_info_and_go_out_through_external_uploads() {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("report.pdf"), b"%PDF-1.7 the report").unwrap();
    let answer = format!("Here it is.\nMEDIA:{}/report.pdf", work.path().display());
    let provider = FakeProvider::start(vec![Scripted::text(&answer)]);
    let slack = FakeSlack::start();
    slack.add_file("F1", "notes.md", b"# Plan\nship it");
    let config = format!(
        "terminal:\n  cwd: {}\n{}",
        work.path().display(),
        config(&provider)
    );
    let _h = start(&config, &env(&slack));
    connected(&slack).await;
    let ts = slack.dm("D1", "U1", "");
    // The same post, now with its file (as `message` with subtype `file_share`).
    slack.event(json!({
        "type": "message", "subtype": "file_share", "channel": "D1", "channel_type": "im",
        "user": "U1", "text": "summarize", "ts": format!("{ts}1"), "team": "T1",
        "files": [{"id": "F1", "name": "notes.md", "mimetype": "text/markdown", "size": 14}],
    }));
    let thread = format!("{ts}1");
    assert_eq!(
        slack.wait_posted("D1", Some(&thread), 1, WAIT),
        ["Here it is."]
    );
    let asked = provider.requests()[0].body.to_string();
    assert!(asked.contains("[Content of notes.md]"), "{asked}");
    assert!(asked.contains("ship it"), "{asked}");
    let done = slack.wait_call("files.completeUploadExternal", WAIT, |_| true);
    assert_eq!(done["channel_id"], "D1");
    assert_eq!(done["thread_ts"], thread.as_str());
    let uploads = slack.uploads();
    assert_eq!(uploads.len(), 1);
    assert!(
        String::from_utf8_lossy(&uploads[0].1).contains("%PDF-1.7 the report"),
        "{uploads:?}"
    );
}

/// A Hermes home with a Slack block and `SLACK_*` in its `.env`, moved with `herald
/// setup --from-hermes`, answers on Slack with no further change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hermes_home_with_slack_answers_after_the_migration() {
    let provider = FakeProvider::start(vec![Scripted::text("hello from herald")]);
    let slack = FakeSlack::start();
    let hermes = tempfile::tempdir().unwrap();
    let config = format!(
        "model:\n  default: fake-model\n  base_url: {}\nplatforms:\n  slack:\n    enabled: true\n    extra:\n      base_url: {}\nslack:\n  require_mention: true\n  reactions: false\n",
        provider.base_url, slack.base_url
    );
    std::fs::write(hermes.path().join("config.yaml"), config).unwrap();
    std::fs::write(
        hermes.path().join(".env"),
        format!(
            "SLACK_BOT_TOKEN={BOT_TOKEN}\nSLACK_APP_TOKEN={APP_TOKEN}\nSLACK_ALLOWED_USERS=U1\n"
        ),
    )
    .unwrap();
    let home = tempfile::tempdir().unwrap();
    let (code, out, err) = run_cli_with(
        home.path(),
        &["setup", "--from-hermes", hermes.path().to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0, "{out}{err}");
    let (_, check, _) = run_cli(home.path(), &["config", "check"]);
    assert!(
        check.contains("note: slack: herald answers people who write to the app (by Socket Mode)"),
        "{check}"
    );
    let h = Herald::start_in(home, &[]);
    connected(&slack).await;
    let ts = slack.dm("D1", "U1", "are you there?");
    assert_eq!(
        slack.wait_posted("D1", Some(&ts), 1, WAIT),
        ["hello from herald"]
    );
    slack.channel("C5", "U1", "no mention here", None);
    std::thread::sleep(Duration::from_millis(1500));
    assert!(slack.posted("C5", None).is_empty());
    assert!(
        !slack
            .calls()
            .iter()
            .any(|(m, _)| m.starts_with("reactions."))
    );
    assert!(
        h.log()
            .contains("herald answers people who write to the app"),
        "{}",
        h.log()
    );
}

/// Slash commands come as Socket Mode `slash_commands` envelopes (acknowledged once
/// stored): `/hermes new` is `/new`, run as typed in the channel (no thread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_over_socket_mode_run_as_typed() {
    let provider = FakeProvider::start(vec![Scripted::text("hello")]);
    let slack = FakeSlack::start();
    let _h = start(&config(&provider), &env(&slack));
    connected(&slack).await;
    let envelope = slack.envelope(
        "slash_commands",
        json!({
            "token": "t", "team_id": "T1", "channel_id": "D1", "channel_name": "directmessage",
            "user_id": "U1", "user_name": "ann", "command": "/hermes", "text": "help",
            "response_url": "https://hooks.slack.com/commands/x", "trigger_id": "trig1",
            "api_app_id": "A1",
        }),
    );
    let posted = slack.wait_posted("D1", None, 1, WAIT);
    assert!(posted[0].contains("/new"), "{posted:?}");
    let id = envelope["envelope_id"].as_str().unwrap().to_owned();
    wait_for(WAIT, "the acknowledgement", || {
        slack.acked().contains(&id).then_some(())
    })
    .await;
    // A stranger's command is not run.
    slack.envelope(
        "slash_commands",
        json!({"channel_id": "D2", "user_id": "U9", "command": "/hermes", "text": "help", "trigger_id": "trig2"}),
    );
    std::thread::sleep(Duration::from_millis(800));
    assert!(slack.posted("D2", None).is_empty());
    assert!(provider.requests().is_empty());
}

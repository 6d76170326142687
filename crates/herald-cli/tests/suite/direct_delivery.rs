//! Direct delivery (`deliver_only`) to fake platforms: what herald sent, field by field,
//! and every failure mode with the right answer to the webhook sender.

use super::fakes::*;
use super::support::*;
use reqwest::StatusCode;
use serde_json::json;
use std::time::{Duration, Instant};

const TOKEN: &str = "123:tg-token";

fn telegram_route(extra: &str) -> String {
    config_with_routes(&format!(
        "        tg:\n          deliver_only: true\n          deliver: Telegram\n          prompt: 'PR {{pull_request.title}} ✓'\n{extra}"
    ))
}

fn start_with_telegram(config: &str, fake: &Fake, more_env: &[(&str, &str)]) -> Herald {
    let base = format!("{}/bot", fake.base);
    let mut env: Vec<(&str, &str)> =
        vec![("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_BASE_URL", &base)];
    env.extend_from_slice(more_env);
    Herald::start_with(config, &env)
}

#[tokio::test]
async fn telegram_chat_thread_and_templates() {
    let fake = Fake::start(telegram_ok());
    let config = telegram_route(
        "          deliver_extra:\n            chat_id: '{chat.id}'\n            message_thread_id: '{topic}'\n",
    );
    let h = start_with_telegram(&config, &fake, &[]);
    let body = r#"{"pull_request": {"title": "Fix"}, "chat": {"id": -100123}, "topic": 42}"#;
    let (s, b) = h.github("tg", "pull_request", body, Some("tg-1")).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::OK,
            json!({"status": "delivered", "route": "tg", "target": "Telegram", "delivery_id": "tg-1"})
        )
    );
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path, format!("/bot{TOKEN}/sendMessage"));
    assert_eq!(reqs[0].body["chat_id"], "-100123");
    assert_eq!(reqs[0].body["text"], "PR Fix ✓");
    assert_eq!(reqs[0].body["message_thread_id"], 42);
    // The same delivery id again: duplicate, nothing sent.
    let (s, b) = h.github("tg", "pull_request", body, Some("tg-1")).await;
    assert_eq!(
        (s, b["status"].as_str()),
        (StatusCode::OK, Some("duplicate"))
    );
    assert_eq!(fake.requests().len(), 1);
    // The delivery is recorded.
    let (code, out, _) = h.cli(&["deliveries", "list", "--json"]);
    assert_eq!(code, 0);
    let list: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(list[0]["status"], "delivered");
    assert_eq!(list[0]["target"], "Telegram");
    assert_eq!(list[0]["attempts"], 1);
    let (_, table, _) = h.cli(&["deliveries", "list"]);
    assert!(
        table.contains("delivered") && table.contains("tg-1"),
        "{table}"
    );
}

#[tokio::test]
async fn telegram_home_channel_general_topic_and_splitting() {
    let fake = Fake::start(telegram_ok());
    let config = telegram_route("          deliver_extra:\n            thread_id: '1'\n");
    let h = start_with_telegram(&config, &fake, &[("TELEGRAM_HOME_CHANNEL", "777")]);
    let long = "word ".repeat(2000);
    let body = json!({"pull_request": {"title": long}}).to_string();
    let (s, _) = h.github("tg", "pull_request", &body, None).await;
    assert_eq!(s, StatusCode::OK);
    let reqs = fake.requests();
    assert_eq!(reqs.len(), 3, "10 000 characters need three messages");
    let mut joined = String::new();
    for (i, r) in reqs.iter().enumerate() {
        assert_eq!(r.body["chat_id"], "777");
        assert!(
            r.body.get("message_thread_id").is_none(),
            "the General topic has no thread id"
        );
        let text = r.body["text"].as_str().unwrap();
        assert!(text.encode_utf16().count() <= 4096);
        let suffix = format!(" ({}/3)", i + 1);
        assert!(text.ends_with(&suffix), "{text}");
        joined.push_str(text.strip_suffix(&suffix).unwrap());
        joined.push(' ');
    }
    let want = format!("PR {long}✓");
    assert_eq!(
        joined.split_whitespace().collect::<Vec<_>>(),
        want.split_whitespace().collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn transient_failures_are_absorbed_and_permanent_ones_are_502() {
    let fake = Fake::start(telegram_ok());
    let h = start_with_telegram(
        &telegram_route("          deliver_extra: {chat_id: '5'}\n"),
        &fake,
        &[],
    );
    // 500 then 200: one retry after about a second.
    fake.push(Reply::json(
        500,
        json!({"ok": false, "description": "Internal"}),
    ));
    let start = Instant::now();
    let (s, _) = h.github("tg", "pull_request", "{}", Some("a")).await;
    assert_eq!(s, StatusCode::OK);
    assert!(start.elapsed() >= Duration::from_millis(900));
    assert_eq!(fake.requests().len(), 2);
    // 429 with retry_after, then 200.
    fake.push(Reply::json(429, json!({"ok": false, "description": "Too Many Requests", "parameters": {"retry_after": 1}})).with_header("retry-after", "1"));
    let (s, _) = h.github("tg", "pull_request", "{}", Some("b")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(fake.requests().len(), 4);
    // 400 (bad chat): no retry, 502, and no dedup key.
    fake.push(Reply::json(
        400,
        json!({"ok": false, "description": "Bad Request: chat not found"}),
    ));
    let (s, b) = h.github("tg", "pull_request", "{}", Some("c")).await;
    assert_eq!(
        (s, b),
        (
            StatusCode::BAD_GATEWAY,
            json!({"status": "error", "error": "Delivery failed", "delivery_id": "c"})
        )
    );
    assert_eq!(fake.requests().len(), 5);
    // Three 503s: 502 after three attempts; the sender's retry then delivers exactly once.
    for _ in 0..3 {
        fake.push(Reply::json(503, json!({"ok": false})));
    }
    let (s, _) = h.github("tg", "pull_request", "{}", Some("d")).await;
    assert_eq!(s, StatusCode::BAD_GATEWAY);
    assert_eq!(fake.requests().len(), 8);
    let (s, b) = h.github("tg", "pull_request", "{}", Some("d")).await;
    assert_eq!(
        (s, b["status"].as_str()),
        (StatusCode::OK, Some("delivered"))
    );
    let (s, b) = h.github("tg", "pull_request", "{}", Some("d")).await;
    assert_eq!(
        (s, b["status"].as_str()),
        (StatusCode::OK, Some("duplicate"))
    );
    assert_eq!(fake.requests().len(), 9);
    let (_, out, _) = h.cli(&["deliveries", "list", "--status", "failed", "--json"]);
    let failed: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(failed.len(), 2);
    assert!(
        failed
            .iter()
            .any(|d| d["error"].as_str().unwrap().contains("chat not found"))
    );
    assert!(
        !h.log().contains(TOKEN),
        "the bot token must never be logged"
    );
}

#[tokio::test]
async fn target_down_and_not_configured() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let base = format!("http://127.0.0.1:{port}/bot");
    let config = config_with_routes(
        "        tg:\n          deliver_only: true\n          deliver: telegram\n          prompt: hi\n          deliver_extra: {chat_id: '1'}\n        sl:\n          deliver_only: true\n          deliver: slack\n          prompt: hi\n        xx:\n          deliver_only: true\n          deliver: carrier-pigeon\n          prompt: hi\n",
    );
    let h = Herald::start_with(
        &config,
        &[("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_BASE_URL", &base)],
    );
    let start = Instant::now();
    let (s, _) = h.github("tg", "x", "{}", Some("down")).await;
    assert_eq!(s, StatusCode::BAD_GATEWAY);
    assert!(
        start.elapsed() >= Duration::from_secs(3),
        "three attempts with 1 s and 2 s waits"
    );
    for route in ["sl", "xx"] {
        let (s, _) = h.github(route, "x", "{}", None).await;
        assert_eq!(s, StatusCode::BAD_GATEWAY);
    }
    let (_, out, _) = h.cli(&["deliveries", "list", "--json"]);
    let list: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    let err = |route: &str| {
        list.iter().find(|d| d["route"] == route).unwrap()["error"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(err("sl").contains("not enabled"), "{}", err("sl"));
    assert!(err("xx").contains("not supported"), "{}", err("xx"));
    assert_eq!(
        list.iter().find(|d| d["route"] == "tg").unwrap()["attempts"],
        3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_with_one_delivery_id_send_once() {
    let fake = Fake::start(telegram_ok());
    fake.set_default(Reply {
        delay: Duration::from_millis(300),
        ..telegram_ok()
    });
    let h = start_with_telegram(
        &telegram_route("          deliver_extra: {chat_id: '5'}\n"),
        &fake,
        &[],
    );
    let (a, b) = tokio::join!(
        h.github("tg", "x", "{}", Some("same")),
        h.github("tg", "x", "{}", Some("same"))
    );
    let mut statuses = vec![
        a.1["status"].as_str().unwrap().to_owned(),
        b.1["status"].as_str().unwrap().to_owned(),
    ];
    statuses.sort();
    assert_eq!(statuses, vec!["delivered", "duplicate"]);
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn discord_slack_mattermost_matrix_wire_formats() {
    let discord = Fake::start(Reply::json(200, json!({"id": "m1"})));
    let slack = Fake::start(Reply::json(200, json!({"ok": true, "ts": "1.2"})));
    let mattermost = Fake::start(Reply::json(201, json!({"id": "p1"})));
    let matrix = Fake::start(Reply::json(200, json!({"event_id": "$e"})));
    let routes = "        dc:\n          deliver_only: true\n          deliver: discord\n          prompt: 'd {x}'\n          deliver_extra: {chat_id: '111', thread_id: '222'}\n        dchook:\n          deliver_only: true\n          deliver: discord\n          prompt: hook\n          deliver_extra: {webhook_url: 'DISCORD_HOOK'}\n        sl:\n          deliver_only: true\n          deliver: slack\n          prompt: 's {x}'\n          deliver_extra: {chat_id: C1, thread_ts: '9.9'}\n        mm:\n          deliver_only: true\n          deliver: mattermost\n          prompt: 'm {x}'\n        mx:\n          deliver_only: true\n          deliver: matrix\n          prompt: 'x {x}'\n          deliver_extra: {chat_id: '!room:hs'}\n";
    let hook = format!("{}/api/webhooks/1/abc", discord.base);
    let config = config_with_routes(&routes.replace("DISCORD_HOOK", &hook));
    let discord_base = format!("{}/api/v10", discord.base);
    let h = Herald::start_with(
        &config,
        &[
            ("DISCORD_BOT_TOKEN", "dtok"),
            ("DISCORD_BASE_URL", &discord_base),
            ("SLACK_BOT_TOKEN", "xoxb-1"),
            ("SLACK_BASE_URL", &slack.base),
            ("MATTERMOST_URL", &mattermost.base),
            ("MATTERMOST_TOKEN", "mtok"),
            ("MATTERMOST_HOME_CHANNEL", "chan9"),
            ("MATRIX_HOMESERVER", &matrix.base),
            ("MATRIX_ACCESS_TOKEN", "xtok"),
        ],
    );
    for route in ["dc", "dchook", "sl", "mm", "mx"] {
        let (s, b) = h.github(route, "e", r#"{"x": "y"}"#, None).await;
        assert_eq!(s, StatusCode::OK, "{route}: {b}");
    }
    let d = discord.requests();
    assert_eq!(d[0].path, "/api/v10/channels/222/messages");
    assert_eq!(d[0].headers["authorization"], "Bot dtok");
    assert_eq!(d[0].body, json!({"content": "d y"}));
    assert_eq!(d[1].path, "/api/webhooks/1/abc?wait=true");
    assert!(d[1].headers.get("authorization").is_none());
    let s = slack.requests();
    assert_eq!(s[0].path, "/chat.postMessage");
    assert_eq!(s[0].headers["authorization"], "Bearer xoxb-1");
    assert_eq!(
        s[0].body,
        json!({"channel": "C1", "text": "s y", "thread_ts": "9.9"})
    );
    let m = mattermost.requests();
    assert_eq!(m[0].path, "/api/v4/posts");
    assert_eq!(m[0].headers["authorization"], "Bearer mtok");
    assert_eq!(m[0].body, json!({"channel_id": "chan9", "message": "m y"}));
    let x = matrix.requests();
    assert_eq!(x[0].method, "PUT");
    assert!(
        x[0].path
            .starts_with("/_matrix/client/v3/rooms/%21room%3Ahs/send/m.room.message/"),
        "{}",
        x[0].path
    );
    assert_eq!(x[0].headers["authorization"], "Bearer xtok");
    assert_eq!(x[0].body, json!({"msgtype": "m.text", "body": "x y"}));

    // Slack answers 200 with ok:false for a bad channel: permanent, no retry.
    slack.push(Reply::json(
        200,
        json!({"ok": false, "error": "channel_not_found"}),
    ));
    let (s, _) = h.github("sl", "e", "{}", None).await;
    assert_eq!(s, StatusCode::BAD_GATEWAY);
    assert_eq!(slack.requests().len(), 2);
    // Discord 429 with retry_after in the body, then success.
    discord.push(Reply::json(
        429,
        json!({"message": "You are being rate limited.", "retry_after": 0.2}),
    ));
    let (s, _) = h.github("dc", "e", "{}", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(discord.requests().len(), 4);
}

#[tokio::test]
async fn github_comment_through_a_fake_gh() {
    let bin = tempfile::tempdir().unwrap();
    let record = bin.path().join("argv.json");
    let gh = bin.path().join("gh");
    std::fs::write(
        &gh,
        format!(
            "#!/usr/bin/env python3\nimport json, sys\nopen({:?}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\nsys.exit(1 if '999' in sys.argv else 0)\n",
            record.display().to_string()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&gh, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap()
    );
    let config = config_with_routes(
        "        gc:\n          deliver_only: true\n          deliver: github_comment\n          prompt: 'Looks good: {pull_request.title}'\n          deliver_extra: {repo: '{repository.full_name}', pr_number: '{number}'}\n",
    );
    let h = Herald::start_with(&config, &[("PATH", &path)]);
    let pr = |repo: &str, number: &str| {
        json!({"number": number, "repository": {"full_name": repo}, "pull_request": {"title": "T; rm -rf /"}}).to_string()
    };
    let (s, _) = h
        .github("gc", "pull_request", &pr("octo/hello", " 12 "), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    let calls: Vec<Vec<String>> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        calls,
        vec![vec![
            "pr",
            "comment",
            "12",
            "--repo",
            "octo/hello",
            "--body",
            "Looks good: T; rm -rf /"
        ]]
    );
    // Injection attempts never start a process.
    for (repo, number) in [
        ("octo/hello; touch /tmp/x", "1"),
        ("octo/hello", "0"),
        ("octo/hello", "1 --web"),
        ("a/b/c", "1"),
    ] {
        let (s, _) = h
            .github("gc", "pull_request", &pr(repo, number), None)
            .await;
        assert_eq!(s, StatusCode::BAD_GATEWAY, "{repo} {number}");
    }
    // gh failing is a 502.
    let (s, _) = h
        .github("gc", "pull_request", &pr("octo/hello", "999"), None)
        .await;
    assert_eq!(s, StatusCode::BAD_GATEWAY);
    assert_eq!(std::fs::read_to_string(&record).unwrap().lines().count(), 2);
}

#[tokio::test]
async fn github_comment_without_gh_says_how_to_fix() {
    let config = config_with_routes(
        "        gc:\n          deliver_only: true\n          deliver: github_comment\n          prompt: x\n          deliver_extra: {repo: o/r, pr_number: 1}\n",
    );
    let h = Herald::start_with(&config, &[("HERALD_GH_PROGRAM", "/nonexistent/gh")]);
    let (s, _) = h.github("gc", "x", "{}", Some("g")).await;
    assert_eq!(s, StatusCode::BAD_GATEWAY);
    let (_, out, _) = h.cli(&["deliveries", "list", "--json"]);
    assert!(out.contains("gh auth login"), "{out}");
}

#[tokio::test]
async fn email_over_smtp() {
    let smtp = FakeSmtp::start(1);
    let port = smtp.port.to_string();
    let config = config_with_routes(
        "        mail:\n          deliver_only: true\n          deliver: email\n          prompt: 'Build {status}: {url}'\n          deliver_extra: {subject: 'CI {status}'}\n",
    );
    let h = Herald::start_with(
        &config,
        &[
            ("EMAIL_SMTP_HOST", "127.0.0.1"),
            ("EMAIL_SMTP_PORT", &port),
            ("EMAIL_SMTP_SECURITY", "none"),
            ("EMAIL_ADDRESS", "herald@example.org"),
            ("EMAIL_PASSWORD", "pw"),
            ("EMAIL_HOME_ADDRESS", "ops@example.org"),
        ],
    );
    // The first DATA gets a transient 451: absorbed by a retry.
    let (s, b) = h
        .github(
            "mail",
            "x",
            r#"{"status": "failed", "url": "https://ci/1"}"#,
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let mails = smtp.mails.lock().unwrap().clone();
    assert_eq!(mails.len(), 1);
    assert_eq!(mails[0].from, "<herald@example.org>");
    assert_eq!(mails[0].to, vec!["<ops@example.org>"]);
    assert!(
        mails[0].auth.as_deref().unwrap_or("").starts_with("AUTH"),
        "{:?}",
        mails[0].auth
    );
    assert!(
        mails[0].data.contains("Subject: CI failed"),
        "{}",
        mails[0].data
    );
    assert!(
        mails[0].data.contains("Build failed: https://ci/1"),
        "{}",
        mails[0].data
    );
    let (_, out, _) = h.cli(&["deliveries", "list", "--json"]);
    let list: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(list[0]["attempts"], 2);
}

#[tokio::test]
async fn a_slow_target_times_out_and_is_retried() {
    let fake = Fake::start(telegram_ok());
    fake.push(Reply {
        delay: Duration::from_secs(3),
        ..telegram_ok()
    });
    let config = format!(
        "{}\n  telegram:\n    extra:\n      timeout_seconds: 1\n",
        telegram_route("          deliver_extra: {chat_id: '5'}\n")
    );
    let h = start_with_telegram(&config, &fake, &[]);
    let start = Instant::now();
    let (s, _) = h.github("tg", "x", "{}", Some("slow")).await;
    assert_eq!(s, StatusCode::OK);
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "one timeout (1 s) and a 1 s wait"
    );
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn telegram_configured_in_config_yaml_and_disabled_there() {
    let fake = Fake::start(telegram_ok());
    let routes = "        tg:\n          deliver_only: true\n          deliver: telegram\n          prompt: hi\n        dc:\n          deliver_only: true\n          deliver: discord\n          prompt: hi\n          deliver_extra: {chat_id: '1'}\n";
    let config = format!(
        "{}\n  telegram:\n    token: 'cfg:token'\n    home_channel: {{platform: telegram, chat_id: 9, name: Home}}\n    extra:\n      base_url: '{}/custom/bot'\n  discord:\n    enabled: false\n",
        config_with_routes(routes),
        fake.base
    );
    let h = Herald::start_with(&config, &[("DISCORD_BOT_TOKEN", "would-enable")]);
    let (s, _) = h.github("tg", "x", "{}", None).await;
    assert_eq!(s, StatusCode::OK);
    let reqs = fake.requests();
    assert_eq!(reqs[0].path, "/custom/botcfg:token/sendMessage");
    assert_eq!(reqs[0].body["chat_id"], "9");
    let (s, _) = h.github("dc", "x", "{}", None).await;
    assert_eq!(s, StatusCode::BAD_GATEWAY);
    let (_, out, _) = h.cli(&["deliveries", "list", "--route", "dc", "--json"]);
    assert!(out.contains("platforms.discord.enabled is false"), "{out}");
}

#[tokio::test]
async fn discord_splits_at_2000_characters() {
    let discord = Fake::start(Reply::json(200, json!({"id": "m"})));
    let config = config_with_routes(
        "        dc:\n          deliver_only: true\n          deliver: discord\n          prompt: '{text}'\n          deliver_extra: {chat_id: '1'}\n",
    );
    let base = format!("{}/api/v10", discord.base);
    let h = Herald::start_with(
        &config,
        &[("DISCORD_BOT_TOKEN", "t"), ("DISCORD_BASE_URL", &base)],
    );
    let text = "é".repeat(4500);
    let (s, _) = h
        .github("dc", "x", &json!({"text": text}).to_string(), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    let parts: Vec<String> = discord
        .requests()
        .iter()
        .map(|r| r.body["content"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(parts.len(), 3);
    assert!(parts.iter().all(|p| p.chars().count() <= 2000));
    let joined: String = parts
        .iter()
        .map(|p| p.rsplit_once(" (").unwrap().0.to_owned())
        .collect();
    assert_eq!(joined, text);
}

#[tokio::test]
async fn an_absurd_retry_after_from_the_platform_is_ignored_not_fatal() {
    let fake = Fake::start(telegram_ok());
    let h = start_with_telegram(
        &telegram_route(""),
        &fake,
        &[("TELEGRAM_HOME_CHANNEL", "-100")],
    );
    for wait in ["1e300", "inf", "-5", "NaN"] {
        fake.push(
            Reply::json(
                429,
                json!({"ok": false, "description": "Too Many Requests"}),
            )
            .with_header("retry-after", wait),
        );
        let (s, b) = h
            .github("tg", "pull_request", "{}", Some(&format!("absurd-{wait}")))
            .await;
        assert_eq!(
            (s, b["status"].as_str()),
            (StatusCode::OK, Some("delivered")),
            "{wait}"
        );
    }
    assert_eq!(fake.requests().len(), 8);
}

#[tokio::test]
async fn requests_waiting_on_a_failing_send_get_its_outcome_instead_of_retrying_it() {
    let fake = Fake::start(Reply::json(
        500,
        json!({"ok": false, "description": "Internal"}),
    ));
    let h = start_with_telegram(
        &telegram_route("          deliver_extra: {chat_id: '5'}\n"),
        &fake,
        &[],
    );
    let started = Instant::now();
    let requests = (0..32).map(|_| h.github("tg", "x", "{}", Some("one-id")));
    let answers = futures_util::future::join_all(requests).await;
    let took = started.elapsed();
    for (s, b) in &answers {
        assert_eq!(*s, StatusCode::BAD_GATEWAY, "{b}");
        assert_eq!(b["delivery_id"], "one-id");
    }
    // One send with its retries (3 attempts, ~3 s), not 32 of them one after another.
    assert_eq!(fake.requests().len(), 3);
    assert!(took < Duration::from_secs(8), "{took:?}");
    // Nothing was recorded: a later retry is sent again.
    let (s, _) = h.github("tg", "x", "{}", Some("one-id")).await;
    assert_eq!(s, StatusCode::BAD_GATEWAY);
    assert_eq!(fake.requests().len(), 6);
}

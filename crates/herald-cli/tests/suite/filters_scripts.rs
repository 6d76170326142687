//! Events, filters, route scripts and templates, end to end.

use super::support::*;
use reqwest::StatusCode;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test]
async fn events_and_filters() {
    let routes = r#"        prs:
          events: [pull_request]
          filters:
            - field: action
              in: [opened, reopened]
            - any:
                - field: pull_request.labels.0.name
                  equals: urgent
                - field: headers.X-Tag
                  regex: '^deploy-\d+$'
            - not: {field: pull_request.draft, equals: true}
            - field: sender.login
              in_file: lists/allowed.txt
            - not: {field: pull_request.title, regex: '(a+)+$'}
          prompt: "PR #{number}: {pull_request.title} by {sender.login} ({event_type}) {missing.key}"
          deliver: telegram
          deliver_extra:
            chat_id: "{repository.owner.id}"
            message_thread_id: 7
            text: "{pull_request.title}"
"#;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config_with_routes(routes)).unwrap();
    std::fs::create_dir_all(home.path().join("lists")).unwrap();
    std::fs::write(home.path().join("lists/allowed.txt"), "alice\n  bob \n").unwrap();
    let h = Herald::start_in(home, &[]);
    let pr = |action: &str, label: &str, draft: bool, login: &str, title: &str| {
        json!({
            "action": action, "number": 42,
            "pull_request": {"title": title, "draft": draft, "labels": [{"name": label}]},
            "sender": {"login": login}, "repository": {"owner": {"id": 12345}}
        })
        .to_string()
    };
    let (s, b) = h
        .github(
            "prs",
            "push",
            &pr("opened", "urgent", false, "alice", "t"),
            None,
        )
        .await;
    assert_eq!(
        (s, b),
        (
            StatusCode::OK,
            json!({"status": "ignored", "event": "push"})
        )
    );
    let filtered = json!({"status": "ignored", "reason": "filter", "route": "prs"});
    for body in [
        pr("closed", "urgent", false, "alice", "t"),
        pr("opened", "later", false, "alice", "t"),
        pr("opened", "urgent", true, "alice", "t"),
        pr("opened", "urgent", false, "mallory", "t"),
    ] {
        let (s, b) = h.github("prs", "pull_request", &body, None).await;
        assert_eq!((s, b), (StatusCode::OK, filtered.clone()));
    }
    // A hostile title against a catastrophic-backtracking pattern answers promptly.
    let start = Instant::now();
    let evil = format!("{}!", "a".repeat(50_000));
    let (s, _) = h
        .github(
            "prs",
            "pull_request",
            &pr("opened", "urgent", false, "bob", &evil),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED);
    assert!(start.elapsed() < Duration::from_secs(5));
    let (s, b) = h
        .github(
            "prs",
            "pull_request",
            &pr("reopened", "urgent", false, "bob", "Fix ✓ naïve"),
            Some("d-1"),
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    // The header branch of `any`.
    let body = pr("opened", "none", false, "alice", "x");
    let mut headers = vec![
        ("x-github-event", "pull_request".to_owned()),
        (
            "x-hub-signature-256",
            herald_webhook::verify::sign::github(SECRET, body.as_bytes()),
        ),
        ("x-tag", "deploy-12".to_owned()),
    ];
    let (s, _) = h.post("/webhooks/prs", body.clone(), &headers).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    headers[2].1 = "deploy-x".to_owned();
    let (s, _) = h.post("/webhooks/prs", body, &headers).await;
    assert_eq!(s, StatusCode::OK);
    // in_file edits take effect at once.
    std::fs::write(h.home().join("lists/allowed.txt"), "[\"mallory\"]").unwrap();
    let (s, _) = h
        .github(
            "prs",
            "pull_request",
            &pr("opened", "urgent", false, "mallory", "t2"),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED);

    let inbox = h.inbox();
    let item = inbox.iter().find(|i| i["delivery_id"] == "d-1").unwrap();
    assert_eq!(
        item["prompt"],
        "PR #42: Fix ✓ naïve by bob (pull_request) {missing.key}"
    );
    assert_eq!(item["deliver"], "telegram");
    assert_eq!(
        item["deliver_extra"],
        json!({"chat_id": "12345", "message_thread_id": 7, "text": "Fix ✓ naïve"})
    );
    assert_eq!(item["event_type"], "pull_request");
    assert_eq!(item["headers"]["x-github-event"], "pull_request");
    assert!(item["headers"].get("x-hub-signature-256").is_none());
}

fn script_routes() -> String {
    let mut r = String::new();
    for (name, script) in [
        ("py", "transform.py"),
        ("sh", "words.sh"),
        ("drop", "drop.py"),
        ("hang", "hang.sh"),
        ("flood", "flood.sh"),
        ("escape", "../config.yaml"),
        ("abs", "/etc/passwd"),
        ("fail", "fail.sh"),
        ("missing", "nope.py"),
        ("env", "env.sh"),
    ] {
        r.push_str(&format!("        {name}:\n          script: {script}\n          prompt: 'p={{script_output}} k={{kind}} a={{a}}'\n"));
    }
    r
}

#[tokio::test]
async fn route_scripts() {
    let config = config_with_routes(&script_routes()).replace(
        "rate_limit: 100000",
        "rate_limit: 100000\n      script_timeout_seconds: 1",
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let scripts = home.path().join("scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    std::fs::write(
        scripts.join("transform.py"),
        "import json,sys\np=json.load(sys.stdin)\nprint(json.dumps({'kind':'py','a':p['a']*2}))\n",
    )
    .unwrap();
    std::fs::write(
        scripts.join("words.sh"),
        "read -r line\necho \"not json: $line\"\n",
    )
    .unwrap();
    std::fs::write(
        scripts.join("drop.py"),
        "print('{\"__hermes_ignore__\": true}')\n",
    )
    .unwrap();
    let marker = home.path().join("grandchild-alive");
    std::fs::write(
        scripts.join("hang.sh"),
        format!("(sleep 3; touch '{}') &\nsleep 30\n", marker.display()),
    )
    .unwrap();
    std::fs::write(scripts.join("flood.sh"), "yes floodfloodflood\n").unwrap();
    std::fs::write(scripts.join("fail.sh"), "echo '{\"a\": 1}'\nexit 3\n").unwrap();
    std::fs::write(
        scripts.join("env.sh"),
        "echo \"{\\\"a\\\": \\\"${TELEGRAM_BOT_TOKEN:-none}-${KEEP_ME:-gone}\\\"}\"\n",
    )
    .unwrap();
    let h = Herald::start_in(
        home,
        &[("TELEGRAM_BOT_TOKEN", "tg-secret"), ("KEEP_ME", "kept")],
    );

    let (s, b) = h.github("py", "push", r#"{"a": 21}"#, Some("py")).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    let (s, _) = h.github("sh", "push", r#"{"a": 1}"#, Some("sh")).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    // A body with a number no tree holds reaches the script as written.
    let exotic = r#"{"a": 123456789012345678901234567890, "b": 1e400}"#;
    let (s, _) = h.github("sh", "push", exotic, Some("sh-exotic")).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let (s, _) = h.github("env", "push", r#"{}"#, Some("env")).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    for route in ["drop", "escape", "abs", "fail", "missing", "flood"] {
        let (s, b) = h.github(route, "push", r#"{"a": 1}"#, None).await;
        assert_eq!(
            (s, b),
            (
                StatusCode::OK,
                json!({"status": "ignored", "reason": "script", "route": route})
            ),
            "{route}"
        );
    }
    // A hanging script is killed at the time limit, its whole process group with it,
    // and other requests are served meanwhile.
    let start = Instant::now();
    let (hang, health) = tokio::join!(h.github("hang", "push", "{}", None), async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let t = Instant::now();
        let r = h.get("/health").await;
        (r.0, t.elapsed())
    });
    assert_eq!(hang.0, StatusCode::OK);
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(health.0, StatusCode::OK);
    assert!(health.1 < Duration::from_millis(500));
    std::thread::sleep(Duration::from_millis(3500));
    assert!(
        !h.home().join("grandchild-alive").exists(),
        "the script's child survived the kill"
    );

    let inbox = h.inbox();
    let prompt = |id: &str| {
        inbox.iter().find(|i| i["delivery_id"] == id).unwrap()["prompt"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(prompt("py"), "p={script_output} k=py a=42");
    assert_eq!(prompt("sh"), "p=not json: {\"a\":1} k={kind} a=1");
    assert!(
        prompt("sh-exotic")
            .starts_with("p=not json: {\"a\": 123456789012345678901234567890, \"b\": 1e400} "),
        "{}",
        prompt("sh-exotic")
    );
    assert_eq!(prompt("env"), "p={script_output} k={kind} a=none-kept");
}

#[tokio::test]
async fn contains_and_regex_use_text_forms_and_pythons_dollar() {
    let routes = r#"        c:
          filters: [{field: n, contains: 12}]
        r:
          filters: [{field: n, regex: "^42$"}]
        d:
          filters: [{field: s, regex: "^ab$"}]
"#;
    let h = Herald::start(&config_with_routes(routes));
    let cases = [
        ("c", r#"{"n": 3123}"#, 202),
        ("c", r#"{"n": 3456}"#, 200),
        ("c", r#"{"n": "x12y"}"#, 202),
        ("r", r#"{"n": 42}"#, 202),
        ("r", r#"{"n": 420}"#, 200),
        // Python's `$` also matches before one final newline.
        ("d", r#"{"s": "ab\n"}"#, 202),
        ("d", r#"{"s": "ab\n\n"}"#, 200),
        ("d", r#"{"s": "ab"}"#, 202),
    ];
    for (route, body, want) in cases {
        let (s, b) = h.github(route, "push", body, None).await;
        assert_eq!(s.as_u16(), want, "{route} {body}: {b}");
    }
}

#[tokio::test]
async fn everything_a_script_started_is_killed_even_outside_its_group() {
    let config = config_with_routes(
        "        hang:\n          script: hang.sh\n        quick:\n          script: quick.sh\n",
    )
    .replace(
        "rate_limit: 100000",
        "rate_limit: 100000\n      script_timeout_seconds: 1",
    );
    // No scripts/ yet: herald creates it, owner-only.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let h = Herald::start_in(home, &[]);
    let scripts = h.home().join("scripts");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&scripts).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "scripts/ has mode {mode:o}");
    let alive = |name: &str| h.home().join(name);
    let touch_later = |name: &str| format!("sleep 3; touch '{}'", alive(name).display());
    // A setsid grandchild (own session and group), and a double-forked one.
    std::fs::write(
        scripts.join("hang.sh"),
        format!(
            "setsid sh -c \"{}\" &\n( setsid sh -c \"{}\" & )\nsleep 30\n",
            touch_later("setsid-alive"),
            touch_later("daemon-alive")
        ),
    )
    .unwrap();
    // A script that answers at once but leaves a daemon behind.
    std::fs::write(
        scripts.join("quick.sh"),
        format!(
            "setsid sh -c \"{}\" >/dev/null 2>&1 </dev/null &\necho '{{}}'\n",
            touch_later("left-alive")
        ),
    )
    .unwrap();
    let started = Instant::now();
    let (s, b) = h.github("hang", "push", "{}", None).await;
    assert_eq!(
        (s.as_u16(), b["reason"].as_str()),
        (200, Some("script")),
        "{b}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    let (s, b) = h.github("quick", "push", "{}", None).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    std::thread::sleep(Duration::from_millis(4000));
    for name in ["setsid-alive", "daemon-alive", "left-alive"] {
        assert!(
            !alive(name).exists(),
            "{name}: a process the script started survived"
        );
    }
}

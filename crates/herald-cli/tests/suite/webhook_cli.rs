//! `herald webhook ...` against the real binary and a running gateway.

use super::support::*;
use reqwest::StatusCode;

fn secret_from(out: &str) -> String {
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Secret: "))
        .unwrap()
        .trim()
        .to_owned()
}

#[tokio::test]
async fn subscribe_post_list_test_remove_without_restart() {
    let h = Herald::start(&config_with_routes("        static-route: {}\n"));
    h.point_cli_here();
    let port = h.addr().rsplit(':').next().unwrap().to_owned();

    let (code, out, err) = h.cli(&[
        "webhook",
        "subscribe",
        " My Hook ",
        "--events",
        "push, issues",
        "--prompt",
        "New {event_type}: {msg}",
        "--deliver",
        "log",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("Created webhook subscription: my-hook"),
        "{out}"
    );
    assert!(
        out.contains(&format!("URL:    http://127.0.0.1:{port}/webhooks/my-hook")),
        "{out}"
    );
    assert!(out.contains("Events: push, issues"), "{out}");
    let secret = secret_from(&out);
    assert_eq!(secret.len(), 43);
    let file = h.home().join("webhook_subscriptions.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let stored: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let keys: Vec<&str> = stored["my-hook"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        vec![
            "description",
            "events",
            "secret",
            "prompt",
            "skills",
            "deliver",
            "created_at"
        ]
    );

    // POST with the printed secret: live without a restart.
    let body = r#"{"msg": "hello"}"#;
    let sig = herald_webhook::verify::sign::github(&secret, body.as_bytes());
    let (s, b) = h
        .post(
            "/webhooks/my-hook",
            body,
            &[
                ("x-hub-signature-256", sig),
                ("x-github-event", "push".into()),
            ],
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");

    let (code, out, _) = h.cli(&["webhook", "ls"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("1 webhook subscription(s):")
            && out.contains("◆ my-hook")
            && out.contains("Events:  push, issues"),
        "{out}"
    );
    // config.yaml's routes are listed after the subscriptions, in their own section.
    let (subs, statics) = out.split_once("route(s) in ").unwrap_or((&out, ""));
    assert!(!subs.contains("static-route"), "{out}");
    assert!(statics.contains("◆ static-route"), "{out}");

    // `test` signs and posts the route's first event; the gateway accepts it.
    let (code, out, _) = h.cli(&["webhook", "test", "my-hook"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("Sending test POST to")
            && out.contains("Response (202):")
            && out.contains("\"event\":\"push\""),
        "{out}"
    );
    let (code, out, _) = h.cli(&["webhook", "test", "my-hook", "--payload", "{not json"]);
    assert_eq!(code, 1);
    assert!(out.contains("not valid JSON"), "{out}");

    // Re-subscribing the same name replaces it.
    let (code, out, _) = h.cli(&["webhook", "add", "my-hook", "--secret", "fixed"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("Updated webhook subscription: my-hook") && out.contains("Events: (all)"),
        "{out}"
    );

    // A name that is a config.yaml route would never be used: refused.
    let (code, out, _) = h.cli(&["webhook", "subscribe", "static-route"]);
    assert_eq!(code, 1);
    assert!(
        out.starts_with("Error: 'static-route' is already a route in"),
        "{out}"
    );

    let (code, out, _) = h.cli(&["webhook", "rm", "MY-HOOK"]);
    assert_eq!(
        (code, out.trim()),
        (0, "Removed webhook subscription: my-hook")
    );
    let (s, _) = h.post("/webhooks/my-hook", body, &[]).await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (code, out, _) = h.cli(&["webhook", "remove", "my-hook"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("No subscription named 'my-hook'.") && out.contains("config.yaml"),
        "{out}"
    );
    let (code, out, _) = h.cli(&["webhook", "test", "nope"]);
    assert_eq!(
        (code, out.trim()),
        (
            1,
            "No subscription or config.yaml route named 'nope'.\n  Routes: static-route"
        )
    );
}

#[test]
fn bad_input_gives_clear_errors_and_non_zero_exits() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "platforms:\n  webhook:\n    enabled: true\n    extra: {port: 1, secret: s}\n",
    )
    .unwrap();
    let (code, out, _) = run_cli(home.path(), &["webhook", "subscribe", "bad/name"]);
    assert_eq!(code, 1);
    assert!(out.starts_with("Error: Invalid name 'bad/name'."), "{out}");
    let (code, out, _) = run_cli(home.path(), &["webhook", "subscribe", "_x"]);
    assert_eq!(code, 1, "{out}");
    let (code, out, _) = run_cli(
        home.path(),
        &["webhook", "subscribe", "ok", "--deliver-only"],
    );
    assert_eq!(code, 1);
    assert!(
        out.starts_with("Error: --deliver-only requires --deliver to be a real target"),
        "{out}"
    );
    let (code, _, err) = run_cli(
        home.path(),
        &["webhook", "subscribe", "ok", "--toolsets", "terminal"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        !home.path().join("webhook_subscriptions.json").exists(),
        "nothing written on errors"
    );
    let (code, _, _) = run_cli(home.path(), &["webhook"]);
    assert_eq!(code, 2);
    // No gateway on port 1.
    let (code, _, _) = run_cli(
        home.path(),
        &[
            "webhook",
            "subscribe",
            "ok",
            "--deliver",
            "telegram",
            "--deliver-only",
            "--deliver-chat-id",
            "42",
        ],
    );
    assert_eq!(code, 0);
    let stored: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("webhook_subscriptions.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stored["ok"]["deliver_only"], true);
    assert_eq!(
        stored["ok"]["deliver_extra"],
        serde_json::json!({"chat_id": "42"})
    );
    let (code, out, _) = run_cli(home.path(), &["webhook", "test", "ok"]);
    assert_eq!(code, 1);
    assert!(
        out.contains("Error:") && out.contains("herald gateway run"),
        "{out}"
    );
    let (code, out, _) = run_cli(home.path(), &["webhook", "list"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("Deliver: telegram (direct — no agent)"),
        "{out}"
    );
    assert!(
        out.contains("URL:     http://localhost:1/webhooks/ok"),
        "{out}"
    );
}

#[test]
fn webhook_platform_not_enabled() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), "platforms: {}\n").unwrap();
    let (code, out, _) = run_cli(home.path(), &["webhook", "list"]);
    assert_eq!(code, 1);
    assert!(out.contains("Webhook platform is not enabled"), "{out}");
}

#[test]
fn a_misspelt_deliver_target_gets_a_did_you_mean() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        config_with_routes("        r:\n          deliver: discrod\n          deliver_only: true\n          prompt: hi\n"),
    )
    .unwrap();
    let (code, out, _) = run_cli(home.path(), &["config", "check"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "discrod, which is not supported by herald (did you mean `deliver: discord`?)"
        ),
        "{out}"
    );
}

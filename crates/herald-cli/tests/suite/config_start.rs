//! Start-up: the first start on an empty home, config errors that stop herald, warnings,
//! the environment overlay, logs, and graceful shutdown.

use super::support::*;
use reqwest::StatusCode;
use std::process::{Command, Stdio};
use std::time::Duration;

#[tokio::test]
async fn first_start_writes_a_default_config_and_serves() {
    let home = tempfile::tempdir().unwrap();
    // Port 8644 may be taken on a shared machine: pin a free one through the env overlay.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port().to_string()
    };
    let h = Herald::start_in(
        home,
        &[("WEBHOOK_ENABLED", "true"), ("WEBHOOK_PORT", &port)],
    );
    let text = h.stdout_lines.join("\n");
    assert!(text.contains("wrote a default configuration to"), "{text}");
    assert!(text.contains("curl"), "{text}");
    // The printed request works exactly as written.
    let script: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("SECRET=$("))
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let shell = script.join("\n");
    let sent = tokio::task::spawn_blocking(move || {
        Command::new("sh").args(["-c", &shell]).output().unwrap()
    })
    .await
    .unwrap();
    let answer = String::from_utf8_lossy(&sent.stdout);
    assert!(answer.contains("HTTP/1.1 202"), "{answer}");
    let config_path = h.home().join("config.yaml");
    let config = std::fs::read_to_string(&config_path).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&config_path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    let secret = config
        .lines()
        .find_map(|l| l.trim().strip_prefix("secret: \""))
        .unwrap()
        .trim_end_matches('"')
        .to_owned();
    assert_eq!(secret.len(), 43);
    assert!(!text.contains(&secret), "the secret must not be printed");
    assert!(h.home().join("scripts").is_dir());
    let body = r#"{"hello": "world"}"#;
    let sig = herald_webhook::verify::sign::github(&secret, body.as_bytes());
    let (s, b) = h
        .post(
            "/webhooks/example",
            body,
            &[
                ("x-hub-signature-256", sig),
                ("x-github-event", "ping".into()),
            ],
        )
        .await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    assert!(!h.log().contains("unknown key"), "{}", h.log());
    // The accepted event is in the store: the database and the WAL and shared-memory
    // files SQLite made beside it hold payloads, so they are owner-only from the start.
    for name in ["herald.db", "herald.db-wal", "herald.db-shm"] {
        let mode = std::fs::metadata(h.home().join(name))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{name} has mode {mode:o}");
    }
}

#[test]
fn a_home_herald_creates_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let subscribe = |home: &std::path::Path, name: &str| {
        let out = Command::new(BIN)
            .args(["webhook", "subscribe", name])
            .env("HERALD_HOME", home)
            .env("WEBHOOK_ENABLED", "true")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    let home = dir.path().join("new").join("home");
    subscribe(&home, "hook");
    for folder in [dir.path().join("new"), home.clone()] {
        let mode = std::fs::metadata(&folder).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} has mode {mode:o}", folder.display());
    }
    let file = home.join("webhook_subscriptions.json");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // An existing folder keeps the permissions its owner gave it.
    subscribe(dir.path(), "other");
    let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
}

#[test]
fn config_errors_stop_herald_with_file_line_key_and_fix() {
    let cases = [
        (
            "platforms:\n  webhook:\n    enabled: true\n    extra:\n      routes:\n        r: {prompt: x}\n",
            ["config.yaml:6:9", "routes.r.secret", "set `secret:`"],
        ),
        (
            "platforms:\n  webhook:\n    enabled: true\n    extra:\n      host: 0.0.0.0\n      routes:\n        r: {secret: INSECURE_NO_AUTH}\n",
            ["config.yaml:7:13", "INSECURE_NO_AUTH", "host: 127.0.0.1"],
        ),
        (
            "platforms:\n  webhook:\n    enabled: true\n    extra:\n      secret: s\n      routes:\n        r: {deliver_only: true, deliver: log}\n",
            ["config.yaml:7:33", "routes.r.deliver", "real target"],
        ),
        (
            "platforms:\n  webhook:\n    enabled: true\n    extra:\n      port: abc\n",
            ["config.yaml:5:7", "extra.port", "whole number"],
        ),
        (
            "platforms:\n  webhook: [oops\n",
            ["config.yaml:", "YAML syntax error", ""],
        ),
    ];
    for (config, needles) in cases {
        let (code, stderr) = start_expect_failure(config);
        assert_eq!(code, 1, "{stderr}");
        for n in needles {
            assert!(stderr.contains(n), "missing {n:?} in {stderr}");
        }
        assert!(
            stderr.contains("not serving") || stderr.contains("YAML"),
            "{stderr}"
        );
    }
}

#[tokio::test]
async fn a_bad_filter_never_matches_and_the_other_routes_keep_serving() {
    let long = "(".repeat(100_000);
    let h = Herald::start(&config_with_routes(&format!(
        "        bad:\n          filters: [{{field: a, regex: '{long}'}}]\n        good:\n          prompt: hi\n        spec:\n          filters: [{{field: a}}, 5]\n"
    )));
    let (s, b) = h.github("good", "push", r#"{"a":1}"#, None).await;
    assert_eq!(s, 202, "{b}");
    for route in ["bad", "spec"] {
        let (s, b) = h.github(route, "push", r#"{"a":"(("}"#, None).await;
        assert_eq!(
            (s.as_u16(), b["reason"].as_str()),
            (200, Some("filter")),
            "{b}"
        );
    }
    let log = h.log();
    assert!(
        log.contains("config.yaml:11:11")
            && log.contains("routes.bad.filters")
            && log.contains("invalid regex"),
        "{log}"
    );
    assert!(log.contains("routes.spec.filters"), "{log}");
    // The 100 KB pattern is cut in the log line.
    assert!(
        log.lines().all(|l| l.len() < 2000),
        "a log line is too long"
    );
}

#[test]
fn disabled_webhook_platform_says_how_to_enable() {
    let (code, stderr) = start_expect_failure("platforms:\n  webhook:\n    enabled: false\n");
    assert_eq!(code, 1);
    assert!(
        stderr.contains("platforms.webhook.enabled: true"),
        "{stderr}"
    );
}

#[test]
fn port_in_use_exits_non_zero() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let config = config_with_routes("        r: {}\n").replace("port: 0", &format!("port: {port}"));
    let (code, stderr) = start_expect_failure(&config);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("cannot listen"), "{stderr}");
}

#[tokio::test]
async fn unknown_keys_warn_once_with_suggestions() {
    let config = format!(
        "compression: {{enabled: true}}\nmemory: {{provider: x}}\ncompresion_level: 3\nagent: {{max_turns: 5, gateway_timeout: 9}}\nsecurity: {{allow_private_urls: false, redact_secrets: true}}\n{}",
        config_with_routes("        r:\n          secert: typo\n          prompt: hi\n")
    );
    let h = Herald::start(&config);
    let log = h.log_once_it_has("route `r` is verified");
    // Hermes settings herald does not implement: listed once, at info, not as unknown.
    assert!(!log.contains("`compression`: unknown key"), "{log}");
    assert!(!log.contains("`memory`: unknown key"), "{log}");
    assert_eq!(
        log.matches("INFO Hermes settings herald does not implement (ignored): compression, memory, agent.gateway_timeout, security.redact_secrets").count(),
        1,
        "{log}"
    );
    // Keys neither knows keep the warning.
    assert!(
        log.contains("`compresion_level`: unknown key, ignored by herald"),
        "{log}"
    );
    assert!(
        log.contains("secert`: unknown key, ignored by herald; did you mean `secret`?"),
        "{log}"
    );
    assert!(
        log.contains("route `r` is verified with the global secret: `secert:` is not a key, did you mean `secret:`?"),
        "{log}"
    );
    let (s, _) = h.github("r", "push", "{}", None).await;
    assert_eq!(s, StatusCode::ACCEPTED);
}

#[test]
fn findings_end_the_start_and_config_check_prints_them() {
    let config = "platforms:\n  webhook:\n    enabled: true\n    routes:\n      a: {}\n      b: {}\n      c: {}\n    extra:\n      host: 127.0.0.1\n      port: 0\n      secret: s3cret\n      routes:\n        gh:\n          event: [issues]\n        tg:\n          deliver_only: true\n          deliver: telegram\n          prompt: hi\n        bad:\n          filters: {field: x, regex: '('}\n";
    let h = Herald::start_with(config, &[("TELEGRAM_BOT_TOKEN", "")]);
    let log = h.log_once_it_has("route `bad` ignores");
    let expected = [
        "3 routes under `platforms.webhook.routes` are not served: routes live under `platforms.webhook.extra.routes`",
        "route `gh` accepts every event: `event:` is not a key, did you mean `events:`?",
        "route `tg` delivers to telegram, which is not enabled (not configured: set TELEGRAM_BOT_TOKEN): every request will answer 502",
        "route `bad` ignores every request: its `filters` cannot be used",
    ];
    assert!(log.contains("herald: 4 configuration finding(s)"), "{log}");
    for line in expected {
        assert!(
            log.contains(&format!("herald:   - {line}")),
            "{line}\n{log}"
        );
    }
    let (code, out, _) = h.cli(&["config", "check"]);
    assert_eq!(code, 1, "{out}");
    for line in expected {
        assert!(out.contains(&format!("finding: {line}")), "{line}\n{out}");
    }
    // A clean config passes.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        config_with_routes("        r:\n          events: [push]\n"),
    )
    .unwrap();
    let (code, out, _) = run_cli(home.path(), &["config", "check"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no findings"), "{out}");
}

#[tokio::test]
async fn dotenv_overrides_the_environment() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), "platforms:\n  webhook:\n    extra:\n      host: 127.0.0.1\n      port: 0\n      routes:\n        r: {}\n").unwrap();
    std::fs::write(
        home.path().join(".env"),
        "WEBHOOK_ENABLED=true\nWEBHOOK_SECRET=from-dotenv\n",
    )
    .unwrap();
    let h = Herald::start_in(home, &[("WEBHOOK_SECRET", "from-process")]);
    let sig = herald_webhook::verify::sign::github("from-dotenv", b"{}");
    let (s, _) = h
        .post("/webhooks/r", "{}", &[("x-hub-signature-256", sig)])
        .await;
    assert_eq!(s, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn json_logs_carry_route_event_and_delivery_id() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        config_with_routes("        r: {events: [push]}\n"),
    )
    .unwrap();
    let log_path = home.path().join("json.log");
    let mut child = Command::new(BIN)
        .args(["--log-format", "json", "gateway", "run"])
        .env("HERALD_HOME", home.path())
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    use std::io::BufRead;
    reader.read_line(&mut line).unwrap();
    let base = line
        .trim()
        .strip_prefix("herald: webhook listening on ")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned();
    let client = http_client(std::time::Duration::from_secs(10));
    for (event, id) in [("push", "id-a"), ("issues", "id-b")] {
        client
            .post(format!("{base}/webhooks/r"))
            .header("x-github-event", event)
            .header("x-github-delivery", id)
            .header(
                "x-hub-signature-256",
                herald_webhook::verify::sign::github(SECRET, b"{}"),
            )
            .body("{}")
            .send()
            .await
            .unwrap();
    }
    let _ = client
        .post(format!("{base}/webhooks/r"))
        .body("{}")
        .send()
        .await
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&log_path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}")))
        .collect();
    let accepted = lines.iter().find(|l| l["message"] == "accepted").unwrap();
    assert_eq!(
        (
            accepted["route"].as_str(),
            accepted["event"].as_str(),
            accepted["delivery_id"].as_str()
        ),
        (Some("r"), Some("push"), Some("id-a"))
    );
    assert!(lines.iter().any(
        |l| l["message"].as_str().unwrap_or("").starts_with("ignored") && l["event"] == "issues"
    ));
    assert!(
        lines
            .iter()
            .any(|l| l["message"] == "rejected: invalid signature" && l["route"] == "r")
    );
    assert!(!std::fs::read_to_string(&log_path).unwrap().contains(SECRET));
}

#[tokio::test]
async fn sigterm_exits_zero() {
    let mut h = Herald::start(&config_with_routes("        r: {}\n"));
    let (s, _) = h.github("r", "push", "{}", None).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    assert_eq!(h.terminate(), Some(0));
}

#[test]
fn yaml_syntax_errors_name_the_likely_cause_and_its_line() {
    let cases = [
        (
            "platforms:\n  webhook:\n    enabled: true\n    extra:\n      routes:\n        gh:\n          events: [push, issues\n          prompt: hi\n",
            "an unclosed `[` on line 7",
        ),
        (
            "platforms:\n  webhook:\n    extra:\n      port:1\n      secret: x\n",
            "a missing space after `:` on line 4",
        ),
        (
            "platforms:\n\twebhook: {}\n",
            "a tab in the indentation on line 2",
        ),
        (
            "platforms:\n  webhook:\n    extra:\n      routes:\n        gh:\n          prompt: \"hello\n          deliver: log\n",
            "a `\"` quote that is never closed on line 6",
        ),
    ];
    for (config, cause) in cases {
        let (code, err) = start_expect_failure(config);
        assert_eq!(code, 1, "{err}");
        assert!(err.contains("YAML syntax error"), "{err}");
        assert!(
            err.contains(&format!("likely cause: {cause}")),
            "{cause}: {err}"
        );
    }
}

#[test]
fn chat_platforms_a_hermes_user_receives_on_are_findings_and_start_warnings() {
    let config = format!(
        "{}        r: {{deliver: log}}\n  matrix:\n    enabled: true\ntelegram:\n  require_mention: true\n",
        config_with_routes("")
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), &config).unwrap();
    std::fs::write(
        home.path().join(".env"),
        "TELEGRAM_BOT_TOKEN=123:abc\nTELEGRAM_ALLOWED_USERS=42\n",
    )
    .unwrap();
    let (code, out, _) = run_cli(home.path(), &["config", "check"]);
    assert_eq!(code, 1, "{out}");
    let finding = |platform: &str| {
        out.lines()
            .find(|l| {
                l.starts_with("finding:") && l.contains(&format!("receive {platform} messages"))
            })
            .unwrap_or_else(|| panic!("no {platform} finding: {out}"))
            .to_owned()
    };
    // Telegram is served: a note, no finding, that Hermes's adapter must be off.
    assert!(!out.contains("receive telegram messages"), "{out}");
    assert!(
        out.contains(
            "note: telegram: herald answers people who write to the bot (by long polling)"
        ) && out.contains("409 Conflict"),
        "{out}"
    );
    let matrix = finding("matrix");
    assert!(
        matrix.contains("`platforms.matrix.enabled: true`"),
        "{matrix}"
    );
    // The start says the same, and serves anyway.
    std::fs::create_dir_all(home.path().join("scripts")).unwrap();
    let h = Herald::start_in(home, &[]);
    let log = h.log_once_it_has("serves anyway");
    assert!(
        log.contains("herald answers people who write to the bot"),
        "{log}"
    );
    assert!(log.contains("herald does not receive from matrix"), "{log}");
    // A herald-only home (a token to send with, nothing that receives) has no such finding.
    let plain = tempfile::tempdir().unwrap();
    std::fs::write(
        plain.path().join("config.yaml"),
        config_with_routes("        r: {deliver: telegram, deliver_extra: {chat_id: '1'}}\n"),
    )
    .unwrap();
    std::fs::write(plain.path().join(".env"), "TELEGRAM_BOT_TOKEN=123:abc\n").unwrap();
    let (code, out, _) = run_cli(plain.path(), &["config", "check"]);
    assert_eq!(code, 0, "{out}");
}

/// `herald gateway run` on `home`: (exit code, stderr), expected to stop.
fn start_home_expect_failure(home: &std::path::Path) -> (i32, String) {
    let mut child = Command::new(BIN)
        .args(["gateway", "run"])
        .env("HERALD_HOME", home)
        .env_remove("WEBHOOK_ENABLED")
        .env_remove("API_SERVER_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let code = wait_timeout(&mut child, std::time::Duration::from_secs(10));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    (
        code.unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn config_check_reports_every_refusal_the_start_makes_with_file_line_and_key() {
    let api = |key: &str| {
        format!(
            "model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\nplatforms:\n  api_server:\n    enabled: true\n    extra:\n      port: 0\n{key}"
        )
    };
    let docs_key = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/api.md"),
    )
    .unwrap();
    assert!(
        docs_key.contains("openssl rand -hex 32"),
        "the docs generate a key"
    );
    // (config.yaml, .env, the place named, why)
    let cases = [
        (
            api("      key: short-key-123\n"),
            "",
            "config.yaml:9:7: `platforms.api_server.extra.key`",
            "shorter than 16",
        ),
        (
            api("      key: \"paste-a-random-key-of-16+-characters\"\n"),
            "",
            "config.yaml:9:7: `platforms.api_server.extra.key`",
            "an example from herald's docs",
        ),
        (
            api(""),
            "WEBHOOK_PORT=1\nAPI_SERVER_KEY=changeme-later-0123\n",
            ".env:2:1: `API_SERVER_KEY`",
            "placeholder",
        ),
        (
            api("").replace("enabled: true", "enabled: false"),
            "",
            "`platforms.webhook.enabled`",
            "neither the webhook platform nor the API server is enabled",
        ),
    ];
    for (config, env, place, why) in cases {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.yaml"), &config).unwrap();
        if !env.is_empty() {
            std::fs::write(home.path().join(".env"), env).unwrap();
        }
        let (code, out, _) = run_cli(home.path(), &["config", "check"]);
        assert_eq!(code, 1, "{config}\n{out}");
        let finding = out
            .lines()
            .find(|l| l.starts_with("finding: herald gateway run would not start:"))
            .unwrap_or_else(|| panic!("{config}\n{out}"));
        assert!(finding.contains(place), "{finding}");
        assert!(finding.contains(why), "{finding}");
        let (code, err) = start_home_expect_failure(home.path());
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(place), "the start names the setting: {err}");
        assert!(err.contains(why), "{err}");
    }
    // A key the start takes passes the check too.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        api("      key: 9f86d081884c7d659a2feaa0c55ad015\n"),
    )
    .unwrap();
    let (code, out, _) = run_cli(home.path(), &["config", "check"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn webhook_port_from_the_environment_warns_when_ignored_and_a_busy_port_names_its_source() {
    // WEBHOOK_PORT without WEBHOOK_ENABLED=true is ignored, as in Hermes, but said.
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        config_with_routes("        r: {deliver: log}\n"),
    )
    .unwrap();
    std::fs::write(home.path().join(".env"), "WEBHOOK_PORT=1\n").unwrap();
    let (code, out, _) = run_cli(home.path(), &["config", "check"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            ".env:1:1: `WEBHOOK_PORT`: ignored: WEBHOOK_PORT applies only with WEBHOOK_ENABLED=true"
        ),
        "{out}"
    );
    std::fs::create_dir_all(home.path().join("scripts")).unwrap();
    let h = Herald::start_in(home, &[]);
    assert!(h.log().contains("ignored: WEBHOOK_PORT"), "{}", h.log());
    // A second gateway on the same home and port: where the port came from, and the
    // herald already serving this home.
    h.point_cli_here();
    let port = h.addr().rsplit(':').next().unwrap().to_owned();
    let second = |env: &[(&str, &str)]| {
        let mut cmd = Command::new(BIN);
        cmd.args(["gateway", "run"])
            .env("HERALD_HOME", h.home())
            .env_remove("WEBHOOK_ENABLED")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let code = wait_timeout(&mut child, std::time::Duration::from_secs(10));
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        (code, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let running = format!(
        "a herald gateway already runs on this home: pid {}",
        h.child.id()
    );
    let (code, err) = second(&[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "port {port} comes from platforms.webhook.extra.port"
        )),
        "{err}"
    );
    assert!(err.contains(&running), "{err}");
    // .env wins over the process environment: the port from the environment is set there.
    std::fs::write(
        h.home().join(".env"),
        format!("WEBHOOK_ENABLED=true\nWEBHOOK_PORT={port}\n"),
    )
    .unwrap();
    let (code, err) = second(&[]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("set `WEBHOOK_PORT`"), "{err}");
    assert!(
        err.contains(&format!("port {port} comes from WEBHOOK_PORT")),
        "{err}"
    );
    assert!(err.contains(&running), "{err}");
}

#[tokio::test]
async fn a_token_added_to_env_is_used_after_a_reload() {
    let fake = super::fakes::Fake::start(super::fakes::telegram_ok());
    let h = Herald::start(&config_with_routes(
        "        tg:\n          deliver: telegram\n          deliver_only: true\n          prompt: hi\n          deliver_extra: {chat_id: '1'}\n",
    ));
    let errors = |h: &Herald| {
        let (code, out, err) = h.cli(&["deliveries", "list", "--json"]);
        assert_eq!(code, 0, "{err}");
        out
    };
    let (s, _) = h.github("tg", "push", "{}", Some("d-1")).await;
    assert_eq!(s, StatusCode::BAD_GATEWAY);
    let before = errors(&h);
    assert!(
        before.contains("not configured: set TELEGRAM_BOT_TOKEN"),
        "{before}"
    );
    assert!(!before.contains("reads it again"), "{before}");
    std::fs::write(
        h.home().join(".env"),
        format!(
            "TELEGRAM_BOT_TOKEN=123:abc\nTELEGRAM_BASE_URL={}/bot\n",
            fake.base
        ),
    )
    .unwrap();
    // Not read yet: the answer says how to use it.
    let (s, _) = h.github("tg", "push", "{}", Some("d-2")).await;
    assert_eq!(s, StatusCode::BAD_GATEWAY);
    let after = errors(&h);
    assert!(
        after.contains("changed after the delivery targets were read")
            && after.contains("`herald gateway reload` (SIGHUP) reads it again"),
        "{after}"
    );
    let (code, out, err) = h.cli(&["gateway", "reload"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Asked the gateway"), "{out}");
    let log = h.log_once_it_has("delivery targets reloaded");
    assert!(log.contains("delivery targets reloaded"), "{log}");
    let (s, b) = h.github("tg", "push", "{}", Some("d-3")).await;
    assert_eq!(
        (s, b["status"].as_str()),
        (StatusCode::OK, Some("delivered")),
        "{b}"
    );
    let sent = fake.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].path, "/bot123:abc/sendMessage");
}

#[tokio::test]
async fn a_provider_key_rotated_in_env_is_used_by_the_next_run_after_a_reload() {
    let provider = herald_test_support::FakeProvider::start(vec![
        herald_test_support::Scripted::text("first"),
        herald_test_support::Scripted::text("second"),
    ]);
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "model:\n  default: fake-model\n  provider: team\nproviders:\n  team:\n    base_url: {}\n    key_env: TEAM_LLM_KEY\n{}",
            provider.base_url,
            config_with_routes("        pr:\n          prompt: 'go'\n          deliver: log\n")
        ),
    )
    .unwrap();
    std::fs::write(home.path().join(".env"), "TEAM_LLM_KEY=sk-old-key-1\n").unwrap();
    let h = Herald::start_in(home, &[]);
    let bearer = |n: usize| {
        let reqs = provider.requests();
        (reqs.len() > n).then(|| {
            reqs[n].headers["authorization"]
                .to_str()
                .unwrap()
                .to_owned()
        })
    };
    let (s, _) = h.github("pr", "push", "{}", Some("k-1")).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let first = wait_for(Duration::from_secs(20), "the first run", || bearer(0)).await;
    assert_eq!(first, "Bearer sk-old-key-1");
    std::fs::write(h.home().join(".env"), "TEAM_LLM_KEY=sk-new-key-2\n").unwrap();
    let (code, _, err) = h.cli(&["gateway", "reload"]);
    assert_eq!(code, 0, "{err}");
    let log = h.log_once_it_has(".env reloaded");
    assert!(log.contains(".env reloaded"), "{log}");
    let (s, _) = h.github("pr", "push", "{}", Some("k-2")).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let second = wait_for(Duration::from_secs(20), "the second run", || bearer(1)).await;
    assert_eq!(second, "Bearer sk-new-key-2");
    assert!(!h.log().contains("sk-new-key-2"), "a key in the log");
}

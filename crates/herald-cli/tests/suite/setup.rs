//! `herald gateway setup` with piped answers.

use super::support::*;
use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `herald gateway setup` with `answers` on stdin; (exit code, stdout).
pub fn setup(home: &std::path::Path, answers: &str) -> (i32, String) {
    answered(home, &["gateway", "setup"], answers)
}

/// Runs herald with `args` and `answers` on stdin; (exit code, stdout).
fn answered(home: &std::path::Path, args: &[&str], answers: &str) -> (i32, String) {
    let mut child = Command::new(BIN)
        .args(args)
        .env("HERALD_HOME", home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(answers.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test]
async fn piped_answers_write_config_and_env_that_herald_serves() {
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, out) = setup(
        home.path(),
        &format!("y\nnot-a-port\n{port}\nmy-secret\npigeon\ntelegram\n123:abc\n-1001\n"),
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("is not a port number") && out.contains("Unknown target"),
        "{out}"
    );
    let env = std::fs::read_to_string(home.path().join(".env")).unwrap();
    assert_eq!(
        env,
        "TELEGRAM_BOT_TOKEN=123:abc\nTELEGRAM_HOME_CHANNEL=-1001\n"
    );
    use std::os::unix::fs::PermissionsExt;
    for f in [".env", "config.yaml"] {
        assert_eq!(
            std::fs::metadata(home.path().join(f))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o600,
            "{f}"
        );
    }
    // Re-running with an existing config keeps other keys and updates the webhook ones.
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!("model: {{default: x}}\n{config}"),
    )
    .unwrap();
    let (code, out) = setup(home.path(), &format!("\n{port}\nsecret-two\nnone\n"));
    assert_eq!(code, 0, "{out}");
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(
        config.contains("secret-two") && config.contains("model") && config.contains("example"),
        "{config}"
    );
    assert!(home.path().join("config.yaml.bak").exists());
    let h = Herald::start_in(home, &[]);
    assert!(h.base.ends_with(&format!(":{port}")), "{}", h.base);
    let sig = herald_webhook::verify::sign::github("secret-two", b"{}");
    let (s, _) = h
        .post("/webhooks/example", "{}", &[("x-hub-signature-256", sig)])
        .await;
    assert_eq!(s, reqwest::StatusCode::ACCEPTED);
}

#[test]
fn end_of_input_takes_the_defaults() {
    let home = tempfile::tempdir().unwrap();
    let (code, out) = setup(home.path(), "");
    assert_eq!(code, 0, "{out}");
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(
        config.contains("enabled: true") && config.contains("port: 8644"),
        "{config}"
    );
    assert!(!home.path().join(".env").exists());
}

#[test]
fn acp_setup_sets_the_model_only_and_end_of_input_changes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config.yaml");
    // End of input at the first question: no file is made.
    let (code, out) = answered(home.path(), &["acp", "--setup"], "");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("Nothing changed."), "{out}");
    assert!(!config.exists() && !home.path().join(".env").exists());
    // End of input part way: nothing either.
    let (_, out) = answered(home.path(), &["acp", "--setup"], "endpoint\n");
    assert!(out.contains("Nothing changed."), "{out}");
    assert!(!config.exists());
    // Every answer: the model and provider, and no webhook platform.
    let answers = "endpoint\nhttp://127.0.0.1:9/v1\nmy-model\nsk-local\n";
    let (code, out) = answered(home.path(), &["acp", "--setup"], answers);
    assert_eq!(code, 0, "{out}");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.contains("my-model") && text.contains("http://127.0.0.1:9/v1"),
        "{text}"
    );
    assert!(
        !text.contains("webhook") && !text.contains("platforms"),
        "{text}"
    );
    let env = std::fs::read_to_string(home.path().join(".env")).unwrap();
    assert!(env.contains("=sk-local"), "{env}");
    // An existing config keeps everything but the model.
    std::fs::write(&config, "agent:\n  max_turns: 7\nmodel:\n  default: old\n").unwrap();
    let (_, out) = answered(
        home.path(),
        &["acp", "--setup"],
        "openrouter\nnew/model\n\n",
    );
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.contains("max_turns: 7") && text.contains("new/model"),
        "{out}{text}"
    );
    assert!(!text.contains("old") && !text.contains("webhook"), "{text}");
}

/// A Hermes home a user moves in from: a model, a webhook route, the API server.
fn fake_hermes_home() -> tempfile::TempDir {
    let hermes = tempfile::tempdir().unwrap();
    let config = format!(
        "model:\n  default: hermes-model\n  base_url: http://127.0.0.1:9/v1\n{}        from-hermes:\n          deliver: log\n  api_server:\n    enabled: true\n    extra:\n      host: 127.0.0.1\n      port: 0\n      key: k3y-0123456789abcdef-hermes\n",
        config_with_routes("")
    );
    std::fs::write(hermes.path().join("config.yaml"), config).unwrap();
    hermes
}

/// `herald gateway run` with `env`, its stdout lines up to the webhook's listening line
/// (or its exit), and the process (still running when it listens).
fn gateway_run(
    home: &std::path::Path,
    env: &[(&str, &std::path::Path)],
) -> (Vec<String>, std::process::Child) {
    use std::io::BufRead;
    let mut cmd = Command::new(BIN);
    cmd.args(["gateway", "run"])
        .env("HERALD_HOME", home)
        .env_remove("RUST_LOG")
        .env_remove("WEBHOOK_ENABLED")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    for line in reader.lines() {
        let line = line.unwrap();
        let done = line.starts_with("herald: webhook listening on");
        lines.push(line);
        if done {
            break;
        }
    }
    (lines, child)
}

#[test]
fn a_hermes_user_who_starts_first_then_migrates_gets_the_hermes_config() {
    let hermes = fake_hermes_home();
    let parent = tempfile::tempdir().unwrap();
    let home = parent.path().join("herald-home");
    // README's first command first: it says what to run, writes nothing, serves nothing.
    let (lines, mut child) = gateway_run(&home, &[("HERMES_HOME", hermes.path())]);
    let code = wait_timeout(&mut child, std::time::Duration::from_secs(10));
    let _ = child.kill();
    let text = lines.join("\n");
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("found a Hermes home"), "{text}");
    assert!(text.contains("herald setup --from-hermes"), "{text}");
    assert!(!text.contains("listening"), "{text}");
    assert!(!home.exists(), "nothing is written before the migration");
    // Then the migration brings the Hermes config over.
    let out = Command::new(BIN)
        .args(["setup", "--from-hermes"])
        .env("HERALD_HOME", &home)
        .env("HERMES_HOME", hermes.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("Carried:\n  config.yaml\n"), "{report}");
    // And the next start serves the Hermes route, model and API server.
    let (lines, mut child) = gateway_run(&home, &[("HERMES_HOME", hermes.path())]);
    let _ = child.kill();
    let _ = child.wait();
    let text = lines.join("\n");
    assert!(text.contains("(routes: 1)"), "{text}");
    assert!(text.contains("OpenAI-compatible API listening"), "{text}");
    assert!(!text.contains("wrote a default configuration"), "{text}");
    let config = std::fs::read_to_string(home.join("config.yaml")).unwrap();
    assert!(config.contains("hermes-model"), "{config}");
}

#[test]
fn the_migration_installs_herald_skills_beside_the_hermes_ones_never_over_them() {
    let hermes = fake_hermes_home();
    let skills = hermes.path().join("skills");
    std::fs::create_dir_all(skills.join("github-code-review")).unwrap();
    std::fs::create_dir_all(skills.join("mine")).unwrap();
    std::fs::write(skills.join(".usage.json"), "{}").unwrap();
    std::fs::write(
        skills.join("github-code-review/SKILL.md"),
        "# my own review",
    )
    .unwrap();
    std::fs::write(skills.join("mine/SKILL.md"), "# mine").unwrap();
    let parent = tempfile::tempdir().unwrap();
    let home = parent.path().join("herald-home");
    let out = Command::new(BIN)
        .args(["setup", "--from-hermes"])
        .env("HERALD_HOME", &home)
        .env("HERMES_HOME", hermes.path())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    let read = |p: &str| std::fs::read_to_string(home.join("skills").join(p)).unwrap();
    assert!(
        read("webhook-subscriptions/SKILL.md").contains("herald webhook subscribe"),
        "herald's skill is installed beside the migrated ones"
    );
    assert_eq!(read("github-code-review/SKILL.md"), "# my own review");
    assert_eq!(read("mine/SKILL.md"), "# mine");
    assert_eq!(read(".usage.json"), "{}");
    assert!(
        report.contains("  skills/webhook-subscriptions (a skill herald ships"),
        "{report}"
    );
    assert!(
        report.contains(
            "  skills/github-code-review (herald's skill of that name: the migrated one is kept)"
        ),
        "{report}"
    );
    let left: Vec<_> = std::fs::read_dir(&home)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !left.iter().any(|n| n.contains("bundled")),
        "no staging folder is left: {left:?}"
    );
}

/// What a Hermes home leaves behind is said by the migration and by `config check`:
/// routes whose toolsets herald lacks (all of them: no tools at all), MCP servers
/// webhook runs go without, a skill herald added that a route names, and the ports
/// Hermes's gateway holds.
#[test]
fn the_migration_report_and_config_check_name_what_a_hermes_home_loses() {
    // Stands for Hermes's gateway, still serving the webhook port.
    let hermes_gateway = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = hermes_gateway.local_addr().unwrap().port();
    let hermes = tempfile::tempdir().unwrap();
    let config = format!(
        "model:\n  default: m\n  base_url: http://127.0.0.1:9/v1\nmcp_servers:\n  docs:\n    command: /nonexistent/docs\nplatforms:\n  webhook:\n    enabled: true\n    extra:\n      host: 127.0.0.1\n      port: {port}\n      secret: s3cret-0123456789\n      routes:\n        trusted:\n          prompt: run it\n          deliver: log\n          toolsets: [code_execution]\n        mixed:\n          prompt: look\n          deliver: log\n          toolsets: [terminal, browser]\n        review:\n          prompt: review\n          deliver: log\n          skills: [github-code-review]\n"
    );
    std::fs::write(hermes.path().join("config.yaml"), config).unwrap();
    let parent = tempfile::tempdir().unwrap();
    let home = parent.path().join("herald-home");
    let out = Command::new(BIN)
        .args(["setup", "--from-hermes", hermes.path().to_str().unwrap()])
        .env("HERALD_HOME", &home)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{report}");
    let findings = report.split("Findings:\n").nth(1).unwrap_or_default();
    for needle in [
        "route `trusted` names toolsets herald does not have: `code_execution` (execute_code is not in herald yet); its runs have no tools at all",
        "route `mixed` names toolsets herald does not have: `browser` (the ten browser_* tools need a browser; a later release brings them); its runs go without them",
        "route `review` names the skill `github-code-review`, which the Hermes home did not have",
        "MCP servers docs are not offered to the webhook runs of routes trusted, mixed, review",
        &format!("Hermes's gateway serves webhooks on {port} from the same settings"),
    ] {
        assert!(findings.contains(needle), "{needle}\n{report}");
    }
    let kept = std::fs::read_to_string(home.join("hermes-migration.txt")).unwrap();
    assert!(kept.contains("route `trusted` names toolsets"), "{kept}");

    let check = Command::new(BIN)
        .args(["config", "check"])
        .env("HERALD_HOME", &home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(1), "{text}");
    for needle in [
        "finding: route `trusted` names toolsets herald does not have: `code_execution`",
        "finding: route `mixed` names toolsets herald does not have: `browser`",
        &format!(
            "finding: port {port} (`platforms.webhook.extra.port`) is taken by another program"
        ),
        "note: MCP servers docs are not offered to the webhook runs of routes",
    ] {
        assert!(text.contains(needle), "{needle}\n{text}");
    }
    // Once Hermes's gateway is stopped, the port is no finding.
    drop(hermes_gateway);
    let check = Command::new(BIN)
        .args(["config", "check"])
        .env("HERALD_HOME", &home)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout);
    assert!(!text.contains("is taken by another program"), "{text}");
}

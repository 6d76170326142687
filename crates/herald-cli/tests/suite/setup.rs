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

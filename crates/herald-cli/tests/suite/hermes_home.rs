//! A Hermes home built by Hermes 0.19.0 itself: `hermes chat -q` against the fake
//! provider writes its sessions into its own `state.db`, a memory through its memory
//! tool and a job through its cronjob tool, and Hermes's own code routes a Telegram chat
//! to the first session. Then `herald setup --from-hermes`, and herald continues it all.

use super::first_contact::list_tree;
use super::plugins::hermes_python;
use super::support::*;
use super::telegram::WAIT;
use herald_test_support::telegram::{FakeTelegram, TOKEN};
use herald_test_support::{FakeProvider, Scripted};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const MEMORY_CALL: &str =
    r#"{"action":"add","target":"memory","content":"The user's project is called Lighthouse."}"#;
const CRON_CALL: &str =
    r#"{"action":"create","prompt":"Summarise the day","schedule":"every 1m","name":"digest"}"#;

/// Runs `hermes chat -q TEXT` on the Hermes home `home`; its stdout.
fn hermes_chat(home: &Path, text: &str) -> String {
    let (python, path) = hermes_python();
    let mut cmd = Command::new(python);
    cmd.args([
        "-c",
        "import sys; from hermes_cli.main import main; sys.argv[0] = 'hermes'; sys.exit(main())",
    ])
    .args(["chat", "-q", text])
    .env("HERMES_HOME", home)
    // Hermes reaches no one but the fake provider.
    .env("HTTPS_PROXY", "http://127.0.0.1:9")
    .env("NO_PROXY", "127.0.0.1,localhost")
    .env("OPENAI_API_KEY", "sk-fake");
    if let Some(p) = path {
        cmd.env("PYTHONPATH", p);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Has Hermes's own code route Telegram user 42's DM to the home's first session; its id.
fn hermes_routes_a_chat(home: &Path) -> String {
    let (python, path) = hermes_python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hermes/route_chat.py");
    let mut cmd = Command::new(python);
    cmd.arg(script).arg(home).env("HERMES_HOME", home);
    if let Some(p) = path {
        cmd.env("PYTHONPATH", p);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The text of every message of a provider request, and its system message.
fn texts_of(request: &herald_test_support::Request) -> (Vec<String>, String) {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let text = |m: &serde_json::Value| m["content"].as_str().unwrap_or_default().to_owned();
    let system = messages
        .iter()
        .find(|m| m["role"] == "system")
        .map(text)
        .unwrap_or_default();
    (messages.iter().map(text).collect(), system)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_home_hermes_built_continues_in_herald_with_its_sessions_memory_and_chats() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("m1", "memory", MEMORY_CALL)]),
        Scripted::text("Noted."),
        Scripted::tool_calls(&[("c1", "cronjob", CRON_CALL)]),
        Scripted::text("Scheduled."),
    ]);
    let tg = FakeTelegram::start();
    let hermes = tempfile::tempdir().unwrap();
    let h = hermes.path();
    let config = format!(
        "model:\n  default: fake-model\n  provider: custom\n  base_url: {}\nplatforms:\n  telegram:\n    enabled: true\n    extra:\n      base_url: {}\n  webhook:\n    enabled: true\n    extra:\n      host: 127.0.0.1\n      port: 0\n      secret: s3cret-0123456789abcdef\n",
        provider.base_url, tg.base_url
    );
    std::fs::write(h.join("config.yaml"), config).unwrap();
    std::fs::write(
        h.join(".env"),
        format!("TELEGRAM_BOT_TOKEN={TOKEN}\nTELEGRAM_ALLOWED_USERS=42\n"),
    )
    .unwrap();
    hermes_chat(h, "Remember that my project is called Lighthouse");
    hermes_chat(h, "Every minute, summarise the day");
    let first = hermes_routes_a_chat(h);
    assert!(
        std::fs::read_to_string(h.join("memories/MEMORY.md"))
            .unwrap()
            .contains("Lighthouse")
    );
    let before = list_tree(h);

    let home = tempfile::tempdir().unwrap();
    let (code, report, err) = run_cli(
        home.path(),
        &["setup", "--from-hermes", h.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{report}{err}");
    assert!(report.contains("  memories/MEMORY.md\n"), "{report}");
    assert!(
        report.contains("state.db: 2 sessions with 8 messages into herald's session store"),
        "{report}"
    );
    assert!(
        report.contains("gateway_routing: 1 chats (session key to session)"),
        "{report}"
    );
    assert!(report.contains("  logs: Hermes's own logs"), "{report}");
    assert!(
        report.contains("cron/jobs.json: 1 scheduled jobs run by herald's scheduler, each tick once through the inbox: digest (every 1m)"),
        "{report}"
    );
    assert_eq!(list_tree(h), before, "the Hermes home is untouched");

    // `herald chat -c` continues the latest CLI session, with the memory in its prompt.
    provider.push(Scripted::text("Lighthouse."));
    let (code, out, err) = run_cli(home.path(), &["chat", "-c", "-q", "What is my project?"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Lighthouse."), "{out}");
    let requests = provider.requests();
    let (texts, system) = texts_of(requests.last().unwrap());
    assert!(
        system.contains("The user's project is called Lighthouse."),
        "{system}"
    );
    assert!(
        texts.iter().any(|t| t == "Every minute, summarise the day"),
        "{texts:?}"
    );
    assert!(texts.iter().any(|t| t == "Scheduled."), "{texts:?}");
    assert!(
        !texts.iter().any(|t| t.contains("Remember that")),
        "{texts:?}"
    );

    // `--resume` takes the first one, its tool call and result with it.
    provider.push(Scripted::text("Still Lighthouse."));
    let (code, out, err) = run_cli(
        home.path(),
        &["chat", "--resume", &first, "-q", "And again?"],
    );
    assert_eq!(code, 0, "{out}{err}");
    let requests = provider.requests();
    let body = &requests.last().unwrap().body;
    let (texts, _) = texts_of(requests.last().unwrap());
    assert!(
        texts
            .iter()
            .any(|t| t == "Remember that my project is called Lighthouse"),
        "{texts:?}"
    );
    let called = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["tool_calls"][0]["function"]["name"] == "memory");
    assert!(called, "{body}");

    // The imported sessions are in the search index.
    let search = r#"{"query": "Lighthouse"}"#;
    provider.push(Scripted::tool_calls(&[("q1", "session_search", search)]));
    provider.push(Scripted::text("Found it."));
    let (code, out, err) = run_cli(home.path(), &["chat", "-q", "Where did I mention it?"]);
    assert_eq!(code, 0, "{out}{err}");
    let requests = provider.requests();
    let found = requests.last().unwrap().body["messages"].to_string();
    assert!(
        found.contains(&first),
        "the Hermes session is found: {found}"
    );

    // Importing again adds nothing.
    let (code, again, err) = run_cli(
        home.path(),
        &["setup", "--from-hermes", h.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{again}{err}");
    assert!(
        again.contains("state.db: 2 sessions imported before"),
        "{again}"
    );
    assert!(
        again.contains("state.db: 0 sessions with 0 messages"),
        "{again}"
    );

    // The routed Telegram chat continues in the session Hermes had it in.
    provider.push(Scripted::text("Yes, Lighthouse."));
    // The job Hermes's cronjob tool made fires on its schedule (a minute after it was
    // made) and its answer is delivered.
    provider.push_when(
        "Nobody is there to answer questions or approve commands",
        Scripted::text("Digest: all quiet."),
    );
    let home_path = home.path().to_path_buf();
    let herald = Herald::start_in(home, &[]);
    tg.dm(42, "Are you still there?");
    assert_eq!(tg.wait_texts(42, 1, WAIT), ["Yes, Lighthouse."]);
    let requests = provider.requests();
    let (texts, _) = texts_of(requests.last().unwrap());
    assert!(
        texts
            .iter()
            .any(|t| t == "Remember that my project is called Lighthouse"),
        "{texts:?} {}",
        herald.log()
    );
    assert!(
        texts.iter().any(|t| t == "Are you still there?"),
        "{texts:?}"
    );
    let delivered = wait_for(Duration::from_secs(120), "the scheduled job's run", || {
        let (_, out, _) = run_cli(&home_path, &["inbox", "list"]);
        out.lines()
            .any(|l| l.contains("schedule:") && l.contains("delivered"))
            .then_some(out)
    })
    .await;
    assert_eq!(delivered.matches("schedule:").count(), 1, "{delivered}");
    let ran = provider
        .requests()
        .iter()
        .any(|r| texts_of(r).0.iter().any(|t| t == "Summarise the day"));
    assert!(ran, "{}", herald.log());
    assert!(
        herald.log().contains("Digest: all quiet."),
        "{}",
        herald.log()
    );
}

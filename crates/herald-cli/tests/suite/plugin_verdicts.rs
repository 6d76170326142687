//! Issue 43: a plugin's `pre_tool_call` directives as Hermes 0.19.0 reads them, on every
//! door, and the tool-call pipeline in the middleware seed's order (arguments aligned
//! to the schema, then `tool_request`, then on its output the verdict, the guardrails
//! and `tool.started`).

use super::acp::{Seen, initialized_session, text, with_agent};
use super::plugins::install_plugins;
use super::rpc::{Piped, rpc_home};
use super::support::BIN;
use agent_client_protocol::Agent;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{PromptRequest, StopReason};
use herald_test_support::{FakeProvider, Scripted};
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

/// A home whose terminal runs in `work`, with the `approving` test plugin.
fn home_with_plugin(provider: &FakeProvider, work: &Path) -> tempfile::TempDir {
    let home = rpc_home(
        &provider.base_url,
        &format!("terminal:\n  cwd: {}\n", work.display()),
    );
    install_plugins(home.path(), &["approving"]);
    home
}

/// What the plugin's first `pre_tool_call` hook saw, a line per call.
fn pre_tool_args(home: &Path) -> Vec<Value> {
    std::fs::read_to_string(home.join("pre_tool.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["args"].clone())
        .collect()
}

#[test]
fn an_approval_a_plugin_asks_for_is_denied_where_nobody_can_answer() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[
            ("a1", "terminal", r#"{"command": "touch ask-me"}"#),
            (
                "a2",
                "terminal",
                r#"{"command": "touch REWRITE", "timeout": "5"}"#,
            ),
        ]),
        Scripted::text("Done."),
    ]);
    let work = tempfile::tempdir().unwrap();
    let home = home_with_plugin(&provider, work.path());
    let out = Command::new(BIN)
        .args(["-v", "chat", "-Q", "-q", "go"])
        .env("HERALD_HOME", home.path())
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let results = provider.requests()[1].body["messages"].to_string();
    assert!(
        results.contains("requires approval") && results.contains("the policy asks a human"),
        "{results}"
    );
    assert!(
        !results.contains("a later block never wins"),
        "the first valid directive wins: {results}"
    );
    assert!(!work.path().join("ask-me").exists(), "it ran unasked");
    assert!(
        err.contains("nobody can answer here"),
        "the denial is logged: {err}"
    );
    // The rewrite of tool_request is what ran, and the aligned arguments what the
    // hooks saw ("5" for an integer became 5).
    assert!(work.path().join("rewritten").exists());
    assert!(!work.path().join("REWRITE").exists());
    let seen = pre_tool_args(home.path());
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[1]["command"], "touch rewritten");
    assert_eq!(seen[1]["timeout"], 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_puts_a_plugins_approval_to_its_client_and_shows_the_rewritten_call() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("r1", "terminal", r#"{"command": "touch ask-me-REWRITE"}"#)]),
        Scripted::text("Done."),
        Scripted::tool_calls(&[("r2", "terminal", r#"{"command": "touch ask-me-again"}"#)]),
        Scripted::text("Done again."),
    ]);
    let work = tempfile::tempdir().unwrap();
    let home = home_with_plugin(&provider, work.path());
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    c.call("prompt.submit", json!({"session_id": sid, "text": "go"}))
        .await;
    let asked = c.until("approval.request").await;
    assert!(
        !asked.iter().any(|e| e["type"] == "tool.start"),
        "a call starts only once it may run: {asked:?}"
    );
    let request = &asked.last().unwrap()["payload"];
    assert_eq!(request["command"], "<terminal> (plugin approval rule)");
    assert_eq!(request["description"], "the policy asks a human");
    assert_eq!(request["pattern_key"], "plugin_rule:asker");
    c.call(
        "approval.respond",
        json!({"session_id": sid, "choice": "session"}),
    )
    .await;
    let rest = c.until("message.complete").await;
    let start = rest.iter().find(|e| e["type"] == "tool.start").unwrap();
    let shown: Value =
        serde_json::from_str(start["payload"]["args_text"].as_str().unwrap()).unwrap();
    assert_eq!(shown["command"], "touch ask-me-rewritten", "{start}");
    assert!(work.path().join("ask-me-rewritten").exists());
    // The session answer covers the rule's key: the next call is not asked about.
    c.call("prompt.submit", json!({"session_id": sid, "text": "again"}))
        .await;
    let rest = c.until("message.complete").await;
    assert!(
        !rest.iter().any(|e| e["type"] == "approval.request"),
        "{rest:?}"
    );
    assert!(work.path().join("ask-me-again").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_asks_its_client_and_a_denial_keeps_the_call_from_running() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("p1", "terminal", r#"{"command": "touch ask-me"}"#)]),
        Scripted::text("Not done."),
    ]);
    let work = tempfile::tempdir().unwrap();
    let home = home_with_plugin(&provider, work.path());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let cwd = work.path().to_path_buf();
    with_agent(
        home.path(),
        vec!["deny"],
        seen.clone(),
        async move |cx: ConnectionTo<Agent>| {
            let session = initialized_session(&cx, cwd).await?;
            let r = cx
                .send_request(PromptRequest::new(session, text("go")))
                .block_task()
                .await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
            Ok(())
        },
    )
    .await;
    let asked = seen.lock().unwrap().asked.len();
    assert_eq!(asked, 1, "the client was asked");
    assert!(
        !work.path().join("ask-me").exists(),
        "denied, it did not run"
    );
    let results = provider.requests()[1].body["messages"].to_string();
    assert!(results.contains("not given"), "{results}");
}

/// What the lifecycle test plugin recorded.
fn lifecycle(home: &Path) -> Vec<Value> {
    std::fs::read_to_string(home.join("lifecycle.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn chat_once(home: &Path) -> (bool, String) {
    let out = Command::new(BIN)
        .args(["chat", "-Q", "-q", "hi"])
        .env("HERALD_HOME", home)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn session_hooks_fire_when_hermes_fires_them_and_the_answer_reads_as_an_object() {
    let provider = FakeProvider::start(vec![Scripted::text("Hello there.")]);
    let home = rpc_home(&provider.base_url, "");
    install_plugins(home.path(), &["lifecycle"]);
    let (ok, err) = chat_once(home.path());
    assert!(ok, "{err}");
    let seen = lifecycle(home.path());
    let hooks: Vec<&str> = seen.iter().map(|e| e["hook"].as_str().unwrap()).collect();
    assert_eq!(
        hooks,
        ["post_api_request", "on_session_end", "on_session_finalize"],
        "{seen:?}"
    );
    assert_eq!(seen[0]["content"], "Hello there.");
    assert_eq!(seen[0]["as_key"], "Hello there.");
    assert_eq!(seen[0]["finish_reason"], "stop");
    assert_eq!(seen[0]["usage_is_set"], true);
    assert_eq!(seen[1]["completed"], true);
    assert_eq!(seen[2]["reason"], "shutdown");
    assert_eq!(seen[2]["platform"], "cli");
    assert!(
        seen[2]["session_id"]
            .as_str()
            .is_some_and(|s| !s.is_empty())
    );

    // A turn that dies on a provider error ends no session (Hermes does not fire
    // on_session_end there); the session is still finalized at exit.
    let failing = FakeProvider::start(vec![Scripted::Status(400, "bad request".into())]);
    let home = rpc_home(&failing.base_url, "");
    install_plugins(home.path(), &["lifecycle"]);
    let (ok, _) = chat_once(home.path());
    assert!(!ok);
    let hooks: Vec<String> = lifecycle(home.path())
        .iter()
        .map(|e| e["hook"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(hooks, ["on_session_finalize"]);
}

#[test]
fn a_plugins_error_records_reach_the_log_at_their_level_without_verbose() {
    let provider = FakeProvider::start(vec![Scripted::text("Hi.")]);
    let home = rpc_home(&provider.base_url, "");
    install_plugins(home.path(), &["loud"]);
    let (ok, err) = chat_once(home.path());
    assert!(ok, "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("guard initialization failed"))
        .unwrap_or_else(|| panic!("the ERROR record is not in the log: {err}"));
    assert!(
        line.contains("ERROR") && line.contains("loud.guard"),
        "{line}"
    );
    assert!(
        !err.contains("starting the guard"),
        "INFO stays at DEBUG: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_yolo_answers_a_plugins_approval_request_until_it_is_switched_off() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("y1", "terminal", r#"{"command": "touch ask-me-1"}"#)]),
        Scripted::text("Done."),
        Scripted::tool_calls(&[("y2", "terminal", r#"{"command": "touch ask-me-2"}"#)]),
        Scripted::text("Not done."),
    ]);
    let work = tempfile::tempdir().unwrap();
    let home = home_with_plugin(&provider, work.path());
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    let on = c
        .call("slash.exec", json!({"session_id": sid, "command": "/yolo"}))
        .await;
    assert!(on.to_string().contains("YOLO mode on"), "{on}");
    c.call("prompt.submit", json!({"session_id": sid, "text": "one"}))
        .await;
    let events = c.until("message.complete").await;
    assert!(
        !events.iter().any(|e| e["type"] == "approval.request"),
        "{events:?}"
    );
    assert!(work.path().join("ask-me-1").exists());
    let off = c
        .call("slash.exec", json!({"session_id": sid, "command": "/yolo"}))
        .await;
    assert!(off.to_string().contains("YOLO mode off"), "{off}");
    c.call("prompt.submit", json!({"session_id": sid, "text": "two"}))
        .await;
    c.until("approval.request").await;
    c.call(
        "approval.respond",
        json!({"session_id": sid, "choice": "deny"}),
    )
    .await;
    c.until("message.complete").await;
    assert!(!work.path().join("ask-me-2").exists());
}

/// The runs API of a gateway whose home has the `approving` plugin: a run waits for
/// the approval its plugin asks for and runs once it is answered over HTTP; a chat
/// completion and a webhook run, which nobody can answer for, are denied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runs_api_waits_for_a_plugins_approval_chat_completions_and_webhook_runs_deny_it() {
    use super::always::{api, bases, run_waiting_for_approval};
    use super::api::KEY;
    use super::support::{Herald, http_client, wait_for};
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("w1", "terminal", r#"{"command": "touch ask-me-run"}"#)]),
        Scripted::text("Ran."),
        Scripted::tool_calls(&[("w2", "terminal", r#"{"command": "touch ask-me-chat"}"#)]),
        Scripted::text("Not run."),
        Scripted::tool_calls(&[("w3", "terminal", r#"{"command": "touch ask-me-hook"}"#)]),
        Scripted::text("Not run either."),
    ]);
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "model:\n  default: fake-model\n  base_url: {}\nagent:\n  api_max_retries: 1\nterminal:\n  cwd: {}\n{}  api_server:\n    enabled: true\n    extra:\n      port: 0\n      key: {KEY}\n",
            provider.base_url,
            work.path().display(),
            super::support::config_with_routes(
                "        r:\n          prompt: 'go'\n          deliver: log\n          toolsets: [terminal]\n"
            ),
        ),
    )
    .unwrap();
    install_plugins(home.path(), &["approving"]);
    let h = Herald::start_in(home, &[]);
    let (base, hook) = bases(&h).await;
    let run = run_waiting_for_approval(&base, "go").await;
    let answer = Some(json!({"choice": "once"}));
    let resolved = api("POST", format!("{base}/v1/runs/{run}/approval"), answer).await;
    assert_eq!(resolved["resolved"], 1, "{resolved}");
    wait_for(
        std::time::Duration::from_secs(20),
        "the approved call",
        || work.path().join("ask-me-run").exists().then_some(()),
    )
    .await;
    let chat = json!({"model": "fake-model", "messages": [{"role": "user", "content": "go"}]});
    let answer = api("POST", format!("{base}/v1/chat/completions"), Some(chat)).await;
    assert_eq!(
        answer["choices"][0]["message"]["content"], "Not run.",
        "{answer}"
    );
    assert!(
        !work.path().join("ask-me-chat").exists(),
        "nobody to ask: denied"
    );
    let results = provider.requests()[3].body["messages"].to_string();
    assert!(results.contains("requires approval"), "{results}");
    // A webhook run: nobody to ask, denied.
    let body = r#"{"what": "x"}"#;
    let status = http_client(std::time::Duration::from_secs(10))
        .post(format!("{hook}/webhooks/r"))
        .header("x-github-event", "push")
        .header(
            "x-hub-signature-256",
            herald_webhook::verify::sign::github(super::support::SECRET, body.as_bytes()),
        )
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 202);
    let second = wait_for(
        std::time::Duration::from_secs(15),
        "the webhook run's second call",
        || provider.requests().get(5).cloned(),
    )
    .await;
    let results = second.body["messages"].to_string();
    assert!(results.contains("requires approval"), "{results}");
    assert!(
        !work.path().join("ask-me-hook").exists(),
        "the webhook run ran it"
    );
}

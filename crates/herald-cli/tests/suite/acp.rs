//! `herald acp` driven by an ACP client: the `agent-client-protocol` crate's client side
//! spawning the real binary, against the fake provider.

use super::rpc::rpc_home;
use super::support::{BIN, run_cli};
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AuthenticateRequest, CancelNotification, ContentBlock, InitializeRequest, ListSessionsRequest,
    LoadSessionRequest, NewSessionRequest, PromptRequest, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, ResumeSessionRequest,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionModeRequest, StopReason, TextContent, ToolCall, ToolCallContent, ToolCallStatus,
    ToolCallUpdate, ToolKind,
};
use agent_client_protocol::{AcpAgent, AcpAgentConfig, Agent, Client};
use herald_test_support::{FakeProvider, Scripted};
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the client saw: updates in order, and the permission requests it answered.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) updates: Vec<SessionUpdate>,
    pub(super) asked: Vec<RequestPermissionRequest>,
}

fn agent(home: &Path) -> AcpAgent {
    AcpAgent::new(
        AcpAgentConfig::new(BIN)
            .arg("acp")
            .env("HERALD_HOME", home.display().to_string())
            .env("RUST_LOG", "warn"),
    )
}

pub(super) fn text(t: &str) -> Vec<ContentBlock> {
    vec![ContentBlock::Text(TextContent::new(t))]
}

/// Runs `body` against `herald acp` on `home`; `answers` are the option ids chosen for
/// permission requests, in order.
pub(super) async fn with_agent(
    home: &Path,
    answers: Vec<&'static str>,
    seen: Arc<Mutex<Seen>>,
    body: impl AsyncFnOnce(ConnectionTo<Agent>) -> agent_client_protocol::Result<()>,
) {
    let answers = Arc::new(Mutex::new(answers.into_iter()));
    let (s1, s2) = (seen.clone(), seen);
    let run = Client
        .v1()
        .on_receive_notification(
            async move |n: SessionNotification, _cx| {
                s1.lock().unwrap().updates.push(n.update);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                let choice = answers.lock().unwrap().next().unwrap_or("deny");
                s2.lock().unwrap().asked.push(request);
                responder.respond(RequestPermissionResponse::new(
                    RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(choice)),
                ))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(agent(home), body);
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the ACP session took too long")
        .expect("the ACP session failed");
}

/// Initializes the connection and opens a session in `cwd`; its id.
pub(super) async fn initialized_session(
    cx: &ConnectionTo<Agent>,
    cwd: std::path::PathBuf,
) -> agent_client_protocol::Result<agent_client_protocol::v1::schema::SessionId> {
    cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
        .block_task()
        .await?;
    Ok(cx
        .send_request(NewSessionRequest::new(cwd))
        .block_task()
        .await?
        .session_id)
}

fn tool_starts(updates: &[SessionUpdate]) -> Vec<ToolCall> {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCall(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

fn tool_ends(updates: &[SessionUpdate]) -> Vec<ToolCallUpdate> {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::ToolCallUpdate(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

fn agent_text(updates: &[SessionUpdate]) -> String {
    updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::AgentMessageChunk(c) => match &c.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acp_client_initializes_prompts_approves_and_cancels() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("acp-doomed.txt"), "x").unwrap();
    std::fs::write(dir.path().join("acp-kept.txt"), "x").unwrap();
    let provider = FakeProvider::start(vec![
        Scripted::Events(Scripted::text_events(&["Hel", "lo."])),
        Scripted::tool_calls(&[("c1", "terminal", r#"{"command": "rm -f acp-doomed.txt"}"#)]),
        Scripted::text("Removed."),
        Scripted::tool_calls(&[("c2", "terminal", r#"{"command": "rm -f acp-kept.txt"}"#)]),
        Scripted::text("Left it."),
        Scripted::tool_calls(&[("c3", "terminal", r#"{"command": "sleep 30"}"#)]),
        Scripted::text("Faster."),
    ]);
    let home = rpc_home(
        &provider.base_url,
        &format!("terminal:\n  cwd: {}\n", dir.path().display()),
    );
    let seen = Arc::new(Mutex::new(Seen::default()));
    let cwd = dir.path().to_path_buf();
    let stored = Arc::new(Mutex::new(String::new()));
    let keep = stored.clone();
    let watch = seen.clone();
    with_agent(
        home.path(),
        vec!["allow_once", "deny"],
        seen.clone(),
        async move |cx: ConnectionTo<Agent>| {
            let init = cx
                .send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            assert_eq!(init.protocol_version, ProtocolVersion::V1);
            assert_eq!(init.agent_info.as_ref().unwrap().name, "hermes-agent");
            assert!(init.agent_capabilities.load_session);
            let ids: Vec<String> = init
                .auth_methods
                .iter()
                .map(|m| m.id().to_string())
                .collect();
            assert!(ids.contains(&"hermes-setup".to_owned()), "{ids:?}");
            assert!(
                cx.send_request(AuthenticateRequest::new("HERMES-SETUP"))
                    .block_task()
                    .await
                    .is_ok()
            );
            // Not an authentication: a null result, as Hermes answers it.
            let nonsense = raw(&cx, "authenticate", json!({"methodId": "nonsense"})).await?;
            assert!(nonsense.is_null(), "{nonsense}");
            let session = cx
                .send_request(NewSessionRequest::new(cwd.clone()))
                .block_task()
                .await?
                .session_id;
            *keep.lock().unwrap() = session.to_string();
            let r = cx
                .send_request(PromptRequest::new(session.clone(), text("hi")))
                .block_task()
                .await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
            let r = cx
                .send_request(PromptRequest::new(session.clone(), text("clean")))
                .block_task()
                .await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
            let r = cx
                .send_request(PromptRequest::new(session.clone(), text("clean more")))
                .block_task()
                .await?;
            assert_eq!(
                r.stop_reason,
                StopReason::EndTurn,
                "a denied command is an error result, the turn goes on"
            );
            let empty = cx
                .send_request(PromptRequest::new(session.clone(), vec![]))
                .block_task()
                .await?;
            assert_eq!(empty.stop_reason, StopReason::EndTurn);
            let unknown = cx
                .send_request(PromptRequest::new("no-such-session", text("x")))
                .block_task()
                .await?;
            assert_eq!(unknown.stop_reason, StopReason::Refusal);
            // Cancel mid-tool.
            let pending = cx.send_request(PromptRequest::new(session.clone(), text("wait")));
            let started = std::time::Instant::now();
            loop {
                let running = watch
                    .lock()
                    .unwrap()
                    .updates
                    .iter()
                    .filter(
                        |u| matches!(u, SessionUpdate::ToolCall(t) if t.title.contains("sleep")),
                    )
                    .count();
                if running > 0 {
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "the sleep never started"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            cx.send_notification(CancelNotification::new(session.clone()))?;
            let r = pending.block_task().await?;
            assert_eq!(r.stop_reason, StopReason::Cancelled);
            assert!(started.elapsed() < Duration::from_secs(15));
            // An idle /steer sends the interrupted prompt again with the guidance.
            let r = cx
                .send_request(PromptRequest::new(session.clone(), text("/steer be quick")))
                .block_task()
                .await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
            Ok(())
        },
    )
    .await;
    {
        let seen = seen.lock().unwrap();
        assert!(
            agent_text(&seen.updates).starts_with("Hello.Removed."),
            "{:?}",
            agent_text(&seen.updates)
        );
        let starts = tool_starts(&seen.updates);
        assert_eq!(starts.len(), 3);
        assert_eq!(starts[0].kind, ToolKind::Execute);
        assert_eq!(starts[0].title, "$ rm -f acp-doomed.txt");
        assert!(starts[0].tool_call_id.to_string().starts_with("tc-"));
        let ends = tool_ends(&seen.updates);
        assert_eq!(
            ends[0].tool_call_id, starts[0].tool_call_id,
            "completions pair with starts"
        );
        assert_eq!(ends[0].fields.status, Some(ToolCallStatus::Completed));
        assert_eq!(seen.asked.len(), 2);
        let options: Vec<String> = seen.asked[0]
            .options
            .iter()
            .map(|o| o.option_id.to_string())
            .collect();
        assert_eq!(
            options,
            [
                "allow_once",
                "allow_session",
                "allow_always",
                "deny",
                "deny_always"
            ]
        );
        assert!(
            seen.asked[0]
                .tool_call
                .tool_call_id
                .to_string()
                .starts_with("perm-check-")
        );
        assert!(!dir.path().join("acp-doomed.txt").exists(), "allowed");
        assert!(dir.path().join("acp-kept.txt").exists(), "denied");
    }
    let resent = provider.requests().last().unwrap().body["messages"].to_string();
    assert!(
        resent.contains("wait\\n\\nUser correction/guidance after interrupt: be quick"),
        "{resent}"
    );
    // A new connection loads the session: its transcript comes back as updates.
    let id = stored.lock().unwrap().clone();
    let replayed = Arc::new(Mutex::new(Seen::default()));
    let cwd = dir.path().to_path_buf();
    with_agent(
        home.path(),
        vec![],
        replayed.clone(),
        async move |cx: ConnectionTo<Agent>| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            cx.send_request(LoadSessionRequest::new(id.clone(), cwd.clone()))
                .block_task()
                .await?;
            // The stored session is listed (by folder too); resume of an unknown id opens it.
            let listed = cx
                .send_request(ListSessionsRequest::new())
                .block_task()
                .await?;
            assert!(
                listed
                    .sessions
                    .iter()
                    .any(|s| s.session_id.to_string() == id),
                "{listed:?}"
            );
            let here = cx
                .send_request(ListSessionsRequest::new().cwd(cwd.clone()))
                .block_task()
                .await?;
            assert_eq!(here.sessions.len(), 1, "{here:?}");
            let when = here.sessions[0].updated_at.clone().unwrap_or_default();
            assert!(
                when.parse::<jiff::Timestamp>().is_ok(),
                "updatedAt: {when:?}"
            );
            let nowhere = std::path::PathBuf::from("/nowhere");
            let elsewhere = cx
                .send_request(ListSessionsRequest::new().cwd(nowhere))
                .block_task()
                .await?;
            assert!(elsewhere.sessions.is_empty());
            cx.send_request(ResumeSessionRequest::new("fresh-one", cwd))
                .block_task()
                .await?;
            let r = cx
                .send_request(PromptRequest::new("fresh-one", vec![]))
                .block_task()
                .await?;
            assert_eq!(
                r.stop_reason,
                StopReason::EndTurn,
                "the resumed id is a live session"
            );
            Ok(())
        },
    )
    .await;
    let replayed = replayed.lock().unwrap();
    let users = replayed
        .updates
        .iter()
        .filter(|u| matches!(u, SessionUpdate::UserMessageChunk(_)))
        .count();
    assert!(
        users >= 3,
        "the user turns replayed: {}",
        replayed.updates.len()
    );
    assert!(agent_text(&replayed.updates).contains("Hello."));
}

#[test]
fn acp_check_says_ok_or_why_not_without_a_network_call() {
    let home = rpc_home("http://127.0.0.1:9/v1", "");
    let (code, out, err) = run_cli(home.path(), &["acp", "--check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("herald ACP check OK: model fake-model"),
        "{out}"
    );
    let remote = rpc_home("https://api.example.com/v1", "");
    let (code, _, err) = run_cli(remote.path(), &["acp", "--check"]);
    assert_eq!(code, 1);
    assert!(err.contains("no credential for provider"), "{err}");
    let broken = tempfile::tempdir().unwrap();
    std::fs::write(broken.path().join("config.yaml"), "model: [unclosed\n").unwrap();
    let (code, _, err) = run_cli(broken.path(), &["acp", "--check"]);
    assert_eq!(code, 1);
    assert!(err.contains("herald ACP check failed"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slash_commands_are_answered_locally_and_a_busy_session_queues() {
    let provider = FakeProvider::start(vec![
        Scripted::Delayed(
            Duration::from_millis(800),
            Box::new(Scripted::text("First.")),
        ),
        Scripted::text("Second."),
        Scripted::text("On the large model."),
    ]);
    let home = rpc_home(&provider.base_url, "");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let cwd = home.path().to_path_buf();
    with_agent(
        home.path(),
        vec![],
        seen.clone(),
        async move |cx: ConnectionTo<Agent>| {
            let session = initialized_session(&cx, cwd).await?;
            for line in ["/version", "/help", "/model", "/tools"] {
                let r = cx
                    .send_request(PromptRequest::new(session.clone(), text(line)))
                    .block_task()
                    .await?;
                assert_eq!(r.stop_reason, StopReason::EndTurn, "{line}");
            }
            // A prompt sent while a turn runs is queued and answered at once.
            let first = cx.send_request(PromptRequest::new(session.clone(), text("one")));
            tokio::time::sleep(Duration::from_millis(300)).await;
            let queued = cx
                .send_request(PromptRequest::new(session.clone(), text("two")))
                .block_task()
                .await?;
            assert_eq!(queued.stop_reason, StopReason::EndTurn);
            assert_eq!(first.block_task().await?.stop_reason, StopReason::EndTurn);
            let r = cx
                .send_request(PromptRequest::new(
                    session.clone(),
                    text("/model fake-large"),
                ))
                .block_task()
                .await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
            cx.send_request(PromptRequest::new(session.clone(), text("which?")))
                .block_task()
                .await?;
            // A client that opens 40 sessions is never refused: past the cap the least
            // recently used idle one is closed, and a prompt to it reopens it.
            for _ in 0..40 {
                cx.send_request(NewSessionRequest::new(std::env::temp_dir()))
                    .block_task()
                    .await?;
            }
            let r = cx
                .send_request(PromptRequest::new(session.clone(), text("/help")))
                .block_task()
                .await?;
            assert_eq!(
                r.stop_reason,
                StopReason::EndTurn,
                "the first session reopened"
            );
            Ok(())
        },
    )
    .await;
    let seen = seen.lock().unwrap();
    let offered = seen.updates.iter().any(|u| matches!(u, SessionUpdate::AvailableCommandsUpdate(c) if c.available_commands.iter().any(|a| a.name == "model")));
    assert!(offered, "available_commands_update after session/new");
    let said = agent_text(&seen.updates);
    assert!(
        said.contains(&format!("herald {}", env!("CARGO_PKG_VERSION"))),
        "{said}"
    );
    // The one table's names (Hermes's registry: `/compact` is `/compress`'s alias).
    assert!(
        said.contains("/compress"),
        "help lists the commands: {said}"
    );
    assert!(
        said.contains("/stop") && !said.contains("/sethome"),
        "{said}"
    );
    assert!(said.contains("Model: fake-model"), "{said}");
    assert!(said.contains("terminal"), "{said}");
    assert!(
        said.contains("Queued for the next turn. (1 queued)"),
        "{said}"
    );
    assert!(
        said.contains("First.") && said.contains("Second."),
        "the queued prompt ran after: {said}"
    );
    assert!(said.contains("Model switched to fake-large"), "{said}");
    let requests = provider.requests();
    assert_eq!(requests.len(), 3, "slash commands made no model call");
    assert_eq!(requests[2].body["model"], "fake-large");
}

#[test]
fn the_official_python_acp_client_works() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("py-doomed.txt"), "x").unwrap();
    let provider = FakeProvider::start(vec![
        Scripted::text("Hello."),
        Scripted::tool_calls(&[("c1", "terminal", r#"{"command": "rm -f py-doomed.txt"}"#)]),
        Scripted::text("Removed."),
    ]);
    let home = rpc_home(
        &provider.base_url,
        &format!("terminal:\n  cwd: {}\n", dir.path().display()),
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/acp_client.py");
    let out = std::process::Command::new("python3")
        .args([
            script,
            BIN,
            &home.path().display().to_string(),
            &dir.path().display().to_string(),
        ])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("acp client ok"), "{stdout}");
}

/// A raw request (the spec's fields the crate's v1 types do not carry).
async fn raw(
    cx: &ConnectionTo<Agent>,
    method: &str,
    params: serde_json::Value,
) -> agent_client_protocol::Result<serde_json::Value> {
    cx.send_request(agent_client_protocol::UntypedMessage::new(method, params)?)
        .block_task()
        .await
}

fn diffs(content: &[ToolCallContent]) -> Vec<(Option<String>, String)> {
    content
        .iter()
        .filter_map(|c| match c {
            ToolCallContent::Diff(d) => Some((d.old_text.clone(), d.new_text.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_gate_edits_the_model_switches_and_a_fork_keeps_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[(
            "e1",
            "write_file",
            r#"{"path": "asked.txt", "content": "no\n"}"#,
        )]),
        Scripted::text("Denied."),
        Scripted::tool_calls(&[(
            "e2",
            "write_file",
            r#"{"path": "ws.txt", "content": "new\n"}"#,
        )]),
        Scripted::text("Wrote."),
        Scripted::tool_calls(&[(
            "e3",
            "patch",
            r#"{"path": "ws.txt", "old_string": "new", "new_string": "newer"}"#,
        )]),
        Scripted::text("Patched."),
        Scripted::text("Large."),
        Scripted::text("Forked."),
    ]);
    let home = rpc_home(
        &provider.base_url,
        "providers:\n  spare:\n    base_url: http://127.0.0.1:9/v1\n    default_model: spare-model\n",
    );
    let seen = Arc::new(Mutex::new(Seen::default()));
    let cwd = dir.path().to_path_buf();
    with_agent(
        home.path(),
        vec!["deny", "allow_once"],
        seen.clone(),
        async move |cx: ConnectionTo<Agent>| {
            cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task()
                .await?;
            // authenticate: a method id that is not one is a null result, as in Hermes.
            let nope = raw(&cx, "authenticate", json!({"methodId": "nope"})).await?;
            assert!(nope.is_null(), "{nope}");
            let setup = raw(&cx, "authenticate", json!({"methodId": " Hermes-Setup "})).await?;
            assert_eq!(setup, json!({}));
            let opened = raw(&cx, "session/new", json!({"cwd": cwd, "mcpServers": []})).await?;
            assert_eq!(opened["modes"]["currentModeId"], "default", "{opened}");
            let modes: Vec<&str> = opened["modes"]["availableModes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_str().unwrap())
                .collect();
            assert_eq!(modes, ["default", "accept_edits", "dont_ask"]);
            assert_eq!(opened["models"]["currentModelId"], "fake-model", "{opened}");
            let offered = opened["models"]["availableModels"].to_string();
            assert!(offered.contains("spare:spare-model"), "{offered}");
            let ids: Vec<&str> = opened["configOptions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o["id"].as_str().unwrap())
                .collect();
            assert_eq!(ids, ["edit_approval_policy", "model"]);
            let session = opened["sessionId"].as_str().unwrap().to_owned();
            let prompt = async |words: &str| {
                cx.send_request(PromptRequest::new(session.clone(), text(words)))
                    .block_task()
                    .await
            };
            // Mode `default`: the edit asks, is denied, and the file is not written.
            let r = prompt("write asked").await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
            let usage = r.usage.expect("end_turn carries the usage");
            assert_eq!(usage.total_tokens, usage.input_tokens + usage.output_tokens);
            // Mode `accept_edits`: an edit inside the folder goes ahead unasked.
            cx.send_request(SetSessionModeRequest::new(session.clone(), "accept_edits"))
                .block_task()
                .await?;
            prompt("write ws").await?;
            // Policy `ask` again through the config option: the patch asks and is allowed.
            let set = cx
                .send_request(SetSessionConfigOptionRequest::new(
                    session.clone(),
                    "edit_approval_policy",
                    "ask",
                ))
                .block_task()
                .await?;
            assert_eq!(set.config_options.len(), 2);
            // The same policy again changes no mode: no second update.
            cx.send_request(SetSessionConfigOptionRequest::new(
                session.clone(),
                "edit_approval_policy",
                "ask",
            ))
            .block_task()
            .await?;
            cx.send_request(SetSessionConfigOptionRequest::new(
                session.clone(),
                "some_client_knob",
                "on",
            ))
            .block_task()
            .await?;
            prompt("patch ws").await?;
            // The model by session/set_model; an unknown session is a null result.
            let switched = raw(
                &cx,
                "session/set_model",
                json!({"sessionId": session, "modelId": "fake-large"}),
            )
            .await?;
            assert_eq!(switched, json!({}));
            let unknown = raw(
                &cx,
                "session/set_model",
                json!({"sessionId": "nope", "modelId": "fake-large"}),
            )
            .await?;
            assert!(unknown.is_null(), "{unknown}");
            prompt("which model").await?;
            // A fork has a new id and the parent's history.
            let fork = raw(
                &cx,
                "session/fork",
                json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
            )
            .await?;
            let forked = fork["sessionId"].as_str().unwrap().to_owned();
            assert!(!forked.is_empty() && forked != session, "{fork}");
            let r = cx
                .send_request(PromptRequest::new(forked.clone(), text("in the fork")))
                .block_task()
                .await?;
            assert_eq!(r.stop_reason, StopReason::EndTurn);
            let orphan = raw(
                &cx,
                "session/fork",
                json!({"sessionId": "nope", "cwd": cwd, "mcpServers": []}),
            )
            .await?;
            assert_eq!(orphan["sessionId"], "");
            let missing = raw(
                &cx,
                "session/load",
                json!({"sessionId": "nope", "cwd": cwd, "mcpServers": []}),
            )
            .await?;
            assert!(missing.is_null(), "{missing}");
            Ok(())
        },
    )
    .await;
    assert!(
        !dir.path().join("asked.txt").exists(),
        "a denied edit is not made"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws.txt")).unwrap(),
        "newer\n"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.asked.len(), 2, "the accept_edits write did not ask");
    let first = &seen.asked[0];
    assert!(
        first
            .tool_call
            .tool_call_id
            .to_string()
            .starts_with("edit-approval-")
    );
    assert_eq!(
        first.tool_call.fields.title.as_deref(),
        Some("Approve edit: asked.txt")
    );
    assert_eq!(first.tool_call.fields.kind, Some(ToolKind::Edit));
    let options: Vec<String> = first
        .options
        .iter()
        .map(|o| o.option_id.to_string())
        .collect();
    assert_eq!(options, ["allow_once", "deny"]);
    assert_eq!(
        diffs(first.tool_call.fields.content.as_deref().unwrap()),
        [(None, "no\n".to_owned())]
    );
    assert_eq!(
        diffs(seen.asked[1].tool_call.fields.content.as_deref().unwrap()),
        [(Some("new\n".to_owned()), "newer\n".to_owned())],
        "the patch's diff is of the whole file"
    );
    // A call starts once it may run (as in Hermes): the denied edit never starts, the
    // approved patch starts after its approval.
    let starts = tool_starts(&seen.updates);
    assert_eq!(starts.len(), 2);
    assert_eq!(diffs(&starts[0].content), [(None, "new\n".to_owned())]);
    let ends = tool_ends(&seen.updates);
    assert_eq!(ends[0].fields.status, Some(ToolCallStatus::Failed));
    assert_eq!(
        diffs(ends[2].fields.content.as_deref().unwrap()),
        [(Some("new\n".to_owned()), "newer\n".to_owned())],
        "the completion's diff: the snapshot before, the file after"
    );
    let modes: Vec<String> = seen
        .updates
        .iter()
        .filter_map(|u| match u {
            SessionUpdate::CurrentModeUpdate(m) => Some(m.current_mode_id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        modes,
        ["accept_edits", "default"],
        "set_mode and a changed edit_approval_policy each tell the mode, once"
    );
    assert!(
        seen.updates
            .iter()
            .any(|u| matches!(u, SessionUpdate::UsageUpdate(x) if x.used > 0 && x.size >= x.used))
    );
    assert!(
        seen.updates
            .iter()
            .any(|u| matches!(u, SessionUpdate::SessionInfoUpdate(_)))
    );
    let requests = provider.requests();
    assert_eq!(requests.len(), 8);
    assert_eq!(requests[6].body["model"], "fake-large");
    let forked = requests[7].body["messages"].to_string();
    assert!(
        forked.contains("which model") && forked.contains("in the fork"),
        "the fork holds the parent's history: {forked}"
    );
}

/// `herald acp` over a raw pipe: JSON lines written and read by hand, for what the
/// SDK's client does not do (leave a permission request unanswered, be killed).
pub(super) struct RawAcp {
    pub child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    /// Every message read that was not the answer waited for.
    pub others: Vec<serde_json::Value>,
}

impl RawAcp {
    pub async fn start(home: &Path) -> RawAcp {
        RawAcp::start_with(home, &[]).await
    }

    /// [`RawAcp::start`] with more environment.
    pub async fn start_with(home: &Path, env: &[(&str, &str)]) -> RawAcp {
        use tokio::io::AsyncBufReadExt;
        let mut child = tokio::process::Command::new(BIN)
            .arg("acp")
            .env("HERALD_HOME", home)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        RawAcp {
            child,
            stdin: Some(stdin),
            lines,
            others: Vec::new(),
        }
    }

    pub async fn send(&mut self, id: u64, method: &str, params: serde_json::Value) {
        use tokio::io::AsyncWriteExt;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let bytes = format!("{line}\n");
        self.stdin
            .as_mut()
            .expect("stdin open")
            .write_all(bytes.as_bytes())
            .await
            .unwrap();
    }

    /// Writes `bytes` as they are.
    pub async fn raw(&mut self, bytes: &[u8]) {
        use tokio::io::AsyncWriteExt;
        self.stdin
            .as_mut()
            .expect("stdin open")
            .write_all(bytes)
            .await
            .unwrap();
    }

    /// The next message herald writes.
    pub async fn message(&mut self) -> serde_json::Value {
        let read = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line());
        let line = read.await.unwrap().unwrap().expect("acp ended");
        serde_json::from_str(&line).unwrap()
    }

    /// The result of request `id` (an error fails the test); what came before is kept.
    pub async fn answer(&mut self, id: u64) -> serde_json::Value {
        loop {
            let line = self.lines.next_line().await.unwrap().expect("acp ended");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["id"] == id && v.get("method").is_none() {
                assert!(v.get("error").is_none(), "{v}");
                return v["result"].clone();
            }
            self.others.push(v);
        }
    }

    /// Initializes the connection and opens a session in `cwd`; its id.
    pub async fn open_session(&mut self, cwd: &Path) -> String {
        self.send(1, "initialize", json!({"protocolVersion": 1}))
            .await;
        self.answer(1).await;
        self.send(2, "session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        let id = self.answer(2).await["sessionId"].clone();
        id.as_str().unwrap().to_owned()
    }

    /// Closes herald's stdin (the IDE went away).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Sends prompt `text` to `session` as request `id`.
    pub async fn prompt(&mut self, id: u64, session: &str, text: &str) {
        let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        self.send(id, "session/prompt", params).await;
    }
}

#[tokio::test]
async fn a_line_that_is_not_utf8_or_too_long_is_answered_and_the_connection_stays() {
    let provider = FakeProvider::start(vec![]);
    let home = rpc_home(&provider.base_url, "");
    let mut acp = RawAcp::start(home.path()).await;
    acp.raw(
        b"{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"initialize\",\"params\":{\"x\":\"\xff\"}}\n",
    )
    .await;
    assert_eq!(acp.message().await["error"]["code"], -32700);
    let mut huge = vec![b'x'; 33 * 1024 * 1024];
    huge.push(b'\n');
    acp.raw(&huge).await;
    assert_eq!(acp.message().await["error"]["code"], -32600);
    let session = acp.open_session(home.path()).await;
    assert!(!session.is_empty(), "still served");
    assert!(
        acp.child.try_wait().unwrap().is_none(),
        "herald acp runs on"
    );
}

/// After `session/cancel` the prompts queued behind the cancelled turn still run before
/// a prompt sent later.
#[tokio::test]
async fn prompts_queued_before_a_cancel_run_before_a_later_one() {
    let provider = FakeProvider::start(vec![
        Scripted::Delayed(Duration::from_secs(3), Box::new(Scripted::text("One."))),
        Scripted::text("Two."),
        Scripted::text("Three."),
    ]);
    let home = rpc_home(&provider.base_url, "");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let cwd = home.path().to_path_buf();
    with_agent(
        home.path(),
        vec![],
        seen.clone(),
        async move |cx: ConnectionTo<Agent>| {
            let session = initialized_session(&cx, cwd).await?;
            let first = cx.send_request(PromptRequest::new(session.clone(), text("one")));
            tokio::time::sleep(Duration::from_millis(300)).await;
            let queued = cx
                .send_request(PromptRequest::new(session.clone(), text("two")))
                .block_task()
                .await?;
            assert_eq!(queued.stop_reason, StopReason::EndTurn);
            cx.send_notification(CancelNotification::new(session.clone()))?;
            assert_eq!(first.block_task().await?.stop_reason, StopReason::Cancelled);
            let later = cx
                .send_request(PromptRequest::new(session.clone(), text("three")))
                .block_task()
                .await?;
            assert_eq!(later.stop_reason, StopReason::EndTurn);
            Ok(())
        },
    )
    .await;
    let asked: Vec<String> = provider
        .requests()
        .iter()
        .filter_map(|r| {
            let messages = r.body["messages"].as_array()?;
            let user = messages.iter().rev().find(|m| m["role"] == "user")?;
            user["content"].as_str().map(str::to_owned)
        })
        .collect();
    assert_eq!(asked, vec!["one", "two", "three"], "{asked:?}");
}

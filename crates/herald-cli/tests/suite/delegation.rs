//! Subagents: `delegate_task` over the JSON-RPC gateway, with the fake provider
//! answering the parent and each child by its system prompt, and the trace-recorder
//! plugin seeing the subagent hooks.

use super::plugins::{install_plugins, traces};
use super::rpc::{Client, Piped, rpc_home};
use herald_test_support::{FakeProvider, Scripted};
use serde_json::{Value, json};

/// A text answer whose usage reports what the call cost.
fn priced(text: &str, usd: f64) -> Scripted {
    Scripted::Events(vec![
        json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5, "cost": usd}}),
    ])
}

/// The requests of the agent whose system prompt holds `needle`.
fn requests_of(provider: &FakeProvider, needle: &str) -> Vec<Value> {
    provider
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| {
            b["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .contains(needle)
        })
        .collect()
}

/// The requests of the session's own agent (no subagent's).
fn parent_requests(provider: &FakeProvider) -> Vec<Value> {
    provider
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| {
            !b["messages"][0]["content"]
                .as_str()
                .unwrap_or("")
                .contains("YOUR TASK:")
        })
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads events until both subagents have called their tool; all events read.
async fn until_both_work(c: &mut Client) -> Vec<Value> {
    let mut seen = Vec::new();
    while seen
        .iter()
        .filter(|e: &&Value| e["type"] == "subagent.tool")
        .count()
        < 2
    {
        seen.push(c.event().await);
    }
    seen
}

/// The subagent id of the child whose goal starts with `prefix`.
fn id_of(events: &[Value], prefix: &str) -> String {
    events
        .iter()
        .find(|e| {
            e["type"] == "subagent.start"
                && e["payload"]["goal"]
                    .as_str()
                    .unwrap_or("")
                    .starts_with(prefix)
        })
        .and_then(|e| e["payload"]["subagent_id"].as_str())
        .unwrap_or_else(|| panic!("no subagent.start for {prefix}: {events:?}"))
        .to_owned()
}

#[tokio::test]
async fn a_delegation_with_two_children_one_interrupted_one_steered() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[(
            "d1",
            "delegate_task",
            r#"{"tasks": [{"goal": "alpha: wait for the build"}, {"goal": "beta: list the files", "context": "the project is here"}]}"#,
        )]),
        priced("Both came back.", 0.125),
        Scripted::tool_calls(&[("d2", "delegate_task", r#"{"goal": "gamma: anything"}"#)]),
        Scripted::text("Paused, then."),
    ]);
    provider.push_when(
        "YOUR TASK:\nalpha",
        Scripted::tool_calls(&[("a1", "terminal", r#"{"command": "sleep 30"}"#)]),
    );
    provider.push_when(
        "YOUR TASK:\nbeta",
        Scripted::tool_calls(&[("b1", "terminal", r#"{"command": "sleep 4; echo listed"}"#)]),
    );
    provider.push_when("YOUR TASK:\nbeta", priced("beta done: zebra noted", 0.25));
    let dir = tempfile::tempdir().unwrap();
    let home = rpc_home(
        &provider.base_url,
        &format!("terminal:\n  cwd: {}\n", dir.path().display()),
    );
    install_plugins(home.path(), &["trace-recorder"]);
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    c.call(
        "prompt.submit",
        json!({"session_id": sid, "text": "split the work"}),
    )
    .await;
    let early = until_both_work(c).await;
    let (alpha, beta) = (id_of(&early, "alpha"), id_of(&early, "beta"));
    assert!(
        alpha.starts_with("sa-0-") && beta.starts_with("sa-1-"),
        "{alpha} {beta}"
    );
    let start = early
        .iter()
        .find(|e| e["type"] == "subagent.start")
        .unwrap();
    assert_eq!(
        start["session_id"],
        json!(sid),
        "on the parent's session: {start}"
    );
    let p = &start["payload"];
    assert_eq!(p["task_count"], 2, "{p}");
    assert_eq!(p["depth"], 0, "{p}");
    assert_eq!(p["model"], "fake-model", "{p}");
    assert!(p.get("parent_id").is_none(), "a first-level child: {p}");
    assert!(
        p["child_session_id"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{p}"
    );
    let tool = early.iter().find(|e| e["type"] == "subagent.tool").unwrap();
    assert_eq!(tool["payload"]["tool_name"], "terminal", "{tool}");
    assert!(
        tool["payload"]["tool_preview"]
            .as_str()
            .unwrap_or("")
            .contains("sleep"),
        "{tool}"
    );
    assert_eq!(tool["payload"]["tool_count"], 1, "{tool}");

    let status = c.call("delegation.status", json!({})).await;
    assert_eq!(status["paused"], false, "{status}");
    assert_eq!(status["max_spawn_depth"], 1, "{status}");
    assert_eq!(status["max_concurrent_children"], 3, "{status}");
    let active = status["active"].as_array().unwrap();
    assert_eq!(active.len(), 2, "{status}");
    for a in active {
        assert_eq!(a["status"], "running", "{a}");
        assert_eq!(a["depth"], 0, "{a}");
        assert_eq!(a["parent_id"], Value::Null, "{a}");
        assert_eq!(a["tool_count"], 1, "{a}");
        assert_eq!(a["last_tool"], "terminal", "{a}");
    }
    let usage = c.call("session.usage", json!({"session_id": sid})).await;
    assert_eq!(usage["active_subagents"], 2, "{usage}");

    // Steered, by session.steer's rules; then the other interrupted.
    let steered = c
        .call(
            "subagent.steer",
            json!({"subagent_id": beta, "text": "mention the zebra"}),
        )
        .await;
    assert_eq!(steered["status"], "queued", "{steered}");
    assert_eq!(
        c.code("subagent.steer", json!({"subagent_id": beta, "text": " "}))
            .await,
        4002
    );
    assert_eq!(c.code("subagent.steer", json!({"text": "x"})).await, 4000);
    let nobody = c
        .call(
            "subagent.steer",
            json!({"subagent_id": "sa-9-none", "text": "x"}),
        )
        .await;
    assert_eq!(
        (nobody["status"].clone(), nobody["found"].clone()),
        (json!("rejected"), json!(false))
    );
    let found = c
        .call("subagent.interrupt", json!({"subagent_id": alpha}))
        .await;
    assert_eq!(found, json!({"found": true, "subagent_id": alpha}));
    let missing = c
        .call("subagent.interrupt", json!({"subagent_id": "sa-9-none"}))
        .await;
    assert_eq!(missing["found"], false);

    let rest = c.until("message.complete").await;
    assert_eq!(rest.last().unwrap()["payload"]["text"], "Both came back.");
    // Each child's tool call is also the `tool.progress` of the delegate_task call.
    let progress: Vec<&Value> = early
        .iter()
        .chain(&rest)
        .filter(|e| e["type"] == "tool.progress")
        .collect();
    assert!(
        progress
            .iter()
            .any(|e| e["payload"]["name"] == "delegate_task"
                && e["payload"]["tool_id"] == "d1"
                && e["payload"]["preview"]
                    .as_str()
                    .is_some_and(|p| p.contains("terminal sleep"))),
        "{progress:?}"
    );
    let complete = |id: &str| {
        rest.iter()
            .find(|e| e["type"] == "subagent.complete" && e["payload"]["subagent_id"] == id)
            .unwrap_or_else(|| panic!("no subagent.complete for {id}: {rest:?}"))["payload"]
            .clone()
    };
    assert_eq!(complete(&alpha)["status"], "interrupted");
    let b = complete(&beta);
    assert_eq!(b["status"], "completed", "{b}");
    assert_eq!(b["summary"], "beta done: zebra noted", "{b}");
    assert_eq!(b["api_calls"], 2, "{b}");
    assert!(b["duration_seconds"].as_f64().unwrap() >= 3.5, "{b}");

    // The parent got both entries as the tool's result.
    let parent = parent_requests(&provider);
    let last = parent.last().unwrap();
    let result = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let result: Value = serde_json::from_str(result["content"].as_str().unwrap()).unwrap();
    let entries = result["results"].as_array().unwrap();
    assert_eq!(entries[0]["status"], "interrupted", "{result}");
    assert_eq!(entries[0]["exit_reason"], "interrupted", "{result}");
    assert_eq!(entries[1]["status"], "completed", "{result}");
    assert_eq!(entries[1]["summary"], "beta done: zebra noted", "{result}");
    assert_eq!(
        entries[1]["tokens"],
        json!({"input": 3, "output": 2}),
        "{result}"
    );
    assert_eq!(entries[1]["tool_trace"][0]["tool"], "terminal", "{result}");
    assert_eq!(entries[1]["tool_trace"][0]["status"], "ok", "{result}");
    assert!(
        result["total_duration_seconds"].as_f64().is_some(),
        "{result}"
    );

    // Each child had its own context: the goal as its message, the context in its
    // prompt, the parent's tools less the blocked ones; the steer reached beta.
    let beta_calls = requests_of(&provider, "YOUR TASK:\nbeta");
    assert_eq!(beta_calls.len(), 2);
    let first = &beta_calls[0];
    assert_eq!(first["messages"][1]["content"], "beta: list the files");
    assert!(
        first["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("the project is here")
    );
    let names = tool_names(first);
    assert!(names.contains(&"terminal".to_owned()), "{names:?}");
    for blocked in ["delegate_task", "clarify"] {
        assert!(
            !names.contains(&blocked.to_owned()),
            "{blocked} offered: {names:?}"
        );
    }
    assert!(
        beta_calls[1].to_string().contains("mention the zebra"),
        "the steer reached the child's next call"
    );
    assert!(tool_names(&parent[0]).contains(&"delegate_task".to_owned()));

    // The children's cost is added to the parent's; tokens stay the parent's own.
    let usage = c.call("session.usage", json!({"session_id": sid})).await;
    assert_eq!(usage["cost_usd"], 0.375, "{usage}");
    assert_eq!(
        (usage["input"].clone(), usage["output"].clone()),
        (json!(3), json!(2)),
        "the parent's own tokens: {usage}"
    );
    assert_eq!(usage["active_subagents"], 0, "{usage}");
    assert_eq!(
        c.call("delegation.status", json!({})).await["active"],
        json!([])
    );

    // The children's sessions are kept under their parent, not listed beside it.
    let listed = c.call("session.list", json!({})).await.to_string();
    assert!(
        !listed.contains(p["child_session_id"].as_str().unwrap()),
        "{listed}"
    );

    // Paused: a new delegation is refused and the model is told why.
    let paused = c.call("delegation.pause", json!({"paused": true})).await;
    assert_eq!(paused, json!({"paused": true}));
    assert_eq!(c.call("delegation.status", json!({})).await["paused"], true);
    c.turn(&sid, "once more").await;
    let last = parent_requests(&provider).pop().unwrap();
    assert!(last.to_string().contains("Delegation is paused"), "{last}");
    assert!(requests_of(&provider, "YOUR TASK:\ngamma").is_empty());
    assert_eq!(
        c.call("delegation.pause", json!({})).await,
        json!({"paused": true})
    );
    for not_a_bool in [json!("false"), json!(0), json!({})] {
        assert_eq!(
            c.code("delegation.pause", json!({"paused": not_a_bool}))
                .await,
            4002
        );
    }
    assert_eq!(c.call("delegation.status", json!({})).await["paused"], true);
    assert_eq!(
        c.call("delegation.pause", json!({"paused": false})).await,
        json!({"paused": false})
    );
    let long = "x".repeat(20_000);
    assert_eq!(
        c.code(
            "subagent.steer",
            json!({"subagent_id": "sa-0-x", "text": long})
        )
        .await,
        4002
    );

    // The plugin hooks, with Hermes's arguments.
    drop(rpc);
    let hooks = traces(home.path());
    let starts: Vec<&Value> = hooks
        .iter()
        .filter(|h| h["hook"] == "subagent_start")
        .collect();
    let stops: Vec<&Value> = hooks
        .iter()
        .filter(|h| h["hook"] == "subagent_stop")
        .collect();
    assert_eq!((starts.len(), stops.len()), (2, 2), "{hooks:?}");
    let s = &starts[0]["fields"];
    for key in [
        "parent_session_id",
        "parent_turn_id",
        "parent_subagent_id",
        "child_session_id",
        "child_subagent_id",
        "child_role",
        "child_goal",
    ] {
        assert!(s.get(key).is_some(), "subagent_start lacks {key}: {s}");
    }
    assert_eq!(s["child_role"], "leaf");
    let statuses: Vec<&str> = stops
        .iter()
        .map(|h| h["fields"]["child_status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["interrupted", "completed"], "{stops:?}");
    assert!(stops[1]["fields"]["duration_ms"].as_u64().unwrap() >= 3500);
    assert_eq!(
        stops[1]["fields"]["child_summary"],
        "beta done: zebra noted"
    );
    let child_sessions: Vec<&Value> = starts
        .iter()
        .map(|h| &h["fields"]["child_session_id"])
        .collect();
    assert!(
        child_sessions.contains(&&p["child_session_id"]),
        "{starts:?}"
    );
    assert_eq!(s["parent_subagent_id"], Value::Null);
    assert_eq!(
        stops[0]["fields"]["parent_session_id"],
        s["parent_session_id"]
    );
}

/// A delegation whose child wants to run `rm -f doomed.txt` in `dir` (which holds it).
struct Tidy {
    provider: FakeProvider,
    dir: tempfile::TempDir,
    home: tempfile::TempDir,
}

/// The parent delegates `tidy: remove doomed.txt` and ends with `parent_says`; the
/// child asks for the command, then says `child_says` (if any); `extra` goes into
/// config.yaml.
fn tidy(parent_says: &str, child_says: Option<&str>, extra: &str) -> Tidy {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[(
            "d1",
            "delegate_task",
            r#"{"goal": "tidy: remove doomed.txt"}"#,
        )]),
        Scripted::text(parent_says),
    ]);
    provider.push_when(
        "YOUR TASK:\ntidy",
        Scripted::tool_calls(&[("t1", "terminal", r#"{"command": "rm -f doomed.txt"}"#)]),
    );
    if let Some(text) = child_says {
        provider.push_when("YOUR TASK:\ntidy", Scripted::text(text));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("doomed.txt"), "x").unwrap();
    let config = format!("terminal:\n  cwd: {}\n{extra}", dir.path().display());
    let home = rpc_home(&provider.base_url, &config);
    Tidy {
        provider,
        dir,
        home,
    }
}

#[tokio::test]
async fn a_childs_dangerous_command_goes_to_the_parents_approver() {
    let Tidy {
        provider: _provider,
        dir,
        home,
    } = tidy("Tidied.", Some("removed it"), "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    c.call(
        "prompt.submit",
        json!({"session_id": sid, "text": "tidy up"}),
    )
    .await;
    let asked = c.until("approval.request").await;
    let request = asked.last().unwrap();
    assert_eq!(
        request["session_id"],
        json!(sid),
        "asked on the parent's session"
    );
    assert!(
        request["payload"]["command"]
            .as_str()
            .unwrap()
            .contains("rm -f")
    );
    assert!(dir.path().join("doomed.txt").exists());
    c.call(
        "approval.respond",
        json!({"session_id": sid, "choice": "once"}),
    )
    .await;
    let rest = c.until("message.complete").await;
    assert_eq!(rest.last().unwrap()["payload"]["text"], "Tidied.");
    assert!(!dir.path().join("doomed.txt").exists());
}

#[tokio::test]
async fn subagent_auto_approve_runs_a_childs_command_without_asking() {
    let extra = "delegation:\n  subagent_auto_approve: true\n  max_iterations: 4\n";
    let Tidy {
        provider: _provider,
        dir,
        home,
    } = tidy("Tidied.", Some("removed it"), extra);
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    let events = c.turn(&sid, "tidy up").await;
    assert!(
        !events.iter().any(|e| e["type"] == "approval.request"),
        "{events:?}"
    );
    assert_eq!(events.last().unwrap()["payload"]["text"], "Tidied.");
    assert!(!dir.path().join("doomed.txt").exists());
}

/// A provider for one delegation: the parent delegates `omega`, the child runs one
/// command and answers, the parent answers.
fn one_child_provider() -> FakeProvider {
    let provider = FakeProvider::start(vec![]);
    script_one_child(&provider, "d1");
    provider
}

/// Queues one delegation on `provider`: the parent's call `call_id`, the child's
/// command and answer, the parent's `Done.`.
fn script_one_child(provider: &FakeProvider, call_id: &str) {
    provider.push(Scripted::tool_calls(&[(
        call_id,
        "delegate_task",
        r#"{"goal": "omega: look around"}"#,
    )]));
    provider.push(Scripted::text("Done."));
    provider.push_when(
        "YOUR TASK:\nomega",
        Scripted::tool_calls(&[("o1", "terminal", r#"{"command": "echo looked"}"#)]),
    );
    provider.push_when("YOUR TASK:\nomega", Scripted::text("omega looked"));
}

#[tokio::test]
async fn the_api_shows_a_childs_work_as_tool_progress() {
    use super::api::{api_config, call, post_json, run_events};
    use super::support::Herald;
    // The runs API: tool.progress events of the delegate_task call.
    let provider = one_child_provider();
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let (status, run) = post_json(&h, "/v1/runs", json!({"input": "look"})).await;
    assert_eq!(status, 202, "{run}");
    let (events, text) = run_events(&h, run["run_id"].as_str().unwrap()).await;
    let progress: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "tool.progress")
        .collect();
    let steps: Vec<&str> = progress
        .iter()
        .map(|e| e["step"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["started", "tool", "completed"], "{text}");
    assert_eq!(progress[1]["tool"], "terminal", "{text}");
    assert_eq!(progress[1]["tool_call_id"], "d1", "{text}");
    assert!(
        progress[1]["subagent_id"]
            .as_str()
            .unwrap()
            .starts_with("sa-0-")
    );
    assert_eq!(progress[2]["status"], "completed", "{text}");
    let end = events
        .iter()
        .find(|e| e["event"] == "run.completed")
        .unwrap();
    assert_eq!(end["output"], "Done.", "{text}");

    // A streamed chat completion: the child's call as hermes.tool.progress.
    script_one_child(&provider, "d2");
    let body = json!({"model": "hermes-agent", "stream": true, "messages": [{"role": "user", "content": "look"}]});
    let asked = [("X-Hermes-Tool-Progress", "1")];
    let text = call(&h, "POST", "/v1/chat/completions", Some(body), &asked)
        .await
        .text()
        .await
        .unwrap();
    let child_frames: Vec<Value> = text
        .split("\n\n")
        .filter(|f| f.starts_with("event: hermes.tool.progress"))
        .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str::<Value>(d).unwrap())
        .filter(|v| {
            v["toolCallId"]
                .as_str()
                .unwrap_or("")
                .starts_with("d2:sa-0-")
        })
        .collect();
    assert_eq!(child_frames.len(), 2, "{text}");
    assert_eq!(child_frames[0]["status"], "running", "{text}");
    assert_eq!(child_frames[0]["tool"], "terminal", "{text}");
    assert!(
        child_frames[0]["label"]
            .as_str()
            .unwrap()
            .starts_with("[sa-0-"),
        "{text}"
    );
    assert_eq!(child_frames[1]["status"], "completed", "{text}");
    assert!(text.contains("Done."), "{text}");
}

#[tokio::test]
async fn a_child_waiting_for_approval_stops_when_interrupted() {
    let Tidy {
        provider: _provider,
        dir,
        home,
    } = tidy("Stopped.", None, "");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    c.call(
        "prompt.submit",
        json!({"session_id": sid, "text": "tidy up"}),
    )
    .await;
    let asked = c.until("approval.request").await;
    let child = id_of(&asked, "tidy");
    let at = std::time::Instant::now();
    let found = c
        .call("subagent.interrupt", json!({"subagent_id": child}))
        .await;
    assert_eq!(found["found"], true);
    let rest = c.until("message.complete").await;
    assert!(
        at.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        at.elapsed()
    );
    let done = rest
        .iter()
        .find(|e| e["type"] == "subagent.complete")
        .unwrap();
    assert_eq!(done["payload"]["status"], "interrupted", "{done}");
    assert_eq!(rest.last().unwrap()["payload"]["text"], "Stopped.");
    assert!(
        dir.path().join("doomed.txt").exists(),
        "never approved, never run"
    );
    let late = c
        .answer(
            "approval.respond",
            json!({"session_id": sid, "choice": "once"}),
        )
        .await;
    assert_eq!(
        late["result"],
        json!({"resolved": 0}),
        "nothing waits any more: {late}"
    );
}

#[tokio::test]
async fn an_orchestrator_delegates_one_level_deeper_and_no_further() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[(
            "d1",
            "delegate_task",
            r#"{"goal": "boss: get it done", "role": "orchestrator"}"#,
        )]),
        Scripted::text("All done."),
    ]);
    provider.push_when(
        "YOUR TASK:\nboss",
        Scripted::tool_calls(&[(
            "d2",
            "delegate_task",
            r#"{"goal": "worker: do it", "role": "orchestrator"}"#,
        )]),
    );
    provider.push_when(
        "YOUR TASK:\nboss",
        Scripted::text("boss: the worker did it"),
    );
    provider.push_when("YOUR TASK:\nworker", Scripted::text("worker did it"));
    let home = rpc_home(&provider.base_url, "delegation:\n  max_spawn_depth: 2\n");
    let mut rpc = Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    let events = c.turn(&sid, "go").await;
    assert_eq!(events.last().unwrap()["payload"]["text"], "All done.");
    let boss = id_of(&events, "boss");
    let worker = events
        .iter()
        .find(|e| e["type"] == "subagent.start" && e["payload"]["goal"] == "worker: do it")
        .unwrap_or_else(|| panic!("the grandchild's start reached the door: {events:?}"));
    assert_eq!(worker["payload"]["parent_id"], json!(boss), "{worker}");
    assert_eq!(worker["payload"]["depth"], 1, "{worker}");
    assert_eq!(worker["session_id"], json!(sid), "{worker}");
    let boss_tools = tool_names(&requests_of(&provider, "YOUR TASK:\nboss")[0]);
    assert!(
        boss_tools.contains(&"delegate_task".to_owned()),
        "{boss_tools:?}"
    );
    let worker_calls = requests_of(&provider, "YOUR TASK:\nworker");
    let worker_tools = tool_names(&worker_calls[0]);
    assert!(
        !worker_tools.contains(&"delegate_task".to_owned()),
        "at the depth cap a child is a leaf, whatever its role: {worker_tools:?}"
    );
    let parent = parent_requests(&provider);
    assert!(
        parent
            .last()
            .unwrap()
            .to_string()
            .contains("boss: the worker did it"),
        "the orchestrator's answer came back"
    );
}

#[tokio::test]
async fn acp_shows_a_childs_work_under_the_delegate_task_call() {
    use super::acp::RawAcp;
    let provider = one_child_provider();
    let dir = tempfile::tempdir().unwrap();
    let home = rpc_home(&provider.base_url, "");
    let mut acp = RawAcp::start(home.path()).await;
    let session = acp.open_session(dir.path()).await;
    acp.prompt(3, &session, "look").await;
    let end = acp.answer(3).await;
    assert_eq!(end["stopReason"], "end_turn", "{end}");
    let updates: Vec<&Value> = acp
        .others
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| &m["params"]["update"])
        .collect();
    let call = updates
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call" && u["title"] == "delegate: omega: look around")
        .unwrap_or_else(|| panic!("{updates:?}"));
    let id = &call["toolCallId"];
    let progress: Vec<String> = updates
        .iter()
        .filter(|u| {
            u["sessionUpdate"] == "tool_call_update"
                && u["toolCallId"] == *id
                && u["status"] == "in_progress"
        })
        .map(|u| {
            u["content"][0]["content"]["text"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    let last = progress
        .last()
        .unwrap_or_else(|| panic!("no progress: {updates:?}"));
    assert!(last.contains("[1] started: omega: look around"), "{last}");
    assert!(last.contains("[1] terminal echo looked"), "{last}");
    assert!(last.contains("[1] completed"), "{last}");
}

/// The runs API's run of `input` on `h`, to its end: its final status.
async fn run_to_end(h: &super::support::Herald, input: &str) -> Value {
    use super::api::{get_json, post_json};
    let (status, run) = post_json(h, "/v1/runs", json!({ "input": input })).await;
    assert_eq!(status, 202, "{run}");
    let id = run["run_id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    loop {
        let (_, s) = get_json(h, &format!("/v1/runs/{id}")).await;
        if matches!(
            s["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        ) {
            return s;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{s}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn one_answer_of_twenty_fan_outs_starts_only_the_run_s_nine_subagents() {
    use super::api::api_config;
    use super::support::Herald;
    let calls: Vec<(String, String)> = (0..20)
        .map(|i| {
            let tasks: Vec<Value> = (0..3)
                .map(|t| json!({"goal": format!("task {i}.{t}: look")}))
                .collect();
            (format!("d{i}"), json!({ "tasks": tasks }).to_string())
        })
        .collect();
    let refs: Vec<(&str, &str, &str)> = calls
        .iter()
        .map(|(id, args)| (id.as_str(), "delegate_task", args.as_str()))
        .collect();
    let provider = FakeProvider::start(vec![Scripted::tool_calls(&refs)]);
    provider.set_fallback(Scripted::text("Done."));
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let end = run_to_end(&h, "fan out").await;
    assert_eq!(end["status"], "completed", "{end}");
    // The parent's two calls and nine children's one each.
    let children = requests_of(&provider, "YOUR TASK:").len();
    assert_eq!(children, 9);
    assert_eq!(provider.requests().len(), 11);
    let last = provider.requests().last().unwrap().body.to_string();
    assert_eq!(
        last.matches("delegation.max_total_children 9").count(),
        17,
        "the refused calls are told why"
    );
}

#[tokio::test]
async fn the_run_tree_s_provider_calls_are_counted_together() {
    use super::api::api_config;
    use super::support::Herald;
    let provider = FakeProvider::start(vec![Scripted::tool_calls(&[(
        "d1",
        "delegate_task",
        r#"{"tasks": [{"goal": "one: loop"}, {"goal": "two: loop"}, {"goal": "three: loop"}]}"#,
    )])]);
    // Every later answer asks for one more command: children loop until stopped.
    provider.set_fallback(Scripted::tool_calls(&[(
        "t",
        "terminal",
        r#"{"command": "true"}"#,
    )]));
    let config = api_config(&provider.base_url, "").replace(
        "agent:\n",
        "delegation:\n  max_total_iterations: 12\nagent:\n",
    );
    let h = Herald::start(&config);
    run_to_end(&h, "split").await;
    // Twelve calls for the tree, then one last tool-less call for each of its four
    // agents; each child alone would have had 50.
    assert_eq!(provider.requests().len(), 16);
}

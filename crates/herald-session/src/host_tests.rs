//! The session host with a fake provider: runs on two sessions at once, approvals
//! answered out of order by request id, steer and interrupt, rewind with survivor row
//! ids, and run status after a restart.

use crate::host::{Answers, Host, RewindRequest, SessionOptions};
use crate::runs::{RunEvent, RunEventKind, RunHandle, RunState};
use crate::runtime::{ModelChoice, Platform, Runtime};
use crate::sessions::SessionError;
use herald_agent::Decision;
use herald_agent::TurnProgress;
use herald_config::{Config, Home};
use herald_store::SessionStore;
use herald_test_support::{FakeProvider, Scripted};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Fixture {
    dir: tempfile::TempDir,
    provider: FakeProvider,
    host: Arc<Host>,
}

fn host_on(dir: &std::path::Path, base_url: &str) -> Arc<Host> {
    host_with(dir, base_url, herald_agent::Plugins::default())
}

fn host_with(dir: &std::path::Path, base_url: &str, plugins: herald_agent::Plugins) -> Arc<Host> {
    host_owned(dir, base_url, plugins, herald_store::instance::current())
}

/// A host whose runs are saved as owned by `owner` (a gone one stands for a crashed
/// process).
fn host_owned(
    dir: &std::path::Path,
    base_url: &str,
    plugins: herald_agent::Plugins,
    owner: &str,
) -> Arc<Host> {
    let home = Home::new(dir);
    let yaml = format!(
        "model:\n  default: m\n  base_url: {base_url}\nterminal:\n  cwd: {}\n",
        dir.display()
    );
    let config = Config::from_yaml(&home, &yaml, &|_| None).unwrap();
    let runtime = Runtime::build(&home, &config, Platform::Cli, ModelChoice::default())
        .unwrap()
        .with_plugins(plugins);
    let store = SessionStore::open(&dir.join("state.db"))
        .unwrap()
        .owned_by(owner);
    Host::new(Arc::new(runtime), store)
}

fn fixture(script: Vec<Scripted>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let provider = FakeProvider::start(script);
    let host = host_on(dir.path(), &provider.base_url);
    Fixture {
        dir,
        provider,
        host,
    }
}

fn options(tools: &[&str], answers: Answers) -> SessionOptions {
    SessionOptions::new(
        "api",
        tools.iter().map(|t| t.to_string()).collect(),
        answers,
    )
}

/// Every event of a run up to its end.
async fn all_events(run: &RunHandle) -> Vec<RunEvent> {
    let mut rx = run.take_events().expect("events not taken yet");
    let mut out = Vec::new();
    while let Some(e) = rx.recv().await {
        let last = matches!(e.kind, RunEventKind::Finished(_));
        out.push(e);
        if last {
            break;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_on_two_sessions_at_once_keep_apart_and_are_tagged() {
    let slow = |t: &str| Scripted::Delayed(Duration::from_millis(400), Box::new(Scripted::text(t)));
    let f = fixture(vec![slow("one"), slow("two")]);
    let a = f
        .host
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    let b = f
        .host
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    assert_ne!(a.id(), b.id());
    let started = Instant::now();
    let run_a = f.host.start_run(&a, "first").unwrap();
    let run_b = f.host.start_run(&b, "second").unwrap();
    assert!(matches!(
        f.host.start_run(&a, "again"),
        Err(SessionError::Busy(_))
    ));
    let (ea, eb) = tokio::join!(all_events(&run_a), all_events(&run_b));
    assert!(
        started.elapsed() < Duration::from_millis(750),
        "the runs overlapped: {:?}",
        started.elapsed()
    );
    for (run, events, session) in [(&run_a, &ea, &a), (&run_b, &eb, &b)] {
        assert!(
            events
                .iter()
                .all(|e| e.run_id == run.id() && e.session_id == session.id())
        );
        let status = run.status();
        assert_eq!(status.state, RunState::Completed);
        let history = session.history();
        assert_eq!(history.len(), 2, "{history:?}");
        assert_eq!(history[1].message.content, status.output);
        let stored = f
            .host
            .store()
            .history(session.id().to_owned())
            .await
            .unwrap();
        assert_eq!(
            stored.iter().map(|r| Some(r.id)).collect::<Vec<_>>(),
            history.iter().map(|h| h.row_id).collect::<Vec<_>>()
        );
        let saved = events
            .iter()
            .filter(|e| {
                matches!(
                    e.kind,
                    RunEventKind::MessageSaved {
                        row_id: Some(_),
                        ..
                    }
                )
            })
            .count();
        assert_eq!(saved, 2);
    }
    let mut outputs = vec![
        run_a.status().output.unwrap(),
        run_b.status().output.unwrap(),
    ];
    outputs.sort();
    assert_eq!(outputs, ["one", "two"]);
    assert_eq!(f.provider.requests().len(), 2);
}

/// Waits for the run's next approval request (which comes after its tool started);
/// returns its id and command.
async fn next_approval(rx: &mut crate::runs::RunEvents) -> (String, String) {
    let mut started = Vec::new();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        match e.kind {
            RunEventKind::Progress(TurnProgress::ToolStarted { call_id, .. }) => {
                started.push(call_id)
            }
            RunEventKind::ApprovalRequested {
                request_id,
                command,
                ..
            } => {
                assert!(started.contains(&request_id), "{started:?}");
                return (request_id, command);
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_answered_by_request_id_in_any_order() {
    let f = fixture(vec![
        Scripted::tool_calls(&[("call_a", "terminal", r#"{"command": "rm -f first.txt"}"#)]),
        Scripted::tool_calls(&[("call_b", "terminal", r#"{"command": "rm -f second.txt"}"#)]),
        Scripted::text("done"),
        Scripted::text("done"),
    ]);
    for name in ["first.txt", "second.txt"] {
        std::fs::write(f.dir.path().join(name), "x").unwrap();
    }
    let open = || {
        f.host
            .open_session(options(&["terminal"], Answers::ByRequest))
    };
    let (a, b) = (open().await.unwrap(), open().await.unwrap());
    let run_a = f.host.start_run(&a, "clean up one").unwrap();
    let mut rx_a = run_a.take_events().unwrap();
    assert_eq!(
        next_approval(&mut rx_a).await,
        ("call_a".to_owned(), "rm -f first.txt".to_owned())
    );
    let run_b = f.host.start_run(&b, "clean up two").unwrap();
    let mut rx_b = run_b.take_events().unwrap();
    assert_eq!(
        next_approval(&mut rx_b).await,
        ("call_b".to_owned(), "rm -f second.txt".to_owned())
    );
    for run in [&run_a, &run_b] {
        assert_eq!(run.status().state, RunState::WaitingForApproval);
        assert_eq!(
            run.steer("not now"),
            Err(crate::RunError::NotAcceptingSteer("waiting_for_approval"))
        );
    }
    // Each run answers only its own requests.
    assert_eq!(
        run_a.approve(Some("call_b"), Decision::Once, false),
        Err(crate::RunError::UnknownRequest("call_b".into()))
    );
    // The later request first: the earlier one keeps waiting.
    assert_eq!(run_b.approve(Some("call_b"), Decision::Once, false), Ok(1));
    let end_b = run_b.finished().await;
    assert_eq!(
        (end_b.state, end_b.output.as_deref()),
        (RunState::Completed, Some("done"))
    );
    assert!(!f.dir.path().join("second.txt").exists(), "approved");
    assert_eq!(
        run_a.status().state,
        RunState::WaitingForApproval,
        "still waiting"
    );
    assert!(f.dir.path().join("first.txt").exists());
    assert_eq!(run_a.approve(Some("call_a"), Decision::Deny, false), Ok(1));
    assert_eq!(run_a.finished().await.state, RunState::Completed);
    assert!(f.dir.path().join("first.txt").exists(), "denied");
    assert_eq!(
        run_a.approve(None, Decision::Once, false),
        Err(crate::RunError::NotActive)
    );
    let mut seen = Vec::new();
    while let Some(e) = rx_a.recv().await {
        let name = e.kind.name();
        if let RunEventKind::ApprovalResponded {
            request_id,
            decision,
        } = &e.kind
        {
            seen.push(format!("{name} {request_id} {decision:?}"));
        } else if !matches!(
            e.kind,
            RunEventKind::Progress(TurnProgress::MessageDelta(_))
                | RunEventKind::MessageSaved { .. }
        ) {
            seen.push(name.to_owned());
        }
        if matches!(e.kind, RunEventKind::Finished(_)) {
            break;
        }
    }
    assert_eq!(seen[0], "approval.responded call_a Deny", "{seen:?}");
    assert_eq!(
        seen.last().map(String::as_str),
        Some("run.completed"),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clarify_is_answered_by_request_id() {
    let f = fixture(vec![
        Scripted::tool_calls(&[(
            "ask_1",
            "clarify",
            r#"{"question": "Which colour?", "choices": ["red", "blue"]}"#,
        )]),
        Scripted::text("blue it is"),
    ]);
    let s = f
        .host
        .open_session(options(&["clarify"], Answers::ByRequest))
        .await
        .unwrap();
    let run = f.host.start_run(&s, "paint it").unwrap();
    let mut rx = run.take_events().unwrap();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        if let RunEventKind::ClarifyRequested {
            request_id,
            question,
            choices,
        } = e.kind
        {
            assert_eq!(
                (request_id.as_str(), question.as_str()),
                ("ask_1", "Which colour?")
            );
            assert_eq!(choices, ["red", "blue"]);
            break;
        }
    }
    run.clarify("ask_1", "blue".into()).unwrap();
    assert_eq!(run.finished().await.state, RunState::Completed);
    let sent = f.provider.requests()[1].body.to_string();
    assert!(sent.contains("blue"), "{sent}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steer_without_a_tool_boundary_comes_back_as_pending_and_interrupt_cancels() {
    let f = fixture(vec![
        Scripted::Delayed(
            Duration::from_millis(400),
            Box::new(Scripted::text("answer")),
        ),
        Scripted::Delayed(Duration::from_secs(20), Box::new(Scripted::text("never"))),
    ]);
    let s = f
        .host
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    let run = f.host.start_run(&s, "go").unwrap();
    while run.status().state != RunState::Running {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(run.steer("  "), Err(crate::RunError::EmptySteer));
    run.steer("also this").unwrap();
    let end = run.finished().await;
    assert_eq!(
        (end.state, end.pending_steer.as_deref()),
        (RunState::Completed, Some("also this"))
    );
    assert_eq!(
        run.steer("late"),
        Err(crate::RunError::NotAcceptingSteer("completed"))
    );

    let slow = f.host.start_run(&s, "take your time").unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let asked = Instant::now();
    slow.interrupt();
    let end = slow.finished().await;
    assert_eq!(end.state, RunState::Cancelled);
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    let events = all_events(&slow).await;
    assert_eq!(events.last().map(|e| e.kind.name()), Some("run.cancelled"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_follows_the_confirmation_rules_and_returns_survivor_row_ids() {
    let f = fixture(vec![
        Scripted::text("a0"),
        Scripted::text("a1"),
        Scripted::text("a2"),
    ]);
    let s = f
        .host
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    for q in ["q0", "q1", "q2"] {
        f.host.start_run(&s, q).unwrap().finished().await;
    }
    let users: Vec<i64> = s
        .history()
        .iter()
        .filter(|h| h.message.role == herald_protocol::Role::User)
        .filter_map(|h| h.row_id)
        .collect();
    assert_eq!(users.len(), 3);
    let ask = |row: Option<i64>, ordinal: Option<serde_json::Value>, confirm: bool, empty: bool| {
        RewindRequest {
            truncate_before_row_id: row,
            truncate_before_user_ordinal: ordinal,
            confirm_truncate: confirm,
            confirm_empty_truncate: empty,
        }
    };
    let refused = [
        (ask(None, Some(json!(true)), true, false), "BadRewind"),
        (ask(None, None, true, false), "BadRewind"),
        (ask(Some(users[1]), None, false, false), "NotConfirmed"),
        (ask(Some(9999), None, true, false), "StaleTarget"),
        (ask(Some(users[1]), Some(json!(2)), true, false), "Disagree"),
        (ask(None, Some(json!(1)), true, false), "BadRewind"),
        (ask(Some(users[0]), None, true, false), "WouldEmpty"),
    ];
    for (request, want) in refused {
        let err = f.host.rewind(&s, &request).await.unwrap_err();
        assert!(format!("{err:?}").starts_with(want), "{request:?}: {err:?}");
    }
    assert_eq!(s.history().len(), 6, "nothing written when refused");
    let survivors = f
        .host
        .rewind(&s, &ask(Some(users[2]), Some(json!(2)), true, false))
        .await
        .unwrap();
    assert_eq!(survivors, users[..2]);
    let history = s.history();
    assert_eq!(history.len(), 4);
    assert_eq!(
        history[2].row_id,
        Some(users[1]),
        "surviving rows keep their ids"
    );
    // The next turn follows the survivors, and the rewound row is stale.
    f.provider.push(Scripted::text("again"));
    f.host.start_run(&s, "q2 again").unwrap().finished().await;
    let sent = f.provider.requests().last().unwrap().body["messages"].to_string();
    assert!(sent.contains("q1") && !sent.contains("\"q2\""), "{sent}");
    assert!(matches!(
        f.host
            .rewind(&s, &ask(Some(users[2]), None, true, false))
            .await,
        Err(SessionError::StaleTarget(_))
    ));
    // Branch and resume see the same rows.
    let (branch, title) = f
        .host
        .branch_session(s.id(), None, options(&[], Answers::Nobody))
        .await
        .unwrap();
    assert_eq!(title, "branch");
    assert_eq!(branch.history().len(), 6);
    let resumed = f
        .host
        .resume_session(s.id(), options(&[], Answers::Nobody))
        .await
        .unwrap();
    assert_eq!(resumed.history(), s.history());
    assert_eq!(resumed.system_prompt(), s.system_prompt());
    assert!(matches!(
        f.host
            .resume_session("nope", options(&[], Answers::Nobody))
            .await,
        Err(SessionError::NotFound(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_status_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let provider = FakeProvider::start(vec![
        Scripted::text("kept"),
        Scripted::Delayed(Duration::from_secs(30), Box::new(Scripted::text("never"))),
        Scripted::Delayed(Duration::from_secs(30), Box::new(Scripted::text("never"))),
    ]);
    let gone = "1:0:a-boot-long-gone";
    let crashed = host_owned(dir.path(), &provider.base_url, Default::default(), gone);
    let s = crashed
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    let done = crashed.start_run(&s, "q").unwrap();
    done.finished().await;
    let hanging = crashed.start_run(&s, "q2").unwrap();
    // A run of a process that still serves the same home (a gateway beside `herald rpc`).
    let live = host_on(dir.path(), &provider.base_url);
    let live_session = live
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    let serving = live.start_run(&live_session, "q3").unwrap();
    for run in [&hanging, &serving] {
        while run.status().state != RunState::Running {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    // A new process on the same home: the finished run's answer, the crashed process's
    // unfinished one failed, the live process's left running.
    let again = host_on(dir.path(), &provider.base_url);
    assert_eq!(again.recover().await.unwrap(), 1);
    let status = again.run_status(&done.id()).await.unwrap().unwrap();
    assert_eq!(
        (
            status.state,
            status.output.as_deref(),
            status.session_id.as_str()
        ),
        (RunState::Completed, Some("kept"), s.id())
    );
    let lost = again.run_status(&hanging.id()).await.unwrap().unwrap();
    assert_eq!(lost.state, RunState::Failed);
    assert!(lost.error.unwrap().contains("stopped"));
    let kept = again.run_status(&serving.id()).await.unwrap().unwrap();
    assert_eq!(kept.state, RunState::Running);
    assert!(again.run_status("run_nope").await.unwrap().is_none());
    hanging.interrupt();
    serving.interrupt();
}

/// Adds context to the turn's API call and rewrites the final answer.
struct Rewriter;

#[async_trait::async_trait]
impl herald_agent::Observer for Rewriter {
    fn name(&self) -> &str {
        "rewriter"
    }
    async fn pre_llm_call(&self, _payload: &serde_json::Value) -> Option<String> {
        Some("CONTEXT-FOR-THIS-CALL".into())
    }
    async fn transform_llm_output(&self, _payload: &serde_json::Value) -> Option<String> {
        Some("TRANSFORMED".into())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtimes_plugins_run_and_memory_and_disk_keep_what_they_made() {
    let dir = tempfile::tempdir().unwrap();
    let provider = FakeProvider::start(vec![Scripted::text("original")]);
    let plugins = herald_agent::Plugins {
        observers: vec![Arc::new(Rewriter)],
        ..Default::default()
    };
    let host = host_with(dir.path(), &provider.base_url, plugins);
    let s = host
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    let run = host.start_run(&s, "question").unwrap();
    let events = all_events(&run).await;
    assert_eq!(run.status().output.as_deref(), Some("TRANSFORMED"));
    let sent = provider.requests()[0].body["messages"].to_string();
    assert!(sent.contains("CONTEXT-FOR-THIS-CALL"), "{sent}");
    let memory: Vec<Option<String>> = s.history().into_iter().map(|h| h.message.content).collect();
    let disk: Vec<Option<String>> = host
        .store()
        .history(s.id().to_owned())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.content)
        .collect();
    assert_eq!(
        memory,
        [Some("question".to_owned()), Some("TRANSFORMED".to_owned())]
    );
    assert_eq!(memory, disk, "memory and disk agree");
    let saved: Vec<Option<String>> = events
        .into_iter()
        .filter_map(|e| match e.kind {
            RunEventKind::MessageSaved { message, .. } => Some(message.content),
            _ => None,
        })
        .collect();
    assert_eq!(saved, memory);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_registry_is_bounded_and_finished_runs_make_room() {
    let dir = tempfile::tempdir().unwrap();
    let provider = FakeProvider::start(vec![
        Scripted::Delayed(
            Duration::from_millis(300),
            Box::new(Scripted::text("first")),
        ),
        Scripted::text("second"),
    ]);
    let home = Home::new(dir.path());
    let yaml = format!("model:\n  default: m\n  base_url: {}\n", provider.base_url);
    let config = Config::from_yaml(&home, &yaml, &|_| None).unwrap();
    let runtime = Runtime::build(&home, &config, Platform::Cli, ModelChoice::default()).unwrap();
    let store = SessionStore::open(&dir.path().join("state.db")).unwrap();
    let host = Host::with_client(Arc::new(runtime), store, crate::LlmClient::new(), 1);
    let a = host
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    let b = host
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    let first = host.start_run(&a, "one").unwrap();
    assert!(matches!(
        host.start_run(&b, "two"),
        Err(SessionError::TooManyRuns(1))
    ));
    assert_eq!(host.live_runs(), 1);
    first.finished().await;
    let second = host.start_run(&b, "two").unwrap();
    assert_eq!(second.finished().await.output.as_deref(), Some("second"));
    assert!(
        host.run(&first.id()).is_none(),
        "the finished run made room"
    );
    let kept = host.run_status(&first.id()).await.unwrap().unwrap();
    assert_eq!(
        kept.output.as_deref(),
        Some("first"),
        "and is still read from state.db"
    );
    // A session whose runs are not kept is neither listed nor stored.
    let mut unlisted = options(&[], Answers::Nobody);
    unlisted.keep_runs = false;
    let c = host.open_session(unlisted).await.unwrap();
    provider.push(Scripted::text("third"));
    let third = host.start_run(&c, "three").unwrap();
    assert_eq!(third.finished().await.output.as_deref(), Some("third"));
    assert!(host.run_status(&third.id()).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_cap_the_least_recently_used_idle_conversation_is_closed_and_reopens() {
    let f = fixture(vec![]);
    let conversations: crate::Conversations<()> = crate::Conversations::new(f.host.clone());
    assert_eq!(f.host.runtime().max_live_sessions, 16, "Hermes's default");
    let open = || async {
        f.host
            .open_session(options(&[], Answers::Nobody))
            .await
            .unwrap()
    };
    let mut ids = Vec::new();
    for _ in 0..16 {
        ids.push(
            conversations
                .add(None, open().await, ())
                .unwrap()
                .id
                .clone(),
        );
    }
    // The first is used again (and switches its model), so the second is the least
    // recently used.
    let first = conversations.get(&ids[0]).unwrap();
    assert!(matches!(
        first
            .conversation
            .submit(crate::Op::SetModel("other".into()))
            .await,
        Ok(crate::Outcome::ModelSet(_))
    ));
    assert!(conversations.room().is_ok(), "an idle one can be closed");
    let seventeenth = conversations.add(None, open().await, ()).unwrap();
    assert_eq!(conversations.all().len(), 16);
    assert!(
        conversations.get(&ids[1]).is_none(),
        "the least recently used was closed"
    );
    let closed = conversations.closed(&ids[1]).unwrap();
    assert!(conversations.get(&ids[0]).is_some());
    // Reopened under its id, from the store, for its client's next call.
    let stored = closed.stored.clone();
    let back = conversations
        .reopen(&ids[1], options(&[], Answers::Nobody), ())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (back.id.as_str(), back.conversation.session().id()),
        (ids[1].as_str(), stored.as_str())
    );
    assert!(conversations.closed(&ids[1]).is_none());
    // Closing it made room by closing another; the model a closed one had comes back.
    let model_of_first = conversations.get(&ids[0]).map(|l| l.conversation.model());
    assert_eq!(model_of_first.as_deref(), Some("other"));
    // A conversation with a turn (or a queued prompt) is never closed: when every one
    // has one, the cap refuses.
    for live in conversations.all() {
        let mut turns = crate::conversation::lock(&live.conversation.inner.turns);
        turns.queue.push_back("waiting".into());
    }
    assert!(conversations.room().is_err());
    assert!(conversations.add(None, open().await, ()).is_err());
    assert!(conversations.close(&seventeenth.id));
    assert!(!conversations.close(&seventeenth.id), "closed once");
    let live = conversations
        .add(Some("mine".into()), open().await, ())
        .unwrap();
    assert_eq!(live.id, "mine");
    assert!(
        conversations
            .reopen("never-closed", options(&[], Answers::Nobody), ())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_queues_refuses_a_busy_model_switch_and_sends_attached_images_as_parts() {
    let f = fixture(vec![
        Scripted::Delayed(
            std::time::Duration::from_millis(500),
            Box::new(Scripted::text("one")),
        ),
        Scripted::text("two"),
    ]);
    let session = f
        .host
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    let c = crate::Conversation::single(f.host.clone(), session);
    let png = f.dir.path().join("cat.png");
    std::fs::write(&png, [0x89, b'P', b'N', b'G']).unwrap();
    assert_eq!(c.attach(png.display().to_string()), 1);
    let mut stream = c.listen().await;
    let run = c.prompt_now("look".into()).await.unwrap();
    assert!(c.busy());
    assert!(matches!(
        c.switch_model("other").await,
        Err(crate::SwitchRefused::Busy)
    ));
    assert!(matches!(
        c.command("/model other").await,
        Err(crate::SwitchRefused::Busy)
    ));
    assert!(matches!(
        c.enqueue("next".into()).await,
        Ok(crate::turns::Placed::Queued(1))
    ));
    run.finished().await;
    // The queued prompt runs when the turn ends, on the same stream.
    let turns = turns_until_idle(&mut stream).await;
    assert_eq!(turns, [(false, "one".into()), (true, "two".into())]);
    drop(stream);
    let sent = f.provider.requests()[0].body["messages"][1]["content"].clone();
    assert_eq!(sent[0]["type"], "text");
    let text = sent[0]["text"].as_str().unwrap();
    assert!(text.starts_with("look\n\n[Image attached at: "), "{text}");
    assert_eq!(
        sent[1],
        serde_json::json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}})
    );
    assert_eq!(c.switch_model("other").await.unwrap(), "other");
    assert_eq!(
        c.command("/model").await.unwrap(),
        crate::Reply::Output("Model: other".into())
    );
    assert_eq!(c.command("hello").await.unwrap(), crate::Reply::NotACommand);
    assert!(matches!(
        c.command("/nope").await.unwrap(),
        crate::Reply::Unknown { .. }
    ));
}

/// The turns a conversation's stream carries until it is idle: whether each came off
/// the queue, and its answer (or its state when it did not complete).
async fn turns_until_idle(stream: &mut crate::Listener<'_>) -> Vec<(bool, String)> {
    use crate::ConversationEvent;
    let mut turns = Vec::new();
    let mut queued = false;
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), stream.next_event()).await;
        match next
            .expect("the conversation went idle")
            .expect("stream open")
        {
            ConversationEvent::TurnStarted { queued: q, .. } => queued = q,
            ConversationEvent::Run(e) => {
                if let RunEventKind::Finished(end) = e.kind {
                    let said = match end.state {
                        RunState::Completed => end.output.unwrap_or_default(),
                        other => other.as_str().to_owned(),
                    };
                    turns.push((queued, said));
                }
            }
            ConversationEvent::TurnFailed(e) => turns.push((true, format!("failed: {e}"))),
            ConversationEvent::Idle => return turns,
        }
    }
}

/// An edit rule that lets through edits of `free.txt` alone.
struct OnlyFree;

impl crate::EditRule for OnlyFree {
    fn approves(&self, _tool: &str, args: &serde_json::Value) -> bool {
        args["path"] == "free.txt"
    }
}

/// The next edit approval asked of the door: its request id and the tool's path.
async fn next_edit(rx: &mut crate::runs::RunEvents) -> (String, String) {
    while let Some(e) = rx.recv().await {
        if let RunEventKind::EditApprovalRequested {
            request_id,
            arguments,
            ..
        } = e.kind
        {
            return (request_id, arguments["path"].as_str().unwrap().to_owned());
        }
    }
    panic!("no edit approval asked");
}

#[tokio::test]
async fn edits_the_rule_does_not_let_through_wait_in_the_pending_table_like_commands() {
    let write = |call: &str, path: &str| {
        let args = json!({"path": path, "content": "new"}).to_string();
        Scripted::tool_calls(&[(call, "write_file", args.as_str())])
    };
    let f = fixture(vec![
        write("c1", "free.txt"),
        write("c2", "asked.txt"),
        write("c3", "denied.txt"),
        Scripted::text("done"),
    ]);
    let mut opts = options(&["write_file"], Answers::ByRequest);
    opts.edits = Some(Arc::new(OnlyFree));
    let session = f.host.open_session(opts).await.unwrap();
    let run = f.host.start_run(&session, "write them").unwrap();
    let mut rx = run.take_events().unwrap();
    let (asked, path) = next_edit(&mut rx).await;
    assert_eq!(path, "asked.txt", "free.txt went through unasked");
    assert!(f.dir.path().join("free.txt").exists());
    assert_eq!(run.status().state, RunState::WaitingForApproval);
    assert_eq!(run.approve(Some(&asked), Decision::Once, false), Ok(1));
    let (denied, path) = next_edit(&mut rx).await;
    assert_eq!(path, "denied.txt");
    assert!(f.dir.path().join("asked.txt").exists(), "allowed");
    assert_eq!(run.approve(Some(&denied), Decision::Deny, false), Ok(1));
    assert_eq!(run.finished().await.state, RunState::Completed);
    assert!(!f.dir.path().join("denied.txt").exists(), "denied");
    let sent = f.provider.requests()[3].body["messages"].clone();
    assert!(
        sent.to_string().contains("denied the edit of denied.txt"),
        "{sent}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_on_a_conversation_answer_with_their_outcomes() {
    use crate::{Op, OpError, Outcome};
    let f = fixture(vec![
        Scripted::Delayed(Duration::from_millis(400), Box::new(Scripted::text("one"))),
        Scripted::text("two"),
    ]);
    let session = f
        .host
        .open_session(options(&[], Answers::ByRequest))
        .await
        .unwrap();
    let c = crate::Conversation::single(f.host.clone(), session);
    let approve = || Op::Approve {
        request_id: None,
        decision: Decision::Once,
        all: false,
    };
    assert!(matches!(
        c.submit(approve()).await,
        Err(OpError::NothingRunning)
    ));
    let Ok(Outcome::Started(run)) = c.submit(Op::Prompt("first".into())).await else {
        panic!("no turn started");
    };
    assert!(matches!(
        c.submit(Op::Prompt("again".into())).await,
        Err(OpError::Session(SessionError::Busy(_)))
    ));
    assert!(matches!(
        c.submit(Op::Queue("second".into())).await,
        Ok(Outcome::Queued(1))
    ));
    assert!(matches!(
        c.submit(Op::SetModel("other".into())).await,
        Err(OpError::Switch(crate::SwitchRefused::Busy))
    ));
    assert!(matches!(
        c.submit(approve()).await,
        Err(OpError::Run(crate::RunError::NotPending))
    ));
    run.finished().await;
    let turns = turns_until_idle(&mut c.listen().await).await;
    assert_eq!(turns, [(false, "one".into()), (true, "two".into())]);
    let title = c.submit(Op::Title("Two turns".into())).await;
    assert!(matches!(title, Ok(Outcome::Titled(t)) if t == "Two turns"));
    let context = c.submit(Op::Command("/context".into())).await;
    assert!(
        matches!(&context, Ok(Outcome::Reply(crate::Reply::Output(t))) if t == "4 messages in this session."),
        "{context:?}"
    );
    assert!(matches!(c.submit(Op::Undo).await, Ok(Outcome::Undone(2))));
    assert!(
        matches!(c.submit(Op::SetModel("other".into())).await, Ok(Outcome::ModelSet(m)) if m == "other")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_a_crash_left_mid_tool_goes_on_with_a_stub_sent_and_nothing_stored() {
    use herald_store::sessions::NewMessage;
    let f = fixture(vec![Scripted::text("went on")]);
    let s = f
        .host
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    // What a process killed mid-tool leaves: the call, and no result.
    let message = |role: &str, content: Option<&str>, calls: Option<&str>| NewMessage {
        role: role.into(),
        content: content.map(str::to_owned),
        tool_calls: calls.map(str::to_owned),
        ..Default::default()
    };
    let calls = r#"[{"id":"cut","type":"function","function":{"name":"terminal","arguments":"{\"command\":\"sleep 120\"}"}}]"#;
    let store = f.host.store();
    store
        .append(s.id().to_owned(), message("user", Some("wait"), None))
        .await
        .unwrap();
    store
        .append(s.id().to_owned(), message("assistant", None, Some(calls)))
        .await
        .unwrap();
    let again = f
        .host
        .resume_session(s.id(), options(&[], Answers::Nobody))
        .await
        .unwrap();
    let run = f.host.start_run(&again, "go on").unwrap();
    run.finished().await;
    assert_eq!(run.status().output.as_deref(), Some("went on"));
    let sent = f.provider.requests()[0].body["messages"].clone();
    let roles: Vec<&str> = sent
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "user"],
        "{sent}"
    );
    assert_eq!(sent[3]["tool_call_id"], "cut");
    assert_eq!(sent[3]["content"], herald_agent::history_repair::UNANSWERED);
    let stored = f.host.store().history(s.id().to_owned()).await.unwrap();
    assert!(
        stored.iter().all(|m| m.role != "tool"),
        "the stub is never stored: {stored:?}"
    );
    drop(f.dir);
}

/// Waits until the provider has been asked `n` times.
async fn asked(provider: &FakeProvider, n: usize) {
    let started = Instant::now();
    while provider.requests().len() < n {
        assert!(started.elapsed() < Duration::from_secs(10), "never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The lifecycle's rules, in one place for every door: a busy prompt per
/// `display.busy_input_mode`, what the queue does after an interrupt, a cancel and a
/// stop, and what `/new` carries over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_turn_lifecycle_rules_hold_for_every_door() {
    use crate::ops::Opening;
    use crate::{Op, Outcome, Steered};
    use herald_config::default_config::BusyInputMode;
    let slow =
        |text: &str| Scripted::Delayed(Duration::from_millis(1500), Box::new(Scripted::text(text)));
    let f = fixture(vec![
        slow("never"),
        Scripted::text("Second."),
        Scripted::Delayed(Duration::from_millis(600), Box::new(Scripted::text("A"))),
        Scripted::text("B"),
        slow("never"),
        Scripted::text("D"),
        Scripted::text("E"),
        slow("never"),
        Scripted::tool_calls(&[("s1", "terminal", r#"{"command": "sleep 1"}"#)]),
        Scripted::text("Steered."),
    ]);
    let session = f
        .host
        .open_session(options(&["terminal"], Answers::Nobody))
        .await
        .unwrap();
    let c = crate::Conversation::single(f.host.clone(), session);
    let mut stream = c.listen().await;
    let submit = |text: &str| Op::Submit(text.into());
    // interrupt (the default): queued, the turn cut short, then it runs.
    assert!(matches!(
        c.submit(submit("one")).await,
        Ok(Outcome::Started(_))
    ));
    asked(&f.provider, 1).await;
    assert!(matches!(
        c.submit(submit("two")).await,
        Ok(Outcome::Queued(1))
    ));
    let turns = turns_until_idle(&mut stream).await;
    assert_eq!(
        turns,
        [(false, "cancelled".into()), (true, "Second.".into())]
    );
    // queue: the turn goes on, the prompt after it.
    f.host.runtime().set_busy_input_mode(BusyInputMode::Queue);
    c.submit(submit("a")).await.unwrap();
    asked(&f.provider, 3).await;
    assert!(matches!(
        c.submit(submit("b")).await,
        Ok(Outcome::Queued(1))
    ));
    let turns = turns_until_idle(&mut stream).await;
    assert_eq!(turns, [(false, "A".into()), (true, "B".into())]);
    // A cancel holds the queue: the next prompt runs after the held ones, in order.
    c.submit(submit("c")).await.unwrap();
    asked(&f.provider, 5).await;
    assert!(matches!(
        c.submit(Op::Queue("d".into())).await,
        Ok(Outcome::Queued(1))
    ));
    c.submit(Op::Cancel).await.unwrap();
    assert_eq!(
        turns_until_idle(&mut stream).await,
        [(false, "cancelled".into())]
    );
    assert_eq!(c.queued(), 1, "held");
    assert!(matches!(
        c.submit(submit("e")).await,
        Ok(Outcome::Started(_))
    ));
    let turns = turns_until_idle(&mut stream).await;
    assert_eq!(turns, [(false, "D".into()), (true, "E".into())]);
    let sent = f.provider.requests()[5].body["messages"].to_string();
    assert!(sent.contains("\"d\""), "the held prompt ran first: {sent}");
    // The queue is bounded: past MAX_QUEUED a prompt is refused as busy.
    c.submit(submit("f0")).await.unwrap();
    asked(&f.provider, 8).await;
    for n in 0..crate::turns::MAX_QUEUED {
        c.submit(Op::Queue(format!("q{n}").into())).await.unwrap();
    }
    let full = c.submit(Op::Queue("one too many".into())).await;
    assert!(
        matches!(
            full,
            Err(crate::OpError::Session(SessionError::QueueFull(64)))
        ),
        "{full:?}"
    );
    // A stop drops the queue.
    c.submit(Op::Stop).await.unwrap();
    assert_eq!(
        turns_until_idle(&mut stream).await,
        [(false, "cancelled".into())]
    );
    assert_eq!(c.queued(), 0, "dropped");
    // steer: into the running turn at its next tool result.
    f.host.runtime().set_busy_input_mode(BusyInputMode::Steer);
    c.submit(submit("h")).await.unwrap();
    asked(&f.provider, 9).await;
    let steered = c.submit(submit("also this")).await;
    assert!(
        matches!(steered, Ok(Outcome::Steered(Steered::Queued))),
        "{steered:?}"
    );
    assert_eq!(
        turns_until_idle(&mut stream).await,
        [(false, "Steered.".into())]
    );
    let last = f.provider.requests().pop().unwrap().body["messages"].to_string();
    assert!(last.contains("also this"), "{last}");
    // /new carries the model over; the history starts afresh.
    c.submit(Op::SetModel("other".into())).await.unwrap();
    let before = c.session().id().to_owned();
    let fresh = c
        .submit(Op::New(Opening(options(&[], Answers::Nobody))))
        .await;
    let Ok(Outcome::Switched { id, messages: 0 }) = fresh else {
        panic!("{fresh:?}");
    };
    assert_ne!(id, before);
    assert_eq!(c.model(), "other");
    // Closed: the stream ends.
    c.submit(Op::Close).await.unwrap();
    assert!(stream.next_event().await.is_none());
}

/// A chat platform's wire, for the commands only that door offers.
struct PlatformWire;

impl crate::DoorWire for PlatformWire {
    const DOOR: crate::Door = crate::Door::Platform;
    type Memo = ();
    fn memo(&self) {}
}

/// Waits on the stream for the running turn's approval request.
async fn approval_asked(stream: &mut crate::Listener<'_>) {
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), stream.next_event()).await;
        if let crate::ConversationEvent::Run(e) = next.expect("asked").expect("open")
            && matches!(e.kind, RunEventKind::ApprovalRequested { .. })
        {
            return;
        }
    }
}

/// The commands a chat platform has besides the shared ones: `/approve`, `/deny` with a
/// reason the model reads, `/stop` dropping the queue, `/status`, `/usage`,
/// `/sethome`; the other doors do not offer them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_platform_conversation_answers_approve_deny_stop_status_and_usage() {
    use crate::{LiveId, Op, Outcome, Reply};
    let rm = |call: &str, file: &str| {
        let args = json!({"command": format!("rm -f {file}")}).to_string();
        Scripted::tool_calls(&[(call, "terminal", args.as_str())])
    };
    let f = fixture(vec![
        rm("c1", "one.txt"),
        Scripted::text("removed"),
        rm("c2", "two.txt"),
        Scripted::text("kept it"),
        Scripted::Delayed(
            Duration::from_millis(1500),
            Box::new(Scripted::text("never")),
        ),
    ]);
    for name in ["one.txt", "two.txt"] {
        std::fs::write(f.dir.path().join(name), "x").unwrap();
    }
    let set = crate::Conversations::<PlatformWire>::new(f.host.clone());
    let mut opts = options(&["terminal"], Answers::ByRequest);
    opts.cwd = Some(f.dir.path().to_path_buf());
    let live = set
        .open(LiveId::Given("telegram:42".into()), opts, PlatformWire)
        .await
        .unwrap();
    assert_eq!(live.id, "telegram:42");
    let c = &live.conversation;
    let said = |r: Result<Outcome, crate::OpError>| match r {
        Ok(Outcome::Reply(Reply::Output(text))) => text,
        other => panic!("{other:?}"),
    };
    let command = |line: &str| c.submit(Op::Command(line.into()));
    let mut stream = c.listen().await;
    assert_eq!(
        said(command("/approve").await),
        "No pending command to approve."
    );
    c.submit(Op::Submit("clean up".into())).await.unwrap();
    approval_asked(&mut stream).await;
    // Once: the next `rm` asks again.
    assert_eq!(
        said(command("/approve").await),
        "✅ Command approved. The agent is resuming..."
    );
    assert_eq!(
        turns_until_idle(&mut stream).await,
        [(false, "removed".into())]
    );
    assert!(!f.dir.path().join("one.txt").exists());
    c.submit(Op::Submit("and that one".into())).await.unwrap();
    approval_asked(&mut stream).await;
    assert_eq!(
        said(command("/deny it is still needed").await),
        "❌ Command denied. Reason relayed to the agent: \"it is still needed\""
    );
    assert_eq!(
        turns_until_idle(&mut stream).await,
        [(false, "kept it".into())]
    );
    assert!(f.dir.path().join("two.txt").exists());
    let last = f.provider.requests()[3].body["messages"].to_string();
    assert!(last.contains("it is still needed"), "{last}");
    let status = said(command("/status").await);
    assert!(
        status.contains("Running: no") && status.contains("Model: m (auto)"),
        "{status}"
    );
    let usage = said(command("/usage").await);
    assert!(usage.contains("over 4 API calls"), "{usage}");
    assert_eq!(said(command("/stop").await), "No active task to stop.");
    c.submit(Op::Submit("slow".into())).await.unwrap();
    asked(&f.provider, 5).await;
    c.submit(Op::Queue("waiting".into())).await.unwrap();
    assert_eq!(
        said(command("/stop").await),
        "⚡ Stopped. You can continue this session."
    );
    assert_eq!(
        turns_until_idle(&mut stream).await,
        [(false, "cancelled".into())]
    );
    assert_eq!(c.queued(), 0);
    assert!(matches!(
        command("/sethome").await,
        Ok(Outcome::Reply(Reply::SetHome))
    ));
    // A door that does not offer a command does not answer it.
    let chat = crate::Conversation::single(f.host.clone(), c.session());
    assert!(matches!(
        chat.submit(Op::Command("/approve".into())).await,
        Ok(Outcome::Reply(Reply::Unknown { .. }))
    ));
}

/// rpc-gateway.md §3.1's hazard: a conversation is idle before its turn's end is told,
/// so a prompt sent on seeing it starts a turn instead of being taken for a busy one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conversation_is_idle_before_its_turns_end_is_told() {
    use crate::{ConversationEvent, Op, Outcome};
    let f = fixture(vec![Scripted::text("one"), Scripted::text("two")]);
    let session = f
        .host
        .open_session(options(&[], Answers::Nobody))
        .await
        .unwrap();
    let c = crate::Conversation::single(f.host.clone(), session);
    let mut stream = c.listen().await;
    c.submit(Op::Submit("first".into())).await.unwrap();
    loop {
        if let Some(ConversationEvent::Run(e)) = stream.next_event().await
            && matches!(e.kind, RunEventKind::Finished(_))
        {
            break;
        }
    }
    assert!(!c.busy(), "idle when the end is told");
    let again = c.submit(Op::Submit("second".into())).await;
    assert!(matches!(again, Ok(Outcome::Started(_))), "{again:?}");
    // The first turn's idle, then the second turn.
    assert!(turns_until_idle(&mut stream).await.is_empty());
    assert_eq!(turns_until_idle(&mut stream).await, [(false, "two".into())]);
}

/// A `/model` switch is kept with the stored session and restored when it is resumed
/// ("kept afterwards"); a session never switched follows the configured model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_switch_is_stored_with_the_session_and_restored_on_resume() {
    use crate::{LiveId, Op};
    let f = fixture(vec![]);
    let set = crate::Conversations::<()>::new(f.host.clone());
    let open = || set.open(LiveId::Short, options(&[], Answers::Nobody), ());
    let (switched, plain) = (open().await.unwrap(), open().await.unwrap());
    switched
        .conversation
        .submit(Op::SetModel("other".into()))
        .await
        .unwrap();
    let stored = |l: &crate::Live<()>| l.conversation.session().id().to_owned();
    let (a, b) = (stored(&switched), stored(&plain));
    assert!(set.close(&switched.id) && set.close(&plain.id));
    let opts = || options(&[], Answers::Nobody);
    let again = set.resume(LiveId::Stored, &a, opts(), ()).await.unwrap();
    assert_eq!(again.conversation.model(), "other");
    let other = set.resume(LiveId::Stored, &b, opts(), ()).await.unwrap();
    assert_eq!(other.conversation.model(), "m");
    let row = f.host.store().session(a).await.unwrap().unwrap();
    assert_eq!(row.model.as_deref(), Some("other"));
}

#[tokio::test]
async fn config_set_yolo_answers_the_yolo_that_now_holds() {
    use crate::{Op, Outcome, Setting};
    let f = fixture(vec![]);
    let session = f
        .host
        .open_session(options(&[], Answers::ByRequest))
        .await
        .unwrap();
    let c = crate::Conversation::single(f.host.clone(), session);
    let mut answers = Vec::new();
    for setting in [None, None, Some(true), Some(true), Some(false)] {
        match c.submit(Op::Set(Setting::Yolo(setting))).await {
            Ok(Outcome::Set(value)) => answers.push(value),
            _ => panic!("yolo not set"),
        }
    }
    assert_eq!(answers, ["1", "0", "1", "1", "0"]);
    assert!(!c.yolo());
}

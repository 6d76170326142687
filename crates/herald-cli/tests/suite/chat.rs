//! `herald chat` end to end: the real binary against the fake provider.

use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn home_for(provider: &FakeProvider) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "model:\n  default: fake-model\n  base_url: {}\nagent:\n  api_max_retries: 2\n",
            provider.base_url
        ),
    )
    .unwrap();
    home
}

fn chat(home: &std::path::Path, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut child = Command::new(BIN)
        .arg("chat")
        .args(args)
        .env("HERALD_HOME", home)
        .env("HERALD_RETRY_BASE_MS", "10")
        .env_remove("RUST_LOG")
        .current_dir(home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn quiet_query_prints_only_the_answer() {
    let provider = FakeProvider::start(vec![Scripted::text("The answer is 42.")]);
    let home = home_for(&provider);
    let (code, out, err) = chat(home.path(), &["-Q", "-q", "what is it?"], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "The answer is 42.\n");
    let id = err
        .lines()
        .find_map(|l| l.strip_prefix("session_id: "))
        .unwrap();
    let re = regex::Regex::new(r"^\d{8}_\d{6}_[0-9a-f]{6}$").unwrap();
    assert!(re.is_match(id), "{id}");
    let req = &provider.requests()[0].body;
    assert_eq!(req["model"], "fake-model");
    assert_eq!(
        req["messages"][1],
        json!({"role": "user", "content": "what is it?"})
    );
    let tools: Vec<&str> = req["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"terminal") && tools.contains(&"read_file") && tools.contains(&"clarify"),
        "{tools:?}"
    );
    assert!(
        !tools.contains(&"web_search"),
        "no search backend is configured"
    );
}

#[test]
fn a_tool_round_trip_and_streamed_output() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[(
            "c1",
            "terminal",
            r#"{"command": "echo tool-ran > proof.txt"}"#,
        )]),
        Scripted::text("Wrote the file."),
    ]);
    let home = home_for(&provider);
    let (code, out, err) = chat(home.path(), &["-q", "make a file"], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "Wrote the file.");
    assert!(err.contains("⚙ terminal"), "{err}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("proof.txt")).unwrap(),
        "tool-ran\n"
    );
}

#[test]
fn toolsets_model_flags_and_max_turns() {
    let provider = FakeProvider::start(vec![Scripted::text("no tools")]);
    let home = home_for(&provider);
    let (code, _, err) = chat(
        home.path(),
        &["-Q", "-t", "nonsense", "-m", "other-model", "-q", "x"],
        None,
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("unknown toolset `nonsense`"), "{err}");
    let req = &provider.requests()[0].body;
    assert!(
        req.get("tools").is_none(),
        "only unknown toolsets means no tools"
    );
    assert_eq!(req["model"], "other-model");

    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::tool_calls(&[(
        "l",
        "terminal",
        r#"{"command": "true"}"#,
    )]));
    let home = home_for(&provider);
    let (code, _, _) = chat(home.path(), &["-Q", "--max-turns", "1", "-q", "loop"], None);
    assert_eq!(
        code, 1,
        "the summary call answered with a tool call, not text"
    );
    let reqs = provider.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1].body.get("tools").is_none());
}

#[test]
fn failures_exit_non_zero() {
    let provider = FakeProvider::start(vec![Scripted::Status(
        401,
        r#"{"error": {"message": "invalid key"}}"#.into(),
    )]);
    let home = home_for(&provider);
    let (code, out, err) = chat(home.path(), &["-Q", "-q", "hi"], None);
    assert_eq!((code, out.as_str()), (1, ""));
    assert!(err.contains("invalid key"), "{err}");

    let provider = FakeProvider::start(vec![
        Scripted::text(""),
        Scripted::text(""),
        Scripted::text(""),
    ]);
    let home = home_for(&provider);
    let (code, _, err) = chat(home.path(), &["-Q", "-q", "hi"], None);
    assert_eq!(code, 1, "{err}");

    // Unknown skills only: nothing is sent.
    let provider = FakeProvider::start(vec![Scripted::text("x")]);
    let home = home_for(&provider);
    let (code, _, err) = chat(home.path(), &["-s", "ghost", "-q", "hi"], None);
    assert_eq!(code, 1);
    assert!(err.contains("skill `ghost` not found"), "{err}");
    assert!(provider.requests().is_empty());

    // No provider configured at all.
    let empty = tempfile::tempdir().unwrap();
    let (code, _, err) = chat(empty.path(), &["-q", "hi"], None);
    assert_eq!(code, 1);
    assert!(err.contains("no model provider is configured"), "{err}");
}

#[test]
fn skills_and_soul_reach_the_system_prompt() {
    let provider = FakeProvider::start(vec![Scripted::text("ok")]);
    let home = home_for(&provider);
    std::fs::create_dir_all(home.path().join("skills/devops/deploy-check")).unwrap();
    std::fs::write(
        home.path().join("skills/devops/deploy-check/SKILL.md"),
        "---\nname: deploy-check\n---\nAlways check the canary.",
    )
    .unwrap();
    std::fs::write(home.path().join("SOUL.md"), "You are Ada.").unwrap();
    let (code, _, err) = chat(
        home.path(),
        &["-Q", "-s", "deploy-check,missing", "-q", "deploy"],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let system = provider.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.starts_with("You are Ada."), "{system}");
    assert!(system.contains("Always check the canary."), "{system}");
    assert!(
        !system.contains("name: deploy-check"),
        "front matter is not part of the skill body"
    );
    assert!(
        system.contains("- deploy-check:"),
        "the skills index lists installed skills: {system}"
    );
}

#[test]
fn sigterm_interrupts_and_kills_the_running_command() {
    let provider = FakeProvider::start(vec![Scripted::tool_calls(&[(
        "s",
        "terminal",
        r#"{"command": "sleep 3; touch late.txt"}"#,
    )])]);
    let home = home_for(&provider);
    let mut child = Command::new(BIN)
        .args(["chat", "-Q", "--yolo", "-q", "sleep"])
        .env("HERALD_HOME", home.path())
        .current_dir(home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let started = Instant::now();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let code = wait_timeout(&mut child, Duration::from_secs(10));
    assert_eq!(code, Some(130));
    assert!(started.elapsed() < Duration::from_secs(2));
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !home.path().join("late.txt").exists(),
        "the running command must be killed too"
    );
}

#[test]
fn a_line_based_session_keeps_history_and_switches_models() {
    let provider = FakeProvider::start(vec![
        Scripted::text("first answer"),
        Scripted::text("second answer"),
        Scripted::text("fresh"),
    ]);
    let home = home_for(&provider);
    let (code, out, err) = chat(
        home.path(),
        &[],
        Some("hello\n/model switched-model\nand again\n/new\nstart over\n/quit\n"),
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("first answer") && out.contains("second answer") && out.contains("fresh"),
        "{out}"
    );
    let reqs = provider.requests();
    let second: Vec<Value> = reqs[1].body["messages"].as_array().unwrap().clone();
    assert_eq!(reqs[1].body["model"], "switched-model");
    assert_eq!(second[1]["content"], "hello");
    assert_eq!(second[2]["content"], "first answer");
    assert_eq!(second[3]["content"], "and again");
    assert_eq!(
        reqs[2].body["messages"].as_array().unwrap().len(),
        2,
        "/new starts over"
    );
}

fn session_of(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("session_id: "))
        .unwrap()
        .to_owned()
}

#[test]
fn sessions_are_saved_and_resumed_with_a_byte_stable_system_prompt() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "terminal", r#"{"command": "echo seven"}"#)]),
        Scripted::text("I will remember 7."),
        Scripted::text("It was 7."),
        Scripted::text("Still 7."),
    ]);
    let home = home_for(&provider);
    let (code, _, err) = chat(home.path(), &["-Q", "-q", "remember 7"], None);
    assert_eq!(code, 0, "{err}");
    let id = session_of(&err);
    // Someone changes SOUL.md: a resumed session keeps its stored prompt.
    std::fs::write(home.path().join("SOUL.md"), "A different identity.").unwrap();
    let (code, out, err) = chat(home.path(), &["-Q", "-r", &id, "-q", "what number?"], None);
    assert_eq!((code, out.trim()), (0, "It was 7."), "{err}");
    assert_eq!(session_of(&err), id);
    let reqs = provider.requests();
    let first = reqs[0].body["messages"].as_array().unwrap().clone();
    let resumed = reqs[2].body["messages"].as_array().unwrap().clone();
    assert_eq!(
        resumed[0], first[0],
        "the system prompt is byte for byte the same"
    );
    let roles: Vec<&str> = resumed
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        vec!["system", "user", "assistant", "tool", "assistant", "user"]
    );
    assert_eq!(resumed[2]["tool_calls"][0]["id"], "c1");
    assert_eq!(resumed[3]["tool_call_id"], "c1");
    // -c continues the latest CLI session.
    let (code, out, err) = chat(home.path(), &["-Q", "-c", "-q", "and now?"], None);
    assert_eq!((code, out.trim()), (0, "Still 7."), "{err}");
    assert_eq!(session_of(&err), id);
    // The store uses Hermes's table and column names.
    let check = Command::new("python3")
        .args(["-c", &format!(
            "import sqlite3; c=sqlite3.connect({:?}); print(c.execute('select count(*), max(message_count) from sessions').fetchone()); print([r[0] for r in c.execute(\"select role from messages where session_id=? and active=1 order by id\", ({:?},))])",
            home.path().join("state.db").display().to_string(), id
        )])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&check.stdout).into_owned();
    assert_eq!(
        text,
        "(1, 8)\n['user', 'assistant', 'tool', 'assistant', 'user', 'assistant', 'user', 'assistant']\n"
    );
}

#[test]
fn unknown_resume_ids_fail_before_any_model_call() {
    let provider = FakeProvider::start(vec![Scripted::text("x")]);
    let home = home_for(&provider);
    let (code, _, err) = chat(
        home.path(),
        &["-r", "20990101_000000_ffffff", "-q", "hi"],
        None,
    );
    assert_eq!(code, 1);
    assert!(err.contains("no session with id"), "{err}");
    let (code, _, err) = chat(home.path(), &["-c", "-q", "hi"], None);
    assert_eq!(code, 1);
    assert!(err.contains("no earlier CLI session"), "{err}");
    assert!(provider.requests().is_empty());
}

#[test]
fn web_tools_are_offered_only_with_a_search_backend() {
    let provider = FakeProvider::start(vec![Scripted::text("ok")]);
    let home = home_for(&provider);
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!("{config}web:\n  searxng_url: http://127.0.0.1:9/\n"),
    )
    .unwrap();
    let (code, _, err) = chat(home.path(), &["-Q", "-q", "search"], None);
    assert_eq!(code, 0, "{err}");
    let tools: Vec<String> = provider.requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        tools.contains(&"web_search".to_owned()) && tools.contains(&"web_extract".to_owned()),
        "{tools:?}"
    );
}

/// Runs `herald chat` on a pseudo-terminal, typing `input` a line every 400 ms.
fn chat_on_pty(home: &std::path::Path, input: &str) -> (Option<i32>, String) {
    let lines: Vec<String> = input.lines().map(|l| format!("{l}\r")).collect();
    let steps: Vec<(u64, &str)> = lines.iter().map(|l| (400, l.as_str())).collect();
    let (code, out, _) = on_pty(home, "chat", &steps);
    (code, out)
}

#[test]
fn a_terminal_session_asks_for_approval() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("a1", "terminal", r#"{"command": "rm -rf junk"}"#)]),
        Scripted::text("Removed the junk."),
        Scripted::tool_calls(&[("a2", "terminal", r#"{"command": "rm -rf keep"}"#)]),
        Scripted::text("Left it alone."),
        Scripted::tool_calls(&[(
            "q1",
            "clarify",
            r#"{"question": "Which color?", "choices": ["red", "blue"]}"#,
        )]),
        Scripted::text("Blue it is."),
    ]);
    let home = home_for(&provider);
    std::fs::create_dir(home.path().join("junk")).unwrap();
    std::fs::create_dir(home.path().join("keep")).unwrap();
    let (code, out) = chat_on_pty(
        home.path(),
        "delete junk\no\ndelete keep\nd\npick a color\n2\n/quit\n",
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("approval needed"), "{out}");
    assert!(
        out.contains("Removed the junk.") && out.contains("Left it alone."),
        "{out}"
    );
    assert!(
        !home.path().join("junk").exists(),
        "approved once: the command ran"
    );
    assert!(
        home.path().join("keep").exists(),
        "denied: the command did not run"
    );
    let denied = provider.requests()[3].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert!(
        denied["content"].as_str().unwrap().contains("DENIED"),
        "{denied}"
    );
    assert!(
        home.path().join(".chat_history").exists(),
        "line history is kept"
    );
}

#[test]
fn always_approvals_are_kept_apart_for_attended_runs_only() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("x1", "terminal", r#"{"command": "rm -rf cache1"}"#)]),
        Scripted::text("first"),
    ]);
    let home = home_for(&provider);
    std::fs::create_dir(home.path().join("cache1")).unwrap();
    let (code, out) = chat_on_pty(home.path(), "clean\na\n/quit\n");
    assert_eq!(code, Some(0), "{out}");
    assert!(!home.path().join("cache1").exists());
    let config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(
        !config.contains("command_allowlist"),
        "not written to the allowlist every surface reads: {config}"
    );
    let kept = std::fs::read_to_string(home.path().join("approvals_always.json")).unwrap();
    assert!(
        kept.contains("recursive or forced delete") && kept.contains("\"cli\""),
        "the pattern key is kept, tagged with its surface: {kept}"
    );
    // With no terminal nobody attends the run: the command is denied, not run.
    std::fs::create_dir(home.path().join("cache1")).unwrap();
    let provider2 = FakeProvider::start(vec![
        Scripted::tool_calls(&[("x2", "terminal", r#"{"command": "rm -rf cache1"}"#)]),
        Scripted::text("second"),
        Scripted::tool_calls(&[("x3", "terminal", r#"{"command": "rm -rf cache1"}"#)]),
        Scripted::text("third"),
    ]);
    let config = config.replace(&provider.base_url, &provider2.base_url);
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let (code, _, err) = chat(home.path(), &["-Q", "-q", "clean again"], None);
    assert_eq!(code, 0, "{err}");
    assert!(
        home.path().join("cache1").exists(),
        "an unattended run does not get an attended \"always\""
    );
    // On a terminal it runs without a question.
    let (code, out) = chat_on_pty(home.path(), "clean once more\n/quit\n");
    assert_eq!(code, Some(0), "{out}");
    assert!(
        !home.path().join("cache1").exists(),
        "approved for attended runs: ran without asking ({out})"
    );
}

#[test]
fn a_json_completion_to_a_streamed_request_is_a_complete_answer() {
    let provider = FakeProvider::start(vec![Scripted::Json(json!({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Whole answer."},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    }))]);
    let home = home_for(&provider);
    let start = Instant::now();
    let (code, out, err) = chat(home.path(), &["-Q", "-q", "hi"], None);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "Whole answer.");
    assert_eq!(provider.requests().len(), 1, "no retry");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_dead_base_url_names_the_host_port_cause_and_setting() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!("model:\n  default: m\n  base_url: http://127.0.0.1:{port}/v1\n  api_key: sk-secret-key-value\n"),
    )
    .unwrap();
    let (code, _, err) = chat(home.path(), &["-q", "hi"], None);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains(&format!("cannot reach the provider at 127.0.0.1:{port}")),
        "{err}"
    );
    assert!(err.contains("connection refused"), "{err}");
    assert!(err.contains("`model.base_url`"), "{err}");
    assert!(!err.contains("sk-secret-key-value"), "{err}");
    // A name that does not resolve says DNS.
    std::fs::write(
        home.path().join("config.yaml"),
        "model:\n  default: m\n  base_url: http://no-such-host.invalid/v1\n",
    )
    .unwrap();
    let (_, _, err) = chat(home.path(), &["-q", "hi"], None);
    assert!(err.contains("no-such-host.invalid:80"), "{err}");
    assert!(err.contains("DNS lookup failed"), "{err}");
}

/// Runs `herald <args>` on a pseudo-terminal (through `script`), writing each step's
/// bytes after its pause; returns the exit code, everything shown, and the run time.
/// The shell `script` starts execs herald, so a Ctrl-C reaches herald alone (a
/// non-interactive dash left waiting would die of it and end the recording).
fn on_pty(
    home: &std::path::Path,
    args: &str,
    steps: &[(u64, &str)],
) -> (Option<i32>, String, Duration) {
    let start = Instant::now();
    let mut child = Command::new("script")
        .args(["-qefc", &format!("exec {BIN} {args}"), "/dev/null"])
        .env("SHELL", "/bin/sh")
        .env("HERALD_HOME", home)
        .env("HERALD_RETRY_BASE_MS", "10")
        .env("TERM", "dumb")
        .current_dir(home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let steps: Vec<(u64, String)> = steps.iter().map(|(d, s)| (*d, (*s).to_owned())).collect();
    let writer = std::thread::spawn(move || {
        for (pause, bytes) in steps {
            std::thread::sleep(Duration::from_millis(pause));
            let _ = stdin.write_all(bytes.as_bytes());
            let _ = stdin.flush();
        }
        std::thread::sleep(Duration::from_secs(5));
    });
    let code = wait_timeout(&mut child, Duration::from_secs(25));
    let elapsed = start.elapsed();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    drop(writer);
    (
        code,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        elapsed,
    )
}

#[test]
fn ctrl_c_stops_the_answer_at_once_and_keeps_what_arrived() {
    let parts: Vec<String> = (1..=20).map(|i| format!("Part {i}. ")).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let provider = FakeProvider::start(vec![
        Scripted::Trickle(Scripted::text_events(&parts), Duration::from_millis(400)),
        Scripted::text("Second answer."),
    ]);
    let home = home_for(&provider);
    let (code, out, elapsed) = on_pty(
        home.path(),
        "chat",
        &[
            (600, "tell me everything\r"),
            (1800, "\x03"),
            (800, "and now?\r"),
            (1500, "/quit\r"),
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Part 1."), "{out}");
    assert!(out.contains("herald: interrupted"), "{out}");
    assert!(!out.contains("Part 20."), "the stream was dropped: {out}");
    assert!(
        out.contains("Second answer."),
        "the prompt came back: {out}"
    );
    assert!(elapsed < Duration::from_secs(8), "{elapsed:?}");
    // The partial answer is kept, marked, in what the model sees next.
    let second = &provider.requests()[1].body["messages"];
    let kept = second
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap();
    let text = kept["content"].as_str().unwrap();
    assert!(text.starts_with("Part 1."), "{text}");
    assert!(text.ends_with("[interrupted by the user]"), "{text}");
}

#[test]
fn ctrl_c_twice_or_ctrl_d_at_the_prompt_leaves() {
    let provider = FakeProvider::start(vec![]);
    let home = home_for(&provider);
    let (code, out, _) = on_pty(home.path(), "chat", &[(600, "\x03"), (300, "\x03")]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("Ctrl-C again or Ctrl-D to leave"), "{out}");
    let (code, out, _) = on_pty(home.path(), "chat", &[(600, "\x04")]);
    assert_eq!(code, Some(0), "{out}");
    assert!(provider.requests().is_empty());
}

#[test]
fn a_status_line_shows_while_waiting_for_the_model_and_a_tool() {
    let provider = FakeProvider::start(vec![
        Scripted::Delayed(
            Duration::from_millis(1200),
            Box::new(Scripted::tool_calls(&[(
                "t1",
                "terminal",
                r#"{"command": "sleep 1"}"#,
            )])),
        ),
        Scripted::text("All done."),
    ]);
    let home = home_for(&provider);
    let (code, out, _) = on_pty(home.path(), "chat -q 'wait for it'", &[]);
    assert_eq!(code, Some(0), "{out}");
    let before_answer = &out[..out.find("All done.").unwrap()];
    assert!(
        before_answer.contains("⠙ fake-model") || before_answer.contains("⠹ fake-model"),
        "{out}"
    );
    assert!(before_answer.contains("running terminal"), "{out}");
    assert!(
        before_answer.contains("\x1b[2K"),
        "the line is cleared: {out}"
    );
    // Never with -Q.
    let provider = FakeProvider::start(vec![Scripted::Delayed(
        Duration::from_millis(800),
        Box::new(Scripted::text("Quiet.")),
    )]);
    let home = home_for(&provider);
    let (code, out, _) = on_pty(home.path(), "chat -Q -q hi", &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("fake-model"), "{out}");
    assert!(!out.contains("\x1b[2K"), "{out}");
    assert!(out.trim_end().ends_with("\nQuiet."), "{out}");
}

#[test]
fn slash_commands_are_answered_locally() {
    let provider = FakeProvider::start(vec![Scripted::text("About /etc/hosts.")]);
    let home = home_for(&provider);
    let skill = home.path().join("skills/code-review");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: Code Review\ndescription: Review a change\n---\nLook closely.",
    )
    .unwrap();
    let (code, out, _) = on_pty(
        home.path(),
        "chat",
        &[
            (600, "/help\r"),
            (400, "/foo\r"),
            (400, "/etc/hosts is broken\r"),
            (1500, "/quit\r"),
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("/new") && out.contains("/resume [name]"),
        "{out}"
    );
    assert!(
        !out.contains("/sethome"),
        "a platform's command is not listed: {out}"
    );
    assert!(
        out.contains("/code-review TEXT"),
        "a skill's command: {out}"
    );
    assert!(out.contains("unknown command /foo"), "{out}");
    let requests = provider.requests();
    assert_eq!(requests.len(), 1, "only the path prompt reached the model");
    let sent = requests[0].body["messages"].to_string();
    assert!(sent.contains("/etc/hosts is broken"), "{sent}");
    assert!(!sent.contains("/help") && !sent.contains("/foo"), "{sent}");
}

#[test]
fn the_shipped_skill_lets_the_agent_set_up_a_subscription() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("l1", "skills_list", "{}")]),
        Scripted::tool_calls(&[("v1", "skill_view", r#"{"name": "webhook-subscriptions"}"#)]),
        Scripted::tool_calls(&[(
            "t1",
            "terminal",
            r#"{"command": "herald webhook subscribe github-issues --events issues --prompt 'New issue #{issue.number}: {issue.title}' --deliver log"}"#,
        )]),
        Scripted::text("Created github-issues."),
    ]);
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "model:\n  default: fake-model\n  base_url: {}\n{}",
            provider.base_url,
            config_with_routes("")
        ),
    )
    .unwrap();
    let bin_dir = std::path::Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(BIN)
        .args([
            "chat",
            "-Q",
            "--yolo",
            "-q",
            "set up a webhook for GitHub issues",
        ])
        .env("HERALD_HOME", home.path())
        .env("PATH", path)
        .env("HERALD_RETRY_BASE_MS", "10")
        .current_dir(home.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // Installed on first contact with the home, and found by skills_list.
    let reqs = provider.requests();
    let listed = reqs[1].body["messages"].to_string();
    assert!(listed.contains("webhook-subscriptions"), "{listed}");
    assert!(listed.contains("github-code-review"), "{listed}");
    let viewed = reqs[2].body["messages"].to_string();
    assert!(viewed.contains("herald webhook subscribe"), "{viewed}");
    let subs: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("webhook_subscriptions.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(subs["github-issues"]["events"], json!(["issues"]));
    // A user's own skill folder is never overwritten.
    let mine = home.path().join("skills/webhook-subscriptions/SKILL.md");
    std::fs::write(&mine, "my own").unwrap();
    let _ = chat(home.path(), &["-Q", "-q", "hi"], None);
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "my own");
}

#[test]
fn skills_settings_from_a_hermes_config_are_used() {
    let provider = FakeProvider::start(vec![Scripted::text("ok")]);
    let home = home_for(&provider);
    let shared = tempfile::tempdir().unwrap();
    for (root, name) in [
        (home.path(), "skills/local-one"),
        (home.path(), "skills/hidden-one"),
        (home.path(), "skills/not-on-cli"),
        (shared.path(), "shared-one"),
    ] {
        std::fs::create_dir_all(root.join(name)).unwrap();
        std::fs::write(root.join(name).join("SKILL.md"), "Do it well.").unwrap();
    }
    let mut config = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    config.push_str(&format!(
        "skills:\n  external_dirs: ['{}']\n  disabled: [hidden-one]\n  platform_disabled:\n    cli: [not-on-cli]\n",
        shared.path().display()
    ));
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let (code, _, err) = chat(home.path(), &["-Q", "-q", "hi"], None);
    assert_eq!(code, 0, "{err}");
    let system = provider.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("- local-one:"), "{system}");
    assert!(system.contains("- shared-one:"), "{system}");
    assert!(!system.contains("hidden-one"), "{system}");
    assert!(!system.contains("not-on-cli"), "{system}");
    assert!(!err.contains("unknown key"), "{err}");
}

#[test]
fn a_new_session_forgets_session_approvals() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("a1", "terminal", r#"{"command": "rm -rf junk1"}"#)]),
        Scripted::text("Removed one."),
        Scripted::tool_calls(&[("a2", "terminal", r#"{"command": "rm -rf junk2"}"#)]),
        Scripted::text("Left two."),
    ]);
    let home = home_for(&provider);
    for dir in ["junk1", "junk2"] {
        std::fs::create_dir(home.path().join(dir)).unwrap();
    }
    let (code, out) = chat_on_pty(
        home.path(),
        "delete junk1\ns\n/new\ndelete junk2\nd\n/quit\n",
    );
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(out.matches("approval needed").count(), 2, "{out}");
    assert!(!home.path().join("junk1").exists());
    assert!(home.path().join("junk2").exists(), "asked again and denied");
}

#[test]
fn ctrl_c_during_a_tool_kills_it_and_gives_the_prompt_back() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[(
            "s1",
            "terminal",
            r#"{"command": "sleep 30; touch never-made"}"#,
        )]),
        Scripted::text("Second answer."),
    ]);
    let home = home_for(&provider);
    let (code, out, elapsed) = on_pty(
        home.path(),
        "chat",
        &[
            (600, "wait a while\r"),
            (1500, "\x03"),
            (1500, "and now?\r"),
            (1500, "/quit\r"),
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("herald: interrupted"), "{out}");
    assert!(
        out.contains("Second answer."),
        "the prompt came back: {out}"
    );
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !home.path().join("never-made").exists(),
        "the command was killed"
    );
    // The cancelled call's result is in what the model saw next.
    let second = provider.requests()[1].body["messages"].to_string();
    assert!(second.contains("cancelled"), "{second}");
}

#[tokio::test]
async fn a_skill_command_gives_the_same_user_message_in_chat_and_over_rpc() {
    let provider = FakeProvider::start(vec![Scripted::text("Reviewed.")]);
    let home = home_for(&provider);
    let skill = home.path().join("skills/pr-review");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: pr-review\ndescription: Review pull requests\n---\nCheck the tests first (session ${HERMES_SESSION_ID}).\n",
    )
    .unwrap();
    let (code, _, err) = chat(home.path(), &[], Some("/pr-review look at #7\n/quit\n"));
    assert_eq!(code, 0, "{err}");
    let chat_session = session_of(&err);
    let sent = provider.requests()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(sent.contains("Check the tests first"), "{sent}");
    assert!(sent.ends_with("look at #7"), "{sent}");

    let mut rpc = super::rpc::Piped::start(home.path());
    let created = rpc.client.call("session.create", json!({})).await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    let stored = created["stored_session_id"].as_str().unwrap().to_owned();
    let answer = rpc
        .client
        .call(
            "slash.exec",
            json!({"session_id": sid, "command": "/pr-review look at #7"}),
        )
        .await;
    assert_eq!(answer["type"], "send", "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert_eq!(message.replace(&stored, &chat_session), sent);
}

/// `/context`, `/queue` (with nothing to queue) and `/version` come from the one command table: chat, RPC and
/// ACP answer them with the same words, and none of them calls the model.
#[tokio::test]
async fn the_slash_commands_answer_the_same_in_chat_over_rpc_and_over_acp() {
    let provider = FakeProvider::start(vec![]);
    let home = home_for(&provider);
    let lines = ["/context", "/queue", "/version"];
    let (code, _, err) = chat(
        home.path(),
        &[],
        Some("/context\n/queue\n/version\n/quit\n"),
    );
    assert_eq!(code, 0, "{err}");

    let mut rpc = super::rpc::Piped::start(home.path());
    let created = rpc.client.call("session.create", json!({})).await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    let mut over_rpc = Vec::new();
    for line in lines {
        let params = json!({"session_id": sid, "command": line});
        let answer = rpc.client.call("slash.exec", params).await;
        assert_eq!(answer["type"], "exec", "{line}: {answer}");
        over_rpc.push(answer["output"].as_str().unwrap().to_owned());
    }

    let mut acp = super::acp::RawAcp::start(home.path()).await;
    let session = acp.open_session(home.path()).await;
    let mut over_acp = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let id = 10 + n as u64;
        acp.prompt(id, &session, line).await;
        acp.answer(id).await;
        let said: String = std::mem::take(&mut acp.others)
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
            .filter_map(|m| {
                m["params"]["update"]["content"]["text"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect();
        over_acp.push(said);
    }
    assert_eq!(over_rpc, over_acp);
    for said in &over_rpc {
        assert!(err.contains(said.as_str()), "chat said {said:?}: {err}");
    }
    assert_eq!(over_rpc[1], "Usage: /queue TEXT");
    assert!(provider.requests().is_empty(), "no model call");
}

#[test]
fn chat_opens_without_info_lines_about_the_plugin_host() {
    let provider = FakeProvider::start(vec![Scripted::text("hello back")]);
    let home = home_for(&provider);
    super::plugins::install_plugins(home.path(), &["trace-recorder"]);
    let (code, out, err) = chat(home.path(), &[], Some("hello\n"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("hello back"), "{out}");
    assert!(!err.contains(" INFO "), "{err}");
    // -v still shows them.
    let (_, _, err) = chat(home.path(), &["-v", "-q", "again"], None);
    assert!(err.contains("plugin host runs"), "{err}");
}

#[test]
fn a_local_provider_that_refuses_fails_fast() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!("model:\n  default: m\n  base_url: http://127.0.0.1:{port}/v1\n"),
    )
    .unwrap();
    let started = Instant::now();
    let (code, _, err) = run_cli(home.path(), &["chat", "-q", "hi"]);
    assert_ne!(code, 0, "{err}");
    assert!(err.contains("connection refused"), "{err}");
    assert!(err.contains("nothing listens there"), "{err}");
    // The default back-off (5 s, then 10 s) took about 16 s before giving up.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}: {err}",
        started.elapsed()
    );
}

#[test]
fn a_refused_key_names_the_setting_that_supplied_it() {
    let refuse = || {
        FakeProvider::start(vec![Scripted::Status(
            401,
            r#"{"error": {"message": "invalid key"}}"#.into(),
        )])
    };
    // The key written in config.yaml.
    let provider = refuse();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "model:\n  default: m\n  base_url: {}\n  api_key: sk-written-in-config-123\n",
            provider.base_url
        ),
    )
    .unwrap();
    let (code, _, err) = chat(home.path(), &["-Q", "-q", "hi"], None);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("HTTP 401: invalid key"), "{err}");
    assert!(
        err.contains("the API key comes from `model.api_key`"),
        "{err}"
    );
    assert!(!err.contains("sk-written-in-config-123"), "{err}");
    // A provider entry's key_env, set in .env.
    let provider = refuse();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "model:\n  default: m\n  provider: team\nproviders:\n  team:\n    base_url: {}\n    key_env: TEAM_LLM_KEY\n",
            provider.base_url
        ),
    )
    .unwrap();
    std::fs::write(
        home.path().join(".env"),
        "TEAM_LLM_KEY=sk-from-dotenv-456\n",
    )
    .unwrap();
    let (code, _, err) = chat(home.path(), &["-Q", "-q", "hi"], None);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("the API key comes from `TEAM_LLM_KEY`"),
        "{err}"
    );
    // No key at all.
    let provider = refuse();
    let home = home_for(&provider);
    let (_, _, err) = chat(home.path(), &["-Q", "-q", "hi"], None);
    assert!(
        err.contains("no API key is configured for this endpoint"),
        "{err}"
    );
}

/// A `/model` switch stays with the session: `herald chat -c` continues it on the
/// model it was switched to, and a new session starts on the configured one.
#[test]
fn a_model_switch_is_kept_with_the_session_for_chat_continue() {
    let provider = FakeProvider::start(vec![]);
    let home = home_for(&provider);
    let (code, _, err) = chat(home.path(), &[], Some("/model other-model\n/quit\n"));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("model switched to other-model"), "{err}");
    let (code, _, err) = chat(home.path(), &["-c"], Some("/model\n/quit\n"));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Model: other-model"), "continued: {err}");
    let (_, _, err) = chat(home.path(), &[], Some("/model\n/quit\n"));
    assert!(err.contains("Model: fake-model"), "a new session: {err}");
}

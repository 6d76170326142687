//! Hermes Python plugins through the plugin host, end to end: the real binary, the
//! embedded host program run by python3, test plugins written as Hermes's
//! documentation shows them, and the fake provider.

use super::rpc::rpc_home;
use super::support::BIN;
use herald_test_support::{FakeProvider, Scripted};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Copies the named test plugins into `home/plugins` and enables them.
pub fn install_plugins(home: &Path, names: &[&str]) {
    copy_plugins(home, names);
    let config = home.join("config.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap_or_default();
    text.push_str(&format!("plugins:\n  enabled: [{}]\n", names.join(", ")));
    std::fs::write(config, text).unwrap();
}

/// Copies the named test plugins into `home/plugins`.
fn copy_plugins(home: &Path, names: &[&str]) {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins");
    for name in names {
        let to = home.join("plugins").join(name);
        std::fs::create_dir_all(&to).unwrap();
        for file in std::fs::read_dir(source.join(name)).unwrap() {
            let file = file.unwrap();
            if file.file_type().unwrap().is_file() {
                std::fs::copy(file.path(), to.join(file.file_name())).unwrap();
            }
        }
    }
}

/// `herald -v chat -Q -q TEXT` on `home`: exit code, stdout, stderr.
fn chat(home: &Path, text: &str) -> (i32, String, String) {
    chat_with(home, text, &[])
}

fn chat_with(home: &Path, text: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(["-v", "chat", "-Q", "-q", text])
        .env("HERALD_HOME", home)
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The hook payloads the trace-recorder plugin wrote.
pub fn traces(home: &Path) -> Vec<Value> {
    std::fs::read_to_string(home.join("trace.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub const DEMOS: [&str; 5] = [
    "llm-request-demo",
    "tool-request-demo",
    "llm-execution-demo",
    "tool-execution-demo",
    "trace-recorder",
];

/// What the four demo plugins must have done to a turn with one terminal call.
pub fn assert_demos_worked(home: &Path, provider: &FakeProvider, stderr: &str) {
    let requests = provider.requests();
    assert_eq!(requests.len(), 2, "{stderr}");
    for r in &requests {
        assert_eq!(
            r.body["metadata"]["hermes_middleware_demo"], true,
            "extra_body.metadata is merged into the body: {}",
            r.body
        );
        assert!(r.body.get("extra_body").is_none(), "{}", r.body);
    }
    let tool_result = requests[1].body["messages"].to_string();
    let work = home.join("work").display().to_string();
    assert!(
        tool_result.contains(&work),
        "the command ran in the workdir: {tool_result}"
    );
    let seen = traces(home);
    let fields_of = |hook: &str| -> Vec<&Value> {
        seen.iter()
            .filter(|t| t["hook"] == hook)
            .map(|t| &t["fields"])
            .collect()
    };
    let pre_api = fields_of("pre_api_request");
    assert_eq!(pre_api.len(), 2, "{seen:?}");
    let trace = pre_api[0]["middleware_trace"].to_string();
    assert!(
        trace.contains("llm-request-demo") && trace.contains("tag the request"),
        "{trace}"
    );
    let post_tool = fields_of("post_tool_call");
    assert_eq!(post_tool.len(), 1, "{seen:?}");
    let trace = post_tool[0]["middleware_trace"].to_string();
    assert!(
        trace.contains("tool-request-demo") && trace.contains("default workdir"),
        "{trace}"
    );
    assert_eq!(post_tool[0]["args"]["workdir"], work.as_str());
    assert_eq!(fields_of("pre_tool_call")[0]["tool_name"], "terminal");
    assert!(!fields_of("on_session_end").is_empty(), "{seen:?}");
    // Every hook gets the arguments Hermes 0.19.0 passes (docs/plugins.md lists them).
    assert!(
        seen.iter()
            .all(|t| t["fields"]["telemetry_schema_version"] == "hermes.observer.v1"),
        "{seen:?}"
    );
    let pre_llm = fields_of("pre_llm_call");
    assert_eq!(pre_llm.len(), 1, "{seen:?}");
    assert_eq!(pre_llm[0]["is_first_turn"], true);
    assert_eq!(pre_llm[0]["conversation_history"][0]["role"], "user");
    assert_eq!(pre_llm[0]["task_id"], pre_llm[0]["session_id"]);
    let post_llm = fields_of("post_llm_call");
    assert_eq!(post_llm[0]["assistant_response"], "It ran.");
    assert_eq!(post_llm[0]["turn_id"], pre_llm[0]["turn_id"]);
    let post = post_tool[0].as_object().unwrap();
    assert!(
        post.contains_key("error_type") && post.contains_key("error_message"),
        "{post:?}"
    );
    assert!(
        fields_of("post_api_request")[0]["usage"].is_object(),
        "{seen:?}"
    );
}

#[test]
fn the_four_hermes_examples_work_in_herald_chat() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("t1", "terminal", r#"{"command": "pwd"}"#)]),
        Scripted::text("It ran."),
    ]);
    let home = rpc_home(&provider.base_url, "");
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    install_plugins(home.path(), &DEMOS);
    let (code, out, err) = chat(home.path(), "where am I?");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("It ran."), "{out}");
    assert_demos_worked(home.path(), &provider, &err);
    assert!(
        err.contains("llm_execution took"),
        "the plugin's print is logged: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_four_hermes_examples_work_in_a_webhook_run() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("t1", "terminal", r#"{"command": "pwd"}"#)]),
        Scripted::text("It ran."),
    ]);
    let config = super::agent_runs::agent_config(
        &provider.base_url,
        "",
        "        r:\n          prompt: hi\n          deliver: log\n          toolsets: [terminal]\n",
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    std::fs::create_dir_all(home.path().join("work")).unwrap();
    install_plugins(home.path(), &DEMOS);
    let h = super::support::Herald::start_in(home, &[("RUST_LOG", "info,herald=debug")]);
    let (status, _) = h.github("r", "push", "{}", None).await;
    assert_eq!(status, reqwest::StatusCode::ACCEPTED);
    let started = std::time::Instant::now();
    while h.inbox().first().is_none_or(|e| e["state"] != "delivered") {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{}",
            h.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_demos_worked(h.home(), &provider, &h.log());
    assert!(h.log().contains("llm_execution took"), "{}", h.log());
    let pre_llm = traces(h.home());
    let pre_llm = pre_llm
        .iter()
        .find(|t| t["hook"] == "pre_llm_call")
        .unwrap();
    assert_eq!(
        pre_llm["fields"]["sender_id"], "webhook:r",
        "as Hermes's webhook adapter names it"
    );
}

fn log_count(log: &str, text: &str) -> usize {
    log.lines().filter(|l| l.contains(text)).count()
}

const HOSTILE: [&str; 10] = [
    "hostile-garbage",
    "hostile-hang",
    "hostile-missing-import",
    "hostile-narrow",
    "hostile-never",
    "hostile-noisy",
    "hostile-partial",
    "hostile-raise-after",
    "hostile-raise-before",
    "hostile-twice",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_plugins_never_take_a_turn_down_and_are_reported_once() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("t1", "terminal", r#"{"command": "echo ran >> count.txt"}"#)]),
        Scripted::text("First."),
        Scripted::text("Second."),
    ]);
    let home = rpc_home(
        &provider.base_url,
        &format!("terminal:\n  cwd: {}\n", std::env::temp_dir().display()),
    );
    let work = tempfile::tempdir().unwrap();
    let config = home.path().join("config.yaml");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        &std::env::temp_dir().display().to_string(),
        &work.path().display().to_string(),
    );
    std::fs::write(&config, text).unwrap();
    install_plugins(home.path(), &HOSTILE);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("  host:\n    callback_timeout: 2\n");
    std::fs::write(&config, text).unwrap();
    let mut rpc = super::rpc::Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    let first = c.turn(&sid, "count").await;
    assert_eq!(
        first.last().unwrap()["payload"]["status"],
        "complete",
        "{first:?}"
    );
    assert_eq!(first.last().unwrap()["payload"]["text"], "First.");
    let second = c.turn(&sid, "again").await;
    assert_eq!(second.last().unwrap()["payload"]["text"], "Second.");
    drop(rpc);
    let ran = std::fs::read_to_string(work.path().join("count.txt")).unwrap();
    assert_eq!(ran, "ran\n", "the tool ran exactly once");
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        requests.iter().all(|r| r.body.get("tools").is_none()),
        "the partial request replaced the whole body"
    );
    let noisy = std::fs::read_to_string(home.path().join("noisy.txt")).unwrap();
    assert!(
        !noisy.is_empty() && noisy.lines().all(|l| l == "drained"),
        "stderr bytes that are not UTF-8 stop nothing: {noisy}"
    );
    let narrow = std::fs::read_to_string(home.path().join("narrow.jsonl")).unwrap();
    assert_eq!(narrow.trim(), r#"{"tool_name": "terminal"}"#);
    let log = std::fs::read_to_string(home.path().join("rpc.log")).unwrap();
    for (what, times) in [
        ("raised after next_call", 1),
        ("raised before next_call", 1),
        ("no_such_module_for_herald", 1),
        ("timed out", 1),
        ("single-use", 1),
        ("tool_data", 1),
        ("noise line", 0),
        ("wrong shape without calling next_call", 1),
        ("is not a JSON value", 1),
    ] {
        assert_eq!(log_count(&log, what), times, "{what}:\n{log}");
    }
    let wrong = log.lines().find(|l| l.contains("tool_data")).unwrap();
    assert!(
        wrong.contains("(fields provided: api_request_id, args, "),
        "{wrong}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_host_that_dies_is_restarted_and_the_turn_goes_on() {
    let provider = FakeProvider::start(vec![Scripted::text("First."), Scripted::text("Second.")]);
    let home = rpc_home(&provider.base_url, "");
    install_plugins(home.path(), &["hostile-exit", "llm-request-demo"]);
    let mut rpc = super::rpc::Piped::start(home.path());
    let c = &mut rpc.client;
    let sid = c.session().await;
    let first = c.turn(&sid, "one").await;
    assert_eq!(first.last().unwrap()["payload"]["text"], "First.");
    let log_path = home.path().join("rpc.log");
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&log_path)
        .unwrap_or_default()
        .contains("running again")
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "never restarted"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let second = c.turn(&sid, "two").await;
    assert_eq!(second.last().unwrap()["payload"]["text"], "Second.");
    drop(rpc);
    let requests = provider.requests();
    assert_eq!(requests[0].body["metadata"]["hermes_middleware_demo"], true);
    assert_eq!(
        requests[1].body["metadata"]["hermes_middleware_demo"], true,
        "the restarted host's plugins are used"
    );
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert_eq!(log_count(&log, "plugin host stopped"), 1, "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_are_listed_enabled_disabled_and_reloaded_in_a_running_gateway() {
    let provider = FakeProvider::start(vec![Scripted::text("One."), Scripted::text("Two.")]);
    let config = super::agent_runs::agent_config(
        &provider.base_url,
        "",
        "        r:\n          prompt: hi\n          deliver: log\n",
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    install_plugins(home.path(), &["hostile-raise-after"]);
    copy_plugins(home.path(), &["llm-request-demo"]);
    let cli = |args: &[&str]| super::support::run_cli(home.path(), args);
    let (code, out, _) = cli(&["plugins", "list"]);
    assert_eq!(code, 0);
    let row = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(row("llm-request-demo").contains("not enabled"), "{out}");
    assert!(row("hostile-raise-after").contains(" enabled"), "{out}");
    let (code, _, err) = cli(&["plugins", "enable", "no-such-plugin"]);
    assert_eq!(code, 1);
    assert!(err.contains("not installed"), "{err}");
    let h = super::support::Herald::start_in(home, &[]);
    let run_event = async |n: usize| {
        let (status, _) = h.github("r", "push", "{}", None).await;
        assert_eq!(status, reqwest::StatusCode::ACCEPTED);
        let started = std::time::Instant::now();
        while h
            .inbox()
            .iter()
            .filter(|e| e["state"] == "delivered")
            .count()
            < n
        {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "{}",
                h.log()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    run_event(1).await;
    let (code, out, _) =
        super::support::run_cli(h.home(), &["plugins", "enable", "llm-request-demo"]);
    assert_eq!(code, 0, "{out}");
    let (_, out, _) = super::support::run_cli(h.home(), &["plugins", "list", "--json"]);
    let listed: Vec<Value> = serde_json::from_str(&out).unwrap();
    let demo = listed
        .iter()
        .find(|p| p["key"] == "llm-request-demo")
        .unwrap();
    assert_eq!(demo["status"], "enabled");
    let (code, out, _) = super::support::run_cli(h.home(), &["plugins", "reload"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("and its plugins"), "{out}");
    h.log_once_it_has("Python plugins reloaded plugins=2");
    run_event(2).await;
    let requests = provider.requests();
    assert!(requests[0].body.get("metadata").is_none());
    assert_eq!(
        requests[1].body["metadata"]["hermes_middleware_demo"], true,
        "reloaded"
    );
    let log = h.log();
    assert_eq!(
        log_count(&log, "raised after next_call"),
        2,
        "a reload reports a known failure again: {log}"
    );
    let (code, _, _) =
        super::support::run_cli(h.home(), &["plugins", "disable", "llm-request-demo"]);
    assert_eq!(code, 0);
    let config = std::fs::read_to_string(h.home().join("config.yaml")).unwrap();
    assert!(
        config.contains("disabled:\n  - llm-request-demo"),
        "{config}"
    );
}

/// A Python with `hermes-agent==0.19.0` importable, and the PYTHONPATH it needs:
/// `HERALD_TEST_HERMES_PYTHON`, else the virtualenv `scripts/test` makes
/// (`target/hermes-venv`), else python3 with `target/hermes-site` on its path.
pub(super) fn hermes_python() -> (std::path::PathBuf, Option<String>) {
    if let Ok(p) = std::env::var("HERALD_TEST_HERMES_PYTHON") {
        return (p.into(), None);
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let venv = target.join("hermes-venv/bin/python");
    if venv.exists() {
        return (venv, None);
    }
    let site = target.join("hermes-site");
    assert!(
        site.join("hermes_cli").is_dir(),
        "this test needs Hermes installed: python3 -m venv target/hermes-venv && \
         target/hermes-venv/bin/pip install hermes-agent==0.19.0 (or set HERALD_TEST_HERMES_PYTHON)"
    );
    ("python3".into(), Some(site.display().to_string()))
}

#[test]
fn a_plugin_written_against_the_real_hermes_cli_package_loads() {
    let provider = FakeProvider::start(vec![Scripted::text("Real.")]);
    let home = rpc_home(&provider.base_url, "");
    install_plugins(home.path(), &["hermes-real"]);
    let config = home.path().join("config.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    let (python, path) = hermes_python();
    text.push_str(&format!("  python: {}\n", python.display()));
    std::fs::write(&config, text).unwrap();
    let env: Vec<(&str, &str)> = path.iter().map(|p| ("PYTHONPATH", p.as_str())).collect();
    let (code, out, err) = chat_with(home.path(), "hi", &env);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("runs with the installed hermes_cli package"),
        "{err}"
    );
    let body = &provider.requests()[0].body;
    assert_eq!(body["metadata"]["hermes_real"], true, "{body}");
    assert_eq!(body["metadata"]["hooks_known"], true, "{body}");
}

#[test]
fn plugins_block_by_directive_by_failing_closed_and_by_an_explicit_block() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[
            ("b1", "terminal", r#"{"command": "touch forbidden"}"#),
            ("b2", "terminal", r#"{"command": "touch crash"}"#),
            ("b3", "terminal", r#"{"command": "touch policy"}"#),
            ("b4", "terminal", r#"{"command": "touch allowed"}"#),
        ]),
        Scripted::text("Done."),
    ]);
    let work = tempfile::tempdir().unwrap();
    let home = rpc_home(
        &provider.base_url,
        &format!("terminal:\n  cwd: {}\n", work.path().display()),
    );
    install_plugins(home.path(), &["blocking"]);
    let (code, out, err) = chat(home.path(), "touch them");
    assert_eq!(code, 0, "{out}{err}");
    let results = provider.requests()[1].body["messages"].to_string();
    assert!(results.contains("not today"), "{results}");
    assert!(
        results.contains("the gate itself broke"),
        "fails closed: {results}"
    );
    assert!(results.contains("stopped by policy"), "{results}");
    for blocked in ["forbidden", "crash", "policy"] {
        assert!(!work.path().join(blocked).exists(), "{blocked} ran");
    }
    assert!(work.path().join("allowed").exists());
}

#[test]
fn an_entry_point_plugin_of_an_installed_package_loads() {
    let provider = FakeProvider::start(vec![Scripted::text("Packaged.")]);
    let home = rpc_home(&provider.base_url, "plugins:\n  enabled: [packaged-demo]\n");
    let site = tempfile::tempdir().unwrap();
    let package = site.path().join("packaged_demo");
    std::fs::create_dir_all(&package).unwrap();
    std::fs::write(
        package.join("__init__.py"),
        "def tag(request, **kw):\n    return {'request': {**request, 'extra_body': {'metadata': {'packaged': True}}}}\n\ndef register(ctx):\n    ctx.register_middleware('llm_request', tag)\n",
    )
    .unwrap();
    let dist = site.path().join("packaged_demo-0.1.0.dist-info");
    std::fs::create_dir_all(&dist).unwrap();
    std::fs::write(
        dist.join("METADATA"),
        "Metadata-Version: 2.1\nName: packaged-demo\nVersion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(
        dist.join("entry_points.txt"),
        "[hermes_agent.plugins]\npackaged-demo = packaged_demo\n",
    )
    .unwrap();
    let site_path = site.path().display().to_string();
    let (code, out, err) = chat_with(home.path(), "hi", &[("PYTHONPATH", &site_path)]);
    assert_eq!(code, 0, "{out}{err}");
    let listed = Command::new(BIN)
        .args(["plugins", "list"])
        .env("HERALD_HOME", home.path())
        .env("PYTHONPATH", &site_path)
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("enabled (entry point)") && listed.contains("0.1.0"),
        "{listed}"
    );
    let (_, unseen, _) = super::support::run_cli(home.path(), &["plugins", "list"]);
    assert!(
        unseen.contains("enabled, not installed"),
        "where the interpreter cannot find it: {unseen}"
    );
    assert_eq!(
        provider.requests()[0].body["metadata"]["packaged"],
        true,
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_run_in_the_http_api_and_in_acp() {
    let provider = FakeProvider::start(vec![
        Scripted::text("From the API."),
        Scripted::text("From ACP."),
    ]);
    let home = tempfile::tempdir().unwrap();
    let config = super::api::api_config(&provider.base_url, "");
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    install_plugins(home.path(), &["llm-request-demo"]);
    let h = super::support::Herald::start_in(home, &[]);
    let messages = serde_json::json!([{"role": "user", "content": "hi"}]);
    let (status, answer) = super::api::post_json(
        &h,
        "/v1/chat/completions",
        serde_json::json!({"model": "hermes-agent", "messages": messages}),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{answer}");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(super::acp::Seen::default()));
    let cwd = h.home().to_path_buf();
    super::acp::with_agent(h.home(), vec![], seen, async move |cx| {
        use agent_client_protocol::v1::schema::PromptRequest;
        let session = super::acp::initialized_session(&cx, cwd).await?;
        cx.send_request(PromptRequest::new(session, super::acp::text("hi")))
            .block_task()
            .await?;
        Ok(())
    })
    .await;
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(
            r.body["metadata"]["hermes_middleware_demo"], true,
            "{}",
            r.body
        );
    }
}

#[test]
fn a_plugin_host_that_cannot_start_leaves_herald_working() {
    let provider = FakeProvider::start(vec![Scripted::text("Still here.")]);
    let home = rpc_home(&provider.base_url, "");
    install_plugins(home.path(), &["llm-request-demo"]);
    let config = home.path().join("config.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("  python: /no/such/python3\n");
    std::fs::write(&config, text).unwrap();
    let (code, out, err) = chat(home.path(), "hi");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("Still here."), "{out}");
    assert!(err.contains("Python plugins are not running"), "{err}");
    assert!(provider.requests()[0].body.get("metadata").is_none());
}

#[test]
fn every_pre_llm_call_context_reaches_the_user_message() {
    let provider = FakeProvider::start(vec![Scripted::text("Noted.")]);
    let home = rpc_home(&provider.base_url, "");
    install_plugins(home.path(), &["context-demo"]);
    let (code, out, err) = chat(home.path(), "hi");
    assert_eq!(code, 0, "{out}{err}");
    let sent = provider.requests()[0].body["messages"].to_string();
    assert!(
        sent.contains("hi\\n\\ncontext one\\n\\ncontext two"),
        "{sent}"
    );
}

#[test]
fn a_middleware_that_lets_a_downstream_failure_through_is_not_blamed_for_it() {
    let provider = FakeProvider::start(vec![Scripted::Status(
        400,
        r#"{"error": {"message": "the model refused this request"}}"#.into(),
    )]);
    let home = rpc_home(&provider.base_url, "");
    install_plugins(home.path(), &["let-through"]);
    let (code, out, err) = chat(home.path(), "hi");
    assert_ne!(code, 0, "{out}{err}");
    assert!(err.contains("the model refused this request"), "{err}");
    assert_eq!(log_count(&err, "DownstreamError"), 0, "{err}");
    assert_eq!(log_count(&err, "let_through"), 0, "{err}");
    assert_eq!(log_count(&err, "caught_and_reraised"), 0, "{err}");
}

#[test]
fn a_plugins_registered_tools_are_offered_and_called_on_chat() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "count_words", r#"{"text": "one two three"}"#)]),
        Scripted::tool_calls(&[("c2", "shout", r#"{"text": "hey"}"#)]),
        Scripted::tool_calls(&[("c3", "boom", r#"{"text": "x"}"#)]),
        Scripted::tool_calls(&[("c4", "skill_view", r#"{"name": "tool-demo:greeting"}"#)]),
        Scripted::text("done"),
    ]);
    let home = rpc_home(&provider.base_url, "");
    install_plugins(home.path(), &["tool-demo"]);
    let (code, out, err) = chat(home.path(), "count");
    assert_eq!(code, 0, "{out}{err}");
    let reqs = provider.requests();
    let names: Vec<String> = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    for offered in ["count_words", "shout", "boom", "terminal"] {
        assert!(names.contains(&offered.to_owned()), "{offered}: {names:?}");
    }
    for left_out in ["needs_env", "hidden"] {
        assert!(
            !names.contains(&left_out.to_owned()),
            "{left_out}: {names:?}"
        );
    }
    assert_eq!(names.iter().filter(|n| *n == "read_file").count(), 1);
    let read_file = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "read_file")
        .unwrap();
    assert_ne!(
        read_file["function"]["description"], "Clashes.",
        "the built-in stays"
    );
    let result = |i: usize| {
        reqs[i].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(result(1).contains(r#""words": 3"#), "{}", result(1));
    assert!(result(2).contains("HEY"), "{}", result(2));
    assert!(
        result(3).contains("error") && result(3).contains("the tool broke"),
        "{}",
        result(3)
    );
    assert!(
        result(4).contains("Greet the user by name."),
        "{}",
        result(4)
    );
    // A plugin's skill is loaded by name only, never listed in the index.
    let system = reqs[0].body["messages"][0]["content"].as_str().unwrap();
    assert!(!system.contains("tool-demo:greeting"), "{system}");
    assert!(err.contains("refused"), "the clash is warned about: {err}");
}

#[test]
fn overriding_a_built_in_tool_needs_the_operators_leave() {
    let provider = FakeProvider::start(vec![Scripted::text("ok"), Scripted::text("ok")]);
    let home = rpc_home(&provider.base_url, "");
    install_plugins(home.path(), &["tool-override"]);
    let (code, _, err) = chat(home.path(), "hi");
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("allow_tool_override"),
        "the plugin fails to load: {err}"
    );
    let description = |i: usize| {
        provider.requests()[i].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["function"]["name"] == "read_file")
            .unwrap()["function"]["description"]
            .clone()
    };
    assert_ne!(description(0), "Replaced.");
    let config = home.path().join("config.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("  entries:\n    tool-override:\n      allow_tool_override: true\n");
    std::fs::write(&config, text).unwrap();
    let (code, _, err) = chat(home.path(), "hi");
    assert_eq!(code, 0, "{err}");
    assert_eq!(description(1), "Replaced.", "{err}");
}

#[tokio::test]
async fn a_plugin_tool_is_called_over_rpc_and_the_api_too() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "count_words", r#"{"text": "a b"}"#)]),
        Scripted::text("two over rpc"),
        Scripted::tool_calls(&[("c2", "count_words", r#"{"text": "a b c d"}"#)]),
        Scripted::text("four over the api"),
    ]);
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        super::api::api_config(&provider.base_url, ""),
    )
    .unwrap();
    install_plugins(home.path(), &["tool-demo"]);
    let mut rpc = super::rpc::Piped::start(home.path());
    let sid = rpc.client.session().await;
    let events = rpc.client.turn(&sid, "count").await;
    assert!(
        events.iter().any(|e| e["type"] == "tool.complete"),
        "{events:?}"
    );
    drop(rpc);
    let tool_text = |i: usize| provider.requests()[i].body["messages"].to_string();
    assert!(tool_text(1).contains(r#"\"words\": 2"#), "{}", tool_text(1));
    let h = super::support::Herald::start_in(home, &[]);
    let (status, body) = super::api::post_json(
        &h,
        "/v1/chat/completions",
        serde_json::json!({"model": "hermes-agent", "messages": [{"role": "user", "content": "count"}]}),
    )
    .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "four over the api"
    );
    assert!(tool_text(3).contains(r#"\"words\": 4"#), "{}", tool_text(3));
}

#[test]
fn plugin_tools_with_names_providers_refuse_or_others_names_are_refused() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "good_tool-1", r#"{"text": "hi"}"#)]),
        Scripted::tool_calls(&[("c2", "mcp__calc__echo", r#"{"text": "echoed"}"#)]),
        Scripted::text("done"),
    ]);
    let servers = format!(
        "mcp_discovery_timeout: 20\nmcp_servers:\n{}",
        super::mcp::stdio_server("calc", "", "")
    );
    let home = rpc_home(&provider.base_url, &servers);
    install_plugins(home.path(), &["tool-names"]);
    let pids = home.path().join("pids");
    // `-t web`: the built-in terminal is not enabled, and still not the plugin's.
    let run = Command::new(BIN)
        .args(["-v", "chat", "-t", "web", "-Q", "-q", "go"])
        .env("HERALD_HOME", home.path())
        .env("MCP_TEST_PID_FILE", &pids)
        .env_remove("RUST_LOG")
        .current_dir(home.path())
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&run.stdout).into_owned(),
        String::from_utf8_lossy(&run.stderr).into_owned(),
    );
    assert!(run.status.success(), "{out}{err}");
    let reqs = provider.requests();
    assert_eq!(reqs.len(), 3, "{err}");
    let tools = reqs[0].body["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"good_tool-1"), "{names:?}");
    for refused in ["a b/../c;rm", "<img>", "terminal", &"n".repeat(100)] {
        assert!(!names.contains(&refused), "{refused}: {names:?}");
    }
    assert!(
        names.iter().all(|n| n.len() <= 64
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')),
        "{names:?}"
    );
    // The MCP server keeps its tool's name: one of it, the server's.
    let echo: Vec<&Value> = tools
        .iter()
        .filter(|t| t["function"]["name"] == "mcp__calc__echo")
        .collect();
    assert_eq!(echo.len(), 1, "{names:?}");
    assert_eq!(echo[0]["function"]["description"], "Say the text back.");
    let result = |i: usize| {
        reqs[i].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|m| m["role"] == "tool")
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert!(result(1).contains("from the plugin: hi"), "{}", result(1));
    assert!(
        result(2).contains("echoed") && !result(2).contains("from the plugin"),
        "{}",
        result(2)
    );
    assert!(out.contains("done"), "{out}");
    // Each refusal said, by name.
    assert_eq!(log_count(&err, "a plugin tool is refused"), 4, "{err}");
    assert!(err.contains("^[A-Za-z0-9_-]{1,64}$"), "{err}");
    assert!(err.contains("mcp__calc__echo"), "{err}");
    assert!(
        err.contains("tool=terminal") || err.contains("tool=\"terminal\""),
        "{err}"
    );
    assert!(err.contains("named like a built-in is refused"), "{err}");
}

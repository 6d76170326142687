//! Middleware and observers inside real turns over the fake provider (middleware.md A11,
//! items 6–8).

use herald_agent::TurnProgress;
use herald_agent::middleware::{
    BoxFut, ExecutionMiddleware, MiddlewareError, Next, RequestMiddleware,
};
use herald_agent::{Agent, AgentConfig, Approvals, Observer, Plugins};
use herald_llm::{Endpoint, LlmError, RetryConfig};
use herald_test_support::{FakeProvider, Scripted};
use herald_tools::builtin_registry;
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn agent(
    provider: &FakeProvider,
    tools: &[&str],
    dir: &std::path::Path,
    plugins: Plugins,
) -> Agent {
    let names: Vec<String> = tools.iter().map(|t| (*t).to_owned()).collect();
    Agent::new(AgentConfig {
        endpoint: Endpoint::new(&provider.base_url, "k", "base-model"),
        retry: RetryConfig {
            max_attempts: 3,
            base: Duration::from_millis(5),
            cap: Duration::from_millis(10),
        },
        tools: builtin_registry().select(&names),
        max_iterations: 10,
        cwd: dir.to_path_buf(),
        approvals: Arc::new(Approvals::unattended()),
        system_prompt: "sys".into(),
        plugins,
        session_id: "20260101_000000_abcdef".into(),
        platform: "cli".into(),
        sender_id: String::new(),
        prompter: None,
        provider: "custom".into(),
        clarifier: None,
        budget: Default::default(),
        max_tool_calls_per_answer: herald_agent::budget::DEFAULT_MAX_TOOL_CALLS_PER_ANSWER,
        tool_policy: Default::default(),
    })
}

struct SwapModel;

#[async_trait::async_trait]
impl RequestMiddleware for SwapModel {
    fn name(&self) -> &str {
        "swap-model"
    }
    async fn call(&self, fields: &Map<String, Value>) -> Result<Option<Value>, String> {
        let mut req = fields["request"].clone();
        req["model"] = json!("routed-model");
        Ok(Some(
            json!({"request": req, "source": "router", "reason": "cheaper model"}),
        ))
    }
}

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(String, Value)>>,
    block_tools: bool,
}

#[async_trait::async_trait]
impl Observer for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }
    async fn pre_api_request(&self, p: &Value) {
        self.seen
            .lock()
            .unwrap()
            .push(("pre_api_request".into(), p.clone()));
    }
    async fn api_request_error(&self, p: &Value) {
        self.seen
            .lock()
            .unwrap()
            .push(("api_request_error".into(), p.clone()));
    }
    async fn post_api_request(&self, p: &Value) {
        self.seen
            .lock()
            .unwrap()
            .push(("post_api_request".into(), p.clone()));
    }
    async fn pre_tool_call(&self, p: &Value) -> Option<herald_agent::ToolDirective> {
        self.seen
            .lock()
            .unwrap()
            .push(("pre_tool_call".into(), p.clone()));
        self.block_tools
            .then(|| herald_agent::ToolDirective::Block("tools are off today".to_owned()))
    }
    async fn post_tool_call(&self, p: &Value) {
        self.seen
            .lock()
            .unwrap()
            .push(("post_tool_call".into(), p.clone()));
    }
}

struct CountCalls(Arc<Mutex<Vec<String>>>);

impl ExecutionMiddleware<LlmError> for CountCalls {
    fn name(&self) -> &str {
        "count"
    }
    fn call(
        &self,
        fields: Map<String, Value>,
        next: Next<LlmError>,
    ) -> BoxFut<'static, Result<Value, MiddlewareError<LlmError>>> {
        self.0
            .lock()
            .unwrap()
            .push(fields["api_request_id"].as_str().unwrap().to_owned());
        Box::pin(async move { next.call(None).await })
    }
}

#[tokio::test]
async fn llm_middleware_replaces_the_request_and_reruns_on_retry_with_the_same_id() {
    let provider = FakeProvider::start(vec![
        Scripted::Status(503, "busy".into()),
        Scripted::text("done"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let ids = Arc::new(Mutex::new(Vec::new()));
    let plugins = Plugins {
        llm_request: vec![Arc::new(SwapModel)],
        llm_execution: vec![Arc::new(CountCalls(ids.clone()))],
        observers: vec![recorder.clone()],
        ..Default::default()
    };
    let a = agent(&provider, &[], dir.path(), plugins);
    let mut deltas = Vec::new();
    let r = a.run_turn(&[], "hi", &mut |e| deltas.push(e)).await;
    assert!(r.completed, "{r:?}");
    // The provider saw the replaced request on both attempts.
    let reqs = provider.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs.iter().all(|q| q.body["model"] == "routed-model"));
    // Both attempts ran the execution chain with one api_request_id.
    let ids = ids.lock().unwrap().clone();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0], ids[1]);
    assert!(
        ids[0].starts_with("20260101_000000_abcdef:") && ids[0].ends_with(":api:1"),
        "{}",
        ids[0]
    );
    // pre_api_request carries the trace; the error observer fired for the failed attempt.
    let seen = recorder.seen.lock().unwrap().clone();
    let pre: Vec<&Value> = seen
        .iter()
        .filter(|(k, _)| k == "pre_api_request")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(pre.len(), 2);
    assert_eq!(
        pre[0]["middleware_trace"],
        json!([{"source": "router", "reason": "cheaper model"}])
    );
    assert_eq!(pre[0]["request"]["method"], "POST");
    assert_eq!(pre[0]["request"]["body"]["model"], "routed-model");
    for field in [
        "user_message",
        "conversation_history",
        "request_messages",
        "message_count",
        "tool_count",
        "approx_input_tokens",
        "request_char_count",
        "max_tokens",
        "started_at",
    ] {
        assert!(pre[0].get(field).is_some(), "{field}: {}", pre[0]);
    }
    let error = seen.iter().find(|(k, _)| k == "api_request_error").unwrap();
    assert!(error.1["error"]["message"].is_string(), "{}", error.1);
    for field in [
        "status_code",
        "api_duration",
        "started_at",
        "ended_at",
        "reason",
    ] {
        assert!(error.1.get(field).is_some(), "{field}: {}", error.1);
    }
    let post = seen.iter().find(|(k, _)| k == "post_api_request").unwrap();
    for field in [
        "finish_reason",
        "response_model",
        "usage",
        "assistant_message",
        "assistant_content_chars",
        "assistant_tool_call_count",
        "api_duration",
    ] {
        assert!(post.1.get(field).is_some(), "{field}: {}", post.1);
    }
    assert!(
        seen.iter()
            .any(|(k, v)| k == "api_request_error" && v["retryable"] == true)
    );
    // Streaming still reached the caller through the chain.
    assert!(
        deltas
            .iter()
            .any(|e| matches!(e, herald_agent::AgentEvent::Progress(TurnProgress::MessageDelta(t)) if t == "done"))
    );
}

struct Rewrite;

#[async_trait::async_trait]
impl RequestMiddleware for Rewrite {
    fn name(&self) -> &str {
        "pin-workdir"
    }
    async fn call(&self, fields: &Map<String, Value>) -> Result<Option<Value>, String> {
        let mut args = fields["args"].clone();
        args["command"] = json!("rm -rf build && pwd");
        Ok(Some(json!({"args": args, "source": "rewriter"})))
    }
}

#[tokio::test]
async fn tool_request_rewrites_are_what_approval_and_observers_see() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("t1", "terminal", r#"{"command": "ls"}"#)]),
        Scripted::text("ok"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("build")).unwrap();
    let recorder = Arc::new(Recorder::default());
    let plugins = Plugins {
        tool_request: vec![Arc::new(Rewrite)],
        observers: vec![recorder.clone()],
        ..Default::default()
    };
    let a = agent(&provider, &["terminal"], dir.path(), plugins);
    a.run_turn(&[], "list", &mut |_| {}).await;
    assert!(
        dir.path().join("build").exists(),
        "the rewritten dangerous command was judged and denied"
    );
    let seen = recorder.seen.lock().unwrap().clone();
    let pre = &seen.iter().find(|(k, _)| k == "pre_tool_call").unwrap().1;
    assert_eq!(pre["args"]["command"], "rm -rf build && pwd");
    assert_eq!(pre["middleware_trace"], json!([{"source": "rewriter"}]));
    let post = &seen.iter().find(|(k, _)| k == "post_tool_call").unwrap().1;
    assert_eq!(post["status"], "error");
    assert!(post["result"].as_str().unwrap().contains("DENIED"));
}

#[tokio::test]
async fn pre_tool_call_blocks_and_execution_middleware_short_circuits() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("t1", "terminal", r#"{"command": "touch ran"}"#)]),
        Scripted::text("ok"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder {
        block_tools: true,
        ..Default::default()
    });
    let a = agent(
        &provider,
        &["terminal"],
        dir.path(),
        Plugins {
            observers: vec![recorder.clone()],
            ..Default::default()
        },
    );
    a.run_turn(&[], "go", &mut |_| {}).await;
    assert!(!dir.path().join("ran").exists());
    let body = &provider.requests()[1].body;
    let tool = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(
        tool["content"],
        json!({"error": "tools are off today"}).to_string()
    );
    let seen = recorder.seen.lock().unwrap().clone();
    let post = &seen.iter().find(|(k, _)| k == "post_tool_call").unwrap().1;
    assert_eq!(
        (post["status"].as_str(), post["error_type"].as_str()),
        (Some("blocked"), Some("plugin_block"))
    );

    struct Cached;
    impl ExecutionMiddleware<String> for Cached {
        fn name(&self) -> &str {
            "cache"
        }
        fn call(
            &self,
            _f: Map<String, Value>,
            _n: Next<String>,
        ) -> BoxFut<'static, Result<Value, MiddlewareError<String>>> {
            Box::pin(async { Ok(json!("{\"output\": \"from cache\"}")) })
        }
    }
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("t2", "terminal", r#"{"command": "touch ran"}"#)]),
        Scripted::text("ok"),
    ]);
    let a = agent(
        &provider,
        &["terminal"],
        dir.path(),
        Plugins {
            tool_execution: vec![Arc::new(Cached)],
            ..Default::default()
        },
    );
    a.run_turn(&[], "go", &mut |_| {}).await;
    assert!(
        !dir.path().join("ran").exists(),
        "the short-circuit means the tool never ran"
    );
    let body = &provider.requests()[1].body;
    let tool = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool["content"], "{\"output\": \"from cache\"}");
}

#[derive(Default)]
struct Hooks {
    calls: Mutex<Vec<String>>,
    /// (hook, its arguments) of the turn-level hooks.
    payloads: Mutex<Vec<(String, Value)>>,
}

impl Hooks {
    fn keep(&self, hook: &str, p: &Value) {
        self.calls.lock().unwrap().push(hook.into());
        self.payloads.lock().unwrap().push((hook.into(), p.clone()));
    }

    fn payload(&self, hook: &str) -> Value {
        let all = self.payloads.lock().unwrap();
        all.iter().find(|(h, _)| h == hook).unwrap().1.clone()
    }
}

#[async_trait::async_trait]
impl Observer for Hooks {
    fn name(&self) -> &str {
        "hooks"
    }
    async fn on_session_start(&self, p: &Value) {
        self.keep("on_session_start", p);
    }
    async fn pre_llm_call(&self, p: &Value) -> Option<String> {
        self.keep("pre_llm_call", p);
        Some("Context: the user prefers short answers.".into())
    }
    async fn transform_tool_result(&self, p: &Value) -> Option<String> {
        Some(format!("[redacted {}]", p["tool_name"].as_str().unwrap()))
    }
    async fn transform_llm_output(&self, p: &Value) -> Option<String> {
        Some(format!(
            "{} (checked)",
            p["response_text"].as_str().unwrap()
        ))
    }
    async fn post_llm_call(&self, p: &Value) {
        self.keep("post_llm_call", p);
    }
    async fn on_session_end(&self, p: &Value) {
        self.keep("on_session_end", p);
    }
}

#[tokio::test]
async fn turn_level_hooks() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("h1", "terminal", r#"{"command": "echo secret"}"#)]),
        Scripted::text("fine"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let hooks = Arc::new(Hooks::default());
    let a = agent(
        &provider,
        &["terminal"],
        dir.path(),
        Plugins {
            observers: vec![hooks.clone()],
            ..Default::default()
        },
    );
    let mut appended = Vec::new();
    let r = a
        .run_turn(&[], "hi", &mut |e| {
            if let herald_agent::AgentEvent::MessageAppended(m) = e {
                appended.push(m);
            }
        })
        .await;
    assert_eq!(r.final_response, "fine (checked)");
    assert_eq!(
        r.messages.last().unwrap().content.as_deref(),
        Some("fine (checked)")
    );
    // What is saved (the appended messages) is the transformed answer too.
    assert_eq!(
        appended.last().unwrap().content.as_deref(),
        Some("fine (checked)")
    );
    // pre_llm_call context rode on the API call only: memory keeps the user's words.
    assert_eq!(r.messages[0].content.as_deref(), Some("hi"));
    assert_eq!(appended[0].content.as_deref(), Some("hi"));
    let first = &provider.requests()[0].body["messages"];
    assert_eq!(
        first[1]["content"],
        "hi\n\nContext: the user prefers short answers."
    );
    let second = &provider.requests()[1].body["messages"];
    let tool = second
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(tool["content"], "[redacted terminal]");
    assert_eq!(
        *hooks.calls.lock().unwrap(),
        vec![
            "on_session_start",
            "pre_llm_call",
            "post_llm_call",
            "on_session_end"
        ]
    );
    // The arguments Hermes 0.19.0 passes.
    let pre = hooks.payload("pre_llm_call");
    assert_eq!(pre["is_first_turn"], true);
    assert_eq!(pre["user_message"], "hi");
    assert_eq!(pre["sender_id"], "");
    assert_eq!(
        pre["conversation_history"],
        json!([{"role": "user", "content": "hi"}])
    );
    let turn_id = pre["turn_id"].as_str().unwrap().to_owned();
    assert!(
        turn_id.starts_with(&format!("{}:", pre["session_id"].as_str().unwrap())),
        "{turn_id}"
    );
    let post = hooks.payload("post_llm_call");
    assert_eq!(post["assistant_response"], "fine (checked)");
    assert_eq!(post["turn_id"], turn_id.as_str());
    assert_eq!(post["task_id"], pre["task_id"]);
    let history = post["conversation_history"].as_array().unwrap();
    assert_eq!(history[0]["content"], "hi", "the user's own words");
    assert!(history.iter().any(|m| m["role"] == "tool"), "{post}");
    let end = hooks.payload("on_session_end");
    assert_eq!(end["turn_id"], turn_id.as_str());
    assert_eq!(
        (end["completed"].clone(), end["interrupted"].clone()),
        (json!(true), json!(false))
    );
    assert!(
        end["model"].is_string() && end.get("response").is_none(),
        "{end}"
    );
    let start = hooks.payload("on_session_start");
    assert_eq!(
        start.as_object().unwrap().len(),
        3,
        "session_id, model, platform: {start}"
    );
}

/// An observer that waits (as one behind an out-of-process plugin host does).
struct Waits {
    ticks: Arc<std::sync::atomic::AtomicU32>,
    seen: Mutex<Option<(u32, u32)>>,
}

#[async_trait::async_trait]
impl Observer for Waits {
    fn name(&self) -> &str {
        "waits"
    }
    async fn pre_api_request(&self, _p: &Value) {
        let before = self.ticks.load(std::sync::atomic::Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(60)).await;
        let after = self.ticks.load(std::sync::atomic::Ordering::SeqCst);
        *self.seen.lock().unwrap() = Some((before, after));
    }
}

#[tokio::test(flavor = "current_thread")]
async fn an_observer_that_waits_does_not_block_the_runtime() {
    let provider = FakeProvider::start(vec![Scripted::text("ok")]);
    let dir = tempfile::tempdir().unwrap();
    let ticks = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let ticker = {
        let ticks = ticks.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(5)).await;
                ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        })
    };
    let waits = Arc::new(Waits {
        ticks,
        seen: Mutex::new(None),
    });
    let a = agent(
        &provider,
        &[],
        dir.path(),
        Plugins {
            observers: vec![waits.clone()],
            ..Default::default()
        },
    );
    let r = a.run_turn(&[], "hi", &mut |_| {}).await;
    ticker.abort();
    assert!(r.completed);
    let (before, after) = waits.seen.lock().unwrap().unwrap();
    assert!(
        after > before + 3,
        "other tasks ran while the hook waited: {before} -> {after}"
    );
}

//! The real agent frameworks against herald's API (issue 48): openai-agents (Responses
//! and Chat Completions), pydantic-ai (chat and responses), litellm, `llm`, the Vercel
//! `ai` SDK (chat and responses), each through plain, streamed, multi-turn, server-tool
//! and client-tool flows (`tests/clients/frameworks.py` and `frameworks.mjs`), and the
//! openai SDK's retry rule against a refused provider call. Each run asserts on what
//! the library returned (the script) and on what the fake provider was sent (here).
//! `scripts/test` installs the frameworks (HERALD_FRAMEWORKS_PYTHON,
//! HERALD_CLIENT_NODE_MODULES).

use super::api::{KEY, api_config};
use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use std::process::Command;

const CLIENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients");

fn frameworks_python() -> String {
    let python = std::env::var("HERALD_FRAMEWORKS_PYTHON").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../target/frameworks-venv/bin/python"
        )
        .into()
    });
    assert!(
        std::path::Path::new(&python).exists(),
        "the agent frameworks are needed: scripts/test installs them into target/frameworks-venv ({python})"
    );
    python
}

fn client_node_modules() -> String {
    let modules = std::env::var("HERALD_CLIENT_NODE_MODULES").unwrap_or_else(|_| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../target/test-cache/clients/node_modules"
        )
        .into()
    });
    assert!(
        std::path::Path::new(&modules).join("ai").exists(),
        "the Vercel ai SDK is needed: scripts/test installs it into target/test-cache/clients ({modules})"
    );
    modules
}

/// The provider's answers to one client's five flows, in their order.
fn script(provider: &FakeProvider, note: &str) {
    for text in ["Hello.", "Streamed answer.", "Noted.", "42."] {
        provider.push(Scripted::text(text));
    }
    let args = serde_json::json!({ "path": note }).to_string();
    provider.push(Scripted::tool_calls(&[("s1", "read_file", &args)]));
    provider.push(Scripted::text("The file says hello."));
    provider.push(Scripted::tool_calls(&[(
        "c1",
        "get_weather",
        r#"{"city": "Paris"}"#,
    )]));
    provider.push(Scripted::text("It is sunny in Paris."));
}

/// Runs `program args` with no proxy; its output, failing the test when it failed.
async fn run(program: String, args: Vec<String>, envs: Vec<(&'static str, String)>) -> String {
    let shown = format!("{program} {}", args.join(" "));
    let out = tokio::task::spawn_blocking(move || {
        Command::new(&program)
            .args(&args)
            .envs(envs)
            .env("HTTPS_PROXY", "")
            .env("HTTP_PROXY", "")
            .env("NO_PROXY", "*")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{shown}:\n{text}");
    text
}

/// One client's five flows against a fresh herald; what the provider was sent.
async fn flows(client: &str, node: bool) -> Vec<serde_json::Value> {
    let provider = FakeProvider::start(vec![]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let note = h.home().join("note.txt");
    std::fs::write(&note, "hello\n").unwrap();
    script(&provider, &note.display().to_string());
    let text = if node {
        let script = format!("{CLIENTS}/frameworks.mjs");
        let mut args = vec![script, h.base.clone(), KEY.to_owned()];
        args.extend((client == "vercel-responses").then(|| "responses".to_owned()));
        run(
            "node".into(),
            args,
            vec![("NODE_PATH", client_node_modules())],
        )
        .await
    } else {
        let script = format!("{CLIENTS}/frameworks.py");
        let args = vec![script, client.to_owned(), h.base.clone(), KEY.to_owned()];
        run(frameworks_python(), args, Vec::new()).await
    };
    for flow in ["plain", "stream", "multi", "server-tool", "client-tool"] {
        assert!(text.contains(&format!("{flow} ok")), "{client}: {text}");
    }
    let sent: Vec<serde_json::Value> = provider.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(
        sent.len(),
        8,
        "{client}: one provider call per step: {text}"
    );
    // The client's tool was offered beside herald's, and its result reached the model.
    let offered = sent[6]["tools"].to_string();
    assert!(
        offered.contains("get_weather") && offered.contains("read_file"),
        "{client}: {offered}"
    );
    let last = sent[7]["messages"].to_string();
    assert!(last.contains("sunny in Paris"), "{client}: {last}");
    // The chained second turn carried the first.
    let multi = sent[3]["messages"].to_string();
    assert!(
        multi.contains("remember 42") && multi.contains("Noted."),
        "{client}: {multi}"
    );
    sent
}

#[tokio::test]
async fn openai_agents_with_responses_and_with_chat_completions() {
    flows("agents-responses", false).await;
    flows("agents-chat", false).await;
}

#[tokio::test]
async fn pydantic_ai_with_its_chat_and_responses_models() {
    flows("pydantic-chat", false).await;
    flows("pydantic-responses", false).await;
}

#[tokio::test]
async fn litellm_and_llm() {
    flows("litellm", false).await;
    flows("llm", false).await;
}

#[tokio::test]
async fn the_vercel_ai_sdk_with_chat_and_responses_models() {
    flows("vercel-chat", true).await;
    flows("vercel-responses", true).await;
}

#[tokio::test]
async fn the_openai_sdk_does_not_retry_a_refused_call_into_a_second_run() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::Status(
        401,
        r#"{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}"#
            .into(),
    ));
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let script = format!("{CLIENTS}/frameworks.py");
    let args = vec![
        script,
        "openai-failure".into(),
        h.base.clone(),
        KEY.to_owned(),
    ];
    let text = run(frameworks_python(), args, Vec::new()).await;
    assert!(text.contains("failure ok status=424"), "{text}");
    assert_eq!(provider.requests().len(), 1, "one run, one provider call");
}

//! What the client sees is what the middleware made: an `llm_execution` plugin that
//! edits the provider's answer in place and returns it changes the final text on every
//! door, and where deltas already went out the door sends the correction after them.

use super::acp::RawAcp;
use super::api::{api_config, post_json};
use super::plugins::install_plugins;
use super::rpc::{Piped, rpc_home};
use super::support::{BIN, Herald};
use herald_test_support::{FakeProvider, Scripted};
use serde_json::json;

const NEW: &str = "Rewritten by the plugin.";

fn provider() -> FakeProvider {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::Events(Scripted::text_events(&[
        "Provider ",
        "text.",
    ])));
    provider
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_rpc_and_acp_end_with_the_middlewares_text() {
    let provider = provider();
    let home = rpc_home(&provider.base_url, "");
    install_plugins(home.path(), &["llm-rewrite-demo"]);

    let out = std::process::Command::new(BIN)
        .args(["chat", "-q", "hello"])
        .env("HERALD_HOME", home.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(stdout.trim_end().ends_with(NEW), "{stdout}");
    let quiet = std::process::Command::new(BIN)
        .args(["chat", "-Q", "-q", "hello"])
        .env("HERALD_HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&quiet.stdout).trim(), NEW);

    let mut rpc = Piped::start(home.path());
    let created = rpc.client.call("session.create", json!({})).await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    rpc.client
        .call("prompt.submit", json!({"session_id": sid, "text": "hello"}))
        .await;
    let events = rpc.client.until("message.complete").await;
    assert_eq!(events.last().unwrap()["payload"]["text"], NEW);

    let cwd = tempfile::tempdir().unwrap();
    let mut acp = RawAcp::start(home.path()).await;
    let session = acp.open_session(cwd.path()).await;
    acp.prompt(3, &session, "hello").await;
    acp.answer(3).await;
    let chunks: String = acp
        .others
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert!(chunks.ends_with(&format!("\n\n{NEW}")), "{chunks:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_with_the_middlewares_text_whole_and_at_the_end_of_a_stream() {
    let provider = provider();
    let h = Herald::start(&api_config(&provider.base_url, ""));
    install_plugins(h.home.path(), &["llm-rewrite-demo"]);
    let h = Herald::start_in(h.into_home(), &[]);
    let messages = json!([{"role": "user", "content": "hello"}]);
    let (_, whole) = post_json(&h, "/v1/chat/completions", json!({"messages": messages})).await;
    assert_eq!(whole["choices"][0]["message"]["content"], NEW, "{whole}");

    let body = json!({"messages": messages, "stream": true});
    let text = super::api::call(&h, "POST", "/v1/chat/completions", Some(body), &[])
        .await
        .text()
        .await
        .unwrap();
    let streamed: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(streamed, format!("Provider text.\n\n{NEW}"));

    let (_, resp) = post_json(&h, "/v1/responses", json!({"input": "hello"})).await;
    let out = resp["output"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(out["content"][0]["text"], NEW, "{resp}");
}

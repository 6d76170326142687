//! Images from every door reach the provider as OpenAI `image_url` parts, after the
//! text part, as Hermes sends them: API `image_url` and `input_image` parts (chat
//! completions, responses, runs), ACP image blocks (RPC's `image.attach` is in rpc.rs);
//! bad parts get Hermes's 400s.

use super::acp::RawAcp;
use super::api::{api_config, post_json};
use super::rpc::rpc_home;
use super::support::Herald;
use herald_test_support::{FakeProvider, Scripted};
use reqwest::StatusCode;
use serde_json::{Value, json};

const PNG: &str = "data:image/png;base64,iVBORw==";

/// The content of the last user message of the provider's request `n`.
fn user_content(provider: &FakeProvider, n: usize) -> Value {
    let body = &provider.requests()[n].body;
    let messages = body["messages"].as_array().unwrap();
    let user = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    user["content"].clone()
}

fn parts(text: &str, url: &str) -> Value {
    json!([{"type": "text", "text": text}, {"type": "image_url", "image_url": {"url": url}}])
}

#[tokio::test]
async fn api_image_parts_reach_the_provider_as_parts_and_bad_ones_are_refused() {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::text("A cat."));
    let h = Herald::start(&api_config(&provider.base_url, ""));

    let content = json!([
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": PNG}}
    ]);
    let body = json!({"model": "hermes-agent", "messages": [{"role": "user", "content": content}]});
    let (s, b) = post_json(&h, "/v1/chat/completions", body).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(user_content(&provider, 0), parts("what is this?", PNG));

    let input = json!([{"role": "user", "content": [
        {"type": "input_text", "text": "and this?"},
        {"type": "input_image", "image_url": "https://example.com/dog.png"}
    ]}]);
    let (s, b) = post_json(&h, "/v1/responses", json!({"input": input})).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        user_content(&provider, 1),
        parts("and this?", "https://example.com/dog.png")
    );

    let input = json!([{"role": "user", "content": [
        {"type": "input_image", "image_url": PNG}
    ]}]);
    let (s, b) = post_json(&h, "/v1/runs", json!({"input": input})).await;
    assert_eq!(s, StatusCode::ACCEPTED, "{b}");
    for _ in 0..100 {
        if provider.requests().len() > 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        user_content(&provider, 2),
        json!([{"type": "image_url", "image_url": {"url": PNG}}]),
        "an image alone is a prompt"
    );

    let bad = [
        (
            json!({"type": "image_url", "image_url": {"url": "file:///etc/passwd"}}),
            "invalid_image_url",
        ),
        (
            json!({"type": "input_image", "image_url": "data:text/plain,hi"}),
            "unsupported_content_type",
        ),
        (
            json!({"type": "input_file", "file_id": "f1"}),
            "unsupported_content_type",
        ),
    ];
    for (part, code) in bad {
        let messages = json!([{"role": "user", "content": [{"type": "text", "text": "x"}, part]}]);
        let (s, b) = post_json(&h, "/v1/chat/completions", json!({"messages": messages})).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert_eq!(b["error"]["code"], code, "{b}");
        assert_eq!(b["error"]["param"], "messages[0].content", "{b}");
    }
    assert_eq!(
        provider.requests().len(),
        3,
        "a refused request reaches no model"
    );
}

#[tokio::test]
async fn an_acp_image_block_reaches_the_provider_as_a_part() {
    let provider = FakeProvider::start(vec![Scripted::text("A cat.")]);
    let home = rpc_home(&provider.base_url, "");
    let cwd = tempfile::tempdir().unwrap();
    let mut acp = RawAcp::start(home.path()).await;
    let session = acp.open_session(cwd.path()).await;
    let prompt = json!({"sessionId": session, "prompt": [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "mimeType": "image/png", "data": "iVBORw=="}
    ]});
    acp.send(3, "session/prompt", prompt).await;
    let end = acp.answer(3).await;
    assert_eq!(end["stopReason"], "end_turn", "{end}");
    assert_eq!(user_content(&provider, 0), parts("what is this?", PNG));
}

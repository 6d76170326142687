//! Issue 49 (memory, as Hermes has it): the `memory` tool writes the home's
//! `memories/MEMORY.md` and `USER.md`, and a new session's system prompt carries their
//! snapshot; a migrated Hermes memory is there from the first turn.

use super::api::{api_config, call, post_json};
use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use reqwest::StatusCode;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn the_memory_tool_writes_and_the_next_session_starts_with_it() {
    let provider = FakeProvider::start(vec![]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    // A memory file as Hermes writes it (entries joined by a line with §).
    std::fs::create_dir_all(h.home().join("memories")).unwrap();
    std::fs::write(
        h.home().join("memories/USER.md"),
        "Name: Ada\n§\nPrefers short answers",
    )
    .unwrap();
    let ops = json!({"operations": [{"action": "add", "content": "The deploy host is build-7"}]});
    provider.push(Scripted::tool_calls(&[("m1", "memory", &ops.to_string())]));
    provider.push(Scripted::text("Noted."));
    let chat = |text: &str| json!({"messages": [{"role": "user", "content": text}]});
    let (s, b) = post_json(&h, "/v1/chat/completions", chat("remember the deploy host")).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let first = provider.requests();
    let system = first[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("USER PROFILE (who the user is)")
            && system.contains("Prefers short answers"),
        "Hermes's memory from the first turn: {system}"
    );
    assert!(!system.contains("build-7"), "not yet written");
    let offered = first[0].body["tools"].to_string();
    assert!(offered.contains("\"memory\""), "{offered}");
    let saved = std::fs::read_to_string(h.home().join("memories/MEMORY.md")).unwrap();
    assert_eq!(saved, "The deploy host is build-7");
    let result = first[1].body["messages"].to_string();
    assert!(result.contains("\\\"success\\\":true"), "{result}");

    // The snapshot is frozen for a session: the next session (another conversation)
    // starts with the new entry.
    provider.push(Scripted::text("build-7."));
    let (s, _) = post_json(&h, "/v1/chat/completions", chat("which host?")).await;
    assert_eq!(s, StatusCode::OK);
    let next = provider.requests().last().unwrap().body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        next.contains("MEMORY (your personal notes)")
            && next.contains("The deploy host is build-7"),
        "{next}"
    );
}

/// `X-Hermes-Session-Key` gives each key a long-term memory of its own: what one key's
/// conversation writes is in that key's next session, not in another key's nor in the
/// home's; a request without the header has the home's.
#[tokio::test]
async fn the_session_key_scopes_the_memory() {
    let provider = FakeProvider::start(vec![]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let add = json!({"action": "add", "content": "Alice's cat is called Tom"});
    provider.push(Scripted::tool_calls(&[("m1", "memory", &add.to_string())]));
    provider.push(Scripted::text("Noted."));
    let chat = |text: &str| json!({"messages": [{"role": "user", "content": text}]});
    let as_key = |key: &'static str, text: &str| {
        let body = chat(text);
        let h = &h;
        async move {
            let r = call(
                h,
                "POST",
                "/v1/chat/completions",
                Some(body),
                &[("X-Hermes-Session-Key", key)],
            )
            .await;
            assert_eq!(r.status(), StatusCode::OK);
            assert_eq!(r.headers()["x-hermes-session-key"], key);
        }
    };
    as_key("agent:main:webui:dm:alice", "my cat is Tom").await;
    let stored: Vec<_> = std::fs::read_dir(h.home().join("memories/keys"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(
        std::fs::read_to_string(stored[0].join("MEMORY.md")).unwrap(),
        "Alice's cat is called Tom"
    );
    assert!(!h.home().join("memories/MEMORY.md").exists());
    let system = |provider: &FakeProvider| {
        provider.requests().last().unwrap().body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    provider.push(Scripted::text("Tom."));
    as_key("agent:main:webui:dm:alice", "what is my cat called?").await;
    assert!(system(&provider).contains("Alice's cat is called Tom"));
    provider.push(Scripted::text("No idea."));
    as_key("agent:main:webui:dm:bob", "what is my cat called?").await;
    assert!(!system(&provider).contains("Tom"), "another key's memory");
    provider.push(Scripted::text("No idea."));
    let (s, _) = post_json(&h, "/v1/chat/completions", chat("and mine?")).await;
    assert_eq!(s, StatusCode::OK);
    assert!(!system(&provider).contains("Tom"), "the home's memory");
}

/// A webhook run has no memory unless its route grants `memory`; then it has the tool
/// and the snapshot in its prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_run_has_memory_only_when_its_route_grants_it() {
    let provider = FakeProvider::start(vec![Scripted::text("done"), Scripted::text("done")]);
    let routes = "        plain:\n          prompt: hi\n          deliver: log\n        noted:\n          prompt: hi\n          deliver: log\n          toolsets: [hermes-webhook, memory]\n";
    let config = super::agent_runs::agent_config(&provider.base_url, "", routes);
    let h = Herald::start(&config);
    std::fs::create_dir_all(h.home().join("memories")).unwrap();
    std::fs::write(h.home().join("memories/MEMORY.md"), "Deploys on Fridays").unwrap();
    let offered = |i: usize| {
        let r = &provider.requests()[i].body;
        (
            r["tools"].to_string().contains("\"memory\""),
            r["messages"][0]["content"]
                .as_str()
                .unwrap()
                .contains("Deploys on Fridays"),
        )
    };
    let (s, _) = h.github("plain", "push", "{}", None).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    wait_for(Duration::from_secs(20), "the first run", || {
        (!provider.requests().is_empty()).then_some(())
    })
    .await;
    assert_eq!(offered(0), (false, false));
    let (s, _) = h.github("noted", "push", "{}", None).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    wait_for(Duration::from_secs(20), "the second run", || {
        (provider.requests().len() > 1).then_some(())
    })
    .await;
    assert_eq!(offered(1), (true, true));
}

//! Issue 49 (memory, as Hermes has it): the `memory` tool writes the home's
//! `memories/MEMORY.md` and `USER.md`, and a new session's system prompt carries their
//! snapshot; a migrated Hermes memory is there from the first turn.

use super::api::{api_config, post_json};
use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use reqwest::StatusCode;
use serde_json::json;

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

//! `approvals.timeout` on the doors a human answers through: an approval nobody
//! answers is denied when it runs out, on ACP (where it was a fixed 60 s) and on RPC.

use super::acp::RawAcp;
use super::rpc::{Piped, rpc_home};
use herald_test_support::{FakeProvider, Scripted};
use serde_json::json;
use std::time::{Duration, Instant};

/// A provider that asks for one dangerous command, then answers `after`.
fn asking_provider(file: &str, after: &str) -> FakeProvider {
    let args = format!(r#"{{"command": "rm -f {file}"}}"#);
    FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "terminal", &args)]),
        Scripted::text(after),
    ])
}

const ONE_SECOND: &str = "approvals:\n  timeout: 1\n";

#[tokio::test]
async fn an_unanswered_acp_permission_is_denied_after_approvals_timeout() {
    let provider = asking_provider("acp-kept.txt", "Not removed.");
    let home = rpc_home(&provider.base_url, ONE_SECOND);
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("acp-kept.txt"), "x").unwrap();
    let mut acp = RawAcp::start(home.path()).await;
    let session = acp.open_session(cwd.path()).await;
    let started = Instant::now();
    acp.prompt(3, &session, "clean").await;
    let end = tokio::time::timeout(Duration::from_secs(20), acp.answer(3))
        .await
        .expect("the turn waited past approvals.timeout");
    assert_eq!(end["stopReason"], "end_turn", "{end}");
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(
        acp.others
            .iter()
            .any(|m| m["method"] == "session/request_permission"),
        "{:?}",
        acp.others
    );
    assert!(cwd.path().join("acp-kept.txt").exists());
    let last = provider.requests().last().unwrap().body["messages"].clone();
    assert!(last.to_string().contains("no answer within 1s"), "{last}");
}

#[tokio::test]
async fn an_unanswered_rpc_approval_is_denied_after_approvals_timeout() {
    let provider = asking_provider("rpc-timeout-kept.txt", "Not removed.");
    let home = rpc_home(&provider.base_url, ONE_SECOND);
    let cwd = tempfile::tempdir().unwrap();
    std::fs::write(cwd.path().join("rpc-timeout-kept.txt"), "x").unwrap();
    let mut rpc = Piped::start(home.path());
    let created = rpc
        .client
        .call("session.create", json!({"cwd": cwd.path()}))
        .await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    rpc.client
        .call("prompt.submit", json!({"session_id": sid, "text": "clean"}))
        .await;
    rpc.client.until("approval.request").await;
    let rest = rpc.client.until("message.complete").await;
    assert_eq!(rest.last().unwrap()["payload"]["text"], "Not removed.");
    assert!(cwd.path().join("rpc-timeout-kept.txt").exists());
    let r = rpc
        .client
        .call(
            "approval.respond",
            json!({"session_id": sid, "choice": "once"}),
        )
        .await;
    assert_eq!(r, json!({"resolved": 0}), "nothing is pending any more");
}

//! The platform each front door reports to a plugin, as Hermes names them: `cli` for
//! `herald chat`, `tui` for `herald rpc`, `acp` for `herald acp`, `api_server` for the
//! HTTP API and `webhook` for webhook runs, a profile's (`/p/<profile>/`) included.

use super::acp::{Seen, initialized_session, text, with_agent};
use super::agent_runs::agent_config;
use super::api::{api_config, post_json};
use super::plugins::{install_plugins, traces};
use super::rpc::{Piped, rpc_home};
use super::support::{BIN, Herald, SECRET};
use herald_test_support::{FakeProvider, Scripted};
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The platforms the trace-recorder plugin in `home` was told of, each once.
fn platforms(home: &Path) -> Vec<String> {
    let mut seen: Vec<String> = traces(home)
        .iter()
        .filter_map(|t| t["fields"]["platform"].as_str().map(str::to_owned))
        .collect();
    seen.dedup();
    seen
}

/// Polls until the plugin in `home` was told of a platform.
async fn reported(home: &Path) -> Vec<String> {
    for _ in 0..200 {
        let seen = platforms(home);
        if !seen.is_empty() {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the plugin in {} was told of no platform", home.display());
}

fn answering_provider() -> FakeProvider {
    let provider = FakeProvider::start(vec![]);
    provider.set_fallback(Scripted::text("Seen."));
    provider
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_rpc_and_acp_report_cli_tui_and_acp() {
    let provider = answering_provider();

    let chat = rpc_home(&provider.base_url, "");
    install_plugins(chat.path(), &["trace-recorder"]);
    let out = std::process::Command::new(BIN)
        .args(["chat", "-Q", "-q", "hello"])
        .env("HERALD_HOME", chat.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(reported(chat.path()).await, ["cli"]);

    let rpc = rpc_home(&provider.base_url, "");
    install_plugins(rpc.path(), &["trace-recorder"]);
    let mut piped = Piped::start(rpc.path());
    let created = piped.client.call("session.create", json!({})).await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    piped
        .client
        .call("prompt.submit", json!({"session_id": sid, "text": "hello"}))
        .await;
    piped.client.until("message.complete").await;
    assert_eq!(reported(rpc.path()).await, ["tui"]);

    let acp = rpc_home(&provider.base_url, "");
    install_plugins(acp.path(), &["trace-recorder"]);
    let cwd = tempfile::tempdir().unwrap();
    let cwd_path = cwd.path().to_path_buf();
    with_agent(
        acp.path(),
        vec![],
        Arc::new(Mutex::new(Seen::default())),
        async |cx| {
            let session = initialized_session(&cx, cwd_path).await?;
            let prompt = agent_client_protocol::v1::schema::PromptRequest::new(session, text("hi"));
            cx.send_request(prompt).block_task().await?;
            Ok(())
        },
    )
    .await;
    assert_eq!(reported(acp.path()).await, ["acp"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_reports_api_server_and_webhook_runs_webhook_a_profiles_too() {
    let provider = answering_provider();
    let api = Herald::start(&api_config(&provider.base_url, ""));
    install_plugins(api.home.path(), &["trace-recorder"]);
    let api = Herald::start_in(api.into_home(), &[]);
    let (s, _) = post_json(
        &api,
        "/v1/chat/completions",
        json!({"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(s, reqwest::StatusCode::OK);
    assert_eq!(reported(api.home.path()).await, ["api_server"]);

    let routes = "        plain:\n          prompt: 'plain {n}'\n          deliver: log\n        team_plain:\n          profile: team\n          prompt: 'team {n}'\n          deliver: log\n";
    let config = format!(
        "multiplex_profiles: true\n{}",
        agent_config(&provider.base_url, "", routes)
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), &config).unwrap();
    install_plugins(home.path(), &["trace-recorder"]);
    let team = home.path().join("profiles/team");
    std::fs::create_dir_all(&team).unwrap();
    let team_config = format!(
        "model:\n  default: fake-model\n  base_url: {}\n",
        provider.base_url
    );
    std::fs::write(team.join("config.yaml"), team_config).unwrap();
    install_plugins(&team, &["trace-recorder"]);
    let h = Herald::start_in(home, &[]);
    let body = br#"{"n": 1}"#;
    let sig = vec![
        (
            "x-hub-signature-256",
            herald_webhook::verify::sign::github(SECRET, body),
        ),
        ("x-github-event", "push".to_owned()),
    ];
    let (s, _) = h.post("/webhooks/plain", body.to_vec(), &sig).await;
    assert_eq!(s, reqwest::StatusCode::ACCEPTED);
    let (s, _) = h
        .post("/p/team/webhooks/team_plain", body.to_vec(), &sig)
        .await;
    assert_eq!(s, reqwest::StatusCode::ACCEPTED);
    assert_eq!(reported(h.home.path()).await, ["webhook"]);
    assert_eq!(
        reported(&h.home.path().join("profiles/team")).await,
        ["webhook"]
    );
}

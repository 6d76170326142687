//! No orphans on any exit path: a command the agent started (`sleep`) dies with every
//! front door, on SIGTERM and SIGINT and when ACP's stdin closes, and `herald rpc` and
//! `herald acp` exit within 2 s of the signal.

use super::acp::RawAcp;
use super::api::{KEY, api_config};
use super::rpc::{Piped, WsServer, rpc_home};
use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// A provider whose first answer runs `sleep <seconds>` (a number unique to the test,
/// to find the process by).
fn sleeping_provider(seconds: u32) -> FakeProvider {
    let args = format!(r#"{{"command": "sleep {seconds}"}}"#);
    let provider = FakeProvider::start(vec![Scripted::tool_calls(&[("c1", "terminal", &args)])]);
    provider.set_fallback(Scripted::text("done"));
    provider
}

/// Whether a process running `sleep <seconds>` exists.
fn sleeping(seconds: u32) -> bool {
    let wanted = format!("sleep\0{seconds}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .any(|c| String::from_utf8_lossy(&c).contains(&wanted))
}

async fn until_sleeping(seconds: u32) {
    wait_for(Duration::from_secs(20), "the command to start", || {
        sleeping(seconds).then_some(())
    })
    .await;
}

fn signal(child: &tokio::process::Child, sig: i32) {
    let pid = child.id().unwrap() as i32;
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Waits for `child` to exit; how long it took.
async fn exited(child: &mut tokio::process::Child, limit: Duration) -> Duration {
    let started = Instant::now();
    tokio::time::timeout(limit, child.wait())
        .await
        .expect("herald did not exit")
        .unwrap();
    started.elapsed()
}

async fn no_orphan(seconds: u32) {
    wait_for(Duration::from_secs(3), "the command to die", || {
        (!sleeping(seconds)).then_some(())
    })
    .await;
}

#[tokio::test]
async fn herald_rpc_on_stdio_stops_its_commands_on_sigterm_and_sigint() {
    for (seconds, sig) in [(1201, libc::SIGTERM), (1202, libc::SIGINT)] {
        let provider = sleeping_provider(seconds);
        let home = rpc_home(&provider.base_url, "");
        let cwd = tempfile::tempdir().unwrap();
        let mut rpc = Piped::start(home.path());
        let created = rpc
            .client
            .call("session.create", json!({"cwd": cwd.path()}))
            .await;
        let sid = created["session_id"].as_str().unwrap().to_owned();
        rpc.client
            .call("prompt.submit", json!({"session_id": sid, "text": "wait"}))
            .await;
        until_sleeping(seconds).await;
        signal(&rpc.child, sig);
        let took = exited(&mut rpc.child, Duration::from_secs(10)).await;
        assert!(took < Duration::from_secs(2), "signal {sig}: {took:?}");
        no_orphan(seconds).await;
    }
}

#[tokio::test]
async fn herald_rpc_over_websocket_stops_its_commands_on_sigterm() {
    let seconds = 1203;
    let provider = sleeping_provider(seconds);
    let home = rpc_home(&provider.base_url, "");
    let cwd = tempfile::tempdir().unwrap();
    let mut server = WsServer::start(home.path(), "127.0.0.1:0", None).await;
    let mut client = server.client(None).await;
    let created = client
        .call("session.create", json!({"cwd": cwd.path()}))
        .await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    client
        .call("prompt.submit", json!({"session_id": sid, "text": "wait"}))
        .await;
    until_sleeping(seconds).await;
    signal(&server.child, libc::SIGTERM);
    let took = exited(&mut server.child, Duration::from_secs(10)).await;
    assert!(took < Duration::from_secs(2), "{took:?}");
    no_orphan(seconds).await;
}

#[tokio::test]
async fn herald_acp_stops_its_commands_on_sigterm_and_when_stdin_closes() {
    for (seconds, by_signal) in [(1204, true), (1205, false)] {
        let provider = sleeping_provider(seconds);
        let home = rpc_home(&provider.base_url, "");
        let cwd = tempfile::tempdir().unwrap();
        let mut acp = RawAcp::start(home.path()).await;
        let session = acp.open_session(cwd.path()).await;
        acp.prompt(3, &session, "wait").await;
        until_sleeping(seconds).await;
        if by_signal {
            signal(&acp.child, libc::SIGTERM);
        } else {
            acp.close_stdin();
        }
        let took = exited(&mut acp.child, Duration::from_secs(10)).await;
        assert!(
            took < Duration::from_secs(2),
            "by signal {by_signal}: {took:?}"
        );
        no_orphan(seconds).await;
    }
}

#[tokio::test]
async fn the_gateway_stops_an_api_run_on_sigterm_and_the_run_reads_failed() {
    let seconds = 1206;
    let provider = sleeping_provider(seconds);
    let mut h = Herald::start(&api_config(&provider.base_url, ""));
    let client = http_client(Duration::from_secs(10));
    let started: Value = client
        .post(h.url("/v1/runs"))
        .header("Authorization", format!("Bearer {KEY}"))
        .json(&json!({"input": "wait"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id = started["run_id"].as_str().unwrap().to_owned();
    until_sleeping(seconds).await;
    let status = h.terminate();
    assert_eq!(status, Some(0), "{}", h.log());
    no_orphan(seconds).await;
    let h = Herald::start_in(h.into_home(), &[]);
    let status: Value = client
        .get(h.url(&format!("/v1/runs/{run_id}")))
        .header("Authorization", format!("Bearer {KEY}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(status["status"], "failed", "{status}");
    assert_eq!(status["error"], "interrupted: herald stopped", "{status}");
}

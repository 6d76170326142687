//! Runs cut off by a crash: `herald rpc` and `herald acp` mark their own dead runs
//! failed when they start again, and leave a live gateway's run beside them alone.

use super::acp::RawAcp;
use super::api::{api_config, post_json};
use super::rpc::Piped;
use super::support::Herald;
use herald_test_support::{FakeProvider, Scripted};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

/// The runs in `state.db`: the source of their session and their status, in order.
pub(super) fn runs(home: &Path) -> Vec<(String, String)> {
    let db = home.join("state.db");
    let script = "import sqlite3, sys, json\n\
        c = sqlite3.connect(sys.argv[1])\n\
        rows = c.execute('SELECT s.source, r.status FROM herald_runs r JOIN sessions s \
        ON s.id = r.session_id ORDER BY r.created_at').fetchall()\n\
        print(json.dumps(rows))\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script, &db.display().to_string()])
        .output()
        .expect("python3 reads state.db here");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Waits until `state.db` holds `n` runs.
async fn until_runs(home: &Path, n: usize) {
    for _ in 0..100 {
        if runs(home).len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("state.db never held {n} runs: {:?}", runs(home));
}

#[tokio::test]
async fn a_killed_rpc_or_acp_run_fails_on_the_next_start_and_a_live_gateway_run_is_left() {
    let slow = || Scripted::Delayed(Duration::from_secs(30), Box::new(Scripted::text("late")));
    let provider = FakeProvider::start(vec![slow(), slow(), slow()]);
    let h = Herald::start(&api_config(&provider.base_url, ""));
    let home = h.home.path().to_path_buf();
    let (_, b) = post_json(&h, "/v1/runs", json!({"input": "long"})).await;
    let gateway_run = b["run_id"].as_str().unwrap().to_owned();
    until_runs(&home, 1).await;

    // `herald rpc` starts beside the gateway, and is killed in its own turn.
    let mut rpc = Piped::start(&home);
    let created = rpc.client.call("session.create", json!({})).await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    rpc.client
        .call("prompt.submit", json!({"session_id": sid, "text": "slow"}))
        .await;
    until_runs(&home, 2).await;
    rpc.child.kill().await.unwrap();

    // `herald acp` starts (recovering the dead rpc's run), and is killed in its turn.
    let cwd = tempfile::tempdir().unwrap();
    let mut acp = RawAcp::start(&home).await;
    let session = acp.open_session(cwd.path()).await;
    acp.prompt(3, &session, "slow").await;
    until_runs(&home, 3).await;
    let statuses: Vec<String> = runs(&home).into_iter().map(|(_, s)| s).collect();
    assert_eq!(
        statuses,
        ["running", "failed", "running"],
        "{:?}",
        runs(&home)
    );
    acp.child.kill().await.unwrap();

    // `herald rpc` again: the dead acp run is failed, the gateway's is still live.
    let mut again = Piped::start(&home);
    again.client.call("session.create", json!({})).await;
    let seen = runs(&home);
    let want = [
        ("api_server", "running"),
        ("tui", "failed"),
        ("acp", "failed"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(seen, want);
    let (_, st) = super::api::get_json(&h, &format!("/v1/runs/{gateway_run}")).await;
    assert_eq!(st["status"], "running", "{st}");
}

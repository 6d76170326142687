//! Running herald as a service: systemd's notify protocol (ready, watchdog, stopping)
//! and `herald health` for a container's HEALTHCHECK.

use super::support::*;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

/// The datagrams herald sent to a notify socket, until `until` is among them.
fn heard(socket: &UnixDatagram, until: &str, limit: Duration) -> Vec<String> {
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while started.elapsed() < limit {
        if let Ok(n) = socket.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            let done = text.lines().any(|l| l == until);
            got.push(text);
            if done {
                return got;
            }
        }
    }
    panic!("never heard {until}: {got:?}");
}

#[test]
fn the_gateway_tells_systemd_it_is_ready_alive_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let path = path.display().to_string();
    let mut h = Herald::start_with(
        &config_with_routes("        r: {}\n"),
        &[
            ("NOTIFY_SOCKET", path.as_str()),
            ("WATCHDOG_USEC", "1000000"),
        ],
    );
    let ready = heard(&socket, "READY=1", Duration::from_secs(10));
    assert!(ready.concat().contains("STATUS=serving"), "{ready:?}");
    // Pings twice a period while the inbox answers.
    heard(&socket, "WATCHDOG=1", Duration::from_secs(5));
    heard(&socket, "WATCHDOG=1", Duration::from_secs(5));
    assert_eq!(h.terminate(), Some(0));
    heard(&socket, "STOPPING=1", Duration::from_secs(5));
}

#[test]
fn herald_health_checks_the_recorded_gateway_or_a_url() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), "model: x\n").unwrap();
    let (code, _, err) = run_cli(home.path(), &["health"]);
    assert_eq!(code, 3, "no gateway runs: {err}");
    let h = Herald::start(&config_with_routes("        r: {}\n"));
    let (code, out, err) = h.cli(&["health"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("/health/detailed"), "{out}");
    let wrong = h.url("/nothing-here");
    let (code, _, err) = h.cli(&["health", "--url", &wrong, "--timeout", "2"]);
    assert_eq!(code, 1);
    assert!(err.contains("404"), "{err}");
    let (code, _, err) = h.cli(&["health", "--url", "http://127.0.0.1:9/health"]);
    assert_eq!(code, 1, "{err}");
}

/// Runs `sql` on the home's inbox database (beside the running gateway, as an
/// operator's sqlite3 would).
fn sqlite(home: &std::path::Path, sql: &str) {
    let db = home.join("herald.db");
    let script = "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], timeout=10)\nc.execute(sys.argv[2])\nc.commit()\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script, &db.display().to_string(), sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_prunes_old_delivered_entries_and_their_delivery_records() {
    let provider = herald_test_support::FakeProvider::start(vec![]);
    provider.set_fallback(herald_test_support::Scripted::text("noted"));
    let routes = "        r:\n          deliver: log\n";
    let config = format!(
        "{}inbox:\n  retention:\n    delivered_days: 1\n    dead_days: 0\n",
        super::agent_runs::agent_config(&provider.base_url, "", routes)
    );
    let h = Herald::start_with(&config, &[("HERALD_RETENTION_EVERY_MS", "200")]);
    for n in 0..3 {
        let d = format!("old-{n}");
        let (s, _) = h.github("r", "push", "{}", Some(&d)).await;
        assert_eq!(s, reqwest::StatusCode::ACCEPTED);
    }
    let delivered = |h: &Herald| {
        h.inbox()
            .iter()
            .filter(|i| i["state"] == "delivered")
            .count()
    };
    wait_for(Duration::from_secs(30), "three delivered", || {
        (delivered(&h) == 3).then_some(())
    })
    .await;
    // Two of them, and their delivery records, as if delivered two days ago.
    let two_days = 2 * 86_400_000;
    sqlite(
        h.home(),
        &format!(
            "UPDATE inbox SET updated_at_ms = updated_at_ms - {two_days}, received_at_ms = received_at_ms - {two_days} WHERE delivery_id IN ('old-0', 'old-1')"
        ),
    );
    sqlite(
        h.home(),
        &format!(
            "UPDATE deliveries SET created_at_ms = created_at_ms - {two_days} WHERE delivery_id IN ('old-0', 'old-1')"
        ),
    );
    wait_for(Duration::from_secs(10), "the old ones pruned", || {
        (h.inbox().len() == 1).then_some(())
    })
    .await;
    assert_eq!(h.inbox()[0]["delivery_id"], "old-2");
    // The records go in the same pass, just after.
    let records = |h: &Herald| {
        let (code, out, _) = h.cli(&["deliveries", "list", "--json"]);
        assert_eq!(code, 0);
        let list: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
        list.iter()
            .filter_map(|r| r["delivery_id"].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    };
    wait_for(Duration::from_secs(10), "their records pruned", || {
        (records(&h) == ["old-2"]).then_some(())
    })
    .await;
    let log = h.log_once_it_has("retention: old inbox entries removed");
    assert!(log.contains("removed=2"), "{log}");
}

//! Hostile MCP servers (`tests/clients/hostile_mcp.py`, raw JSON-RPC over stdio)
//! against a running gateway: herald's memory and CPU stay bounded, it lists their tools
//! again at most once a minute, a flooding server is disconnected and shown so on the
//! dashboard's health page, and that page counts only the tools the model is offered.

use super::dashboard::Session;
use super::mcp::{python, stdio_server};
use super::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn hostile_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/hostile_mcp.py")
}

/// A hostile server entry: `mode` of the script, its tools/list requests logged to
/// `lists`, with more `env` entries (`, K: V`).
fn hostile_server(name: &str, mode: &str, lists: &Path, env: &str) -> String {
    format!(
        "  {name}:\n    command: {}\n    args: [{}, {mode}]\n    env: {{MCP_TEST_LIST_LOG: {}, MCP_TEST_PID_FILE: {}{env}}}\n",
        python(),
        hostile_script().display(),
        lists.display(),
        lists.with_extension("pid").display(),
    )
}

/// A gateway config with a model (so that the MCP servers start) and `servers`.
fn gateway_config(servers: &str) -> String {
    format!(
        "{}model:\n  default: fake-model\n  base_url: http://127.0.0.1:9/v1\nmcp_servers:\n{servers}",
        config_with_routes("        r: {}\n")
    )
}

/// VmHWM and VmRSS of `pid`, in MB.
fn memory_mb(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .unwrap()
            / 1024.0
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// utime + stime of `pid`, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    // SAFETY: sysconf only reads a constant of the system.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

/// The tools/list requests a hostile server logged: (seconds since `t0`, cursor).
fn lists(file: &Path, t0: f64) -> Vec<(f64, String)> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (at, cursor) = l.split_once(' ')?;
            Some((at.parse::<f64>().ok()? - t0, cursor.to_owned()))
        })
        .collect()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The dashboard's health answer, logged in with the home's token.
async fn health(h: &Herald) -> Value {
    let (code, token, err) = h.cli(&["dashboard", "token"]);
    assert_eq!(code, 0, "{err}");
    let session = Session::logged_in(h, token.trim()).await;
    let r = session
        .get(h, "/dashboard/api/health")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::OK);
    r.json().await.unwrap()
}

fn server_report<'a>(health: &'a Value, name: &str) -> &'a Value {
    health["mcp"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no MCP server {name} in {health}"))
}

#[test]
fn endless_huge_tool_pages_and_list_changed_every_2_s_keep_herald_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (pages, heavy) = (dir.path().join("pages.log"), dir.path().join("heavy.log"));
    // `pages`: 5000 tools of 2.7 KB a page (13.5 MB); `heavy`: 50 tools of 40 KB a page
    // (2 MB). Both with a next cursor for ever and list_changed every 2 s.
    let servers = format!(
        "{}{}",
        hostile_server("pages", "pages", &pages, ""),
        hostile_server(
            "heavy",
            "pages",
            &heavy,
            ", MCP_TEST_PAGE_TOOLS: '50', MCP_TEST_TOOL_BYTES: '40000'"
        )
    );
    let t0 = unix_now();
    let h = Herald::start(&gateway_config(&servers));
    let pid = h.child.id();
    h.log_once_it_has("server=\"heavy\" tools=");
    let log = h.log_once_it_has("server=\"pages\" tools=");
    assert!(
        log.contains("MCP server connected server=\"pages\" tools=256"),
        "{log}"
    );
    let watched = Instant::now();
    let cpu_before = cpu_seconds(pid);
    std::thread::sleep(Duration::from_secs(66));
    let cpu = cpu_seconds(pid) - cpu_before;
    let seconds = watched.elapsed().as_secs_f64();
    let (hwm, rss) = memory_mb(pid);
    eprintln!(
        "hostile pages: VmHWM {hwm:.1} MB, VmRSS {rss:.1} MB, CPU {cpu:.2} s in {seconds:.0} s"
    );
    // Before: VmRSS up to 1.1 GB and half a core (one server).
    assert!(hwm < 400.0, "VmHWM {hwm:.1} MB");
    assert!(cpu < 0.2 * seconds, "CPU {cpu:.2} s in {seconds:.0} s");
    let log = h.log();
    // One page of `pages` holds 256 tools: no second page is asked for.
    let asked = lists(&pages, t0);
    assert!(asked.iter().all(|(_, c)| c == "None"), "{asked:?}");
    // `heavy` stops once its tools weigh 4 MiB: on its third page.
    let asked = lists(&heavy, t0);
    let cursors: Vec<&str> = asked.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(&cursors[..3], ["None", "p1", "p2"], "{asked:?}");
    assert!(!cursors.contains(&"p3"), "{asked:?}");
    assert!(log.contains("weigh more than 4 MiB together"), "{log}");
    // Listed again at most once a minute, however often the server says it changed.
    for file in [&pages, &heavy] {
        let starts: Vec<f64> = lists(file, t0)
            .into_iter()
            .filter(|(_, c)| c == "None")
            .map(|(at, _)| at)
            .collect();
        eprintln!("{}: listings at {starts:?} s", file.display());
        assert_eq!(starts.len(), 2, "{starts:?}");
        assert!(starts[1] - starts[0] >= 59.5, "{starts:?}");
    }
}

#[tokio::test]
async fn a_server_flooding_notifications_is_disconnected_and_shown_on_the_health_page() {
    let dir = tempfile::tempdir().unwrap();
    let flood = dir.path().join("flood.log");
    let servers = format!(
        "{}{}",
        hostile_server("flood", "flood", &flood, ""),
        stdio_server("calm", "", "")
    );
    let h = Herald::start_with(
        &gateway_config(&servers),
        &[(
            "MCP_TEST_PID_FILE",
            dir.path().join("calm.pid").to_str().unwrap(),
        )],
    );
    let pid = h.child.id();
    let started = Instant::now();
    let said = "disconnected: it sent more than 100 messages a second for 10 s in a row";
    let log = wait_for(Duration::from_secs(40), "the flood disconnected", || {
        let log = h.log();
        log.contains(said).then_some(log)
    })
    .await;
    let disconnected_after = started.elapsed().as_secs_f64();
    // A while longer: no more log lines, no CPU spent on it.
    let cpu_at = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let cpu_after = cpu_seconds(pid) - cpu_at;
    let cpu_total = cpu_seconds(pid);
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "flood: disconnected after {disconnected_after:.1} s; CPU {cpu_total:.2} s in {seconds:.0} s, {cpu_after:.2} s in the 10 s after"
    );
    // Before: 0.85 of a core for as long as it flooded, never disconnected.
    assert!(
        cpu_total < 0.2 * seconds,
        "CPU {cpu_total:.2} s in {seconds:.0} s"
    );
    assert!(cpu_after < 1.0, "{cpu_after:.2} s");
    let log_now = h.log();
    assert_eq!(log_now.matches(said).count(), 1, "said once: {log_now}");
    assert!(log.contains("server=\"flood\""), "{log}");
    // Its process is gone.
    let flood_pid = std::fs::read_to_string(flood.with_extension("pid")).unwrap();
    let flood_pid = flood_pid.lines().last().unwrap().trim().to_owned();
    let gone = wait_for(Duration::from_secs(10), "the flood server ended", || {
        let stat = std::fs::read_to_string(format!("/proc/{flood_pid}/stat"));
        (stat.is_err() || stat.is_ok_and(|s| s.contains(") Z "))).then_some(())
    })
    .await;
    let () = gone;
    // The health page says so; the calm server is unaffected.
    let health = health(&h).await;
    let flooding = server_report(&health, "flood");
    assert_eq!(flooding["status"], "failed", "{health}");
    assert!(
        flooding["error"]
            .as_str()
            .unwrap_or_default()
            .contains(said),
        "{health}"
    );
    assert_eq!(flooding["tools"], 0, "{health}");
    assert_eq!(server_report(&health, "calm")["status"], "connected");
}

#[tokio::test]
async fn the_health_page_counts_only_the_tools_the_model_is_offered() {
    let dir = tempfile::tempdir().unwrap();
    // Both servers' tools are named mcp__calc_x__<tool>: the second one's are left out.
    let servers = format!(
        "{}{}",
        stdio_server("calc-x", "", ""),
        stdio_server("calc_x", "", "")
    );
    let h = Herald::start_with(
        &gateway_config(&servers),
        &[(
            "MCP_TEST_PID_FILE",
            dir.path().join("pids").to_str().unwrap(),
        )],
    );
    let report = wait_for(Duration::from_secs(40), "both servers connected", || {
        let log = h.log();
        (log.matches("MCP server connected").count() == 2).then_some(())
    })
    .await;
    let () = report;
    let health = health(&h).await;
    let first = server_report(&health, "calc-x");
    let second = server_report(&health, "calc_x");
    assert_eq!(first["status"], "connected", "{health}");
    assert_eq!(second["status"], "connected", "{health}");
    // Its seven tools and the four resource and prompt tools.
    assert_eq!(first["tools"], 11, "{health}");
    assert_eq!(
        second["tools"], 0,
        "every name is the first server's: {health}"
    );
}

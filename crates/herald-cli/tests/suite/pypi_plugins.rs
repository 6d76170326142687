//! Issue 43: Hermes plugins published on PyPI, installed from their wheels (scripts/test
//! keeps them in a wheelhouse and installs them into target/test-cache/pypi-plugins),
//! listed, enabled and run as their users run them.

use super::rpc::{Piped, rpc_home};
use super::support::run_cli_with;
use herald_test_support::{FakeProvider, Scripted};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where scripts/test installed the PyPI plugins.
fn site() -> PathBuf {
    let site = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-cache/pypi-plugins");
    assert!(
        site.join("acp_hermes").is_dir(),
        "the PyPI plugins are not installed in {}: run scripts/test (it installs them)",
        site.display()
    );
    site
}

/// `herald ARGS` on `home` with the PyPI plugins installed: exit code, stdout, stderr.
fn herald(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let site = site();
    let mut all = vec![("PYTHONPATH", site.to_str().unwrap_or_default())];
    all.extend_from_slice(env);
    run_cli_with(home, args, &all)
}

/// The row of `name` in `herald plugins list`.
fn row<'a>(listed: &'a str, name: &str) -> &'a str {
    listed
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("{name} is not listed:\n{listed}"))
}

#[test]
fn plugins_installed_from_pypi_are_listed_enabled_and_disabled_by_name() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "plugins:\n  enabled: [acpp-typo]\n",
    )
    .unwrap();
    let (code, listed, err) = herald(home.path(), &["plugins", "list"], &[]);
    assert_eq!(code, 0, "{err}");
    let acp = row(&listed, "acp");
    assert!(
        acp.contains("0.3.2") && acp.contains("not enabled (entry point)"),
        "{acp}"
    );
    for name in [
        "agentmetrics",
        "agento11y",
        "agentguard-spend",
        "atbash-hermes-plugin",
    ] {
        assert!(row(&listed, name).contains("not enabled"), "{listed}");
    }
    assert!(
        row(&listed, "acpp-typo").contains("enabled, not installed"),
        "a misspelt name is not listed as enabled: {listed}"
    );
    let (code, out, err) = herald(home.path(), &["plugins", "enable", "acp"], &[]);
    assert_eq!(code, 0, "{out}{err}");
    let (_, listed, _) = herald(home.path(), &["plugins", "list"], &[]);
    assert!(
        row(&listed, "acp").contains("enabled (entry point)"),
        "{listed}"
    );
    let (code, _, err) = herald(home.path(), &["plugins", "disable", "acp"], &[]);
    assert_eq!(code, 0, "{err}");
    let (_, listed, _) = herald(home.path(), &["plugins", "list"], &[]);
    assert!(row(&listed, "acp").contains("not enabled"), "{listed}");
    let (code, _, err) = herald(home.path(), &["plugins", "enable", "agentmetric"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("did you mean 'agentmetrics'"), "{err}");
}

/// A stand-in for ACP's governance API (`POST /govern/tool-use`): a terminal command
/// holding `acp-ask` is "ask", `acp-deny` is "deny", anything else "allow". The
/// commands it was asked about before their call (`/govern/tool-output` reports after
/// one are answered and not kept).
fn governance() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let pre_call = line.contains("/govern/tool-use");
            line.clear();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let request: Value = serde_json::from_slice(&body).unwrap_or_default();
            let command = request["tool_input"]["command"]
                .as_str()
                .unwrap_or_default();
            if pre_call {
                seen.lock().unwrap().push(command.to_owned());
            }
            let verdict = match command {
                c if c.contains("acp-ask") => {
                    json!({"decision": "ask", "reason": "a human decides"})
                }
                c if c.contains("acp-deny") => json!({"decision": "deny", "reason": "not here"}),
                _ => json!({"decision": "allow"}),
            };
            let text = verdict.to_string();
            let mut out = stream;
            let _ = write!(
                out,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            );
        }
    });
    (base, asked)
}

/// The terminal's folder, a home with acp-hermes enabled, and the user's home (where
/// acp-hermes keeps its files).
fn acp_homes(provider: &FakeProvider) -> (tempfile::TempDir, tempfile::TempDir, tempfile::TempDir) {
    let work = tempfile::tempdir().unwrap();
    let home = rpc_home(
        &provider.base_url,
        &format!(
            "terminal:\n  cwd: {}\nplugins:\n  enabled: [acp]\n",
            work.path().display()
        ),
    );
    (work, home, tempfile::tempdir().unwrap())
}

fn acp_env(base: &str, user_home: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("ACP_BEARER_TOKEN", "gsk_test".to_owned()),
        ("ACP_API_BASE", base.to_owned()),
        ("NO_PROXY", "127.0.0.1".to_owned()),
        ("HOME", user_home.display().to_string()),
    ]
}

#[test]
fn acp_hermes_asks_are_denied_unattended_its_denials_block_and_the_rest_runs() {
    let (base, asked) = governance();
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[
            ("g1", "terminal", r#"{"command": "touch acp-ask"}"#),
            ("g2", "terminal", r#"{"command": "touch acp-deny"}"#),
            ("g3", "terminal", r#"{"command": "touch acp-allow"}"#),
        ]),
        Scripted::text("Done."),
    ]);
    let (work, home, user) = acp_homes(&provider);
    let env = acp_env(&base, user.path());
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (code, out, err) = herald(home.path(), &["chat", "-Q", "-q", "go"], &env);
    assert_eq!(code, 0, "{out}{err}");
    let results = provider.requests()[1].body["messages"].to_string();
    assert!(
        results.contains("[ACP] Approval required: a human decides"),
        "{results}"
    );
    assert!(
        results.contains("[ACP] Denied by policy: not here"),
        "{results}"
    );
    assert!(
        !work.path().join("acp-ask").exists(),
        "an ask ran unattended"
    );
    assert!(!work.path().join("acp-deny").exists());
    assert!(work.path().join("acp-allow").exists());
    assert_eq!(asked.lock().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acp_hermes_asks_are_put_to_the_rpc_client() {
    let (base, _) = governance();
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("g1", "terminal", r#"{"command": "touch acp-ask"}"#)]),
        Scripted::text("Done."),
    ]);
    let (work, home, user) = acp_homes(&provider);
    let site = site().display().to_string();
    let mut env = acp_env(&base, user.path());
    env.push(("PYTHONPATH", site));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let mut rpc = Piped::start_with(home.path(), &env);
    let c = &mut rpc.client;
    let sid = c.session().await;
    c.call("prompt.submit", json!({"session_id": sid, "text": "go"}))
        .await;
    let asked = c.until("approval.request").await;
    let request = &asked.last().unwrap()["payload"];
    assert_eq!(request["command"], "<terminal> (plugin approval rule)");
    assert_eq!(request["pattern_key"], "plugin_rule:acp:terminal");
    assert_eq!(
        request["description"],
        "[ACP] Approval required: a human decides"
    );
    c.call(
        "approval.respond",
        json!({"session_id": sid, "choice": "once"}),
    )
    .await;
    c.until("message.complete").await;
    assert!(work.path().join("acp-ask").exists(), "approved, it ran");
}

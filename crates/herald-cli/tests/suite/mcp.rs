//! MCP servers built with the official Python SDK (`tests/clients/mcp_server.py`), over
//! stdio and Streamable HTTP, used by the real binary: their tools reach the provider,
//! calls come back to it, failures become error results, and no server process outlives
//! herald.

use super::support::*;
use herald_test_support::{FakeProvider, Scripted};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The Python that has the `mcp` SDK (the test virtualenv's, first on PATH).
pub fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import mcp, sys; print(sys.executable)"])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the tests' python3 has no `mcp` package: run scripts/test, which installs it\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

pub fn server_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients/mcp_server.py")
}

/// A stdio server entry named `name`, with more `env` entries (`, K: V`) and `extra`
/// keys (indented for its block). Its pid goes to `$MCP_TEST_PID_FILE`, passed through
/// `${...}` in its `env` (the only way: the server does not get herald's environment).
pub fn stdio_server(name: &str, env: &str, extra: &str) -> String {
    format!(
        "  {name}:\n    command: {}\n    args: [{}, stdio]\n    env: {{MCP_TEST_PID_FILE: '${{MCP_TEST_PID_FILE}}'{env}}}\n{extra}",
        python(),
        server_script().display()
    )
}

fn config(provider: &FakeProvider, servers: &str) -> String {
    format!(
        "model:\n  default: fake-model\n  base_url: {}\nagent:\n  api_max_retries: 1\nmcp_discovery_timeout: 20\nmcp_servers:\n{servers}",
        provider.base_url
    )
}

fn home_with(config: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    home
}

fn chat(home: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .arg("chat")
        .args(args)
        .env("HERALD_HOME", home)
        .env("HERALD_RETRY_BASE_MS", "10")
        .env("MCP_TEST_PID_FILE", home.join("pids"))
        .env("HERALD_SECRET_PROBE", "kept-from-the-server")
        .env_remove("RUST_LOG")
        .current_dir(home)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The names of the tools the request offered.
fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn tool_result(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Whether every pid in the home's pid file is gone (checked for up to 5 s).
fn servers_gone(home: &Path) -> bool {
    let pids = std::fs::read_to_string(home.join("pids")).unwrap_or_default();
    let start = Instant::now();
    loop {
        let alive: Vec<&str> = pids
            .lines()
            .filter(|p| Path::new(&format!("/proc/{p}")).exists())
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/stat"))
                    .map(|s| !s.contains(") Z "))
                    .unwrap_or(false)
            })
            .collect();
        if alive.is_empty() {
            return !pids.is_empty();
        }
        if start.elapsed() > Duration::from_secs(5) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_stdio_servers_tool_is_listed_called_and_answered() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "mcp__calc__add", r#"{"a": 2, "b": 40}"#)]),
        Scripted::tool_calls(&[("c2", "mcp__calc__env", r#"{"name": "HERALD_SECRET_PROBE"}"#)]),
        Scripted::tool_calls(&[("c3", "mcp__calc__fail", "{}")]),
        Scripted::tool_calls(&[(
            "c4",
            "mcp__calc__read_resource",
            r#"{"uri": "note://hello"}"#,
        )]),
        Scripted::text("forty-two"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let term_file = dir.path().join("terms");
    let asked_to_stop = format!(", MCP_TEST_TERM_FILE: '{}'", term_file.display());
    let home = home_with(&config(
        &provider,
        &stdio_server("calc", &asked_to_stop, ""),
    ));
    let (code, out, err) = chat(home.path(), &["-Q", "-q", "add 2 and 40"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("forty-two"), "{out}{err}");
    let reqs = provider.requests();
    assert_eq!(reqs.len(), 5, "{err}");
    let tools = offered(&reqs[0].body);
    for name in [
        "mcp__calc__add",
        "mcp__calc__echo",
        "mcp__calc__list_resources",
        "mcp__calc__read_resource",
        "mcp__calc__list_prompts",
        "mcp__calc__get_prompt",
    ] {
        assert!(tools.iter().any(|t| t == name), "{name} not in {tools:?}");
    }
    // Built-ins are still there.
    assert!(tools.iter().any(|t| t == "terminal"), "{tools:?}");
    let add = reqs[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__calc__add")
        .unwrap();
    assert_eq!(add["function"]["description"], "Add two integers.");
    let params = &add["function"]["parameters"];
    assert_eq!(params["type"], "object");
    assert_eq!(params["properties"]["a"]["type"], "integer");
    assert_eq!(params["required"], serde_json::json!(["a", "b"]));
    // The result comes back wrapped as untrusted, in Hermes's shape.
    let first = tool_result(&reqs[1].body);
    assert!(
        first.contains(r#"{"result":"42","structuredContent":{"result":42}}"#),
        "{first}"
    );
    assert!(
        first.contains("mcp__calc__add"),
        "wrapped as untrusted: {first}"
    );
    // The server does not see herald's environment.
    let env = tool_result(&reqs[2].body);
    assert!(env.contains("<unset>"), "{env}");
    assert!(!env.contains("kept-from-the-server"), "{env}");
    // A failing tool is an error result with the credential stripped.
    let failed = tool_result(&reqs[3].body);
    assert!(failed.contains(r#"{"error":"#), "{failed}");
    assert!(!failed.contains("abc123secret"), "{failed}");
    let read = tool_result(&reqs[4].body);
    assert!(read.contains("hello from a resource"), "{read}");
    assert!(
        servers_gone(home.path()),
        "a server process outlived herald chat"
    );
    // It ended on its own (its closed stdin, or the SIGTERM herald sends first), not
    // by the SIGKILL that follows.
    let pids = std::fs::read_to_string(home.path().join("pids")).unwrap();
    let terms = std::fs::read_to_string(&term_file).unwrap_or_default();
    assert_eq!(
        terms.trim(),
        pids.trim(),
        "ended, not killed: {terms:?} of {pids:?}"
    );
}

#[test]
fn include_exclude_and_disabled_servers_choose_the_tools() {
    let provider = FakeProvider::start(vec![Scripted::text("ok")]);
    let servers = [
        stdio_server(
            "only",
            "",
            "    tools: {include: [echo], resources: false, prompts: false}\n",
        ),
        stdio_server("most", "", "    tools:\n      exclude: [die, sleep]\n"),
        stdio_server("off", "", "    enabled: false\n"),
    ]
    .concat();
    let home = home_with(&config(&provider, &servers));
    let (code, _, err) = chat(home.path(), &["-Q", "-q", "hi"]);
    assert_eq!(code, 0, "{err}");
    let tools = offered(&provider.requests()[0].body);
    let of = |s: &str| {
        let mut t: Vec<String> = tools
            .iter()
            .filter(|t| t.starts_with(&format!("mcp__{s}__")))
            .cloned()
            .collect();
        t.sort();
        t
    };
    assert_eq!(of("only"), vec!["mcp__only__echo"]);
    let most = of("most");
    assert!(most.contains(&"mcp__most__add".to_owned()), "{most:?}");
    assert!(
        !most
            .iter()
            .any(|t| t.ends_with("__die") || t.ends_with("__sleep")),
        "{most:?}"
    );
    assert!(of("off").is_empty(), "{tools:?}");
    // `-t` naming one server gives that server only; no_mcp gives none.
    let provider2 = FakeProvider::start(vec![Scripted::text("ok"), Scripted::text("ok")]);
    std::fs::write(
        home.path().join("config.yaml"),
        config(&provider2, &servers),
    )
    .unwrap();
    let (code, _, err) = chat(home.path(), &["-Q", "-t", "terminal,mcp-only", "-q", "hi"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("unknown toolset"), "{err}");
    let tools = offered(&provider2.requests()[0].body);
    assert!(tools.contains(&"mcp__only__echo".to_owned()), "{tools:?}");
    assert!(
        !tools.iter().any(|t| t.starts_with("mcp__most__")),
        "{tools:?}"
    );
    let (code, _, err) = chat(home.path(), &["-Q", "-t", "terminal,no_mcp", "-q", "hi"]);
    assert_eq!(code, 0, "{err}");
    let tools = offered(&provider2.requests()[1].body);
    assert!(!tools.iter().any(|t| t.starts_with("mcp__")), "{tools:?}");
}

#[test]
fn a_server_that_fails_hangs_or_dies_never_stops_the_turn() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "mcp__good__die", "{}")]),
        Scripted::text("carried on"),
    ]);
    let servers = [
        "  gone:\n    command: /nonexistent/mcp-server\n".to_owned(),
        stdio_server(
            "hangs",
            ", MCP_TEST_START_DELAY: '30'",
            "    connect_timeout: 2\n",
        ),
        stdio_server("good", "", ""),
    ]
    .concat();
    let home = home_with(&config(&provider, &servers));
    let started = Instant::now();
    let (code, out, err) = chat(home.path(), &["-Q", "-q", "go"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("carried on"), "{out}{err}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(
        err.contains("gone") && err.contains("missing executable"),
        "{err}"
    );
    assert!(
        err.contains("hangs") && err.contains("connect_timeout"),
        "{err}"
    );
    let reqs = provider.requests();
    let tools = offered(&reqs[0].body);
    assert!(
        !tools
            .iter()
            .any(|t| t.starts_with("mcp__gone__") || t.starts_with("mcp__hangs__")),
        "{tools:?}"
    );
    let died = tool_result(&reqs[1].body);
    assert!(died.contains("error"), "{died}");
    assert!(
        servers_gone(home.path()),
        "a server process outlived herald chat"
    );
}

/// The test server over Streamable HTTP on a free port, killed when dropped.
struct HttpServer {
    child: std::process::Child,
    url: String,
}

impl HttpServer {
    fn start() -> HttpServer {
        HttpServer::start_as("http", "mcp")
    }

    /// The older HTTP+SSE server (`transport: sse`).
    fn start_sse() -> HttpServer {
        HttpServer::start_as("sse", "sse")
    }

    fn start_as(mode: &str, path: &str) -> HttpServer {
        HttpServer::start_with(&[mode], "http", path)
    }

    /// The test server run with `args` and its port after them, reached at
    /// `scheme://127.0.0.1:PORT/path` once it listens.
    fn start_with(args: &[&str], scheme: &str, path: &str) -> HttpServer {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let port_text = port.to_string();
        let mut all = vec![args[0], port_text.as_str()];
        all.extend(&args[1..]);
        let child = Command::new(python())
            .arg(server_script())
            .args(&all)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the MCP server ({}) did not start",
                args[0]
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer {
            child,
            url: format!("{scheme}://127.0.0.1:{port}/{path}"),
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_sse_servers_tool_is_listed_called_and_answered() {
    let server = HttpServer::start_sse();
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "mcp__old__add", r#"{"a": 2, "b": 40}"#)]),
        Scripted::tool_calls(&[("c2", "mcp__old__sleep", r#"{"seconds": 0.2}"#)]),
        Scripted::text("forty-two"),
    ]);
    let servers = format!(
        "  old:\n    url: {}\n    transport: sse\n    headers: {{X-Test: '1'}}\n",
        server.url
    );
    let home = home_with(&config(&provider, &servers));
    let (code, out, err) = chat(home.path(), &["-Q", "-q", "add 2 and 40"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("forty-two"), "{out}{err}");
    let reqs = provider.requests();
    assert_eq!(reqs.len(), 3, "{err}");
    let tools = offered(&reqs[0].body);
    assert!(tools.contains(&"mcp__old__add".to_owned()), "{tools:?}");
    assert!(
        tool_result(&reqs[1].body).contains(r#""result":"42""#),
        "{}",
        tool_result(&reqs[1].body)
    );
    assert!(
        tool_result(&reqs[2].body).contains("slept"),
        "{}",
        tool_result(&reqs[2].body)
    );
}

#[tokio::test]
async fn webhook_runs_get_an_http_servers_tools_only_by_grant() {
    let server = HttpServer::start();
    let provider = FakeProvider::start(vec![
        Scripted::text("plain done"),
        Scripted::tool_calls(&[("c1", "mcp__web__add", r#"{"a": 40, "b": 2}"#)]),
        Scripted::text("granted done"),
    ]);
    let routes = "        plain:\n          prompt: 'go'\n          deliver: log\n        granted:\n          prompt: 'go'\n          deliver: log\n          toolsets: [web, mcp-web]\n";
    let config = format!(
        "{}mcp_servers:\n  web:\n    url: {}\n    headers: {{X-Test: yes}}\n",
        super::agent_runs::agent_config(&provider.base_url, "", routes),
        server.url
    );
    let h = Herald::start(&config);
    let (s, _) = h.github("plain", "push", "{}", Some("p-1")).await;
    assert_eq!(s, reqwest::StatusCode::ACCEPTED);
    wait_for(Duration::from_secs(30), "the plain run", || {
        (!provider.requests().is_empty()).then_some(())
    })
    .await;
    let (s, _) = h.github("granted", "push", "{}", Some("g-1")).await;
    assert_eq!(s, reqwest::StatusCode::ACCEPTED);
    wait_for(Duration::from_secs(30), "the granted run", || {
        (provider.requests().len() >= 3).then_some(())
    })
    .await;
    let reqs = provider.requests();
    let plain = offered(&reqs[0].body);
    assert!(!plain.iter().any(|t| t.starts_with("mcp__")), "{plain:?}");
    let granted = offered(&reqs[1].body);
    assert!(granted.contains(&"mcp__web__add".to_owned()), "{granted:?}");
    assert!(!granted.contains(&"terminal".to_owned()), "{granted:?}");
    let result = tool_result(&reqs[2].body);
    assert!(result.contains(r#""result":"42""#), "{result}");
    let log = h.log();
    assert!(!log.contains("toolsets not allowed"), "{log}");
}

#[tokio::test]
async fn reload_mcp_over_rpc_connects_a_server_added_to_config_yaml() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "mcp__second__echo", r#"{"text": "hi there"}"#)]),
        Scripted::text("done"),
    ]);
    let first = stdio_server("first", "", "");
    let home = home_with(&config(&provider, &first));
    let mut rpc = super::rpc::Piped::start_with(
        home.path(),
        &[(
            "MCP_TEST_PID_FILE",
            &home.path().join("pids").display().to_string(),
        )],
    );
    let c = &mut rpc.client;
    let created = c.call("session.create", serde_json::json!({})).await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    let info = c.until("session.info").await;
    let tools = &info.last().unwrap()["payload"]["tools"];
    assert!(tools["mcp-first"].is_array(), "{tools}");
    assert!(tools.get("mcp-second").is_none(), "{tools}");
    std::fs::write(
        home.path().join("config.yaml"),
        config(&provider, &[first, stdio_server("second", "", "")].concat()),
    )
    .unwrap();
    // Asked first, as Hermes asks; nothing is reloaded.
    let asked = c
        .call("reload.mcp", serde_json::json!({"session_id": sid}))
        .await;
    assert_eq!(asked["status"], "confirm_required", "{asked}");
    assert!(
        asked["message"]
            .as_str()
            .unwrap()
            .contains("/reload-mcp now")
    );
    let done = c
        .call(
            "reload.mcp",
            serde_json::json!({"session_id": sid, "confirm": true, "always": true}),
        )
        .await;
    assert_eq!(done, serde_json::json!({"status": "reloaded"}));
    c.until("session.info").await;
    // The new server connects in the background; its tools show once it is up.
    let start = Instant::now();
    loop {
        let listed = c
            .call(
                "slash.exec",
                serde_json::json!({"session_id": sid, "command": "/tools"}),
            )
            .await;
        if listed.to_string().contains("mcp__second__echo") {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(20), "{listed}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let events = c.turn(&sid, "echo").await;
    assert!(
        events.iter().any(|e| e["type"] == "tool.complete"),
        "{events:?}"
    );
    let reqs = provider.requests();
    assert!(
        tool_result(&reqs[1].body).contains("hi there"),
        "{:?}",
        reqs[1].body
    );
    let text = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(text.contains("mcp_reload_confirm: false"), "{text}");
    // Now it reloads without asking; the first server kept its process.
    let again = c.call("reload.mcp", serde_json::json!({})).await;
    assert_eq!(again["status"], "reloaded");
    let pids = std::fs::read_to_string(home.path().join("pids")).unwrap();
    assert_eq!(pids.lines().count(), 2, "{pids}");
    drop(rpc);
    assert!(
        servers_gone(home.path()),
        "a server process outlived herald rpc"
    );
}

fn cli_with_stdin(home: &Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = Command::new(BIN)
        .args(args)
        .env("HERALD_HOME", home)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn herald_mcp_adds_tests_lists_and_removes_servers() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let script = server_script().display().to_string();
    let py = python();
    let (code, out, err) = run_cli(
        h,
        &[
            "mcp",
            "add",
            "calc",
            "--command",
            &py,
            "--env",
            "A=1",
            "--args",
            &script,
            "stdio",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("✓ Connected") && out.contains("Tools discovered: 7"),
        "{out}"
    );
    assert!(
        out.contains("add") && out.contains("Add two integers."),
        "{out}"
    );
    let (code, out, err) = run_cli(h, &["mcp", "add", "broken", "--command", "/nonexistent/x"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("✗ Connection failed") && out.contains("missing executable"),
        "{out}"
    );
    assert!(out.contains("enabled: false"), "{out}");
    let (code, _, err) = run_cli(h, &["mcp", "add", "calc", "--command", "x"]);
    assert_eq!(code, 1);
    assert!(err.contains("configured already"), "{err}");
    let text = std::fs::read_to_string(h.join("config.yaml")).unwrap();
    assert!(
        text.contains("mcp_servers:") && text.contains("command: /nonexistent/x"),
        "{text}"
    );
    // A URL server with a token from standard input, kept in .env.
    let server = HttpServer::start();
    let (code, out, err) = cli_with_stdin(
        h,
        &[
            "mcp",
            "add",
            "web-api",
            "--url",
            &server.url,
            "--auth",
            "header",
        ],
        "Bearer tok-123\n",
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("✓ Connected"), "{out}{err}");
    let env = std::fs::read_to_string(h.join(".env")).unwrap();
    assert!(env.contains("MCP_WEB_API_API_KEY=tok-123"), "{env}");
    let text = std::fs::read_to_string(h.join("config.yaml")).unwrap();
    assert!(text.contains("Bearer ${MCP_WEB_API_API_KEY}"), "{text}");
    assert!(!text.contains("tok-123"), "{text}");
    let (code, out, _) = run_cli(h, &["mcp", "list"]);
    assert_eq!(code, 0);
    assert!(out.contains("calc") && out.contains("✓ 7 tools"), "{out}");
    assert!(
        out.contains("broken") && out.contains("✗ disabled"),
        "{out}"
    );
    let (code, out, _) = run_cli(h, &["mcp", "list", "--json"]);
    assert_eq!(code, 0);
    let rows: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 3, "{out}");
    assert_eq!(rows[0]["status"], "connected");
    assert_eq!(rows[0]["tool_count"], 7);
    let (code, out, _) = run_cli(h, &["mcp", "test", "calc"]);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = run_cli(h, &["mcp", "test", "nope"]);
    assert_ne!(code, 0);
    assert!(err.contains("configured: calc, broken, web-api"), "{err}");
    for name in ["calc", "broken", "web-api"] {
        let (code, out, err) = run_cli(h, &["mcp", "remove", name]);
        assert_eq!(code, 0, "{out}{err}");
    }
    let text = std::fs::read_to_string(h.join("config.yaml")).unwrap();
    assert!(!text.contains("mcp_servers"), "{text}");
    let (code, _, _) = run_cli(h, &["mcp", "remove", "calc"]);
    assert_eq!(code, 1);
}

#[tokio::test]
async fn an_acp_clients_servers_belong_to_its_session() {
    let web = HttpServer::start();
    let legacy = HttpServer::start_sse();
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "mcp__web__add", r#"{"a": 1, "b": 2}"#)]),
        Scripted::text("three"),
        Scripted::text("plain"),
    ]);
    // config.yaml's `calc` offers echo only; the session's `calc` offers everything.
    let home = home_with(&config(
        &provider,
        &stdio_server("calc", "", "    tools: {include: [echo]}\n"),
    ));
    let pid_file = home.path().join("pids").display().to_string();
    let mut acp =
        super::acp::RawAcp::start_with(home.path(), &[("MCP_TEST_PID_FILE", &pid_file)]).await;
    acp.send(1, "initialize", serde_json::json!({"protocolVersion": 1}))
        .await;
    let init = acp.answer(1).await;
    assert_eq!(
        init["agentCapabilities"]["mcpCapabilities"],
        serde_json::json!({"http": true, "sse": true}),
        "{init}"
    );
    let servers = serde_json::json!([
        {"name": "calc", "command": python(), "args": [server_script(), "stdio"],
         "env": [{"name": "MCP_TEST_PID_FILE", "value": pid_file}]},
        {"type": "http", "name": "web", "url": web.url, "headers": [{"name": "X-Test", "value": "1"}]},
        {"type": "sse", "name": "legacy", "url": legacy.url, "headers": []}
    ]);
    acp.send(
        2,
        "session/new",
        serde_json::json!({"cwd": home.path(), "mcpServers": servers}),
    )
    .await;
    let sid = acp.answer(2).await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    acp.prompt(3, &sid, "add").await;
    let done = acp.answer(3).await;
    assert_eq!(done["stopReason"], "end_turn", "{done}");
    let reqs = provider.requests();
    let tools = offered(&reqs[0].body);
    assert!(tools.contains(&"mcp__web__add".to_owned()), "{tools:?}");
    assert!(
        tools.contains(&"mcp__legacy__echo".to_owned()),
        "over SSE: {tools:?}"
    );
    assert!(
        tools.contains(&"mcp__calc__add".to_owned()),
        "the session's calc wins: {tools:?}"
    );
    assert_eq!(
        tools.iter().filter(|t| *t == "mcp__calc__echo").count(),
        1,
        "{tools:?}"
    );
    assert!(tool_result(&reqs[1].body).contains(r#""result":"3""#));
    // Another session without servers gets config.yaml's only.
    acp.send(
        4,
        "session/new",
        serde_json::json!({"cwd": home.path(), "mcpServers": []}),
    )
    .await;
    let other = acp.answer(4).await["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    acp.prompt(5, &other, "hi").await;
    acp.answer(5).await;
    let tools = offered(&provider.requests()[2].body);
    assert!(
        !tools.iter().any(|t| t.starts_with("mcp__web__")),
        "{tools:?}"
    );
    assert!(!tools.contains(&"mcp__calc__add".to_owned()), "{tools:?}");
    assert!(tools.contains(&"mcp__calc__echo".to_owned()), "{tools:?}");
    // The IDE goes away: herald ends, and the servers with it.
    acp.close_stdin();
    let _ = tokio::time::timeout(Duration::from_secs(10), acp.child.wait()).await;
    assert!(
        servers_gone(home.path()),
        "a server process outlived herald acp"
    );
}

#[test]
fn a_servers_sampling_request_goes_through_herald_s_provider() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "mcp__calc__ask", r#"{"question": "two plus two?"}"#)]),
        Scripted::text("four"),
        Scripted::text("the server says four"),
        Scripted::tool_calls(&[("c2", "mcp__off__ask", r#"{"question": "again?"}"#)]),
        Scripted::text("refused"),
    ]);
    let servers = [
        stdio_server("calc", "", "    sampling: {max_tokens_cap: 64}\n"),
        stdio_server("off", "", "    sampling: {enabled: false}\n"),
    ]
    .concat();
    let home = home_with(&config(&provider, &servers));
    let (code, out, err) = chat(home.path(), &["-Q", "-q", "ask"]);
    assert_eq!(code, 0, "{out}{err}");
    let reqs = provider.requests();
    // The server's request: its system prompt and question, the cap, no tools.
    let sampled = &reqs[1].body;
    assert_eq!(
        sampled["messages"][0]["content"], "Answer briefly.",
        "{sampled}"
    );
    assert!(
        sampled["messages"].to_string().contains("two plus two?"),
        "{sampled}"
    );
    assert_eq!(sampled["max_tokens"], 64, "{sampled}");
    assert!(sampled.get("tools").is_none(), "{sampled}");
    let answered = tool_result(&reqs[2].body);
    assert!(answered.contains("four"), "{answered}");
    let (code, _, err) = chat(home.path(), &["-Q", "-q", "again"]);
    assert_eq!(code, 0, "{err}");
    let refused = tool_result(&provider.requests()[4].body);
    assert!(refused.contains("error"), "{refused}");
}

/// The pids the test server wrote, and which of them run now.
fn pids_alive(home: &Path) -> (Vec<String>, Vec<String>) {
    let pids: Vec<String> = std::fs::read_to_string(home.join("pids"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect();
    let alive = pids
        .iter()
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/stat")).is_ok_and(|s| !s.contains(") Z "))
        })
        .cloned()
        .collect();
    (pids, alive)
}

#[tokio::test]
async fn an_idle_stdio_server_is_recycled_and_started_again_by_the_next_call() {
    let provider = FakeProvider::start(vec![
        Scripted::tool_calls(&[("c1", "mcp__calc__add", r#"{"a": 1, "b": 2}"#)]),
        Scripted::text("three"),
        Scripted::tool_calls(&[("c2", "mcp__calc__add", r#"{"a": 2, "b": 2}"#)]),
        Scripted::text("four"),
    ]);
    let calc = stdio_server("calc", "", "    lifecycle: {idle_timeout_seconds: 1}\n");
    let home = home_with(&config(&provider, &calc));
    let pid_file = home.path().join("pids").display().to_string();
    let mut rpc = super::rpc::Piped::start_with(home.path(), &[("MCP_TEST_PID_FILE", &pid_file)]);
    let c = &mut rpc.client;
    let sid = c.session().await;
    let first = c.turn(&sid, "add").await;
    assert_eq!(first.last().unwrap()["payload"]["text"], "three");
    assert!(tool_result(&provider.requests()[1].body).contains(r#""result":"3""#));
    // A second without calls: the process is gone, its tools stay offered.
    let start = Instant::now();
    loop {
        let (pids, alive) = pids_alive(home.path());
        if pids.len() == 1 && alive.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not recycled: {pids:?} {alive:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let second = c.turn(&sid, "add again").await;
    assert_eq!(second.last().unwrap()["payload"]["text"], "four");
    let reqs = provider.requests();
    assert!(
        offered(&reqs[2].body).contains(&"mcp__calc__add".to_owned()),
        "dormant, still offered"
    );
    assert!(
        tool_result(&reqs[3].body).contains(r#""result":"4""#),
        "{}",
        tool_result(&reqs[3].body)
    );
    let (pids, _) = pids_alive(home.path());
    assert_eq!(pids.len(), 2, "started again for the call: {pids:?}");
}

/// A throwaway CA and, signed by it, a certificate for 127.0.0.1 (`server`) and one
/// for a client (`client`), made with openssl in `dir`.
fn make_certs(dir: &Path) {
    let run = |args: &[&str]| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .expect("openssl (Debian's openssl package)");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(&[
        &["req", "-x509"],
        &ec[..],
        &[
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=herald test CA",
        ],
    ]
    .concat());
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
    for who in ["server", "client"] {
        let (key, csr, pem, ext) = (
            format!("{who}.key"),
            format!("{who}.csr"),
            format!("{who}.pem"),
            format!("{who}.ext"),
        );
        run(&[
            &["req"],
            &ec[..],
            &[
                "-keyout",
                &key,
                "-out",
                &csr,
                "-subj",
                &format!("/CN={who}"),
            ],
        ]
        .concat());
        run(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &pem,
            "-days",
            "2",
            "-extfile",
            &ext,
        ]);
    }
}

#[test]
fn an_https_server_is_reached_with_its_ca_and_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_certs(d);
    let p = |f: &str| d.join(f).display().to_string();
    let (cert, key, ca) = (p("server.pem"), p("server.key"), p("ca.pem"));
    let server = HttpServer::start_with(&["https", &cert, &key, &ca], "https", "mcp");
    let url = server.url.clone();
    let provider = FakeProvider::start(vec![]);
    let entry = |name: &str, extra: &str| {
        format!("  {name}:\n    url: {url}\n    connect_timeout: 10\n{extra}")
    };
    let servers = [
        entry(
            "good",
            &format!(
                "    ssl_verify: {}\n    client_cert: [{}, {}]\n",
                p("ca.pem"),
                p("client.pem"),
                p("client.key")
            ),
        ),
        entry(
            "combined",
            &format!(
                "    ssl_verify: {}\n    client_cert: {}\n",
                p("ca.pem"),
                p("client-all.pem")
            ),
        ),
        entry(
            "untrusted",
            &format!(
                "    client_cert: [{}, {}]\n",
                p("client.pem"),
                p("client.key")
            ),
        ),
        entry("anonymous", &format!("    ssl_verify: {}\n", p("ca.pem"))),
        entry(
            "unchecked",
            &format!(
                "    ssl_verify: false\n    client_cert: [{}, {}]\n",
                p("client.pem"),
                p("client.key")
            ),
        ),
    ]
    .concat();
    let all = [
        std::fs::read(d.join("client.pem")).unwrap(),
        std::fs::read(d.join("client.key")).unwrap(),
    ]
    .concat();
    std::fs::write(d.join("client-all.pem"), all).unwrap();
    let home = home_with(&config(&provider, &servers));
    let test = |name: &str| cli_with_stdin(home.path(), &["mcp", "test", name], "");
    for ok in ["good", "combined", "unchecked"] {
        let (code, out, err) = test(ok);
        assert_eq!(code, 0, "{ok}: {out}{err}");
        assert!(out.contains("add"), "{ok}: {out}");
    }
    for refused in ["untrusted", "anonymous"] {
        let (code, out, err) = test(refused);
        assert_ne!(code, 0, "{refused} connected: {out}{err}");
        assert!(out.contains("Connection failed"), "{refused}: {out}{err}");
    }
    let (_, out, err) = test("untrusted");
    assert!(
        format!("{out}{err}").contains("UnknownIssuer"),
        "not our CA: {out}{err}"
    );
    drop(server);
}

/// An SSE endpoint that answers every GET with `events` and then holds the stream open.
fn hostile_sse(events: &'static str) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n";
                let _ = s.write_all(head.as_bytes());
                let _ = s.write_all(events.as_bytes());
                std::thread::sleep(Duration::from_secs(30));
            });
        }
    });
    format!("http://127.0.0.1:{port}/sse")
}

#[test]
fn a_hostile_sse_server_is_refused_within_its_connect_timeout() {
    let silent = hostile_sse(": ping\n\n");
    let elsewhere = hostile_sse("event: endpoint\ndata: http://127.0.0.2:9/messages\n\n");
    let provider = FakeProvider::start(vec![]);
    let entry = |name: &str, url: &str| {
        format!("  {name}:\n    url: {url}\n    transport: sse\n    connect_timeout: 2\n")
    };
    let servers = [entry("silent", &silent), entry("elsewhere", &elsewhere)].concat();
    let home = home_with(&config(&provider, &servers));
    let start = Instant::now();
    let (code, out, err) = cli_with_stdin(home.path(), &["mcp", "test", "silent"], "");
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        out.contains("connect_timeout"),
        "no endpoint event: {out}{err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    let (code, out, err) = cli_with_stdin(home.path(), &["mcp", "test", "elsewhere"], "");
    assert_ne!(code, 0, "{out}{err}");
    assert!(
        out.contains("not on the event stream's origin"),
        "{out}{err}"
    );
}

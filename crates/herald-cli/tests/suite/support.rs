//! Test support: a real `herald` process on a temp home, and a signing HTTP client.

use herald_webhook::verify::sign;
use reqwest::StatusCode;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_herald");
pub const SECRET: &str = "test-secret";

/// A config with the webhook on an ephemeral loopback port and `routes` (YAML, indented
/// under `routes:` by the caller with 8 spaces).
pub fn config_with_routes(routes: &str) -> String {
    format!(
        "platforms:\n  webhook:\n    enabled: true\n    extra:\n      host: 127.0.0.1\n      port: 0\n      secret: {SECRET}\n      rate_limit: 100000\n      routes:\n{routes}"
    )
}

/// A gateway serving on its own home, in a process of its own ([`Herald`]) or in this
/// one ([`InProcess`]): its home, where it listens, and requests to it.
pub struct Served {
    pub home: tempfile::TempDir,
    pub base: String,
    client: reqwest::Client,
}

/// A running herald with its own home.
pub struct Herald {
    served: Served,
    pub child: Child,
    pub stdout_lines: Vec<String>,
}

impl std::ops::Deref for Herald {
    type Target = Served;
    fn deref(&self) -> &Served {
        &self.served
    }
}

impl std::ops::DerefMut for Herald {
    fn deref_mut(&mut self) -> &mut Served {
        &mut self.served
    }
}

impl Herald {
    /// Starts herald with `config` as config.yaml.
    pub fn start(config: &str) -> Herald {
        Self::start_with(config, &[])
    }

    pub fn start_with(config: &str, env: &[(&str, &str)]) -> Herald {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.yaml"), config).unwrap();
        std::fs::create_dir_all(home.path().join("scripts")).unwrap();
        Self::start_in(home, env)
    }

    /// Starts herald on an existing home.
    pub fn start_in(home: tempfile::TempDir, env: &[(&str, &str)]) -> Herald {
        let stderr = std::fs::File::create(home.path().join("herald.log")).unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["gateway", "run"])
            .env("HERALD_HOME", home.path())
            .env_remove("RUST_LOG")
            .env_remove("WEBHOOK_ENABLED")
            .stdout(Stdio::piped())
            .stderr(stderr);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut reader = BufReader::new(stdout);
        let mut lines = Vec::new();
        let base = loop {
            let mut line = String::new();
            let n = reader.read_line(&mut line).unwrap();
            if n == 0 {
                let log =
                    std::fs::read_to_string(home.path().join("herald.log")).unwrap_or_default();
                panic!("herald exited before listening: {lines:?}\n{log}");
            }
            let line = line.trim_end().to_owned();
            if let Some(rest) = line.strip_prefix("herald: webhook listening on ") {
                break rest.split_whitespace().next().unwrap().to_owned();
            }
            if let Some(rest) = line.strip_prefix("herald: OpenAI-compatible API listening on ") {
                break rest.trim_end_matches("/v1").to_owned();
            }
            // A home serving only a chat bot has no URL.
            if line.starts_with("herald: ") && line.contains(" bot answering (") {
                break String::new();
            }
            lines.push(line);
        };
        // Keep draining stdout so herald never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while reader.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                sink.clear();
            }
        });
        Herald {
            served: Served::new(home, base),
            child,
            stdout_lines: lines,
        }
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then the exit code.
    pub fn terminate(&mut self) -> Option<i32> {
        unsafe_sigterm(self.child.id());
        wait_timeout(&mut self.child, Duration::from_secs(10))
    }

    /// Stops herald and hands back its home for a restart.
    pub fn into_home(mut self) -> tempfile::TempDir {
        self.kill9();
        let home = tempfile::tempdir().unwrap();
        let old = std::mem::replace(&mut self.served.home, home);
        std::mem::forget(self);
        old
    }
}

impl Drop for Herald {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn new(home: tempfile::TempDir, base: String) -> Served {
        Served {
            home,
            base,
            client: http_client(Duration::from_secs(30)),
        }
    }

    pub fn home(&self) -> &Path {
        self.home.path()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn addr(&self) -> String {
        self.base.trim_start_matches("http://").to_owned()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.home().join("herald.log")).unwrap_or_default()
    }

    /// The log once it contains `text` (or after 10 s, whatever it holds then).
    pub fn log_once_it_has(&self, text: &str) -> String {
        let start = Instant::now();
        loop {
            let log = self.log();
            if log.contains(text) || start.elapsed() > Duration::from_secs(10) {
                return log;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// POSTs `body` with `headers` and returns status and JSON body.
    pub async fn post(
        &self,
        path: &str,
        body: impl Into<Vec<u8>>,
        headers: &[(&str, String)],
    ) -> (StatusCode, Value) {
        let mut req = self.client.post(self.url(path)).body(body.into());
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        let json =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON ({status}): {text:?}"));
        (status, json)
    }

    /// POSTs a GitHub-signed request.
    pub async fn github(
        &self,
        route: &str,
        event: &str,
        body: &str,
        delivery: Option<&str>,
    ) -> (StatusCode, Value) {
        let mut headers = vec![
            ("x-github-event", event.to_owned()),
            ("x-hub-signature-256", sign::github(SECRET, body.as_bytes())),
            ("content-type", "application/json".to_owned()),
        ];
        if let Some(d) = delivery {
            headers.push(("x-github-delivery", d.to_owned()));
        }
        self.post(&format!("/webhooks/{route}"), body, &headers)
            .await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, String) {
        let resp = self.client.get(self.url(path)).send().await.unwrap();
        (resp.status(), resp.text().await.unwrap())
    }

    /// Points the CLI's base URL (read from config.yaml) at this gateway, which listens
    /// on the port it was given (config says port 0).
    pub fn point_cli_here(&self) {
        let port = self.addr().rsplit(':').next().unwrap().to_owned();
        let config = std::fs::read_to_string(self.home().join("config.yaml"))
            .unwrap()
            .replace("port: 0", &format!("port: {port}"));
        std::fs::write(self.home().join("config.yaml"), config).unwrap();
    }

    /// Runs `herald <args>` on this home and returns (exit code, stdout, stderr).
    pub fn cli(&self, args: &[&str]) -> (i32, String, String) {
        run_cli(self.home(), args)
    }

    /// The inbox as JSON.
    pub fn inbox(&self) -> Vec<Value> {
        let (code, out, err) = self.cli(&["inbox", "list", "--json", "--limit", "100000"]);
        assert_eq!(code, 0, "{err}");
        // Payloads are listed as received: numbers beyond a tree (`1e400`) get stand-ins.
        let tree = herald_protocol::json_literal::tree_text(out.as_bytes());
        serde_json::from_slice::<Vec<Value>>(&tree).unwrap()
    }
}

/// A gateway served by herald-app in this test process, on a thread and runtime of its
/// own: no binary to start. Its config.yaml is read without the environment's overlay
/// (`WEBHOOK_*` and the like); what the server reads later (delivery targets' tokens, a
/// provider key) comes from this process's environment, as a child's would.
pub struct InProcess {
    served: Served,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), String>>>,
}

impl std::ops::Deref for InProcess {
    type Target = Served;
    fn deref(&self) -> &Served {
        &self.served
    }
}

impl InProcess {
    /// Serves `config` (config.yaml's text) on a new home.
    pub fn start(config: &str) -> InProcess {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.yaml"), config).unwrap();
        std::fs::create_dir_all(home.path().join("scripts")).unwrap();
        let loaded =
            herald_config::Config::load(&herald_config::Home::new(home.path()), &|_| None).unwrap();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let (url_tx, url_rx) = std::sync::mpsc::channel::<String>();
        let thread = std::thread::spawn(move || {
            let url_tx = std::sync::Mutex::new(url_tx);
            let say = move |notice: herald_app::server::Notice<'_>| {
                use herald_app::server::Notice;
                if let Notice::WebhookListening { url, .. } | Notice::ApiListening { url } = notice
                {
                    let _ = url_tx.lock().unwrap().send(url.to_owned());
                }
            };
            let runtime = herald_app::runtime().map_err(|e| e.to_string())?;
            runtime
                .block_on(herald_app::server::serve(loaded, &say, async {
                    let _ = stop_rx.await;
                }))
                .map_err(|e| e.to_string())
        });
        let base = match url_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => url,
            Err(_) => {
                // Told to stop, so the join below cannot wait on a server that serves on.
                drop(stop_tx);
                panic!("the gateway did not listen: {:?}", thread.join())
            }
        };
        InProcess {
            served: Served::new(home, base),
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// Stops it (as SIGTERM would) and waits for the drain: what serving ended with.
    pub fn stop(&mut self) -> Result<(), String> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take() {
            Some(t) => t
                .join()
                .unwrap_or_else(|_| Err("the server panicked".into())),
            None => Ok(()),
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

pub fn run_cli(home: &Path, args: &[&str]) -> (i32, String, String) {
    run_cli_with(home, args, &[])
}

/// [`run_cli`] with `env` set for the command.
pub fn run_cli_with(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env("HERALD_HOME", home)
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn unsafe_sigterm(pid: u32) {
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}

pub fn wait_timeout(child: &mut Child, limit: Duration) -> Option<i32> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Ok(Some(status)) = child.try_wait() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Runs `herald gateway run` on a home expected to fail; returns (exit code, stderr).
pub fn start_expect_failure(config: &str) -> (i32, String) {
    start_expect_failure_with(config, &[])
}

/// [`start_expect_failure`] with `env` set.
pub fn start_expect_failure_with(config: &str, env: &[(&str, &str)]) -> (i32, String) {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let mut child = Command::new(BIN)
        .args(["gateway", "run"])
        .envs(env.iter().copied())
        .env("HERALD_HOME", home.path())
        .env_remove("WEBHOOK_ENABLED")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let code = wait_timeout(&mut child, Duration::from_secs(10));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    (
        code.unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Sends raw bytes over TCP and returns the response head and body text.
pub async fn raw_request(addr: &str, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _ = stream.write_all(request).await;
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut buf)).await;
    String::from_utf8_lossy(&buf).into_owned()
}

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// A reqwest client (herald builds reqwest with rustls and no default crypto provider).
pub fn http_client(timeout: Duration) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().timeout(timeout).build().unwrap()
}

/// Polls `check` until it returns Some or `limit` passes.
pub async fn wait_for<T>(limit: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The process's peak resident set (VmHWM), in kB.
pub fn peak_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// The bytes a loopback TCP connection's sender has queued and the peer has not yet
/// taken: the `tx_queue` of the socket from local port `from` to remote port `to`, as
/// `/proc/net/tcp` shows it (0 when there is no such socket).
pub fn unsent_bytes(from: u16, to: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let port = |addr: &str| {
        addr.rsplit(':')
            .next()
            .and_then(|p| u16::from_str_radix(p, 16).ok())
    };
    table
        .lines()
        .skip(1)
        .find_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (local, remote, queues) = (f.get(1)?, f.get(2)?, f.get(4)?);
            if port(local)? != from || port(remote)? != to {
                return None;
            }
            u64::from_str_radix(queues.split(':').next()?, 16).ok()
        })
        .unwrap_or(0)
}

//! One connection to one MCP server, over the official SDK: a stdio child in its own
//! process group with the filtered environment, or Streamable HTTP with the configured
//! headers. The handshake is bounded by the server's `connect_timeout`.

use crate::handler::Handler;
use herald_config::{McpServerSettings, McpTransport};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncBufReadExt;

/// The SDK's running client.
pub type Service = RunningService<RoleClient, Handler>;

/// Lines of a server's stderr kept for its error message.
const STDERR_LINES: usize = 8;

/// A live connection; dropping it kills a stdio server's process group.
pub struct Connection {
    pub service: Service,
    pid: Option<u32>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            crate::children::kill(pid);
        }
    }
}

/// Connects to `s` within its `connect_timeout`; why not, in words for the user.
pub async fn connect(s: &McpServerSettings, handler: Handler) -> Result<Connection, String> {
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let attempt = async {
        match &s.transport {
            McpTransport::Stdio { command, args, env } => {
                stdio(command, args, env, handler, tail.clone()).await
            }
            McpTransport::Http { sse: true, .. } => Err(
                "transport: sse (the older HTTP+SSE protocol) is not supported: use the server's Streamable HTTP URL".to_owned(),
            ),
            McpTransport::Http { url, headers, .. } => http(url, headers, handler).await,
        }
    };
    match tokio::time::timeout(s.connect_timeout, attempt).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(with_stderr(e, &tail)),
        Err(_) => Err(with_stderr(
            format!(
                "no answer within connect_timeout ({} s)",
                s.connect_timeout.as_secs_f64()
            ),
            &tail,
        )),
    }
}

async fn stdio(
    command: &str,
    args: &[String],
    env: &[(String, String)],
    handler: Handler,
    tail: Arc<Mutex<VecDeque<String>>>,
) -> Result<Connection, String> {
    let mut cmd = herald_process::command(command);
    cmd.args(args).env_clear().envs(crate::env::server_env(env));
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of the child being started.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("missing executable '{command}'"),
            _ => format!("cannot start '{command}': {e}"),
        })?;
    let pid = transport.id();
    if let Some(pid) = pid {
        crate::children::track(pid);
    }
    if let Some(stderr) = stderr {
        tokio::spawn(keep_tail(stderr, tail));
    }
    let guard = KillOnError(pid);
    let service = handler
        .serve(transport)
        .await
        .map_err(|e| format!("the handshake failed: {e}"))?;
    guard.disarm();
    Ok(Connection { service, pid })
}

async fn http(
    url: &str,
    headers: &[(String, String)],
    handler: Handler,
) -> Result<Connection, String> {
    let mut map = HashMap::new();
    for (k, v) in headers {
        let name = http::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("header name {k:?} is not valid"))?;
        let value = http::HeaderValue::from_str(v)
            .map_err(|_| format!("the value of header {k} is not valid"))?;
        map.insert(name, value);
    }
    // reqwest is built without a default TLS provider: herald uses ring everywhere.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(map);
    let transport = StreamableHttpClientTransport::from_config(config);
    let service = handler
        .serve(transport)
        .await
        .map_err(|e| crate::redact::redacted(&format!("the handshake failed: {e}")))?;
    Ok(Connection { service, pid: None })
}

/// Kills a started child when the handshake does not complete.
struct KillOnError(Option<u32>);

impl KillOnError {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for KillOnError {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            crate::children::kill(pid);
        }
    }
}

/// Keeps the last lines of a server's stderr (each cut to 300 characters).
async fn keep_tail(stderr: tokio::process::ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line: String = line.chars().take(300).collect();
        tracing::debug!(target: "herald_mcp::stderr", "{line}");
        if let Ok(mut t) = tail.lock() {
            if t.len() == STDERR_LINES {
                t.pop_front();
            }
            t.push_back(line);
        }
    }
}

fn with_stderr(error: String, tail: &Mutex<VecDeque<String>>) -> String {
    let last = tail
        .lock()
        .ok()
        .and_then(|t| t.iter().rev().find(|l| !l.trim().is_empty()).cloned());
    match last {
        Some(line) => crate::redact::redacted(&format!("{error} (stderr: {})", line.trim())),
        None => error,
    }
}

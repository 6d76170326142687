//! One connection to one MCP server, over the official SDK: a stdio child in its own
//! process group with the filtered environment, or Streamable HTTP with the configured
//! headers. The handshake is bounded by the server's `connect_timeout`. Every
//! transport reads at most [`MAX_MESSAGE`] bytes for one message, and its incoming
//! messages are paced by [`crate::meter`].

use crate::handler::Handler;
use crate::meter::{Flooded, Metered};
use herald_config::{McpServerSettings, McpTransport};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

/// The SDK's running client.
pub type Service = RunningService<RoleClient, Handler>;

/// Lines of a server's stderr kept for its error message.
const STDERR_LINES: usize = 8;

/// The most one message of a server may weigh, on every transport: a stdio line (the
/// SDK's own bound, checked below), a Streamable HTTP answer or SSE event, an HTTP+SSE
/// event. A longer stdio line is dropped; a longer HTTP answer or event fails.
pub const MAX_MESSAGE: usize = 16 << 20;
const _: () = assert!(rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH <= MAX_MESSAGE);

/// A live connection; dropping it stops a stdio server's process group (SIGTERM, then
/// SIGKILL after a grace).
pub struct Connection {
    pub service: Service,
    pid: Option<u32>,
    flooded: Arc<Flooded>,
}

impl Connection {
    /// Whether it was closed because the server sent too much, too fast.
    pub fn flooded(&self) -> bool {
        self.flooded.is_set()
    }

    /// Whether it is closed: cancelled, or its transport ended (the server closed it,
    /// or was disconnected for flooding).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(pid) = self.pid {
            crate::children::stop(pid);
        }
    }
}

/// Why a connection was not made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// In words for the user.
    #[error("{0}")]
    Failed(String),
    /// The server sent too much, too fast during the handshake.
    #[error("{}", crate::meter::why_disconnected())]
    Flooded,
}

impl From<String> for ConnectError {
    fn from(why: String) -> ConnectError {
        ConnectError::Failed(why)
    }
}

/// Connects to `s` within its `connect_timeout`.
pub async fn connect(s: &McpServerSettings, handler: Handler) -> Result<Connection, ConnectError> {
    let tail = Arc::new(Mutex::new(VecDeque::new()));
    let attempt = async {
        match &s.transport {
            McpTransport::Stdio { command, args, env } => {
                stdio(command, args, env, handler, tail.clone()).await
            }
            McpTransport::Http { url, headers } => http(url, headers, &s.tls, handler).await,
            McpTransport::Sse { url, headers } => sse(url, headers, &s.tls, handler).await,
        }
    };
    match tokio::time::timeout(s.connect_timeout, attempt).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(ConnectError::Failed(e))) => Err(with_stderr(e, &tail).into()),
        Ok(Err(ConnectError::Flooded)) => Err(ConnectError::Flooded),
        Err(_) => Err(with_stderr(
            format!(
                "no answer within connect_timeout ({} s)",
                s.connect_timeout.as_secs_f64()
            ),
            &tail,
        )
        .into()),
    }
}

async fn stdio(
    command: &str,
    args: &[String],
    env: &[(String, String)],
    handler: Handler,
    tail: Arc<Mutex<VecDeque<String>>>,
) -> Result<Connection, ConnectError> {
    let mut cmd = herald_process::command(command);
    // Not killed when the SDK drops its handle: `children` asks the group to stop
    // first and kills it after a grace (and at exit, and with herald through
    // PR_SET_PDEATHSIG).
    cmd.kill_on_drop(false);
    cmd.args(args).env_clear().envs(crate::env::server_env(env));
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: prctl and getppid only set and read the child's own state; _exit
        // ends it at once when herald is gone already.
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() as u32 != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
    }
    let (transport, stderr) = spawn(cmd).await.map_err(|e| match e.kind() {
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
    let connection = handshake(transport, handler, pid).await?;
    guard.disarm();
    Ok(connection)
}

/// The handshake over `transport`, paced.
async fn handshake<T>(
    transport: T,
    handler: Handler,
    pid: Option<u32>,
) -> Result<Connection, ConnectError>
where
    T: rmcp::transport::Transport<RoleClient> + 'static,
{
    let flooded = Arc::new(Flooded::default());
    let service = match handler
        .serve(Metered::new(transport, flooded.clone()))
        .await
    {
        Ok(service) => service,
        Err(_) if flooded.is_set() => return Err(ConnectError::Flooded),
        Err(e) => {
            return Err(
                herald_llm::redact::shapes_redacted(&format!("the handshake failed: {e}")).into(),
            );
        }
    };
    Ok(Connection {
        service,
        pid,
        flooded,
    })
}

/// The configured headers, checked.
fn header_map(
    headers: &[(String, String)],
) -> Result<HashMap<http::HeaderName, http::HeaderValue>, String> {
    let mut map = HashMap::new();
    for (k, v) in headers {
        let name = http::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| format!("header name {k:?} is not valid"))?;
        let value = http::HeaderValue::from_str(v)
            .map_err(|_| format!("the value of header {k} is not valid"))?;
        map.insert(name, value);
    }
    Ok(map)
}

async fn http(
    url: &str,
    headers: &[(String, String)],
    tls: &herald_config::McpTls,
    handler: Handler,
) -> Result<Connection, ConnectError> {
    let map = header_map(headers)?;
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(map)
        .max_json_response_size(MAX_MESSAGE)
        .max_sse_event_size(MAX_MESSAGE);
    let client = crate::tls::client(tls, true)?;
    let transport = StreamableHttpClientTransport::with_client(client, config);
    handshake(transport, handler, None).await
}

async fn sse(
    url: &str,
    headers: &[(String, String)],
    tls: &herald_config::McpTls,
    handler: Handler,
) -> Result<Connection, ConnectError> {
    let map: http::HeaderMap = header_map(headers)?.into_iter().collect();
    let client = crate::tls::client(tls, false)?;
    let transport = crate::sse::open(url, map, client).await?;
    handshake(transport, handler, None).await
}

type Spawned = std::io::Result<(TokioChildProcess, Option<tokio::process::ChildStderr>)>;

/// A child to start on the spawner thread.
struct SpawnJob {
    cmd: tokio::process::Command,
    reply: tokio::sync::oneshot::Sender<Spawned>,
}

static SPAWNER: std::sync::OnceLock<std::sync::mpsc::Sender<SpawnJob>> = std::sync::OnceLock::new();

/// Starts `cmd` from one thread that lives as long as herald: `PR_SET_PDEATHSIG` fires
/// when the thread that forked a child ends, and the async workers' threads come and
/// go. Inline when that thread cannot be had.
async fn spawn(cmd: tokio::process::Command) -> Spawned {
    let spawner = SPAWNER.get_or_init(|| {
        let handle = tokio::runtime::Handle::current();
        let (tx, rx) = std::sync::mpsc::channel::<SpawnJob>();
        let started = std::thread::Builder::new()
            .name("herald-mcp-spawn".into())
            .spawn(move || {
                let _runtime = handle.enter();
                for job in rx {
                    let _ = job.reply.send(spawn_here(job.cmd));
                }
            });
        if let Err(e) = started {
            tracing::warn!("no MCP spawner thread ({e}): servers start from the async workers");
        }
        tx
    });
    let (reply, answer) = tokio::sync::oneshot::channel();
    match spawner.send(SpawnJob { cmd, reply }) {
        Ok(()) => answer
            .await
            .unwrap_or_else(|_| Err(std::io::Error::other("the MCP spawner thread ended"))),
        Err(std::sync::mpsc::SendError(job)) => spawn_here(job.cmd),
    }
}

fn spawn_here(cmd: tokio::process::Command) -> Spawned {
    TokioChildProcess::builder(cmd)
        .stderr(Stdio::piped())
        .spawn()
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

/// Keeps the last lines of a server's stderr (each cut to 300 bytes, decoded
/// lossily), reading to the end so the server never writes into a closed pipe.
async fn keep_tail(mut stderr: tokio::process::ChildStderr, tail: Arc<Mutex<VecDeque<String>>>) {
    use tokio::io::AsyncReadExt;
    let mut chunk = [0u8; 4096];
    let mut line: Vec<u8> = Vec::new();
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        for &b in &chunk[..n] {
            if b == b'\n' {
                keep_line(&line, &tail);
                line.clear();
            } else if line.len() < 300 {
                line.push(b);
            }
        }
    }
}

fn keep_line(line: &[u8], tail: &Mutex<VecDeque<String>>) {
    let text = String::from_utf8_lossy(line).trim_end().to_owned();
    tracing::debug!(target: "herald_mcp::stderr", "{text}");
    if let Ok(mut t) = tail.lock() {
        if t.len() == STDERR_LINES {
            t.pop_front();
        }
        t.push_back(text);
    }
}

fn with_stderr(error: String, tail: &Mutex<VecDeque<String>>) -> String {
    let last = tail
        .lock()
        .ok()
        .and_then(|t| t.iter().rev().find(|l| !l.trim().is_empty()).cloned());
    match last {
        Some(line) => {
            herald_llm::redact::shapes_redacted(&format!("{error} (stderr: {})", line.trim()))
        }
        None => herald_llm::redact::shapes_redacted(&error),
    }
}

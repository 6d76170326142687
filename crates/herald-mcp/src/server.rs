//! One configured MCP server for as long as herald runs: connected in the background
//! (never on a turn's path), its tools listed and listed again when it says they
//! changed, pinged every `keepalive_interval`, and connected again with back-off after
//! a failure. Each distinct failure is logged once, by name.

use crate::connection::{Connection, connect};
use crate::handler::Handler;
use crate::sampling::{Policy, Sampler};
use herald_config::McpServerSettings;
use rmcp::model::{CallToolRequestParams, ClientRequest, PingRequest};
use serde_json::{Map, Value};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How a server stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Connecting,
    Connected,
    /// The last attempt failed (why); another follows after the back-off.
    Failed(String),
}

impl Status {
    pub fn name(&self) -> &'static str {
        match self {
            Status::Connecting => "connecting",
            Status::Connected => "connected",
            Status::Failed(_) => "failed",
        }
    }
}

/// One of the server's tools, as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    pub name: String,
    pub description: String,
    /// Normalised for the model.
    pub schema: Value,
}

/// What the server offers besides its tools (from its `initialize` answer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offers {
    pub resources: bool,
    pub prompts: bool,
}

#[derive(Default)]
struct State {
    status: Option<Status>,
    tools: Vec<ListedTool>,
    offers: Offers,
    connection: Option<Arc<Connection>>,
    /// The last error logged, so a retry that fails the same way stays quiet.
    logged: Option<String>,
}

/// A server and its background task.
pub struct Server {
    pub settings: McpServerSettings,
    state: RwLock<State>,
    /// Becomes true once the first attempt to connect has ended (either way).
    tried: tokio::sync::watch::Sender<bool>,
    stop: CancellationToken,
    /// Asks the task to connect again now (a call found the transport closed).
    reconnect: tokio::sync::Notify,
}

/// Back-off between attempts: 1, 2, 4 … 60 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.min(6)).min(Duration::from_secs(60))
}

impl Server {
    /// Starts `settings`'s server in the background.
    pub fn start(settings: McpServerSettings, sampler: Option<Arc<dyn Sampler>>) -> Arc<Server> {
        let server = Arc::new(Server {
            settings,
            state: RwLock::new(State::default()),
            tried: tokio::sync::watch::channel(false).0,
            stop: CancellationToken::new(),
            reconnect: tokio::sync::Notify::new(),
        });
        let sampling = sampler
            .filter(|_| server.settings.sampling.enabled)
            .map(|s| {
                Arc::new(Policy::new(
                    server.name(),
                    server.settings.sampling.clone(),
                    s,
                ))
            });
        tokio::spawn(server.clone().run(sampling));
        server
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    pub fn status(&self) -> Status {
        self.read(|s| s.status.clone().unwrap_or(Status::Connecting))
    }

    /// The tools offered now (empty unless connected), after `tools.include/exclude`.
    pub fn tools(&self) -> Vec<ListedTool> {
        self.read(|s| match s.connection.is_some() {
            true => s.tools.clone(),
            false => Vec::new(),
        })
    }

    pub fn offers(&self) -> Offers {
        self.read(|s| match s.connection.is_some() {
            true => s.offers,
            false => Offers::default(),
        })
    }

    /// Waits until the first attempt to connect has ended, or `limit` passes.
    pub async fn first_attempt(&self, limit: Duration) {
        let mut rx = self.tried.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|t| *t)).await;
    }

    /// Stops the task and closes the connection (a stdio server is killed).
    pub fn stop(&self) {
        self.stop.cancel();
        self.write(|s| s.connection = None);
    }

    fn read<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        match self.state.read() {
            Ok(s) => f(&s),
            Err(poisoned) => f(&poisoned.into_inner()),
        }
    }

    fn write<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        match self.state.write() {
            Ok(mut s) => f(&mut s),
            Err(poisoned) => f(&mut poisoned.into_inner()),
        }
    }

    async fn run(self: Arc<Server>, sampling: Option<Arc<Policy>>) {
        let mut failures = 0u32;
        while !self.stop.is_cancelled() {
            let changed = Arc::new(tokio::sync::Notify::new());
            let handler = Handler {
                changed: changed.clone(),
                sampling: sampling.clone(),
            };
            let attempt = tokio::select! {
                _ = self.stop.cancelled() => return,
                a = connect(&self.settings, handler) => a,
            };
            match attempt {
                Ok(conn) => {
                    failures = 0;
                    self.serve(Arc::new(conn), changed).await;
                }
                Err(why) => {
                    self.failed(why);
                    failures = failures.saturating_add(1);
                    tokio::select! {
                        _ = self.stop.cancelled() => return,
                        _ = tokio::time::sleep(backoff(failures - 1)) => {}
                        _ = self.reconnect.notified() => {}
                    }
                }
            }
        }
    }

    fn failed(&self, why: String) {
        let first = self.write(|s| {
            s.status = Some(Status::Failed(why.clone()));
            s.connection = None;
            let first = s.logged.as_deref() != Some(why.as_str());
            s.logged = Some(why.clone());
            first
        });
        self.tried.send_replace(true);
        if first {
            tracing::warn!(
                server = self.name(),
                "MCP server unavailable, its tools are left out until it connects: {why}"
            );
        }
    }

    /// Lists the tools of a new connection, then keeps it until it fails or stops.
    async fn serve(&self, conn: Arc<Connection>, changed: Arc<tokio::sync::Notify>) {
        let offers = offers_of(&conn);
        let listed = match self.list(&conn).await {
            Ok(t) => t,
            Err(why) => return self.failed(why),
        };
        let count = listed.len();
        self.write(|s| {
            s.tools = listed;
            s.offers = offers;
            s.connection = Some(conn.clone());
            s.status = Some(Status::Connected);
            s.logged = None;
        });
        self.tried.send_replace(true);
        tracing::info!(server = self.name(), tools = count, "MCP server connected");
        let mut keepalive = tokio::time::interval(self.settings.keepalive);
        keepalive.tick().await;
        let mut watch = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = self.reconnect.notified() => break,
                _ = changed.notified() => self.refresh(&conn).await,
                _ = keepalive.tick() => if !ping(&conn).await { break },
                _ = watch.tick() => if conn.service.is_closed() { break },
            }
        }
        self.failed("the connection closed".to_owned());
    }

    async fn refresh(&self, conn: &Connection) {
        match self.list(conn).await {
            Ok(tools) => {
                let names = |t: &[ListedTool]| t.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
                let before = self.read(|s| names(&s.tools));
                let after = names(&tools);
                self.write(|s| s.tools = tools);
                if before != after {
                    tracing::warn!(server = self.name(), before = ?before, after = ?after, "MCP server changed its tools; the next turn offers the new list");
                }
            }
            Err(why) => tracing::warn!(server = self.name(), "MCP tools not listed again: {why}"),
        }
    }

    async fn list(&self, conn: &Connection) -> Result<Vec<ListedTool>, String> {
        let listed =
            tokio::time::timeout(self.settings.connect_timeout, conn.service.list_all_tools())
                .await
                .map_err(|_| "tools/list was not answered in time".to_owned())?
                .map_err(|e| crate::redact::redacted(&format!("tools/list failed: {e}")))?;
        let kept = listed
            .into_iter()
            .filter_map(|t| serde_json::to_value(&t).ok())
            .filter_map(|t| listed_tool(&t))
            .filter(|t| self.keeps(&t.name))
            .collect();
        Ok(kept)
    }

    /// `tools.include` (which wins) and `tools.exclude`, by the server's tool names.
    fn keeps(&self, tool: &str) -> bool {
        match &self.settings.include {
            Some(include) => include.iter().any(|n| n == tool),
            None => !self.settings.exclude.iter().any(|n| n == tool),
        }
    }

    /// Calls `tool` with `args` within the server's `timeout`, giving up when
    /// `interrupted` turns true: the call's result as JSON, or why not in words.
    pub async fn call(
        &self,
        tool: &str,
        args: Map<String, Value>,
        interrupted: &std::sync::atomic::AtomicBool,
    ) -> Result<Value, String> {
        let conn = self.connection().await?;
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        let call = conn.service.call_tool(params);
        let limit = self.settings.timeout;
        let outcome = tokio::select! {
            r = tokio::time::timeout(limit, call) => r,
            _ = until(interrupted) => return Err("MCP call interrupted: the user stopped the turn".into()),
        };
        match outcome {
            Err(_) => Err(format!(
                "MCP call timed out after {} s (the server's timeout)",
                limit.as_secs_f64()
            )),
            Ok(Ok(result)) => serde_json::to_value(&result).map_err(|e| e.to_string()),
            Ok(Err(e)) => {
                if conn.service.is_closed() {
                    self.reconnect.notify_one();
                    return Err(format!(
                        "MCP server '{}' closed the connection during the call: {e}",
                        self.name()
                    ));
                }
                Err(crate::redact::redacted(&format!("MCP call failed: {e}")))
            }
        }
    }

    /// The live connection; a server still connecting gets up to 5 s.
    pub(crate) async fn connection(&self) -> Result<Arc<Connection>, String> {
        if let Some(c) = self.read(|s| s.connection.clone()) {
            return Ok(c);
        }
        if self.status() == Status::Connecting {
            self.first_attempt(Duration::from_secs(5)).await;
        }
        self.read(|s| s.connection.clone())
            .ok_or_else(|| format!("MCP server '{}' is not connected", self.name()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Connects to `settings`'s server once, lists its tools and closes (`herald mcp
/// test`, `add`, `list`): the tools, or why not.
pub async fn probe(settings: &McpServerSettings) -> Result<Vec<ListedTool>, String> {
    let handler = Handler {
        changed: Arc::new(tokio::sync::Notify::new()),
        sampling: None,
    };
    let conn = connect(settings, handler).await?;
    let server = Server {
        settings: settings.clone(),
        state: RwLock::new(State::default()),
        tried: tokio::sync::watch::channel(false).0,
        stop: CancellationToken::new(),
        reconnect: tokio::sync::Notify::new(),
    };
    let listed = server.list(&conn).await;
    drop(conn);
    listed
}

/// Resolves once `flag` is set (checked every 100 ms).
async fn until(flag: &std::sync::atomic::AtomicBool) {
    while !flag.load(std::sync::atomic::Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn ping(conn: &Connection) -> bool {
    let request = ClientRequest::PingRequest(PingRequest::default());
    match tokio::time::timeout(Duration::from_secs(30), conn.service.send_request(request)).await {
        Ok(Ok(_)) => true,
        // A server without ping still answers: it is alive.
        Ok(Err(rmcp::ServiceError::McpError(_))) => true,
        _ => false,
    }
}

fn offers_of(conn: &Connection) -> Offers {
    let info = conn
        .service
        .peer_info()
        .and_then(|i| serde_json::to_value(&*i).ok())
        .unwrap_or(Value::Null);
    let caps = &info["capabilities"];
    Offers {
        resources: caps.get("resources").is_some_and(|v| !v.is_null()),
        prompts: caps.get("prompts").is_some_and(|v| !v.is_null()),
    }
}

fn listed_tool(t: &Value) -> Option<ListedTool> {
    let name = t.get("name")?.as_str()?.to_owned();
    Some(ListedTool {
        description: t
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_default(),
        schema: crate::schema::normalized(t.get("inputSchema").unwrap_or(&Value::Null)),
        name,
    })
}

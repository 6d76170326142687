//! One configured MCP server for as long as herald runs: connected in the background
//! (never on a turn's path), its tools listed and listed again when it says they
//! changed, pinged every `keepalive_interval`, and connected again with back-off after
//! a failure. Each distinct failure is logged once, by name.

use crate::connection::{ConnectError, Connection, connect};
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
    /// A stdio server stopped by its recycle limit (`idle_timeout_seconds`,
    /// `max_lifetime_seconds`): its tools stay offered and the next call starts it.
    Dormant,
}

impl Status {
    pub fn name(&self) -> &'static str {
        match self {
            Status::Connecting => "connecting",
            Status::Connected => "connected",
            Status::Failed(_) => "failed",
            Status::Dormant => "dormant",
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
    /// Recycled: no connection, its tools still offered.
    dormant: bool,
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
    /// When the last call started, and how many run now (the recycle limits).
    last_call: std::sync::Mutex<std::time::Instant>,
    in_flight: std::sync::atomic::AtomicUsize,
}

/// How a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// It failed (or closed) after lasting [`HEALTHY_AFTER`], or not.
    Failed {
        healthy: bool,
    },
    /// A recycle limit stopped it.
    Recycled,
    /// It sent too much, too fast ([`crate::meter`]).
    Flooded,
    Stopped,
}

/// Failures in a row before a server is parked.
const MAX_RETRIES: u32 = 5;
/// How often a parked server is tried.
const PARKED_RETRY: Duration = Duration::from_secs(300);
/// A connection that lasted this long counts as healthy (the failure count restarts).
const HEALTHY_AFTER: Duration = Duration::from_secs(60);
/// A server's tools are listed again at most this often, however often it says they
/// changed.
const RELIST_EVERY: Duration = Duration::from_secs(60);
/// A burst of `tools/list_changed` is one re-list: it waits this long at least.
const RELIST_SETTLE: Duration = Duration::from_secs(1);

/// Back-off between attempts: 1, 2, 4 … 60 s.
fn backoff(attempt: u32) -> Duration {
    Duration::from_secs(1u64 << attempt.min(6)).min(Duration::from_secs(60))
}

impl Server {
    /// Starts `settings`'s server in the background.
    pub fn start(settings: McpServerSettings, sampler: Option<Arc<dyn Sampler>>) -> Arc<Server> {
        let server = Arc::new(Server::new(settings));
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

    fn new(settings: McpServerSettings) -> Server {
        Server {
            settings,
            state: RwLock::new(State::default()),
            tried: tokio::sync::watch::channel(false).0,
            stop: CancellationToken::new(),
            reconnect: tokio::sync::Notify::new(),
            last_call: std::sync::Mutex::new(std::time::Instant::now()),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    pub fn name(&self) -> &str {
        &self.settings.name
    }

    pub fn status(&self) -> Status {
        self.read(|s| match s.dormant {
            true => Status::Dormant,
            false => s.status.clone().unwrap_or(Status::Connecting),
        })
    }

    /// The tools offered now (empty unless connected or dormant), after
    /// `tools.include/exclude`.
    pub fn tools(&self) -> Vec<ListedTool> {
        self.read(|s| match s.connection.is_some() || s.dormant {
            true => s.tools.clone(),
            false => Vec::new(),
        })
    }

    pub fn offers(&self) -> Offers {
        self.read(|s| match s.connection.is_some() || s.dormant {
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

    /// Changes the state; the metrics hear whether the server is up after it (connected,
    /// or dormant between calls after a recycle).
    fn write<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let (out, up) = match self.state.write() {
            Ok(mut s) => (f(&mut s), up(&s)),
            Err(poisoned) => {
                let mut s = poisoned.into_inner();
                (f(&mut s), up(&s))
            }
        };
        herald_metrics::get()
            .extensions
            .mcp_server(&self.settings.name, up);
        out
    }

    async fn run(self: Arc<Server>, sampling: Option<Arc<Policy>>) {
        let mut failures = 0u32;
        while !self.stop.is_cancelled() {
            let changed = Arc::new(tokio::sync::Notify::new());
            let handler = Handler {
                changed: changed.clone(),
                sampling: sampling.clone(),
            };
            self.write(|s| {
                if s.connection.is_none() && s.status.is_some() {
                    s.status = Some(Status::Connecting);
                }
            });
            let attempt = tokio::select! {
                _ = self.stop.cancelled() => return,
                a = connect(&self.settings, handler) => a,
            };
            let ended = match attempt {
                Ok(conn) => self.serve(Arc::new(conn), changed).await,
                Err(ConnectError::Flooded) => {
                    self.failed(flooded_text());
                    Ended::Flooded
                }
                Err(ConnectError::Failed(why)) => {
                    self.failed(why);
                    Ended::Failed { healthy: false }
                }
            };
            match ended {
                Ended::Stopped => return,
                // Dormant until a call (or a reload) wants it.
                Ended::Recycled => {
                    failures = 0;
                    tokio::select! {
                        _ = self.stop.cancelled() => return,
                        _ = self.reconnect.notified() => continue,
                    }
                }
                Ended::Failed { healthy: true } => failures = 0,
                Ended::Failed { healthy: false } => failures = failures.saturating_add(1),
                Ended::Flooded => {}
            }
            // After five failures in a row the server is parked: tried every 5 minutes,
            // or at once when a call or a reload asks. A flooding server is parked at
            // once.
            let wait = match (ended, failures) {
                (Ended::Flooded, _) => PARKED_RETRY,
                (_, 0) => Duration::from_secs(1),
                (_, n) if n > MAX_RETRIES => PARKED_RETRY,
                (_, n) => backoff(n - 1),
            };
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
                _ = self.reconnect.notified() => {}
            }
        }
    }

    fn failed(&self, why: String) {
        let first = self.write(|s| {
            s.status = Some(Status::Failed(why.clone()));
            s.connection = None;
            s.dormant = false;
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

    /// Lists the tools of a new connection, then keeps it until it fails, stops or is
    /// recycled.
    async fn serve(&self, conn: Arc<Connection>, changed: Arc<tokio::sync::Notify>) -> Ended {
        let offers = offers_of(&conn);
        let listed = match self.list(&conn).await {
            Ok(t) => t,
            Err(_) if conn.flooded() => {
                self.failed(flooded_text());
                return Ended::Flooded;
            }
            Err(why) => {
                self.failed(why);
                return Ended::Failed { healthy: false };
            }
        };
        let count = listed.len();
        self.write(|s| {
            s.tools = listed;
            s.offers = offers;
            s.connection = Some(conn.clone());
            s.status = Some(Status::Connected);
            s.dormant = false;
        });
        self.touch();
        self.tried.send_replace(true);
        tracing::info!(server = self.name(), tools = count, "MCP server connected");
        let started = std::time::Instant::now();
        let mut keepalive = tokio::time::interval(self.settings.keepalive);
        keepalive.tick().await;
        let mut watch = tokio::time::interval(Duration::from_millis(500));
        let mut relist = Relist::new(tokio::time::Instant::now());
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return Ended::Stopped,
                _ = self.reconnect.notified() => break,
                _ = changed.notified(), if !relist.is_due() => {
                    relist.changed(tokio::time::Instant::now());
                }
                _ = relist.sleep() => {
                    // What was said until now is covered by this listing.
                    let _ = tokio::time::timeout(Duration::ZERO, changed.notified()).await;
                    self.refresh(&conn).await;
                    relist.listed(tokio::time::Instant::now());
                }
                _ = keepalive.tick() => if !ping(&conn).await { break },
                _ = watch.tick() => {
                    if conn.is_closed() {
                        break;
                    }
                    if let Some(why) = self.recycle_reason(started) {
                        self.recycle(why);
                        return Ended::Recycled;
                    }
                }
            }
        }
        if conn.flooded() {
            self.failed(flooded_text());
            return Ended::Flooded;
        }
        let healthy = started.elapsed() >= HEALTHY_AFTER;
        if healthy {
            self.write(|s| s.logged = None);
        }
        self.failed("the connection closed".to_owned());
        Ended::Failed { healthy }
    }

    /// Which recycle limit a stdio server between calls has reached, if any.
    fn recycle_reason(&self, started: std::time::Instant) -> Option<&'static str> {
        let stdio = matches!(
            self.settings.transport,
            herald_config::McpTransport::Stdio { .. }
        );
        let busy = self.in_flight.load(std::sync::atomic::Ordering::SeqCst) > 0;
        if !stdio || busy {
            return None;
        }
        if self
            .settings
            .max_lifetime
            .is_some_and(|m| started.elapsed() >= m)
        {
            return Some("max_lifetime_seconds");
        }
        let idle = self
            .last_call
            .lock()
            .map(|t| t.elapsed())
            .unwrap_or_default();
        self.settings
            .idle_timeout
            .is_some_and(|i| idle >= i)
            .then_some("idle_timeout_seconds")
    }

    /// Stops the process and keeps the tools on offer: the next call starts it again.
    fn recycle(&self, why: &str) {
        self.write(|s| {
            s.connection = None;
            s.dormant = true;
        });
        tracing::info!(
            server = self.name(),
            "MCP server stopped after its {why}; the next call starts it again"
        );
    }

    /// Marks a call in flight until the guard is dropped.
    pub(crate) fn busy(&self) -> Busy<'_> {
        Busy::new(self)
    }

    /// Marks a call starting now (the idle limit counts from it).
    fn touch(&self) {
        if let Ok(mut t) = self.last_call.lock() {
            *t = std::time::Instant::now();
        }
    }

    async fn refresh(&self, conn: &Connection) {
        match self.list(conn).await {
            Ok(tools) => {
                let names = |t: &[ListedTool]| t.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
                let before = self.read(|s| names(&s.tools));
                let after = names(&tools);
                self.write(|s| s.tools = tools);
                if before != after {
                    let added: Vec<&String> = after
                        .iter()
                        .filter(|n| !before.contains(n))
                        .take(20)
                        .collect();
                    let removed: Vec<&String> = before
                        .iter()
                        .filter(|n| !after.contains(n))
                        .take(20)
                        .collect();
                    tracing::warn!(server = self.name(), tools = after.len(), added = ?added, removed = ?removed, "MCP server changed its tools; the next turn offers the new list");
                }
            }
            Err(why) => tracing::warn!(server = self.name(), "MCP tools not listed again: {why}"),
        }
    }

    async fn list(&self, conn: &Connection) -> Result<Vec<ListedTool>, String> {
        let keeps = |name: &str| self.keeps(name);
        let listing = tokio::time::timeout(
            self.settings.connect_timeout,
            crate::listing::list(conn, self.name(), &keeps),
        )
        .await
        .map_err(|_| "tools/list was not answered in time".to_owned())??;
        listing.warn(self.name());
        let known: Vec<(String, String)> = self.read(|s| {
            s.tools
                .iter()
                .map(|t| (t.name.clone(), t.description.clone()))
                .collect()
        });
        for tool in &listing.kept {
            let seen = known
                .iter()
                .any(|(n, d)| *n == tool.name && *d == tool.description);
            if !seen {
                crate::suspicious::report(self.name(), &tool.name, &tool.description);
            }
        }
        Ok(listing.kept)
    }

    /// `tools.include` (which wins) and `tools.exclude`, by the server's tool names.
    fn keeps(&self, tool: &str) -> bool {
        match self.settings.include.as_ref().filter(|i| !i.is_empty()) {
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
        let _busy = self.busy();
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
                if conn.is_closed() {
                    self.reconnect_if(&conn);
                    return Err(herald_llm::redact::shapes_redacted(&format!(
                        "MCP server '{}' closed the connection during the call: {e}",
                        self.name()
                    )));
                }
                Err(herald_llm::redact::shapes_redacted(&format!(
                    "MCP call failed: {e}"
                )))
            }
        }
    }

    /// Asks for a new connection when `conn` is still the one in use (a call that
    /// found an older one closed never drops its healthy successor).
    fn reconnect_if(&self, conn: &Arc<Connection>) {
        let current = self.read(|s| s.connection.clone());
        if current.is_some_and(|c| Arc::ptr_eq(&c, conn)) {
            self.reconnect.notify_one();
        }
    }

    /// Asks a server that is not connected to try again now (a reload, a call to a
    /// dormant server).
    pub fn nudge(&self) {
        if self.read(|s| s.connection.is_none()) {
            self.reconnect.notify_one();
        }
    }

    /// The live connection; a server still connecting gets up to 5 s, a dormant one is
    /// started and gets its `connect_timeout`.
    pub(crate) async fn connection(&self) -> Result<Arc<Connection>, String> {
        let mut wait = Duration::from_secs(5);
        if self.read(|s| s.dormant) {
            wait = self.settings.connect_timeout.max(wait);
            self.write(|s| s.status = Some(Status::Connecting));
            self.reconnect.notify_one();
        }
        let deadline = std::time::Instant::now() + wait;
        loop {
            if let Some(c) = self.read(|s| s.connection.clone()) {
                return Ok(c);
            }
            let connecting = matches!(self.status(), Status::Connecting | Status::Dormant);
            if !connecting || std::time::Instant::now() >= deadline {
                return Err(format!("MCP server '{}' is not connected", self.name()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A call in flight (a server is never recycled under one); its start resets the
/// idle clock.
pub(crate) struct Busy<'a>(&'a Server);

impl<'a> Busy<'a> {
    fn new(server: &'a Server) -> Busy<'a> {
        server.touch();
        server
            .in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Busy(server)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.touch();
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Connects to `settings`'s server once, lists its tools and closes (`herald mcp
/// test`, `add`, `list`): the tools, or why not.
pub async fn probe(settings: &McpServerSettings) -> Result<Vec<ListedTool>, String> {
    let handler = Handler {
        changed: Arc::new(tokio::sync::Notify::new()),
        sampling: None,
    };
    let conn = connect(settings, handler)
        .await
        .map_err(|e| e.to_string())?;
    let server = Server::new(settings.clone());
    let listed = server.list(&conn).await;
    drop(conn);
    listed
}

/// Resolves once `flag` is set (checked every 100 ms).
pub(crate) async fn until(flag: &std::sync::atomic::AtomicBool) {
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

/// Why a flooding server was disconnected, for the log and its status.
fn flooded_text() -> String {
    format!(
        "{}; it is tried again in {} minutes, or at a reload",
        crate::meter::why_disconnected(),
        PARKED_RETRY.as_secs() / 60
    )
}

/// When a server's tools are listed again: at most once every [`RELIST_EVERY`], at
/// least [`RELIST_SETTLE`] after the change that asked for it, once however many
/// changes came meanwhile.
struct Relist {
    listed: tokio::time::Instant,
    due: Option<tokio::time::Instant>,
}

impl Relist {
    fn new(listed: tokio::time::Instant) -> Relist {
        Relist { listed, due: None }
    }

    fn is_due(&self) -> bool {
        self.due.is_some()
    }

    /// The server said its tools changed.
    fn changed(&mut self, now: tokio::time::Instant) {
        let at = (self.listed + RELIST_EVERY).max(now + RELIST_SETTLE);
        self.due = Some(self.due.map_or(at, |d| d.min(at)));
    }

    fn listed(&mut self, now: tokio::time::Instant) {
        self.listed = now;
        self.due = None;
    }

    /// Resolves when a listing is due; never when none is.
    async fn sleep(&self) {
        match self.due {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }
}

fn up(s: &State) -> bool {
    s.dormant || matches!(s.status, Some(Status::Connected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_listed_again_at_most_once_a_minute_once_per_burst() {
        let t0 = tokio::time::Instant::now();
        let s = Duration::from_secs;
        let mut relist = Relist::new(t0);
        assert!(!relist.is_due());
        relist.changed(t0 + s(2));
        assert_eq!(relist.due, Some(t0 + RELIST_EVERY));
        relist.changed(t0 + s(4));
        assert_eq!(relist.due, Some(t0 + RELIST_EVERY), "coalesced");
        relist.listed(t0 + RELIST_EVERY);
        assert!(!relist.is_due());
        // Long after the last listing: soon, once the burst has settled.
        relist.changed(t0 + s(200));
        assert_eq!(relist.due, Some(t0 + s(200) + RELIST_SETTLE));
    }
}

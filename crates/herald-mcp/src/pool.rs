//! Every MCP server of one home (config.yaml's `mcp_servers`, and a session's own from
//! ACP), and which of their tools a session is offered.

use crate::naming::names_server;
use crate::sampling::Sampler;
use crate::server::{Server, Status};
use crate::tool::{McpTool, Utility, UtilityTool};
use herald_agent::Tool;
use herald_config::{McpServerSettings, McpSettings};
use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Which servers' tools a session gets.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum McpGrant {
    /// None: the default, and a webhook run whose toolsets name no server.
    #[default]
    Nothing,
    /// Every enabled server (the interactive doors, as Hermes's CLI).
    All,
    /// The servers these toolsets entries name (`mcp-<name>` or `<name>`).
    Named(Vec<String>),
}

impl McpGrant {
    /// The grant of an interactive door's toolsets list, as Hermes reads it: `no_mcp`
    /// gives none; entries naming servers give only those; otherwise all.
    pub fn interactive(toolsets: &[String], pool: &McpPool) -> McpGrant {
        if toolsets.iter().any(|t| t.trim() == "no_mcp") {
            return McpGrant::Nothing;
        }
        let named: Vec<String> = toolsets.iter().filter(|t| pool.names(t)).cloned().collect();
        match named.is_empty() {
            true => McpGrant::All,
            false => McpGrant::Named(named),
        }
    }

    /// The grant of a webhook run: only the servers its toolsets name.
    pub fn webhook(toolsets: &[String]) -> McpGrant {
        McpGrant::Named(toolsets.to_vec())
    }

    fn allows(&self, server: &str) -> bool {
        match self {
            McpGrant::Nothing => false,
            McpGrant::All => true,
            McpGrant::Named(entries) => entries.iter().any(|e| names_server(e, server)),
        }
    }
}

/// One server's state, as the dashboard's health page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerReport {
    pub name: String,
    pub enabled: bool,
    pub status: &'static str,
    /// The tools the model is offered from it.
    pub tools: usize,
    pub error: Option<String>,
}

/// The servers of one home.
pub struct McpPool {
    servers: RwLock<Vec<Arc<Server>>>,
    configured: RwLock<Vec<McpServerSettings>>,
    discovery_timeout: Duration,
    sampler: Option<Arc<dyn Sampler>>,
    discovered: tokio::sync::OnceCell<()>,
    /// One reload at a time (SIGHUP and RPC may ask together).
    reloading: std::sync::Mutex<()>,
}

impl McpPool {
    /// Starts every enabled server of `settings` in the background (call inside a
    /// tokio runtime); `sampler` answers their sampling requests.
    pub fn start(settings: &McpSettings, sampler: Option<Arc<dyn Sampler>>) -> Arc<McpPool> {
        let servers = settings
            .servers
            .iter()
            .filter(|s| s.enabled)
            .map(|s| Server::start(s.clone(), sampler.clone()))
            .collect();
        Arc::new(McpPool {
            servers: RwLock::new(servers),
            configured: RwLock::new(settings.servers.clone()),
            discovery_timeout: settings.discovery_timeout,
            sampler,
            discovered: tokio::sync::OnceCell::new(),
            reloading: std::sync::Mutex::new(()),
        })
    }

    fn live(&self) -> Vec<Arc<Server>> {
        match self.servers.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The names of the servers it runs.
    pub fn server_names(&self) -> Vec<String> {
        self.live().iter().map(|s| s.name().to_owned()).collect()
    }

    /// Whether a toolsets entry names one of the configured servers.
    pub fn names(&self, entry: &str) -> bool {
        match self.configured.read() {
            Ok(c) => c.iter().any(|s| names_server(entry, &s.name)),
            Err(_) => false,
        }
    }

    /// The first turn's wait: at most `mcp_discovery_timeout` for every server's first
    /// attempt, once per pool; a slower server joins a later turn.
    pub async fn wait_for_discovery(&self) {
        self.discovered
            .get_or_init(|| async {
                let limit = self.discovery_timeout;
                let waits: Vec<_> = self.live();
                let all = futures_join(waits.iter().map(|s| s.first_attempt(limit)));
                let _ = tokio::time::timeout(limit, all).await;
            })
            .await;
    }

    /// The tools `grant` allows, less the servers `disabled` names (as
    /// `agent.disabled_toolsets` does), for a session whose own tools are named `taken`
    /// (an MCP tool never replaces one of them, nor an earlier server's).
    pub fn tools(
        &self,
        grant: &McpGrant,
        taken: &[String],
        disabled: &[String],
    ) -> Vec<Arc<dyn Tool>> {
        self.offered(grant, taken, disabled)
            .into_iter()
            .map(|(_, tool)| tool)
            .collect()
    }

    /// [`McpPool::tools`], each with its server.
    fn offered(
        &self,
        grant: &McpGrant,
        taken: &[String],
        disabled: &[String],
    ) -> Vec<(Arc<Server>, Arc<dyn Tool>)> {
        let mut seen: HashSet<String> = taken.iter().cloned().collect();
        let mut out: Vec<(Arc<Server>, Arc<dyn Tool>)> = Vec::new();
        let wanted = |s: &Arc<Server>| {
            grant.allows(s.name()) && !disabled.iter().any(|d| names_server(d, s.name()))
        };
        for server in self.live().into_iter().filter(wanted) {
            let mut add = |tool: Arc<dyn Tool>| {
                if seen.insert(tool.name().to_owned()) {
                    out.push((server.clone(), tool));
                } else {
                    left_out(tool.name(), server.name());
                }
            };
            for listed in server.tools() {
                add(Arc::new(McpTool::new(server.clone(), listed)));
            }
            let offers = server.offers();
            let s = &server.settings;
            if offers.resources && s.resources {
                add(Arc::new(UtilityTool::new(
                    server.clone(),
                    Utility::ListResources,
                )));
                add(Arc::new(UtilityTool::new(
                    server.clone(),
                    Utility::ReadResource,
                )));
            }
            if offers.prompts && s.prompts {
                add(Arc::new(UtilityTool::new(
                    server.clone(),
                    Utility::ListPrompts,
                )));
                add(Arc::new(UtilityTool::new(
                    server.clone(),
                    Utility::GetPrompt,
                )));
            }
        }
        out
    }

    /// Every configured server, enabled or not, with its state and how many tools it
    /// gives the model (utility tools included; not those left out by a name clash).
    pub fn report(&self) -> Vec<ServerReport> {
        let live = self.live();
        let offered = self.offered(&McpGrant::All, &[], &[]);
        let count = |s: &Arc<Server>| offered.iter().filter(|(o, _)| Arc::ptr_eq(o, s)).count();
        let configured = match self.configured.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        configured
            .iter()
            .map(|c| match live.iter().find(|s| s.name() == c.name) {
                Some(s) => {
                    let status = s.status();
                    ServerReport {
                        name: c.name.clone(),
                        enabled: true,
                        status: status.name(),
                        tools: count(s),
                        error: match status {
                            Status::Failed(e) => Some(e),
                            _ => None,
                        },
                    }
                }
                None => ServerReport {
                    name: c.name.clone(),
                    enabled: false,
                    status: "disabled",
                    tools: 0,
                    error: None,
                },
            })
            .collect()
    }

    /// Uses `settings` from now on: servers whose settings changed (or that were added,
    /// removed, enabled or disabled) are stopped and started again; the others keep
    /// their connection. How many were restarted, started or stopped.
    pub fn reload(&self, settings: &McpSettings) -> usize {
        let _one = self
            .reloading
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let old = self.live();
        let mut changed = 0;
        let mut next: Vec<Arc<Server>> = Vec::new();
        for s in settings.servers.iter().filter(|s| s.enabled) {
            match old.iter().find(|o| o.settings == *s) {
                Some(same) => {
                    // An unchanged server that is down (say, its program was just
                    // installed) is tried again now.
                    same.nudge();
                    next.push(same.clone());
                }
                None => {
                    changed += 1;
                    next.push(Server::start(s.clone(), self.sampler.clone()));
                }
            }
        }
        for o in &old {
            if !next.iter().any(|n| Arc::ptr_eq(n, o)) {
                o.stop();
                if !settings
                    .servers
                    .iter()
                    .any(|s| s.enabled && s.name == o.settings.name)
                {
                    changed += 1;
                }
            }
        }
        if let Ok(mut s) = self.servers.write() {
            *s = next;
        }
        if let Ok(mut c) = self.configured.write() {
            *c = settings.servers.clone();
        }
        changed
    }

    /// Stops every server (their processes are killed).
    pub fn shutdown(&self) {
        for s in self.live() {
            s.stop();
        }
        if let Ok(mut s) = self.servers.write() {
            s.clear();
        }
    }
}

impl Drop for McpPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Waits for every future (they are few: one per server).
async fn futures_join<F: std::future::Future<Output = ()>>(futures: impl Iterator<Item = F>) {
    for f in futures {
        f.await;
    }
}

/// Says once per tool name that an MCP tool was left out: its name (after `[^A-Za-z0-9_]`
/// became `_`) is a built-in's, or an earlier server's or tool's.
fn left_out(name: &str, server: &str) {
    static WARNED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let Ok(mut warned) = WARNED.lock() else {
        return;
    };
    if warned.len() >= 1000 || warned.iter().any(|w| w == name) {
        return;
    }
    warned.push(name.to_owned());
    tracing::warn!(
        tool = name,
        server,
        "an MCP tool is left out: another tool has its name (a built-in is never replaced; two names that differ only in characters outside [A-Za-z0-9_] clash)"
    );
}

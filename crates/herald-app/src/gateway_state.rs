//! `<home>/gateway.json`: the running gateway's pid and listen addresses, written while
//! it serves and removed when it stops; read by `herald gateway status|reload`, `herald
//! health` and the dashboard token's hint.

use herald_config::Home;
use serde::{Deserialize, Serialize};

/// What `gateway.json` holds.
#[derive(Debug, Serialize, Deserialize)]
pub struct GatewayState {
    pub pid: u32,
    pub started_at: String,
    /// `http://ADDR` for each webhook listener.
    pub webhook: Vec<String>,
    /// `http://ADDR` for each API listener.
    #[serde(default)]
    pub api: Vec<String>,
    /// The chat bots it serves, as of the last refresh.
    #[serde(default)]
    pub bots: Vec<BotState>,
}

/// One chat bot as an operator sees it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BotState {
    pub platform: String,
    /// `long polling` or `webhook at /path`.
    pub receiving: String,
    /// When its last poll (or webhook delivery) was answered, UTC.
    pub last_update_check: Option<String>,
    /// Updates stored since the start.
    pub received: u64,
    /// Why polls fail, while they do.
    pub failure: Option<String>,
}

/// Records this process as the home's gateway; the guard removes the file on drop.
pub fn record(home: &Home, webhook: Vec<String>, api: Vec<String>) -> std::io::Result<StateGuard> {
    let state = GatewayState {
        pid: std::process::id(),
        started_at: jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string(),
        webhook,
        api,
        bots: Vec::new(),
    };
    let path = home.gateway_state_file();
    write(&path, &state)?;
    Ok(StateGuard {
        path,
        state: std::sync::Mutex::new(state),
    })
}

fn write(path: &std::path::Path, state: &GatewayState) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(state).map_err(std::io::Error::other)?;
    herald_config::default_config::write_private_replace(path, text.as_bytes())
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display())))
}

/// Removes `gateway.json` when the gateway stops.
pub struct StateGuard {
    path: std::path::PathBuf,
    state: std::sync::Mutex<GatewayState>,
}

impl StateGuard {
    /// Writes the bots' state into `gateway.json` (a failure is logged once a while
    /// by the caller's cadence, never fatal).
    pub fn set_bots(&self, bots: Vec<BotState>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.bots = bots;
        if let Err(e) = write(&self.path, &state) {
            tracing::debug!(error = %e, "cannot refresh gateway.json");
        }
    }
}

impl Drop for StateGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The recorded gateway, when its process is still alive.
pub fn running_gateway(home: &Home) -> Option<GatewayState> {
    let text = std::fs::read(home.gateway_state_file()).ok()?;
    let state: GatewayState = serde_json::from_slice(&text).ok()?;
    (!herald_process::has_exited(state.pid)).then_some(state)
}

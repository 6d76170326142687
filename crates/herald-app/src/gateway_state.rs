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
    };
    let path = home.gateway_state_file();
    let text = serde_json::to_string_pretty(&state).map_err(std::io::Error::other)?;
    herald_config::default_config::write_private_replace(&path, text.as_bytes()).map_err(|e| {
        std::io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
    })?;
    Ok(StateGuard { path })
}

/// Removes `gateway.json` when the gateway stops.
pub struct StateGuard {
    path: std::path::PathBuf,
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

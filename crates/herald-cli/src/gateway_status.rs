//! `herald gateway status`: is a gateway running on this home, where it listens, and
//! how many inbox entries are in each state. A running gateway keeps
//! `<home>/gateway.json` (its pid and listen addresses) for as long as it serves.

use crate::stores::{self, Access};
use anyhow::Context;
use herald_config::Home;
use serde::{Deserialize, Serialize};
use std::process::ExitCode;

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

/// Exit status of `status` when no gateway runs (the `systemctl status` convention).
const NOT_RUNNING: u8 = 3;

/// Records this process as the home's gateway; the guard removes the file on drop.
pub fn record(home: &Home, webhook: Vec<String>, api: Vec<String>) -> anyhow::Result<StateGuard> {
    let state = GatewayState {
        pid: std::process::id(),
        started_at: jiff::Timestamp::now()
            .strftime("%Y-%m-%dT%H:%M:%SZ")
            .to_string(),
        webhook,
        api,
    };
    let path = home.gateway_state_file();
    let text = serde_json::to_string_pretty(&state)?;
    herald_config::default_config::write_private_replace(&path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
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
pub(crate) fn running_gateway(home: &Home) -> Option<GatewayState> {
    let text = std::fs::read(home.gateway_state_file()).ok()?;
    let state: GatewayState = serde_json::from_slice(&text).ok()?;
    is_alive(state.pid).then_some(state)
}

fn is_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    let sent = unsafe { libc::kill(pid, 0) };
    sent == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// `herald gateway reload`: sends the gateway on this home SIGHUP, on which it reads
/// `.env` again, rebuilds its delivery targets and reloads its Python plugins.
pub fn reload(home: &Home) -> anyhow::Result<ExitCode> {
    let Some(gateway) = running_gateway(home) else {
        outln!("No gateway runs on this home; .env, targets and plugins are read when it starts.");
        return Ok(ExitCode::SUCCESS);
    };
    let pid = i32::try_from(gateway.pid).context("a pid out of range")?;
    // SAFETY: sends SIGHUP to the process gateway.json names (alive a moment ago).
    let sent = unsafe { libc::kill(pid, libc::SIGHUP) };
    if sent != 0 {
        let e = std::io::Error::last_os_error();
        eprintln!("herald: cannot signal the gateway (pid {pid}): {e}");
        return Ok(ExitCode::FAILURE);
    }
    outln!(
        "Asked the gateway (pid {pid}) to reload .env, its delivery targets and its plugins; its log says what it loaded."
    );
    Ok(ExitCode::SUCCESS)
}

pub fn run(home: &Home) -> anyhow::Result<ExitCode> {
    outln!("Home: {}", home.root().display());
    let running = running_gateway(home);
    match &running {
        Some(state) => {
            outln!(
                "Gateway: running (pid {}, since {})",
                state.pid,
                state.started_at
            );
            for url in &state.webhook {
                outln!("  Webhook: {url}/webhooks/<route>");
            }
            for url in &state.api {
                outln!("  API: {url}/v1");
            }
        }
        None => outln!("Gateway: not running (start it with: herald gateway run)"),
    }
    print_inbox_counts(home)?;
    Ok(if running.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(NOT_RUNNING)
    })
}

fn print_inbox_counts(home: &Home) -> anyhow::Result<()> {
    let rt = stores::runtime()?;
    let Some(store) = stores::open(home, Access::Read, &rt)? else {
        outln!("Inbox: empty (no store yet)");
        return Ok(());
    };
    let counts = rt.block_on(store.counts())?;
    if counts.is_empty() {
        outln!("Inbox: empty");
        return Ok(());
    }
    let text: Vec<String> = counts.iter().map(|(s, n)| format!("{s} {n}")).collect();
    outln!("Inbox: {}", text.join(", "));
    Ok(())
}

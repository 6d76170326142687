//! What a reload changes without a restart (SIGHUP, which `herald gateway reload` and
//! `herald plugins reload` send; RPC `reload.env`):
//! - `.env` is read again and each runtime's endpoint chosen again, so a rotated key is
//!   used by the sessions opened from then on (open ones keep theirs, as in Hermes);
//!   `display.busy_input_mode` is read again with it;
//! - `mcp_servers`: changed servers are connected again, the others keep theirs
//!   (SIGHUP, RPC `reload.mcp`);
//! - the Python plugins: the configuration is read again, a new plugin host started for
//!   what it enables, every runtime switched to it at once, and the old host stopped
//!   once calls in flight have had 10 s to finish. The new host's failure reporting
//!   starts afresh.

use crate::runtime::{Runtime, start_python_plugins};
use herald_config::{Config, ConfigError, process_env};
use std::sync::Arc;
use std::time::Duration;

/// How long calls on the old host may go on after a reload.
const IN_FLIGHT_GRACE: Duration = Duration::from_secs(10);

/// Reads `.env` of `runtimes`' home again (its values win from now on) and chooses
/// each runtime's endpoint again. How many variables it changed or added. Blocking
/// file reads: call it off the async workers.
pub fn reload_env(runtimes: &[Arc<Runtime>]) -> Result<usize, ConfigError> {
    let Some(first) = runtimes.first() else {
        return Ok(0);
    };
    let changed = herald_config::reload_dotenv(&first.home)?;
    let busy = herald_config::default_config::busy_input_mode(&first.home.config_file());
    for rt in runtimes {
        rt.set_busy_input_mode(busy);
        if let Err(e) = rt.reselect_endpoint() {
            tracing::warn!(
                platform = rt.platform.name(),
                "the model's endpoint is kept: {e}"
            );
        }
    }
    Ok(changed)
}

/// Reads config.yaml's `mcp_servers` again: changed, added and removed servers are
/// started and stopped; unchanged ones keep their connection. How many changed.
/// Blocking file reads: call it off the async workers.
pub fn reload_mcp(runtimes: &[Arc<Runtime>]) -> Result<usize, ConfigError> {
    let Some(first) = runtimes.first() else {
        return Ok(0);
    };
    // As Hermes reads it for each reload: a rotated MCP_<NAME>_API_KEY takes effect.
    herald_config::reload_dotenv(&first.home)?;
    let config = Config::load(&first.home, &process_env)?;
    let pool = match first.mcp() {
        Some(pool) => pool,
        // Only hosts started by the builder have a pool; others run no MCP server.
        None => return Ok(0),
    };
    let changed = pool.reload(&config.mcp);
    for rt in runtimes {
        rt.use_mcp(Some(pool.clone()));
    }
    Ok(changed)
}

/// Reloads the Python plugins of `runtimes` (which share one home).
pub async fn reload_python_plugins(runtimes: &[Arc<Runtime>]) {
    let Some(first) = runtimes.first() else {
        return;
    };
    let config = match Config::load(&first.home, &process_env) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("plugins not reloaded: configuration error:\n{e}");
            return;
        }
    };
    let old = first.python_plugins();
    let new = start_python_plugins(&first.home, &config.agent).await;
    for rt in runtimes {
        rt.use_python_plugins(new.clone());
    }
    let loaded = new.as_ref().map_or(0, |p| p.loaded().len());
    tracing::info!(plugins = loaded, "Python plugins reloaded");
    if let Some(old) = old {
        tokio::spawn(async move {
            tokio::time::sleep(IN_FLIGHT_GRACE).await;
            old.stop().await;
        });
    }
}

/// Reloads `.env` and the Python plugins of `runtimes` on every SIGHUP, for as long
/// as the process runs.
pub fn reload_on_sighup(runtimes: Vec<Arc<Runtime>>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        // Listening starts now, before anything is served: a SIGHUP never ends the process.
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: .env and plugins reload only on restart");
            return;
        };
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                let env_of = runtimes.clone();
                match tokio::task::spawn_blocking(move || reload_env(&env_of)).await {
                    Ok(Ok(changed)) => tracing::info!(changed, ".env reloaded"),
                    Ok(Err(e)) => tracing::warn!(".env not reloaded: {e}"),
                    Err(e) => tracing::warn!(error = %e, ".env not reloaded"),
                }
                reload_python_plugins(&runtimes).await;
                let mcp_of = runtimes.clone();
                match tokio::task::spawn_blocking(move || reload_mcp(&mcp_of)).await {
                    Ok(Ok(changed)) => tracing::info!(changed, "MCP servers reloaded"),
                    Ok(Err(e)) => tracing::warn!("MCP servers not reloaded: {e}"),
                    Err(e) => tracing::warn!(error = %e, "MCP servers not reloaded"),
                }
            }
        });
    }
}

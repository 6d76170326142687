//! Reloading Python plugins without a restart (`herald plugins reload`, SIGHUP): the
//! configuration is read again, a new plugin host started for what it enables, every
//! runtime switched to it at once, and the old host stopped once calls in flight have
//! had 10 s to finish. The new host's failure reporting starts afresh.

use crate::runtime::{Runtime, start_python_plugins};
use herald_config::{Config, process_env};
use std::sync::Arc;
use std::time::Duration;

/// How long calls on the old host may go on after a reload.
const IN_FLIGHT_GRACE: Duration = Duration::from_secs(10);

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

/// Reloads the Python plugins of `runtimes` on every SIGHUP, for as long as the
/// process runs.
pub fn reload_on_sighup(runtimes: Vec<Arc<Runtime>>) {
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: plugins reload only on restart");
            return;
        };
        while hangups.recv().await.is_some() {
            reload_python_plugins(&runtimes).await;
        }
    });
}

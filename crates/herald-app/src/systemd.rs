//! systemd's notify protocol for `Type=notify` units: `READY=1` once the gateway
//! serves, `WATCHDOG=1` while it can still read its inbox (`WatchdogSec=`), and
//! `STOPPING=1` when it drains. Outside systemd (no `NOTIFY_SOCKET`) it does nothing.

use herald_gateway::Gateway;
use sd_notify::NotifyState;
use std::sync::Arc;
use std::time::Duration;

/// Says the gateway serves, and starts the watchdog pings when the unit asks for them.
pub fn ready(gateway: Option<Arc<Gateway>>) {
    send(&[NotifyState::Ready, NotifyState::Status("serving")]);
    let Some(interval) = sd_notify::watchdog_enabled() else {
        return;
    };
    tokio::spawn(async move {
        // Twice per period, as sd_watchdog_enabled(3) advises.
        let mut tick = tokio::time::interval(interval / 2);
        loop {
            tick.tick().await;
            if alive(gateway.as_deref(), interval / 2).await {
                send(&[NotifyState::Watchdog]);
            }
        }
    });
}

/// Whether the gateway still works: the runtime runs this task, and the inbox (when
/// it has one) answers within `within`.
async fn alive(gateway: Option<&Gateway>, within: Duration) -> bool {
    match gateway {
        None => true,
        Some(gw) => matches!(
            tokio::time::timeout(within, gw.inbox_figures()).await,
            Ok(Ok(_))
        ),
    }
}

/// Says the gateway drains and stops.
pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("draining")]);
}

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::debug!(error = %e, "systemd notify failed");
    }
}

//! `herald gateway status`: is a gateway running on this home, where it listens, and
//! how many inbox entries are in each state. A running gateway keeps
//! `<home>/gateway.json` (its pid and listen addresses) for as long as it serves.

use crate::stores::{self, Access};
use anyhow::Context;
use herald_app::gateway_state::running_gateway;
use herald_config::Home;
use std::process::ExitCode;

/// Exit status of `status` when no gateway runs (the `systemctl status` convention).
const NOT_RUNNING: u8 = 3;

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
            for bot in &state.bots {
                let last = bot.last_update_check.as_deref().unwrap_or("not yet");
                outln!(
                    "  Bot: {} ({}), last checked for updates {last}, {} updates stored{}",
                    bot.platform,
                    bot.receiving,
                    bot.received,
                    bot.failure
                        .as_deref()
                        .map(|f| format!("; failing: {f}"))
                        .unwrap_or_default()
                );
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

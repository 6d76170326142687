//! `herald health`: whether the gateway on this home answers its health check, for a
//! container's `HEALTHCHECK` (distroless images have no curl) and for scripts. It asks
//! the webhook listener's `/health/detailed` (which reads the inbox), else the API's
//! `/health`, at the addresses the running gateway recorded, or at `--url`.

use anyhow::Context;
use herald_app::gateway_state::running_gateway;
use herald_config::Home;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct HealthArgs {
    /// Check this URL instead of the recorded gateway's (e.g.
    /// http://127.0.0.1:8644/health/detailed).
    #[arg(long, allow_hyphen_values = true)]
    pub url: Option<String>,
    /// Seconds to wait for the answer.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub timeout: u64,
}

/// Exit 0 when healthy, 1 when the check fails, 3 when no gateway runs on this home.
pub fn run(home: &Home, args: HealthArgs) -> anyhow::Result<ExitCode> {
    let url = match args.url {
        Some(u) => u,
        None => match recorded_url(home) {
            Some(u) => u,
            None => {
                eprintln!(
                    "herald: no gateway runs on this home ({})",
                    home.root().display()
                );
                return Ok(ExitCode::from(3));
            }
        },
    };
    let runtime = herald_app::command_runtime().context("cannot start the async runtime")?;
    let answer = runtime.block_on(check(&url, Duration::from_secs(args.timeout)));
    match answer {
        Ok(()) => {
            outln!("ok: {url}");
            Ok(ExitCode::SUCCESS)
        }
        Err(why) => {
            eprintln!("herald: unhealthy: {url}: {why}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The first webhook listener's `/health/detailed`, else the first API listener's
/// `/health`.
fn recorded_url(home: &Home) -> Option<String> {
    let state = running_gateway(home)?;
    if let Some(w) = state.webhook.first() {
        return Some(format!("{w}/health/detailed"));
    }
    state.api.first().map(|a| format!("{a}/health"))
}

async fn check(url: &str, timeout: Duration) -> Result<(), String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .map_err(|e| e.to_string())?;
    let mut response = client.get(url).send().await.map_err(|e| e.to_string())?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    // The first bytes of the answer, without the terminal's control characters.
    let mut body = Vec::new();
    while body.len() < 1024 {
        match response.chunk().await {
            Ok(Some(c)) => body.extend_from_slice(&c),
            _ => break,
        }
    }
    let text: String = String::from_utf8_lossy(&body)
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect();
    Err(format!("{status}: {}", text.trim()))
}

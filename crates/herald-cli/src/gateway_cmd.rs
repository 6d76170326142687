//! `herald gateway run`: load config (writing the default on a first start), then serve
//! it (herald-app's server) until SIGINT/SIGTERM, saying where it listens.

use anyhow::Context;
use herald_app::server::{self, Notice, ServeError};
use herald_config::default_config::write_default_config;
use herald_config::{Config, Home, load_dotenv, process_env};
use std::process::ExitCode;

pub fn run(home: &Home) -> anyhow::Result<ExitCode> {
    if !home.root().exists() && offer_hermes_import(home) {
        return Ok(ExitCode::FAILURE);
    }
    home.create()
        .with_context(|| format!("cannot create home {}", home.root().display()))?;
    home.create_scripts_dir()
        .with_context(|| format!("cannot create {}", home.scripts_dir().display()))?;
    load_dotenv(home)?;
    herald_session::bundled_skills::install_quietly(home);
    let first_start = !home.config_file().exists();
    if first_start {
        write_default_config(home)?;
    }
    let config = match Config::load(home, &process_env) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("herald: configuration error:\n{e}");
            eprintln!("herald: not serving; fix the configuration and start again");
            return Ok(ExitCode::FAILURE);
        }
    };
    if first_start {
        print_first_start(&config)?;
    }
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    if let Some(telegram) = &config.telegram {
        eprintln!("herald: {}", herald_chat::telegram::serving_note(telegram));
    }
    if let Some(slack) = &config.slack {
        eprintln!("herald: {}", herald_chat::slack::serving_note(slack));
    }
    if config.discord.is_some() {
        eprintln!("herald: {}", herald_chat::discord::SERVING_NOTE);
    }
    if !config.hermes_only.is_empty() {
        tracing::info!(
            "Hermes settings herald does not implement (ignored): {}",
            config.hermes_only.join(", ")
        );
    }
    if !config.start_refusals.is_empty() {
        for refusal in &config.start_refusals {
            eprintln!("herald: {refusal}");
        }
        eprintln!("herald: not serving; fix the configuration and start again");
        return Ok(ExitCode::FAILURE);
    }
    let runtime = herald_app::runtime().context("cannot start the async runtime")?;
    let home = config.home.clone();
    let served = runtime.block_on(server::serve(
        config,
        &say,
        herald_app::signals::shutdown_signal(),
    ));
    match served {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(ServeError::Refused(e)) => {
            eprintln!("herald: {e}");
            Ok(ExitCode::FAILURE)
        }
        Err(ServeError::WebhookBind {
            error,
            port,
            from_env,
        }) => {
            eprintln!("herald: {error}");
            explain_busy_port(&home, port, from_env);
            Ok(ExitCode::FAILURE)
        }
        Err(e) => Err(e.into()),
    }
}

/// What the server tells the operator, on stdout (findings on stderr).
fn say(notice: Notice<'_>) {
    match notice {
        Notice::WebhookListening { url, routes } => {
            outln!("herald: webhook listening on {url} (routes: {routes})");
        }
        Notice::ApiListening { url } => {
            outln!("herald: OpenAI-compatible API listening on {url}/v1")
        }
        Notice::BotServing { platform, how } => {
            outln!("herald: {platform} bot answering ({how})")
        }
        Notice::Findings(findings) => print_findings(findings),
    }
}

/// Where the webhook port that could not be bound came from, and the herald gateway
/// already serving this home when `gateway.json` names a live one.
fn explain_busy_port(home: &Home, port: u16, from_env: bool) {
    if from_env {
        eprintln!(
            "herald: port {port} comes from WEBHOOK_PORT ({}, or the environment; with WEBHOOK_ENABLED=true it wins over platforms.webhook.extra.port)",
            home.env_file().display()
        );
    } else {
        eprintln!(
            "herald: port {port} comes from platforms.webhook.extra.port in {} (8644 when it is not set)",
            home.config_file().display()
        );
    }
    if let Some(running) = herald_app::gateway_state::running_gateway(home) {
        let urls: Vec<&str> = running
            .webhook
            .iter()
            .chain(&running.api)
            .map(String::as_str)
            .collect();
        eprintln!(
            "herald: a herald gateway already runs on this home: pid {}, since {}, listening on {} (`herald gateway status`)",
            running.pid,
            running.started_at,
            urls.join(", ")
        );
    }
}

/// The start's last words: each mistake herald serves through, impossible to miss.
fn print_findings(findings: &[String]) {
    if findings.is_empty() {
        return;
    }
    eprintln!(
        "herald: {} configuration finding(s); herald serves anyway (`herald config check` lists them):",
        findings.len()
    );
    for finding in findings {
        eprintln!("herald:   - {finding}");
    }
}

/// A Hermes user's first start: a default config written now would be kept by the later
/// `herald setup --from-hermes` (it never overwrites), so the Hermes model, routes and API
/// server would never come across. Nothing is written and nothing served: say what to run.
/// True when a Hermes home was found (the start ends there).
fn offer_hermes_import(home: &Home) -> bool {
    let hermes = crate::hermes_import::default_hermes_home();
    if !hermes.join("config.yaml").is_file() {
        return false;
    }
    outln!(
        "herald: found a Hermes home at {} (not read: herald uses {}, which does not exist yet).",
        hermes.display(),
        home.root().display()
    );
    outln!("herald: nothing was written and nothing is served. Either:");
    outln!(
        "herald:   herald setup --from-hermes    bring its config, .env, subscriptions, scripts, skills and plugins over, then `herald gateway run`"
    );
    outln!(
        "herald:   herald gateway setup          start without it (asks the port, secret, target and model), then `herald gateway run`"
    );
    true
}

fn print_first_start(config: &Config) -> anyhow::Result<()> {
    outln!(
        "herald: first start: wrote a default configuration to {}",
        config.home.config_file().display()
    );
    outln!(
        "herald: it enables the webhook listener on 127.0.0.1:{} with a generated secret and one example route.",
        config.webhook.port
    );
    let mut text = Vec::new();
    crate::setup_cmd::print_try_it(&mut text, config, true)?;
    out!("{}", String::from_utf8_lossy(&text));
    Ok(())
}

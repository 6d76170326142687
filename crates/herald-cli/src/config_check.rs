//! `herald config check`: every configuration finding, for CI and the cautious. Exit 1
//! when there is any finding or warning (syntax and value errors too), else 0.

use herald_config::{Config, Home, load_dotenv, process_env};
use herald_deliver::{TargetSet, TargetSettings};
use std::process::ExitCode;

pub fn run(home: &Home) -> anyhow::Result<ExitCode> {
    load_dotenv(home)?;
    if !home.config_file().exists() {
        outln!(
            "No configuration at {}: `herald gateway run` writes one on its first start.",
            home.config_file().display()
        );
        return Ok(ExitCode::FAILURE);
    }
    let config = match Config::load(home, &process_env) {
        Ok(c) => c,
        Err(e) => {
            outln!("herald would not start: configuration error:\n{e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let targets = TargetSet::build(&TargetSettings {
        platforms: &config.platforms,
        env: &process_env,
    });
    let mut findings: Vec<String> = start_refusals(home, &config);
    findings.extend(herald_gateway::findings::gather(&config, &targets));
    findings.extend(store_finding(&config)?);
    findings.extend(discord_finding(&config)?);
    findings.extend(ports_taken(home, &config)?);
    for warning in &config.warnings {
        outln!("warning: {warning}");
    }
    for finding in &findings {
        outln!("finding: {finding}");
    }
    if let Some(telegram) = &config.telegram {
        outln!("note: {}", herald_chat::telegram::serving_note(telegram));
    }
    if let Some(slack) = &config.slack {
        outln!("note: {}", herald_chat::slack::serving_note(slack));
    }
    if let Some(note) = herald_gateway::findings::webhook_mcp_note(&config) {
        outln!("note: {note}");
    }
    if config.discord.is_some() {
        outln!("note: {}", herald_chat::discord::SERVING_NOTE);
    }
    if !config.hermes_only.is_empty() {
        outln!(
            "note: Hermes settings herald does not implement (ignored): {}",
            config.hermes_only.join(", ")
        );
    }
    if findings.is_empty() && config.warnings.is_empty() {
        outln!("{}: no findings.", home.config_file().display());
        return Ok(ExitCode::SUCCESS);
    }
    Ok(ExitCode::FAILURE)
}

/// A PostgreSQL store that cannot be used as configured (a bad URL, wrong
/// credentials, a missing database, nobody listening), tried with one connection.
fn store_finding(config: &Config) -> anyhow::Result<Option<String>> {
    let herald_config::StoreBackend::Postgres(pg) = &config.store.backend else {
        return Ok(None);
    };
    let checked = crate::stores::runtime()?.block_on(herald_scale::check(pg));
    Ok(checked.err().map(|e| format!("store.url: {e}")))
}

/// An Interactions Endpoint URL on the Discord application that herald does not serve
/// (asked of Discord with the bot's token).
fn discord_finding(config: &Config) -> anyhow::Result<Option<String>> {
    let Some(discord) = &config.discord else {
        return Ok(None);
    };
    let routes = herald_chat::discord::discord_routes(config);
    Ok(
        crate::stores::runtime()?
            .block_on(herald_chat::discord::endpoint_finding(discord, &routes)),
    )
}

/// What `herald gateway run` would refuse to start on, each with its file, line and key:
/// the configuration's own refusals, then the API server's model (the API does not start
/// without one; the webhook's agent runs only wait).
fn start_refusals(home: &Home, config: &Config) -> Vec<String> {
    let mut refusals: Vec<String> = config
        .start_refusals
        .iter()
        .map(|p| format!("herald gateway run would not start: {p}"))
        .collect();
    if config.api_server.enabled && refusals.is_empty() {
        let runtime = herald_session::runtime::Runtime::build(
            home,
            config,
            herald_session::Platform::Api,
            herald_session::runtime::ModelChoice::default(),
        );
        if let Err(e) = runtime {
            refusals.push(format!(
                "herald gateway run would not start: {}: `model`: the API server needs a model: {e}",
                home.config_file().display()
            ));
        }
    }
    refusals
}

/// The gateway's ports that another program holds now, unless this home's gateway is
/// the one serving: a Hermes gateway still running serves the same settings' ports.
fn ports_taken(home: &Home, config: &Config) -> anyhow::Result<Vec<String>> {
    if herald_app::gateway_state::running_gateway(home).is_some() {
        return Ok(Vec::new());
    }
    let mut wanted = Vec::new();
    if config.webhook.enabled {
        let setting = "platforms.webhook.extra.port";
        wanted.push((config.webhook.host.as_deref(), config.webhook.port, setting));
    }
    if config.api_server.enabled {
        let setting = "platforms.api_server.extra.port";
        wanted.push((
            Some(config.api_server.host.as_str()),
            config.api_server.port,
            setting,
        ));
    }
    let rt = crate::stores::runtime()?;
    Ok(wanted
        .into_iter()
        .filter(|(_, port, _)| *port != 0)
        .filter_map(|(host, port, setting)| {
            match rt.block_on(herald_http::bind(host, port, setting)) {
                Err(herald_http::BindError::Bind { source, .. })
                    if source.kind() == std::io::ErrorKind::AddrInUse =>
                {
                    Some(format!(
                        "port {port} (`{setting}`) is taken by another program, so `herald gateway run` would not start: a Hermes gateway still running serves the same settings' ports; stop it (`hermes gateway stop`) or change the port"
                    ))
                }
                _ => None,
            }
        })
        .collect())
}

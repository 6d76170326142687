//! `herald plugins list | enable NAME | disable NAME | reload`: the verbs and the
//! `plugins.enabled` / `plugins.disabled` keys Hermes uses. Enabling is the trust
//! decision: a plugin runs with herald's privileges.

use anyhow::Context;
use clap::Subcommand;
use herald_config::{Config, Home, process_env};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum PluginsCommand {
    /// List the plugins under <home>/plugins/ and those installed Python packages
    /// declare (entry points `hermes_agent.plugins`), and whether each is enabled.
    List {
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Enable a plugin (add it to plugins.enabled, drop it from plugins.disabled).
    Enable {
        /// The plugin's folder name or manifest name, or an installed package's entry
        /// point name.
        #[arg(allow_hyphen_values = true)]
        name: String,
    },
    /// Disable a plugin (drop it from plugins.enabled, add it to plugins.disabled).
    Disable {
        /// The plugin's folder name or manifest name.
        #[arg(allow_hyphen_values = true)]
        name: String,
    },
    /// Make a running gateway load its plugins again (the same SIGHUP as `herald gateway
    /// reload`; `herald rpc` and `herald acp` reload on SIGHUP too).
    Reload,
}

pub fn run(home: &Home, command: PluginsCommand) -> anyhow::Result<ExitCode> {
    let config = Config::load(home, &process_env)
        .map_err(|e| anyhow::anyhow!("configuration error:\n{e}"))?;
    let (plugins, unlisted) =
        herald_app::command_runtime()?.block_on(herald_plugins::inventory(home, &config.agent));
    if let Some(why) = unlisted {
        eprintln!("herald: installed packages' plugins are not shown: {why}");
    }
    match command {
        PluginsCommand::List { json } => list(home, &plugins, json),
        PluginsCommand::Enable { name } => switch(home, &plugins, &name, true),
        PluginsCommand::Disable { name } => switch(home, &plugins, &name, false),
        PluginsCommand::Reload => crate::gateway_status::reload(home),
    }
}

fn list(home: &Home, plugins: &[herald_plugins::Plugin], json: bool) -> anyhow::Result<ExitCode> {
    if json {
        let rows: Vec<serde_json::Value> = plugins
            .iter()
            .map(|p| {
                serde_json::json!({
                    "name": p.name, "key": p.key, "status": p.status(),
                    "version": p.manifest.version, "description": p.manifest.description,
                    "path": p.path, "problem": p.problem,
                })
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    if plugins.is_empty() {
        outln!(
            "No plugins in {} and none from installed packages. A plugin is a folder there with plugin.yaml and __init__.py, or a package's `hermes_agent.plugins` entry point.",
            herald_plugins::plugins_dir(home).display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:<28} {:<10} {:<26} DESCRIPTION",
        "NAME",
        "VERSION",
        "STATUS"
    );
    for p in plugins {
        let version = p.manifest.version.as_deref().unwrap_or("-");
        let about = p
            .problem
            .clone()
            .or_else(|| p.manifest.description.clone())
            .unwrap_or_default();
        outln!("{:<28} {:<10} {:<26} {about}", p.name, version, p.status());
    }
    Ok(ExitCode::SUCCESS)
}

fn switch(
    home: &Home,
    plugins: &[herald_plugins::Plugin],
    name: &str,
    on: bool,
) -> anyhow::Result<ExitCode> {
    let (key, changed) = match herald_plugins::switch(home, plugins, name, on) {
        Ok(switched) => switched,
        Err(e @ herald_plugins::SwitchError::NotInstalled { .. }) => {
            eprintln!("herald: {e}");
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => {
            return Err(anyhow::Error::new(e))
                .with_context(|| format!("cannot update {}", home.config_file().display()));
        }
    };
    let state = if on { "enabled" } else { "disabled" };
    match changed {
        false => outln!("Plugin {key} is already {state}."),
        true => outln!(
            "Plugin {} {state}. It takes effect when herald next starts, or now with \
             `herald plugins reload` for a running gateway.",
            key
        ),
    }
    Ok(ExitCode::SUCCESS)
}

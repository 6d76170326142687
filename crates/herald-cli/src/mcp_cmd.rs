//! `herald mcp list | test NAME | add NAME | remove NAME`: the MCP servers of
//! config.yaml's `mcp_servers`, with the verbs and flags of Hermes's `hermes mcp`.
//! `add` and `remove` edit the same keys Hermes edits.

use anyhow::Context;
use clap::{Args, Subcommand};
use herald_config::{Config, Home, McpServerSettings, McpTransport, process_env};
use herald_session::mcp::server::{ListedTool, probe};
use serde_json::{Map, Value, json};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// Every configured server: how it is reached, which tools, whether it is enabled,
    /// and (connecting to each enabled one) its status, tool count and last error.
    List {
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Connect to a server and list its tools.
    Test {
        #[arg(allow_hyphen_values = true)]
        name: String,
    },
    /// Add a server to config.yaml (a local command, or a URL), then test it.
    Add(AddArgs),
    /// Remove a server from config.yaml.
    #[command(alias = "rm")]
    Remove {
        #[arg(allow_hyphen_values = true)]
        name: String,
    },
}

#[derive(Args, Debug)]
pub struct AddArgs {
    /// The server's name (its tools are named mcp__<name>__<tool>).
    #[arg(allow_hyphen_values = true)]
    name: String,
    /// A Streamable HTTP server's URL.
    #[arg(long, conflicts_with = "command")]
    url: Option<String>,
    /// A local server's program (stdio).
    #[arg(long)]
    command: Option<String>,
    /// `header`: read a token from standard input, keep it in .env as
    /// MCP_<NAME>_API_KEY and send it as `Authorization: Bearer` (URL servers).
    #[arg(long, value_parser = ["header"])]
    auth: Option<String>,
    /// A known server: `codex` (codex mcp-server).
    #[arg(long, value_parser = ["codex"])]
    preset: Option<String>,
    /// Seconds to wait for the server to start and answer (default 60 when running).
    #[arg(long)]
    connect_timeout: Option<f64>,
    /// An environment variable for a local server (repeatable).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// The program's arguments (must come last: everything after it is taken).
    #[arg(long, num_args = 0.., allow_hyphen_values = true)]
    args: Vec<String>,
}

pub fn run(home: &Home, command: McpCommand) -> anyhow::Result<ExitCode> {
    let config = Config::load(home, &process_env)
        .map_err(|e| anyhow::anyhow!("configuration error:\n{e}"))?;
    let runtime = herald_app::runtime().context("cannot start the async runtime")?;
    runtime.block_on(async {
        match command {
            McpCommand::List { json } => list(&config, json).await,
            McpCommand::Test { name } => test(&config, &name).await,
            McpCommand::Add(args) => add(home, &config, args).await,
            McpCommand::Remove { name } => remove(home, &name),
        }
    })
}

fn named<'a>(config: &'a Config, name: &str) -> anyhow::Result<&'a McpServerSettings> {
    config
        .mcp
        .servers
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = config.mcp.servers.iter().map(|s| s.name.as_str()).collect();
            match names.is_empty() {
                true => anyhow::anyhow!("no MCP server is configured (`herald mcp add NAME ...`)"),
                false => anyhow::anyhow!(
                    "no MCP server named `{name}`; configured: {}",
                    names.join(", ")
                ),
            }
        })
}

fn transport_text(s: &McpServerSettings) -> String {
    match &s.transport {
        McpTransport::Http { url, .. } | McpTransport::Sse { url, .. } => url.clone(),
        McpTransport::Stdio { command, args, .. } => {
            let mut parts = vec![command.clone()];
            parts.extend(args.iter().take(2).cloned());
            parts.join(" ")
        }
    }
}

fn tools_text(s: &McpServerSettings) -> String {
    match (&s.include, s.exclude.is_empty()) {
        (Some(i), _) => format!("{} selected", i.len()),
        (None, false) => format!("-{} excluded", s.exclude.len()),
        (None, true) => "all".to_owned(),
    }
}

fn cut(text: &str, max: usize) -> String {
    match text.chars().count() > max {
        true => format!("{}...", text.chars().take(max - 3).collect::<String>()),
        false => text.to_owned(),
    }
}

async fn list(config: &Config, json_out: bool) -> anyhow::Result<ExitCode> {
    let servers = &config.mcp.servers;
    if servers.is_empty() && !json_out {
        outln!("No MCP servers configured.");
        outln!("Add one: herald mcp add NAME --command PROGRAM --args ... | --url URL");
        return Ok(ExitCode::SUCCESS);
    }
    // Every enabled server at once, each within its connect_timeout.
    let mut probes = tokio::task::JoinSet::new();
    for (i, s) in servers.iter().enumerate().filter(|(_, s)| s.enabled) {
        let s = s.clone();
        probes.spawn(async move { (i, probe(&s).await) });
    }
    let mut results: Vec<Option<Result<Vec<ListedTool>, String>>> = vec![None; servers.len()];
    while let Some(done) = probes.join_next().await {
        if let Ok((i, r)) = done {
            results[i] = Some(r);
        }
    }
    if json_out {
        let rows: Vec<Value> = servers
            .iter()
            .zip(&results)
            .map(|(s, r)| {
                let (status, tools, error) = match r {
                    None => ("disabled", Value::Null, Value::Null),
                    Some(Ok(t)) => ("connected", json!(t.len()), Value::Null),
                    Some(Err(e)) => ("failed", Value::Null, json!(e)),
                };
                json!({"name": s.name, "transport": transport_text(s), "tools": tools_text(s),
                       "enabled": s.enabled, "status": status, "tool_count": tools, "error": error})
            })
            .collect();
        outln!("{}", serde_json::to_string_pretty(&rows)?);
        return Ok(ExitCode::SUCCESS);
    }
    outln!("  MCP Servers:");
    outln!(
        "  {:<16} {:<30} {:<12} {:<12} {}",
        "Name",
        "Transport",
        "Tools",
        "Status",
        "Last error"
    );
    outln!("  {}", "─".repeat(86));
    for (s, r) in servers.iter().zip(&results) {
        let (status, error) = match r {
            None => ("✗ disabled".to_owned(), String::new()),
            Some(Ok(t)) => (format!("✓ {} tools", t.len()), String::new()),
            Some(Err(e)) => ("✗ failed".to_owned(), e.clone()),
        };
        outln!(
            "  {:<16} {:<30} {:<12} {:<12} {}",
            s.name,
            cut(&transport_text(s), 28),
            tools_text(s),
            status,
            cut(&error, 60)
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn test(config: &Config, name: &str) -> anyhow::Result<ExitCode> {
    let s = named(config, name)?;
    outln!("Testing '{name}'...");
    Ok(match report_probe(s).await {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    })
}

/// Connects, prints what came of it; whether it connected.
async fn report_probe(s: &McpServerSettings) -> bool {
    match &s.transport {
        McpTransport::Http { url, .. } => outln!("  Transport: HTTP → {url}"),
        McpTransport::Sse { url, .. } => outln!("  Transport: SSE → {url}"),
        McpTransport::Stdio { command, .. } => outln!("  Transport: stdio → {command}"),
    }
    let started = Instant::now();
    match probe(s).await {
        Ok(tools) => {
            outln!("  ✓ Connected ({} ms)", started.elapsed().as_millis());
            outln!("  ✓ Tools discovered: {}", tools.len());
            print_tools(&tools);
            true
        }
        Err(e) => {
            outln!(
                "  ✗ Connection failed ({} ms): {e}",
                started.elapsed().as_millis()
            );
            false
        }
    }
}

fn print_tools(tools: &[ListedTool]) {
    for t in tools {
        outln!("    {:<24} {}", t.name, cut(&t.description, 55));
    }
}

/// The `mcp_servers.<name>` entry `add` writes, as Hermes writes it.
fn entry_of(home: &Home, args: &AddArgs) -> anyhow::Result<Map<String, Value>> {
    let mut entry = Map::new();
    let (command, mut cmd_args) = match args.preset.as_deref() {
        Some("codex") => (Some("codex".to_owned()), vec!["mcp-server".to_owned()]),
        _ => (args.command.clone(), Vec::new()),
    };
    cmd_args.extend(args.args.iter().cloned());
    match (&args.url, command) {
        (Some(url), _) => {
            anyhow::ensure!(
                args.env.is_empty(),
                "--env is for local servers (--command)"
            );
            entry.insert("url".into(), json!(url));
        }
        (None, Some(command)) => {
            entry.insert("command".into(), json!(command));
            entry.insert("args".into(), json!(cmd_args));
        }
        (None, None) => anyhow::bail!("give --command PROGRAM (a local server) or --url URL"),
    }
    if let Some(t) = args.connect_timeout {
        anyhow::ensure!(
            t.is_finite() && t > 0.0,
            "--connect-timeout needs a positive number of seconds"
        );
        entry.insert("connect_timeout".into(), json!(t));
    }
    if !args.env.is_empty() {
        let mut env = Map::new();
        for pair in &args.env {
            let (k, v) = pair
                .split_once('=')
                .filter(|(k, _)| herald_config::env_file::writable(k))
                .ok_or_else(|| {
                    anyhow::anyhow!("--env {pair:?}: use KEY=VALUE with a variable name")
                })?;
            env.insert(k.to_owned(), json!(v));
        }
        entry.insert("env".into(), Value::Object(env));
    }
    if args.auth.as_deref() == Some("header") {
        anyhow::ensure!(args.url.is_some(), "--auth header is for URL servers");
        let var = key_var(&args.name);
        let token = read_token()?;
        herald_config::env_file::set_value(&home.env_file(), &var, &token)
            .with_context(|| format!("cannot write {}", home.env_file().display()))?;
        entry.insert(
            "headers".into(),
            json!({"Authorization": format!("Bearer ${{{var}}}")}),
        );
    }
    Ok(entry)
}

/// `MCP_<NAME>_API_KEY`, as Hermes names the variable.
fn key_var(name: &str) -> String {
    let upper: String = name
        .chars()
        .map(|c| match c.is_ascii_alphanumeric() {
            true => c.to_ascii_uppercase(),
            false => '_',
        })
        .collect();
    format!("MCP_{}_API_KEY", upper.trim_matches('_'))
}

fn read_token() -> anyhow::Result<String> {
    if std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        eprint!("Token for the Authorization header: ");
    }
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    let token = line.trim();
    let token = token.strip_prefix("Bearer ").unwrap_or(token).trim();
    anyhow::ensure!(!token.is_empty(), "no token was given on standard input");
    Ok(token.to_owned())
}

async fn add(home: &Home, config: &Config, args: AddArgs) -> anyhow::Result<ExitCode> {
    let name = args.name.trim().to_owned();
    anyhow::ensure!(!name.is_empty(), "the server needs a name");
    if config.mcp.servers.iter().any(|s| s.name == name) {
        eprintln!(
            "herald: an MCP server named `{name}` is configured already; `herald mcp remove {name}` first"
        );
        return Ok(ExitCode::FAILURE);
    }
    let mut entry = entry_of(home, &args)?;
    // Saved disabled until it connected, so a running gateway never starts it untested.
    entry.insert("enabled".into(), json!(false));
    // Test it as it will be read: write, read back, probe.
    let path = home.config_file();
    let write = |entry: &Map<String, Value>| {
        herald_config::default_config::set_mcp_server(&path, &name, Value::Object(entry.clone()))
            .with_context(|| format!("cannot update {}", path.display()))
    };
    write(&entry)?;
    let reread = Config::load(home, &process_env)
        .map_err(|e| anyhow::anyhow!("configuration error:\n{e}"))?;
    let Ok(settings) = named(&reread, &name) else {
        herald_config::default_config::remove_mcp_server(&path, &name)?;
        anyhow::bail!(
            "the server could not be read back (see the warning above); nothing was saved"
        );
    };
    outln!("Testing '{name}'...");
    let connected = report_probe(settings).await;
    entry.insert("enabled".into(), json!(connected));
    write(&entry)?;
    match connected {
        true => outln!(
            "✓ Saved '{name}' to {}. Start a new session to use its tools.",
            path.display()
        ),
        false => outln!(
            "Saved '{name}' to {} with enabled: false; fix it, `herald mcp test {name}`, then set enabled: true.",
            path.display()
        ),
    }
    Ok(ExitCode::SUCCESS)
}

fn remove(home: &Home, name: &str) -> anyhow::Result<ExitCode> {
    let path = home.config_file();
    match herald_config::default_config::remove_mcp_server(&path, name)
        .with_context(|| format!("cannot update {}", path.display()))?
    {
        true => {
            outln!("Removed MCP server '{name}' from {}.", path.display());
            Ok(ExitCode::SUCCESS)
        }
        false => {
            eprintln!("herald: no MCP server named `{name}` in {}", path.display());
            Ok(ExitCode::FAILURE)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_variables_are_named_as_hermes_names_them() {
        assert_eq!(key_var("my-server"), "MCP_MY_SERVER_API_KEY");
        assert_eq!(key_var("-gh-"), "MCP_GH_API_KEY");
    }
}

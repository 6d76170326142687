//! The `herald` binary: command-line parsing, logging setup and wiring of the crates.

mod gateway_cmd;
mod inbox_cmd;
mod logging;

use clap::{Parser, Subcommand};
use herald_config::Home;
use std::path::PathBuf;
use std::process::ExitCode;

/// mimalloc: the request path allocates many small JSON nodes; measured faster than the
/// system allocator under load (see the README's performance section).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// herald turns events into agent work, safely and without losing any.
#[derive(Parser, Debug)]
#[command(name = "herald", version, about)]
struct Cli {
    /// herald's home folder (config.yaml, .env, subscriptions, scripts, database).
    #[arg(long, global = true, env = "HERALD_HOME", value_name = "PATH")]
    home: Option<PathBuf>,
    /// More log detail: -v debug, -vv trace (RUST_LOG overrides).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: logging::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run and manage the gateway.
    Gateway {
        #[command(subcommand)]
        command: GatewayCommand,
    },
    /// Inspect accepted events waiting in the durable inbox.
    Inbox {
        #[command(subcommand)]
        command: inbox_cmd::InboxCommand,
    },
}

#[derive(Subcommand, Debug)]
enum GatewayCommand {
    /// Start the gateway (webhook listener) in the foreground.
    Run,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.verbose, cli.log_format);
    let home = cli.home.map(Home::new).unwrap_or_else(Home::from_env);
    let result = match cli.command {
        Command::Gateway {
            command: GatewayCommand::Run,
        } => gateway_cmd::run(&home),
        Command::Inbox { command } => inbox_cmd::run(&home, command),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("herald: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
